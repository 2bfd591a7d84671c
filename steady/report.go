package steady

import (
	"encoding/json"
	"math"
)

// Report is a run's output analysis: its stability verdict, and its
// steady-state estimates with their intervals (nil when the workload is
// not stationary by design, or no warm-up end was found).
type Report struct {
	Stability   *Stability
	SteadyState *SteadyState
	// WarmupEndUs is when the warm-up ended, on the run's clock.
	WarmupEndUs int64
}

// The verdicts.
const (
	Stable        = "stable"
	Unstable      = "unstable"
	Indeterminate = "indeterminate"
)

// The causes of an unstable verdict.
const (
	CauseCapacity  = "capacity"
	CauseImbalance = "imbalance"
)

// Stability is the verdict on the number of requests in the system over
// the part of the run analyzed (after the warm-up, up to the last
// arrival or the stopping rule's checkpoint), with the evidence.
type Stability struct {
	Verdict string `json:"verdict"`
	// Cause of an unstable verdict: capacity (no instance keeps up) or
	// imbalance (some backlogs grow while other instances keep up).
	Cause string `json:"cause,omitempty"`
	// Why says it in a sentence.
	Why string `json:"why"`
	// Growth is the number in the system's growth per second with its
	// 95 % interval; MeanInSystem its mean.
	Growth       Interval `json:"backlog_growth_per_s"`
	MeanInSystem float64  `json:"mean_in_system"`
	// OfferedPerS and ServedPerS are the arrivals and departures per
	// second over the analyzed part.
	OfferedPerS float64 `json:"offered_per_s"`
	ServedPerS  float64 `json:"served_per_s"`
	// FromS and ToS bound the analyzed part, seconds from the first
	// arrival.
	FromS float64 `json:"analyzed_from_s"`
	ToS   float64 `json:"analyzed_to_s"`
	// NeededS estimates, for an indeterminate verdict, the run (seconds
	// from the first arrival) that would tell, and NeededRequests the
	// arrivals in it.
	NeededS        float64 `json:"needed_s,omitempty"`
	NeededRequests int64   `json:"needed_requests,omitempty"`
	// Instances are the instances' own verdicts, when the run is
	// unstable and there are several.
	Instances []InstanceVerdict `json:"instances,omitempty"`
	// NotStationary says why the workload is not stationary by design
	// (then there are no steady-state estimates).
	NotStationary string `json:"not_stationary,omitempty"`
	// Stop is how a run sized by precision ended.
	Stop *Stop `json:"stop,omitempty"`
}

// InstanceVerdict is one instance's stability.
type InstanceVerdict struct {
	ID           string   `json:"id"`
	Verdict      string   `json:"verdict"`
	Growth       Interval `json:"backlog_growth_per_s"`
	MeanInSystem float64  `json:"mean_in_system"`
	// KeepsUp: the instance is stable, idle, or its backlog's growth
	// lies wholly below the threshold (its verdict may still be
	// indeterminate).
	KeepsUp bool `json:"keeps_up"`
}

// Stop is where a run sized by its precision stopped, and why.
type Stop struct {
	// Reason is precision (the metric's interval is within Rel of its
	// estimate and the run is stable), stable (no metric: the verdict
	// alone), unstable, max_requests, max_sim_time, or workload_ended.
	Reason   string  `json:"reason"`
	Metric   string  `json:"metric,omitempty"`
	Rel      float64 `json:"precision"`
	Achieved float64 `json:"achieved,omitempty"`
	// AtS is the stop, seconds from the first arrival; Arrivals the
	// requests arrived then; Checks the checkpoints looked at.
	AtS      float64 `json:"at_s"`
	Arrivals int64   `json:"arrivals"`
	Checks   int     `json:"checks"`
}

// Stop reasons.
const (
	StopPrecision     = "precision"
	StopStable        = "stable"
	StopUnstable      = "unstable"
	StopMaxRequests   = "max_requests"
	StopMaxSimTime    = "max_sim_time"
	StopWorkloadEnded = "workload_ended"
)

