package sim

import (
	"fmt"

	"github.com/blis-sim/blis/features"
)

// step runs one engine iteration (docs/simulator.md): schedule a batch, execute it
// through the latency model, process completions, schedule the next step.
func (e *Engine) step() {
	e.stepID++
	e.kv.now = e.now
	e.kv.stepStored = 0
	if e.kv.cpu != nil {
		e.kv.cpu.stepEvicted = 0
	}
	preempted := e.scheduleBatch()
	if len(e.running) == 0 {
		// Only pulls started (sim/pd.go): nothing computes, no step runs;
		// the engine waits for a KV to arrive or a request to come. A lone
		// request that preempted itself (the blocks it needs are held
		// outside the batch: pulled or pulling handoffs, kept copies) was
		// the batch: the scheduler runs again at once, as vLLM's engine
		// loop does, to admit from the queue (rescuePulled).
		e.stepID--
		if preempted > 0 {
			e.ensureStep(e.now)
		}
		return
	}
	dt := e.stepTime(preempted)
	if e.lock != nil {
		// In lockstep the group's step time decides (sim/lockstep.go).
		e.plan(preempted, dt)
		return
	}
	e.finishStep(preempted, dt)
}

// finishStep applies a step of dt µs whose batch is composed: tokens,
// completions, the next step.
func (e *Engine) finishStep(preempted, dt int64) {
	e.executeBatch(preempted, dt)
	e.processCompletions(dt)
	e.scheduleNextStep(dt)
	if e.cfg.Options.Exhaustive {
		e.checkExhaustive()
	} else {
		e.checkKV(false)
	}
}

// scheduleBatch is vLLM's continuous batching: running requests first, each
// taking its remaining tokens (capped by the long-prefill threshold and the
// budget), preempting from the tail when KV blocks run out; then, if nothing
// was preempted, waiting requests in policy order while seats, budget and
// blocks last. It returns the number of requests preempted.
func (e *Engine) scheduleBatch() int64 {
	budget := e.cfg.Engine.MaxBatchedTokens
	threshold := e.cfg.Engine.LongPrefillThreshold
	var preempted int64
	e.batch.Beta = features.BetaInput{}
	e.finishing = 0
	// The loop runs for every running request every step: the block
	// allocation (one step in a block's worth) is out of line, and a decode
	// step that is not the request's last, compose's usual case, is
	// composed here, into sums added to the batch after the loop.
	reqs := e.reqs
	var decTokens, decReqs, decContext, decBlocks int64
	for i := 0; i < len(e.running); i++ {
		idx := e.running[i]
		r := &reqs[idx]
		r.scheduled = 0
		// What the request can compute this step.
		n := r.spec.PromptTokens + r.outputs - r.computed
		if threshold > 0 && n > threshold {
			n = threshold
		}
		if n = min(n, budget); n == 0 {
			continue
		}
		if need := e.blocksFor(r.computed+n) - int64(len(r.blocks)); need > 0 {
			p, ok := e.reserve(idx, need)
			preempted += p
			if !ok {
				break
			}
		}
		r.scheduled = n
		budget -= n
		if r.outputs > 0 && r.outputs+1 < r.spec.OutputTokens {
			decTokens += n
			decReqs++
			decContext += r.computed + n
			decBlocks += int64(len(r.blocks))
			continue
		}
		e.compose(r, n)
	}
	in := &e.batch.Beta
	in.DecodeTokens += decTokens
	in.ScheduledTokens += decTokens
	in.NumDecodeReqs += decReqs
	in.DecodeContextTokens += decContext
	in.SumDecodeKVBlocks += decBlocks
	if preempted == 0 {
		e.admitWaiting(budget)
	}
	return preempted
}

