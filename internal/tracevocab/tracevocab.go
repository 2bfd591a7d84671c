// Package tracevocab names what vLLM writes when journey and step tracing
// are on: the instrumentation scopes, span names, event names and
// attribute keys of its OpenTelemetry traces, the attribute values the
// tools look for, the event types of its KV events subscriber, and the
// names and version of the tables calibrate ingest makes of them.
//
// The wire format is described in docs/vllm-tracing.md, which was read
// from vLLM's tracing source and whose span-by-span reference is rendered
// from otlpingest's schema tables (built from these names); where this
// package and vLLM's source disagree, this package is the bug. Every
// package that reads or writes these names (otlpingest, sim/simtrace,
// fit) takes them from here, and a test fails when one is spelled out
// anywhere else.
package tracevocab

// Resource attributes.
const (
	ServiceName       = "service.name"
	ServiceInstanceID = "service.instance.id" // which engine of a cluster
)

// Instrumentation scopes.
const (
	ScopeAPI       = "vllm.api"
	ScopeScheduler = "vllm.scheduler"
	ScopeStep      = "vllm.scheduler.step"
)

// Span names. Step spans are named StepSpanPrefix followed by their
// sequence number.
const (
	SpanRequest    = "llm_request" // the API server's span of a request (scope vllm.api)
	SpanCore       = "llm_core"    // the engine's span of a request, child of llm_request
	StepSpanPrefix = "scheduler_steps_"
)

// Span attributes of llm_request; llm_core carries RequestID only (the
// engine's id).
const (
	RequestID          = "gen_ai.request.id"
	HTTPRoute          = "http.route"
	ResponseModel      = "gen_ai.response.model"
	UsagePromptTokens  = "gen_ai.usage.prompt_tokens"
	RequestTemperature = "gen_ai.request.temperature"
	RequestTopP        = "gen_ai.request.top_p"
	RequestMaxTokens   = "gen_ai.request.max_tokens"
	RequestN           = "gen_ai.request.n"
)

// Span attributes of scheduler_steps_<seq>.
const (
	SpanSequence    = "scheduler.span_sequence"
	StepRangeStart  = "scheduler.step_range_start"
	StepRangeEnd    = "scheduler.step_range_end"
	ClosureInterval = "scheduler.closure_interval"
)

// Events of llm_request. HandoffToCore and FirstResponseFromCore come from
// the chat route only.
const (
	APIArrived               = "api.ARRIVED"
	APIHandoffToCore         = "api.HANDOFF_TO_CORE"
	APIFirstResponseFromCore = "api.FIRST_RESPONSE_FROM_CORE"
	APIDeparted              = "api.DEPARTED"
	APIAborted               = "api.ABORTED"
)

// Attributes of the API events; AbortReason and AbortError are on
// api.ABORTED only.
const (
	EventTSMonotonic = "event.ts.monotonic"
	AbortReason      = "reason"
	AbortError       = "error"
)

// Events of llm_core.
const (
	JourneyQueued     = "journey.QUEUED"
	JourneyScheduled  = "journey.SCHEDULED"
	JourneyFirstToken = "journey.FIRST_TOKEN"
	JourneyPreempted  = "journey.PREEMPTED"
	JourneyFinished   = "journey.FINISHED"
)

// Attributes of the journey events; ScheduleKind is on SCHEDULED only,
// FinishStatus on FINISHED only.
const (
	EventType          = "event.type"
	TSMonotonic        = "ts.monotonic"
	TSMonotonicNs      = "ts.monotonic_ns"
	SchedulerStep      = "scheduler.step"
	Phase              = "phase"
	PrefillDoneTokens  = "prefill.done_tokens"
	PrefillTotalTokens = "prefill.total_tokens"
	DecodeDoneTokens   = "decode.done_tokens"
	DecodeMaxTokens    = "decode.max_tokens"
	NumPreemptions     = "num_preemptions"
	ScheduleKind       = "schedule.kind"
	FinishStatus       = "finish.status"
)

