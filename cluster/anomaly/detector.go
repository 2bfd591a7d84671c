package anomaly

import (
	"fmt"

	"github.com/blis-sim/blis/sim"
)

// Level is a request's importance for priority inversions: its SLO
// class ranked as the slo-based priority's class scores rank it (realtime 100
// > interactive 50 = no class 50 > batch 10). It is the reference the
// scheduler is judged against, whatever priority policy the run uses:
// an inverted-slo policy is then seen to invert it.
func Level(c sim.SLOClass) int {
	switch c {
	case sim.SLORealtime:
		return 2
	case sim.SLOBatch:
		return 0
	}
	return 1
}

const numLevels = 3

// Detector counts one instance's priority inversions, preemption storms
// and KV thrashing from its engine's events (a sim.Observer). It must see
// every event of its engine from the start.
//
// Priority inversions take O(1) amortized work per request and no
// per-request state beyond a line entry: the requests queued and not yet
// scheduled are kept by level in queue order, and one scheduled (or gone)
// other than from the front of its line is remembered in a set until its
// entry reaches the front, which under the baselines' queue orders (FCFS,
// priority-fcfs) is rare.
type Detector struct {
	inst  string
	index int
	th    Thresholds
	rep   *Report

	// lines are the requests queued and not yet scheduled once, by level,
	// in queue order (enqueue time); gone are the requests no longer
	// waiting whose entries are not yet dropped (a request aborted while
	// running may be there too, without an entry: compaction drops it).
	lines [numLevels]line
	gone  map[int64]struct{}

	// The last StormPreemptions preemptions' times and requests (a ring),
	// how many there were, and whether a storm is on.
	times   []int64
	victims []int64
	np      int64
	storm   bool
}

type entry struct {
	enq, id int64
	class   sim.SLOClass
}

type line struct {
	q    []entry
	head int
}

// NewDetector returns the detector of instance index, named inst.
func NewDetector(inst string, index int, th Thresholds) *Detector {
	k := max(1, th.StormPreemptions)
	return &Detector{inst: inst, index: index, th: th, rep: NewReport(th), gone: map[int64]struct{}{},
		times: make([]int64, k), victims: make([]int64, k)}
}

// Report is the detector's counts so far (its priority inversions,
// preemption storms and KV thrashing).
func (d *Detector) Report() *Report { return d.rep }

func (d *Detector) Journey(ev *sim.JourneyEvent) {
	switch ev.Kind {
	case sim.JourneyQueued:
		l := &d.lines[Level(ev.Class)]
		l.q = append(l.q, entry{enq: ev.AtUs, id: ev.Req, class: ev.Class})
	case sim.JourneyScheduled:
		if !ev.Resume {
			d.scheduled(ev)
		}
	case sim.JourneyPreempted:
		d.preempted(ev.Req, ev.AtUs)
	}
}

func (d *Detector) Arrived(*sim.RequestSpec)                  {}
func (d *Detector) Departed(int64, int64)                     {}
func (d *Detector) Dropped(int64, int64, string)              {} // refused before it queued
func (d *Detector) Step(*sim.StepSummary, sim.SnapshotSource) {}

// Aborted: the request left (timed out, killed or redirected), perhaps
// while waiting.
func (d *Detector) Aborted(req int64, _ int64) {
	d.gone[req] = struct{}{}
	d.compact()
}

func (d *Detector) KV(ev *sim.KVEvent) {
	if ev.Kind != sim.KVLoad || ev.Thrashing == 0 {
		return
	}
	d.rep.KVThrashing.Add(ev.Thrashing, Example{AtUs: ev.AtUs, Instance: d.inst, Requests: []int64{ev.Req},
		Detail: fmt.Sprintf("%d of the %d blocks reloaded for request %d had been offloaded less than %d us before", ev.Thrashing, ev.Blocks, ev.Req, d.th.KVThrashWindowUs)}, d.index)
}

// front is the line's oldest request still waiting, if any; entries of
// requests gone before it are dropped.
func (d *Detector) front(l *line) (entry, bool) {
	for l.head < len(l.q) {
		e := l.q[l.head]
		if len(d.gone) == 0 {
			return e, true
		}
		if _, gone := d.gone[e.id]; !gone {
			return e, true
		}
		delete(d.gone, e.id)
		l.head++
	}
	l.q, l.head = l.q[:0], 0
	return entry{}, false
}

// remove takes request id, which was waiting in l, out of it.
func (d *Detector) remove(l *line, id int64) {
	if e, ok := d.front(l); ok && e.id == id {
		l.head++
		if l.head == len(l.q) {
			l.q, l.head = l.q[:0], 0
		} else if l.head > 1024 && 2*l.head > len(l.q) {
			l.q, l.head = l.q[:copy(l.q, l.q[l.head:])], 0
		}
		return
	}
	d.gone[id] = struct{}{}
	d.compact()
}

// compact drops the gone requests' entries and forgets the gone requests
// that have none, once they outnumber the waiting ones: O(1) amortized.
func (d *Detector) compact() {
	live := 0
	for k := range d.lines {
		live += len(d.lines[k].q) - d.lines[k].head
	}
	if len(d.gone) <= 64 || len(d.gone) <= live {
		return
	}
	for k := range d.lines {
		l := &d.lines[k]
		q := l.q[:0]
		for _, e := range l.q[l.head:] {
			if _, gone := d.gone[e.id]; !gone {
				q = append(q, e)
			}
		}
		l.q, l.head = q, 0
	}
	clear(d.gone)
}

// scheduled is a request's first scheduling: an inversion when a request
// of a higher level had been queued before it and still waits.
func (d *Detector) scheduled(ev *sim.JourneyEvent) {
	lv := Level(ev.Class)
	d.remove(&d.lines[lv], ev.Req)
	var by entry
	found := false
	for h := lv + 1; h < numLevels; h++ {
		if e, ok := d.front(&d.lines[h]); ok && e.enq < ev.EnqueuedUs && (!found || e.enq < by.enq) {
			by, found = e, true
		}
	}
	if !found {
		return
	}
	d.rep.PriorityInversion.Add(1, Example{AtUs: ev.AtUs, Instance: d.inst, Requests: []int64{ev.Req, by.id},
		Detail: fmt.Sprintf("request %d (%s) was scheduled while request %d (%s), queued %.1f ms earlier, still waited",
			ev.Req, className(ev.Class), by.id, className(by.class), float64(ev.EnqueuedUs-by.enq)/1e3)}, d.index)
}

func className(c sim.SLOClass) string {
	if c == sim.SLONone {
		return "no class"
	}
	return c.String()
}

// preempted records a preemption; a storm begins when the last
// StormPreemptions preemptions fall within less than StormWindowUs, and
// lasts while each new preemption keeps it so.
func (d *Detector) preempted(req, at int64) {
	k := int64(len(d.times))
	i := d.np % k
	d.times[i], d.victims[i] = at, req
	d.np++
	in := d.np >= k && at-d.times[d.np%k] < d.th.StormWindowUs
	if in && !d.storm {
		first := d.times[d.np%k]
		reqs := make([]int64, 0, min(k, 5))
		for j := int64(0); j < k && len(reqs) < cap(reqs); j++ {
			reqs = append(reqs, d.victims[(d.np+j)%k])
		}
		d.rep.PreemptionStorm.Add(1, Example{AtUs: first, Instance: d.inst, Requests: reqs,
			Detail: fmt.Sprintf("%d preemptions in %.1f ms (the first victims listed)", k, float64(at-first)/1e3)}, d.index)
	}
	d.storm = in
}
