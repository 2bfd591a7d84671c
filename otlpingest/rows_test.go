package otlpingest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func iv(k string, v int64) KeyValue { return KeyValue{Key: k, Value: Value{Type: ValInt, Int: v}} }
func dv(k string, v float64) KeyValue {
	return KeyValue{Key: k, Value: Value{Type: ValDouble, Double: v}}
}
func sv(k string, v string) KeyValue { return KeyValue{Key: k, Value: Value{Type: ValString, Str: v}} }
func ev(name string, t uint64, kv ...KeyValue) Event {
	return Event{TimeUnixNano: t, Name: name, Attrs: kv}
}

func journeyKV(typ string, ns int64, step int64, phase string, pd, pt, dd, dm, np int64, extra ...KeyValue) []KeyValue {
	return append([]KeyValue{sv("event.type", typ), dv("ts.monotonic", float64(ns)/1e9), iv("ts.monotonic_ns", ns),
		iv("scheduler.step", step), sv("phase", phase), iv("prefill.done_tokens", pd), iv("prefill.total_tokens", pt),
		iv("decode.done_tokens", dd), iv("decode.max_tokens", dm), iv("num_preemptions", np)}, extra...)
}

func TestRowsJourney(t *testing.T) {
	var r Rows
	api := &Span{Name: SpanRequest, Scope: ScopeAPI, Record: 4,
		Attrs: []KeyValue{sv("gen_ai.request.id", "chatcmpl-1"), sv("http.route", "/v1/chat/completions")},
		Events: []Event{
			ev("api.ARRIVED", 100, dv("event.ts.monotonic", 10.5)),
			ev("api.ABORTED", 200, dv("event.ts.monotonic", 11.25), sv("reason", "client"), sv("error", "disconnect")),
		}}
	api.SpanID[0] = 0xab
	core := &Span{Name: SpanCore, Scope: ScopeScheduler, Record: 5,
		Attrs: []KeyValue{sv("gen_ai.request.id", "chatcmpl-1-0-1a2b")},
		Events: []Event{
			ev("journey.SCHEDULED", 150, journeyKV("SCHEDULED", 10_700_000_000, 3, "PREFILL", 0, 40, 0, 16, 1, sv("schedule.kind", "RESUME"))...),
			ev("journey.FINISHED", 190, journeyKV("FINISHED", 11_000_000_000, 9, "DECODE", 40, 40, 16, 16, 1, sv("finish.status", "length"))...),
		}}
	r.AddSpan("a.jsonl", api)
	r.AddSpan("a.jsonl", core)
	assert.Empty(t, r.Issues)
	require.Len(t, r.Journey, 4)
	a0 := r.Journey[0]
	assert.Equal(t, Where{"a.jsonl", 4}, a0.Where)
	assert.Equal(t, "ab00000000000000", a0.SpanID)
	assert.Equal(t, "chatcmpl-1", a0.RequestID)
	assert.Equal(t, "api.ARRIVED", a0.Event)
	assert.Equal(t, uint64(100), a0.TimeUnixNano)
	assert.Equal(t, Opt[float64]{10.5, true}, a0.EventTSMono)
	assert.False(t, a0.TSMonotonic.OK, "API events carry event.ts.monotonic, not ts.monotonic")
	assert.Equal(t, int32(0), a0.EventIndex)
	assert.Equal(t, int32(1), r.Journey[1].EventIndex)
	assert.False(t, a0.TSMonotonicNs.OK, "API events have no ns timestamp")
	assert.Equal(t, Opt[string]{"client", true}, r.Journey[1].Reason)
	assert.Equal(t, Opt[string]{"disconnect", true}, r.Journey[1].Error)

	s := r.Journey[2]
	assert.Equal(t, "chatcmpl-1-0-1a2b", s.RequestID)
	assert.Equal(t, Opt[int64]{10_700_000_000, true}, s.TSMonotonicNs)
	assert.Equal(t, Opt[float64]{10.7, true}, s.TSMonotonic)
	assert.Equal(t, Opt[string]{"SCHEDULED", true}, s.EventType)
	assert.Equal(t, Opt[int64]{3, true}, s.SchedulerStep)
	assert.Equal(t, Opt[string]{"PREFILL", true}, s.Phase)
	assert.Equal(t, Opt[int64]{0, true}, s.PrefillDone)
	assert.Equal(t, Opt[int64]{40, true}, s.PrefillTotal)
	assert.Equal(t, Opt[int64]{16, true}, s.DecodeMax)
	assert.Equal(t, Opt[int64]{1, true}, s.NumPreemptions)
	assert.Equal(t, Opt[string]{"RESUME", true}, s.ScheduleKind)
	assert.False(t, s.FinishStatus.OK)
	f := r.Journey[3]
	assert.Equal(t, Opt[int64]{16, true}, f.DecodeDone)
	assert.Equal(t, Opt[string]{"length", true}, f.FinishStatus)
}

