package otlpingest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// The vLLM journey and step tracing schema (docs/vllm-tracing.md, whose
// span-by-span reference is rendered from these tables)
// as data: which spans and events exist and which attributes they carry.

// AttrSpec is one attribute the schema defines.
type AttrSpec struct {
	Key  string
	Type ValueType
	// Required attributes are always emitted; a missing one is counted.
	// Locates marks the attributes that place a row (an id, a timestamp):
	// without one the row cannot be written and is skipped, and counted.
	Required, Locates bool
}

// EventSpec lists an event's attributes.
type EventSpec struct {
	Name  string
	Attrs []AttrSpec
}

func req(key string, t ValueType) AttrSpec { return AttrSpec{Key: key, Type: t, Required: true} }
func keyAttr(key string, t ValueType) AttrSpec {
	return AttrSpec{Key: key, Type: t, Required: true, Locates: true}
}
func opt(key string, t ValueType) AttrSpec { return AttrSpec{Key: key, Type: t} }

// Span names and instrumentation scopes.
const (
	ScopeAPI       = tracevocab.ScopeAPI
	ScopeScheduler = tracevocab.ScopeScheduler
	ScopeStep      = tracevocab.ScopeStep
	SpanRequest    = tracevocab.SpanRequest
	SpanCore       = tracevocab.SpanCore
	StepSpanPrefix = tracevocab.StepSpanPrefix
)

// RequestSpanAttrs are the llm_request span's attributes.
var RequestSpanAttrs = []AttrSpec{
	keyAttr(tracevocab.RequestID, ValString),
	opt(tracevocab.HTTPRoute, ValString),
	opt(tracevocab.ResponseModel, ValString),
	opt(tracevocab.UsagePromptTokens, ValInt),
	opt(tracevocab.RequestTemperature, ValDouble),
	opt(tracevocab.RequestTopP, ValDouble),
	opt(tracevocab.RequestMaxTokens, ValInt),
	opt(tracevocab.RequestN, ValInt),
}

// CoreSpanAttrs are the llm_core span's attributes.
var CoreSpanAttrs = []AttrSpec{keyAttr(tracevocab.RequestID, ValString)}

// StepSpanAttrs are the scheduler_steps_<seq> span's attributes.
var StepSpanAttrs = []AttrSpec{
	req(tracevocab.SpanSequence, ValInt), req(tracevocab.StepRangeStart, ValInt),
	req(tracevocab.StepRangeEnd, ValInt), req(tracevocab.ClosureInterval, ValInt),
}

var apiTS = keyAttr(tracevocab.EventTSMonotonic, ValDouble)

// APIEvents are the llm_request span's events. HANDOFF_TO_CORE and
// FIRST_RESPONSE_FROM_CORE come from the chat route only.
var APIEvents = []EventSpec{
	{tracevocab.APIArrived, []AttrSpec{apiTS}},
	{tracevocab.APIHandoffToCore, []AttrSpec{apiTS}},
	{tracevocab.APIFirstResponseFromCore, []AttrSpec{apiTS}},
	{tracevocab.APIDeparted, []AttrSpec{apiTS}},
	{tracevocab.APIAborted, []AttrSpec{apiTS, opt(tracevocab.AbortReason, ValString), opt(tracevocab.AbortError, ValString)}},
}

func journeyAttrs(extra ...AttrSpec) []AttrSpec {
	base := []AttrSpec{
		req(tracevocab.EventType, ValString), req(tracevocab.TSMonotonic, ValDouble), keyAttr(tracevocab.TSMonotonicNs, ValInt),
		req(tracevocab.SchedulerStep, ValInt), req(tracevocab.Phase, ValString),
		req(tracevocab.PrefillDoneTokens, ValInt), req(tracevocab.PrefillTotalTokens, ValInt),
		req(tracevocab.DecodeDoneTokens, ValInt), req(tracevocab.DecodeMaxTokens, ValInt), req(tracevocab.NumPreemptions, ValInt),
	}
	return append(base, extra...)
}

