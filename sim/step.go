package sim

// step runs one engine iteration (seed 004): schedule a batch, execute it
// through the latency model, process completions, schedule the next step.
func (s *Sim) step() {
	s.stepID++
	s.kv.now = s.now
	s.kv.stepStored = 0
	if s.kv.cpu != nil {
		s.kv.cpu.stepEvicted = 0
	}
	preempted := s.scheduleBatch()
	dt := s.executeBatch(preempted)
	s.processCompletions(dt)
	s.scheduleNextStep(dt)
	if s.cfg.Exhaustive {
		s.checkExhaustive()
	} else {
		s.checkKV(false)
	}
}

// scheduleBatch is vLLM's continuous batching: running requests first, each
// taking its remaining tokens (capped by the long-prefill threshold and the
// budget), preempting from the tail when KV blocks run out; then, if nothing
// was preempted, waiting requests in policy order while seats, budget and
// blocks last. It returns the number of requests preempted.
func (s *Sim) scheduleBatch() int64 {
	budget := s.cfg.MaxBatchedTokens
	var preempted int64
	for i := 0; i < len(s.running); i++ {
		idx := s.running[i]
		r := &s.reqs[idx]
		r.scheduled = 0
		n := s.newTokens(r, budget)
		if n == 0 {
			continue
		}
		need := s.blocksFor(r.computed+n) - int64(len(r.blocks))
		self := false
		for {
			var ok bool
			if r.blocks, ok = s.kv.allocate(need, r.blocks); ok {
				break
			}
			// Evict from the tail, which is never before i: requests
			// already scheduled this step keep their blocks.
			s.m.kvAllocFailures++
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			preempted++
			if victim == idx {
				self = true
				break
			}
		}
		if self {
			break
		}
		r.scheduled = n
		budget -= n
	}
	if preempted == 0 {
		s.admitWaiting(budget)
	}
	return preempted
}

// newTokens is what a request can compute this step.
func (s *Sim) newTokens(r *request, budget int64) int64 {
	n := r.spec.PromptTokens + r.outputs - r.computed
	if t := s.cfg.LongPrefillThreshold; t > 0 && n > t {
		n = t
	}
	return min(n, budget)
}

// preempt evicts a running request by recompute: its blocks are released
// (their prefix hashes stay cached until reused) and it returns to the
// front of the queue with nothing computed.
func (s *Sim) preempt(idx int32) {
	r := &s.reqs[idx]
	s.running = s.running[:len(s.running)-1]
	s.kv.release(r.blocks)
	r.blocks = r.blocks[:0]
	r.computed, r.committed, r.cached, r.scheduled = 0, 0, 0, 0
	r.preemptions++
	s.m.preemptions++
	s.transition(r, stRunning, stQueued)
	s.journey(r, JourneyPreempted, s.now)
	if s.waiting.keyed {
		s.waiting.push(s.reqs, idx)
	} else {
		s.waiting.pushFront(idx)
	}
}

