// Package sim is a deterministic discrete-event simulator of one vLLM
// instance (docs/simulator.md): requests arrive, wait, are batched by vLLM's
// continuous-batching scheduler with chunked prefill, hold KV blocks with
// prefix caching and optional CPU offload, are preempted by recompute under
// memory pressure, and finish. A LatencyModel gives each step's time.
//
// The core is Engine, a caller-driven state machine in the manner of
// etcd-io/raft's RawNode: it has no loop or goroutine of its own. The caller
// injects requests (Inject), asks when the next event is (NextEventUs),
// processes exactly the events at that time (Advance), aborts requests
// whose client gave up (Abort), reads the completions those calls produced
// (Completions) and a no-allocation status (Status), and ends the run
// (Finish). Many engines can therefore share one clock: package
// cluster drives one per instance. Sim is the thin closed-world shell: New
// takes a whole workload and Run loops over the Engine API.
//
// Time is an integer count of microseconds; events are ordered by (time,
// kind, insertion sequence); randomness comes only from named streams of
// RNG. Observers (the trace writer) see every event. docs/simulator.md
// states the rules; invariants.go checks INV-1..INV-8.
package sim

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/blis-sim/blis/physics"
)

// Config is one instance's configuration, in separate parts: the vLLM
// engine settings, the queueing policies, the latency model, an observer,
// and what the run keeps and checks.
type Config struct {
	Engine   EngineConfig
	Policies Policies
	Latency  LatencyModel
	Observer Observer // nil: none
	Options  Options
}

// EngineConfig is the instance's vLLM settings. The embedded knobs must be
// resolved: TotalKVBlocksGPU is the block count (> 0), not "derive".
// GPUMemoryUtilization only matters when deriving that count and is not
// read here. The CPU tier is on when TotalKVBlocksCPU > 0, which
// CPUOffloading must agree with.
type EngineConfig struct {
	physics.VLLMKnobs
	// LongPrefillThreshold caps the tokens one request may prefill in a
	// step (vLLM --long-prefill-token-threshold); 0 = no cap beyond the
	// budget.
	LongPrefillThreshold int64
	// MaxModelLen is the model's context (vLLM's max_model_len): a request
	// whose prompt and output tokens together exceed it is refused while
	// its input is processed, as vLLM's API server answers it with HTTP
	// 400, and counted in Counts.RejectedTooLong. 0 = no limit.
	MaxModelLen int64
	// OffloadThreshold is the GPU usage share above which evicted prefix
	// blocks are stored to the CPU tier, in [0, 1].
	OffloadThreshold float64
	// ReserveFullSequence is vLLM's scheduler_reserve_full_isl (on by
	// default in vLLM): a waiting request, new or preempted, is admitted
	// only when the free blocks hold its whole sequence so far (prompt,
	// and the tokens it generated before a preemption), less its
	// prefix-cache hits, not only the chunk it computes first. Its blocks
	// are still allocated chunk by chunk.
	ReserveFullSequence bool
	// Pipeline is the request path around the engine core's step loop.
	Pipeline Pipeline
	// Tiers are the KV tiers behind the CPU one: a local disk, and the
	// link to a store the cluster's instances share (sim/tiers.go).
	Tiers KVTiers
}

// Pipeline is how requests and tokens travel between the client and the
// engine core's step loop (docs/simulator.md, "Request pipeline"). The
// API-side input processing before a request reaches the engine core
// (HTTP, tokenization, IPC) is the latency model's ArrivalOverheadUs;
// the engine core then adds new requests to its scheduler only between
// steps, as vLLM's busy loop drains its input queue before each step.
type Pipeline struct {
	// AsyncDepth is the number of steps the engine core schedules ahead of
	// the step whose output it is processing: 1 with vLLM's async
	// scheduling (its default), 0 without (--no-async-scheduling). A
	// request added to the scheduler while steps run back to back joins
	// AsyncDepth steps later than it would synchronously, since the step
	// after the boundary was composed before the boundary.
	AsyncDepth int
	// OutputDelayUs is added to the delivery of every token: engine core
	// output serialization, the frontend's output processing
	// (detokenization) and the stream to the client. It moves TTFT and E2E,
	// not inter-token latency or step times. 0 when latencies are measured
	// at the engine core's output (vLLM's first_token_ts).
	OutputDelayUs int64
	// ArrivalAtEngine says that arrivals are the engine's own: requests
	// come as token ids straight to vLLM's engine (AsyncLLM in the
	// process, no API server, no tokenization), and the arrival is when
	// vLLM accepted them, so the latency model's arrival overhead (API
	// processing and tokenization) does not apply. blis validate sets it
	// for records measured at the engine core.
	ArrivalAtEngine bool
}