// JourneyEvents are the llm_core span's events.
var JourneyEvents = []EventSpec{
	{tracevocab.JourneyQueued, journeyAttrs()},
	{tracevocab.JourneyScheduled, journeyAttrs(req(tracevocab.ScheduleKind, ValString))},
	{tracevocab.JourneyFirstToken, journeyAttrs()},
	{tracevocab.JourneyPreempted, journeyAttrs()},
	{tracevocab.JourneyFinished, journeyAttrs(req(tracevocab.FinishStatus, ValString))},
}

// BatchSummaryAttrs are step.BATCH_SUMMARY's attributes.
var BatchSummaryAttrs = []AttrSpec{
	keyAttr(tracevocab.StepID, ValInt), keyAttr(tracevocab.StepTSStartNs, ValInt), req(tracevocab.StepTSEndNs, ValInt),
	req(tracevocab.StepDurationUs, ValInt), req(tracevocab.QueueRunningDepth, ValInt), req(tracevocab.QueueWaitingDepth, ValInt),
	req(tracevocab.BatchNumPrefillReqs, ValInt), req(tracevocab.BatchNumDecodeReqs, ValInt), req(tracevocab.BatchScheduledTokens, ValInt),
	req(tracevocab.BatchPrefillTokens, ValInt), req(tracevocab.BatchDecodeTokens, ValInt), req(tracevocab.BatchNumFinished, ValInt),
	req(tracevocab.BatchNumPreempted, ValInt), req(tracevocab.KVBlocksTotalGPU, ValInt), req(tracevocab.KVBlocksFreeGPU, ValInt),
	req(tracevocab.KVUsageGPURatio, ValDouble),
}

// RequestSnapshotAttrs are step.REQUEST_SNAPSHOT's attributes.
var RequestSnapshotAttrs = []AttrSpec{
	keyAttr(tracevocab.StepID, ValInt), keyAttr(tracevocab.SnapshotRequestID, ValString), req(tracevocab.SnapshotPhase, ValString),
	req(tracevocab.SnapshotPromptTokens, ValInt), req(tracevocab.SnapshotComputedTokens, ValInt),
	req(tracevocab.SnapshotOutputTokens, ValInt), req(tracevocab.SnapshotPreemptions, ValInt),
	req(tracevocab.SnapshotScheduledTokens, ValInt), req(tracevocab.SnapshotBlocksAllocated, ValInt),
	req(tracevocab.SnapshotBlocksCached, ValInt), opt(tracevocab.SnapshotEffectivePromptLen, ValInt),
}

// StepEvents are the step span's events.
var StepEvents = []EventSpec{
	{tracevocab.StepBatchSummary, BatchSummaryAttrs},
	{tracevocab.StepRequestSnapshot, RequestSnapshotAttrs},
}

// More issue kinds, found when spans are read against the schema.
const (
	IssueUnknownEvent     IssueKind = "unknown_event"
	IssueUnknownSpan      IssueKind = "unknown_span"
	IssueUnknownAttribute IssueKind = "unknown_attribute"
	IssueWrongType        IssueKind = "wrong_attribute_type"
	IssueMissingAttribute IssueKind = "missing_required_attribute"
	IssueMissingKey       IssueKind = "missing_key_attribute" // the row was skipped
	IssueDroppedEvents    IssueKind = "dropped_events"
	IssueDuplicateSpan    IssueKind = "duplicate_span"
	IssueOrphanAPISpan    IssueKind = "api_span_without_core_span"
	IssueOrphanCoreSpan   IssueKind = "core_span_without_api_span"
)

// Attrs is an attribute list checked against its spec: Get returns a value
// of the specified type or reports why not.
type Attrs struct {
	spec []AttrSpec
	vals []Value
	have []bool
	next int // where the next lookup starts: rows read attributes in spec order
}