// Values of the journey and snapshot attributes.
const (
	PhaseWaiting = "WAITING" // phase only
	PhasePrefill = "PREFILL" // phase and request.phase
	PhaseDecode  = "DECODE"

	ScheduleFirst  = "FIRST"
	ScheduleResume = "RESUME"

	FinishStopped = "stopped"
	FinishLength  = "length"
	FinishAborted = "aborted"
	FinishIgnored = "ignored"
	FinishError   = "error"
)

// Events of scheduler_steps_<seq>.
const (
	StepBatchSummary    = "step.BATCH_SUMMARY"
	StepRequestSnapshot = "step.REQUEST_SNAPSHOT"
)

// Attributes of step.BATCH_SUMMARY. StepDurationUs is the scheduler's CPU
// time, not the step's.
const (
	StepID               = "step.id" // on REQUEST_SNAPSHOT too
	StepTSStartNs        = "step.ts_start_ns"
	StepTSEndNs          = "step.ts_end_ns"
	StepDurationUs       = "step.duration_us"
	QueueRunningDepth    = "queue.running_depth"
	QueueWaitingDepth    = "queue.waiting_depth"
	BatchNumPrefillReqs  = "batch.num_prefill_reqs"
	BatchNumDecodeReqs   = "batch.num_decode_reqs"
	BatchScheduledTokens = "batch.scheduled_tokens"
	BatchPrefillTokens   = "batch.prefill_tokens"
	BatchDecodeTokens    = "batch.decode_tokens"
	BatchNumFinished     = "batch.num_finished"
	BatchNumPreempted    = "batch.num_preempted"
	KVBlocksTotalGPU     = "kv.blocks_total_gpu"
	KVBlocksFreeGPU      = "kv.blocks_free_gpu"
	KVUsageGPURatio      = "kv.usage_gpu_ratio"
)

// Attributes of step.REQUEST_SNAPSHOT (with StepID); EffectivePromptLen
// is optional.
const (
	SnapshotRequestID          = "request.id"
	SnapshotPhase              = "request.phase"
	SnapshotPromptTokens       = "request.num_prompt_tokens"
	SnapshotComputedTokens     = "request.num_computed_tokens"
	SnapshotOutputTokens       = "request.num_output_tokens"
	SnapshotPreemptions        = "request.num_preemptions"
	SnapshotScheduledTokens    = "request.scheduled_tokens_this_step"
	SnapshotBlocksAllocated    = "kv.blocks_allocated_gpu"
	SnapshotBlocksCached       = "kv.blocks_cached_gpu"
	SnapshotEffectivePromptLen = "request.effective_prompt_len"
)

// KV events subscriber event types (not OTLP: JSON lines of
// [ts, [event, ...], dp_rank?], each event an array led by its type).
const (
	KVTransferInitiated       = "TransferInitiated"
	KVTransferCompleted       = "TransferCompleted"
	KVCacheStoreCommitted     = "CacheStoreCommitted"
	KVCacheLoadCommitted      = "CacheLoadCommitted"
	KVCacheEviction           = "CacheEviction"
	KVRemoteTransferInitiated = "RemoteTransferInitiated"
	KVRemoteTransferCompleted = "RemoteTransferCompleted"
	KVBlockStored             = "BlockStored"
	KVBlockRemoved            = "BlockRemoved"
	KVAllBlocksCleared        = "AllBlocksCleared"
)

// KV media and eviction reasons.
const (
	MediumGPU     = "GPU"
	MediumCPU     = "CPU"
	MediumDisk    = "DISK"
	MediumLMCache = "LMCACHE"

	EvictionLRU        = "lru"
	EvictionCapacity   = "capacity"
	EvictionPreemption = "preemption"
)

// The tables calibrate ingest writes (one Parquet file each, named after
// the table) and fit reads.
const (
	TableRequests         = "requests"
	TableJourneyEvents    = "journey_events"
	TableSteps            = "steps"
	TableRequestSnapshots = "request_snapshots"
	TableKVEvents         = "kv_events"

	// TablesSchemaVersion versions the tables' columns. Bump it when a
	// column is added, removed, renamed or changes meaning.
	//
	// 2: the instance column (resource attribute service.instance.id) in
	// requests, journey_events, steps and request_snapshots.
	TablesSchemaVersion = 2

	// Parquet key-value metadata of every table.
	MetaTable         = "blis.table"
	MetaSchemaVersion = "blis.schema_version"
)
