package sim

import "fmt"

// The invariants of seed 004 (docs/simulator.md states each):
//
//	INV-1 request conservation: offered = not yet arrived + in API overhead
//	      + queued + running + completed + dropped, at the end of every run.
//	INV-2 lifecycle: a request moves only along pending → arriving →
//	      queued ⇄ running → finished (or arriving → dropped).
//	INV-3 clock monotonicity: events are processed in non-decreasing time
//	      and every step takes at least 1 µs.
//	INV-4 KV conservation: allocated + free = total blocks; exhaustively,
//	      every block's reference count equals the block tables holding it
//	      and the free list holds exactly the unreferenced blocks.
//	INV-5 causality: arrival ≤ enqueue ≤ first schedule ≤ first token ≤
//	      finish ≤ departure for every finished request.
//	INV-6 determinism: the same inputs and seed give byte-identical output
//	      (checked by tests that run twice).
//	INV-7 signal freshness: what the engine reports about a step (queue
//	      depths, KV usage) is its state at that step, not a stale copy.
//	INV-8 work conservation: after every step, if a request waits or runs,
//	      a step event is pending.
//
// The cheap checks run on every step; Config.Exhaustive adds the full ones.

// InvariantError reports a violated invariant: a bug in the simulator.
type InvariantError struct {
	Invariant string
	AtUs      int64
	Step      int64
	Detail    string
}

func (e *InvariantError) Error() string {
	return fmt.Sprintf("invariant %s violated at t=%d µs (step %d): %s", e.Invariant, e.AtUs, e.Step, e.Detail)
}

func (s *Sim) fail(inv, format string, args ...any) {
	panic(&InvariantError{Invariant: inv, AtUs: s.now, Step: s.stepID, Detail: fmt.Sprintf(format, args...)})
}

func (s *Sim) checkEnd() {
	c := s.counts()
	notArrived := c.Offered - c.Injected
	if got := notArrived + c.StillArrival + c.StillQueued + c.StillRunning + c.Completed + c.Dropped; got != c.Offered {
		s.fail("INV-1", "offered %d ≠ not arrived %d + in API %d + queued %d + running %d + completed %d + dropped %d",
			c.Offered, notArrived, c.StillArrival, c.StillQueued, c.StillRunning, c.Completed, c.Dropped)
	}
	if int64(s.waiting.len()) != c.StillQueued || int64(len(s.running)) != c.StillRunning {
		s.fail("INV-1", "queue holds %d and running %d, states say %d and %d", s.waiting.len(), len(s.running), c.StillQueued, c.StillRunning)
	}
	if s.cfg.HorizonUs == 0 && c.Completed+c.Dropped != c.Offered {
		s.fail("INV-1", "run ended with %d of %d requests neither completed nor dropped", c.Offered-c.Completed-c.Dropped, c.Offered)
	}
	s.checkKV(true)
}

func (s *Sim) checkCausality(r *request) {
	if !(r.arrival <= r.enqueued && r.enqueued <= r.firstScheduled && r.firstScheduled <= r.firstToken &&
		r.firstToken <= r.finished && r.finished <= r.departed) {
		s.fail("INV-5", "request %d: arrival %d, enqueue %d, schedule %d, first token %d, finish %d, departure %d",
			r.spec.ID, r.arrival, r.enqueued, r.firstScheduled, r.firstToken, r.finished, r.departed)
	}
}

func (s *Sim) checkWorkConserving() {
	if (len(s.running) > 0 || s.waiting.len() > 0) && !s.stepPending {
		s.fail("INV-8", "%d waiting and %d running but no step is scheduled", s.waiting.len(), len(s.running))
	}
}

// checkSignals compares the step summary with the live state it reports.
func (s *Sim) checkSignals() {
	st := &s.summary
	if st.Running != int64(len(s.running)) || st.Waiting != int64(s.waiting.len()) || st.KVFree != s.kv.numFree {
		s.fail("INV-7", "step summary reports running %d, waiting %d, free blocks %d; state is %d, %d, %d",
			st.Running, st.Waiting, st.KVFree, len(s.running), s.waiting.len(), s.kv.numFree)
	}
}

// checkKV is INV-4. The cheap form checks the counters and that an idle
// engine holds no blocks; the full form recounts every reference.
func (s *Sim) checkKV(full bool) {
	kv := s.kv
	if kv.numFree < 0 || kv.numFree > kv.total() {
		s.fail("INV-4", "free blocks %d outside [0, %d]", kv.numFree, kv.total())
	}
	if len(s.running) == 0 && kv.numFree != kv.total() {
		s.fail("INV-4", "no request runs but %d of %d blocks are allocated", kv.used(), kv.total())
	}
	if !full {
		return
	}
	refs := make([]int32, len(kv.blocks))
	for _, idx := range s.running {
		for _, b := range s.reqs[idx].blocks {
			refs[b]++
		}
	}
	var onList int64
	for b := kv.head; b >= 0; b = kv.blocks[b].next {
		onList++
		if onList > kv.total() {
			s.fail("INV-4", "free list has a cycle")
		}
	}
	if onList != kv.numFree {
		s.fail("INV-4", "free list holds %d blocks, counter says %d", onList, kv.numFree)
	}
	var allocated int64
	for b := range kv.blocks {
		blk := &kv.blocks[b]
		if blk.ref != refs[b] {
			s.fail("INV-4", "block %d has refcount %d but %d block tables hold it", b, blk.ref, refs[b])
		}
		if (blk.ref == 0) != blk.onFree {
			s.fail("INV-4", "block %d: refcount %d, on free list %v", b, blk.ref, blk.onFree)
		}
		if blk.ref > 0 {
			allocated++
		}
		if !blk.hashed {
			continue
		}
		if got, ok := kv.index.get(blk.hash); !ok || got != int32(b) {
			s.fail("INV-4", "block %d is marked cached but the prefix index does not point to it", b)
		}
	}
	if allocated+kv.numFree != kv.total() {
		s.fail("INV-4", "allocated %d + free %d ≠ total %d", allocated, kv.numFree, kv.total())
	}
	if kv.prefix {
		var hashed int
		for b := range kv.blocks {
			if kv.blocks[b].hashed {
				hashed++
			}
		}
		if hashed != kv.index.len() {
			s.fail("INV-4", "prefix index has %d entries for %d cached blocks", kv.index.len(), hashed)
		}
	}
}

func (s *Sim) checkExhaustive() {
	s.checkKV(true)
	var q, run int64
	for i := range s.reqs {
		switch s.reqs[i].state {
		case stQueued:
			q++
		case stRunning:
			run++
		}
	}
	if q != int64(s.waiting.len()) || run != int64(len(s.running)) {
		s.fail("INV-2", "states say %d queued and %d running; the queue holds %d and the batch %d", q, run, s.waiting.len(), len(s.running))
	}
	for i := 0; i < s.waiting.len(); i++ {
		if s.reqs[s.waiting.at(i)].state != stQueued {
			s.fail("INV-2", "request %d is in the waiting queue in state %d", s.waiting.at(i), s.reqs[s.waiting.at(i)].state)
		}
	}
}
