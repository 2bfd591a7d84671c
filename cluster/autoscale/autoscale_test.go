package autoscale

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

const s = 1_000_000 // µs per second

func sig(now int64, replicas, ready int, kv float64) *Signals {
	return &Signals{NowUs: now, Replicas: replicas, Ready: ready, Min: 1, Max: 100, KVUtilization: kv}
}

func TestHPAUsageRatioAndTolerance(t *testing.T) {
	for _, tc := range []struct {
		name          string
		kv            float64
		replicas      int
		want          int
		reasonContain string
	}{
		{"within tolerance above", 0.82, 4, 4, "within tolerance"},
		{"within tolerance below", 0.68, 4, 4, "within tolerance"},
		{"scale up: ceil(4 × 0.9/0.75) = 5", 0.9, 4, 5, "vs target"},
		{"scale up: ceil(2 × 1/0.75) = 3", 1, 2, 3, "vs target"},
	} {
		h := NewHPA(DefaultHPA(MetricKVUtilization, 0.75))
		d := h.Evaluate(sig(0, tc.replicas, tc.replicas, tc.kv))
		require.Equal(t, tc.want, d.Desired, tc.name)
		require.Contains(t, d.Reason, tc.reasonContain, tc.name)
	}
	// No ready replica: no metric, no change.
	h := NewHPA(DefaultHPA(MetricKVUtilization, 0.75))
	require.Equal(t, 3, h.Evaluate(sig(0, 3, 0, 0)).Desired)
	// slo_attainment is higher-is-better: below target it scales up.
	h = NewHPA(DefaultHPA(MetricSLOAttainment, 0.99))
	d := h.Evaluate(&Signals{Replicas: 2, Ready: 2, Min: 1, Max: 10, SLOAttainment: 0.5, SLOFinished: 100})
	require.Equal(t, 4, d.Desired, "ceil(2 × 0.99/0.5)")
}

// TestHPAScaleDownStabilization: a scale-down takes the highest
// recommendation of the last 300 s (Kubernetes' rule), so a dip is
// followed only once it has lasted the window.
func TestHPAScaleDownStabilization(t *testing.T) {
	h := NewHPA(DefaultHPA(MetricKVUtilization, 0.5))
	require.Equal(t, 8, h.Evaluate(sig(0, 8, 8, 0.5)).Desired)
	for at := int64(15); at < 300; at += 15 {
		require.Equal(t, 8, h.Evaluate(sig(at*s, 8, 8, 0.1)).Desired, "t=%d: the 8 of t=0 is still in the window", at)
	}
	require.Equal(t, 2, h.Evaluate(sig(300*s, 8, 8, 0.1)).Desired, "t=300: only dips left in the window (ceil(8 × 0.2) = 2)")
}

// TestHPAScaleUpRate: up at most max(+100 %, +4 pods) per 15 s.
func TestHPAScaleUpRate(t *testing.T) {
	h := NewHPA(DefaultHPA(MetricQueueDepth, 1))
	high := func(now int64, n int) int {
		d := h.Evaluate(&Signals{NowUs: now, Replicas: n, Ready: n, Min: 1, Max: 100, QueueDepth: 50})
		h.Applied(now, n, d.Desired)
		return d.Desired
	}
	require.Equal(t, 6, high(0, 2), "2 + 4 pods beats 2 × 2")
	require.Equal(t, 6, high(5*s, 6), "the period's 4 are spent (start 2: max(4, 6) = 6)")
	require.Equal(t, 12, high(15*s, 6), "a new period: 6 × 2")
	require.Equal(t, 24, high(30*s, 12))
	require.Equal(t, 48, high(45*s, 24))
	require.Equal(t, 96, high(60*s, 48))
	require.Equal(t, 100, high(75*s, 96), "the pool's max")
}

func TestSaturation(t *testing.T) {
	p := NewSaturation(DefaultSaturation())
	base := Signals{Replicas: 4, Ready: 4, KVTokensPerReplica: 100_000, MeanInput: 1000, MeanOutput: 200,
		MaxBatchedTokens: 8192, MaxNumSeqs: 256}
	// k1 = 80,000; N = min(8192·200/1200, 256) = 256 (1365 > 256);
	// k2 = 256 × 1100 = 281,600; per replica 80,000; supply 320,000.
	s := base
	s.KVTokensUsed = 300_000 // > 0.85 × 320,000 = 272,000
	d := p.Evaluate(&s)
	require.Equal(t, 5, d.Desired, "300,000/0.85 − 320,000 = 32,941 tokens: one more replica")
	s = base
	s.KVTokensUsed = 100_000 // < 0.70 × 320,000
	require.Equal(t, 2, p.Evaluate(&s).Desired, "spare 320,000 − 142,857 = 177,143: two replicas")
	s.Ready, s.Replicas, s.KVTokensUsed = 2, 2, 1000
	require.Equal(t, 1, p.Evaluate(&s).Desired, "never below one ready replica (N−1)")
	s = base
	s.KVTokensUsed = 250_000
	require.Equal(t, 4, p.Evaluate(&s).Desired, "between the thresholds")
	// Compute-bound: a short budget makes the formula's k2 the smaller.
	s = base
	s.MaxBatchedTokens = 600 // N = 600·200/1200 = 100, k2 = 110,000 > k1: still k1
	s.KVTokensUsed = 300_000
	require.Contains(t, p.Evaluate(&s).Reason, "8e+04 per replica (k1)")
	s.MaxBatchedTokens = 300 // N = 50, k2 = 55,000 < k1
	require.Contains(t, p.Evaluate(&s).Reason, "5.5e+04 per replica (formula)")
	require.Equal(t, 7, p.Evaluate(&s).Desired, "300,000/0.85 = 352,941 tokens at 55,000 per replica: 6.4, 7")
}

