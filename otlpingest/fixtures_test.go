package otlpingest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// The trace fixtures in ../testdata/traces are built here, span by span, so
// that every value in them is known to the tests. Regenerate them with
//
//	go test ./otlpingest -run TestTraceFixturesUpToDate -update
//
// TestTraceFixturesUpToDate fails when a checked-in file differs.

var update = flag.Bool("update", false, "rewrite ../testdata/traces from the fixture builders")

const fixtureDir = "../testdata/traces"

// fxLine is one record of a fixture file: spans to encode, or raw text for
// the malformed cases, or a KV-events line.
type fxLine struct {
	spans []Span
	raw   string
	kv    []any // [ts, [events...], dp_rank?], encoded with encoding/json
}

type fxFile struct {
	name     string
	encoding string // "json" (JSON lines), "proto", "gzip", "zstd", "gzip-truncated", "proto-corrupt"
	lines    []fxLine
}

// wantIssue is an issue a fixture must produce: kind, file and record.
type wantIssue struct {
	kind   IssueKind
	file   string
	record int64
}

// fxSet is a group of files ingested together, and the issues it must give.
type fxSet struct {
	name   string
	files  []fxFile
	issues []wantIssue
}

const (
	svcAPI    = "vllm-api-server"
	svcEngine = "vllm-engine-core"
)

func tid(n byte) TraceID { return TraceID{0x7a, 0x11, 14: 0xbe, 15: n} }
func sid(n byte) SpanID  { return SpanID{0x5c, 7: n} }

// Times: wall clock starts at base; monotonic seconds at 1000.
const baseWall = uint64(1_763_700_000_000_000_000)

func wall(ms float64) uint64  { return baseWall + uint64(ms*1e6) }
func monoNs(ms float64) int64 { return 1_000_000_000_000 + int64(ms*1e6) }

func apiReq(trace, span byte, id, route string, prompt, maxTok int64, events ...Event) Span {
	return Span{Service: svcAPI, Scope: ScopeAPI, TraceID: tid(trace), SpanID: sid(span), Name: SpanRequest, Kind: 2,
		StartUnixNano: events[0].TimeUnixNano, EndUnixNano: events[len(events)-1].TimeUnixNano,
		Attrs: []KeyValue{sv("gen_ai.request.id", id), sv("http.route", route), sv("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct"),
			iv("gen_ai.usage.prompt_tokens", prompt), dv("gen_ai.request.temperature", 0.7), dv("gen_ai.request.top_p", 0.95),
			iv("gen_ai.request.max_tokens", maxTok), iv("gen_ai.request.n", 1)},
		Events: events}
}

func apiEv(name string, ms float64, extra ...KeyValue) Event {
	return ev(name, wall(ms), append([]KeyValue{dv("event.ts.monotonic", float64(monoNs(ms))/1e9)}, extra...)...)
}

func coreReq(trace, span, parent byte, id string, events ...Event) Span {
	return Span{Service: svcEngine, Scope: ScopeScheduler, TraceID: tid(trace), SpanID: sid(span), ParentSpanID: sid(parent),
		Name: SpanCore, Kind: 1, StartUnixNano: events[0].TimeUnixNano, EndUnixNano: events[len(events)-1].TimeUnixNano,
		Attrs: []KeyValue{sv("gen_ai.request.id", id)}, Events: events}
}

// jEv is a journey event: step, phase, prefill done/total, decode done/max, preemptions.
func jEv(typ string, ms float64, step int64, phase string, pd, pt, dd, dm, np int64, extra ...KeyValue) Event {
	return ev("journey."+typ, wall(ms), journeyKV(typ, monoNs(ms), step, phase, pd, pt, dd, dm, np, extra...)...)
}