// reserve allocates need more blocks to running request idx, preempting
// from the tail of the batch while they are short. It returns the number
// preempted and false if idx itself was.
func (e *Engine) reserve(idx int32, need int64) (preempted int64, ok bool) {
	r := &e.reqs[idx]
	r.blocks = e.int32s.grow(r.blocks, need)
	for {
		var ok bool
		if r.blocks, ok = e.kv.allocate(need, r.blocks); ok {
			return preempted, true
		}
		// Evict from the tail, which is never before idx: requests
		// already scheduled this step keep their blocks.
		e.m.kvAllocFailures++
		victim := e.running[len(e.running)-1]
		e.preempt(victim)
		preempted++
		if victim == idx {
			return preempted, false
		}
	}
}

// preempt evicts a running request by recompute: its blocks are released
// (their prefix hashes stay cached until reused) and it returns to the
// front of the queue with nothing computed.
func (e *Engine) preempt(idx int32) {
	r := &e.reqs[idx]
	e.running = e.running[:len(e.running)-1]
	e.releaseBlocks(r, false)
	r.computed, r.committed, r.cached, r.scheduled = 0, 0, 0, 0
	r.preemptions++
	e.m.preemptions++
	e.transition(r, stRunning, stQueued)
	e.journey(r, JourneyPreempted, e.now)
	if e.waiting.keyed {
		e.waiting.push(r, idx, e.sortKey(r))
	} else {
		e.waiting.pushFront(r, idx)
	}
}

func (e *Engine) admitWaiting(budget int64) {
	if budget = e.admitQueue(budget); len(e.running) == 0 && e.pulled > 0 && budget > 0 {
		e.rescuePulled(budget)
	}
}

// admitQueue admits requests from the head of the queue while they fit,
// and returns the budget left.
func (e *Engine) admitQueue(budget int64) int64 {
	for e.waiting.len() > 0 && int64(len(e.running)) < e.cfg.Engine.MaxNumSeqs && budget > 0 {
		idx := e.waiting.front(e.reqs)
		r := &e.reqs[idx]
		// With async scheduling a request queued at this step's start was
		// not yet known when the step was composed; it joins the next one,
		// unless the step would otherwise run nothing (vLLM then schedules
		// it at once).
		if r.joinStep > e.stepID && len(e.running) > 0 {
			break
		}
		if r.spec.Handoff == HandoffDecode && r.preemptions == 0 {
			// Disaggregated (sim/pd.go): first its blocks and its pull,
			// then, once its KV is in, its last prompt token.
			if r.pull == pullNone || r.pull == pullBlocked {
				if !e.startPull(idx) {
					e.m.kvAllocFailures++
					r.pull = pullBlocked
					break
				}
				continue
			}
			n, ok := e.admitPulled(idx, budget)
			if !ok {
				break
			}
			budget -= n
			continue
		}
		stream := r.spec.PromptTokens + r.outputs
		// At least one token is computed, so at most (stream-1)/bs blocks
		// can come from caches.
		maxHit := (stream - 1) / e.blockSize
		var hits, hitsFree, reload int64
		e.hit = e.hit[:0]
		if e.cfg.Engine.PrefixCachingEnabled {
			hits, hitsFree = e.matchPrefix(r, maxHit)
			if e.kv.x != nil {
				reload = e.matchTiers(r, hits, maxHit) // CPU, disk, store (sim/tiers.go)
			}
		}
		computed := (hits + reload) * e.blockSize
		n := stream - computed
		if t := e.cfg.Engine.LongPrefillThreshold; t > 0 && n > t {
			n = t
		}
		if !e.cfg.Engine.ChunkedPrefillEnabled && n > budget {
			break
		}
		n = min(n, budget)
		fresh := e.blocksFor(computed+n) - hits
		need := fresh
		if e.cfg.Engine.ReserveFullSequence {
			need = e.blocksFor(stream) - hits
		}
		if need > e.kv.numFree-hitsFree {
			e.m.kvAllocFailures++
			break
		}
		e.waiting.popFront(e.reqs)
		r.blocks = e.int32s.grow(r.blocks, max(hits+fresh, e.blockCap(r)))
		// Blocks loaded from the disk or the store, registered on the GPU
		// as computed ones are (the last of the reloaded ones).
		var fetched int64
		if reload > 0 {
			// Read the CPU copies before allocating: allocation may evict
			// GPU blocks into the CPU tier and push these out of it.
			fetched = e.loadTiers(r, hits, reload)
		}
		r.blocks = e.kv.acquire(e.hit, r.blocks)
		r.blocks, _ = e.kv.allocate(fresh, r.blocks)
		e.journey(r, JourneyScheduled, e.now)
		e.transition(r, stQueued, stRunning)
		if r.preemptions == 0 {
			r.firstScheduled = e.now
			e.m.promptTokens += r.spec.PromptTokens
			e.m.cachedTokens += hits * e.blockSize
			r.firstCached = computed
		}
		r.cached = hits
		r.computed = computed
		r.committed = hits + reload - fetched
		// Blocks reloaded from the CPU count as committed but are not
		// registered on the GPU; a holder record over them (-1: none)
		// keeps releaseBlocks from registering them.
		if n := r.committed - int64(len(r.holder)); n > 0 && reload > 0 {
			r.holder = e.int32s.grow(r.holder, n)
			for range n {
				r.holder = append(r.holder, -1)
			}
		}
		r.scheduled = n
		e.running = append(e.running, idx)
		budget -= n
		e.compose(r, n)
	}
	return budget
}

