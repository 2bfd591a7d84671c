package otlpingest

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// Opt is a nullable column value.
type Opt[T any] struct {
	V  T
	OK bool
}

func some[T any](v T, ok bool) Opt[T] { return Opt[T]{V: v, OK: ok} }

// Where locates a row in the input.
type Where struct {
	File   string
	Record int64
}

// At locates an event: its record and its position among its span's
// events (0-based), or among a KV-events line's events.
type At struct {
	Where
	EventIndex int32
}

// JourneyEventRow is one api.* or journey.* event.
type JourneyEventRow struct {
	At
	TraceID, SpanID string
	Instance        string // the span's service.instance.id ("" when absent)
	SpanName        string // llm_request or llm_core
	RequestID       string // the span's gen_ai.request.id: the API id on API events, the engine id on journey events
	Event           string
	TimeUnixNano    uint64       // wall clock
	EventTSMono     Opt[float64] // event.ts.monotonic (API events)
	EventType       Opt[string]  // event.type (journey events)
	TSMonotonic     Opt[float64] // ts.monotonic (journey events)
	TSMonotonicNs   Opt[int64]
	SchedulerStep   Opt[int64]
	Phase           Opt[string]
	PrefillDone     Opt[int64]
	PrefillTotal    Opt[int64]
	DecodeDone      Opt[int64]
	DecodeMax       Opt[int64]
	NumPreemptions  Opt[int64]
	ScheduleKind    Opt[string]
	FinishStatus    Opt[string]
	Reason          Opt[string]
	Error           Opt[string]
}

// StepSpanInfo is what a step row carries of its scheduler_steps span.
type StepSpanInfo struct {
	TraceID, SpanID    string
	Instance           string // the span's service.instance.id ("" when absent): step ids count per instance
	SpanSequence       Opt[int64]
	StepRangeStart     Opt[int64]
	StepRangeEnd       Opt[int64]
	ClosureInterval    Opt[int64]
	DroppedEventsCount uint32
}

// StepRow is one step.BATCH_SUMMARY.
type StepRow struct {
	At
	StepSpanInfo
	TimeUnixNano     uint64
	StepID           int64
	TSStartNs        int64
	TSEndNs          Opt[int64]
	DurationUs       Opt[int64] // scheduler CPU time only, not the step time
	RunningDepth     Opt[int64]
	WaitingDepth     Opt[int64]
	NumPrefillReqs   Opt[int64]
	NumDecodeReqs    Opt[int64]
	ScheduledTokens  Opt[int64]
	PrefillTokens    Opt[int64]
	DecodeTokens     Opt[int64]
	NumFinished      Opt[int64]
	NumPreempted     Opt[int64]
	KVBlocksTotalGPU Opt[int64]
	KVBlocksFreeGPU  Opt[int64]
	KVUsageGPURatio  Opt[float64]
	HasRichSnapshots bool // a REQUEST_SNAPSHOT with this step id was seen in the same span
}

// SnapshotRow is one step.REQUEST_SNAPSHOT.
type SnapshotRow struct {
	At
	StepSpanInfo
	TimeUnixNano            uint64
	StepID                  int64
	RequestID               string
	Phase                   Opt[string]
	NumPromptTokens         Opt[int64]
	NumComputedTokens       Opt[int64]
	NumOutputTokens         Opt[int64]
	NumPreemptions          Opt[int64]
	ScheduledTokensThisStep Opt[int64]
	KVBlocksAllocatedGPU    Opt[int64]
	KVBlocksCachedGPU       Opt[int64]
	EffectivePromptLen      Opt[int64]
}

// Rows receives the rows of the event tables in input order.
type Rows struct {
	Journey   []JourneyEventRow
	Steps     []StepRow
	Snapshots []SnapshotRow
	Issues    []Issue

	stepSpans map[uint64]struct{} // hashes of the step spans seen (instance, trace and span id), to skip duplicates
	spanAttrs Attrs               // scratch, reused for every span
	evAttrs   Attrs               // scratch, reused for every event
}

func (r *Rows) issue(w Where, kind IssueKind, detail string) {
	r.Issues = append(r.Issues, Issue{Kind: kind, File: w.File, Record: w.Record, Detail: detail})
}

// IsVLLMSpan says whether a span of this name is one the tables take (an
// llm_request, llm_core or scheduler_steps_<seq> span); any other is
// counted as unknown_span.
func IsVLLMSpan(name string) bool {
	return name == SpanRequest || name == SpanCore || strings.HasPrefix(name, StepSpanPrefix)
}