func stepSpan(trace, span byte, seq, from, to int64, events ...Event) Span {
	return Span{Service: svcEngine, Scope: ScopeStep, TraceID: tid(trace), SpanID: sid(span), Name: fmt.Sprintf("%s%d", StepSpanPrefix, seq),
		Kind: 1, StartUnixNano: wall(float64(from)), EndUnixNano: wall(float64(to) + 1),
		Attrs: []KeyValue{iv("scheduler.span_sequence", seq), iv("scheduler.step_range_start", from),
			iv("scheduler.step_range_end", to), iv("scheduler.closure_interval", to-from+1)},
		Events: events}
}

// summary is a BATCH_SUMMARY for step id at ms, with the batch's shape.
func summary(id int64, ms float64, running, waiting, nPrefill, nDecode, prefillTok, decodeTok, fin, pre, free int64) Event {
	return ev("step.BATCH_SUMMARY", wall(ms+0.2),
		iv("step.id", id), iv("step.ts_start_ns", monoNs(ms)), iv("step.ts_end_ns", monoNs(ms+0.2)), iv("step.duration_us", 180+id),
		iv("queue.running_depth", running), iv("queue.waiting_depth", waiting),
		iv("batch.num_prefill_reqs", nPrefill), iv("batch.num_decode_reqs", nDecode),
		iv("batch.scheduled_tokens", prefillTok+decodeTok), iv("batch.prefill_tokens", prefillTok), iv("batch.decode_tokens", decodeTok),
		iv("batch.num_finished", fin), iv("batch.num_preempted", pre),
		iv("kv.blocks_total_gpu", 4096), iv("kv.blocks_free_gpu", free), dv("kv.usage_gpu_ratio", float64(4096-free)/4096))
}

func snap(id int64, ms float64, req, phase string, prompt, computed, output, preempt, sched, alloc, cached int64, extra ...KeyValue) Event {
	return ev("step.REQUEST_SNAPSHOT", wall(ms+0.2), append([]KeyValue{iv("step.id", id), sv("request.id", req), sv("request.phase", phase),
		iv("request.num_prompt_tokens", prompt), iv("request.num_computed_tokens", computed), iv("request.num_output_tokens", output),
		iv("request.num_preemptions", preempt), iv("request.scheduled_tokens_this_step", sched),
		iv("kv.blocks_allocated_gpu", alloc), iv("kv.blocks_cached_gpu", cached)}, extra...)...)
}

func line(spans ...Span) fxLine { return fxLine{spans: spans} }

// reqA: chat route, preempted once and resumed. reqB: completions route,
// core span written before its parent. reqC: aborted by the client.
func chatA() (Span, Span) {
	api := apiReq(1, 1, "chatcmpl-a", "/v1/chat/completions", 40, 16,
		apiEv("api.ARRIVED", 0), apiEv("api.HANDOFF_TO_CORE", 1.5), apiEv("api.FIRST_RESPONSE_FROM_CORE", 30), apiEv("api.DEPARTED", 95))
	core := coreReq(1, 2, 1, "chatcmpl-a-0-1a2b",
		jEv("QUEUED", 2, 0, "WAITING", 0, 40, 0, 16, 0),
		jEv("SCHEDULED", 10, 1, "PREFILL", 0, 40, 0, 16, 0, sv("schedule.kind", "FIRST")),
		jEv("FIRST_TOKEN", 29, 1, "DECODE", 40, 40, 1, 16, 0),
		jEv("PREEMPTED", 40, 3, "WAITING", 40, 40, 3, 16, 1),
		jEv("SCHEDULED", 60, 5, "PREFILL", 0, 43, 3, 16, 1, sv("schedule.kind", "RESUME")),
		jEv("FINISHED", 94, 12, "DECODE", 43, 43, 16, 16, 1, sv("finish.status", "length")))
	return api, core
}