func (s *Sim) admitWaiting(budget int64) {
	for s.waiting.len() > 0 && int64(len(s.running)) < s.cfg.MaxNumSeqs && budget > 0 {
		idx := s.waiting.front()
		r := &s.reqs[idx]
		stream := r.spec.PromptTokens + r.outputs
		// At least one token is computed, so at most (stream-1)/bs blocks
		// can come from caches.
		maxHit := (stream - 1) / s.cfg.BlockSize
		var hits, hitsFree, reload int64
		if s.cfg.PrefixCaching {
			s.ensureHashes(r, maxHit)
			hits, hitsFree = s.kv.match(r.hashes[:maxHit])
			if s.kv.cpu != nil {
				reload = s.kv.cpu.match(r.hashes[hits:maxHit])
			}
		}
		computed := (hits + reload) * s.cfg.BlockSize
		n := stream - computed
		if t := s.cfg.LongPrefillThreshold; t > 0 && n > t {
			n = t
		}
		if !s.cfg.ChunkedPrefill && n > budget {
			break
		}
		n = min(n, budget)
		fresh := s.blocksFor(computed+n) - hits
		if fresh > s.kv.numFree-hitsFree {
			s.m.kvAllocFailures++
			break
		}
		s.waiting.popFront()
		if r.blocks == nil {
			r.blocks = make([]int32, 0, s.blocksFor(r.spec.PromptTokens+r.spec.OutputTokens))
		}
		if reload > 0 {
			// Read the CPU copies before allocating: allocation may evict
			// GPU blocks into the CPU tier and push these out of it.
			s.kv.cpu.reload(r.hashes[hits:hits+reload], s.now)
			s.batch.ReloadBlocks += reload
			if o := s.cfg.Observer; o != nil {
				s.kev = KVEvent{Kind: KVLoad, Step: s.stepID, AtUs: s.now, Req: r.spec.ID, Blocks: reload}
				o.KV(&s.kev)
			}
		}
		r.blocks = s.kv.acquireCached(r.hashes, hits, r.blocks)
		r.blocks, _ = s.kv.allocate(fresh, r.blocks)
		s.journey(r, JourneyScheduled, s.now)
		s.transition(r, stQueued, stRunning)
		if r.preemptions == 0 {
			r.firstScheduled = s.now
			s.m.promptTokens += r.spec.PromptTokens
			s.m.cachedTokens += hits * s.cfg.BlockSize
			r.firstCached = computed
		}
		r.cached = hits
		r.computed = computed
		r.committed = hits + reload
		r.scheduled = n
		s.running = append(s.running, idx)
		budget -= n
	}
}

// executeBatch builds the step's composition, asks the latency model for
// its time and advances every scheduled request.
func (s *Sim) executeBatch(preempted int64) int64 {
	b := &s.batch
	reload := b.ReloadBlocks
	*b = Batch{ReloadBlocks: reload}
	in := &b.Beta
	for _, idx := range s.running {
		r := &s.reqs[idx]
		n := r.scheduled
		if n == 0 {
			continue
		}
		if r.outputs == 0 {
			in.AddPrefill(r.computed, n)
		} else {
			// A decode-phase request: one token, or its whole stream again
			// after a preemption (vLLM counts it as decode once it has
			// produced a token).
			in.DecodeTokens += n
			in.ScheduledTokens += n
			in.NumDecodeReqs++
			in.DecodeContextTokens += r.computed + n
			in.SumDecodeKVBlocks += int64(len(r.blocks))
		}
	}
	in.RunningDepth = int64(len(s.running))
	g := s.cfg.Latency.PreemptionGamma()
	s.preemptEMA = g*float64(preempted)/float64(max(1, len(s.running))) + (1-g)*s.preemptEMA
	in.PreemptionEMA = s.preemptEMA
	in.TransferBlocks = reload + s.storedLastStep
	in.CPUResidentReadBlocks = reload
	if s.kv.stepStored > 0 || (s.kv.cpu != nil && s.kv.cpu.stepEvicted > 0) {
		s.emitOffload()
	}
	dt := s.cfg.Latency.StepTimeUs(b)
	if dt < 1 {
		s.fail("INV-3", "latency model %s returned step time %d µs", s.cfg.Latency.Name(), dt)
	}
	s.summarize(preempted, dt)
	end := s.now + dt
	for _, idx := range s.running {
		r := &s.reqs[idx]
		if r.scheduled == 0 {
			continue
		}
		r.computed += r.scheduled
		r.prefillDone = max(r.prefillDone, min(r.computed, r.spec.PromptTokens))
		s.commitFull(r)
		if r.computed == r.spec.PromptTokens+r.outputs {
			// The stream is caught up: the step samples a token.
			r.outputs++
			if r.outputs == 1 {
				r.firstToken = end
				s.journey(r, JourneyFirstToken, end)
			} else {
				s.m.itl.add(end - r.lastToken)
			}
			r.lastToken = end
			s.m.outputTokens++
		}
	}
	s.batch.ReloadBlocks = 0
	// Blocks stored to the CPU during this step's scheduling are copied in
	// the next step, as vLLM does (a store committed at step S transfers at
	// S+1), so they are charged there.
	s.storedLastStep = s.kv.stepStored
	return dt
}

