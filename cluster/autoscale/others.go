package autoscale

import (
	"fmt"
	"math"
)

// SaturationConfig is llm-d's workload-variant-autoscaler saturation
// analyzer (v2): KV-token demand against the pool's token supply, with
// its defaults (DefaultSaturation): KV cache threshold 0.8 (a replica's
// usable share of its KV capacity), scale up when demand exceeds 0.85 of
// the supply (ScaleUpThreshold), down when it is under 0.70
// (ScaleDownBoundary) (internal/interfaces/saturation_scaling.go); a
// replica whose queue reaches QueueThreshold (queueLengthThreshold, 5) is
// saturated, and the tokens it holds then are its observed compute-bound
// capacity.
type SaturationConfig struct {
	KVThreshold, ScaleUp, ScaleDown float64
	QueueThreshold                  float64
}

// DefaultSaturation is WVA's saturation v2 defaults.
func DefaultSaturation() SaturationConfig {
	return SaturationConfig{KVThreshold: DefaultKVThreshold, ScaleUp: DefaultScaleUp, ScaleDown: DefaultScaleDown, QueueThreshold: DefaultQueueThreshold}
}

// SaturationHistory is how many observed compute-bound capacities the
// analyzer averages (WVA's RollingAverageWindowSize).
const SaturationHistory = 10

// Saturation is WVA's analyzer (internal/engines/analyzers/saturation_v2/
// analyzer.go). A replica supplies min(k1, k2) tokens: k1 = its KV token
// capacity × KVThreshold; k2, the compute-bound capacity, by WVA's
// priority chain: the tokens in use when the queue is saturated (mean
// waiting per replica >= QueueThreshold), recorded; else the rolling
// average of the last SaturationHistory such observations; else the
// formula N·(I + O/2), N = min(B·O/(I+O), S) (B the token budget per step,
// S max_num_seqs, I and O the mean input and output tokens); else k1.
// Demand is the KV tokens in use plus the queued prompt tokens. Above
// ScaleUp of the supply (counting replicas still starting), it adds the
// replicas that bring demand back to ScaleUp; under ScaleDown, with more
// than one ready replica, it removes the spare ones, keeping at least one
// (the N−1 check). WVA keeps one history per model, accelerator and
// output-length bucket; a pool here is one model on one accelerator, and
// its history is the pool's.
type Saturation struct {
	cfg      SaturationConfig
	observed []float64 // the last SaturationHistory observed k2, oldest first
}

// NewSaturation returns the analyzer.
func NewSaturation(cfg SaturationConfig) *Saturation { return &Saturation{cfg: cfg} }

func (p *Saturation) Name() string              { return "saturation" }
func (p *Saturation) Applied(_ int64, _, _ int) {}

// k2 is the compute-bound capacity per replica, and where it came from.
func (p *Saturation) k2(s *Signals) (float64, string) {
	if s.Ready > 0 && s.QueueDepth >= p.cfg.QueueThreshold && s.KVTokensUsed > 0 {
		k := s.KVTokensUsed / float64(s.Ready)
		if len(p.observed) == SaturationHistory {
			p.observed = append(p.observed[:0], p.observed[1:]...)
		}
		p.observed = append(p.observed, k)
		return k, "observed"
	}
	if len(p.observed) > 0 {
		var sum float64
		for _, k := range p.observed {
			sum += k
		}
		return sum / float64(len(p.observed)), "history"
	}
	io := s.MeanInput + s.MeanOutput
	if io > 0 && s.MaxBatchedTokens > 0 && s.MaxNumSeqs > 0 {
		n := min(s.MaxBatchedTokens*s.MeanOutput/io, s.MaxNumSeqs)
		if k := n * (s.MeanInput + s.MeanOutput/2); k > 0 {
			return k, "formula"
		}
	}
	return 0, "none"
}

func (p *Saturation) Evaluate(s *Signals) Decision {
	k1 := s.KVTokensPerReplica * p.cfg.KVThreshold
	per, from := p.k2(s)
	if per <= 0 || per > k1 {
		per, from = k1, "k1"
	}
	if !(per > 0) {
		return Decision{Desired: s.Replicas, Reason: "no KV capacity known"}
	}
	supply := float64(s.Ready) * per
	pending := float64(s.Replicas-s.Ready) * per
	demand := s.KVTokensUsed + s.QueuedTokens
	reason := fmt.Sprintf("demand %s tokens, supply %s (+%s starting), %s per replica (%s)", fmtf(demand), fmtf(supply), fmtf(pending), fmtf(per), from)
	if demand > p.cfg.ScaleUp*(supply+pending) {
		required := demand/p.cfg.ScaleUp - (supply + pending)
		return Decision{Desired: s.Replicas + ceilInt(required/per), Reason: reason}
	}
	if s.Ready > 1 && demand < p.cfg.ScaleDown*supply {
		spare := supply - demand/p.cfg.ScaleDown
		remove := min(int(math.Floor(spare/per)), s.Ready-1)
		return Decision{Desired: s.Replicas - max(remove, 0), Reason: reason}
	}
	return Decision{Desired: s.Replicas, Reason: reason}
}

