// Package sim is a deterministic discrete-event simulator of one vLLM
// instance (seed 004): requests arrive, wait, are batched by vLLM's
// continuous-batching scheduler with chunked prefill, hold KV blocks with
// prefix caching and optional CPU offload, are preempted by recompute under
// memory pressure, and finish. A LatencyModel gives each step's time.
//
// The engine is a plain state machine driven by an event heap ordered by
// (time, kind, sequence), with an integer-microsecond clock and no I/O:
// Run takes a workload and returns a Result. Randomness comes only from
// named streams of RNG. Observers (the trace writer) see every event.
// docs/simulator.md states the rules; invariants.go checks INV-1..INV-8.
package sim

import (
	"fmt"
	"math"
)

// Config is one instance's engine configuration.
type Config struct {
	MaxNumSeqs       int64 // --max-num-seqs
	MaxBatchedTokens int64 // --max-num-batched-tokens: token budget per step
	// LongPrefillThreshold caps the tokens one request may prefill in a
	// step (--long-prefill-token-threshold); 0 = no cap beyond the budget.
	LongPrefillThreshold int64
	ChunkedPrefill       bool // off: a prompt that does not fit the budget waits
	BlockSize            int64
	TotalKVBlocks        int64
	PrefixCaching        bool

	// CPU offload tier; off when CPUKVBlocks is 0.
	CPUKVBlocks      int64
	OffloadThreshold float64 // GPU usage share above which evicted blocks go to CPU

	Scheduler SchedulerPolicy
	Priority  PriorityPolicy

	Latency LatencyModel

	// HorizonUs stops the run at this time (0: run until every request has
	// left).
	HorizonUs int64

	// Exhaustive checks every invariant in full after every step (slow; for
	// tests and --debug-invariants). The cheap checks always run.
	Exhaustive bool

	Observer Observer // nil: none
	// RecordRequests keeps per-request records in the Result.
	RecordRequests bool
}

// Validate checks a configuration; errors name the CLI flag.
func (c *Config) Validate() error {
	switch {
	case c.MaxNumSeqs <= 0:
		return fmt.Errorf("--max-num-seqs must be > 0, got %d", c.MaxNumSeqs)
	case c.MaxBatchedTokens <= 0:
		return fmt.Errorf("--max-num-batched-tokens must be > 0, got %d", c.MaxBatchedTokens)
	case c.LongPrefillThreshold < 0:
		return fmt.Errorf("--long-prefill-token-threshold must be >= 0, got %d", c.LongPrefillThreshold)
	case c.BlockSize <= 0:
		return fmt.Errorf("--block-size must be > 0, got %d", c.BlockSize)
	case c.TotalKVBlocks <= 0:
		return fmt.Errorf("--kv-blocks-gpu must be > 0, got %d", c.TotalKVBlocks)
	case c.TotalKVBlocks > math.MaxInt32:
		return fmt.Errorf("--kv-blocks-gpu %d is more than this simulator addresses (%d)", c.TotalKVBlocks, math.MaxInt32)
	case c.CPUKVBlocks < 0:
		return fmt.Errorf("--kv-blocks-cpu must be >= 0, got %d", c.CPUKVBlocks)
	case c.CPUKVBlocks > 0 && !(c.OffloadThreshold >= 0 && c.OffloadThreshold <= 1):
		return fmt.Errorf("--kv-offload-threshold must be in [0, 1], got %v", c.OffloadThreshold)
	case c.CPUKVBlocks > 0 && !c.PrefixCaching:
		return fmt.Errorf("--kv-blocks-cpu needs prefix caching: offloaded blocks are found again by their prefix hash")
	case c.HorizonUs < 0:
		return fmt.Errorf("--horizon must be >= 0, got %d", c.HorizonUs)
	case c.Latency == nil:
		return fmt.Errorf("no latency model")
	}
	if err := c.Priority.Validate(); err != nil {
		return err
	}
	return nil
}

