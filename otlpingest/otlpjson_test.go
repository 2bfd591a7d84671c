package otlpingest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The mirror types below write OTLP JSON with encoding/json, independently
// of the decoder under test.
type jAny map[string]any
type jKV struct {
	Key   string `json:"key"`
	Value jAny   `json:"value"`
}
type jEvent struct {
	TimeUnixNano string `json:"timeUnixNano"`
	Name         string `json:"name"`
	Attributes   []jKV  `json:"attributes,omitempty"`
}
type jSpan struct {
	TraceID            string   `json:"traceId"`
	SpanID             string   `json:"spanId"`
	ParentSpanID       string   `json:"parentSpanId,omitempty"`
	Name               string   `json:"name"`
	Kind               any      `json:"kind"`
	StartTimeUnixNano  any      `json:"startTimeUnixNano"`
	EndTimeUnixNano    string   `json:"endTimeUnixNano"`
	Attributes         []jKV    `json:"attributes,omitempty"`
	Events             []jEvent `json:"events,omitempty"`
	DroppedEventsCount int      `json:"droppedEventsCount,omitempty"`
	Status             jAny     `json:"status"`
}

func randID(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

func randValue(r *rand.Rand) (jAny, Value) {
	switch r.IntN(5) {
	case 0:
		s := fmt.Sprintf("v-%d\"\\\n\u00e9\U0001F600", r.IntN(1000))
		return jAny{"stringValue": s}, Value{Type: ValString, Str: s}
	case 1:
		v := r.Int64() - math.MaxInt64/2
		if r.IntN(2) == 0 {
			return jAny{"intValue": strconv.FormatInt(v, 10)}, Value{Type: ValInt, Int: v}
		}
		v = int64(r.IntN(1 << 40)) // exact as a JSON number
		return jAny{"intValue": v}, Value{Type: ValInt, Int: v}
	case 2:
		v := r.NormFloat64() * 1e6
		return jAny{"doubleValue": v}, Value{Type: ValDouble, Double: v}
	case 3:
		v := r.IntN(2) == 0
		return jAny{"boolValue": v}, Value{Type: ValBool, Bool: v}
	default:
		return jAny{"arrayValue": jAny{"values": []jAny{{"intValue": "1"}}}}, Value{Type: ValArray, Str: `{"values":[{"intValue":"1"}]}`}
	}
}

func randAttrs(r *rand.Rand) ([]jKV, []KeyValue) {
	var js []jKV
	var want []KeyValue
	for i := r.IntN(6); i > 0; i-- {
		jv, v := randValue(r)
		k := fmt.Sprintf("k%d.x", r.IntN(50))
		js = append(js, jKV{k, jv})
		want = append(want, KeyValue{Key: k, Value: v})
	}
	return js, want
}

func TestDecodeJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 300; iter++ {
		var want []Span
		var resources []any
		for ri := r.IntN(3); ri >= 0; ri-- {
			service, instance := fmt.Sprintf("svc%d", ri), ""
			resAttrs := []jKV{{"service.name", jAny{"stringValue": service}}}
			switch r.IntN(3) {
			case 0:
				instance = fmt.Sprintf("instance_%d", r.IntN(4))
				resAttrs = append([]jKV{{"service.instance.id", jAny{"stringValue": instance}}}, resAttrs...)
			case 1: // not a string: ignored
				resAttrs = append(resAttrs, jKV{"service.instance.id", jAny{"intValue": "3"}})
			}
			var scopes []any
			for si := r.IntN(3); si >= 0; si-- {
				scope := fmt.Sprintf("vllm.scope%d", si)
				var spans []jSpan
				for n := r.IntN(4); n > 0; n-- {
					var sp Span
					copy(sp.TraceID[:], randID(r, 16))
					copy(sp.SpanID[:], randID(r, 8))
					js := jSpan{TraceID: sp.TraceID.String(), SpanID: sp.SpanID.String(), Status: jAny{}}
					if r.IntN(2) == 0 {
						copy(sp.ParentSpanID[:], randID(r, 8))
						js.ParentSpanID = sp.ParentSpanID.String()
					}
					if r.IntN(3) == 0 { // generic protobuf JSON writes base64 ids
						js.TraceID = base64.StdEncoding.EncodeToString(sp.TraceID[:])
					}
					sp.Name = fmt.Sprintf("span%d", r.IntN(5))
					js.Name = sp.Name
					sp.Kind = int32(r.IntN(6))
					js.Kind = sp.Kind
					if r.IntN(2) == 0 {
						js.Kind = []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}[sp.Kind]
					}
					sp.StartUnixNano = r.Uint64()
					js.StartTimeUnixNano = strconv.FormatUint(sp.StartUnixNano, 10)
					if r.IntN(2) == 0 {
						sp.StartUnixNano = uint64(r.IntN(1 << 50))
						js.StartTimeUnixNano = sp.StartUnixNano // a JSON number
					}
					sp.EndUnixNano = r.Uint64()
					js.EndTimeUnixNano = strconv.FormatUint(sp.EndUnixNano, 10)
					js.Attributes, sp.Attrs = randAttrs(r)
					for e := r.IntN(4); e > 0; e-- {
						ev := Event{TimeUnixNano: r.Uint64(), Name: fmt.Sprintf("ev%d", e)}
						je := jEvent{TimeUnixNano: strconv.FormatUint(ev.TimeUnixNano, 10), Name: ev.Name}
						je.Attributes, ev.Attrs = randAttrs(r)
						sp.Events = append(sp.Events, ev)
						js.Events = append(js.Events, je)
					}
					sp.DroppedEventsCount = uint32(r.IntN(3))
					js.DroppedEventsCount = int(sp.DroppedEventsCount)
					sp.Service, sp.Instance, sp.Scope, sp.Record = service, instance, scope, 9
					want = append(want, sp)
					spans = append(spans, js)
				}
				// Scope after spans: key order must not matter.
				scopes = append(scopes, map[string]any{"spans": spans, "scope": map[string]any{"name": scope, "version": "1"}, "schemaUrl": ""})
			}
			res := map[string]any{"scopeSpans": scopes, "resource": map[string]any{"attributes": resAttrs}}
			resources = append(resources, res)
		}
		data, err := json.Marshal(map[string]any{"resourceSpans": resources, "unknownTopLevel": []int{1, 2}})
		require.NoError(t, err)
		got, err := newJSONDecoder().decode(data, 9, nil)
		require.NoError(t, err, string(data))
		// encoding/json sorts map keys, so spans come resource by resource
		// in the order written.
		require.Equal(t, len(want), len(got))
		for i := range want {
			assert.Equal(t, want[i], got[i], "span %d of %s", i, data)
		}
	}
}