func complB() (Span, Span) {
	api := apiReq(2, 3, "cmpl-b", "/v1/completions", 12, 4, apiEv("api.ARRIVED", 3), apiEv("api.DEPARTED", 70))
	core := coreReq(2, 4, 3, "cmpl-b-0-9f00",
		jEv("QUEUED", 4, 0, "WAITING", 0, 12, 0, 4, 0),
		jEv("SCHEDULED", 10, 1, "PREFILL", 0, 12, 0, 4, 0, sv("schedule.kind", "FIRST")),
		jEv("FIRST_TOKEN", 29, 1, "DECODE", 12, 12, 1, 4, 0),
		jEv("FINISHED", 69, 4, "DECODE", 12, 12, 4, 4, 0, sv("finish.status", "stopped")))
	return api, core
}

func abortC() (Span, Span) {
	api := apiReq(3, 5, "chatcmpl-c", "/v1/chat/completions", 500, 256,
		apiEv("api.ARRIVED", 5), apiEv("api.HANDOFF_TO_CORE", 6),
		apiEv("api.ABORTED", 50, sv("reason", "client_disconnect"), sv("error", "connection reset by peer")))
	core := coreReq(3, 6, 5, "chatcmpl-c-0-77aa",
		jEv("QUEUED", 7, 0, "WAITING", 0, 500, 0, 256, 0),
		jEv("SCHEDULED", 30, 2, "PREFILL", 0, 500, 0, 256, 0, sv("schedule.kind", "FIRST")),
		jEv("FINISHED", 50, 3, "PREFILL", 256, 500, 0, 256, 0, sv("finish.status", "aborted")))
	return api, core
}

// steps1 covers steps 1..8: 1, 2 and 4 sampled, 2 rich (a snapshot per
// running request); 3 and 5..8 unsampled.
func steps1() Span {
	return stepSpan(9, 9, 0, 1, 8,
		summary(1, 10, 2, 1, 2, 0, 52, 0, 0, 0, 4080),
		summary(2, 29.5, 3, 0, 1, 2, 256, 2, 0, 0, 4060),
		snap(2, 29.5, "chatcmpl-a-0-1a2b", "DECODE", 40, 41, 1, 0, 1, 3, 0),
		snap(2, 29.5, "cmpl-b-0-9f00", "DECODE", 12, 13, 1, 0, 1, 1, 0),
		snap(2, 29.5, "chatcmpl-c-0-77aa", "PREFILL", 500, 256, 0, 0, 256, 32, 16, iv("request.effective_prompt_len", 484)),
		summary(4, 50, 2, 0, 0, 2, 0, 2, 1, 1, 4070))
}

