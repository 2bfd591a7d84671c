package otlpingest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func apiSpan(trace byte, span byte, id string, rec int64) *Span {
	sp := &Span{Name: SpanRequest, Scope: ScopeAPI, Record: rec,
		Attrs: []KeyValue{sv("gen_ai.request.id", id), sv("http.route", "/v1/chat/completions"), sv("gen_ai.response.model", "llama"),
			iv("gen_ai.usage.prompt_tokens", 40), dv("gen_ai.request.temperature", 0.7), dv("gen_ai.request.top_p", 0.9),
			iv("gen_ai.request.max_tokens", 16), iv("gen_ai.request.n", 1)},
		Events: []Event{
			ev("api.ARRIVED", 1000, dv("event.ts.monotonic", 1.0)),
			ev("api.HANDOFF_TO_CORE", 1100, dv("event.ts.monotonic", 1.1)),
			ev("api.FIRST_RESPONSE_FROM_CORE", 1500, dv("event.ts.monotonic", 1.5)),
			ev("api.DEPARTED", 1900, dv("event.ts.monotonic", 1.9)),
		}}
	sp.TraceID[0], sp.SpanID[0] = trace, span
	return sp
}

func coreSpan(trace, parent, span byte, id string, rec int64) *Span {
	sp := &Span{Name: SpanCore, Scope: ScopeScheduler, Record: rec, Attrs: []KeyValue{sv("gen_ai.request.id", id)},
		Events: []Event{
			ev("journey.QUEUED", 1200, journeyKV("QUEUED", 1_200_000_000, 0, "WAITING", 0, 40, 0, 16, 0)...),
			ev("journey.SCHEDULED", 1250, journeyKV("SCHEDULED", 1_250_000_000, 4, "PREFILL", 0, 40, 0, 16, 0, sv("schedule.kind", "FIRST"))...),
			ev("journey.FIRST_TOKEN", 1400, journeyKV("FIRST_TOKEN", 1_400_000_000, 5, "DECODE", 40, 40, 1, 16, 0)...),
			ev("journey.PREEMPTED", 1500, journeyKV("PREEMPTED", 1_500_000_000, 8, "DECODE", 40, 40, 3, 16, 1)...),
			ev("journey.SCHEDULED", 1600, journeyKV("SCHEDULED", 1_600_000_000, 9, "DECODE", 40, 40, 3, 16, 1, sv("schedule.kind", "RESUME"))...),
			ev("journey.FINISHED", 1800, journeyKV("FINISHED", 1_800_000_000, 20, "DECODE", 40, 40, 16, 16, 1, sv("finish.status", "length"))...),
		}}
	sp.TraceID[0], sp.ParentSpanID[0], sp.SpanID[0] = trace, parent, span
	return sp
}

func TestJoinerValues(t *testing.T) {
	j := NewJoiner()
	j.AddSpan("core.jsonl", coreSpan(1, 10, 11, "chatcmpl-a-0-x", 3)) // child first
	assert.Equal(t, 1, j.Pending())
	j.AddSpan("api.jsonl", apiSpan(1, 10, "chatcmpl-a", 7))
	assert.Equal(t, 0, j.Pending())
	j.Finish()
	assert.Empty(t, j.Issues)
	require.Len(t, j.Rows, 1)
	r := j.Rows[0]
	assert.Equal(t, Opt[string]{"chatcmpl-a", true}, r.APIRequestID)
	assert.Equal(t, Opt[string]{"chatcmpl-a-0-x", true}, r.EngineRequestID)
	assert.Equal(t, Opt[Where]{Where{"api.jsonl", 7}, true}, r.APIWhere)
	assert.Equal(t, Opt[Where]{Where{"core.jsonl", 3}, true}, r.CoreWhere)
	assert.Equal(t, Opt[string]{"llama", true}, r.Model)
	assert.Equal(t, Opt[string]{"/v1/chat/completions", true}, r.Route)
	assert.Equal(t, Opt[int64]{40, true}, r.PromptTokens)
	assert.Equal(t, Opt[int64]{16, true}, r.MaxTokens)
	assert.Equal(t, Opt[int64]{1, true}, r.N)
	assert.Equal(t, Opt[float64]{0.7, true}, r.Temperature)
	assert.Equal(t, Opt[float64]{0.9, true}, r.TopP)
	assert.Equal(t, EventTime{MonoS: Opt[float64]{1.0, true}, WallNs: Opt[uint64]{1000, true}}, r.Arrived)
	assert.Equal(t, Opt[float64]{1.1, true}, r.HandoffToCore.MonoS)
	assert.Equal(t, Opt[float64]{1.5, true}, r.FirstResponse.MonoS)
	assert.Equal(t, Opt[uint64]{1900, true}, r.Departed.WallNs)
	assert.False(t, r.Aborted.WallNs.OK)
	assert.Equal(t, EventTime{MonoS: Opt[float64]{1.2, true}, MonoNs: Opt[int64]{1_200_000_000, true}, WallNs: Opt[uint64]{1200, true}}, r.Queued)
	assert.Equal(t, Opt[int64]{1_250_000_000, true}, r.FirstScheduled.MonoNs, "the first SCHEDULED, not the RESUME")
	assert.Equal(t, Opt[int64]{1_400_000_000, true}, r.FirstToken.MonoNs)
	assert.Equal(t, Opt[int64]{1_800_000_000, true}, r.Finished.MonoNs)
	assert.Equal(t, Opt[int64]{16, true}, r.OutputTokens)
	assert.Equal(t, Opt[int64]{1, true}, r.Preemptions)
	assert.Equal(t, Opt[string]{"length", true}, r.FinishStatus)
}

