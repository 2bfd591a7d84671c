package sim

import "fmt"

// Prefill/decode disaggregation, the engine's side (vLLM's KV connector,
// NIXL: docs/disaggregation.md). A request's RequestSpec.Handoff says its
// part:
//
//   - HandoffPrefill, on a prefill instance: the request (OutputTokens 1,
//     as llm-d's sidecar sends it with max_tokens=1) computes its prompt
//     and its first token, then stays, its KV blocks held (vLLM keeps them
//     until the decode side has pulled them, or its abort timeout), until
//     ReleaseKV. It leaves as HandedOff, not Completed: the request is not
//     done, and its latency is not the client's.
//   - HandoffDecode, on a decode instance: when the scheduler first admits
//     it, it takes the blocks its prompt needs beyond the instance's own
//     prefix cache (vLLM's WAITING_FOR_REMOTE_KVS), without a seat in the
//     batch or token budget, and waits for the KV; the engine reports a
//     Pull with the tokens to fetch. If the blocks are not there, it waits
//     in the queue like any request: nothing is dropped. KVArrived then
//     makes it schedulable again, its prompt computed but for the last
//     token, which its first step recomputes to produce the first output
//     token (a step needs at least one token to compute to give logits).
//     The client's TTFT, from ArrivalUs, so includes the prefill elsewhere
//     and the transfer, as llm-d and vLLM's proxies measure it.

// Handoff is a request's part in a disaggregated request.
type Handoff uint8

const (
	HandoffNone    Handoff = iota
	HandoffPrefill         // compute the prompt and one token, keep the KV for a decode instance
	HandoffDecode          // pull the prompt's KV from a prefill instance, then decode
)

func (h Handoff) String() string {
	switch h {
	case HandoffPrefill:
		return "prefill"
	case HandoffDecode:
		return "decode"
	}
	return "none"
}

// A HandoffDecode request's pull: none yet, waiting for its KV, arrived.
const (
	pullNone    uint8 = iota
	pullBlocked       // not started: its blocks were not free at its turn
	pullWaiting       // blocks taken, KV not in
	pullDue           // KVArrived called: its event is pending
	pullArrived       // KV in: schedulable
	releaseDue        // a kept request: ReleaseKV called, its event pending
	pullLost          // KVLost called: its event is pending
)

// Pull is a HandoffDecode request whose blocks are allocated and whose KV
// the caller must now fetch: Tokens prompt tokens (those past the
// instance's own cached prefix), into Blocks blocks.
type Pull struct {
	ID     int64
	AtUs   int64
	Tokens int64
	Blocks int64
	// Waited says it waited at the head of the queue for free blocks.
	Waited bool
}

// Pulls are the pulls the last Advance started, in the order the engine
// started them; the slice is reused by the next Advance.
func (e *Engine) Pulls() []Pull { return e.pulls }

// KVArrived tells the engine that request id's pulled KV is in its blocks
// at atUs (not before Now(), and no earlier event left to process, as for
// Inject). An error for a request that is not waiting for its KV.
func (e *Engine) KVArrived(id int64, atUs int64) error {
	_, err := e.pdEvent(id, atUs, stPulling, pullWaiting, pullDue, evPulled, "is not waiting for its KV")
	return err
}

// KVLost tells the engine, at atUs, that request id's KV will never come:
// the prefill instance freed its copy (its abort timeout passed before
// the pull started). As vLLM's KV connector recovers from a failed load by
// default (kv_load_failure_policy "recompute": the request is rescheduled
// to compute its prompt from its valid prefix, vLLM PR 19330), the request
// keeps the blocks it took for the pull and returns to the head of the
// queue, to prefill its prompt here from its cached prefix; counted in
// Result.KVLoadsFailed. An error for a request that is not waiting for
// its KV.
func (e *Engine) KVLost(id int64, atUs int64) error {
	_, err := e.pdEvent(id, atUs, stPulling, pullWaiting, pullLost, evPulled, "is not waiting for its KV")
	return err
}

