package records

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// rec builds an expected record; latencies default to -1.
func rec(line, arrival, prompt, output int64, opts ...func(*Record)) Record {
	r := Record{Line: line, ArrivalUs: arrival, PromptTokens: prompt, OutputTokens: output, TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func lat(ttft, e2e, itl int64) func(*Record) {
	return func(r *Record) { r.TTFTUs, r.E2EUs, r.MeanITLUs = ttft, e2e, itl }
}

func content(ids ...uint64) func(*Record) {
	return func(r *Record) { r.Content, r.ContentTokens = ids, MooncakeBlockTokens }
}

func session(s string) func(*Record) { return func(r *Record) { r.Session = s } }

func skips(s ...SkipCount) []SkipCount { return s }

// The fixtures in testdata are written by hand in each documented format.
func TestReadFixtures(t *testing.T) {
	tests := []struct {
		file, format string
		want         []Record
		rows         int64
		skipped      []SkipCount
	}{
		{"azure_2023.csv", Azure, []Record{
			rec(3, 0, 350, 120),
			rec(2, 250000, 1200, 40),
			rec(4, 750002, 800, 64), // 47.0000015 s: 1.5 µs rounds away from zero
			rec(6, 1873457, 96, 12), // .1234567 s is 123456.7 µs
		}, 5, skips(SkipCount{SkipZeroOutputTokens, 1, 5})},
		{"azure_2024.csv", Azure, []Record{
			rec(5, 0, 300, 2), // before the first row: rebased to it
			rec(2, 1, 1000, 8),
			rec(3, 20001, 500, 25),
			rec(4, 1500001, 700, 5), // +02:00
		}, 4, nil},
		{"mooncake.jsonl", Mooncake, []Record{
			rec(1, 0, 1100, 20, content(0, 1, 2)),
			rec(2, 0, 600, 5, content(0, 3)),
			rec(5, 2750500, 1030, 7, content(0, 1, 5)),
			rec(6, 3000000, 40, 9),
		}, 5, skips(SkipCount{SkipZeroOutputTokens, 1, 4})},
		{"vllm_bench.json", VLLMBench, []Record{
			rec(3, 0, 1024, 16, lat(100000, 400000, 20000)),
			rec(1, 126543, 512, 64, lat(52000, 1312000, 20000)),
			rec(4, 876543, 77, 1, lat(30000, 30000, -1)),
		}, 4, skips(SkipCount{SkipFailedRequest, 1, 2})},
		{"inference_perf.json", InferencePerf, []Record{
			rec(2, 0, 40, 4, lat(-1, 500000, -1), session("conv-b")),
			rec(1, 500000, 900, 12, lat(200000, 1500000, 118182), session("conv-a")), // the server's 12 tokens, not the client's 11
			rec(4, 2500000, 1200, 3, lat(250000, 1000000, 375000), session("conv-a")),
		}, 4, skips(SkipCount{SkipFailedRequest, 1, 3})},
		{"inference_perf_old.json", InferencePerf, []Record{
			rec(2, 0, 130, 5, lat(500000, 2000000, 375000)),
			rec(1, 500000, 120, 3, lat(100000, 500000, 200000)),
		}, 2, nil},
		// C = max(arrival_time - queued_ts) is bench-1's; see vllmruns.go.
		{"vllm_runs.jsonl", VLLMRuns, []Record{
			rec(2, 0, 50, 1, lat(149700, 149700, -1)),
			rec(1, 250000, 100, 11, lat(250200, 1250200, 100000)),
			rec(3, 750000, 200, 21, lat(399700, 2399700, 100000)),
		}, 4, skips(SkipCount{SkipZeroOutputTokens, 1, 4})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			got, err := Detect(path)
			require.NoError(t, err)
			require.Equal(t, tt.format, got)
			for _, format := range []string{tt.format, "auto", ""} {
				recs, rep, err := Read(path, format, Options{})
				require.NoError(t, err)
				require.Equal(t, tt.want, recs)
				require.Equal(t, Report{Path: path, Format: tt.format, Rows: tt.rows, Read: int64(len(tt.want)), Skipped: tt.skipped}, rep)
			}
			_, _, err = Read(path, tt.format, Options{Strict: true})
			if tt.skipped == nil {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, path+":"+strconv.FormatInt(tt.skipped[0].FirstLine, 10)+": ")
			}
		})
	}
}

