// Package autoscale holds the autoscaling policies' arithmetic: given a
// pool's signals at an evaluation, how many replicas the pool should
// have. As Kubernetes splits the HPA into replica_calculator.go (the
// arithmetic) and horizontal.go (the loop, with stabilization and rate
// limits), the cluster's loop (cluster/scaling.go) evaluates each pool
// every interval, clamps the recommendation to the pool's bounds and
// actuates it (provisioning, loading, warm-up, drain); a policy only
// recommends, and keeps the history its rules need (stabilization
// windows, cooldowns, panic mode).
//
// Policies are deterministic: a decision depends only on the signals
// given, in order (NowUs never decreases), and on what Applied told the
// policy. One policy value serves one pool of one run.
package autoscale

import (
	"fmt"
	"math"
)

// Signals is a pool's state at an evaluation. Per-replica values are means
// over the ready replicas (0 when none is ready).
type Signals struct {
	NowUs int64
	// Replicas is the pool's size as the autoscaler counts it: replicas
	// pending, loading, warming or ready (not draining); Ready those that
	// take requests. Min and Max are the pool's bounds.
	Replicas, Ready, Min, Max int
	// KVUtilization is the mean share of KV blocks in use, [0, 1];
	// QueueDepth the mean requests waiting at an instance, Running its
	// running batch, InFlight the router's requests routed to it and not
	// yet departed.
	KVUtilization, QueueDepth, Running, InFlight float64
	// Waiting is the requests held at the router for want of a ready
	// replica (scale from zero, or every replica starting).
	Waiting int64
	// SLOAttainment is the share of the requests that finished since the
	// last evaluation and met their class's targets; SLOFinished how many
	// finished (0: no sample, the attainment means nothing).
	SLOAttainment float64
	SLOFinished   int64
	// For the saturation analyzer: KV tokens in use over the ready
	// replicas; one replica's KV token capacity; the prompt tokens of the
	// requests waiting (at the instances and the router); the mean input
	// and output tokens of recent requests; the engine's token budget per
	// step and running-request cap.
	KVTokensUsed, KVTokensPerReplica, QueuedTokens float64
	MeanInput, MeanOutput                          float64
	MaxBatchedTokens, MaxNumSeqs                   float64
}

// Decision is a policy's recommendation.
type Decision struct {
	// Desired is the recommended size (Replicas when nothing should
	// change); the loop clamps it to [Min, Max].
	Desired int
	// Reason says why, with the values it read ("kv_utilization 0.91 >
	// target 0.75 × 1.1").
	Reason string
}

// Policy recommends a pool's size.
type Policy interface {
	Name() string
	// Evaluate returns the recommendation for s.
	Evaluate(s *Signals) Decision
	// Applied tells the policy that the pool's size changed from from to
	// to at nowUs (its rate limits and cooldowns count from there).
	Applied(nowUs int64, from, to int)
}

// Metric is a signal an HPA or a threshold policy scales on.
type Metric string

const (
	MetricKVUtilization Metric = "kv_utilization" // mean KV utilization, [0, 1]
	MetricQueueDepth    Metric = "queue_depth"    // waiting requests per replica
	MetricRunning       Metric = "running"        // running batch per replica
	MetricInFlight      Metric = "in_flight"      // router in-flight per replica
	MetricSLOAttainment Metric = "slo_attainment" // share of requests meeting their SLO (higher is better)
)

// Metrics lists the metrics.
var Metrics = []Metric{MetricKVUtilization, MetricQueueDepth, MetricRunning, MetricInFlight, MetricSLOAttainment}

// value is s's value of m, and whether there is one (an attainment with
// no sample has none; a per-replica mean with no ready replica neither).
func (m Metric) value(s *Signals) (float64, bool) {
	switch m {
	case MetricKVUtilization:
		return s.KVUtilization, s.Ready > 0
	case MetricQueueDepth:
		return s.QueueDepth, s.Ready > 0
	case MetricRunning:
		return s.Running, s.Ready > 0
	case MetricInFlight:
		return s.InFlight, s.Ready > 0
	case MetricSLOAttainment:
		return s.SLOAttainment, s.SLOFinished > 0
	}
	return 0, false
}

// ParseMetric reads a metric name.
func ParseMetric(s string) (Metric, error) {
	for _, m := range Metrics {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%q is not a metric; use kv_utilization, queue_depth, running, in_flight or slo_attainment", s)
}

// ceilInt is ⌈x⌉ as an int, saturated so that an absurd ratio (a metric
// of 1e300 against a target of 1e-300) cannot overflow.
func ceilInt(x float64) int {
	switch {
	case !(x < 1<<40):
		return 1 << 40
	case x < 0:
		return 0
	}
	return int(math.Ceil(x))
}

func fmtf(x float64) string { return fmt.Sprintf("%.3g", x) }