// AddSpan turns one span's events into rows. Request spans also go to the
// requests join, which is not this function's business (and which finds
// their duplicates); a step span seen twice is counted and skipped here.
// Step spans of different instances are different spans even with the
// same ids: each engine of a cluster numbers its steps and step spans
// from 1.
func (r *Rows) AddSpan(file string, sp *Span) {
	w := Where{File: file, Record: sp.Record}
	switch {
	case !IsVLLMSpan(sp.Name):
		r.issue(w, IssueUnknownSpan, fmt.Sprintf("span %q (scope %q)", sp.Name, sp.Scope))
	case sp.Name == SpanRequest, sp.Name == SpanCore:
		r.journeySpan(w, sp)
	default: // a step span
		if r.stepSpans == nil {
			r.stepSpans = map[uint64]struct{}{}
		}
		h := stepSpanHash(sp)
		if _, dup := r.stepSpans[h]; dup {
			r.issue(w, IssueDuplicateSpan, fmt.Sprintf("step span %q (%s%s) seen twice", sp.Name, sp.SpanID, instanceNote(sp.Instance)))
			return
		}
		r.stepSpans[h] = struct{}{}
		r.stepSpan(w, sp)
	}
	if sp.DroppedEventsCount > 0 {
		r.issue(w, IssueDroppedEvents, fmt.Sprintf("span %q (%s) lost %d events to the SDK's per-span limit", sp.Name, sp.SpanID, sp.DroppedEventsCount))
	}
}

func (r *Rows) journeySpan(w Where, sp *Span) {
	specs, spanSpec := APIEvents, RequestSpanAttrs
	if sp.Name == SpanCore {
		specs, spanSpec = JourneyEvents, CoreSpanAttrs
	}
	issue := func(k IssueKind, d string) { r.issue(w, k, d) }
	sa := &r.spanAttrs
	checkAttrsInto(sa, spanSpec, sp.Attrs, "span", sp.Name, issue)
	reqID, _ := sa.Str(tracevocab.RequestID)
	var traceID, spanID string // hex, made once per span
	for i := range sp.Events {
		ev := &sp.Events[i]
		spec := eventSpec(specs, ev.Name)
		if spec == nil {
			issue(IssueUnknownEvent, fmt.Sprintf("event %q on span %s", ev.Name, sp.Name))
			continue
		}
		a := &r.evAttrs
		if !checkAttrsInto(a, spec.Attrs, ev.Attrs, "event", ev.Name, issue) {
			continue
		}
		if traceID == "" {
			traceID, spanID = sp.TraceID.String(), sp.SpanID.String()
		}
		row := JourneyEventRow{At: At{w, int32(i)}, TraceID: traceID, SpanID: spanID,
			Instance: sp.Instance, SpanName: sp.Name, RequestID: reqID, Event: ev.Name, TimeUnixNano: ev.TimeUnixNano}
		if sp.Name == SpanRequest {
			row.EventTSMono = some(a.Double(tracevocab.EventTSMonotonic))
			row.Reason = some(a.Str(tracevocab.AbortReason))
			row.Error = some(a.Str(tracevocab.AbortError))
		} else {
			row.EventType = some(a.Str(tracevocab.EventType))
			row.TSMonotonic = some(a.Double(tracevocab.TSMonotonic))
			row.TSMonotonicNs = some(a.Int(tracevocab.TSMonotonicNs))
			row.SchedulerStep = some(a.Int(tracevocab.SchedulerStep))
			row.Phase = some(a.Str(tracevocab.Phase))
			row.PrefillDone = some(a.Int(tracevocab.PrefillDoneTokens))
			row.PrefillTotal = some(a.Int(tracevocab.PrefillTotalTokens))
			row.DecodeDone = some(a.Int(tracevocab.DecodeDoneTokens))
			row.DecodeMax = some(a.Int(tracevocab.DecodeMaxTokens))
			row.NumPreemptions = some(a.Int(tracevocab.NumPreemptions))
			row.ScheduleKind = some(a.Str(tracevocab.ScheduleKind))
			row.FinishStatus = some(a.Str(tracevocab.FinishStatus))
		}
		r.Journey = append(r.Journey, row)
	}
}