// rowCase is one input with the skips it should give and, with Strict,
// the error (file:line: field: ...).
type rowCase struct {
	name    string
	in      string
	skipped []SkipCount
	strict  string
	err     string   // a file error, with or without Strict
	want    []Record // when not nil, the records
}

func runRowCases(t *testing.T, format string, cases []rowCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, rep, err := read("f", strings.NewReader(tc.in), format, Options{})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			if len(recs) == 0 {
				require.ErrorContains(t, err, "none of")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.skipped, rep.Skipped)
			if tc.want != nil {
				require.Equal(t, tc.want, recs)
			}
			checkReport(t, recs, rep)
			_, _, err = read("f", strings.NewReader(tc.in), format, Options{Strict: true})
			if tc.strict == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tc.strict)
			}
		})
	}
}

// checkReport checks what every read guarantees.
func checkReport(t testing.TB, recs []Record, rep Report) {
	t.Helper()
	var skipped int64
	for _, s := range rep.Skipped {
		require.Positive(t, s.Count)
		require.Positive(t, s.FirstLine)
		skipped += s.Count
	}
	require.Equal(t, rep.Rows, rep.Read+skipped, "rows = read + skipped")
	require.Equal(t, int64(len(recs)), rep.Read)
	for i, r := range recs {
		require.Positive(t, r.PromptTokens)
		require.Positive(t, r.OutputTokens)
		require.GreaterOrEqual(t, r.ArrivalUs, int64(0))
		if i == 0 {
			require.Zero(t, r.ArrivalUs)
		} else {
			require.GreaterOrEqual(t, r.ArrivalUs, recs[i-1].ArrivalUs)
		}
		require.GreaterOrEqual(t, r.TTFTUs, int64(-1))
		require.GreaterOrEqual(t, r.E2EUs, int64(-1))
		require.GreaterOrEqual(t, r.MeanITLUs, int64(-1))
	}
}

func TestAzureRows(t *testing.T) {
	const h = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	const ok = "2023-11-16 18:15:46.6805900,10,2\n"
	runRowCases(t, Azure, []rowCase{
		{name: "clean", in: h + ok + ok},
		{name: "columns by name, extra ignored, BOM, CRLF, spaces",
			in:   "\ufeffGeneratedTokens, timestamp ,Model,CONTEXTTOKENS\r\n2,2023-11-16 18:15:46,x,10\r\n",
			want: []Record{rec(2, 0, 10, 2)}},
		{name: "bad rows", in: h + ok +
			"2023-11-16 18:15:46,0,1\n" +
			"2023-11-16 18:15:46,1,0\n" +
			"2023-11-16 18:15:46,-1,1\n" +
			"2023-11-16 18:15:46,1.5,1\n" +
			"2023-13-16 18:15:46,1,1\n" +
			"2023-11-16 18:15:46.1234567891,1,1\n" +
			"2023-11-16 18:15:46,1\n" +
			"2023-11-16 18:15:46,,1\n",
			skipped: skips(
				SkipCount{SkipBadNumber, 1, 6},
				SkipCount{SkipBadTime, 2, 7},
				SkipCount{SkipMissingField, 2, 9},
				SkipCount{SkipNegative, 1, 5},
				SkipCount{SkipZeroOutputTokens, 1, 4},
				SkipCount{SkipZeroPromptTokens, 1, 3},
			),
			strict: "f:3: ContextTokens: 0 must be > 0"},
		{name: "strict names the field", in: h + ok + "2023-11-16 18:15:46,10,x\n",
			skipped: skips(SkipCount{SkipBadNumber, 1, 3}), strict: `f:3: GeneratedTokens: "x" is not an integer`},
		{name: "bad time", in: h + "16/11/2023 18:15,1,1\n" + ok,
			skipped: skips(SkipCount{SkipBadTime, 1, 2}), strict: `f:2: TIMESTAMP: "16/11/2023 18:15" is not a date and time (YYYY-MM-DD HH:MM:SS[.fraction][zone])`},
		{name: "no usable row", in: h + "2023-11-16 18:15:46,1,0\n", skipped: skips(SkipCount{SkipZeroOutputTokens, 1, 2}),
			strict: "f:2: GeneratedTokens: 0 must be > 0"},
		{name: "missing column", in: "TIMESTAMP,ContextTokens\n", err: "f:1: missing column GeneratedTokens"},
		{name: "empty", in: "", err: "f: empty file"},
		{name: "header only", in: h, err: "f: no requests in the file"},
	})
}