// compose adds a request scheduled for n tokens to the step's composition,
// in scheduling order (the running batch's order), as it is scheduled.
// Requests scheduled earlier in a step are never preempted later in it, so
// what is added stays. (scheduleBatch adds most decode requests itself:
// their terms are integer sums, whose order does not matter.)
func (e *Engine) compose(r *request, n int64) {
	in := &e.batch.Beta
	// It finishes this step if it catches up with its stream and that
	// token is its last.
	if r.outputs+1 >= r.spec.OutputTokens && r.computed+n == r.spec.PromptTokens+r.outputs {
		e.finishing++
	}
	if r.outputs == 0 {
		in.AddPrefill(r.computed, n)
		return
	}
	// A decode-phase request: one token, or its whole stream again after a
	// preemption (vLLM counts it as decode once it has produced a token).
	in.DecodeTokens += n
	in.ScheduledTokens += n
	in.NumDecodeReqs++
	in.DecodeContextTokens += r.computed + n
	in.SumDecodeKVBlocks += int64(len(r.blocks))
}

// stepTime completes the step's composition (scheduling built it) and
// is the batch's time through the latency model (and
// the disk and store loads), clamped to [1, MaxDurationUs].
func (e *Engine) stepTime(preempted int64) int64 {
	b := &e.batch
	b.AtUs = e.now
	reload := b.ReloadBlocks
	in := &b.Beta
	in.RunningDepth = int64(len(e.running))
	g := e.cfg.Latency.PreemptionGamma()
	e.preemptEMA = g*float64(preempted)/float64(max(1, len(e.running))) + (1-g)*e.preemptEMA
	in.PreemptionEMA = e.preemptEMA
	in.TransferBlocks = reload + e.storedLastStep
	in.CPUResidentReadBlocks = reload
	if e.kv.stepStored > 0 || (e.kv.cpu != nil && e.kv.cpu.stepEvicted > 0) {
		e.emitOffload()
	}
	dt := e.cfg.Latency.StepTimeUs(b)
	if x := e.kv.x; x != nil {
		dt = x.addLoad(e.now, dt) // disk and store loads (sim/tiers.go)
	}
	switch {
	case dt < 1:
		e.m.clamped.ToOneUs++
		dt = 1
	case dt > MaxDurationUs:
		e.m.clamped.ToMaxDuration++
		dt = MaxDurationUs
	}
	return dt
}

