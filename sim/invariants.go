package sim

import "fmt"

// The invariants of the engine (docs/simulator.md states each):
//
//	INV-1 request conservation: injected = not yet arrived + in API overhead
//	      + queued + running + completed + dropped + rejected as too long
//	      + timed out, at the end
//	      of every run, and nothing is left in flight once no event remains
//	      (but what waits for the caller: a pull, or blocks a kept prefill
//	      copy holds).
//	INV-2 lifecycle: a request moves only along pending → arriving →
//	      queued ⇄ running → finished (or arriving → dropped or rejected as
//	      too long, which share a state, or any state
//	      before finished → timed out), then its slot is freed.
//	INV-3 clock monotonicity: events are processed in non-decreasing time
//	      and every step takes at least 1 µs.
//	INV-4 KV conservation: allocated + free = total blocks; exhaustively,
//	      every block's reference count equals the block tables holding it
//	      and the free list holds exactly the unreferenced blocks; the CPU
//	      tier and the disk hold at most their capacity and, exhaustively,
//	      their LRU lists and indexes agree, and KV block events (when
//	      watched) count exactly the prefix index's blocks (sim/tiers.go).
//	INV-5 causality: arrival ≤ enqueue ≤ first schedule ≤ first token ≤
//	      finish ≤ departure for every finished request; arrival ≤ abort ≤
//	      departure, and no token delivered after the abort, for every
//	      timed-out one.
//	INV-6 determinism: the same inputs and seed give byte-identical output
//	      (checked by tests that run twice).
//	INV-7 signal freshness: what the engine reports about a step (queue
//	      depths, KV usage) is its state at that step, not a stale copy.
//	INV-8 work conservation: after every step, if a request waits or runs,
//	      a step event is pending.
//
// The cheap checks run on every step; Options.Exhaustive adds the full ones.

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

func (e *Engine) fail(inv, format string, args ...any) {
	panic(&InvariantError{Invariant: inv, AtUs: e.now, Step: e.stepID, Detail: fmt.Sprintf(format, args...)})
}

// checkEnd is INV-1 at the end of a run: the counters add up, agree with
// a recount of the request slots, and an engine with no event left holds
// no request.
func (e *Engine) checkEnd() {
	c := e.counts()
	pending := c.Offered - c.Injected
	if got := pending + c.StillArrival + c.StillQueued + c.StillRunning + c.Completed + c.Dropped + c.RejectedTooLong + c.TimedOut + c.Killed + c.Redirected + c.HandedOff; got != c.Offered {
		e.fail("INV-1", "injected %d ≠ not arrived %d + in API %d + queued %d + running %d + completed %d + dropped %d + rejected too long %d + timed out %d + killed %d + redirected %d + handed off %d",
			c.Offered, pending, c.StillArrival, c.StillQueued, c.StillRunning, c.Completed, c.Dropped, c.RejectedTooLong, c.TimedOut, c.Killed, c.Redirected, c.HandedOff)
	}
	var byState [numReqStates]int64
	var pulled int64
	for i := range e.reqs {
		byState[e.reqs[i].state]++
		if e.reqs[i].state == stQueued && e.reqs[i].pull == pullArrived {
			pulled++
		}
	}
	left := byState[stFinished] + byState[stDropped] + byState[stTimedOut]
	if byState[stPulling] != e.pulling || byState[stKept] != e.kept || pulled != e.pulled {
		e.fail("INV-1", "request slots hold %d pulling, %d keeping KV and %d queued with pulled KV; counters say %d, %d and %d",
			byState[stPulling], byState[stKept], pulled, e.pulling, e.kept, e.pulled)
	}
	if byState[stPending] != pending || byState[stArriving] != c.StillArrival || byState[stQueued]+byState[stPulling] != c.StillQueued ||
		byState[stRunning] != c.StillRunning || left != 0 {
		e.fail("INV-1", "request slots hold %d pending, %d in API, %d queued, %d running, %d left unreleased; counters say %d, %d, %d, %d, 0",
			byState[stPending], byState[stArriving], byState[stQueued], byState[stRunning], left,
			pending, c.StillArrival, c.StillQueued, c.StillRunning)
	}
	if int64(len(e.free)) != byState[stFree] {
		e.fail("INV-1", "%d free slots listed, %d slots free", len(e.free), byState[stFree])
	}
	// Requests may wait with no event of their own only for what the caller
	// brings: a pulled KV's arrival (pulling), or blocks a kept prefill copy
	// holds until the caller releases it (kept: a pull's end, or its abort
	// timeout). A caller that stops before then (a horizon) leaves them
	// counted in the system.
	if gone := c.Completed + c.Dropped + c.RejectedTooLong + c.TimedOut + c.Killed + c.Redirected + c.HandedOff; e.events.len() == 0 && gone != c.Offered && e.pulling == 0 && e.kept == 0 {
		e.fail("INV-1", "no event is left but %d of %d requests are neither completed, dropped, rejected nor timed out", c.Offered-gone, c.Offered)
	}
	e.checkKV(true)
}

func (e *Engine) checkCausality(r *request, departed int64) {
	if !(r.spec.ArrivalUs <= r.enqueued && r.enqueued <= r.firstScheduled && r.firstScheduled <= r.firstToken &&
		r.firstToken <= r.finished && r.finished <= departed) {
		e.fail("INV-5", "request %d: arrival %d, enqueue %d, schedule %d, first token %d, finish %d, departure %d",
			r.spec.ID, r.spec.ArrivalUs, r.enqueued, r.firstScheduled, r.firstToken, r.finished, departed)
	}
}