// reqState is a request's place in the lifecycle (INV-2).
type reqState uint8

const (
	stPending  reqState = iota // not yet arrived
	stArriving                 // arrived, in API/tokenization overhead
	stQueued
	stRunning
	stFinished
	stDropped
)

type request struct {
	spec  *RequestSpec
	state reqState

	computed int64 // tokens whose KV exists
	outputs  int64 // tokens generated
	blocks   []int32
	cached   int64 // leading blocks taken from the prefix cache at the last admission
	// firstCached is the prompt tokens served from caches at first admission.
	firstCached int64
	// hashes[i] is the chained prefix hash of block i of the token stream.
	hashes    []uint64
	committed int64 // full blocks registered in the prefix index

	// prefillDone is the most prompt tokens ever computed: vLLM reports
	// this high-water mark, which survives a preemption.
	prefillDone int64

	preemptions int64
	sortKey     float64
	scheduled   int64 // tokens scheduled in the current step

	arrival, enqueued, firstScheduled, firstToken, finished, departed int64
	lastToken                                                         int64
}

// Sim is one simulation run. Create it with New, then call Run once.
type Sim struct {
	cfg   Config
	reqs  []request
	specs []RequestSpec

	now     int64
	events  eventHeap
	nextArr int // next request to inject

	waiting queue
	running []int32
	kv      *kvCache

	stepID      int64
	stepPending bool
	preemptEMA  float64
	// storedLastStep is the blocks the previous step stored to the CPU.
	storedLastStep int64

	batch    Batch
	jev      JourneyEvent
	kev      KVEvent
	summary  StepSummary
	finished []int32

	m metrics
}

// New prepares a run of reqs (validated with ValidateWorkload) under cfg.
func New(cfg Config, reqs []RequestSpec) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateWorkload(reqs); err != nil {
		return nil, err
	}
	var cpu *cpuTier
	if cfg.CPUKVBlocks > 0 {
		cpu = newCPUTier(cfg.CPUKVBlocks, cfg.OffloadThreshold)
	}
	s := &Sim{
		cfg:   cfg,
		specs: reqs,
		reqs:  make([]request, len(reqs)),
		kv:    newKVCache(cfg.TotalKVBlocks, cfg.BlockSize, cfg.PrefixCaching, cpu),
	}
	for i := range reqs {
		s.reqs[i] = request{spec: &reqs[i], arrival: reqs[i].ArrivalUs}
	}
	s.waiting.keyed = cfg.Scheduler != FCFS
	s.m.init(len(reqs), cfg.RecordRequests)
	return s, nil
}

// Run simulates until every request has left (or the horizon) and returns
// the metrics. It returns an *InvariantError if an invariant is violated.
func (s *Sim) Run() (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			ie, ok := r.(*InvariantError)
			if !ok {
				panic(r)
			}
			err = ie
		}
	}()
	s.injectNext()
	for s.events.len() > 0 {
		ev := s.events.peek()
		if s.cfg.HorizonUs > 0 && ev.at > s.cfg.HorizonUs {
			break
		}
		s.events.pop()
		if ev.at < s.now {
			s.fail("INV-3", "clock would go back from %d to %d µs (%s event)", s.now, ev.at, ev.kind)
		}
		s.now = ev.at
		switch ev.kind {
		case evArrival:
			s.onArrival(ev.req)
		case evQueued:
			s.onQueued(ev.req)
		case evStep:
			s.stepPending = false
			s.step()
		}
	}
	s.checkEnd()
	return s.result(), nil
}

func (s *Sim) injectNext() {
	if s.nextArr < len(s.reqs) {
		s.events.push(s.specs[s.nextArr].ArrivalUs, evArrival, int32(s.nextArr))
		s.nextArr++
	}
}

