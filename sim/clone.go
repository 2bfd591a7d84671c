package sim

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

// Clone returns an independent copy of the engine as it is now: its
// clock, requests (in transit, in API processing, queued, running), event
// queue, waiting queue, running batch, KV cache with its prefix index and
// CPU tier, and latency model (noise streams included, at their current
// position). Driven with the same calls, the copy does exactly what the
// original would; nothing done to the copy reaches the original, and
// nothing done to the original afterwards reaches the copy. It is how a
// cluster asks "what if this request had been sent there" without
// disturbing the run (docs/anomalies.md, "TTFT regret").
//
// The copy reports to obs (nil: no observer), never to the original's
// observer. Its metrics start over: the latency histograms are empty and
// keep nothing of the original's, while the counters the engine's own
// invariants and scheduling read (steps, preemptions, the last step's
// end, request counts) are copied. Cloning reads the original and writes
// nothing to it; it allocates about the engine's state (its KV block
// table and prefix index, and every request's block table).
//
// A latency model is shared between the two when it has no state of its
// own (Blackbox, Physics); Roofline, Noisy and SlowStart are copied, and
// any other model must implement LatencyCloner, or Clone fails.
func (e *Engine) Clone(obs Observer) (*Engine, error) { return e.CloneInto(nil, obs) }

// CloneInto is Clone reusing the memory of old, an engine that an earlier
// Clone or CloneInto returned and that nothing uses any more (nil: none):
// old's large arrays (the request table, the event queue, the KV block
// table and prefix index) are overwritten with e's state, so that cloning
// repeatedly (a counterfactual per sampled decision) allocates little.
// The result is old, or a new engine when old is nil; old must not be e,
// an engine whose arrays anything else holds, or used otherwise again.
func (e *Engine) CloneInto(old *Engine, obs Observer) (*Engine, error) {
	if e.retired != nil {
		return nil, errors.New("sim: cannot clone a retired engine")
	}
	if old == e {
		return nil, errors.New("sim: cannot clone an engine into itself")
	}
	lat, err := cloneLatency(e.cfg.Latency)
	if err != nil {
		return nil, err
	}
	c := old
	if c == nil {
		c = new(Engine)
	}
	reqs, free, ev, wheap, wring, running, kv := c.reqs, c.free, c.events, c.waiting.heap, c.waiting.ring, c.running, c.kv
	*c = *e // every value field; the reference fields are replaced below
	c.cfg.Latency = lat
	c.cfg.Observer = obs
	c.batch.memo = nil // the roofline's memo (kernelMemo) is each engine's own
	if e.lock != nil {
		l := *e.lock
		l.dummy.memo = nil
		c.lock = &l
	}
	c.reqs = reuse(reqs, e.reqs)
	for i := range e.reqs {
		r := &c.reqs[i]
		if r.state == stFree {
			r.blocks, r.hashes, r.holder = nil, nil, nil
			continue
		}
		r.blocks = slices.Clone(r.blocks)
		r.hashes = slices.Clone(r.hashes)
		r.holder = slices.Clone(r.holder)
	}
	c.free = reuse(free, e.free)
	c.int32s, c.uint64s = arrayPool[int32]{}, arrayPool[uint64]{}
	c.events = ev
	e.events.q.CloneInto(&c.events.q)
	c.waiting = e.waiting
	c.waiting.heap = reuse(wheap, e.waiting.heap)
	c.waiting.ring = reuse(wring, e.waiting.ring)
	c.running = reuse(running, e.running)
	c.kv = e.kv.cloneInto(kv)
	c.hit, c.rare, c.done, c.pulls = nil, nil, nil, nil // the last Advance's scratch
	if e.byID != nil {
		c.byID = maps.Clone(e.byID)
	}
	c.m = e.m.clone()
	return c, nil
}

// reuse is a copy of src in dst's array when it is large enough (nil
// for nil, as slices.Clone).
func reuse[T any](dst, src []T) []T {
	if src == nil {
		return nil
	}
	return append(dst[:0], src...)
}

// cloneInto is a deep copy of the cache in old's arrays (old: a clone's
// cache that nothing uses any more, or nil); the prefix index reads the
// copy's hashes.
func (k *kvCache) cloneInto(old *kvCache) *kvCache {
	c := old
	if c == nil {
		c = new(kvCache)
	}
	blocks, hashes, ring, spare, index := c.blocks, c.hashes, c.ring, c.spare, c.index
	*c = *k
	c.blocks = reuse(blocks, k.blocks)
	c.hashes = reuse(hashes, k.hashes)
	c.ring = reuse(ring, k.ring)
	c.spare = reuse(spare, k.spare)
	if k.index != nil {
		c.index = k.index.CloneInto(index, func(b int32) uint64 { return c.hashes[b] })
	}
	if k.cpu != nil {
		c.cpu = k.cpu.clone()
	}
	c.x = k.x.clone(c) // sim/tiers.go
	return c
}

// clone is a deep copy of the CPU tier, its LRU order kept.
func (t *cpuTier) clone() *cpuTier {
	c := new(cpuTier)
	*c = *t
	c.entries = make(map[uint64]*cpuEntry, len(t.entries))
	c.pool = make([]cpuEntry, 0, len(t.entries))
	c.head, c.tail = nil, nil
	for e := t.head; e != nil; e = e.next {
		c.pool = append(c.pool, cpuEntry{hash: e.hash, storedAt: e.storedAt, shared: e.shared})
	}
	for i := range c.pool {
		n := &c.pool[i]
		c.entries[n.hash] = n
		c.append(n)
	}
	// The next store starts a new chunk: entries never move.
	c.pool = c.pool[len(c.pool):]
	return c
}

// clone copies the counters and starts the latency samples and records
// over.
func (m *metrics) clone() metrics {
	c := *m
	c.ttft, c.e2e, c.sched, c.records = nil, nil, nil, nil
	c.ttftH, c.itl, c.e2eH, c.schedH = Histogram{}, Histogram{}, Histogram{}, Histogram{}
	return c
}

// LatencyCloner is a latency model with state of its own (a random
// stream, a clock): CloneLatency returns an independent copy in the same
// state, for Engine.Clone.
type LatencyCloner interface {
	CloneLatency() (LatencyModel, error)
}

func cloneLatency(m LatencyModel) (LatencyModel, error) {
	switch x := m.(type) {
	case LatencyCloner:
		return x.CloneLatency()
	case *Noisy:
		inner, err := cloneLatency(x.Inner)
		if err != nil {
			return nil, err
		}
		if x.src == nil {
			return nil, fmt.Errorf("sim: latency noise made with NewNoisy cannot be cloned (its stream's state is hidden); make it with NewNoisySource")
		}
		src := *x.src
		return &Noisy{Inner: inner, Sigma: x.Sigma, src: &src, rng: rand.New(&src)}, nil
	case *SlowStart:
		inner, err := cloneLatency(x.Inner)
		if err != nil {
			return nil, err
		}
		c := *x
		c.Inner = inner
		return &c, nil
	case *Blackbox, *Physics:
		return m, nil // read-only while stepping
	}
	return nil, fmt.Errorf("sim: latency model %s (%T) has no CloneLatency method, so an engine using it cannot be cloned", m.Name(), m)
}

// OutputDelayUs is the engine's Pipeline.OutputDelayUs: how long after
// the step that produced it a token reaches the client.
func (e *Engine) OutputDelayUs() int64 { return e.outDelay }

// Waiting is the number of requests in the waiting queue (Status's
// QueueDepth, without the rest of Status).
func (e *Engine) Waiting() int64 { return int64(e.waiting.len()) }
