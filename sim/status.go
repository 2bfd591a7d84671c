package sim

import "github.com/blis-sim/blis/physics"

// Status is what an instance reports about itself at one moment: the
// signals a router reads (vLLM's /metrics gauges) and the engine's own
// request count. It is a value: taking one allocates nothing, and it does
// not change when the engine moves on.
type Status struct {
	AtUs int64 // the engine's clock when taken
	// QueueDepth is the waiting queue (vllm:num_requests_waiting) and
	// BatchSize the running batch (vllm:num_requests_running).
	QueueDepth, BatchSize int64
	// InFlight is every request injected and not yet finished, dropped or
	// timed out: pending arrival, in API processing, waiting or running.
	InFlight int64
	// FreeKVBlocks and TotalKVBlocks are GPU blocks; KVUtilization is
	// used/total (vllm:gpu_cache_usage_perc), in [0, 1].
	FreeKVBlocks, TotalKVBlocks int64
	KVUtilization               float64
	// PrefixCacheHitRate is prompt tokens served from the GPU prefix cache
	// at first admission over prompt tokens admitted, since the start (0
	// before any admission).
	PrefixCacheHitRate float64
	// PromptTokens and GenerationTokens are vLLM's counters
	// vllm:prompt_tokens_total and vllm:generation_tokens_total since the
	// start: a request's whole prompt (prefix-cache hits included) when it
	// produces its first token, and every token produced. Both count a
	// step's tokens when the step is scheduled, not when it ends.
	PromptTokens, GenerationTokens int64
}

// Status returns the instance's current status.
func (e *Engine) Status() Status {
	st := Status{
		AtUs:             e.now,
		QueueDepth:       int64(e.waiting.len()) + e.pulling,
		BatchSize:        int64(len(e.running)),
		InFlight:         e.injected - e.m.completed - e.m.dropped - e.m.timedOut - e.m.killed - e.m.redirected - e.m.handedOff,
		FreeKVBlocks:     e.kv.numFree,
		TotalKVBlocks:    e.kv.total(),
		PromptTokens:     e.m.prefilledTokens,
		GenerationTokens: e.m.outputTokens,
	}
	st.KVUtilization = float64(e.kv.used()) / float64(e.kv.total())
	if e.m.promptTokens > 0 {
		st.PrefixCacheHitRate = float64(e.m.cachedTokens) / float64(e.m.promptTokens)
	}
	return st
}

// CachedPrefixBlocks is how many leading blocks of a new request's
// block-hash chain (from AppendBlockHashes, with this engine's block size)
// the instance holds in its GPU prefix cache right now; 0 without prefix
// caching. Only shared content can match a new request (any other block
// is its sender's own). It allocates nothing and changes nothing.
func (e *Engine) CachedPrefixBlocks(hashes []uint64) int64 { return e.kv.match(hashes) }

// BlockSize is the engine's KV block size in tokens.
func (e *Engine) BlockSize() int64 { return e.blockSize }

// Completion is a request that left the engine: it finished (its last
// token was produced; it departs after the departure overhead), was
// dropped as unservable at enqueue, or timed out (its client gave up:
// Engine.Abort). Times are µs.
type Completion struct {
	ID       int64
	Dropped  bool
	TimedOut bool
	// Killed marks a request the operator ended (Engine.Kill), reported
	// as a timed-out one is, with Killed instead of TimedOut.
	Killed bool
	// TooLong marks a request refused as longer than the model's context
	// (EngineConfig.MaxModelLen); it is not Dropped.
	TooLong bool
	Reason  string // why it was dropped or refused
	// ArrivalUs is the client's send time (RequestSpec.ArrivalUs) and
	// InjectedUs when it reached the instance (for a request that timed
	// out before, when it would have).
	ArrivalUs, InjectedUs int64
	// EnqueuedUs is 0 for a request that timed out before it was queued.
	EnqueuedUs int64
	// FirstTokenUs and FinishedUs are when the client receives the first
	// and the last token: the engine's times plus Pipeline.OutputDelayUs.
	// FirstScheduledUs, FirstTokenUs and FinishedUs are 0 for a dropped
	// request. For a timed-out one FinishedUs is 0, and FirstScheduledUs
	// and FirstTokenUs are 0 unless it was scheduled and a token was
	// delivered before its client gave up.
	FirstScheduledUs, FirstTokenUs, FinishedUs int64
	// DepartedUs is when the client has the whole response (for a dropped
	// request, when it was refused; for a timed-out one, when the abort
	// took effect).
	DepartedUs   int64
	PromptTokens int64
	// OutputTokens is the tokens delivered: for a timed-out request those
	// produced before its client gave up.
	OutputTokens int64
	CachedTokens int64 // prompt tokens served from caches at first admission
	Preemptions  int64
	Tenant       int32
	SLOClass     SLOClass
	// HandedOff marks a HandoffPrefill request that produced its token and
	// keeps its KV for its decode instance (sim/pd.go): not the client's
	// completion.
	HandedOff bool
}

// Knobs is the engine's vLLM settings (its token budget per step, its
// running-request cap, ...).
func (e *Engine) Knobs() physics.VLLMKnobs { return e.cfg.Engine.VLLMKnobs }