func (s *Sim) onArrival(i int32) {
	r := &s.reqs[i]
	s.transition(r, stPending, stArriving)
	s.m.injected++
	if o := s.cfg.Observer; o != nil {
		o.Arrived(r.spec)
	}
	s.events.push(s.now+s.cfg.Latency.ArrivalOverheadUs(r.spec.PromptTokens), evQueued, i)
	s.injectNext()
}

// blocksFor is the number of blocks that hold n tokens.
func (s *Sim) blocksFor(n int64) int64 { return (n + s.cfg.BlockSize - 1) / s.cfg.BlockSize }

func (s *Sim) onQueued(i int32) {
	r := &s.reqs[i]
	r.enqueued = s.now
	// The most KV a request ever holds is its prompt and all but its last
	// output token; one that cannot fit an empty cache would be preempted
	// forever, so it is refused (seed 004, DroppedUnservable).
	if reason := s.unservable(r); reason != "" {
		s.transition(r, stArriving, stDropped)
		s.m.dropped++
		if o := s.cfg.Observer; o != nil {
			o.Dropped(r.spec.ID, s.now, reason)
		}
		return
	}
	s.transition(r, stArriving, stQueued)
	r.sortKey = s.sortKey(r)
	s.waiting.push(s.reqs, i)
	s.journey(r, JourneyQueued, s.now)
	s.ensureStep(s.now)
}

// unservable says why a request can never complete, or "". Its longest
// stream is the prompt and all but the last output token: it must fit the
// whole KV cache, and without chunked prefill (where a prefill, including a
// recompute after preemption, runs in one step) the token budget too.
func (s *Sim) unservable(r *request) string {
	longest := r.spec.PromptTokens + r.spec.OutputTokens - 1
	if need := s.blocksFor(longest); need > s.kv.total() {
		return fmt.Sprintf("needs %d KV blocks, the cache has %d", need, s.kv.total())
	}
	if !s.cfg.ChunkedPrefill && longest > s.cfg.MaxBatchedTokens {
		return fmt.Sprintf("a %d-token prefill exceeds the %d-token budget and chunked prefill is off", longest, s.cfg.MaxBatchedTokens)
	}
	return ""
}

// ensureStep keeps the engine busy while there is work (INV-8).
func (s *Sim) ensureStep(at int64) {
	if !s.stepPending {
		s.stepPending = true
		s.events.push(at, evStep, -1)
	}
}

func (s *Sim) transition(r *request, from, to reqState) {
	if r.state != from {
		s.fail("INV-2", "request %d: transition to state %d from %d, expected %d", r.spec.ID, to, r.state, from)
	}
	r.state = to
}

func (s *Sim) phase(r *request) Phase {
	if r.state == stQueued {
		return PhaseWaiting
	}
	if r.outputs == 0 {
		return PhasePrefill
	}
	return PhaseDecode
}

func (s *Sim) journey(r *request, kind JourneyKind, at int64) {
	o := s.cfg.Observer
	if o == nil {
		return
	}
	// vLLM reports WAITING only on QUEUED; afterwards PREFILL until the
	// first token and DECODE after it, whatever the request's queue.
	phase := PhaseWaiting
	if kind != JourneyQueued {
		phase = PhasePrefill
		if r.outputs > 0 {
			phase = PhaseDecode
		}
	}
	// One scratch event: passing a pointer to a local through the interface
	// would allocate on every event.
	s.jev = JourneyEvent{
		Kind:           kind,
		Req:            r.spec.ID,
		AtUs:           at,
		Step:           s.stepID,
		Phase:          phase,
		PrefillDone:    r.prefillDone,
		PrefillTotal:   r.spec.PromptTokens,
		DecodeDone:     r.outputs,
		DecodeMax:      r.spec.OutputTokens,
		NumPreemptions: r.preemptions,
	}
	if kind == JourneyFinished {
		s.jev.FinishStatus = "length"
	}
	if kind == JourneyScheduled {
		s.jev.Resume = r.preemptions > 0
	}
	o.Journey(&s.jev)
}
