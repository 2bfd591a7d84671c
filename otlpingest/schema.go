package otlpingest

import (
	"fmt"
	"sort"
	"strings"
)

// The vLLM journey and step tracing schema (../shared/vllm-tracing-schema.md)
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
	ScopeAPI       = "vllm.api"
	ScopeScheduler = "vllm.scheduler"
	ScopeStep      = "vllm.scheduler.step"
	SpanRequest    = "llm_request"
	SpanCore       = "llm_core"
	StepSpanPrefix = "scheduler_steps_"
)

// RequestSpanAttrs are the llm_request span's attributes.
var RequestSpanAttrs = []AttrSpec{
	keyAttr("gen_ai.request.id", ValString),
	opt("http.route", ValString),
	opt("gen_ai.response.model", ValString),
	opt("gen_ai.usage.prompt_tokens", ValInt),
	opt("gen_ai.request.temperature", ValDouble),
	opt("gen_ai.request.top_p", ValDouble),
	opt("gen_ai.request.max_tokens", ValInt),
	opt("gen_ai.request.n", ValInt),
}

// CoreSpanAttrs are the llm_core span's attributes.
var CoreSpanAttrs = []AttrSpec{keyAttr("gen_ai.request.id", ValString)}

// StepSpanAttrs are the scheduler_steps_<seq> span's attributes.
var StepSpanAttrs = []AttrSpec{
	req("scheduler.span_sequence", ValInt), req("scheduler.step_range_start", ValInt),
	req("scheduler.step_range_end", ValInt), req("scheduler.closure_interval", ValInt),
}

var apiTS = keyAttr("event.ts.monotonic", ValDouble)

// APIEvents are the llm_request span's events. HANDOFF_TO_CORE and
// FIRST_RESPONSE_FROM_CORE come from the chat route only.
var APIEvents = []EventSpec{
	{"api.ARRIVED", []AttrSpec{apiTS}},
	{"api.HANDOFF_TO_CORE", []AttrSpec{apiTS}},
	{"api.FIRST_RESPONSE_FROM_CORE", []AttrSpec{apiTS}},
	{"api.DEPARTED", []AttrSpec{apiTS}},
	{"api.ABORTED", []AttrSpec{apiTS, opt("reason", ValString), opt("error", ValString)}},
}

func journeyAttrs(extra ...AttrSpec) []AttrSpec {
	base := []AttrSpec{
		req("event.type", ValString), req("ts.monotonic", ValDouble), keyAttr("ts.monotonic_ns", ValInt),
		req("scheduler.step", ValInt), req("phase", ValString),
		req("prefill.done_tokens", ValInt), req("prefill.total_tokens", ValInt),
		req("decode.done_tokens", ValInt), req("decode.max_tokens", ValInt), req("num_preemptions", ValInt),
	}
	return append(base, extra...)
}

// JourneyEvents are the llm_core span's events.
var JourneyEvents = []EventSpec{
	{"journey.QUEUED", journeyAttrs()},
	{"journey.SCHEDULED", journeyAttrs(req("schedule.kind", ValString))},
	{"journey.FIRST_TOKEN", journeyAttrs()},
	{"journey.PREEMPTED", journeyAttrs()},
	{"journey.FINISHED", journeyAttrs(req("finish.status", ValString))},
}

// BatchSummaryAttrs are step.BATCH_SUMMARY's attributes.
var BatchSummaryAttrs = []AttrSpec{
	keyAttr("step.id", ValInt), keyAttr("step.ts_start_ns", ValInt), req("step.ts_end_ns", ValInt),
	req("step.duration_us", ValInt), req("queue.running_depth", ValInt), req("queue.waiting_depth", ValInt),
	req("batch.num_prefill_reqs", ValInt), req("batch.num_decode_reqs", ValInt), req("batch.scheduled_tokens", ValInt),
	req("batch.prefill_tokens", ValInt), req("batch.decode_tokens", ValInt), req("batch.num_finished", ValInt),
	req("batch.num_preempted", ValInt), req("kv.blocks_total_gpu", ValInt), req("kv.blocks_free_gpu", ValInt),
	req("kv.usage_gpu_ratio", ValDouble),
}

// RequestSnapshotAttrs are step.REQUEST_SNAPSHOT's attributes.
var RequestSnapshotAttrs = []AttrSpec{
	keyAttr("step.id", ValInt), keyAttr("request.id", ValString), req("request.phase", ValString),
	req("request.num_prompt_tokens", ValInt), req("request.num_computed_tokens", ValInt),
	req("request.num_output_tokens", ValInt), req("request.num_preemptions", ValInt),
	req("request.scheduled_tokens_this_step", ValInt), req("kv.blocks_allocated_gpu", ValInt),
	req("kv.blocks_cached_gpu", ValInt), opt("request.effective_prompt_len", ValInt),
}

// StepEvents are the step span's events.
var StepEvents = []EventSpec{
	{"step.BATCH_SUMMARY", BatchSummaryAttrs},
	{"step.REQUEST_SNAPSHOT", RequestSnapshotAttrs},
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