// AppendJSON starts a resource wherever service or instance changes, writes
// service.instance.id only when there is one, and DecodeJSON gives the
// spans back.
func TestAppendJSONResources(t *testing.T) {
	sp := func(service, instance, scope string, n byte) Span {
		return Span{Service: service, Instance: instance, Scope: scope, TraceID: TraceID{15: n}, SpanID: SpanID{7: n},
			Name: "s", Kind: 1, StartUnixNano: 1, EndUnixNano: 2, Record: 1}
	}
	for _, tc := range []struct {
		name      string
		spans     []Span
		resources int
		instances int // service.instance.id attributes written
	}{
		{"no instance", []Span{sp("api", "", "a", 1), sp("eng", "", "b", 2), sp("eng", "", "c", 3)}, 2, 0},
		{"one instance", []Span{sp("api", "i0", "a", 1), sp("eng", "i0", "b", 2), sp("eng", "i0", "b", 3)}, 2, 2},
		{"two instances of one service", []Span{sp("eng", "i0", "b", 1), sp("eng", "i1", "b", 2), sp("eng", "i1", "b", 3), sp("eng", "i0", "b", 4)}, 3, 3},
		{"with and without", []Span{sp("eng", "", "b", 1), sp("eng", "i1", "b", 2), sp("api", "i1", "a", 3), sp("api", "", "a", 4)}, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := AppendJSON(nil, tc.spans)
			require.True(t, json.Valid(data), string(data))
			assert.Equal(t, tc.resources, strings.Count(string(data), `"resource":`), string(data))
			assert.Equal(t, tc.instances, strings.Count(string(data), `"service.instance.id"`), string(data))
			got, err := DecodeJSON(data)
			require.NoError(t, err)
			assert.Equal(t, tc.spans, got)
		})
	}
}