func (s *Sim) emitOffload() {
	o := s.cfg.Observer
	if o == nil {
		return
	}
	if s.kv.stepStored > 0 {
		s.kev = KVEvent{Kind: KVStore, Step: s.stepID, AtUs: s.now, Req: -1, Blocks: s.kv.stepStored}
		o.KV(&s.kev)
	}
	if s.kv.cpu.stepEvicted > 0 {
		s.kev = KVEvent{Kind: KVCPUEviction, Step: s.stepID, AtUs: s.now, Req: -1, Blocks: s.kv.cpu.stepEvicted}
		o.KV(&s.kev)
	}
}

// commitFull registers the request's newly filled blocks in the prefix
// index.
func (s *Sim) commitFull(r *request) {
	if !s.cfg.PrefixCaching {
		return
	}
	full := r.computed / s.cfg.BlockSize
	if full <= r.committed {
		return
	}
	s.ensureHashes(r, full)
	for i := r.committed; i < full; i++ {
		s.kv.commit(r.blocks[i], r.hashes[i])
	}
	r.committed = full
}

// processCompletions releases the KV of requests that produced their last
// token and records their metrics; the running list keeps its order.
func (s *Sim) processCompletions(dt int64) {
	end := s.now + dt
	kept := s.running[:0]
	s.finished = s.finished[:0]
	for _, idx := range s.running {
		r := &s.reqs[idx]
		if r.outputs < r.spec.OutputTokens {
			kept = append(kept, idx)
			continue
		}
		s.transition(r, stRunning, stFinished)
		r.finished = end
		s.kv.release(r.blocks)
		r.blocks = nil
		r.hashes = nil
		r.departed = end + s.cfg.Latency.DepartureOverheadUs(r.outputs)
		s.journey(r, JourneyFinished, end)
		if o := s.cfg.Observer; o != nil {
			o.Departed(r.spec.ID, r.departed)
		}
		s.m.complete(r)
		s.checkCausality(r)
	}
	s.running = kept
}

func (s *Sim) scheduleNextStep(dt int64) {
	if len(s.running) > 0 || s.waiting.len() > 0 {
		s.ensureStep(s.now + dt)
	}
	s.m.busyUs += dt
	s.m.lastStepEnd = s.now + dt
	s.checkWorkConserving()
}

func (s *Sim) summarize(preempted, dt int64) {
	st := &s.summary
	in := &s.batch.Beta
	*st = StepSummary{
		ID:           s.stepID,
		StartUs:      s.now,
		CycleUs:      dt,
		Running:      int64(len(s.running)),
		Waiting:      int64(s.waiting.len()),
		NumPrefill:   in.NumPrefillReqs,
		NumDecode:    in.NumDecodeReqs,
		Scheduled:    in.ScheduledTokens,
		PrefillTok:   in.PrefillTokens,
		DecodeTok:    in.DecodeTokens,
		NumPreempted: preempted,
		KVTotal:      s.kv.total(),
		KVFree:       s.kv.numFree,
	}
	st.KVUsage = float64(s.kv.used()) / float64(s.kv.total())
	// vLLM's step.duration_us is the scheduler's own time: a fixed cost plus
	// a little per request it looked at, never more than the step.
	st.SchedulerUs = min(dt, 40+st.Running/2+st.Waiting/20)
	for _, idx := range s.running {
		r := &s.reqs[idx]
		if r.scheduled > 0 && r.outputs+1 >= r.spec.OutputTokens && r.computed+r.scheduled == r.spec.PromptTokens+r.outputs {
			st.NumFinished++
		}
	}
	s.m.steps++
	s.checkSignals()
	if o := s.cfg.Observer; o != nil {
		o.Step(st, s)
	}
}

// Snapshots implements SnapshotSource for the current step.
func (s *Sim) Snapshots(dst []RequestSnapshot) []RequestSnapshot {
	for _, idx := range s.running {
		r := &s.reqs[idx]
		dst = append(dst, RequestSnapshot{
			Req:               r.spec.ID,
			Phase:             s.phase(r),
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