func fixtureSets() []fxSet {
	a1, a2 := chatA()
	b1, b2 := complB()
	c1, c2 := abortC()
	// reqD crosses a file rotation: its core span is in the first file,
	// its API span in the second.
	d1 := apiReq(4, 7, "cmpl-d", "/v1/completions", 8, 2, apiEv("api.ARRIVED", 100), apiEv("api.DEPARTED", 140))
	d2 := coreReq(4, 8, 7, "cmpl-d-0-0001",
		jEv("QUEUED", 101, 12, "WAITING", 0, 8, 0, 2, 0),
		jEv("SCHEDULED", 105, 13, "PREFILL", 0, 8, 0, 2, 0, sv("schedule.kind", "FIRST")),
		jEv("FIRST_TOKEN", 120, 13, "DECODE", 8, 8, 1, 2, 0),
		jEv("FINISHED", 139, 14, "DECODE", 8, 8, 2, 2, 0, sv("finish.status", "length")))
	steps2 := stepSpan(10, 10, 1, 9, 16, summary(13, 105, 1, 0, 1, 0, 8, 0, 0, 0, 4090), summary(14, 120, 1, 0, 0, 1, 0, 1, 1, 0, 4090))
	e1, e2 := apiReq(5, 11, "cmpl-e", "/v1/completions", 64, 8, apiEv("api.ARRIVED", 200), apiEv("api.DEPARTED", 260)),
		coreReq(5, 12, 11, "cmpl-e-0-0002",
			jEv("QUEUED", 201, 20, "WAITING", 0, 64, 0, 8, 0),
			jEv("SCHEDULED", 203, 21, "PREFILL", 0, 64, 0, 8, 0, sv("schedule.kind", "FIRST")),
			jEv("FIRST_TOKEN", 215, 21, "DECODE", 64, 64, 1, 8, 0),
			jEv("FINISHED", 259, 28, "DECODE", 64, 64, 8, 8, 0, sv("finish.status", "stopped")))
	steps3 := stepSpan(11, 13, 2, 17, 24, summary(21, 203, 1, 0, 1, 0, 64, 0, 0, 0, 4088),
		snap(21, 203, "cmpl-e-0-0002", "PREFILL", 64, 0, 0, 0, 64, 4, 0))

	// Malformed cases, each on top of valid spans so that the good data
	// around the damage is kept.
	wrongType := a1
	wrongType.Attrs = []KeyValue{sv("gen_ai.request.id", "chatcmpl-a"), sv("http.route", "/v1/chat/completions"),
		dv("gen_ai.usage.prompt_tokens", 40.0), iv("gen_ai.request.max_tokens", 16)}
	badStep := stepSpan(9, 9, 0, 1, 8,
		ev("step.BATCH_SUMMARY", wall(10), iv("step.id", 1), sv("step.ts_start_ns", "1000010000000"), iv("step.ts_end_ns", 5)),
		ev("step.BATCH_SUMMARY", wall(20), iv("step.id", 2), iv("step.ts_start_ns", monoNs(20)), dv("queue.running_depth", 2)))
	unknown := c2
	unknown.Events = append(append([]Event{}, c2.Events...), jEv("TELEPORTED", 51, 3, "DECODE", 0, 500, 0, 256, 0))
	unknown.Events[0].Attrs = append(append([]KeyValue{}, unknown.Events[0].Attrs...), sv("gpu.color", "green"))
	dropped := steps1()
	dropped.DroppedEventsCount = 37
	mystery := Span{Service: svcEngine, Scope: "vllm.worker", TraceID: tid(12), SpanID: sid(14), Name: "model_forward", Kind: 1}

	kvLines := []fxLine{
		{kv: []any{1763700000.125, []any{
			[]any{"CacheStoreCommitted", "chatcmpl-a-0-1a2b", "GPU", 3, 3},
			[]any{"TransferInitiated", 17, "chatcmpl-a-0-1a2b", "GPU", "CPU", 3, 4},
		}}},
		{kv: []any{1763700000.25, []any{
			[]any{"TransferCompleted", 17, "chatcmpl-a-0-1a2b", "GPU", "CPU", 3, true, 5},
			[]any{"CacheEviction", "GPU", 3, "preemption", 5, []any{"h1", "h2", "h3"}},
			[]any{"CacheEviction", "CPU", 8, "lru", 6, nil},
		}, 1}},
		{kv: []any{1763700000.5, []any{
			[]any{"CacheLoadCommitted", "chatcmpl-a-0-1a2b", "CPU", 3, 7},
			[]any{"TransferInitiated", 18, "chatcmpl-a-0-1a2b", "CPU", "GPU", 3, 8},
			[]any{"TransferCompleted", 18, "chatcmpl-a-0-1a2b", "CPU", "GPU", 3, false, 9},
			[]any{"RemoteTransferInitiated", 19, "cmpl-b-0-9f00", "nixl", 0, 1, 2},
			[]any{"RemoteTransferCompleted", 19, "cmpl-b-0-9f00", "nixl", 0, 1, 2, true},
			[]any{"BlockStored", []any{123, 456}, nil, []any{1, 2, 3}, 16, nil, "GPU"},
			[]any{"BlockRemoved", []any{123}, "GPU"},
			[]any{"AllBlocksCleared"},
		}, 0}},
	}
	kvBad := []fxLine{
		{kv: []any{1763700001.0, []any{[]any{"CacheStoreCommitted", "r1", "GPU", 2, 10}}}},
		{raw: `[1763700001.5, [["CacheStoreCommitted", "r1", "GPU", 2, 10]`},
		{kv: []any{1763700002.0, []any{
			[]any{"CacheStoreCommitted", "r2", "GPU", "two", 11},
			[]any{"Teleport", 1},
			[]any{"CacheLoadCommitted", "r2", "CPU"},
			[]any{"CacheLoadCommitted", "r2", "CPU", 2, 12, "extra"},
		}, "rank0"}},
		{kv: []any{"yesterday", []any{}}},
	}

	// Two engines of a cluster write into one file. Each counts its steps
	// and step spans from 1, and here even derives the same step span ids:
	// the resource attribute service.instance.id is what tells them apart.
	// gAPI comes from an API server without an instance id.
	fAPI := apiReq(6, 15, "cmpl-f", "/v1/completions", 30, 3, apiEv("api.ARRIVED", 300), apiEv("api.DEPARTED", 330))
	fCore := coreReq(6, 16, 15, "cmpl-f-0-00f0",
		jEv("QUEUED", 301, 0, "WAITING", 0, 30, 0, 3, 0),
		jEv("SCHEDULED", 302, 1, "PREFILL", 0, 30, 0, 3, 0, sv("schedule.kind", "FIRST")),
		jEv("FIRST_TOKEN", 310, 1, "DECODE", 30, 30, 1, 3, 0),
		jEv("FINISHED", 329, 3, "DECODE", 30, 30, 3, 3, 0, sv("finish.status", "length")))
	gAPI := apiReq(7, 17, "cmpl-g", "/v1/completions", 90, 2, apiEv("api.ARRIVED", 300.5), apiEv("api.DEPARTED", 340))
	gCore := coreReq(7, 18, 17, "cmpl-g-0-00f1",
		jEv("QUEUED", 301.5, 0, "WAITING", 0, 90, 0, 2, 0),
		jEv("SCHEDULED", 303, 1, "PREFILL", 0, 90, 0, 2, 0, sv("schedule.kind", "FIRST")),
		jEv("FIRST_TOKEN", 320, 1, "DECODE", 90, 90, 1, 2, 0),
		jEv("FINISHED", 339, 2, "DECODE", 90, 90, 2, 2, 0, sv("finish.status", "length")))
	stepsF := stepSpan(20, 20, 1, 1, 4,
		summary(1, 302, 1, 0, 1, 0, 30, 0, 0, 0, 4090),
		snap(1, 302, "cmpl-f-0-00f0", "PREFILL", 30, 0, 0, 0, 30, 2, 0),
		summary(2, 310, 1, 0, 0, 1, 0, 1, 0, 0, 4090),
		summary(3, 320, 1, 0, 0, 1, 0, 1, 1, 0, 4090))
	stepsG := stepSpan(20, 20, 1, 1, 4,
		summary(1, 303, 1, 0, 1, 0, 90, 0, 0, 0, 4084),
		summary(2, 320, 1, 0, 0, 1, 0, 1, 1, 0, 4084),
		snap(2, 320, "cmpl-g-0-00f1", "DECODE", 90, 90, 1, 0, 1, 6, 0),
		summary(3, 340, 0, 0, 0, 0, 0, 0, 0, 0, 4096))
	fAPI.Instance, fCore.Instance, stepsF.Instance = "instance_0", "instance_0", "instance_0"
	gCore.Instance, stepsG.Instance = "instance_1", "instance_1"
	instanceLines := []fxLine{line(fAPI, fCore, stepsF), line(gCore, stepsG, gAPI), line(stepsF)}

	good := func(name, enc string) fxFile {
		return fxFile{name: name, encoding: enc, lines: []fxLine{line(a1), line(a2, steps1()), line(b2), line(b1), line(c1, c2)}}
	}
	return []fxSet{
		{name: "chat_and_completions", files: []fxFile{good("chat_and_completions.jsonl", "json")}},
		{name: "rotated", files: []fxFile{
			{name: "rotated.1.jsonl", encoding: "json", lines: []fxLine{line(d2, steps2), line(e1)}},
			{name: "rotated.2.jsonl", encoding: "json", lines: []fxLine{line(d1), line(e2, steps3)}},
		}},
		{name: "proto", files: []fxFile{good("proto.binpb", "proto")}},
		{name: "gzip", files: []fxFile{good("compressed.jsonl.gz", "gzip")}},
		{name: "zstd", files: []fxFile{good("compressed.jsonl.zst", "zstd")}},
		{name: "instances", files: []fxFile{{name: "instances.jsonl", encoding: "json", lines: instanceLines}},
			issues: []wantIssue{{IssueDuplicateSpan, "instances.jsonl", 3}}},
		{name: "instances_proto", files: []fxFile{{name: "instances.binpb", encoding: "proto", lines: instanceLines}},
			issues: []wantIssue{{IssueDuplicateSpan, "instances.binpb", 3}}},
		{name: "kv_events", files: []fxFile{{name: "kv_events.jsonl", encoding: "json", lines: kvLines}}},
		{name: "malformed_line", files: []fxFile{{name: "malformed_line.jsonl", encoding: "json", lines: []fxLine{
			line(b1), {raw: `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"`}, line(b2)}}},
			issues: []wantIssue{{IssueMalformedRecord, "malformed_line.jsonl", 2}}},
		{name: "truncated_gzip", files: []fxFile{{name: "truncated.jsonl.gz", encoding: "gzip-truncated",
			lines: []fxLine{line(a1), line(a2), line(b1), line(b2)}}},
			// The damage is at the end: the first three lines survive; the
			// fourth is cut and cannot be parsed, so b1 loses its core span.
			issues: []wantIssue{{IssueMalformedRecord, "truncated.jsonl.gz", 4}, {IssueTruncatedCompression, "truncated.jsonl.gz", 4},
				{IssueOrphanAPISpan, "truncated.jsonl.gz", 3}}},
		{name: "corrupt_framing", files: []fxFile{{name: "corrupt_framing.binpb", encoding: "proto-corrupt",
			lines: []fxLine{line(b1, b2), line(a1, a2)}}},
			issues: []wantIssue{{IssueCorruptFraming, "corrupt_framing.binpb", 2}}},
		{name: "wrong_type_and_missing", files: []fxFile{{name: "wrong_type.jsonl", encoding: "json",
			lines: []fxLine{line(wrongType, a2), line(badStep)}}},
			issues: []wantIssue{
				{IssueWrongType, "wrong_type.jsonl", 1},
				{IssueWrongType, "wrong_type.jsonl", 2}, {IssueMissingAttribute, "wrong_type.jsonl", 2}, {IssueMissingKey, "wrong_type.jsonl", 2},
				{IssueWrongType, "wrong_type.jsonl", 2}, {IssueMissingAttribute, "wrong_type.jsonl", 2},
			}},
		{name: "unknown_names", files: []fxFile{{name: "unknown.jsonl", encoding: "json",
			lines: []fxLine{line(c1, unknown), line(mystery)}}},
			issues: []wantIssue{{IssueUnknownAttribute, "unknown.jsonl", 1}, {IssueUnknownEvent, "unknown.jsonl", 1}, {IssueUnknownSpan, "unknown.jsonl", 2}}},
		{name: "duplicate_and_dropped", files: []fxFile{{name: "duplicate.jsonl", encoding: "json",
			lines: []fxLine{line(b1), line(b2), line(b1), line(dropped)}}},
			issues: []wantIssue{{IssueDuplicateSpan, "duplicate.jsonl", 3}, {IssueDroppedEvents, "duplicate.jsonl", 4}}},
		{name: "orphans", files: []fxFile{{name: "orphans.jsonl", encoding: "json", lines: []fxLine{line(a1), line(b2)}}},
			issues: []wantIssue{{IssueOrphanAPISpan, "orphans.jsonl", 1}, {IssueOrphanCoreSpan, "orphans.jsonl", 2}}},
		{name: "kv_malformed", files: []fxFile{{name: "kv_malformed.jsonl", encoding: "json", lines: kvBad}},
			issues: []wantIssue{
				{IssueMalformedRecord, "kv_malformed.jsonl", 2},
				{IssueWrongType, "kv_malformed.jsonl", 3}, {IssueWrongType, "kv_malformed.jsonl", 3},
				{IssueUnknownEvent, "kv_malformed.jsonl", 3}, {IssueMissingAttribute, "kv_malformed.jsonl", 3},
				{IssueUnknownAttribute, "kv_malformed.jsonl", 3},
				{IssueMalformedRecord, "kv_malformed.jsonl", 4},
			}},
	}
}

