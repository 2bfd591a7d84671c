package records

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/hardening.md, class 7: every CSV these readers take refuses a column named
// twice (after the reader's own normalization: case, spaces, BOM), where
// one copy would silently win.
func TestDuplicateColumnsRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	counters := write("timeseries.csv", "t,prompt_throughput,gen_throughput,running,waiting,running\n1.0,3392.0,2.0,5,2,9\n")
	_, _, err := ReadCounters(counters, Options{})
	require.ErrorContains(t, err, counters+":1: column running appears twice (columns 4 and 6)")
	azure := write("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,contexttokens\n2023-11-16 18:15:46.5000000,1200,40,7\n")
	_, _, err = Read(azure, Azure, Options{})
	require.ErrorContains(t, err, azure+":1: column contexttokens appears twice (columns 2 and 4)")
}

// The columnar vllm bench serve result: an array named twice is refused.
func TestVLLMBenchDuplicateArrayRefused(t *testing.T) {
	dir := t.TempDir()
	body := `{"input_lens": [10, 20], "output_lens": [2, 2], "start_times": [1, 2], "ttfts": [0.1, 0.2], "itls": [[0.01], [0.02]], "errors": ["", ""], "ttfts": [9, 9]}`
	p := filepath.Join(dir, "bench.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	_, _, err := Read(p, VLLMBench, Options{})
	require.ErrorContains(t, err, p+": key ttfts appears twice")
	for doc, want := range map[string]string{
		`{"a": {"b": 1, "b": 2}, "c": [{"a": 1}], "d": "a"}`: "",
		`{"a": 1, "b": {"x": [1, {"a": 2}]}, "a": 3}`:        "a",
		`[1, 2]`:     "",
		`{"a": 1`:    "",
		`{"a": "a"}`: "",
	} {
		k, ok := dupKey([]byte(doc))
		require.Equal(t, want != "", ok, doc)
		require.Equal(t, want, k, doc)
	}
	good, err := os.ReadFile(filepath.Join("testdata", "vllm_bench.json"))
	require.NoError(t, err)
	_, ok := dupKey(good)
	require.False(t, ok)
}

// Every JSON row reader refuses a row naming a field twice (the last copy
// won silently): the row is skipped with its reason, or with --strict an
// error naming file:line and the field. dupKey on escapes, nesting and
// strings that look like keys.
func TestJSONRowsWithADuplicateKey(t *testing.T) {
	dir := t.TempDir()
	for format, body := range map[string]string{
		VLLMRuns:      `{"request_id": "a", "input_toks": 10, "output_toks": 5, "arrival_time": 1000.5, "queued_ts": 50.5, "scheduled_ts": 50.5, "first_token_ts": 50.6, "last_token_ts": 51.0, "input_toks": 9000}` + "\n",
		Mooncake:      `{"timestamp": 0, "input_length": 100, "output_length": 20, "hash_ids": [0], "input_length": 7}` + "\n",
		InferencePerf: `[{"start_time": 1.0, "end_time": 2.0, "request": "{}", "response": "{}", "info": {"input_tokens": 10, "output_tokens": 5}, "start_time": 9.0}]`,
	} {
		p := filepath.Join(dir, format)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, rep, err := Read(p, format, Options{})
		if err == nil {
			require.Len(t, rep.Skipped, 1, format)
			require.Equal(t, SkipDuplicateKey, rep.Skipped[0].Reason, format)
		}
		_, _, err = Read(p, format, Options{Strict: true})
		require.ErrorContains(t, err, "named twice in the row", format)
	}
	for doc, want := range map[string]string{
		`{"a": "x\"y, \"a\": ", "b": {"a": 1}, "c": ["a", {"a": 2}]}`: "",
		`{"a\"": 1, "a": 2}`:        "",
		`{"s": "\\", "s": 1}`:       "s",
		` { "k" : [ ] , "k" : 1 } `: "k",
		`{"k": 1,}`:                 "",
	} {
		k, ok := dupKey([]byte(doc))
		require.Equal(t, want != "", ok, doc)
		require.Equal(t, want, k, doc)
	}
}
