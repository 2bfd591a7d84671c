package sim

import (
	"slices"

	"github.com/blis-sim/blis/internal/loglin"
	"github.com/blis-sim/blis/steady"
)

// Distribution summarizes one latency metric, in milliseconds.
type Distribution struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// RequestRecord is one finished request's metrics (µs).
type RequestRecord struct {
	ID              int64 `json:"id"`
	ArrivalUs       int64 `json:"arrival_us"`
	PromptTokens    int64 `json:"prompt_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CachedTokens    int64 `json:"cached_tokens"`
	Preemptions     int64 `json:"preemptions"`
	SchedulingDelay int64 `json:"scheduling_delay_us"`
	TTFT            int64 `json:"ttft_us"`
	E2E             int64 `json:"e2e_us"`
	DepartedUs      int64 `json:"departed_us"`
	// MeanITLUs is the mean time per output token after the first (last
	// token - first token) / (output tokens - 1), vLLM's TPOT; -1 for a
	// one-token output.
	MeanITLUs int64 `json:"mean_itl_us"`
	// Where the time to the first token went (TTFTParts): ttft_us is
	// their sum.
	TTFTParts
}

// TTFTParts decomposes a request's time to first token, µs, in the order
// it spends it (docs/simulator.md, "Request pipeline"):
//
//	ttft_us = route_us + api_us + boundary_us + queue_us + prefill_us + output_us
type TTFTParts struct {
	// RouteUs is from the client's send to the instance (a cluster's
	// admission and routing; 0 for one instance).
	RouteUs int64 `json:"route_us"`
	// APIUs is the API-side processing (the latency model's arrival
	// overhead: request handling and tokenization).
	APIUs int64 `json:"api_us"`
	// BoundaryUs is the wait for the engine core's running step to end:
	// it takes new requests in between steps.
	BoundaryUs int64 `json:"boundary_us"`
	// QueueUs is from joining the scheduler's queue to the first step that
	// schedules the request: the step async scheduling composed before it
	// joined, and any wait for a seat, the token budget or KV blocks.
	QueueUs int64 `json:"queue_us"`
	// PrefillUs is from the first step that schedules the request to the
	// end of the step that samples its first token: its prompt's chunks,
	// the other requests' work in the same steps, and any preemption in
	// between.
	PrefillUs int64 `json:"prefill_us"`
	// OutputUs is the output delay from the engine core's output to the
	// client (Pipeline.OutputDelayUs).
	OutputUs int64 `json:"output_us"`
}

// ttftParts splits r's time to first token; a part whose start the
// request skipped (a decode instance's request, handed over with its KV)
// is 0 and the next part starts where the last known one ended.
func ttftParts(r *request, outDelay int64) TTFTParts {
	var p TTFTParts
	at := r.spec.ArrivalUs
	step := func(to int64) int64 {
		if to < at {
			return 0
		}
		d := to - at
		at = to
		return d
	}
	p.RouteUs = step(r.injected)
	p.APIUs = step(r.apiDone)
	p.BoundaryUs = step(r.enqueued)
	p.QueueUs = step(r.firstScheduled)
	p.PrefillUs = step(r.firstToken)
	p.OutputUs = outDelay
	return p
}

func meanITL(span, outputs int64) int64 {
	if outputs < 2 {
		return -1
	}
	return span / (outputs - 1)
}

// Counts is the request accounting of INV-1. TimedOut counts the requests
// whose client gave up (Engine.Abort); it is omitted when 0, so that runs
// without aborts print what they always did.
type Counts struct {
	Offered   int64 `json:"offered"`
	Injected  int64 `json:"injected"`
	Completed int64 `json:"completed"`
	Dropped   int64 `json:"dropped_unservable"`
	// RejectedTooLong were refused as longer than the model's context
	// (EngineConfig.MaxModelLen), as vLLM's API server refuses them;
	// omitted when 0.
	RejectedTooLong int64 `json:"rejected_too_long,omitempty"`
	TimedOut        int64 `json:"timed_out,omitempty"`
	// Killed were ended by the operator (Engine.Kill: their instance was
	// scaled down without waiting for them); Redirected were taken out
	// before they started, for another instance to serve (Engine.Redirect).
	// Both omitted when 0.
	Killed     int64 `json:"killed,omitempty"`
	Redirected int64 `json:"redirected,omitempty"`
	// HandedOff are HandoffPrefill requests that produced their token for
	// a decode instance (sim/pd.go); omitted when 0.
	HandedOff    int64 `json:"handed_off,omitempty"`
	StillArrival int64 `json:"still_in_api"`
	StillQueued  int64 `json:"still_queued"`
	StillRunning int64 `json:"still_running"`
}

// Add adds o's counts to c's.
func (c *Counts) Add(o *Counts) {
	c.Offered += o.Offered
	c.Injected += o.Injected
	c.Completed += o.Completed
	c.Dropped += o.Dropped
	c.RejectedTooLong += o.RejectedTooLong
	c.TimedOut += o.TimedOut
	c.Killed += o.Killed
	c.Redirected += o.Redirected
	c.HandedOff += o.HandedOff
	c.StillArrival += o.StillArrival
	c.StillQueued += o.StillQueued
	c.StillRunning += o.StillRunning
}

// KVOffload reports the CPU tier.
type KVOffload struct {
	StoredBlocks   int64 `json:"stored_blocks"`
	ReloadedBlocks int64 `json:"reloaded_blocks"`
	CPUEvictions   int64 `json:"cpu_evictions"`
	Thrashing      int64 `json:"thrashing"`
}

// Result is a run's metrics (docs/simulator.md). All times are simulated.
//
// Requests that timed out (Engine.Abort) count in Requests.TimedOut only:
// TTFT, E2E, scheduling delay, RequestsPerS and PerRequest are of completed
// requests, since a response the client abandoned has no end-to-end time.
// OutputTokens (so OutputTokensPerS) and ITL count every token the engine
// generated, a timed-out request's included, even the one of the step
// during which its client left: they measure the instance's work, as the
// engine core's own counters do, and they are counted as each token is
// produced, before anyone knows the client will leave. Leaving those out
// would mean holding every request's samples until it ends, on the
// per-step path. Without aborts nothing changes.
type Result struct {
	Requests         Counts       `json:"requests"`
	TTFT             Distribution `json:"ttft_ms"`
	ITL              Distribution `json:"itl_ms"`
	E2E              Distribution `json:"e2e_ms"`
	SchedulingDelay  Distribution `json:"scheduling_delay_ms"`
	DurationS        float64      `json:"duration_s"`
	OutputTokensPerS float64      `json:"output_tokens_per_s"`
	RequestsPerS     float64      `json:"requests_per_s"`
	OutputTokens     int64        `json:"output_tokens"`
	Steps            int64        `json:"steps"`
	BusyFraction     float64      `json:"busy_fraction"`
	Preemptions      int64        `json:"preemptions"`
	KVAllocFailures  int64        `json:"kv_allocation_failures"`
	// KVLoadsFailed counts the decode handoffs whose KV was gone when
	// they pulled it (KVLost) and that prefilled here instead; omitted
	// when 0.
	KVLoadsFailed      int64      `json:"kv_loads_failed_recomputed,omitempty"`
	PrefixCacheHitRate float64    `json:"prefix_cache_hit_rate"`
	KVEvictions        int64      `json:"kv_prefix_evictions"`
	KVOffload          *KVOffload `json:"kv_offload,omitempty"`
	// KVTiers is where the prompts' KV came from, tier by tier, with a
	// CPU tier, a disk or a store (sim/tiers.go); nil without.
	KVTiers *KVTiersResult `json:"kv_tiers,omitempty"`
	// StepTimesClamped counts the steps whose latency-model time fell
	// outside [1, MaxDurationUs] µs and was clamped into it; nil when none.
	StepTimesClamped *Clamped `json:"step_times_clamped,omitempty"`
	// Lockstep is the engine's part in a data-parallel group that steps
	// together (sim/lockstep.go); nil when it steps alone.
	Lockstep *LockstepResult `json:"lockstep,omitempty"`
	// Stability is the output analysis's verdict on the run and
	// SteadyState its estimates after the warm-up, with their 95 %
	// intervals (package steady); nil when the run was not analyzed.
	Stability   *steady.Stability   `json:"stability,omitempty"`
	SteadyState *steady.SteadyState `json:"steady_state,omitempty"`
	// PerRequest holds finished requests in completion order, when asked.
	PerRequest []RequestRecord `json:"per_request,omitempty"`

	// TTFTUs, E2EUs and SchedUs are the raw samples in completion order
	// (nil with Options.BoundedMemory), for comparisons between runs such
	// as the round-trip test's KS statistics.
	TTFTUs, E2EUs, SchedUs []int64 `json:"-"`
	// Hist holds the run's latency histograms (µs), which merge across
	// instances without the samples.
	Hist Histograms `json:"-"`
	// StartUs and EndUs are the simulated interval the rates are over, in
	// µs: from the first arrival to the last departure, step end or event
	// (the release of a copy that expired unpulled, ExpireKV, is not one:
	// nothing ran); both 0 when nothing arrived.
	StartUs, EndUs int64 `json:"-"`
	// PromptTokens and CachedPromptTokens are the prefix cache hit rate's
	// denominator and numerator. RemotePromptTokens are the prompt tokens
	// of HandoffDecode requests whose KV was pulled from a prefill
	// instance (counted in PromptTokens, as vLLM's counter counts them, but
	// computed elsewhere).
	PromptTokens, CachedPromptTokens, RemotePromptTokens int64 `json:"-"`
	BusyUs                                               int64 `json:"-"`
	// FirstTooLong is the first request refused as longer than the model's
	// context, for a diagnostic; nil when none was.
	FirstTooLong *TooLongRequest `json:"-"`
	// FirstDropped is the first request dropped as unservable, with the
	// reason, for a diagnostic; nil when none was.
	FirstDropped *DroppedRequest `json:"-"`
}

// DroppedRequest is a request dropped as unservable (Counts.Dropped) and
// why: it can never fit the KV cache (NoKV), or, without chunked prefill,
// its prefill never fits a step's token budget.
type DroppedRequest struct {
	ID     int64
	NoKV   bool
	Reason string
}

// Clamped counts the step times the engine clamped: below 1 µs (a model
// extrapolating below zero on a small step) and above MaxDurationUs.
type Clamped struct {
	ToOneUs       int64 `json:"to_1us"`
	ToMaxDuration int64 `json:"to_max_duration"`
}

// Add adds o's counts to c.
func (c *Clamped) Add(o *Clamped) {
	if o != nil {
		c.ToOneUs += o.ToOneUs
		c.ToMaxDuration += o.ToMaxDuration
	}
}

// Histograms are a run's latency histograms in µs.
type Histograms struct {
	TTFT, ITL, E2E, Sched *Histogram
}

// TooLongRequest is a request refused as longer than the model's context
// (MaxModelLen, the engine's).
type TooLongRequest struct {
	ID, PromptTokens, OutputTokens, MaxModelLen int64
}

type metrics struct {
	completed, dropped, timedOut int64
	tooLong, killed, redirected  int64
	handedOff                    int64 // HandoffPrefill requests done here (sim/pd.go)
	remoteTokens                 int64 // HandoffDecode prompt tokens pulled from elsewhere
	firstTooLong                 *TooLongRequest
	firstDropped                 *DroppedRequest
	preemptions, kvAllocFailures int64
	kvLoadsFailed                int64 // decode handoffs whose KV was lost (KVLost)
	// active is the time of the last events processed or abort applied,
	// but for the releases of expired copies (ExpireKV) alone.
	active                          int64
	promptTokens, cachedTokens      int64
	outputTokens, steps             int64
	prefilledTokens                 int64 // prompts of the requests that produced a first token
	busyUs, lastStepEnd, lastDepart int64
	ttft, e2e, sched                []int64 // exact samples, unless bounded
	exact                           bool
	ttftH, itl, e2eH, schedH        Histogram
	records                         []RequestRecord
	keepRecords                     bool
	outDelay                        int64 // Pipeline.OutputDelayUs: engine output to client
	clamped                         Clamped
}

func (m *metrics) init(o Options, p Pipeline) {
	m.outDelay = p.OutputDelayUs
	m.exact = !o.BoundedMemory
	m.keepRecords = o.RecordRequests
}

func (m *metrics) complete(r *request, departed int64) {
	m.completed++
	ttft, e2e, sched := r.firstToken+m.outDelay-r.spec.ArrivalUs, departed-r.spec.ArrivalUs, r.firstScheduled-r.spec.ArrivalUs
	m.ttftH.add(ttft)
	m.e2eH.add(e2e)
	m.schedH.add(sched)
	if m.exact {
		m.ttft = append(m.ttft, ttft)
		m.e2e = append(m.e2e, e2e)
		m.sched = append(m.sched, sched)
	}
	m.lastDepart = max(m.lastDepart, departed)
	if m.keepRecords {
		m.records = append(m.records, RequestRecord{
			ID: r.spec.ID, ArrivalUs: r.spec.ArrivalUs, PromptTokens: r.spec.PromptTokens, OutputTokens: r.outputs,
			CachedTokens: r.firstCached, Preemptions: r.preemptions, SchedulingDelay: sched,
			TTFT: ttft, E2E: e2e, DepartedUs: departed,
			MeanITLUs: meanITL(r.finished-r.firstToken, r.outputs),
			TTFTParts: ttftParts(r, m.outDelay),
		})
	}
}

func (e *Engine) result() *Result {
	m := &e.m
	res := &Result{
		ITL:                m.itl.summarize(),
		OutputTokens:       m.outputTokens,
		Steps:              m.steps,
		Preemptions:        m.preemptions,
		KVAllocFailures:    m.kvAllocFailures,
		KVLoadsFailed:      m.kvLoadsFailed,
		KVEvictions:        e.kv.evictions,
		PerRequest:         m.records,
		Hist:               Histograms{TTFT: &m.ttftH, ITL: &m.itl, E2E: &m.e2eH, Sched: &m.schedH},
		PromptTokens:       m.promptTokens,
		RemotePromptTokens: m.remoteTokens,
		CachedPromptTokens: m.cachedTokens,
		BusyUs:             m.busyUs,
		FirstTooLong:       m.firstTooLong,
		FirstDropped:       m.firstDropped,
	}
	if m.exact {
		res.TTFT, res.E2E, res.SchedulingDelay = summarize(m.ttft), summarize(m.e2e), summarize(m.sched)
		res.TTFTUs, res.E2EUs, res.SchedUs = m.ttft, m.e2e, m.sched
	} else {
		res.TTFT, res.E2E, res.SchedulingDelay = m.ttftH.summarize(), m.e2eH.summarize(), m.schedH.summarize()
	}
	res.Requests = e.counts()
	if m.promptTokens > 0 {
		res.PrefixCacheHitRate = float64(m.cachedTokens) / float64(m.promptTokens)
	}
	if e.hasArrival {
		res.StartUs = e.firstArrival
		res.EndUs = max(m.lastDepart, m.lastStepEnd, m.active)
		dur := float64(res.EndUs-res.StartUs) * 1e-6
		if dur > 0 {
			res.DurationS = dur
			res.OutputTokensPerS = float64(m.outputTokens) / dur
			res.RequestsPerS = float64(m.completed) / dur
			res.BusyFraction = float64(m.busyUs) * 1e-6 / dur
		}
	}
	if m.clamped != (Clamped{}) {
		c := m.clamped
		res.StepTimesClamped = &c
	}
	if l := e.lock; l != nil {
		res.Lockstep = &LockstepResult{WaitMs: float64(l.waitUs) / 1000, DummySteps: l.dummySteps}
	}
	if c := e.kv.cpu; c != nil {
		res.KVOffload = &KVOffload{StoredBlocks: c.stored, ReloadedBlocks: c.reloaded, CPUEvictions: c.evicted, Thrashing: c.thrashing}
	}
	res.KVTiers = e.tiersResult()
	return res
}

// counts is the request accounting from the engine's counters.
func (e *Engine) counts() Counts {
	return Counts{
		Offered: e.injected, Injected: e.arrived, Completed: e.m.completed, Dropped: e.m.dropped, RejectedTooLong: e.m.tooLong, TimedOut: e.m.timedOut,
		Killed: e.m.killed, Redirected: e.m.redirected, HandedOff: e.m.handedOff,
		StillArrival: e.arriving, StillQueued: int64(e.waiting.len()) + e.pulling, StillRunning: int64(len(e.running)),
	}
}

// summarize reports v in milliseconds; percentiles are nearest-rank. It
// sorts a copy: v (Result.TTFTUs and the like) stays in completion order.
func summarize(v []int64) Distribution {
	if len(v) == 0 {
		return Distribution{}
	}
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	var sum float64
	for _, x := range sorted {
		sum += float64(x)
	}
	rank := func(p float64) float64 { return ms(sorted[loglin.NearestRank(p, int64(len(sorted)))-1]) }
	return Distribution{
		Count: int64(len(sorted)),
		Mean:  sum / float64(len(sorted)) / 1000,
		Min:   ms(sorted[0]),
		P50:   rank(0.50), P90: rank(0.90), P95: rank(0.95), P99: rank(0.99),
		Max: ms(sorted[len(sorted)-1]),
	}
}

func ms(us int64) float64 { return float64(us) / 1000 }

// Histogram counts non-negative µs values exactly below 1024 and in
// buckets 1/512 of their magnitude wide above, so that millions of
// inter-token latencies cost kilobytes, with percentiles within 0.1%.
// Its counts cover the buckets from the lowest value's to the highest's
// (counts[0] is bucket lo), not every bucket from 0: an instance's
// inter-token latencies of 7 to 200 ms, say, take 2,600 buckets rather
// than 5,000, and a fleet of histograms half the memory.
type Histogram struct {
	counts   []int64
	lo       int // the bucket of counts[0]
	n        int64
	sum      int64 // exact; a float64 would round past 2^53 µs
	min, max int64
}

// histBits sets the histogram's layout (package loglin): values below
// 2^10 exact, 512 buckets per power of two above.
const histBits = 10

func (h *Histogram) add(v int64) { h.addN(v, 1) }

// addN counts the value v k times (k >= 0).
func (h *Histogram) addN(v, k int64) {
	if k <= 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	i := loglin.Index(v, histBits)
	if i < h.lo || i-h.lo >= len(h.counts) {
		h.cover(i, i)
	}
	h.counts[i-h.lo] += k
	switch {
	case h.n == 0:
		h.min, h.max = v, v
	case v < h.min:
		h.min = v
	case v > h.max:
		h.max = v
	}
	h.n += k
	h.sum += v * k
}

// cover extends counts to buckets lo..hi. Extended downwards, they at
// least double (a copy), so that values arriving in decreasing order cost
// amortized O(1) each, as increasing ones do through append.
func (h *Histogram) cover(lo, hi int) {
	if len(h.counts) == 0 {
		h.lo = lo
		h.counts = append(h.counts[:0], make([]int64, hi-lo+1)...)
		return
	}
	if lo < h.lo {
		to := max(0, min(lo, h.lo-len(h.counts)))
		c := make([]int64, h.lo-to+len(h.counts))
		copy(c[h.lo-to:], h.counts)
		h.counts, h.lo = c, to
	}
	if n := hi - h.lo + 1; n > len(h.counts) {
		h.counts = append(h.counts, make([]int64, n-len(h.counts))...)
	}
}

// Add counts one value (µs; negative values count as 0).
func (h *Histogram) Add(v int64) { h.add(v) }

// Merge adds every value of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	h.cover(o.lo, o.lo+len(o.counts)-1)
	for i, c := range o.counts {
		h.counts[o.lo-h.lo+i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Reset empties the histogram and keeps its buckets' memory, so that one
// histogram can be reused for one interval after another.
func (h *Histogram) Reset() {
	if h.n > 0 {
		// No bucket lies outside the smallest and largest values'.
		clear(h.counts[loglin.Index(h.min, histBits)-h.lo : loglin.Index(h.max, histBits)-h.lo+1])
	}
	h.n, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Summarize reports the histogram in milliseconds.
func (h *Histogram) Summarize() Distribution { return h.summarize() }

// Count is the number of values added.
func (h *Histogram) Count() int64 { return h.n }

// Quantile is the nearest-rank p-quantile in µs: exact for the extremes,
// else its bucket's midpoint clamped to them.
func (h *Histogram) Quantile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	return loglin.Quantile(h.counts, h.lo, h.n, h.min, h.max, p, histBits)
}

func (h *Histogram) summarize() Distribution {
	if h.n == 0 {
		return Distribution{}
	}
	return Distribution{
		Count: h.n,
		Mean:  float64(h.sum) / float64(h.n) / 1000,
		Min:   ms(h.min),
		P50:   ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P95: ms(h.Quantile(0.95)), P99: ms(h.Quantile(0.99)),
		Max: ms(h.max),
	}
}