func TestRowsSteps(t *testing.T) {
	var r Rows
	summary := func(id int64) Event {
		return ev("step.BATCH_SUMMARY", uint64(1000+id), iv("step.id", id), iv("step.ts_start_ns", 5_000+id*100),
			iv("step.ts_end_ns", 5_010+id*100), iv("step.duration_us", 7), iv("queue.running_depth", 3), iv("queue.waiting_depth", 2),
			iv("batch.num_prefill_reqs", 1), iv("batch.num_decode_reqs", 2), iv("batch.scheduled_tokens", 34),
			iv("batch.prefill_tokens", 32), iv("batch.decode_tokens", 2), iv("batch.num_finished", 1), iv("batch.num_preempted", 0),
			iv("kv.blocks_total_gpu", 100), iv("kv.blocks_free_gpu", 60), dv("kv.usage_gpu_ratio", 0.4))
	}
	sp := &Span{Name: "scheduler_steps_2", Scope: ScopeStep, Record: 9, DroppedEventsCount: 3,
		Attrs: []KeyValue{iv("scheduler.span_sequence", 2), iv("scheduler.step_range_start", 200), iv("scheduler.step_range_end", 299), iv("scheduler.closure_interval", 100)},
		Events: []Event{summary(201),
			ev("step.REQUEST_SNAPSHOT", 1202, iv("step.id", 201), sv("request.id", "cmpl-9-0-aa"), sv("request.phase", "PREFILL"),
				iv("request.num_prompt_tokens", 64), iv("request.num_computed_tokens", 32), iv("request.num_output_tokens", 0),
				iv("request.num_preemptions", 0), iv("request.scheduled_tokens_this_step", 32), iv("kv.blocks_allocated_gpu", 4),
				iv("kv.blocks_cached_gpu", 1), iv("request.effective_prompt_len", 60)),
			summary(205),
			ev("step.SOMETHING_NEW", 1, iv("x", 1)),
		}}
	r.AddSpan("s.jsonl", sp)
	require.Len(t, r.Steps, 2)
	s := r.Steps[0]
	assert.Equal(t, Where{"s.jsonl", 9}, s.Where)
	assert.Equal(t, Opt[int64]{2, true}, s.SpanSequence)
	assert.Equal(t, Opt[int64]{200, true}, s.StepRangeStart)
	assert.Equal(t, Opt[int64]{299, true}, s.StepRangeEnd)
	assert.Equal(t, Opt[int64]{100, true}, s.ClosureInterval)
	assert.Equal(t, uint32(3), s.DroppedEventsCount)
	assert.Equal(t, int64(201), s.StepID)
	assert.Equal(t, int64(25_100), s.TSStartNs)
	assert.Equal(t, Opt[int64]{25_110, true}, s.TSEndNs)
	assert.Equal(t, Opt[int64]{7, true}, s.DurationUs)
	assert.Equal(t, Opt[int64]{3, true}, s.RunningDepth)
	assert.Equal(t, Opt[int64]{2, true}, s.WaitingDepth)
	assert.Equal(t, Opt[int64]{34, true}, s.ScheduledTokens)
	assert.Equal(t, Opt[int64]{60, true}, s.KVBlocksFreeGPU)
	assert.Equal(t, Opt[float64]{0.4, true}, s.KVUsageGPURatio)
	assert.True(t, s.HasRichSnapshots)
	assert.False(t, r.Steps[1].HasRichSnapshots)
	require.Len(t, r.Snapshots, 1)
	n := r.Snapshots[0]
	assert.Equal(t, "cmpl-9-0-aa", n.RequestID)
	assert.Equal(t, Opt[int64]{32, true}, n.ScheduledTokensThisStep)
	assert.Equal(t, Opt[int64]{1, true}, n.KVBlocksCachedGPU)
	assert.Equal(t, Opt[int64]{60, true}, n.EffectivePromptLen)
	kinds := map[IssueKind]int{}
	for _, is := range r.Issues {
		kinds[is.Kind]++
		assert.Equal(t, "s.jsonl", is.File)
		assert.Equal(t, int64(9), is.Record)
	}
	assert.Equal(t, map[IssueKind]int{IssueUnknownEvent: 1, IssueDroppedEvents: 1}, kinds)
}

func TestRowsIssues(t *testing.T) {
	var r Rows
	r.AddSpan("x", &Span{Name: "mystery", Record: 1})
	r.AddSpan("x", &Span{Name: SpanCore, Record: 2, Attrs: []KeyValue{sv("gen_ai.request.id", "e")},
		Events: []Event{
			ev("journey.QUEUED", 1, sv("event.type", "QUEUED")),                                          // no ts.monotonic_ns: skipped
			ev("journey.FIRST_TOKEN", 2, journeyKV("FIRST_TOKEN", 5, 1, "DECODE", 1, 1, 1, 2, 0)[:9]...), // no num_preemptions: kept
			ev("journey.TELEPORTED", 3),
		}})
	require.Len(t, r.Journey, 1, "only the event with its timestamp is kept")
	assert.False(t, r.Journey[0].NumPreemptions.OK)
	var kinds []IssueKind
	for _, is := range r.Issues {
		kinds = append(kinds, is.Kind)
	}
	assert.Equal(t, []IssueKind{IssueUnknownSpan, IssueMissingAttribute, IssueMissingKey, IssueMissingAttribute, IssueUnknownEvent}, kinds)
}