func TestDecodeJSONSnakeCaseAndNulls(t *testing.T) {
	data := `{"resource_spans":[{"resource":null,"scope_spans":[{"scope":{"name":"vllm.api"},"spans":[
	 {"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","parent_span_id":"",
	  "name":"llm_request","kind":2,"start_time_unix_nano":5,"end_time_unix_nano":"6","attributes":null,
	  "events":[{"time_unix_nano":"7","name":"api.ARRIVED","attributes":[{"key":"event.ts.monotonic","value":{"double_value":"1.5"}}]}]}]}]}]}`
	spans, err := DecodeJSON([]byte(data))
	require.NoError(t, err)
	require.Len(t, spans, 1)
	sp := spans[0]
	assert.Equal(t, "vllm.api", sp.Scope)
	assert.Equal(t, "", sp.Service)
	assert.True(t, sp.ParentSpanID.IsZero())
	assert.Equal(t, int32(2), sp.Kind)
	assert.Equal(t, uint64(5), sp.StartUnixNano)
	assert.Equal(t, uint64(6), sp.EndUnixNano)
	require.Len(t, sp.Events, 1)
	v, ok := sp.Events[0].Attr("event.ts.monotonic")
	require.True(t, ok)
	assert.Equal(t, Value{Type: ValDouble, Double: 1.5}, v)
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"truncated", `{"resourceSpans":[{"scopeSpans":[`, "end of input"},
		{"bad id", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}`, "traceId"},
		{"short id", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"0102"}]}]}]}`, "spanId"},
		{"int not a number", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}`, "unsigned"},
		{"negative time", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":-1}]}]}]}`, "unsigned"},
		{"int overflow", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"a","value":{"intValue":"9223372036854775808"}}]}]}]}]}`, "64-bit"},
		{"trailing", `{"resourceSpans":[]} {}`, "trailing"},
		{"trailing comma", `{"resourceSpans":[],}`, `want '"'`},
		{"bad kind", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_WEIRD"}]}]}]}`, "span kind"},
		{"bad number", `{"x":01}`, "want ','"},
		{"deep", `{"x":` + repeat("[", 1000) + repeat("]", 1000) + `}`, "nesting"},
		{"not an object", `[1]`, `want '{'`},
		{"bad escape", `{"x":"\q"}`, "escape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(tc.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Integers at the edges of int64.
	spans, err := DecodeJSON([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"a","value":{"intValue":"-9223372036854775808"}},{"key":"b","value":{"intValue":9007199254740993}},{"key":"c","value":{"intValue":1e3}}]}]}]}]}`))
	require.NoError(t, err)
	a, _ := spans[0].Attr("a")
	b, _ := spans[0].Attr("b")
	c, _ := spans[0].Attr("c")
	assert.Equal(t, int64(math.MinInt64), a.Int)
	assert.Equal(t, int64(9007199254740993), b.Int, "integers are parsed exactly, not through float64")
	assert.Equal(t, int64(1000), c.Int)
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for i := 0; i < n; i++ {
		b = append(b, s...)
	}
	return string(b)
}

// FuzzDecodeJSON: never panics; accepts only valid JSON; is deterministic.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeSpans":[{"scope":{"name":"vllm.api"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"llm_request","kind":2,"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"12"}}],"events":[{"timeUnixNano":"3","name":"api.ARRIVED","attributes":[{"key":"event.ts.monotonic","value":{"doubleValue":1.25}}]}],"droppedEventsCount":1}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm-engine-core"}},{"key":"service.instance.id","value":{"stringValue":"instance_1"}}]},"scopeSpans":[{"scope":{"name":"vllm.scheduler.step"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"scheduler_steps_1","kind":1,"startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[]}`))
	f.Add([]byte(`{"a":"\ud83d\ude00\u00e9","b":[true,false,null,-1.5e-3]}`))
	for _, line := range fastPathCases {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newJSONDecoder()
		spans, err := d.decode(data, 1, nil)
		checkFastPathsAgree(t, data, spans, err)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := newJSONDecoder().decode(data, 1, nil)
		if err != nil || len(again) != len(spans) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}

