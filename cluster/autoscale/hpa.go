package autoscale

import "fmt"

// HPAConfig is Kubernetes' HorizontalPodAutoscaler (autoscaling/v2) on one
// metric, with its defaults (DefaultHPA): sync period 15 s, tolerance
// 0.1 (--horizontal-pod-autoscaler-tolerance), scale-up stabilization 0 s,
// scale-down stabilization 300 s, scale-up rate max(+100 %, +4 pods) per
// 15 s, scale-down rate 100 % per 15 s (the API's default
// HorizontalPodAutoscalerBehavior, kubernetes.io "Horizontal Pod
// Autoscaling": Default Behavior).
type HPAConfig struct {
	Metric Metric
	// Target is the metric's target value per replica (for
	// slo_attainment, the attainment to keep).
	Target    float64
	Tolerance float64
	// UpWindowUs and DownWindowUs are the stabilization windows: a
	// scale-up takes the lowest recommendation of the up window, a
	// scale-down the highest of the down window.
	UpWindowUs, DownWindowUs int64
	// Rate policies: in any UpPeriodUs, add at most max(UpPercent % of the
	// replicas at the period's start, UpPods); in any DownPeriodUs remove
	// at most DownPercent %.
	UpPercent, DownPercent float64
	UpPods                 int
	UpPeriodUs             int64
	DownPeriodUs           int64
}

// DefaultHPA is HPA on metric toward target with Kubernetes' defaults.
func DefaultHPA(metric Metric, target float64) HPAConfig {
	return HPAConfig{Metric: metric, Target: target, Tolerance: DefaultHPATolerance, UpWindowUs: DefaultHPAUpWindowS * 1e6, DownWindowUs: DefaultHPADownWindowS * 1e6,
		UpPercent: DefaultHPAUpPercent, UpPods: DefaultHPAUpPods, UpPeriodUs: DefaultHPAUpPeriodS * 1e6, DownPercent: DefaultHPADownPercent, DownPeriodUs: DefaultHPADownPeriodS * 1e6}
}

// HPA is the HPA's replica calculation, stabilization and rate limits
// (pkg/controller/podautoscaler: replica_calculator.go's usage ratio and
// tolerance; horizontal.go's stabilizeRecommendationWithBehaviors and
// convertDesiredReplicasWithBehaviorRate).
type HPA struct {
	cfg HPAConfig
	// upMin and downMax are the recommendations that can still be the
	// lowest of the up window and the highest of the down window, oldest
	// first: monotonic queues, so that an evaluation costs O(1)
	// (amortized) however many recommendations a window holds (300 s of
	// a 1 ms interval is 300,000; scanning them all made a run quadratic).
	upMin, downMax []rec
	ups            []rec // scale-up events within the up period (n = replicas added)
	dns            []rec // scale-down events within the down period (n = replicas removed)
	// started: the first evaluation recorded the pool's size
	// (recordInitialRecommendation).
	started bool
}

type rec struct {
	at int64
	n  int
}

// NewHPA returns the policy; the configuration's values must be valid
// (the policy bundle checks them).
func NewHPA(cfg HPAConfig) *HPA { return &HPA{cfg: cfg} }

func (h *HPA) Name() string { return "hpa" }

// Evaluate is one sync of the HPA controller.
func (h *HPA) Evaluate(s *Signals) Decision {
	c := &h.cfg
	desired, reason := s.Replicas, "no metric (no ready replica)"
	if v, ok := c.Metric.value(s); ok {
		ratio := v / c.Target
		if c.Metric == MetricSLOAttainment {
			// Higher is better: fewer replicas are needed above target.
			ratio = c.Target / max(v, 1e-9)
		}
		switch {
		case ratio >= 1-c.Tolerance && ratio <= 1+c.Tolerance:
			reason = fmt.Sprintf("%s %s within tolerance of target %s", c.Metric, fmtf(v), fmtf(c.Target))
		default:
			desired = ceilInt(ratio * float64(s.Ready))
			reason = fmt.Sprintf("%s %s vs target %s", c.Metric, fmtf(v), fmtf(c.Target))
		}
	}
	desired = h.stabilize(s.NowUs, s.Replicas, desired)
	desired = h.rateLimit(s.NowUs, s.Replicas, desired, s.Min, s.Max)
	return Decision{Desired: desired, Reason: reason}
}

// stabilize is stabilizeRecommendationWithBehaviors: the lowest
// recommendation of the up window and the highest of the down window
// (the recordings within each, this one included, as Kubernetes keeps
// them) bound the result, which is the current size brought within them:
// a recommendation never moves the size the other way, however old ones
// lie. The recommendation is then recorded. The first evaluation records
// the current size first (recordInitialRecommendation, when the
// controller first sees the HPA), so that the pool keeps its size for a
// down window before it scales down.
func (h *HPA) stabilize(now int64, current, desired int) int {
	c := &h.cfg
	if !h.started {
		h.started = true
		h.record(now, current)
	}
	h.upMin = expire(h.upMin, now, c.UpWindowUs)
	h.downMax = expire(h.downMax, now, c.DownWindowUs)
	up, down := desired, desired
	if len(h.upMin) > 0 {
		up = min(up, h.upMin[0].n)
	}
	if len(h.downMax) > 0 {
		down = max(down, h.downMax[0].n)
	}
	out := max(current, up)
	out = min(out, down)
	h.record(now, desired)
	return out
}