// executeBatch runs the composed batch for dt µs: each scheduled request's
// tokens, first tokens and inter-token latencies.
func (e *Engine) executeBatch(preempted, dt int64) {
	if e.now > MaxTimeUs-dt {
		panic(&LimitError{AtUs: e.now, Detail: fmt.Sprintf("step %d of %d µs would take the clock past %d µs (2^61): the latency model's step times are far beyond any real deployment's", e.stepID, dt, MaxTimeUs)})
	}
	e.summarize(preempted, dt)
	end := e.now + dt
	// A request that produced a token at the end of the previous step,
	// which is this step's start, waited exactly dt for this one: those
	// inter-token latencies are counted together.
	var sinceLastStep, tokens int64
	prefix := e.cfg.Engine.PrefixCachingEnabled
	reqs, now, running := e.reqs, e.now, e.running
	// The usual case first, in a loop without calls: a decode step that
	// samples the request's next token one step after its last and fills
	// no block. The others follow in order; the two sets touch disjoint
	// requests and only commutative sums besides.
	if cap(e.rare) < len(running) {
		e.rare = make([]int32, len(running), 2*len(running))
	}
	rare := e.rare[:len(running)]
	k := 0
	for _, idx := range running {
		r := &reqs[idx]
		n := r.scheduled
		if n == 0 {
			continue
		}
		if c := r.computed + n; r.outputs > 0 && c == r.spec.PromptTokens+r.outputs && r.lastToken == now &&
			(!prefix || e.fullBlocks(c) <= r.committed) {
			r.computed = c
			r.outputs++
			r.lastToken = end
			tokens++
			sinceLastStep++
			continue
		}
		rare[k] = idx
		k++
	}
	for _, idx := range rare[:k] {
		r := &reqs[idx]
		r.computed += r.scheduled
		if r.outputs == 0 {
			// Once a token is out the whole prompt was computed once.
			r.prefillDone = max(r.prefillDone, min(r.computed, r.spec.PromptTokens))
		}
		if prefix && e.fullBlocks(r.computed) > r.committed {
			e.commitFull(r, e.fullBlocks(r.computed))
		}
		if r.computed != r.spec.PromptTokens+r.outputs {
			continue
		}
		// The stream is caught up: the step samples a token.
		r.outputs++
		tokens++
		switch {
		case r.outputs == 1:
			r.firstToken = end
			e.m.prefilledTokens += r.spec.PromptTokens
			e.journey(r, JourneyFirstToken, end)
		case r.lastToken == now:
			sinceLastStep++
		default:
			e.m.itl.add(end - r.lastToken)
		}
		r.lastToken = end
	}
	e.m.outputTokens += tokens
	e.m.itl.addN(dt, sinceLastStep)
	e.batch.ReloadBlocks = 0
	// Blocks stored to the CPU during this step's scheduling are copied in
	// the next step, as vLLM does (a store committed at step S transfers at
	// S+1), so they are charged there.
	e.storedLastStep = e.kv.stepStored
}

func (e *Engine) emitOffload() {
	o := e.cfg.Observer
	if o == nil {
		return
	}
	if e.kv.stepStored > 0 {
		e.kev = KVEvent{Kind: KVStore, Step: e.stepID, AtUs: e.now, Req: -1, Blocks: e.kv.stepStored}
		o.KV(&e.kev)
	}
	if e.kv.cpu.stepEvicted > 0 {
		e.kev = KVEvent{Kind: KVCPUEviction, Step: e.stepID, AtUs: e.now, Req: -1, Blocks: e.kv.cpu.stepEvicted}
		o.KV(&e.kev)
	}
}

// commitFull registers the request's newly filled blocks, up to full, as
// cached content. Shared content (block i < SharedBlocks) goes to the
// prefix index at once, for other requests to find. The request's own
// blocks are registered when it releases them (releaseBlocks), in the pass
// that touches each block anyway: only the request itself can look them up
// and it does not while it holds them, so the deferral changes nothing but
// the cache misses. Own blocks it registered before a preemption (those
// its holder record covers) are the exception, done here, since whether
// the old copy is still cached is a question about now.
func (e *Engine) commitFull(r *request, full int64) {
	i := r.committed
	if shared := min(full, SharedBlocks(&r.spec, e.blockSize)); i < shared {
		e.ensureHashes(r, shared)
		for ; i < shared; i++ {
			e.kv.commit(r.blocks[i], r.hashes[i])
		}
	}
	if again := min(full, int64(len(r.holder))); i < again {
		e.ensureHashes(r, again)
		for ; i < again; i++ {
			e.commitOwn(r, i)
		}
	}
	r.committed = full
}