// ThresholdConfig is a threshold policy with hysteresis and a cooldown
// (docs/autoscaling.md's threshold templates): when the metric stays above Up
// (below Down) for Sustain, add (remove) Step replicas, then wait
// Cooldown before the next change. Up > Down is the hysteresis band.
type ThresholdConfig struct {
	Metric       Metric
	Up, Down     float64
	Step         int
	SustainUs    int64
	CooldownUs   int64
	HigherBetter bool // for slo_attainment: scale up when it falls below Down
}

// Threshold is the queue-depth and target-utilization templates.
type Threshold struct {
	name             string
	cfg              ThresholdConfig
	aboveAt, belowAt int64 // when the condition began (-1: not holding)
	lastChange       int64
	changed          bool
}

// NewThreshold returns the policy under name.
func NewThreshold(name string, cfg ThresholdConfig) *Threshold {
	return &Threshold{name: name, cfg: cfg, aboveAt: -1, belowAt: -1}
}

func (p *Threshold) Name() string { return p.name }

func (p *Threshold) Applied(now int64, from, to int) {
	if from != to {
		p.lastChange, p.changed = now, true
		p.aboveAt, p.belowAt = -1, -1
	}
}

func (p *Threshold) Evaluate(s *Signals) Decision {
	c := &p.cfg
	v, ok := c.Metric.value(s)
	if !ok {
		p.aboveAt, p.belowAt = -1, -1
		return Decision{Desired: s.Replicas, Reason: fmt.Sprintf("no %s", c.Metric)}
	}
	high, low := v > c.Up, v < c.Down
	if c.HigherBetter {
		high, low = v < c.Down, v > c.Up
	}
	hold := func(cond bool, since *int64) bool {
		if !cond {
			*since = -1
			return false
		}
		if *since < 0 {
			*since = s.NowUs
		}
		return s.NowUs-*since >= c.SustainUs
	}
	up, down := hold(high, &p.aboveAt), hold(low, &p.belowAt)
	reason := fmt.Sprintf("%s %s (up above %s, down below %s)", c.Metric, fmtf(v), fmtf(c.Up), fmtf(c.Down))
	if p.changed && s.NowUs-p.lastChange < c.CooldownUs {
		return Decision{Desired: s.Replicas, Reason: reason + ", cooling down"}
	}
	switch {
	case up:
		return Decision{Desired: s.Replicas + c.Step, Reason: reason}
	case down:
		return Decision{Desired: s.Replicas - c.Step, Reason: reason}
	}
	return Decision{Desired: s.Replicas, Reason: reason}
}

// KPAConfig is Knative's pod autoscaler with its defaults (DefaultKPA,
// knative/serving config/core/configmaps/autoscaler.yaml): a target
// concurrency per replica (container-concurrency-target-default 100 ×
// target utilization 0.7), a stable window of 60 s, a panic window of 10 %
// of it, panic at 200 % of the ready capacity, a scale-up rate of 1000 and
// a scale-down rate of 2 per evaluation.
type KPAConfig struct {
	Target                 float64
	StableWindowUs         int64
	PanicWindowUs          int64
	PanicThreshold         float64
	MaxUpRate, MaxDownRate float64
}

// DefaultKPA is Knative's defaults.
func DefaultKPA() KPAConfig {
	return KPAConfig{Target: DefaultKPATarget, StableWindowUs: DefaultStableWindowS * 1e6, PanicWindowUs: DefaultPanicWindowS * 1e6,
		PanicThreshold: DefaultPanicThreshold, MaxUpRate: DefaultMaxScaleUpRate, MaxDownRate: DefaultMaxScaleDownRate}
}