// TestSaturationObservesK2: a saturated queue makes the tokens in use the
// compute-bound capacity; afterwards the average of the last 10
// observations stands for it.
func TestSaturationObservesK2(t *testing.T) {
	p := NewSaturation(DefaultSaturation())
	base := Signals{Replicas: 2, Ready: 2, KVTokensPerReplica: 400_000, MeanInput: 1000, MeanOutput: 200,
		MaxBatchedTokens: 8192, MaxNumSeqs: 256}
	// The formula's k2 (281,600) would call 60,000 tokens in use light
	// load; a queue of 8 per replica says the replicas are full at 30,000.
	s := base
	s.KVTokensUsed, s.QueueDepth, s.QueuedTokens = 60_000, 8, 16_000
	d := p.Evaluate(&s)
	require.Contains(t, d.Reason, "3e+04 per replica (observed)")
	require.Equal(t, 2+ceilInt((76_000/0.85-60_000)/30_000), d.Desired)
	// No queue now: the history (one observation, 30,000) stands.
	s = base
	s.KVTokensUsed = 50_000
	require.Contains(t, p.Evaluate(&s).Reason, "(history)")
	// Ten more observations of 40,000 push the first out of the window.
	for range SaturationHistory {
		s = base
		s.KVTokensUsed, s.QueueDepth = 80_000, 6
		p.Evaluate(&s)
	}
	s = base
	s.KVTokensUsed = 10_000
	require.Contains(t, p.Evaluate(&s).Reason, "4e+04 per replica (history)")
}

// TestThreshold: the design's case (docs/autoscaling.md), 2 replicas with the queue over its
// threshold for 60 s: scale up once it has lasted 60 s, then cool down.
func TestThreshold(t *testing.T) {
	p := NewThreshold("queue-depth", ThresholdConfig{Metric: MetricQueueDepth, Up: 5, Down: 1, Step: 1, SustainUs: 60 * s, CooldownUs: 60 * s})
	q := func(now int64, n int, depth float64) int {
		d := p.Evaluate(&Signals{NowUs: now, Replicas: n, Ready: n, QueueDepth: depth})
		p.Applied(now, n, d.Desired)
		return d.Desired
	}
	for at := int64(0); at < 60; at += 15 {
		require.Equal(t, 2, q(at*s, 2, 8), "t=%d: not yet 60 s", at)
	}
	require.Equal(t, 3, q(60*s, 2, 8), "over the threshold for 60 s: up")
	require.Equal(t, 3, q(75*s, 3, 8), "cooling down")
	require.Equal(t, 3, q(90*s, 3, 3), "inside the band: nothing")
	require.Equal(t, 3, q(120*s, 3, 0.5), "below: the clock starts")
	require.Equal(t, 2, q(180*s, 3, 0.5), "below for 60 s and the cooldown is over: down")
}

func TestKPAPanics(t *testing.T) {
	p := NewKPA(DefaultKPA())
	ev := func(now int64, ready int, inflight float64) int {
		return p.Evaluate(&Signals{NowUs: now, Replicas: ready, Ready: ready, InFlight: inflight}).Desired
	}
	require.Equal(t, 2, ev(0, 2, 70), "stable: 140 / 70")
	require.Equal(t, 2, ev(2*s, 2, 70))
	// A burst: 2 replicas at 300 each = 600 in flight; the panic window
	// (6 s) sees it at once, the stable window (60 s) barely.
	d := ev(4*s, 2, 300)
	require.True(t, p.panicking)
	require.Equal(t, 5, d, "panic: ceil(avg of 140, 140, 600 / 70) = 5")
	require.GreaterOrEqual(t, ev(6*s, 4, 10), 4, "no scale-down while panicking")
	for at := int64(8); at < 70; at += 2 {
		ev(at*s, 4, 10)
	}
	require.False(t, p.panicking, "a stable window without the condition ends the panic")
}

func TestOscillator(t *testing.T) {
	p := &Oscillator{Step: 2}
	require.Equal(t, 5, p.Evaluate(&Signals{Replicas: 3}).Desired)
	require.Equal(t, 3, p.Evaluate(&Signals{Replicas: 5}).Desired)
}