// DefaultPipeline is vLLM's default request path: async scheduling on,
// and an output delay that is an estimate for a streaming HTTP client on
// the same host (docs/simulator.md says where it comes from; calibrate it
// with blis validate --calibrate or from traces).
func DefaultPipeline() Pipeline { return Pipeline{AsyncDepth: 1, OutputDelayUs: DefaultOutputDelayUs} }

// DefaultOutputDelayUs is DefaultPipeline's output delay, µs.
const DefaultOutputDelayUs = 1500

// Validate checks the pipeline settings.
func (p Pipeline) Validate() error {
	if p.AsyncDepth != 0 && p.AsyncDepth != 1 {
		return fieldErr("async_scheduling_depth", "must be 0 or 1, got %d", p.AsyncDepth)
	}
	if p.OutputDelayUs < 0 || p.OutputDelayUs > maxPipelineDelayUs {
		return fieldErr("output_delay_us", "must be in [0, %d] µs, got %d", int64(maxPipelineDelayUs), p.OutputDelayUs)
	}
	return nil
}

// maxPipelineDelayUs bounds the output delay (one hour) so that time
// arithmetic cannot overflow.
const maxPipelineDelayUs = 3600e6

// Policies are the instance's queueing policies.
type Policies struct {
	Scheduler SchedulerPolicy
	Priority  PriorityPolicy
}

// Options say what a run keeps and checks.
type Options struct {
	// HorizonUs stops Sim.Run at this time (0: run until every request has
	// left). A caller driving an Engine stops where it wants.
	HorizonUs int64
	// Exhaustive checks every invariant in full after every step (slow; for
	// tests and --debug-invariants). The cheap checks always run.
	Exhaustive bool
	// RecordRequests keeps one RequestRecord per finished request.
	RecordRequests bool
	// BoundedMemory keeps no per-request latency samples: TTFT, E2E and
	// scheduling delay are summarized from histograms (percentiles within
	// 0.1 %, mean, min and max exact), as ITL always is. Off, they are exact
	// and the raw samples are in the Result.
	BoundedMemory bool
}