func (e *Engine) checkWorkConserving() {
	if (len(e.running) > 0 || e.waiting.len() > 0) && !e.stepPending {
		e.fail("INV-8", "%d waiting and %d running but no step is scheduled", e.waiting.len(), len(e.running))
	}
}

// checkSignals compares the step summary with the live state it reports.
func (e *Engine) checkSignals() {
	st := &e.summary
	if st.Running != int64(len(e.running)) || st.Waiting != int64(e.waiting.len()) || st.KVFree != e.kv.numFree {
		e.fail("INV-7", "step summary reports running %d, waiting %d, free blocks %d; state is %d, %d, %d",
			st.Running, st.Waiting, st.KVFree, len(e.running), e.waiting.len(), e.kv.numFree)
	}
}

// checkKV is INV-4. The cheap form checks the counters and that an idle
// engine holds no blocks; the full form recounts every reference.
func (e *Engine) checkKV(full bool) {
	kv := e.kv
	if kv.numFree < 0 || kv.numFree > kv.total() {
		e.fail("INV-4", "free blocks %d outside [0, %d]", kv.numFree, kv.total())
	}
	if len(e.running) == 0 && e.pulling == 0 && e.kept == 0 && e.pulled == 0 && kv.numFree != kv.total() {
		e.fail("INV-4", "no request runs, pulls, keeps KV or waits with pulled KV, but %d of %d blocks are allocated", kv.used(), kv.total())
	}
	e.checkTiers(full)
	if !full {
		return
	}
	refs := make([]int32, len(kv.blocks))
	for _, idx := range e.running {
		for _, b := range e.reqs[idx].blocks {
			refs[b]++
		}
	}
	if e.pulling+e.kept+e.pulled > 0 { // blocks held outside the batch (sim/pd.go)
		for i := range e.reqs {
			if st := e.reqs[i].state; st == stPulling || st == stKept || (st == stQueued && e.reqs[i].pull == pullArrived) {
				for _, b := range e.reqs[i].blocks {
					refs[b]++
				}
			}
		}
	}
	// The free list is the places of blocks never used (implicit) and the
	// ring, whose runs of detached places the spare ids and the ids never
	// used fill. A detached block keeps the state allocation gave it.
	onList, places := kv.fresh(), kv.fresh()
	kv.eachFree(func(f freeEnt) {
		switch b := f.b; {
		case f.detached:
			onList += int64(b)
			places += int64(b)
		case kv.blocks[b].ref != 0:
			onList++
			e.fail("INV-4", "block %d is on the free list with refcount %d", b, kv.blocks[b].ref)
		default:
			onList++
		}
	})
	if onList != kv.numFree {
		e.fail("INV-4", "free list holds %d blocks (%d never used), counter says %d", onList, kv.fresh(), kv.numFree)
	}
	if ids := int64(len(kv.spare)) + kv.n - int64(len(kv.blocks)); ids != places {
		e.fail("INV-4", "%d spare and %d unused ids for %d places of blocks never used or detached", len(kv.spare), kv.n-int64(len(kv.blocks)), places)
	}
	detached := make([]bool, len(kv.blocks))
	for _, b := range kv.spare {
		switch {
		case detached[b]:
			e.fail("INV-4", "detached free block %d is spare twice", b)
		case kv.blocks[b] != heldAlone:
			e.fail("INV-4", "detached free block %d is not in the state allocation gave it: %+v", b, kv.blocks[b])
		}
		detached[b] = true
	}
	var allocated int64
	for b := range kv.blocks {
		blk := &kv.blocks[b]
		if detached[b] {
			if refs[b] != 0 {
				e.fail("INV-4", "block %d is free (detached) but %d block tables hold it", b, refs[b])
			}
			continue
		}
		if blk.ref != refs[b] {
			e.fail("INV-4", "block %d has refcount %d but %d block tables hold it", b, blk.ref, refs[b])
		}
		if (blk.ref == 0) != blk.onFree {
			e.fail("INV-4", "block %d: refcount %d, on free list %v", b, blk.ref, blk.onFree)
		}
		if blk.ref > 0 {
			allocated++
		}
		if !blk.hashed || blk.own {
			continue
		}
		if got, ok := kv.index.Get(kv.hashes[b]); !ok || got != int32(b) {
			e.fail("INV-4", "block %d is marked cached but the prefix index does not point to it", b)
		}
	}
	if allocated+kv.numFree != kv.total() {
		e.fail("INV-4", "allocated %d + free %d ≠ total %d", allocated, kv.numFree, kv.total())
	}
	if kv.prefix {
		var hashed int
		for b := range kv.blocks {
			if kv.blocks[b].hashed && !kv.blocks[b].own {
				hashed++
			}
		}
		if hashed != kv.index.Len() {
			e.fail("INV-4", "prefix index has %d entries for %d cached shared blocks", kv.index.Len(), hashed)
		}
	}
}

func (e *Engine) checkExhaustive() {
	e.checkKV(true)
	var q, run int64
	for i := range e.reqs {
		switch e.reqs[i].state {
		case stQueued:
			q++
		case stRunning:
			run++
		}
	}
	if q != int64(e.waiting.len()) || run != int64(len(e.running)) {
		e.fail("INV-2", "states say %d queued and %d running; the queue holds %d and the batch %d", q, run, e.waiting.len(), len(e.running))
	}
	var held int
	e.waiting.each(e.reqs, func(i int32) {
		held++
		if e.reqs[i].state != stQueued {
			e.fail("INV-2", "request %d is in the waiting queue in state %d", e.reqs[i].spec.ID, e.reqs[i].state)
		}
	})
	if held != e.waiting.len() {
		e.fail("INV-2", "the waiting queue holds %d requests but counts %d", held, e.waiting.len())
	}
}