// fastPathCases are lines at the edges of the decoder's fast paths
// (attributes and event heads in the exporters' exact form).
var fastPathCases = func() []string {
	head := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"llm_core","events":[`
	tail := `]}]}]}]}`
	attrs := []string{
		`{"key":"a","value":{"intValue":"007"}}`, `{"key":"a","value":{"intValue":007}}`,
		`{"key":"a","value":{"intValue":"-0"}}`, `{"key":"a","value":{"intValue":-12}}`,
		`{"key":"a","value":{"intValue":"9223372036854775807"}}`, `{"key":"a","value":{"intValue":"-9223372036854775808"}}`,
		`{"key":"a","value":{"intValue":"9223372036854775808"}}`, `{"key":"a","value":{"intValue":"123456789012345678"}}`,
		`{"key":"a","value":{"intValue":""}}`, `{"key":"a","value":{"intValue":"1e3"}}`, `{"key":"a","value":{"intValue":5.0}}`,
		`{"key":"a","value":{"intValue":"12" }}`, `{"key":"a","value":{"intValue":"1","x":1}}`,
		`{"key":"a\u0062","value":{"stringValue":"x"}}`, `{"key":"a","value":{"stringValue":"x\ny"}}`,
		`{"key":"a","value":{"stringValue":"x` + "\t" + `y"}}`, `{"key":"a","value":{"stringValue":""}}`,
		`{"key":"a","value":{"doubleValue":0.25}}`, `{"key":"a","value":{"doubleValue":"NaN"}}`,
		`{"key":"a","value":{"doubleValue":-1e-7}}`, `{"key":"a","value":{"doubleValue":01}}`, `{"key":"a","value":{"doubleValue":1.}}`,
		`{"key":"a","value":{"boolValue":true}}`, `{"key":"a","value":{"boolValue":false}}`, `{"key":"a","value":{"boolValue":tru}}`,
		`{"key":"a","value":{"arrayValue":{"values":[]}}}`, `{"value":{"intValue":"1"},"key":"a"}`, `{ "key":"a","value":{"intValue":"1"}}`,
		`{"key":"a","value":{"intValue":"1"}`, `{"key":"a","value":{"intValue":"1`, `{"key":"`,
	}
	heads := []string{
		`{"timeUnixNano":"1700000000000000001","name":"journey.QUEUED"`, `{"timeUnixNano":"18446744073709551615","name":"x"`,
		`{"timeUnixNano":"18446744073709551616","name":"x"`, `{"timeUnixNano":"","name":"x"`, `{"timeUnixNano":"01","name":"x"`,
		`{"timeUnixNano":"1","name":"a\"b"`, `{"timeUnixNano":"1","name":"a` + "\n" + `"`, `{"timeUnixNano":1,"name":"x"`,
		`{"timeUnixNano":"1","name":"x","name":"y"`, `{"timeUnixNano":"1","name":"x"`,
	}
	var out []string
	for _, a := range attrs {
		out = append(out, head+`{"timeUnixNano":"1","name":"e","attributes":[`+a+`,`+a+`]}`+tail)
	}
	for _, h := range heads {
		out = append(out, head+h+`,"attributes":[{"key":"k","value":{"intValue":"2"}}]}`+tail, head+h+`}`+tail, head+h+tail)
	}
	return out
}()

// checkFastPathsAgree decodes data again without the fast paths and fails
// unless the result is the same.
func checkFastPathsAgree(t *testing.T, data []byte, spans []Span, err error) {
	t.Helper()
	slow := newJSONDecoder()
	slow.slow = true
	want, werr := slow.decode(data, 1, nil)
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("fast paths: error %v, without them %v, on %q", err, werr, data)
	}
	if err == nil && !bytes.Equal(AppendJSON(nil, spans), AppendJSON(nil, want)) {
		t.Fatalf("fast paths decode %q differently:\n%s\nwithout them:\n%s", data, AppendJSON(nil, spans), AppendJSON(nil, want))
	}
}

func TestDecodeFastPathsAgree(t *testing.T) {
	for _, line := range fastPathCases {
		spans, err := newJSONDecoder().decode([]byte(line), 1, nil)
		checkFastPathsAgree(t, []byte(line), spans, err)
	}
	// And the generated trace of the benchmarks, which takes them all.
	var buf bytes.Buffer
	if err := genTrace(bufio.NewWriter(&buf), 2e6); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte{'\n'}) {
		spans, err := newJSONDecoder().decode(line, 1, nil)
		checkFastPathsAgree(t, line, spans, err)
	}
}