func TestMooncakeRows(t *testing.T) {
	runRowCases(t, Mooncake, []rowCase{
		{name: "no hash ids, other keys", in: `{"timestamp": 1e3, "input_length": 3, "output_length": 1, "session_id": "s"}` + "\n" +
			`{"timestamp": 5, "input_length": 4, "output_length": 1, "hash_ids": null}`,
			want: []Record{rec(2, 0, 4, 1), rec(1, 995000, 3, 1)}},
		{name: "bad rows", in: `{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [1]}
not json
[1, 2]
{"timestamp": "0", "input_length": 3, "output_length": 1}
{"input_length": 3, "output_length": 1}
{"timestamp": 1, "input_length": 3.5, "output_length": 1}
{"timestamp": 1, "input_length": 3, "output_length": -2}
{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [-1]}
{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": "x"}
{"timestamp": 1e400, "input_length": 3, "output_length": 1}
{"timestamp": 1, "input_length": 0, "output_length": 1}
`,
			skipped: skips(
				SkipCount{SkipBadNumber, 5, 4},
				SkipCount{SkipMalformed, 2, 2},
				SkipCount{SkipMissingField, 1, 5},
				SkipCount{SkipNegative, 1, 7},
				SkipCount{SkipZeroPromptTokens, 1, 11},
			),
			strict: "f:2: not JSON: invalid character 'o' in literal null (expecting 'u')"},
		{name: "strict names the field", in: `{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [1, 2.5]}`,
			skipped: skips(SkipCount{SkipBadNumber, 1, 1}), strict: "f:1: hash_ids: not an array of integers >= 0"},
		{name: "wrong type names the field", in: `{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": {}}`,
			skipped: skips(SkipCount{SkipBadNumber, 1, 1}), strict: "f:1: hash_ids: not an array of integers >= 0"},
		{name: "blank only", in: "\n  \n", err: "f: no requests in the file"},
	})
}

func TestVLLMRunsRows(t *testing.T) {
	const ok = `{"input_toks": 10, "output_toks": 3, "arrival_time": 100.0, "queued_ts": 5.0, "first_token_ts": 5.5, "last_token_ts": 6.5}`
	runRowCases(t, VLLMRuns, []rowCase{
		{name: "without engine times", in: ok + "\n" + `{"input_toks": 10, "output_toks": 3, "arrival_time": 99.0}`,
			want: []Record{rec(2, 0, 10, 3), rec(1, 1000000, 10, 3, lat(500000, 1500000, 500000))}},
		{name: "bad rows", in: ok + "\n" +
			`{"input_toks": 10, "output_toks": 3, "arrival_time": 100.0, "queued_ts": 5.0, "first_token_ts": 4.5, "last_token_ts": 6.5}` + "\n" +
			`{"input_toks": 10, "output_toks": 3, "arrival_time": 100.0, "queued_ts": 5.0, "first_token_ts": 5.5, "last_token_ts": 5.0}` + "\n" +
			`{"input_toks": 10, "output_toks": 3, "arrival_time": 100.0, "queued_ts": 5.0, "last_token_ts": 5.0}` + "\n" +
			`{"input_toks": 10, "output_toks": 3}` + "\n" +
			`{"input_toks": 10, "output_toks": 3, "arrival_time": 1e300}` + "\n",
			skipped: skips(
				SkipCount{SkipBadNumber, 1, 6},
				SkipCount{SkipMissingField, 2, 4},
				SkipCount{SkipNegative, 2, 2},
			),
			strict: "f:2: first_token_ts: before queued_ts"},
	})
}