// KPA averages the pool's concurrency (in-flight requests, those waiting
// at the router included) over the stable and panic windows; the desired
// size is the stable average over the target. It panics when the panic
// window's desired size reaches PanicThreshold × the ready replicas: then
// it scales on the panic average and never down, until a stable window
// passes without that condition.
//
// It samples the concurrency at each evaluation into buckets of
// KPABucketUs (or the panic window, if shorter), as Knative's collector
// records into buckets of its scrape interval (BucketSize, 1 s): a sample
// within a bucket's width of the bucket's first joins it, and a window's
// average is the mean over the buckets that began inside it of each
// bucket's mean. An evaluation then costs O(stable window / bucket), not
// O(stable window / interval) (60,000 samples at every evaluation at an
// interval of 1 ms). At intervals of at least a bucket's width each
// bucket holds one sample: one sample per evaluation, exactly.
type KPA struct {
	cfg        KPAConfig
	buckets    []kpaBucket // oldest first
	panicking  bool
	panicSince int64
	panicMax   int
}

// KPABucketUs is Knative's bucket (pkg/autoscaler/metrics/collector.go:
// BucketSize, its scrape tick interval), µs.
const KPABucketUs = 1_000_000

// kpaBucket is the samples from at on: their sum and count.
type kpaBucket struct {
	at  int64
	sum float64
	n   int
}

func (b *kpaBucket) mean() float64 { return b.sum / float64(b.n) }

// NewKPA returns the policy.
func NewKPA(cfg KPAConfig) *KPA { return &KPA{cfg: cfg} }

func (p *KPA) Name() string              { return "kpa" }
func (p *KPA) Applied(_ int64, _, _ int) {}

func (p *KPA) Evaluate(s *Signals) Decision {
	c := &p.cfg
	conc := s.InFlight*float64(s.Ready) + float64(s.Waiting)
	kept := p.buckets[:0]
	for _, b := range p.buckets {
		if s.NowUs-b.at < c.StableWindowUs {
			kept = append(kept, b)
		}
	}
	p.buckets = kept
	// The last bucket began within its width (at most the panic window,
	// at most the stable window): it is still in both windows.
	if k := len(p.buckets); k > 0 && s.NowUs-p.buckets[k-1].at < min(KPABucketUs, c.PanicWindowUs) {
		p.buckets[k-1].sum += conc
		p.buckets[k-1].n++
	} else {
		p.buckets = append(p.buckets, kpaBucket{at: s.NowUs, sum: conc, n: 1})
	}
	var stable, panicAvg float64
	var ns, np int
	for k := range p.buckets {
		b := &p.buckets[k]
		v := b.mean()
		stable += v
		ns++
		if s.NowUs-b.at < c.PanicWindowUs {
			panicAvg += v
			np++
		}
	}
	stable /= float64(ns)
	panicAvg /= float64(max(np, 1))
	wantStable, wantPanic := ceilInt(stable/c.Target), ceilInt(panicAvg/c.Target)
	ready := max(s.Ready, 1)
	over := float64(wantPanic)/float64(ready) >= c.PanicThreshold
	switch {
	case !p.panicking && over:
		p.panicking, p.panicSince, p.panicMax = true, s.NowUs, 0
	case p.panicking && over:
		p.panicSince = s.NowUs // the condition holds: the window restarts
	case p.panicking && s.NowUs-p.panicSince >= c.StableWindowUs:
		p.panicking = false
	}
	desired, mode := wantStable, "stable"
	if p.panicking {
		p.panicMax = max(p.panicMax, wantPanic, s.Replicas)
		desired, mode = p.panicMax, "panic"
	}
	desired = min(desired, ceilInt(float64(ready)*c.MaxUpRate))
	desired = max(desired, int(math.Floor(float64(ready)/c.MaxDownRate)))
	return Decision{Desired: desired, Reason: fmt.Sprintf("%s: concurrency %s (stable), %s (panic), target %s per replica", mode, fmtf(stable), fmtf(panicAvg), fmtf(c.Target))}
}

// Oscillator is pathological: it ignores every metric and alternates
// between adding and removing Step replicas at each evaluation, to test
// that scale oscillations are detected.
type Oscillator struct {
	Step int
	up   bool
}

func (p *Oscillator) Name() string              { return "oscillator" }
func (p *Oscillator) Applied(_ int64, _, _ int) {}
func (p *Oscillator) Evaluate(s *Signals) Decision {
	p.up = !p.up
	if p.up {
		return Decision{Desired: s.Replicas + p.Step, Reason: "oscillator: up"}
	}
	return Decision{Desired: s.Replicas - p.Step, Reason: "oscillator: down"}
}