// checkAttrs matches kvs against spec. It returns the matched values and the
// issues, in spec order then attribute order, so that the result is
// deterministic. owner and name describe the owner for issue details
// (e.g. "event", "step.BATCH_SUMMARY").
func checkAttrs(spec []AttrSpec, kvs []KeyValue, owner, name string, issue func(IssueKind, string)) (Attrs, bool) {
	var a Attrs
	ok := checkAttrsInto(&a, spec, kvs, owner, name, issue)
	return a, ok
}

// checkAttrsInto is checkAttrs reusing dst's storage: the hot path runs it
// once per event.
func checkAttrsInto(a *Attrs, spec []AttrSpec, kvs []KeyValue, owner, name string, issue func(IssueKind, string)) bool {
	a.spec, a.next = spec, 0
	if cap(a.vals) < len(spec) {
		a.vals, a.have = make([]Value, len(spec)), make([]bool, len(spec))
	}
	a.vals, a.have = a.vals[:len(spec)], a.have[:len(spec)]
	clear(a.have)
	for pos, kv := range kvs {
		i := pos // attributes usually come in spec order
		if i >= len(spec) || spec[i].Key != kv.Key {
			i = specIndex(spec, kv.Key)
		}
		if i < 0 {
			issue(IssueUnknownAttribute, fmt.Sprintf("%s %s: attribute %q", owner, name, kv.Key))
			continue
		}
		if kv.Value.Type != spec[i].Type {
			issue(IssueWrongType, fmt.Sprintf("%s %s: attribute %q is %s, want %s", owner, name, kv.Key, kv.Value.Type, spec[i].Type))
			continue
		}
		a.vals[i], a.have[i] = kv.Value, true
	}
	ok := true
	var missing, missingKeys []string
	for i, s := range spec {
		if a.have[i] || !s.Required {
			continue
		}
		if s.Locates {
			missingKeys = append(missingKeys, s.Key)
			ok = false
		} else {
			missing = append(missing, s.Key)
		}
	}
	if len(missing) > 0 {
		issue(IssueMissingAttribute, fmt.Sprintf("%s %s: missing %s", owner, name, strings.Join(missing, ", ")))
	}
	if len(missingKeys) > 0 {
		issue(IssueMissingKey, fmt.Sprintf("%s %s: missing %s; row skipped", owner, name, strings.Join(missingKeys, ", ")))
	}
	return ok
}

func specIndex(spec []AttrSpec, key string) int {
	for i := range spec {
		if spec[i].Key == key {
			return i
		}
	}
	return -1
}

// index finds key in the spec, trying first the position after the last
// lookup.
func (a *Attrs) index(key string) int {
	i := a.next
	if i >= len(a.spec) || a.spec[i].Key != key {
		i = specIndex(a.spec, key)
	}
	a.next = i + 1
	return i
}

// Int returns an int attribute and whether it was present with its type.
func (a *Attrs) Int(key string) (int64, bool) {
	i := a.index(key)
	if i < 0 || !a.have[i] {
		return 0, false
	}
	return a.vals[i].Int, true
}

// Double returns a double attribute.
func (a *Attrs) Double(key string) (float64, bool) {
	i := a.index(key)
	if i < 0 || !a.have[i] {
		return 0, false
	}
	return a.vals[i].Double, true
}

// Str returns a string attribute.
func (a *Attrs) Str(key string) (string, bool) {
	i := a.index(key)
	if i < 0 || !a.have[i] {
		return "", false
	}
	return a.vals[i].Str, true
}

// eventSpec finds an event's spec among specs.
func eventSpec(specs []EventSpec, name string) *EventSpec {
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i]
		}
	}
	return nil
}

// SchemaKeys lists every attribute key the schema knows, sorted; used for
// documentation and for tests that check the fixtures cover the schema.
func SchemaKeys() []string {
	seen := map[string]bool{}
	add := func(as []AttrSpec) {
		for _, a := range as {
			seen[a.Key] = true
		}
	}
	add(RequestSpanAttrs)
	add(CoreSpanAttrs)
	add(StepSpanAttrs)
	for _, list := range [][]EventSpec{APIEvents, JourneyEvents, StepEvents} {
		for _, e := range list {
			add(e.Attrs)
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