// ReleaseKV frees, at atUs, the blocks a HandoffPrefill request kept for
// its decode instance (the pull is done, or given up). An error for a
// request that holds none. From the call on, id is free for a new request
// (a client's retry of a request whose decode part was handed back may
// come back here before the release is processed): the release finds its
// own slot.
func (e *Engine) ReleaseKV(id int64, atUs int64) error {
	_, err := e.releaseKV(id, atUs)
	return err
}

// ExpireKV is ReleaseKV for a copy that no decode instance pulled before
// its abort timeout: the same release, but not the instance's activity,
// so that a run does not last until the timeouts of copies nobody wanted
// (Result.EndUs).
func (e *Engine) ExpireKV(id int64, atUs int64) error {
	i, err := e.releaseKV(id, atUs)
	if err != nil {
		return err
	}
	e.reqs[i].expired = true
	return nil
}

func (e *Engine) releaseKV(id int64, atUs int64) (int32, error) {
	i, err := e.pdEvent(id, atUs, stKept, pullNone, releaseDue, evReleaseKV, "keeps no KV")
	if err == nil {
		delete(e.byID, id) // lookup skips a slot whose release is due
	}
	return i, err
}

func (e *Engine) pdEvent(id, atUs int64, want reqState, from, to uint8, kind eventKind, what string) (int32, error) {
	if e.retired != nil {
		return 0, fmt.Errorf("request %d: the engine is retired", id)
	}
	if atUs < e.now {
		return 0, fmt.Errorf("request %d: at %d µs, before the engine's clock %d µs", id, atUs, e.now)
	}
	i, ok := e.lookup(id)
	if !ok || e.reqs[i].state != want || e.reqs[i].pull != from {
		return 0, fmt.Errorf("request %d %s", id, what)
	}
	e.reqs[i].pull = to
	e.events.push(atUs, kind, i)
	return i, nil
}

// startPull admits HandoffDecode request idx, at the head of the queue,
// for its pull: its blocks taken (the cached prefix acquired, the rest
// allocated), out of the queue, waiting for its KV. False when the blocks
// are not free: it stays at the head, as vLLM's scheduler leaves it.
func (e *Engine) startPull(idx int32) bool {
	r := &e.reqs[idx]
	prompt := r.spec.PromptTokens
	var hits, hitsFree int64
	e.hit = e.hit[:0]
	if e.cfg.Engine.PrefixCachingEnabled {
		hits, hitsFree = e.matchPrefix(r, (prompt-1)/e.blockSize)
	}
	fresh := e.blocksFor(prompt) - hits
	if fresh > e.kv.numFree-hitsFree {
		return false
	}
	e.waiting.popFront(e.reqs)
	r.blocks = e.int32s.grow(r.blocks, max(hits+fresh, e.blockCap(r)))
	r.blocks = e.kv.acquire(e.hit, r.blocks)
	r.blocks, _ = e.kv.allocate(fresh, r.blocks)
	e.transition(r, stQueued, stPulling)
	e.pulling++
	r.cached, r.computed, r.committed = hits, hits*e.blockSize, hits
	e.m.promptTokens += prompt
	e.m.cachedTokens += hits * e.blockSize
	e.m.remoteTokens += prompt - hits*e.blockSize
	r.firstCached = hits * e.blockSize
	waited := r.pull == pullBlocked
	r.pull = pullWaiting
	e.pulls = append(e.pulls, Pull{ID: r.spec.ID, AtUs: e.now, Tokens: prompt - hits*e.blockSize, Blocks: fresh, Waited: waited})
	return true
}

// onPulled makes a request whose KV arrived schedulable: back at the head
// of the queue (as a preempted request returns), its prompt computed but
// for the last token.
func (e *Engine) onPulled(i int32) {
	r := &e.reqs[i]
	if r.pull == pullLost {
		e.onKVLost(i)
		return
	}
	e.transition(r, stPulling, stQueued)
	e.pulling--
	e.pulled++
	r.pull = pullArrived
	r.computed = max(r.computed, r.spec.PromptTokens-1)
	if e.waiting.keyed {
		e.waiting.push(r, i, e.sortKey(r))
	} else {
		e.waiting.pushFront(r, i)
	}
	e.ensureStep(e.now)
}