func TestJoinerOrphansAndDuplicates(t *testing.T) {
	j := NewJoiner()
	j.AddSpan("f", apiSpan(1, 10, "a", 1))
	j.AddSpan("f", apiSpan(1, 10, "a", 2)) // same span again, before completion
	j.AddSpan("f", coreSpan(1, 10, 11, "a-0", 3))
	j.AddSpan("f", coreSpan(1, 10, 11, "a-0", 4)) // after completion
	j.AddSpan("f", coreSpan(2, 20, 21, "b-0", 5)) // no API span: aborted before... or lost
	j.AddSpan("f", apiSpan(3, 30, "c", 6))        // no core span
	// Same span id in another trace is another request.
	j.AddSpan("f", apiSpan(4, 10, "d", 7))
	j.AddSpan("f", coreSpan(4, 10, 12, "d-0", 8))
	j.Finish()
	require.Len(t, j.Rows, 4)
	assert.Equal(t, "a", j.Rows[0].APIRequestID.V)
	assert.Equal(t, "d", j.Rows[1].APIRequestID.V)
	assert.Equal(t, "b-0", j.Rows[2].EngineRequestID.V, "orphans follow, in arrival order")
	assert.False(t, j.Rows[2].APIRequestID.OK)
	assert.Equal(t, "c", j.Rows[3].APIRequestID.V)
	assert.False(t, j.Rows[3].EngineRequestID.OK)
	var got []Issue
	for _, is := range j.Issues {
		got = append(got, Issue{Kind: is.Kind, File: is.File, Record: is.Record})
	}
	assert.Equal(t, []Issue{
		{Kind: IssueDuplicateSpan, File: "f", Record: 2},
		{Kind: IssueDuplicateSpan, File: "f", Record: 4},
		{Kind: IssueOrphanCoreSpan, File: "f", Record: 5},
		{Kind: IssueOrphanAPISpan, File: "f", Record: 6},
	}, got)
}

func TestJoinerCompletionsRoute(t *testing.T) {
	// /v1/completions has no HANDOFF or FIRST_RESPONSE events; aborted.
	api := apiSpan(5, 50, "cmpl-5", 1)
	api.Events = []Event{ev("api.ARRIVED", 1, dv("event.ts.monotonic", 0.5)), ev("api.ABORTED", 2, dv("event.ts.monotonic", 0.75), sv("reason", "timeout"), sv("error", "x"))}
	core := coreSpan(5, 50, 51, "cmpl-5-0", 2)
	core.Events = core.Events[:2]
	j := NewJoiner()
	j.AddSpan("f", api)
	j.AddSpan("f", core)
	j.Finish()
	require.Len(t, j.Rows, 1)
	r := j.Rows[0]
	assert.False(t, r.HandoffToCore.WallNs.OK)
	assert.False(t, r.FirstResponse.WallNs.OK)
	assert.Equal(t, Opt[float64]{0.75, true}, r.Aborted.MonoS)
	assert.Equal(t, Opt[string]{"timeout", true}, r.AbortReason)
	assert.False(t, r.Finished.WallNs.OK)
	assert.False(t, r.OutputTokens.OK)
	assert.Equal(t, Opt[int64]{0, true}, r.Preemptions, "no FINISHED: preemptions counted from events")
}