// SteadyState are the estimates after the warm-up, each with its 95 %
// interval (batch means; percentiles by sectioning).
type SteadyState struct {
	Warmup       Warmup        `json:"warmup"`
	TTFT         Dist          `json:"ttft_ms"`
	E2E          Dist          `json:"e2e_ms"`
	ITL          *Interval     `json:"itl_mean_ms,omitempty"`
	Sched        *Interval     `json:"scheduling_delay_mean_ms,omitempty"`
	RequestsPerS Interval      `json:"requests_per_s"`
	TokensPerS   Interval      `json:"output_tokens_per_s"`
	SLO          *Interval     `json:"slo_attainment,omitempty"`
	PerClass     []ClassSteady `json:"per_slo_class,omitempty"`
	// Requests is the completed requests the estimates rest on.
	Requests int64 `json:"requests"`
}

// Warmup is what was removed before the estimates.
type Warmup struct {
	// Rule is MSER-5 (found by the rule; MSER-m once a run's cells hold m
	// requests), none, or given (a duration).
	Rule     string  `json:"rule"`
	RemovedS float64 `json:"removed_s"`
	// RemovedRequests arrived during the warm-up.
	RemovedRequests int64 `json:"removed_requests"`
}

// Dist is a latency's mean and percentiles with intervals, ms.
type Dist struct {
	Mean Interval  `json:"mean"`
	P50  *Interval `json:"p50,omitempty"`
	P90  *Interval `json:"p90,omitempty"`
	P99  *Interval `json:"p99,omitempty"`
}

// ClassSteady is one SLO class's attainment after the warm-up.
type ClassSteady struct {
	Class      string   `json:"slo_class"`
	Attainment Interval `json:"attainment"`
}

// MarshalJSON writes the estimate alone when there is no interval.
func (iv Interval) MarshalJSON() ([]byte, error) {
	type full Interval
	if !iv.Has() {
		return json.Marshal(struct {
			Estimate float64 `json:"estimate"`
		}{finite(iv.Estimate)})
	}
	f := full(iv)
	f.Estimate, f.Low, f.High = finite(f.Estimate), finite(f.Low), finite(f.High)
	return json.Marshal(f)
}

// finite keeps a JSON number: NaN and infinities (which no estimate
// should be) become 0.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// Metric is the estimate named by a metric column of blis sweep's table
// (MetricNames), with its interval.
func (r *Report) Metric(name string) (Interval, bool) {
	if r == nil || r.SteadyState == nil {
		return Interval{}, false
	}
	s := r.SteadyState
	ptr := func(p *Interval) (Interval, bool) {
		if p == nil {
			return Interval{}, false
		}
		return *p, true
	}
	switch name {
	case "ttft_mean_ms":
		return s.TTFT.Mean, s.Requests > 0
	case "ttft_p50_ms":
		return ptr(s.TTFT.P50)
	case "ttft_p90_ms":
		return ptr(s.TTFT.P90)
	case "ttft_p99_ms":
		return ptr(s.TTFT.P99)
	case "e2e_mean_ms":
		return s.E2E.Mean, s.Requests > 0
	case "e2e_p50_ms":
		return ptr(s.E2E.P50)
	case "e2e_p90_ms":
		return ptr(s.E2E.P90)
	case "e2e_p99_ms":
		return ptr(s.E2E.P99)
	case "itl_mean_ms":
		return ptr(s.ITL)
	case "scheduling_delay_mean_ms":
		return ptr(s.Sched)
	case "requests_per_s":
		return s.RequestsPerS, true
	case "output_tokens_per_s":
		return s.TokensPerS, true
	case "slo_attainment":
		return ptr(s.SLO)
	}
	for _, c := range s.PerClass {
		if name == c.Class+"_slo_attainment" {
			return c.Attainment, true
		}
	}
	return Interval{}, false
}

// MetricNames are the metrics a run can estimate with an interval, named
// as blis sweep's columns: the one list the sweep's interval columns, the
// stopping rule's metric and blis capacity's targets are checked against.
var MetricNames = []string{
	"requests_per_s", "output_tokens_per_s",
	"ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms",
	"itl_mean_ms",
	"e2e_mean_ms", "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms",
	"scheduling_delay_mean_ms",
	"slo_attainment", "realtime_slo_attainment", "interactive_slo_attainment", "batch_slo_attainment",
}

// ClassNames are the SLO classes by index (1..3), as the cluster names
// them.
var ClassNames = [4]string{"", "realtime", "interactive", "batch"}
