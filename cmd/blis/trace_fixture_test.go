package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// simulatedTraceArgs make testdata/traces/simulated_run.jsonl.gz and
// simulated_run.kv.jsonl.gz: a run of 256 requests traced as vLLM's
// journey and step tracing would trace it (every request, 10 % of steps,
// a quarter of those with per-request snapshots) with a CPU KV tier that
// offloads, so that its KV events hold transfers. It is the realistic
// trace of the docs' examples and of the receiver's tests.
var simulatedTraceArgs = []string{"run", "-q", "--requests", "256",
	"--trace-step-sample-rate", "0.1", "--trace-rich-subsample-rate", "0.25",
	"--kv-blocks-gpu", "2500", "--kv-blocks-cpu", "20000", "--kv-offload-threshold", "0.5"}

// TestSimulatedTraceFixture checks that the fixture is what blis run
// writes today (-update rewrites it).
func TestSimulatedTraceFixture(t *testing.T) {
	dir := t.TempDir()
	trace, kv := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "kv.jsonl")
	_, _, err := runCLI(t, append(append([]string{}, simulatedTraceArgs...), "--otlp-trace", trace, "--kv-events", kv)...)
	require.NoError(t, err)
	for src, dst := range map[string]string{
		trace: "../../testdata/traces/simulated_run.jsonl.gz",
		kv:    "../../testdata/traces/simulated_run.kv.jsonl.gz",
	} {
		want, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NotEmpty(t, want)
		if *update {
			var b bytes.Buffer
			zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
			require.NoError(t, err)
			_, err = zw.Write(want)
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			require.NoError(t, os.WriteFile(dst, b.Bytes(), 0o644))
		}
		f, err := os.Open(dst)
		require.NoError(t, err, "missing fixture; regenerate with go test ./cmd/blis -run TestSimulatedTraceFixture -update")
		zr, err := gzip.NewReader(f)
		require.NoError(t, err)
		got, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.True(t, bytes.Equal(want, got), "%s is stale: go test ./cmd/blis -run TestSimulatedTraceFixture -update", dst)
	}
}
