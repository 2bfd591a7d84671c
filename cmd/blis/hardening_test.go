package main

// Issue 32 (hardening, round 3): one test per defect example, and per
// class a check beyond it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeZeroLatencyBench writes a vllm bench serve result whose measured
// latencies are all 0.
func writeZeroLatencyBench(t *testing.T, dir string) string {
	t.Helper()
	n := 6
	zeros := strings.TrimSuffix(strings.Repeat("0.0,", n), ",")
	var itls, starts, lens, outs, errs []string
	for i := 0; i < n; i++ {
		itls = append(itls, "[0.0, 0.0]")
		starts = append(starts, fmt.Sprintf("%g", 1000+0.1*float64(i)))
		lens, outs, errs = append(lens, "100"), append(outs, "3"), append(errs, `""`)
	}
	doc := fmt.Sprintf(`{"date": "x", "num_prompts": %d, "input_lens": [%s], "output_lens": [%s], "ttfts": [%s], "itls": [%s], "latencies": [%s], "start_times": [%s], "errors": [%s]}`,
		n, strings.Join(lens, ","), strings.Join(outs, ","), zeros, strings.Join(itls, ","), zeros, strings.Join(starts, ","), strings.Join(errs, ","))
	p := filepath.Join(dir, "bench.json")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o644))
	return p
}

// Class 1, example: validate --calibrate --json on records whose measured
// latencies are all 0 failed after the search with "json: unsupported
// value: +Inf"; it is refused naming --calibrate and the file, and
// without --calibrate the JSON has null errors, never ±Inf/NaN.
func TestValidateCalibrateAllZeroLatencies(t *testing.T) {
	dir := t.TempDir()
	p := writeZeroLatencyBench(t, dir)
	args := []string{"validate", p, "--format", "vllm-bench", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--json"}
	_, _, err := runCLI(t, append(args, "--calibrate")...)
	require.ErrorContains(t, err, "--calibrate: "+p+": no metric")
	require.NotContains(t, err.Error(), "unsupported value")
	out, _, err := runCLI(t, args...)
	require.NoError(t, err)
	require.True(t, json.Valid([]byte(out)))
	require.Contains(t, out, `"err_mean": null`)
}

// Class 2, example: a run that rejects every request got the best fitness
// (a latency with no samples counted as 0 ms); it now scores 0, with null
// latencies and their sample counts.
func TestFitnessOfARunThatRejectsEverything(t *testing.T) {
	args := []string{"run", "-q", "--num-instances", "2", "--requests", "20", "--fitness-weights", "p99_ttft:1,throughput:1"}
	out, _, err := runCLI(t, append(args, "--admission-policy", "reject-all")...)
	require.NoError(t, err)
	var rej struct {
		Fitness struct {
			Score      float64
			Components []map[string]any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rej))
	require.Zero(t, rej.Fitness.Score)
	require.Nil(t, rej.Fitness.Components[0]["raw"])
	require.EqualValues(t, 0, rej.Fitness.Components[0]["samples"])
	out, _, err = runCLI(t, args...)
	require.NoError(t, err)
	var ok struct{ Fitness struct{ Score float64 } }
	require.NoError(t, json.Unmarshal([]byte(out), &ok))
	require.Greater(t, ok.Fitness.Score, rej.Fitness.Score)
}
