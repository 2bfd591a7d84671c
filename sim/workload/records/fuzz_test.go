package records

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// fuzzRead reads arbitrary bytes as format, seeded with the format's
// fixtures, and checks the guarantees: Rows = Read + skipped, sorted
// records from 0 that make a valid workload, and Strict failing exactly
// when a row was skipped.
func fuzzRead(f *testing.F, format string, seeds ...string) {
	files, err := filepath.Glob("testdata/*")
	require.NoError(f, err)
	for _, p := range files {
		if detect(mustRead(f, p)) == format {
			f.Add(mustRead(f, p))
		}
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		detect(data)
		recs, rep, err := read("f", bytes.NewReader(data), format, Options{})
		srecs, _, serr := read("f", bytes.NewReader(data), format, Options{Strict: true})
		if !strictAgrees(t, recs, rep, err, srecs, serr) {
			return
		}
		checkReport(t, recs, rep)
		reqs, _, err := ToRequests(recs)
		require.NoError(t, err)
		require.NoError(t, sim.ValidateWorkload(reqs))
	})
}

// strictAgrees checks a strict read against the lenient one: it fails
// whenever the lenient one does or skips a row, else reads the same rows.
// It reports whether the lenient read succeeded.
func strictAgrees[T any](t *testing.T, rows []T, rep Report, err error, strict []T, serr error) bool {
	if err != nil {
		require.Error(t, serr, "strict fails whenever the lenient read does")
		return false
	}
	if len(rep.Skipped) > 0 {
		require.Error(t, serr, "a skipped row fails a strict read")
	} else {
		require.NoError(t, serr)
		require.Equal(t, rows, strict)
	}
	return true
}

func mustRead(t testing.TB, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func FuzzReadAzure(f *testing.F) {
	fuzzRead(f, Azure,
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1,1\n2024-05-12 00:00:00+05:30,2,2\n",
		"GeneratedTokens,TIMESTAMP,ContextTokens\n1,1677-01-01 00:00:00,1\n1,2262-04-11 23:47:16.854775807,1\n")
}

func FuzzReadMooncake(f *testing.F) {
	fuzzRead(f, Mooncake,
		`{"timestamp": -5, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551615]}`+"\n",
		`{"timestamp": 9223372036854.775807, "input_length": 1, "output_length": 1}`+"\n"+`{"timestamp": -9223372036854, "input_length": 1, "output_length": 1}`)
}

func FuzzReadVLLMBench(f *testing.F) {
	fuzzRead(f, VLLMBench,
		`{"input_lens": [5, 6], "output_lens": [3, 1], "start_times": [1.0, 2.0], "ttfts": [0.5, 0.25], "itls": [[0.25, 0.5], []], "errors": ["", "x"]}`)
}

func FuzzReadInferencePerf(f *testing.F) {
	fuzzRead(f, InferencePerf,
		`[{"start_time": 1, "end_time": 2, "info": {"input_tokens": 5, "response_info": {"output_tokens": 2, "output_token_times": [1.5, 2]}}, "error": null}]`)
}

func FuzzReadVLLMRuns(f *testing.F) {
	fuzzRead(f, VLLMRuns,
		`{"input_toks": 10, "output_toks": 3, "arrival_time": -9e9, "queued_ts": 9e9, "first_token_ts": 9.1e9, "last_token_ts": 9.2e9}`+"\n"+
			`{"input_toks": 10, "output_toks": 3, "arrival_time": 9e9, "queued_ts": -9e9, "first_token_ts": 9e9, "last_token_ts": 9e9}`)
}

// FuzzParseRunMeta: any bytes give a RunMeta that satisfies what the
// reader promises, or an error; never a panic.
func FuzzParseRunMeta(f *testing.F) {
	for _, p := range []string{"RTX4090/Llama-3.1-8B", "RTXPRO6000/Qwen3-30B-A3B-Instruct-2507"} {
		f.Add(mustRead(f, filepath.Join("..", "..", "..", "testdata", "vllm-runs", p, "meta.json")))
	}
	f.Add([]byte(`{"schema_version": 1, "engine_kwargs": {"model": "m", "tensor_parallel_size": 0}}`))
	f.Add([]byte(`{"schema_version": 1, "model": "m", "kv_cache": {"num_gpu_blocks": -1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseRunMeta(data, "meta.json")
		if err != nil {
			require.Contains(t, err.Error(), "meta.json: ")
			return
		}
		require.NotEmpty(t, m.Model)
		require.GreaterOrEqual(t, m.TP, 1)
		require.GreaterOrEqual(t, m.DP, 1)
		for _, v := range []int64{m.MaxNumSeqs, m.MaxBatchedTokens, m.MaxModelLen, m.KVBlocksGPU, m.BlockSize} {
			require.GreaterOrEqual(t, v, int64(0))
		}
		require.True(t, m.GPUMemoryUtilization >= 0 && m.GPUMemoryUtilization <= 1)
	})
}