// onKVLost turns a request whose pulled KV will never come into one that
// computes its prompt here (KVLost): it keeps its blocks, as vLLM's
// recovery does, and returns to the head of the queue with its cached
// prefix computed; its first step prefills from there (in chunks, as the
// budget allows) instead of recomputing the last token only. Its prompt
// tokens no longer count as pulled.
func (e *Engine) onKVLost(i int32) {
	r := &e.reqs[i]
	e.transition(r, stPulling, stQueued)
	e.pulling--
	e.pulled++
	e.m.kvLoadsFailed++
	e.m.remoteTokens -= r.spec.PromptTokens - r.cached*e.blockSize
	r.computed = r.cached * e.blockSize
	r.pull = pullArrived
	if e.waiting.keyed {
		e.waiting.push(r, i, e.sortKey(r))
	} else {
		e.waiting.pushFront(r, i)
	}
	e.ensureStep(e.now)
}

// admitPulled admits a request whose KV arrived, at the head of the queue,
// into the batch for the tokens it has left to compute (one, its last
// prompt token; a lost pull's, the prompt past its cached prefix, chunked
// as any prefill): its blocks are already its own. False when the budget
// cannot take them.
func (e *Engine) admitPulled(idx int32, budget int64) (int64, bool) {
	r := &e.reqs[idx]
	n := r.spec.PromptTokens + r.outputs - r.computed
	if t := e.cfg.Engine.LongPrefillThreshold; t > 0 && n > t {
		n = t
	}
	if n > budget {
		if !e.cfg.Engine.ChunkedPrefillEnabled {
			return 0, false
		}
		n = budget
	}
	if need := e.blocksFor(r.computed+n) - int64(len(r.blocks)); need > 0 {
		if need > e.kv.numFree {
			return 0, false
		}
		r.blocks, _ = e.kv.allocate(need, r.blocks)
	}
	if e.waiting.front(e.reqs) == idx {
		e.waiting.popFront(e.reqs)
	} else if !e.waiting.remove(e.reqs, idx) {
		e.fail("INV-2", "request %d is queued but not in the waiting queue", r.spec.ID)
	}
	e.journey(r, JourneyScheduled, e.now)
	e.transition(r, stQueued, stRunning)
	if r.preemptions == 0 {
		r.firstScheduled = e.now
	}
	e.pulled--
	r.pull = pullNone
	r.scheduled = n
	e.running = append(e.running, idx)
	e.compose(r, n)
	return n, true
}

// rescuePulled admits a request whose KV is in, from anywhere in the
// queue, when nothing runs and the head of the queue cannot be admitted:
// the blocks the head waits for are held by such requests behind it (a
// decode instance too small for its handoffs), which, strictly first come
// first served, would never run. The lowest slot goes first. It reports
// whether it admitted one.
func (e *Engine) rescuePulled(budget int64) bool {
	for i := range e.reqs {
		if r := &e.reqs[i]; r.state == stQueued && r.pull == pullArrived {
			_, ok := e.admitPulled(int32(i), budget)
			return ok
		}
	}
	return false
}

// keep parks a HandoffPrefill request that produced its token: handed
// off, its blocks held until ReleaseKV.
func (e *Engine) keep(r *request) {
	e.transition(r, stRunning, stKept)
	e.kept++
	e.m.handedOff++
}

// onReleaseKV frees a kept request's blocks and its slot.
func (e *Engine) onReleaseKV(i int32) {
	r := &e.reqs[i]
	e.transition(r, stKept, stFinished)
	e.kept--
	e.releaseBlocks(r, true)
	e.release(i)
	if e.waiting.len() > 0 {
		// Requests may wait for these blocks with nothing running to
		// schedule the next step.
		e.ensureStep(e.now)
	}
}
