package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// SchedulerPolicy orders the waiting queue.
type SchedulerPolicy uint8

const (
	FCFS            SchedulerPolicy = iota // enqueue order; preempted requests return to the front
	PriorityFCFS                           // priority descending, then arrival
	SJF                                    // prompt tokens ascending, then arrival
	ReversePriority                        // priority ascending (pathological: starves important requests)
)

var schedulerNames = []string{"fcfs", "priority-fcfs", "sjf", "reverse-priority"}

func (p SchedulerPolicy) String() string { return schedulerNames[p] }

// ParseScheduler reads a --scheduler value.
func ParseScheduler(s string) (SchedulerPolicy, error) {
	if i := slices.Index(schedulerNames, s); i >= 0 {
		return SchedulerPolicy(i), nil
	}
	return 0, fmt.Errorf("scheduler %q is not a policy; use one of %s", s, strings.Join(schedulerNames, ", "))
}

// PriorityKind computes a request's priority score.
type PriorityKind uint8

const (
	PriorityConstant    PriorityKind = iota // Base + the request's static priority
	PrioritySLOBased                        // ... + AgeWeight × age: older requests first
	PriorityInvertedSLO                     // ... − AgeWeight × age (pathological)
)

var priorityNames = []string{"constant", "slo-based", "inverted-slo"}

func (k PriorityKind) String() string { return priorityNames[k] }

// ParsePriority reads a --priority value.
func ParsePriority(s string) (PriorityKind, error) {
	if i := slices.Index(priorityNames, s); i >= 0 {
		return PriorityKind(i), nil
	}
	return 0, fmt.Errorf("priority %q is not a policy; use one of %s", s, strings.Join(priorityNames, ", "))
}

// PriorityPolicy assigns each request a score; the priority schedulers
// order the queue by it.
type PriorityPolicy struct {
	Kind      PriorityKind
	Base      float64
	AgeWeight float64 // per second of age
}

// Validate checks the weights.
func (p PriorityPolicy) Validate() error {
	if !(p.AgeWeight >= 0) || math.IsInf(p.AgeWeight, 0) {
		return fieldErr("priority_age_weight", "must be finite and >= 0, got %v", p.AgeWeight)
	}
	if math.IsNaN(p.Base) || math.IsInf(p.Base, 0) {
		return fieldErr("priority_base", "must be finite, got %v", p.Base)
	}
	return nil
}

// Score is the priority of a request at time now.
func (p PriorityPolicy) Score(spec *RequestSpec, nowUs int64) float64 {
	base := p.Base + float64(spec.Priority)
	age := float64(nowUs-spec.ArrivalUs) * 1e-6
	switch p.Kind {
	case PrioritySLOBased:
		return base + p.AgeWeight*age
	case PriorityInvertedSLO:
		return base - p.AgeWeight*age
	}
	return base
}

// sortKey is the request's place in a keyed queue, smallest first. Every
// score above is its value at time 0 plus ±AgeWeight × now, a shift common
// to all requests, so the order the scores induce never changes over time:
// each request is placed once, on insertion, instead of re-sorting every step.
func (e *Engine) sortKey(r *request) float64 {
	switch e.cfg.Policies.Scheduler {
	case PriorityFCFS:
		return -e.cfg.Policies.Priority.Score(&r.spec, 0)
	case ReversePriority:
		return e.cfg.Policies.Priority.Score(&r.spec, 0)
	case SJF:
		return float64(r.spec.PromptTokens)
	}
	return 0
}

// ensureHashes computes the chained hashes of the request's first n blocks.
func (e *Engine) ensureHashes(r *request, n int64) {
	if int64(len(r.hashes)) >= n {
		return
	}
	if n > int64(cap(r.hashes)) {
		r.hashes = e.uint64s.grow(r.hashes, max(n, e.blockCap(r))-int64(len(r.hashes)))
	}
	r.hashes = AppendBlockHashes(r.hashes, &r.spec, e.blockSize, n)
}