func TestVLLMBenchRows(t *testing.T) {
	runRowCases(t, VLLMBench, []rowCase{
		{name: "itls instead of latencies", in: `{"input_lens": [5, 6], "output_lens": [3, 1], "start_times": [1.0, 2.0],
			"ttfts": [0.5, 0.25], "itls": [[0.25, 0.5], []], "errors": ["", ""]}`,
			want: []Record{rec(1, 0, 5, 3, lat(500000, 1250000, 375000)), rec(2, 1000000, 6, 1, lat(250000, 250000, -1))}},
		{name: "no latencies at all", in: `{"input_lens": [5], "output_lens": [3], "start_times": [1.0]}`,
			want: []Record{rec(1, 0, 5, 3)}},
		{name: "bad rows", in: `{"input_lens": [5, 6, 0, 5, 5, 5, 5], "output_lens": [3, 1, 1, 0, 2, 2, 2],
			"start_times": [1.0, null, 1, 1, "1", 1, 1], "ttfts": [0.5, 0.1, 0.1, 0.1, 0.1, -0.1, 0.1],
			"itls": [[], [], [], [], [], [], [0.1, "x"]], "errors": ["", "", "", "", "", "", ""]}`,
			skipped: skips(
				SkipCount{SkipBadNumber, 2, 5},
				SkipCount{SkipMissingField, 1, 2},
				SkipCount{SkipNegative, 1, 6},
				SkipCount{SkipZeroOutputTokens, 1, 4},
				SkipCount{SkipZeroPromptTokens, 1, 3},
			),
			strict: "f:2: start_times: missing"},
		{name: "failed", in: `{"input_lens": [5, 5], "output_lens": [3, 0], "start_times": [1, 2], "errors": ["", "HTTP 500\nmore"]}`,
			skipped: skips(SkipCount{SkipFailedRequest, 1, 2}), strict: "f:2: errors: the request failed: HTTP 500"},
		{name: "no start_times", in: `{"input_lens": [5], "output_lens": [3], "ttfts": [0.1]}`, err: "f: no start_times: this vllm bench serve result has no per-request send times"},
		{name: "not detailed", in: `{"date": "x", "mean_ttft_ms": 3}`, err: "f: no input_lens: vllm bench serve writes the per-request arrays only with --save-result --save-detailed"},
		{name: "lengths differ", in: `{"input_lens": [5, 6], "output_lens": [3], "start_times": [1, 2]}`, err: "f: output_lens has 1 entries, input_lens 2"},
		{name: "pooling", in: `{"input_lens": [5], "output_lens": 0, "start_times": [1]}`, err: "f: output_lens is not an array"},
		{name: "wrong type", in: `{"input_lens": 5}`, err: "f: input_lens: a JSON number, want an array with one entry per request"},
		{name: "not json", in: `[1]`, err: "f: not a vllm bench serve result"},
		{name: "trailing data", in: `{"input_lens": [5], "output_lens": [3], "start_times": [1]} {}`, err: "f: data after the result object"},
	})
}

func TestInferencePerfRows(t *testing.T) {
	runRowCases(t, InferencePerf, []rowCase{
		{name: "unary response, no end time", in: `[{"start_time": 1, "info": {"input_tokens": 5, "output_tokens": 2}, "error": null}]`,
			want: []Record{rec(1, 0, 5, 2)}},
		{name: "bad rows", in: `[
			{"start_time": 1, "end_time": 2, "info": {"input_tokens": 5, "output_tokens": 2}, "error": null},
			{"start_time": 1, "end_time": 0.5, "info": {"input_tokens": 5, "output_tokens": 2}},
			{"start_time": 1, "info": {"input_tokens": 5, "output_tokens": 2, "output_token_times": [0.5]}},
			{"start_time": 1, "info": null},
			{"start_time": 1, "info": "x"},
			{"start_time": 1, "info": {"input_tokens": 5, "output_tokens": 2, "output_token_times": [2, "x"]}},
			{"start_time": 1, "info": {"request_metrics": {"text": {"input_tokens": 0}}, "output_tokens": 2}},
			{"start_time": 1, "info": {"input_tokens": 5, "response_metrics": {"output_tokens": 0}}},
			{"info": {"input_tokens": 5, "output_tokens": 2}},
			{"start_time": 1, "session_id": 7, "info": {"input_tokens": 5, "output_tokens": 2}},
			5,
			{"start_time": 1, "info": {}, "error": {"error_type": "Timeout"}}
		]`,
			skipped: skips(
				SkipCount{SkipBadNumber, 1, 6},
				SkipCount{SkipFailedRequest, 1, 12},
				SkipCount{SkipMalformed, 3, 5},
				SkipCount{SkipMissingField, 2, 4},
				SkipCount{SkipNegative, 2, 2},
				SkipCount{SkipZeroOutputTokens, 1, 8},
				SkipCount{SkipZeroPromptTokens, 1, 7},
			),
			strict: "f:2: end_time: before start_time"},
		{name: "strict names nested fields", in: `[{"start_time": 1, "info": {"request_metrics": {"text": []}}}]`,
			skipped: skips(SkipCount{SkipMalformed, 1, 1}), strict: "f:1: info.request_metrics.text: a JSON array where the format has an object"},
		{name: "not an array", in: `{"start_time": 1}`, err: "f: not inference-perf per-request metrics"},
		{name: "broken array", in: `[{"start_time": 1}, {`, err: "f:2: unexpected EOF"},
		{name: "empty array", in: `[]`, err: "f: no requests in the file"},
	})
}

