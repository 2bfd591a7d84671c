package sim

import (
	"fmt"
	"slices"
)

// Abort tells the engine that at atUs the client of request id gave up
// (a client timeout, a closed connection). It mirrors vLLM V1, where the
// API server sends the abort to the engine core's input queue and the core
// applies it between steps (EngineCore.abort_requests, which calls
// Scheduler.finish_requests with FINISHED_ABORTED): the request is taken
// out of the waiting queue or the running batch and its KV blocks are
// freed as a finished request's are (full blocks keep their cached prefix
// on the free list).
//
// atUs must not be before Now(), and the engine must have processed every
// event before atUs (NextEventUs() >= atUs, or no event): a caller on a
// shared clock applies aborts when their time comes, as it injects
// requests. Otherwise Abort returns an error and changes nothing; so it
// does when atUs is before the request's ArrivalUs.
//
// It returns false, and changes nothing, for an id the engine does not
// hold: never injected, or already gone (completed, dropped, timed out,
// or already aborted). A request whose last token is produced is complete
// and cannot be aborted, even during its departure overhead, and so is one
// that finishes in the step in flight at atUs: vLLM processes that step's
// output, which finishes it, before it reads the abort.
//
// Otherwise it returns true, the engine's clock moves to atUs, and the
// request leaves with outcome TimedOut:
//   - not yet arrived (injected for a later time) or in the API arrival
//     overhead: removed at atUs; it never reaches the queue. One not yet
//     arrived counts as arrived (Counts.Injected), so that offered minus
//     injected stays the number still to arrive, and observers see nothing
//     of it (vLLM never saw it).
//   - waiting, including after a preemption: removed from the queue at atUs.
//   - running, between steps (atUs at or after the end of the last step):
//     removed at atUs, before the step that starts at atUs schedules.
//   - running while a step is in flight (the step started at or before atUs
//     and ends after it): removed when that step ends, before the next
//     step schedules. Its work in that step is wasted: the token that step
//     produces is not delivered to the client.
//
// Same-time rule: an abort at t comes after the events at t the engine
// has already processed and before those it has not. Calling Abort before
// the Advance that processes t (NextEventUs() == t) therefore applies it
// before the step starting at t, as vLLM does, and a request aborted at
// exactly the end of its step has that step's token delivered. Called
// after that Advance, the step starting at t is in flight and the abort
// waits for its end. Either way the result is a function of the call
// sequence alone, so runs stay deterministic.
//
// Reporting: each Abort call (that returns no error) starts a new
// Completions list, as Advance does. A request removed at atUs is in
// Completions() as soon as Abort returns; one removed at the end of the
// step in flight is in the Completions of the Advance that processes that
// step's end. Its Completion has TimedOut set, DepartedUs the time the
// abort took effect, OutputTokens the tokens delivered before atUs (and
// FirstTokenUs 0 when there were none), FinishedUs 0.
func (e *Engine) Abort(id int64, atUs int64) (ok bool, err error) {
	return e.abort(id, atUs, false)
}

// Kill is Abort for a request the operator ends rather than its client:
// an instance scaled down without waiting for its work (a drain's
// immediate policy or its timeout). Same rules, same timing; the
// Completion has Killed set instead of TimedOut, and the request counts
// in Counts.Killed.
func (e *Engine) Kill(id int64, atUs int64) (ok bool, err error) {
	return e.abort(id, atUs, true)
}