// releaseBlocks releases the request's blocks, registering first the own
// blocks commitFull left to it (from the end of its holder record, or of
// its shared blocks, to its committed ones). A request that stays (a
// preemption) records them in its holder record to find them again; for
// one that leaves they are gone content, hashed only if a CPU tier may
// store them when they are evicted.
//
// The blocks from there on are the request's own and no one else's (own
// content is found only through its owner's holder record, and these
// are past it), fresh since their allocation cleared them: the release
// need not read them.
func (e *Engine) releaseBlocks(r *request, leaving bool) {
	var from, to int64 // without prefix caching no block is shared or cached
	if e.cfg.Engine.PrefixCachingEnabled {
		from = max(int64(len(r.holder)), SharedBlocks(&r.spec, e.blockSize))
		to = max(from, r.committed)
	}
	if e.cfg.Options.Exhaustive {
		for _, b := range r.blocks[min(from, int64(len(r.blocks))):] {
			if blk := &e.kv.blocks[b]; blk.ref != 1 || blk.hashed {
				e.fail("INV-4", "request %d releases block %d as its own alone, but its refcount is %d and hashed %v", r.spec.ID, b, blk.ref, blk.hashed)
			}
		}
	}
	var hashes []uint64
	switch {
	case from >= to:
	case !leaving:
		r.holder = e.int32s.grow(r.holder, to-int64(len(r.holder)))
		for int64(len(r.holder)) < from {
			r.holder = append(r.holder, -1)
		}
		r.holder = append(r.holder, r.blocks[from:to]...)
		fallthrough
	case e.kv.cpu != nil:
		e.ensureHashes(r, to)
		hashes = r.hashes
	}
	e.kv.releaseOwn(r.blocks, hashes, from, to)
	r.blocks = r.blocks[:0]
}

// commitOwn registers the request's own block i (< len(holder)) as cached
// content, unless an earlier copy of it is still cached (it then stays
// anonymous, as a shared block whose prefix another block holds does).
func (e *Engine) commitOwn(r *request, i int64) {
	h := r.hashes[i]
	if old := r.holder[i]; old >= 0 && e.kv.holds(old, h) {
		return
	}
	b := r.blocks[i]
	r.holder[i] = b
	blk := &e.kv.blocks[b]
	e.kv.hashes[b], blk.hashed, blk.own = h, true, true
}

// matchPrefix finds the leading blocks of r's stream, up to n, that are
// cached on the GPU: shared ones in the prefix index, the request's own
// where it last registered them. It leaves their ids in e.hit and returns
// how many there are and how many of those are free.
//
// Hashes are computed as far as the match can go: the shared blocks, then
// the own blocks the request's holder record covers (none for a request
// never preempted), so a new request hashes its own blocks only if it has
// to register them (releaseBlocks).
func (e *Engine) matchPrefix(r *request, n int64) (hits, hitsFree int64) {
	kv := e.kv
	shared := SharedBlocks(&r.spec, e.blockSize)
	for i := int64(0); i < n; i++ {
		var b int32
		if i < shared {
			e.ensureHashes(r, min(n, shared))
			var ok bool
			if b, ok = kv.index.Get(r.hashes[i]); !ok {
				break
			}
		} else {
			if i >= int64(len(r.holder)) {
				break
			}
			if b = r.holder[i]; b < 0 {
				break
			}
			e.ensureHashes(r, min(n, int64(len(r.holder))))
			if !kv.holds(b, r.hashes[i]) {
				break
			}
		}
		e.hit = append(e.hit, b)
		if kv.blocks[b].ref == 0 {
			hitsFree++
		}
	}
	return int64(len(e.hit)), hitsFree
}