func TestDetect(t *testing.T) {
	tests := []struct{ in, want string }{
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n", Azure},
		{"\ufeff\"TIMESTAMP\", ContextTokens ,GeneratedTokens\r\n", Azure},
		{"arrival_us,prompt_tokens,output_tokens\n0,1,1\n", ""},
		{`{"timestamp": 0, "input_length": 1}`, Mooncake},
		{`{"request_id": "bench-0", "input_toks": 1}`, VLLMRuns},
		{`{"date": "x", "endpoint_type": "openai", "generated_texts": ["` + strings.Repeat("x", 2*sniffBytes), VLLMBench},
		{`{"date": {"nested": [1, {"input_length": 2}]}, "input_lens": []}`, VLLMBench},
		{"  [\n {\"request\": \"x\", \"start_time\": 1", InferencePerf},
		{`[1, 2]`, ""},
		{`{"a": 1}`, ""},
		{`{`, ""},
		{"", ""},
		{"PAR1", ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, detect([]byte(tt.in)), "%.60q", tt.in)
	}
	path := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(path, []byte(`{"a": 1}`), 0o644))
	_, _, err := Read(path, "auto", Options{})
	require.ErrorContains(t, err, "not a trace of a known format; name one of azure, mooncake, vllm-bench, inference-perf, vllm-runs")
	_, _, err = Read(path, "csv", Options{})
	require.ErrorContains(t, err, `unknown trace format "csv"`)
	_, err = Detect(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
}