func (e *Engine) abort(id int64, atUs int64, killed bool) (ok bool, err error) {
	defer catch(&err)
	if atUs < e.now {
		return false, fmt.Errorf("request %d: aborted at %d µs, before the engine's clock %d µs", id, atUs, e.now)
	}
	if t, has := e.NextEventUs(); has && t < atUs {
		return false, fmt.Errorf("request %d: aborted at %d µs but the engine has an event at %d µs to process first (Advance)", id, atUs, t)
	}
	i, found := e.lookup(id)
	if found && atUs < e.reqs[i].spec.ArrivalUs {
		return false, fmt.Errorf("request %d: aborted at %d µs, before its arrival_us %d", id, atUs, e.reqs[i].spec.ArrivalUs)
	}
	e.done = e.done[:0]
	if !found || e.reqs[i].aborted || e.reqs[i].state == stKept {
		// A kept prefill handoff has left the client's view: only its KV
		// remains, which ReleaseKV frees.
		return false, nil
	}
	r := &e.reqs[i]
	e.now, e.m.active = atUs, atUs
	r.aborted, r.killed, r.finished = true, killed, atUs
	if o := e.cfg.Observer; o != nil && r.state != stPending {
		o.Aborted(id, atUs)
	}
	switch r.state {
	case stPending:
		if !e.events.remove(evArrival, i) {
			e.fail("INV-2", "request %d is pending but has no arrival event", id)
		}
		e.arrived++
		e.transition(r, stPending, stTimedOut)
	case stArriving:
		if !e.events.remove(evQueued, i) {
			e.fail("INV-2", "request %d is in API processing but has no queued event", id)
		}
		e.arriving--
		e.transition(r, stArriving, stTimedOut)
	case stQueued:
		if !e.waiting.remove(e.reqs, i) {
			e.fail("INV-2", "request %d is queued but not in the waiting queue", id)
		}
		e.transition(r, stQueued, stTimedOut)
		if r.pull == pullArrived { // its pulled KV, freed below
			e.pulled--
		}
		e.journey(r, JourneyFinished, atUs)
	case stPulling:
		if (r.pull == pullDue || r.pull == pullLost) && !e.events.remove(evPulled, i) {
			e.fail("INV-2", "request %d's KV arrival has no event", id)
		}
		e.pulling--
		e.transition(r, stPulling, stTimedOut)
		e.journey(r, JourneyFinished, atUs)
	case stRunning:
		if e.m.lastStepEnd > atUs {
			// The step in flight has this request's outcome already
			// applied; the abort waits for its end, as vLLM's does.
			e.events.push(e.m.lastStepEnd, evAbort, i)
			return true, nil
		}
		e.removeRunning(i)
		e.transition(r, stRunning, stTimedOut)
		e.journey(r, JourneyFinished, atUs)
	default:
		e.fail("INV-2", "request %d is held in state %d", id, r.state)
	}
	e.timeOut(i, atUs)
	return true, nil
}

// onAbort applies an abort that waited for the end of the step in flight.
func (e *Engine) onAbort(i int32) {
	r := &e.reqs[i]
	if !r.aborted {
		e.fail("INV-2", "abort event for request %d, which was not aborted", r.spec.ID)
	}
	e.removeRunning(i)
	e.transition(r, stRunning, stTimedOut)
	e.journey(r, JourneyFinished, e.now)
	e.timeOut(i, e.now)
}

// timeOut ends request i, whose abort takes effect at at: its blocks are
// released as a completed request's are, and its Completion reported.
func (e *Engine) timeOut(i int32, at int64) {
	r := &e.reqs[i]
	e.releaseBlocks(r, true)
	// A token produced after the client left (at the end of the step that
	// was in flight) never reached it.
	// A token reaches the client OutputDelayUs after the engine produced it;
	// with a delay, the tokens of the last steps before the abort may still
	// be on their way (only the first and the last are told apart).
	abortAt := r.finished
	delivered := r.outputs
	if delivered > 0 && r.lastToken+e.outDelay > abortAt {
		delivered--
	}
	if delivered > 0 && r.firstToken+e.outDelay > abortAt {
		delivered = 0
	}
	c := Completion{ID: r.spec.ID, TimedOut: !r.killed, Killed: r.killed, ArrivalUs: r.spec.ArrivalUs, InjectedUs: r.injected, EnqueuedUs: r.enqueued,
		FirstScheduledUs: r.firstScheduled, DepartedUs: at, PromptTokens: r.spec.PromptTokens, OutputTokens: delivered,
		CachedTokens: r.firstCached, Preemptions: r.preemptions, Tenant: r.spec.Tenant, SLOClass: r.spec.SLOClass}
	if delivered > 0 {
		c.FirstTokenUs = r.firstToken + e.outDelay
	}
	if !(r.spec.ArrivalUs <= abortAt && abortAt <= at && delivered >= 0 && c.FirstTokenUs <= abortAt) {
		e.fail("INV-5", "request %d: arrival %d, aborted at %d, left at %d, first token delivered at %d (%d tokens)",
			r.spec.ID, r.spec.ArrivalUs, abortAt, at, c.FirstTokenUs, delivered)
	}
	if r.killed {
		e.m.killed++
	} else {
		e.m.timedOut++
	}
	e.m.lastDepart = max(e.m.lastDepart, at)
	e.done = append(e.done, c)
	e.release(i)
	if e.cfg.Options.Exhaustive {
		e.checkExhaustive()
	} else {
		e.checkKV(false)
	}
}