func TestParseMetric(t *testing.T) {
	for _, m := range Metrics {
		got, err := ParseMetric(string(m))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := ParseMetric("cpu")
	require.ErrorContains(t, err, `"cpu" is not a metric`)
	require.Equal(t, 1<<40, ceilInt(1e300))
	require.Equal(t, 0, ceilInt(-3))
}

// want is a test policy that recommends what it is told.
type want struct{ n *int }

func (p want) Name() string               { return "want" }
func (p want) Evaluate(*Signals) Decision { return Decision{Desired: *p.n, Reason: "told"} }
func (p want) Applied(int64, int, int)    {}

// TestActuated: a recommendation actuated by an HPA keeps within its
// tolerance, waits out its scale-down window and its rate limits.
func TestActuated(t *testing.T) {
	n := 10
	a := NewActuated(want{&n}, DefaultHPA("", 1))
	ev := func(now int64, replicas int) int {
		d := a.Evaluate(&Signals{NowUs: now, Replicas: replicas, Ready: replicas, Min: 1, Max: 100})
		a.Applied(now, replicas, d.Desired)
		return d.Desired
	}
	require.Equal(t, 10, ev(0, 10))
	n = 11
	require.Equal(t, 10, ev(15*s, 10), "11/10 is within the tolerance")
	n = 30
	require.Equal(t, 20, ev(30*s, 10), "up: max(+100 %, +4) per 15 s")
	require.Equal(t, 30, ev(45*s, 20))
	n = 2
	require.Equal(t, 30, ev(60*s, 30), "down: the highest recommendation of the last 300 s")
	require.Equal(t, 30, ev(330*s, 30), "30, recommended at 45 s, is still in the window")
	require.Equal(t, 2, ev(346*s, 30), "the window holds only 2s now")
}

// kpaPerSample is the KPA's averages with one sample per evaluation, each
// its own: the reference for evaluations at least a bucket apart.
type kpaPerSample struct {
	at []int64
	v  []float64
}

func (r *kpaPerSample) averages(c *KPAConfig, now int64, conc float64) (stable, panicAvg float64) {
	var at []int64
	var v []float64
	for k := range r.at {
		if now-r.at[k] < c.StableWindowUs {
			at, v = append(at, r.at[k]), append(v, r.v[k])
		}
	}
	r.at, r.v = append(at, now), append(v, conc)
	var np int
	for k := range r.at {
		stable += r.v[k]
		if now-r.at[k] < c.PanicWindowUs {
			panicAvg += r.v[k]
			np++
		}
	}
	return stable / float64(len(r.v)), panicAvg / float64(max(np, 1))
}

// TestKPABucketsOfOneSampleAreSamples: evaluations at least a bucket
// apart (1 s, or the panic window if shorter) give each sample a bucket
// of its own, and the averages (in the decision's reason, to the digit)
// are those of one sample per evaluation, whatever the windows.
func TestKPABucketsOfOneSampleAreSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	for range 50 {
		c := DefaultKPA()
		c.StableWindowUs = int64(1 + r.IntN(120*s))
		c.PanicWindowUs = 1 + r.Int64N(c.StableWindowUs)
		p, ref := NewKPA(c), &kpaPerSample{}
		var now int64
		for range 300 {
			now += min(int64(KPABucketUs), c.PanicWindowUs) + r.Int64N(5*s)
			ready := 1 + r.IntN(8)
			sig := Signals{NowUs: now, Replicas: ready, Ready: ready, InFlight: r.Float64() * 200, Waiting: int64(r.IntN(50))}
			got := p.Evaluate(&sig)
			stable, panicAvg := ref.averages(&c, now, sig.InFlight*float64(ready)+float64(sig.Waiting))
			require.Contains(t, got.Reason, fmt.Sprintf("concurrency %s (stable), %s (panic)", fmtf(stable), fmtf(panicAvg)))
			require.Len(t, p.buckets, len(ref.v))
		}
	}
}

// TestKPAEveryMillisecondIsBounded: at an evaluation every millisecond the
// KPA keeps one bucket a second of its stable window (61 at most with the
// defaults), where it once kept and summed 60,000 samples at every
// evaluation; a bucket's samples are averaged.
func TestKPAEveryMillisecondIsBounded(t *testing.T) {
	p := NewKPA(DefaultKPA())
	for now := int64(0); now < 90*s; now += 1000 {
		p.Evaluate(&Signals{NowUs: now, Replicas: 2, Ready: 2, InFlight: float64(now / s % 7)})
		require.LessOrEqual(t, len(p.buckets), 61)
	}
	for k := range p.buckets {
		b := &p.buckets[k]
		require.Equal(t, 1000, b.n, "a second of samples a millisecond apart")
		require.Equal(t, float64(2*(b.at/s%7)), b.mean())
	}
}