func TestParseScaled(t *testing.T) {
	tests := []struct {
		in    string
		scale int
		want  int64
		err   error
	}{
		{"1787267980.0827403", 9, 1787267980082740300, nil},
		{"0.1", 9, 100000000, nil},
		{"2750.5", 6, 2750500000, nil},
		{"1e3", 6, 1000000000, nil},
		{"1.5E-3", 9, 1500000, nil},
		{"-0.0000005", 6, -1, nil}, // halves away from zero
		{"0.0000005", 6, 1, nil},
		{"0.00000049", 6, 0, nil},
		{"0.00000005", 6, 0, nil},
		{"+7", 0, 7, nil},
		{"9223372036.854775807", 9, 9223372036854775807, nil},
		{"9223372036.854775808", 9, 0, errRange},
		{"9223372036.8547758075", 9, 0, errRange},
		{"1e400", 9, 0, errRange},
		{"0e400", 9, 0, nil},
		{"1e-400", 9, 0, nil},
		{"", 0, 0, errNotNumber},
		{"-", 0, 0, errNotNumber},
		{".", 0, 0, errNotNumber},
		{"1e", 0, 0, errNotNumber},
		{"1x", 0, 0, errNotNumber},
		{"NaN", 0, 0, errNotNumber},
	}
	for _, tt := range tests {
		got, err := parseScaled(tt.in, tt.scale)
		require.Equal(t, tt.err, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestParseDateTime(t *testing.T) {
	const base = 1700136946 // 2023-11-16 12:15:46 UTC
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2023-11-16 12:15:46", base * 1e9, true},
		{"2023-11-16T12:15:46Z", base * 1e9, true},
		{"2023-11-16 12:15:46.6805900", base*1e9 + 680590000, true},
		{"2023-11-16 12:15:46.123456789", base*1e9 + 123456789, true},
		{"2023-11-16 14:15:46.5+02:00", base*1e9 + 5e8, true},
		{"2023-11-16 11:15:46-0100", base * 1e9, true},
		{"2023-11-16 14:15:46+02", base * 1e9, true},
		{"2024-02-29 00:00:00", 1709164800 * 1e9, true},
		{"2023-02-29 00:00:00", 0, false},
		{"2023-11-16 24:00:00", 0, false},
		{"2023-11-16 12:15:46.", 0, false},
		{"2023-11-16 12:15:46.1234567890", 0, false},
		{"2023-11-16 12:15:46+2:00", 0, false},
		{"2023-11-16 12:15:46 UTC", 0, false},
		{"2023/11/16 12:15:46", 0, false},
		{"3000-01-01 00:00:00", 0, false}, // past what int64 ns hold
		{"short", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseDateTime(tt.in)
		require.Equal(t, tt.ok, ok, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestToRequests(t *testing.T) {
	recs := []Record{
		{Line: 1, ArrivalUs: 5, PromptTokens: 10, OutputTokens: 2, Tenant: "b", Session: "s1", SLOClass: "batch", Content: []uint64{1, 2}, ContentTokens: 4},
		{Line: 2, ArrivalUs: 0, PromptTokens: 11, OutputTokens: 3, Tenant: "a", Session: "s2"},
		{Line: 3, ArrivalUs: 5, PromptTokens: 12, OutputTokens: 4, Session: "s2", SLOClass: "realtime"},
		{Line: 4, ArrivalUs: 9, PromptTokens: 13, OutputTokens: 5, Tenant: "b"},
	}
	reqs, tenants, err := ToRequests(recs)
	require.NoError(t, err)
	require.Equal(t, []string{"", "a", "b"}, tenants)
	require.Equal(t, []sim.RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 11, OutputTokens: 3, Tenant: 1, Session: 1},
		{ID: 1, ArrivalUs: 5, PromptTokens: 10, OutputTokens: 2, Tenant: 2, Session: 2, SLOClass: sim.SLOBatch, Content: []uint64{1, 2}, ContentTokens: 4},
		{ID: 2, ArrivalUs: 5, PromptTokens: 12, OutputTokens: 4, Session: 1, SLOClass: sim.SLORealtime},
		{ID: 3, ArrivalUs: 9, PromptTokens: 13, OutputTokens: 5, Tenant: 2},
	}, reqs)
	reqs[1].Content[0] = 99
	require.Equal(t, uint64(1), recs[0].Content[0], "content is copied")

	_, _, err = ToRequests([]Record{{Line: 7, PromptTokens: 1, OutputTokens: 1, SLOClass: "gold"}})
	require.ErrorContains(t, err, `line 7: slo_class "gold" is not a class`)
	_, _, err = ToRequests([]Record{{Line: 8, PromptTokens: 0, OutputTokens: 1}})
	require.ErrorContains(t, err, "line 8: request 0: prompt_tokens 0 must be > 0")

	// Every fixture converts to a valid workload.
	files, err := filepath.Glob("testdata/*.*")
	require.NoError(t, err)
	for _, f := range files {
		recs, _, err := Read(f, "auto", Options{})
		require.NoError(t, err, f)
		reqs, _, err := ToRequests(recs)
		require.NoError(t, err, f)
		require.Len(t, reqs, len(recs))
	}
}

func TestNames(t *testing.T) {
	var n Names
	require.Equal(t, []string{""}, n.List())
	require.Equal(t, int64(0), n.ID(""))
	require.Equal(t, int64(1), n.ID("x"))
	require.Equal(t, int64(2), n.ID("y"))
	require.Equal(t, int64(1), n.ID("x"))
	require.Equal(t, []string{"", "x", "y"}, n.List())
}

// TestRunMetaDeploymentFlags: the vLLM version, async scheduling and eager
// mode of a run come from its meta.json (the resolved config), as the
// per-step cost needs them.
func TestRunMetaDeploymentFlags(t *testing.T) {
	path := filepath.Join("..", "..", "..", "testdata", "vllm-runs", "RTX4090", "Llama-3.1-8B", "meta.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := ParseRunMeta(data, path)
	require.NoError(t, err)
	require.Equal(t, "0.19.0", m.VLLMVersion)
	require.NotNil(t, m.AsyncScheduling)
	require.True(t, *m.AsyncScheduling)
	require.NotNil(t, m.EnforceEager)
	require.False(t, *m.EnforceEager)
	m, err = ParseRunMeta([]byte(`{"schema_version":1,"model":"x","resolved_config":{"model_config":{"enforce_eager":true}}}`), "m.json")
	require.NoError(t, err)
	require.True(t, *m.EnforceEager)
}