// removeRunning takes request i out of the running batch, keeping the
// others' order (the order the scheduler serves and preempts them in).
func (e *Engine) removeRunning(i int32) {
	k := slices.Index(e.running, i)
	if k < 0 {
		e.fail("INV-2", "request %d is running but not in the batch", e.reqs[i].spec.ID)
	}
	e.running = slices.Delete(e.running, k, k+1)
}

// lookup finds a live request's slot by id.
func (e *Engine) lookup(id int64) (int32, bool) {
	if e.byID == nil {
		e.byID = make(map[int64]int32, len(e.reqs))
		for i := range e.reqs {
			if r := &e.reqs[i]; r.state != stFree && !(r.state == stKept && r.pull == releaseDue) {
				e.byID[r.spec.ID] = int32(i)
			}
		}
	}
	i, ok := e.byID[id]
	return i, ok
}

// Redirect takes a request that has not started out of the engine at
// atUs, for another instance to serve it (an instance draining under the
// redirect policy): not yet arrived, in the API overhead, or waiting for
// its first step. It returns its spec and true; it produces no
// Completion, and the request counts in Counts.Redirected. A request that
// has been scheduled (running, or preempted after it started) is not
// redirected: false, nothing changes (its client already has tokens from
// this instance). The timing rules are Abort's.
func (e *Engine) Redirect(id int64, atUs int64) (spec RequestSpec, ok bool, err error) {
	defer catch(&err)
	if atUs < e.now {
		return spec, false, fmt.Errorf("request %d: redirected at %d µs, before the engine's clock %d µs", id, atUs, e.now)
	}
	if t, has := e.NextEventUs(); has && t < atUs {
		return spec, false, fmt.Errorf("request %d: redirected at %d µs but the engine has an event at %d µs to process first (Advance)", id, atUs, t)
	}
	i, found := e.lookup(id)
	if !found || e.reqs[i].aborted {
		return spec, false, nil
	}
	r := &e.reqs[i]
	switch {
	case r.state == stPending:
		if !e.events.remove(evArrival, i) {
			e.fail("INV-2", "request %d is pending but has no arrival event", id)
		}
		e.arrived++
	case r.state == stArriving:
		if !e.events.remove(evQueued, i) {
			e.fail("INV-2", "request %d is in API processing but has no queued event", id)
		}
		e.arriving--
		if o := e.cfg.Observer; o != nil {
			o.Aborted(id, atUs)
		}
	case r.state == stQueued && r.firstScheduled == 0 && r.preemptions == 0 && r.pull <= pullBlocked:
		if !e.waiting.remove(e.reqs, i) {
			e.fail("INV-2", "request %d is queued but not in the waiting queue", id)
		}
		if o := e.cfg.Observer; o != nil {
			o.Aborted(id, atUs)
		}
	default:
		return spec, false, nil
	}
	e.now, e.m.active = atUs, atUs
	spec = r.spec
	spec.Content = slices.Clone(spec.Content)
	e.releaseBlocks(r, true)
	e.m.redirected++
	e.release(i)
	e.done = e.done[:0]
	return spec, true, nil
}

// Held appends to dst the ids of the requests the engine holds (injected
// and not yet gone), in increasing order.
func (e *Engine) Held(dst []int64) []int64 {
	start := len(dst)
	for i := range e.reqs {
		if st := e.reqs[i].state; (st >= stPending && st <= stRunning || st == stPulling) && !e.reqs[i].aborted {
			dst = append(dst, e.reqs[i].spec.ID)
		}
	}
	slices.Sort(dst[start:])
	return dst
}
