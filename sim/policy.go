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
// the queue is kept sorted on insertion instead of re-sorted every step.
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

// queue is the waiting queue: a slice with a movable head. In keyed mode it
// is sorted by (sortKey, arrival, id).
type queue struct {
	items []int32
	head  int
	keyed bool
}

func (q *queue) len() int       { return len(q.items) - q.head }
func (q *queue) front() int32   { return q.items[q.head] }
func (q *queue) popFront()      { q.head++; q.compact() }
func (q *queue) at(i int) int32 { return q.items[q.head+i] }

// remove takes request i out of the queue wherever it is, keeping the
// others' order; it reports whether i was there.
func (q *queue) remove(i int32) bool {
	k := slices.Index(q.items[q.head:], i)
	if k < 0 {
		return false
	}
	q.items = slices.Delete(q.items, q.head+k, q.head+k+1)
	return true
}

func (q *queue) compact() {
	if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		q.items = q.items[:n]
		q.head = 0
	}
}

func (q *queue) pushFront(i int32) {
	if q.head == 0 {
		q.items = slices.Insert(q.items, 0, i)
		return
	}
	q.head--
	q.items[q.head] = i
}

func (q *queue) push(reqs []request, i int32) {
	if !q.keyed {
		q.items = append(q.items, i)
		return
	}
	r := &reqs[i]
	live := q.items[q.head:]
	pos, _ := slices.BinarySearchFunc(live, i, func(e, _ int32) int {
		o := &reqs[e]
		switch {
		case o.sortKey != r.sortKey:
			if o.sortKey < r.sortKey {
				return -1
			}
			return 1
		case o.spec.ArrivalUs != r.spec.ArrivalUs:
			if o.spec.ArrivalUs < r.spec.ArrivalUs {
				return -1
			}
			return 1
		case o.spec.ID < r.spec.ID:
			return -1
		}
		return 1
	})
	q.items = slices.Insert(q.items, q.head+pos, i)
}

// ensureHashes computes the chained hashes of the request's first n blocks.
func (e *Engine) ensureHashes(r *request, n int64) {
	if int64(len(r.hashes)) >= n {
		return
	}
	if cap(r.hashes) == 0 {
		r.hashes = make([]uint64, 0, e.blockCap(r))
	}
	r.hashes = AppendBlockHashes(r.hashes, &r.spec, e.blockSize, n)
}