// encodeLine gives one record's bytes without framing or newline.
func encodeLine(l fxLine, proto bool) []byte {
	switch {
	case l.raw != "":
		return []byte(l.raw)
	case l.kv != nil:
		b, err := json.Marshal(l.kv)
		if err != nil {
			panic(err)
		}
		return b
	case proto:
		return toProto(l.spans)
	}
	return AppendJSON(nil, l.spans)
}

func encodeFile(f fxFile) []byte {
	var body bytes.Buffer
	proto := f.encoding == "proto" || f.encoding == "proto-corrupt"
	var msgs [][]byte
	for _, l := range f.lines {
		if proto {
			msgs = append(msgs, encodeLine(l, true))
			continue
		}
		body.Write(encodeLine(l, false))
		body.WriteByte('\n')
	}
	switch f.encoding {
	case "json":
		return body.Bytes()
	case "proto":
		return framed(msgs...)
	case "proto-corrupt":
		// The second message's length prefix promises more than the file holds.
		b := framed(msgs...)
		return b[:len(b)-10]
	case "gzip", "gzip-truncated":
		var out bytes.Buffer
		w, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
		w.Write(body.Bytes())
		w.Close()
		b := out.Bytes()
		if f.encoding == "gzip-truncated" {
			// Cut inside the deflate stream, before the last line ends.
			return b[:len(b)-40]
		}
		return b
	case "zstd":
		w, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		return w.EncodeAll(body.Bytes(), nil)
	}
	panic("unknown encoding " + f.encoding)
}