func fieldErr(field, format string, args ...any) error {
	return &physics.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the engine settings. Errors are *physics.FieldError
// naming the field (max_num_seqs, ...); callers map them to their own
// vocabulary (a CLI flag, a YAML key).
func (c *EngineConfig) Validate() error {
	switch {
	case c.MaxNumSeqs <= 0:
		return fieldErr("max_num_seqs", "must be > 0, got %d", c.MaxNumSeqs)
	case c.MaxBatchedTokens <= 0:
		return fieldErr("max_batched_tokens", "must be > 0, got %d", c.MaxBatchedTokens)
	case c.LongPrefillThreshold < 0:
		return fieldErr("long_prefill_token_threshold", "must be >= 0, got %d", c.LongPrefillThreshold)
	case c.MaxModelLen < 0:
		return fieldErr("max_model_len", "must be >= 0 (0: no limit), got %d", c.MaxModelLen)
	case c.BlockSizeTokens <= 0:
		return fieldErr("block_size_tokens", "must be > 0, got %d", c.BlockSizeTokens)
	case c.TotalKVBlocksGPU <= 0:
		return fieldErr("total_kv_blocks_gpu", "must be > 0, got %d", c.TotalKVBlocksGPU)
	case c.TotalKVBlocksGPU > math.MaxInt32:
		return fieldErr("total_kv_blocks_gpu", "%d is more than this simulator addresses (%d)", c.TotalKVBlocksGPU, math.MaxInt32)
	case c.TotalKVBlocksCPU < 0:
		return fieldErr("total_kv_blocks_cpu", "must be >= 0, got %d", c.TotalKVBlocksCPU)
	case c.CPUOffloading != (c.TotalKVBlocksCPU > 0):
		return fieldErr("cpu_offloading", "is %v but total_kv_blocks_cpu is %d: the CPU tier is on exactly when it has blocks", c.CPUOffloading, c.TotalKVBlocksCPU)
	case c.TotalKVBlocksCPU > 0 && !(c.OffloadThreshold >= 0 && c.OffloadThreshold <= 1):
		return fieldErr("offload_threshold", "must be in [0, 1], got %v", c.OffloadThreshold)
	case c.TotalKVBlocksCPU > 0 && !c.PrefixCachingEnabled:
		return fieldErr("total_kv_blocks_cpu", "needs prefix caching: offloaded blocks are found again by their prefix hash")
	}
	if err := c.Tiers.validate(c); err != nil {
		return err
	}
	return c.Pipeline.Validate()
}

// Validate checks a configuration.
func (c *Config) Validate() error {
	if err := c.Engine.Validate(); err != nil {
		return err
	}
	if c.Options.HorizonUs < 0 {
		return fieldErr("horizon", "must be >= 0, got %d µs", c.Options.HorizonUs)
	}
	if c.Latency == nil {
		return fmt.Errorf("no latency model")
	}
	if err := CheckLatency(c.Latency, &c.Engine); err != nil {
		return err
	}
	return c.Policies.Priority.Validate()
}

// reqState is a request's place in the lifecycle (INV-2).
type reqState uint8

const (
	stFree     reqState = iota // slot not in use
	stPending                  // injected, arrival event not yet processed
	stArriving                 // arrived, in API/tokenization overhead
	stQueued
	stRunning
	stFinished
	stDropped
	stTimedOut // its client gave up (Abort)
	stPulling  // HandoffDecode: blocks taken, waiting for its prompt's KV (sim/pd.go)
	stKept     // HandoffPrefill: its token produced, its KV kept for the decode instance
	numReqStates
)

// request is one request's engine state. It lives in a slot that is reused
// once the request has left, so an engine's memory follows its concurrency,
// not the number of requests it has served.
type request struct {
	// The fields every step reads and writes for every running request
	// come first, in one 64-byte cache line, and the spec's token counts
	// in the next: a step touches two lines per request, not one per
	// field. The struct is padded to whole lines (reqLinePad), so that
	// every slot starts a line (the arrays' allocations are line-aligned
	// at these sizes): unpadded, most slots' first 64 bytes straddled two
	// lines and their token counts a third.
	computed  int64 // tokens whose KV exists
	outputs   int64 // tokens generated
	scheduled int64 // tokens scheduled in the current step
	committed int64 // full blocks registered as cached content
	lastToken int64
	blocks    []int32

	spec  RequestSpec
	state reqState
	// aborted marks a request whose client gave up (Abort) at the time
	// in finished; it is still here only if it was running with a step in
	// flight, and leaves when that step ends.
	aborted bool
	// killed marks an abort by the operator (Kill: an instance scaled
	// down), not by the client.
	killed bool

	cached int64 // leading blocks taken from the prefix cache at the last admission
	// firstCached is the prompt tokens served from caches at first admission.
	firstCached int64
	// hashes[i] is the chained prefix hash of block i of the token stream.
	hashes []uint64
	// holder[i] is the block last registered with the request's own block
	// i (-1: none): where the request finds its own content again after a
	// preemption, if that block still holds it.
	holder []int32

	// prefillDone is the most prompt tokens ever computed: vLLM reports
	// this high-water mark, which survives a preemption.
	prefillDone int64

	preemptions int64
	// expired marks a kept HandoffPrefill request whose copy is released
	// unpulled, at its abort timeout (ExpireKV).
	expired bool
	// pull is a HandoffDecode request's pull (pullNone, pullWaiting,
	// pullArrived).
	pull uint8
	// qticket is the ticket of the request's waiting-queue entry, 0 when
	// it is not queued.
	qticket uint64
	// joinStep is the first step that may admit the request: with async
	// scheduling, a request queued at a step boundary misses the step that
	// was composed before it.
	joinStep int64

	// finished is when the last token was produced; for an aborted
	// request, which never finishes, when its client gave up (the field is
	// reused rather than added: the request slots are the hot loop's data).
	// The arrival is spec.ArrivalUs. apiDone is when the API-side
	// processing ended (the arrival overhead), before any wait for the
	// running step.
	injected, apiDone, enqueued, firstScheduled, firstToken, finished int64

	_ [reqLinePad]byte
}

// reqLinePad pads request to six 64-byte cache lines
// (TestRequestSlotsAreWholeCacheLines).
const reqLinePad = 40

// Engine is one vLLM instance as a caller-driven state machine. Create it
// with NewEngine. It is not safe for concurrent use.
type Engine struct {
	// The fields a step reads or writes come first, in as few cache lines
	// as they fit: at fleet scale each step finds its engine out of the
	// processor's caches, and every line is a wait (the configuration, the
	// pools and the rarely used fields follow).
	now       int64
	stepID    int64
	finishing int64 // requests the current step finishes
	blockSize int64
	// blockShift is log2(blockSize) when it is a power of two (the usual
	// case), else -1: block arithmetic runs per request per step, and a
	// shift is much cheaper than a division.
	blockShift int
	kv         *kvCache
	// lock is the engine's part in a data-parallel group that steps
	// together (sim/lockstep.go); nil when it steps alone.
	lock        *lockstep
	stepPending bool
	// chained says the pending step was scheduled by the step before it,
	// to start at that step's end: the two run back to back, so with
	// async scheduling the pending one is already composed.
	chained    bool
	outDelay   int64 // Pipeline.OutputDelayUs
	asyncDepth int64 // Pipeline.AsyncDepth
	preemptEMA float64
	// storedLastStep is the blocks the previous step stored to the CPU.
	storedLastStep int64

	reqs    []request
	running []int32
	events  eventHeap
	done    []Completion // completions of the last Advance or Abort
	rare    []int32      // executeBatch's scratch: the requests off its usual path

	// Request counts by lifecycle state (INV-1); queued and running are
	// the queue's and the batch's lengths.
	injected, arrived, arriving int64

	// Disaggregation (sim/pd.go): the pulls the last Advance started, the
	// requests waiting for their KV, those keeping theirs, and those whose
	// KV arrived, back in the queue with their blocks (pulled).
	pulls                 []Pull
	pulling, kept, pulled int64

	waiting queue
	batch   Batch
	summary StepSummary

	m metrics

	cfg  Config
	free []int32 // free slots of reqs
	// The arrays of requests that left, for the next ones: block tables
	// and holder records, hash chains.
	int32s  arrayPool[int32]
	uint64s arrayPool[uint64]

	hit []int32 // the cached blocks the last prefix match found
	jev JourneyEvent
	kev KVEvent

	// byID finds a live request's slot by its id. Only Abort needs it, so
	// it is built at the first Abort and kept from then on: a run without
	// aborts pays nothing for it.
	byID map[int64]int32

	firstArrival int64
	hasArrival   bool

	// retired is the result Retire kept (nil until then).
	retired *Result
}

// NewEngine returns an idle engine at time 0.
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var cpu *cpuTier
	if cfg.Engine.TotalKVBlocksCPU > 0 {
		cpu = newCPUTier(cfg.Engine.TotalKVBlocksCPU, cfg.Engine.OffloadThreshold)
	}
	e := &Engine{
		cfg:       cfg,
		blockSize: cfg.Engine.BlockSizeTokens,
		kv:        newKVCache(cfg.Engine.TotalKVBlocksGPU, cfg.Engine.BlockSizeTokens, cfg.Engine.PrefixCachingEnabled, cpu),
	}
	e.kv.initTiers(&cfg.Engine)
	e.blockShift = -1
	if bs := e.blockSize; bs&(bs-1) == 0 {
		e.blockShift = bits.TrailingZeros64(uint64(bs))
	}
	e.waiting.keyed = cfg.Policies.Scheduler != FCFS
	e.outDelay = cfg.Engine.Pipeline.OutputDelayUs
	e.asyncDepth = int64(cfg.Engine.Pipeline.AsyncDepth)
	e.m.init(cfg.Options, cfg.Engine.Pipeline)
	return e, nil
}