// record adds recommendation n at now to the windows' queues.
func (h *HPA) record(now int64, n int) {
	// A recording no lower than this one can no longer be the lowest of
	// any later up window, nor one no higher the highest of a down
	// window.
	for len(h.upMin) > 0 && h.upMin[len(h.upMin)-1].n >= n {
		h.upMin = h.upMin[:len(h.upMin)-1]
	}
	for len(h.downMax) > 0 && h.downMax[len(h.downMax)-1].n <= n {
		h.downMax = h.downMax[:len(h.downMax)-1]
	}
	h.upMin = append(h.upMin, rec{at: now, n: n})
	h.downMax = append(h.downMax, rec{at: now, n: n})
}

// expire drops the recordings of q at least window old at now.
func expire(q []rec, now, window int64) []rec {
	i := 0
	for i < len(q) && now-q[i].at >= window {
		i++
	}
	if i == len(q) {
		return q[:0]
	}
	return q[i:]
}

// rateLimit is convertDesiredReplicasWithBehaviorRate with the pool's
// bounds.
func (h *HPA) rateLimit(now int64, current, desired, lo, hi int) int {
	c := &h.cfg
	switch {
	case desired > current:
		added := sumSince(h.ups, now-c.UpPeriodUs)
		start := float64(current - added)
		limit := max(ceilInt(start*(1+c.UpPercent/100)), int(start)+c.UpPods)
		limit = max(limit, current)
		return min(desired, limit, hi)
	case desired < current:
		removed := sumSince(h.dns, now-c.DownPeriodUs)
		start := float64(current + removed)
		limit := int(start * (1 - c.DownPercent/100))
		limit = min(limit, current)
		return max(desired, limit, lo)
	}
	return desired
}

func sumSince(evs []rec, cutoff int64) int {
	n := 0
	for _, e := range evs {
		if e.at > cutoff {
			n += e.n
		}
	}
	return n
}

// Applied records a scale event for the rate limits (storeScaleEvent),
// dropping events older than the longest period.
func (h *HPA) Applied(now int64, from, to int) {
	c := &h.cfg
	prune := func(evs []rec, period int64) []rec {
		kept := evs[:0]
		for _, e := range evs {
			if e.at > now-period {
				kept = append(kept, e)
			}
		}
		return kept
	}
	h.ups, h.dns = prune(h.ups, c.UpPeriodUs), prune(h.dns, c.DownPeriodUs)
	switch {
	case to > from:
		h.ups = append(h.ups, rec{at: now, n: to - from})
	case to < from:
		h.dns = append(h.dns, rec{at: now, n: from - to})
	}
}

// Actuated is a policy whose recommendation reaches the pool through a
// HorizontalPodAutoscaler, as llm-d's workload-variant-autoscaler's does:
// WVA publishes its desired replicas as an external metric
// (wva_desired_replicas) that an HPA (or KEDA's) scales on at one replica
// per unit. The HPA then applies its tolerance, stabilization windows and
// rate limits to the recommendation.
type Actuated struct {
	Inner Policy
	hpa   *HPA
}

// NewActuated puts inner behind an HPA with cfg's tolerance and behavior
// (cfg's metric and target are unused).
func NewActuated(inner Policy, cfg HPAConfig) *Actuated {
	return &Actuated{Inner: inner, hpa: NewHPA(cfg)}
}

func (a *Actuated) Name() string { return a.Inner.Name() }

// Evaluate is the inner policy's recommendation as the HPA actuates it.
func (a *Actuated) Evaluate(s *Signals) Decision {
	d := a.Inner.Evaluate(s)
	c := &a.hpa.cfg
	want := d.Desired
	if s.Replicas > 0 {
		if r := float64(want) / float64(s.Replicas); r >= 1-c.Tolerance && r <= 1+c.Tolerance {
			want = s.Replicas
		}
	}
	got := a.hpa.stabilize(s.NowUs, s.Replicas, want)
	got = a.hpa.rateLimit(s.NowUs, s.Replicas, got, s.Min, s.Max)
	if got != d.Desired {
		d.Reason += fmt.Sprintf("; wants %d, the HPA allows %d", d.Desired, got)
	}
	d.Desired = got
	return d
}

func (a *Actuated) Applied(now int64, from, to int) {
	a.Inner.Applied(now, from, to)
	a.hpa.Applied(now, from, to)
}
