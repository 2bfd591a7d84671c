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

// PriorityKind computes a request's priority score. The formulas are on
// PriorityPolicy.
type PriorityKind uint8

const (
	PriorityConstant    PriorityKind = iota // Base + the request's static priority
	PrioritySLOBased                        // ... + ClassScore[class] + AgeWeight × age: older requests first
	PriorityInvertedSLO                     // ... − ClassScore[class] − AgeWeight × age (pathological)
	PriorityTenant                          // ... + TenantScore[tenant] (tenant-priority, docs/simulator.md)
	PriorityDeadline                        // ... − deadline in seconds: earliest deadline first (deadline-aware, docs/simulator.md)
)

var priorityNames = []string{"constant", "slo-based", "inverted-slo", "tenant-priority", "deadline-aware"}

func (k PriorityKind) String() string {
	if int(k) < len(priorityNames) {
		return priorityNames[k]
	}
	return fmt.Sprintf("priority(%d)", k)
}

// ParsePriority reads a --priority value.
func ParsePriority(s string) (PriorityKind, error) {
	if i := slices.Index(priorityNames, s); i >= 0 {
		return PriorityKind(i), nil
	}
	return 0, fmt.Errorf("priority %q is not a policy; use one of %s", s, strings.Join(priorityNames, ", "))
}

// PriorityPolicy assigns each request a score; the priority schedulers
// order the queue by it (priority-fcfs serves the highest first). With p
// the request's static RequestSpec.Priority, c its SLOClass, t its Tenant,
// age = (now − ArrivalUs) × 10⁻⁶ seconds and w = AgeWeight, the score is:
//
//	constant         Base + p
//	slo-based        Base + p + ClassScore[c] + w·age
//	inverted-slo     Base + p − ClassScore[c] − w·age
//	tenant-priority  Base + p + TenantScore[t]   (DefaultTenantScore when t is outside TenantScore)
//	deadline-aware   Base + p − (ArrivalUs + DeadlineUs[c]) × 10⁻⁶
//
// deadline-aware is earliest deadline first: a request's deadline is its
// arrival plus its class's budget, and the earliest (in seconds, so it
// trades against p and Base at one unit a second) scores highest. A class
// outside the tables (c >= 4, which Validate refuses in a RequestSpec)
// scores as SLONone (index 0).
//
// Invariant: every score is its value at time 0 plus a shift common to
// all requests (±w × now for slo-based and inverted-slo, none for the
// others), so the order the scores induce never changes over time and the
// keyed queue places each request once (sortKey). A new kind must keep it.
//
// The zero values of the tables leave constant, slo-based and
// inverted-slo exactly as they were before the tables existed; the
// defaults of docs/simulator.md's slo-based (class scores realtime 100, interactive and none
// 50, batch 10) are a caller's to set.
type PriorityPolicy struct {
	Kind      PriorityKind
	Base      float64
	AgeWeight float64 // per second of age, >= 0
	// ClassScore is added to slo-based's score and subtracted from
	// inverted-slo's, by the request's sim.SLOClass (index 0: no class).
	ClassScore [numSLOClasses]float64
	// TenantScore[t] is tenant t's score under tenant-priority; tenants
	// beyond the slice score DefaultTenantScore.
	TenantScore        []float64
	DefaultTenantScore float64
	// DeadlineUs[c] is the time budget of a request of SLO class c under
	// deadline-aware (index 0: no class), µs after its arrival, each in
	// [0, MaxDurationUs].
	DeadlineUs [numSLOClasses]int64
}

// Validate checks the weights and tables. Errors are *physics.FieldError
// naming the field (priority_age_weight, priority_base, class_score,
// tenant_score, default_tenant_score, deadline_us).
func (p PriorityPolicy) Validate() error {
	if !(p.AgeWeight >= 0) || math.IsInf(p.AgeWeight, 0) {
		return fieldErr("priority_age_weight", "must be finite and >= 0, got %v", p.AgeWeight)
	}
	if !finite(p.Base) {
		return fieldErr("priority_base", "must be finite, got %v", p.Base)
	}
	for c, v := range p.ClassScore {
		if !finite(v) {
			return fieldErr("class_score", "%s must be finite, got %v", classLabel(SLOClass(c)), v)
		}
	}
	for t, v := range p.TenantScore {
		if !finite(v) {
			return fieldErr("tenant_score", "tenant %d must be finite, got %v", t, v)
		}
	}
	if !finite(p.DefaultTenantScore) {
		return fieldErr("default_tenant_score", "must be finite, got %v", p.DefaultTenantScore)
	}
	for c, v := range p.DeadlineUs {
		if v < 0 || v > MaxDurationUs {
			return fieldErr("deadline_us", "%s must be in [0, %d] µs, got %d", classLabel(SLOClass(c)), MaxDurationUs, v)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// classLabel names a class in an error ("no class" for SLONone).
func classLabel(c SLOClass) string {
	if c == SLONone {
		return "no class"
	}
	return c.String()
}

// Score is the priority of a request at time nowUs (µs); higher is more
// important. The formulas are on PriorityPolicy.
func (p PriorityPolicy) Score(spec *RequestSpec, nowUs int64) float64 {
	return p.score(spec, nowUs)
}

// score is Score without copying the policy (its tables are ~100 bytes):
// the engine calls it for every request it queues.
func (p *PriorityPolicy) score(spec *RequestSpec, nowUs int64) float64 {
	base := p.Base + float64(spec.Priority)
	c := spec.SLOClass
	if c >= numSLOClasses {
		c = SLONone
	}
	switch p.Kind {
	case PrioritySLOBased:
		age := float64(nowUs-spec.ArrivalUs) * 1e-6
		return base + p.ClassScore[c] + p.AgeWeight*age
	case PriorityInvertedSLO:
		age := float64(nowUs-spec.ArrivalUs) * 1e-6
		return base - p.ClassScore[c] - p.AgeWeight*age
	case PriorityTenant:
		if t := spec.Tenant; t >= 0 && int(t) < len(p.TenantScore) {
			return base + p.TenantScore[t]
		}
		return base + p.DefaultTenantScore
	case PriorityDeadline:
		// ArrivalUs <= MaxTimeUs and DeadlineUs <= MaxDurationUs: no overflow.
		return base - float64(spec.ArrivalUs+p.DeadlineUs[c])*1e-6
	}
	return base
}

// sortKey is the request's place in a keyed queue, smallest first. Every
// score is its value at time 0 plus a shift common to all requests
// (PriorityPolicy), so the order the scores induce never changes over
// time: each request is placed once, on insertion, instead of re-sorting
// every step.
func (e *Engine) sortKey(r *request) float64 {
	switch e.cfg.Policies.Scheduler {
	case PriorityFCFS:
		return -e.cfg.Policies.Priority.score(&r.spec, 0)
	case ReversePriority:
		return e.cfg.Policies.Priority.score(&r.spec, 0)
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