// simulatedFixtures are written by blis run --otlp-trace and --kv-events,
// not built here: cmd/blis's TestSimulatedTraceFixture keeps them up to
// date, and TestSimulatedFixtureIngests checks what they hold.
var simulatedFixtures = map[string]bool{"simulated_run.jsonl.gz": true, "simulated_run.kv.jsonl.gz": true}

func TestTraceFixturesUpToDate(t *testing.T) {
	seen := map[string]bool{}
	for _, set := range fixtureSets() {
		for _, f := range set.files {
			require.False(t, seen[f.name], "fixture file %s defined twice", f.name)
			seen[f.name] = true
			want := encodeFile(f)
			path := filepath.Join(fixtureDir, f.name)
			if *update {
				require.NoError(t, os.MkdirAll(fixtureDir, 0o755))
				require.NoError(t, os.WriteFile(path, want, 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err, "run: go test ./otlpingest -run TestTraceFixturesUpToDate -update")
			require.True(t, bytes.Equal(want, got), "%s is stale; run: go test ./otlpingest -run TestTraceFixturesUpToDate -update", path)
		}
	}
	entries, err := os.ReadDir(fixtureDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.True(t, seen[e.Name()] || e.Name() == "README.md" || simulatedFixtures[e.Name()], "%s in %s is not built by fixtureSets", e.Name(), fixtureDir)
	}
}