func (r *Rows) stepSpan(w Where, sp *Span) {
	issue := func(k IssueKind, d string) { r.issue(w, k, d) }
	sa := &r.spanAttrs
	checkAttrsInto(sa, StepSpanAttrs, sp.Attrs, "span", sp.Name, issue)
	info := StepSpanInfo{TraceID: sp.TraceID.String(), SpanID: sp.SpanID.String(), Instance: sp.Instance,
		SpanSequence: some(sa.Int(tracevocab.SpanSequence)), StepRangeStart: some(sa.Int(tracevocab.StepRangeStart)),
		StepRangeEnd: some(sa.Int(tracevocab.StepRangeEnd)), ClosureInterval: some(sa.Int(tracevocab.ClosureInterval)),
		DroppedEventsCount: sp.DroppedEventsCount}
	firstStep := len(r.Steps)
	rich := map[int64]bool{}
	for i := range sp.Events {
		ev := &sp.Events[i]
		switch ev.Name {
		case tracevocab.StepBatchSummary:
			a := &r.evAttrs
			if !checkAttrsInto(a, BatchSummaryAttrs, ev.Attrs, "event", ev.Name, issue) {
				continue
			}
			id, _ := a.Int(tracevocab.StepID)
			start, _ := a.Int(tracevocab.StepTSStartNs)
			r.Steps = append(r.Steps, StepRow{At: At{w, int32(i)}, StepSpanInfo: info, TimeUnixNano: ev.TimeUnixNano,
				StepID: id, TSStartNs: start, TSEndNs: some(a.Int(tracevocab.StepTSEndNs)),
				DurationUs: some(a.Int(tracevocab.StepDurationUs)), RunningDepth: some(a.Int(tracevocab.QueueRunningDepth)),
				WaitingDepth: some(a.Int(tracevocab.QueueWaitingDepth)), NumPrefillReqs: some(a.Int(tracevocab.BatchNumPrefillReqs)),
				NumDecodeReqs: some(a.Int(tracevocab.BatchNumDecodeReqs)), ScheduledTokens: some(a.Int(tracevocab.BatchScheduledTokens)),
				PrefillTokens: some(a.Int(tracevocab.BatchPrefillTokens)), DecodeTokens: some(a.Int(tracevocab.BatchDecodeTokens)),
				NumFinished: some(a.Int(tracevocab.BatchNumFinished)), NumPreempted: some(a.Int(tracevocab.BatchNumPreempted)),
				KVBlocksTotalGPU: some(a.Int(tracevocab.KVBlocksTotalGPU)), KVBlocksFreeGPU: some(a.Int(tracevocab.KVBlocksFreeGPU)),
				KVUsageGPURatio: some(a.Double(tracevocab.KVUsageGPURatio))})
		case tracevocab.StepRequestSnapshot:
			a := &r.evAttrs
			if !checkAttrsInto(a, RequestSnapshotAttrs, ev.Attrs, "event", ev.Name, issue) {
				continue
			}
			id, _ := a.Int(tracevocab.StepID)
			reqID, _ := a.Str(tracevocab.SnapshotRequestID)
			rich[id] = true
			r.Snapshots = append(r.Snapshots, SnapshotRow{At: At{w, int32(i)}, StepSpanInfo: info, TimeUnixNano: ev.TimeUnixNano,
				StepID: id, RequestID: reqID, Phase: some(a.Str(tracevocab.SnapshotPhase)),
				NumPromptTokens: some(a.Int(tracevocab.SnapshotPromptTokens)), NumComputedTokens: some(a.Int(tracevocab.SnapshotComputedTokens)),
				NumOutputTokens: some(a.Int(tracevocab.SnapshotOutputTokens)), NumPreemptions: some(a.Int(tracevocab.SnapshotPreemptions)),
				ScheduledTokensThisStep: some(a.Int(tracevocab.SnapshotScheduledTokens)),
				KVBlocksAllocatedGPU:    some(a.Int(tracevocab.SnapshotBlocksAllocated)), KVBlocksCachedGPU: some(a.Int(tracevocab.SnapshotBlocksCached)),
				EffectivePromptLen: some(a.Int(tracevocab.SnapshotEffectivePromptLen))})
		default:
			issue(IssueUnknownEvent, fmt.Sprintf("event %q on span %s", ev.Name, sp.Name))
		}
	}
	for i := firstStep; i < len(r.Steps); i++ {
		r.Steps[i].HasRichSnapshots = rich[r.Steps[i].StepID]
	}
}

// stepSpanHash identifies a step span by its instance, trace and span id.
func stepSpanHash(sp *Span) uint64 {
	return fnv1a(fnv1a(fnv1a(fnvOffset, sp.TraceID[:]), sp.SpanID[:]), []byte(sp.Instance))
}

// instanceNote names a span's instance in an issue's detail.
func instanceNote(instance string) string {
	if instance == "" {
		return ""
	}
	return fmt.Sprintf(" of instance %q", instance)
}