// catch turns an invariant panic into an error; any other panic goes on.
func catch(err *error) {
	if r := recover(); r != nil {
		switch x := r.(type) {
		case *InvariantError:
			*err = x
		case *LimitError:
			*err = x
		default:
			panic(r)
		}
	}
}

// LimitError stops a run whose inputs take the clock past MaxTimeUs. It is
// an input's fault (absurd step times or arrivals), not a simulator bug.
type LimitError struct {
	AtUs   int64
	Detail string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("simulation stopped at t=%d µs: %s", e.AtUs, e.Detail)
}

// Inject offers a request that reaches the instance at atUs (≥ the
// engine's clock and ≥ spec.ArrivalUs, the client's send time, from which
// latencies are measured). The caller chooses spec.ID; IDs must be unique
// among the engine's requests, since a request's own KV content is
// identified by it. The arrival is an event at atUs: nothing else changes
// until Advance processes it.
func (e *Engine) Inject(spec RequestSpec, atUs int64) error {
	if e.retired != nil {
		return fmt.Errorf("request %d: the engine is retired", spec.ID)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if atUs < e.now {
		return fmt.Errorf("request %d: injected at %d µs, before the engine's clock %d µs", spec.ID, atUs, e.now)
	}
	if atUs < spec.ArrivalUs {
		return fmt.Errorf("request %d: injected at %d µs, before its arrival_us %d", spec.ID, atUs, spec.ArrivalUs)
	}
	if atUs > MaxTimeUs {
		return fmt.Errorf("request %d: injected at %d µs, beyond the simulator's %d µs (2^61, about 73,000 years)", spec.ID, atUs, MaxTimeUs)
	}
	i := e.slot()
	r := &e.reqs[i]
	r.spec = spec
	r.state = stPending
	r.injected = atUs
	e.injected++
	if e.byID != nil {
		e.byID[spec.ID] = i
	}
	e.events.push(atUs, evArrival, i)
	return nil
}

// slot returns a cleared request slot, reusing a free one when there is
// one.
func (e *Engine) slot() int32 {
	if n := len(e.free); n > 0 {
		i := e.free[n-1]
		e.free = e.free[:n-1]
		e.reqs[i] = request{}
		return i
	}
	e.reqs = append(e.reqs, request{})
	return int32(len(e.reqs) - 1)
}

func (e *Engine) release(i int32) {
	if j, ok := e.byID[e.reqs[i].spec.ID]; ok && j == i { // a released kept copy's id may be another's now (ReleaseKV)
		delete(e.byID, e.reqs[i].spec.ID)
	}
	r := &e.reqs[i]
	r.state = stFree
	e.int32s.put(r.blocks)
	e.int32s.put(r.holder)
	e.uint64s.put(r.hashes)
	r.blocks, r.holder, r.hashes = nil, nil, nil
	e.free = append(e.free, i)
}

// NextEventUs is the time of the next event, and false when there is none
// (the engine is idle and holds no request).
func (e *Engine) NextEventUs() (int64, bool) {
	if e.events.len() == 0 {
		return 0, false
	}
	return e.events.peek().At, true
}

// Now is the engine's clock: the time of the last events processed, or of
// the last abort applied if later.
func (e *Engine) Now() int64 { return e.now }

// Advance processes exactly the events at the next event time, including
// those they create at that same time, and moves the clock there. It
// returns an *InvariantError if an invariant is violated (a simulator bug);
// the engine must not be used after that.
func (e *Engine) Advance() (err error) {
	defer catch(&err)
	e.done = e.done[:0]
	e.pulls = e.pulls[:0]
	if e.events.len() == 0 {
		return nil
	}
	t := e.events.peek().At
	if t < e.now {
		e.fail("INV-3", "clock would go back from %d to %d µs (%s event)", e.now, t, eventKind(e.events.peek().Kind))
	}
	e.now = t
	quiet := true // only expired copies released
	for e.events.len() > 0 && e.events.peek().At == t {
		ev := e.events.pop()
		if eventKind(ev.Kind) != evReleaseKV || !e.reqs[ev.P].expired {
			quiet = false
		}
		switch eventKind(ev.Kind) {
		case evArrival:
			e.onArrival(ev.P)
		case evQueued:
			e.onQueued(ev.P)
		case evAbort:
			e.onAbort(ev.P)
		case evPulled:
			e.onPulled(ev.P)
		case evReleaseKV:
			e.onReleaseKV(ev.P)
		case evStep:
			e.stepPending = false
			// An abort may have emptied the engine since this step was
			// scheduled; without aborts a step always finds work.
			if len(e.running) > 0 || e.waiting.len() > 0 {
				e.step()
			}
		}
	}
	if !quiet {
		e.m.active = t
	}
	return nil
}

// Completions are the requests that left during the last Advance or Abort
// call (finished, dropped, or timed out), in the order the engine decided
// it. Each such call starts a new list (an Abort that returns an error
// changes nothing), so a caller that reads Completions after every call
// sees each request exactly once. The slice is reused by the next call.
func (e *Engine) Completions() []Completion { return e.done }

// Finish runs the end-of-run checks and returns the metrics. The engine may
// still hold requests (a caller that stopped at a horizon); they are counted
// as still in the system.
func (e *Engine) Finish() (res *Result, err error) {
	if e.retired != nil {
		return e.retired, nil
	}
	defer catch(&err)
	e.checkEnd()
	return e.result(), nil
}

func (e *Engine) onArrival(i int32) {
	r := &e.reqs[i]
	e.transition(r, stPending, stArriving)
	e.arrived++
	e.arriving++
	if !e.hasArrival {
		e.firstArrival, e.hasArrival = r.spec.ArrivalUs, true
	}
	if o := e.cfg.Observer; o != nil {
		o.Arrived(&r.spec)
	}
	var api int64
	if !e.cfg.Engine.Pipeline.ArrivalAtEngine {
		api = e.cfg.Latency.ArrivalOverheadUs(r.spec.PromptTokens)
	}
	r.apiDone = e.now + api
	e.events.push(r.apiDone, evQueued, i)
}

// blocksFor is the number of blocks that hold n tokens.
func (e *Engine) blocksFor(n int64) int64 { return e.fullBlocks(n + e.blockSize - 1) }

// blockCap is the capacity a request's block table and hash chain start
// with (rounded up to a power of two by the pool): the blocks its whole
// stream needs, up to eagerBlocks. Beyond that they grow as the request
// fills blocks, so that a request of a billion tokens allocates for what
// it computes, not for its length up front.
func (e *Engine) blockCap(r *request) int64 {
	return min(e.blocksFor(r.spec.PromptTokens+r.spec.OutputTokens), eagerBlocks)
}

// fullBlocks is the number of blocks n tokens fill.
func (e *Engine) fullBlocks(n int64) int64 {
	if e.blockShift >= 0 {
		return n >> (e.blockShift & 63) // the mask spares an over-wide shift check
	}
	return n / e.blockSize
}

func (e *Engine) onQueued(i int32) {
	// vLLM's API server refuses a request longer than the model's context
	// as it processes the input (HTTP 400): it never reaches the engine
	// core, so it does not wait for a step boundary.
	if m := e.cfg.Engine.MaxModelLen; m > 0 {
		if r := &e.reqs[i]; r.spec.PromptTokens+r.spec.OutputTokens > m {
			e.refuse(i, &e.m.tooLong, true, fmt.Sprintf("prompt %d + output %d tokens exceed max_model_len %d", r.spec.PromptTokens, r.spec.OutputTokens, m))
			return
		}
	}
	// The engine core drains its input queue between steps: a request
	// handed over while a step runs waits for the step's end.
	if end := e.busyUntil(); e.now < end {
		e.events.push(end, evQueued, i)
		return
	}
	r := &e.reqs[i]
	if noKV, reason := e.unservable(r); reason != "" {
		// The most KV a request ever holds is its prompt and all but its
		// last output token; one that cannot fit an empty cache would be
		// preempted forever, so it is refused (docs/simulator.md,
		// DroppedUnservable).
		if e.m.firstDropped == nil {
			e.m.firstDropped = &DroppedRequest{ID: r.spec.ID, NoKV: noKV, Reason: reason}
		}
		e.refuse(i, &e.m.dropped, false, reason)
		return
	}
	r.enqueued = e.now
	if e.chained && e.stepPending {
		// Steps run back to back: the one starting now was composed when
		// the previous one started.
		r.joinStep = e.stepID + 1 + e.asyncDepth
	} else {
		r.joinStep = 0
	}
	e.arriving--
	e.transition(r, stArriving, stQueued)
	e.waiting.push(r, i, e.sortKey(r))
	e.journey(r, JourneyQueued, e.now)
	e.ensureStep(e.now)
}

// refuse ends a request that arrived but will not be served, counting it
// in *count: unservable (dropped) or longer than the model's context
// (tooLong). The observer sees it as refused, with the reason.
func (e *Engine) refuse(i int32, count *int64, tooLong bool, reason string) {
	r := &e.reqs[i]
	e.arriving--
	e.transition(r, stArriving, stDropped)
	*count++
	if tooLong && e.m.firstTooLong == nil {
		e.m.firstTooLong = &TooLongRequest{ID: r.spec.ID, PromptTokens: r.spec.PromptTokens, OutputTokens: r.spec.OutputTokens,
			MaxModelLen: e.cfg.Engine.MaxModelLen}
	}
	if o := e.cfg.Observer; o != nil {
		o.Dropped(r.spec.ID, e.now, reason)
	}
	e.done = append(e.done, Completion{ID: r.spec.ID, Dropped: !tooLong, TooLong: tooLong, Reason: reason, ArrivalUs: r.spec.ArrivalUs,
		InjectedUs: r.injected, EnqueuedUs: e.now, DepartedUs: e.now, PromptTokens: r.spec.PromptTokens,
		Tenant: r.spec.Tenant, SLOClass: r.spec.SLOClass})
	e.release(i)
}

// unservable says why a request can never complete, or "", and whether
// the reason is the KV cache's size (else the token budget). Its longest
// stream is the prompt and all but the last output token: it must fit the
// whole KV cache, and without chunked prefill (where a prefill, including a
// recompute after preemption, runs in one step) the token budget too.
func (e *Engine) unservable(r *request) (noKV bool, reason string) {
	longest := r.spec.PromptTokens + r.spec.OutputTokens - 1
	if need := e.blocksFor(longest); need > e.kv.total() {
		return true, fmt.Sprintf("needs %d KV blocks, the cache has %d", need, e.kv.total())
	}
	if !e.cfg.Engine.ChunkedPrefillEnabled && longest > e.cfg.Engine.MaxBatchedTokens {
		return false, fmt.Sprintf("a %d-token prefill exceeds the %d-token budget and chunked prefill is off", longest, e.cfg.Engine.MaxBatchedTokens)
	}
	return false, ""
}

// ensureStep keeps the engine busy while there is work (INV-8). A step
// never starts before the previous one ends.
func (e *Engine) ensureStep(at int64) {
	if !e.stepPending {
		e.stepPending = true
		e.chained = false
		e.events.push(max(at, e.busyUntil()), evStep, -1)
	}
}

func (e *Engine) transition(r *request, from, to reqState) {
	if r.state != from {
		e.fail("INV-2", "request %d: transition to state %d from %d, expected %d", r.spec.ID, to, r.state, from)
	}
	r.state = to
}

func (e *Engine) phase(r *request) Phase {
	if r.state == stQueued {
		return PhaseWaiting
	}
	if r.outputs == 0 {
		return PhasePrefill
	}
	return PhaseDecode
}

func (e *Engine) journey(r *request, kind JourneyKind, at int64) {
	o := e.cfg.Observer
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
	e.jev = JourneyEvent{
		Kind:           kind,
		Req:            r.spec.ID,
		AtUs:           at,
		Step:           e.stepID,
		Phase:          phase,
		PrefillDone:    r.prefillDone,
		PrefillTotal:   r.spec.PromptTokens,
		DecodeDone:     r.outputs,
		DecodeMax:      r.spec.OutputTokens,
		NumPreemptions: r.preemptions,
		EnqueuedUs:     r.enqueued,
		Class:          r.spec.SLOClass,
	}
	if kind == JourneyFinished {
		e.jev.FinishStatus = "length"
		if r.state == stTimedOut {
			e.jev.FinishStatus = "aborted" // vLLM's FINISHED_ABORTED
		}
	}
	if kind == JourneyScheduled {
		e.jev.Resume = r.preemptions > 0
	}
	o.Journey(&e.jev)
}
