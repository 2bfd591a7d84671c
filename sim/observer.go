package sim

// Phase is a request's phase as vLLM's journey events report it.
type Phase uint8

const (
	PhaseWaiting Phase = iota
	PhasePrefill
	PhaseDecode
)

func (p Phase) String() string {
	switch p {
	case PhasePrefill:
		return "PREFILL"
	case PhaseDecode:
		return "DECODE"
	}
	return "WAITING"
}

// JourneyKind is a journey event type.
type JourneyKind uint8

const (
	JourneyQueued JourneyKind = iota
	JourneyScheduled
	JourneyFirstToken
	JourneyPreempted
	JourneyFinished
)

func (k JourneyKind) String() string {
	return [...]string{"QUEUED", "SCHEDULED", "FIRST_TOKEN", "PREEMPTED", "FINISHED"}[k]
}

// JourneyEvent is one lifecycle event of a request inside the engine, with
// the progress counters vLLM attaches to it. SCHEDULED and PREEMPTED happen
// in the scheduler at the start of a step; FIRST_TOKEN and FINISHED after
// the step's output is processed.
type JourneyEvent struct {
	Kind           JourneyKind
	Req            int64
	AtUs           int64
	Step           int64 // the engine's step counter when emitted (0 before the first step)
	Phase          Phase
	PrefillDone    int64 // most prompt tokens ever computed (survives preemption)
	PrefillTotal   int64
	DecodeDone     int64
	DecodeMax      int64
	NumPreemptions int64
	Resume         bool   // SCHEDULED: schedule.kind RESUME rather than FIRST
	FinishStatus   string // FINISHED only: "length", or "aborted" for a timed-out request
	// EnqueuedUs is when the request first joined the waiting queue (its
	// QUEUED event's time; 0 before it) and Class its SLO class: blis
	// fields, not vLLM's.
	EnqueuedUs int64
	Class      SLOClass
}

// StepSummary is one engine step as vLLM's step.BATCH_SUMMARY reports it.
type StepSummary struct {
	ID      int64
	StartUs int64 // the top of schedule()
	// CycleUs is the step's full time; the next step starts no earlier than
	// StartUs + CycleUs.
	CycleUs int64
	// SchedulerUs is the scheduler's own CPU time, which is what vLLM's
	// step.duration_us measures.
	SchedulerUs                      int64
	Running, Waiting                 int64 // after scheduling
	NumPrefill, NumDecode            int64
	Scheduled, PrefillTok, DecodeTok int64
	NumFinished, NumPreempted        int64
	KVTotal, KVFree                  int64
	KVUsage                          float64
}

// RequestSnapshot is one running request's state at a step, as vLLM's
// step.REQUEST_SNAPSHOT reports it on rich steps.
type RequestSnapshot struct {
	Req               int64
	Phase             Phase
	PromptTokens      int64
	ComputedTokens    int64 // before this step
	OutputTokens      int64 // before this step
	Preemptions       int64
	ScheduledThisStep int64
	BlocksAllocated   int64 // blocks this request allocated fresh
	BlocksCached      int64 // blocks it shares from the prefix cache
}

// SnapshotSource gives the running requests' snapshots of the current step;
// an observer calls it only for the steps it samples richly.
type SnapshotSource interface {
	Snapshots(dst []RequestSnapshot) []RequestSnapshot
}

// KVEventKind is a KV offload event, in the KV events subscriber's terms.
type KVEventKind uint8

const (
	// KVStore: blocks evicted from the GPU under pressure were stored to
	// the CPU tier during the step.
	KVStore KVEventKind = iota
	// KVLoad: a request's prefix was reloaded from the CPU tier.
	KVLoad
	// KVCPUEviction: the CPU tier dropped blocks to make room.
	KVCPUEviction
)

// KVEvent is one offload event of a step.
type KVEvent struct {
	Kind   KVEventKind
	Step   int64
	AtUs   int64
	Req    int64 // KVLoad only; -1 otherwise
	Blocks int64
	// Thrashing (KVLoad only) is how many of the reloaded blocks had been
	// stored to the CPU less than KVThrashWindowUs before: they count in
	// KVOffload.Thrashing. A blis field, not the subscriber's.
	Thrashing int64
}

// KVThrashWindowUs is the KV thrashing window: a block reloaded from the
// CPU tier less than this long after it was stored there counts as
// thrashing (KVOffload.Thrashing, KVEvent.Thrashing; docs/anomalies.md's 1000
// ticks, docs/anomalies.md).
const KVThrashWindowUs = thrashWindowUs

// Observer receives the run as it happens, in simulation order. It must not
// change the simulation; the trace writer is one. Pointers passed to it are
// valid only during the call: the engine reuses them.
type Observer interface {
	Arrived(spec *RequestSpec)
	Journey(ev *JourneyEvent)
	Departed(req int64, atUs int64)
	// Dropped reports a request refused at enqueue (it can never fit the KV
	// cache); reason is human-readable.
	Dropped(req int64, atUs int64, reason string)
	// Aborted reports that the client of a request that had arrived gave
	// up at atUs (Engine.Abort; vLLM's API server records api.ABORTED). A
	// request that had reached the scheduler then gets its
	// journey.FINISHED with FinishStatus "aborted", at atUs or at the end
	// of the step in flight; one still in API processing gets none.
	Aborted(req int64, atUs int64)
	Step(s *StepSummary, snaps SnapshotSource)
	KV(ev *KVEvent)
}