// processCompletions releases the KV of requests that produced their last
// token, records their metrics and reports them; the running list keeps its
// order. Their slots are freed for reuse.
func (e *Engine) processCompletions(dt int64) {
	if e.finishing == 0 {
		return
	}
	end := e.now + dt
	kept := e.running[:0]
	for _, idx := range e.running {
		r := &e.reqs[idx]
		if r.outputs < r.spec.OutputTokens {
			kept = append(kept, idx)
			continue
		}
		r.finished = end
		if r.spec.Handoff == HandoffPrefill {
			e.keep(r) // its KV waits for the decode instance's pull
		} else {
			e.transition(r, stRunning, stFinished)
			e.releaseBlocks(r, true)
		}
		// The response closes (api.DEPARTED) the departure overhead after
		// the step, and never before its last token reached the client:
		// a departure overhead fitted from traces (FINISHED → DEPARTED)
		// already includes the output path.
		departed := end + max(e.outDelay, e.cfg.Latency.DepartureOverheadUs(r.outputs))
		e.journey(r, JourneyFinished, end)
		if o := e.cfg.Observer; o != nil {
			o.Departed(r.spec.ID, departed)
		}
		if r.spec.Handoff != HandoffPrefill {
			e.m.complete(r, departed)
		}
		e.checkCausality(r, departed)
		e.done = append(e.done, Completion{ID: r.spec.ID, ArrivalUs: r.spec.ArrivalUs, InjectedUs: r.injected, EnqueuedUs: r.enqueued,
			FirstScheduledUs: r.firstScheduled, FirstTokenUs: r.firstToken + e.outDelay, FinishedUs: r.finished + e.outDelay, DepartedUs: departed,
			PromptTokens: r.spec.PromptTokens, OutputTokens: r.outputs, CachedTokens: r.firstCached, Preemptions: r.preemptions,
			Tenant: r.spec.Tenant, SLOClass: r.spec.SLOClass, HandedOff: r.spec.Handoff == HandoffPrefill})
		if r.spec.Handoff != HandoffPrefill {
			e.release(idx)
		}
	}
	e.running = kept
}

func (e *Engine) scheduleNextStep(dt int64) {
	e.m.busyUs += dt
	e.m.lastStepEnd = e.now + dt
	if len(e.running) > 0 || e.waiting.len() > 0 {
		e.ensureStep(e.now + dt)
		e.chained = true
	}
	e.checkWorkConserving()
}

func (e *Engine) summarize(preempted, dt int64) {
	st := &e.summary
	in := &e.batch.Beta
	*st = StepSummary{
		ID:           e.stepID,
		StartUs:      e.now,
		CycleUs:      dt,
		Running:      int64(len(e.running)),
		Waiting:      int64(e.waiting.len()),
		NumPrefill:   in.NumPrefillReqs,
		NumDecode:    in.NumDecodeReqs,
		Scheduled:    in.ScheduledTokens,
		PrefillTok:   in.PrefillTokens,
		DecodeTok:    in.DecodeTokens,
		NumPreempted: preempted,
		KVTotal:      e.kv.total(),
		KVFree:       e.kv.numFree,
	}
	st.KVUsage = float64(e.kv.used()) / float64(e.kv.total())
	// vLLM's step.duration_us is the scheduler's own time: a fixed cost plus
	// a little per request it looked at, never more than the step.
	st.SchedulerUs = min(dt, 40+st.Running/2+st.Waiting/20)
	st.NumFinished = e.finishing
	e.m.steps++
	e.checkSignals()
	if o := e.cfg.Observer; o != nil {
		o.Step(st, e)
	}
}

// Snapshots implements SnapshotSource for the current step.
func (e *Engine) Snapshots(dst []RequestSnapshot) []RequestSnapshot {
	for _, idx := range e.running {
		r := &e.reqs[idx]
		dst = append(dst, RequestSnapshot{
			Req:               r.spec.ID,
			Phase:             e.phase(r),
			PromptTokens:      r.spec.PromptTokens,
			ComputedTokens:    r.computed,
			OutputTokens:      r.outputs,
			Preemptions:       r.preemptions,
			ScheduledThisStep: r.scheduled,
			BlocksAllocated:   int64(len(r.blocks)) - r.cached,
			BlocksCached:      r.cached,
		})
	}
	return dst
}
