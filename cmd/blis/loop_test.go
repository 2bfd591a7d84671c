package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/internal/docs"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
)

// TestCalibrationLoopOnHeldOutRequests closes the loop a user runs on a
// vLLM server, with the simulator as the server: blis run writes the run
// as vLLM's journey and step tracing would (a roofline 0.55 and 0.6
// efficient with 5 % noise: the truth, which blis's default roofline
// misses by ~30 %), calibrate ingest's library
// turns it into tables, calibrate fit's library fits physics coefficients
// on the first 70 % of the arrivals (--holdout-after 70%), and blis
// validate replays every request with those coefficients and compares the
// ones the fit never saw (--from holdout). The held-out requests' mean
// TTFT, ITL and E2E must be within 5 %: the fitted model predicts a run
// it was not fitted on; the default roofline is more than 20 % off.
func TestCalibrationLoopOnHeldOutRequests(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	_, _, err := runCLI(t, "run", "-q", "--latency", "roofline", "--roofline-compute-eff", "0.55", "--roofline-bandwidth-eff", "0.6", "--latency-noise", "0.05", "--requests", "1000",
		"--otlp-trace", trace, "--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0.1", "--trace-max-events-per-span", "100000")
	require.NoError(t, err)
	tables := filepath.Join(dir, "tables")
	_, err = otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: tables})
	require.NoError(t, err)

	coeffs := filepath.Join(dir, "coeffs.yaml")
	h := fitHeldOut(t, tables, "70%", coeffs)

	type report struct {
		Records struct {
			Read int64 `json:"Read"`
		} `json:"records"`
		ComparedOnly string `json:"compared_only"`
		Deployment   struct {
			Latency string `json:"latency"`
		} `json:"deployment"`
		Compare struct {
			Requests int `json:"requests"`
			Metrics  []struct {
				Metric   string  `json:"metric"`
				Compared int     `json:"compared"`
				ErrMean  float64 `json:"err_mean"`
			} `json:"metrics"`
		} `json:"compare"`
	}
	validate := func(args ...string) report {
		t.Helper()
		out, _, err := runCLI(t, append([]string{"validate", tables, "--json", "-q"}, args...)...)
		require.NoError(t, err)
		var rep report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		return rep
	}
	rep := validate("--coefficients", coeffs, "--from", "holdout")
	require.Equal(t, int64(1000), rep.Records.Read, "every request replayed")
	require.Equal(t, int(h.Requests), rep.Compare.Requests, "only the held-out requests compared")
	require.Contains(t, rep.ComparedOnly, "after "+h.After)
	require.Equal(t, "physics", rep.Deployment.Latency)
	require.Len(t, rep.Compare.Metrics, 3)
	for _, mr := range rep.Compare.Metrics {
		require.Equal(t, int(h.Requests), mr.Compared, mr.Metric)
		require.Less(t, math.Abs(mr.ErrMean), 0.05, "%s: mean error %.1f %% on held-out requests", mr.Metric, 100*mr.ErrMean)
	}
	t.Logf("%d held-out requests: %+v", h.Requests, rep.Compare.Metrics)

	// The same requests with blis's default roofline (the efficiencies the
	// run did not have): far off, so the check above can fail.
	def := validate("--latency", "roofline", "--hardware", "h100-sxm", "--from", h.After)
	require.Equal(t, int(h.Requests), def.Compare.Requests)
	for _, mr := range def.Compare.Metrics {
		require.Less(t, mr.ErrMean, -0.2, "%s: the default roofline is faster than the run", mr.Metric)
	}
}

// fitHeldOut is `calibrate fit TABLES --holdout-after SPEC -o OUT` with
// its default flags, through the fit library as calibrate fit calls it
// (Llama-3.1-8B on one H100, vLLM's default settings, the GPU KV blocks
// the trace reports; cmd/calibrate's TestFitCLIMatchesLibraryDefaults
// checks that the two agree): it writes the coefficient file and returns
// the split.
func fitHeldOut(t *testing.T, tables, spec, out string) *coefficients.Holdout {
	t.Helper()
	tr, err := fit.LoadTrace(tables)
	require.NoError(t, err)
	h, err := fit.HoldOutTraces([]*fit.Trace{tr}, spec)
	require.NoError(t, err)
	require.Positive(t, h.Requests)
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	hw, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.TotalKVBlocksGPU = tr.Steps[0].KVTotal
	pc, err := physics.NewPhysicsConfig(m, hw, 1, k)
	require.NoError(t, err)
	res, err := fit.Run([]fit.Config{{Name: "llama-3.1-8b", Phys: pc, Traces: []*fit.Trace{tr}}}, fit.DefaultOptions(), "calibrate fit --holdout-after "+spec)
	require.NoError(t, err)
	res.File.Provenance.Holdout = h
	data, err := res.File.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, data, 0o644))
	_, err = coefficients.Load(out)
	require.NoError(t, err)
	return h
}

// TestCalibrationTourInDocs runs the calibration tour of
// docs/guides/calibrating.md (the
// simulated trace, ingest, fit --holdout-after 80%, validate --from
// holdout) and checks the validation table it and docs/validation.md
// show; -update rewrites them.
func TestCalibrationTourInDocs(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "run.jsonl")
	_, _, err := runCLI(t, "run", "--latency", "roofline", "--latency-noise", "0.05", "--requests", "3000", "--otlp-trace", trace,
		"--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0.1", "--trace-max-events-per-span", "100000")
	require.NoError(t, err)
	tables := filepath.Join(dir, "tables")
	_, err = otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: tables})
	require.NoError(t, err)
	coeffs := filepath.Join(dir, "coeffs.yaml")
	fitHeldOut(t, tables, "80%", coeffs)
	out, _, err := runCLI(t, "validate", tables, "--coefficients", coeffs, "--from", "holdout", "-q")
	require.NoError(t, err)
	out = strings.ReplaceAll(out, dir, "/tmp")
	block := "```\n$ go run ./cmd/blis validate /tmp/tables --coefficients /tmp/coeffs.yaml --from holdout\n" + out + "```\n"
	docs.CheckBlock(t, docsRoot(t), *update, "go test ./cmd/blis -run CalibrationTourInDocs -update", "calibrate-tour-table", block,
		"docs/guides/calibrating.md", "docs/validation.md")
}
