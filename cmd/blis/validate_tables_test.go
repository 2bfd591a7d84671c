package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/otlpingest"
)

// tracedTables runs blis run with args, writing its OTLP trace, and
// ingests it: the tables' directory.
func tracedTables(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	_, _, err := runCLI(t, append(append([]string{"run", "-q"}, args...), "--otlp-trace", trace)...)
	require.NoError(t, err)
	tables := filepath.Join(dir, "tables")
	_, err = otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: tables})
	require.NoError(t, err)
	return tables
}

type tablesReport struct {
	Records struct {
		Rows, Read int64
		Skipped    []struct {
			Reason    string
			Count     int64
			FirstLine int64
		}
	} `json:"records"`
	MeasuredAt   string `json:"measured_at"`
	ComparedOnly string `json:"compared_only"`
	Deployment   struct {
		Model string `json:"model"`
		VLLM  struct {
			TotalKVBlocksGPU int64 `json:"total_kv_blocks_gpu"`
		} `json:"vllm"`
	} `json:"deployment"`
	Compare struct {
		Requests int `json:"requests"`
		Metrics  []struct {
			Metric  string  `json:"metric"`
			ErrMean float64 `json:"err_mean"`
			ErrP90  float64 `json:"err_p90"`
		} `json:"metrics"`
	} `json:"compare"`
}

func validateTables(t *testing.T, args ...string) tablesReport {
	t.Helper()
	out, _, err := runCLI(t, append([]string{"validate", "--json", "-q"}, args...)...)
	require.NoError(t, err)
	var rep tablesReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

// TestValidateReplaysItsOwnTrace: blis validate on the tables of a run's
// own trace, with the run's deployment, reproduces the run: TTFT, ITL and
// E2E measured from the journey events are the simulator's, to the µs when
// requests share no prefix, and within 1 % when they do (the trace says
// how many blocks each request found cached only on rich steps; the
// replay gives each such request that many blocks of one shared prefix).
func TestValidateReplaysItsOwnTrace(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		bound float64
	}{
		{"no shared prefixes", []string{"--prefix-groups", "0", "--trace-step-sample-rate", "0.01"}, 1e-3}, // µs rounding
		{"shared prefixes, rich steps", []string{"--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0.2", "--trace-max-events-per-span", "100000"}, 0.01},
	} {
		t.Run(c.name, func(t *testing.T) {
			tables := tracedTables(t, append([]string{"--latency", "roofline", "--requests", "400"}, c.args...)...)
			rep := validateTables(t, tables, "--latency", "roofline", "--hardware", "h100-sxm")
			require.Equal(t, int64(400), rep.Records.Read)
			require.Equal(t, "engine", rep.MeasuredAt)
			require.Equal(t, "llama-3.1-8b", rep.Deployment.Model, "from the served model's name")
			require.Equal(t, int64(28279), rep.Deployment.VLLM.TotalKVBlocksGPU, "from the steps' kv.blocks_total_gpu")
			for _, m := range rep.Compare.Metrics {
				require.LessOrEqual(t, math.Abs(m.ErrMean), c.bound, "%s mean", m.Metric)
				require.LessOrEqual(t, math.Abs(m.ErrP90), 2*c.bound+1e-9, "%s p90", m.Metric)
			}
		})
	}
}

// TestValidateTablesSkipsAndRefusals: rows that cannot be replayed are
// counted by reason (--strict makes the first an error), and every input
// that cannot be validated is refused naming what to give.
func TestValidateTablesSkipsAndRefusals(t *testing.T) {
	// A cache too small for the longest prompts: those requests are
	// refused (api.ABORTED), so they are skipped as failed.
	small := tracedTables(t, "--latency", "roofline", "--kv-blocks-gpu", "120", "--requests", "200", "--rate", "10",
		"--prompt-tokens", "uniform:100,2500", "--prefix-groups", "0")
	rep := validateTables(t, small, "--latency", "roofline", "--hardware", "h100-sxm", "--kv-blocks-gpu", "120")
	require.Equal(t, int64(200), rep.Records.Rows)
	require.Len(t, rep.Records.Skipped, 1)
	require.Equal(t, "failed_request", rep.Records.Skipped[0].Reason)
	require.Equal(t, rep.Records.Rows-rep.Records.Read, rep.Records.Skipped[0].Count)
	_, _, err := runCLI(t, "validate", small, "--strict", "--hardware", "h100-sxm")
	require.ErrorContains(t, err, "finish_status: the request was aborted or failed")

	tables := tracedTables(t, "--latency", "roofline", "--requests", "100")
	cluster := tracedTables(t, "--latency", "roofline", "--requests", "100", "--num-instances", "2")
	coeffs := filepath.Join(t.TempDir(), "c.yaml")
	src, err := os.ReadFile("../../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml")
	require.NoError(t, err)
	f, err := coefficients.Parse(src, "shipped")
	require.NoError(t, err)
	f.Provenance.Holdout = coefficients.NewHoldout(1767225600000000000+5_000_000_000, 1, 1)
	data, err := f.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(coeffs, data, 0o644))
	records := "../../testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{tables}, "a trace does not record the GPU: give --hardware"},
		{[]string{cluster, "--hardware", "h100-sxm"}, "the trace holds 2 engines (instances instance_0, instance_1)"},
		{[]string{filepath.Join(tables, "steps.parquet"), "--hardware", "h100-sxm"}, `is the "steps" table of calibrate ingest`},
		{[]string{tables, "--hardware", "h100-sxm", "--meta", "x.json"}, "--meta and --counters describe a per-request RECORDS file"},
		{[]string{tables, "--hardware", "h100-sxm", "--from", "2026-01-01T00:00:05Z", "--calibrate"}, "--from with --calibrate"},
		{[]string{records, "--from", "2026-01-01T00:00:05Z"}, "--from compares the requests a fit held out: it needs the tables"},
		{[]string{tables, "--hardware", "h100-sxm", "--from", "holdout"}, "--from holdout: give --coefficients"},
		{[]string{tables, "--hardware", "h100-sxm", "--from", "yesterday"}, `--from "yesterday": give the instant`},
		{[]string{tables, "--hardware", "h100-sxm", "--from", "2030-01-01T00:00:00Z"}, "no request of"},
		{[]string{tables, "--coefficients", coeffs, "--from", "2026-01-01T00:00:06Z"}, "is not the split the coefficient file was fitted with (2026-01-01T00:00:05Z)"},
	} {
		_, _, err := runCLI(t, append([]string{"validate"}, c.args...)...)
		require.ErrorContains(t, err, c.want, strings.Join(c.args, " "))
	}

	// The coefficient file's split, by name or by instant.
	a := validateTables(t, tables, "--coefficients", coeffs, "--from", "holdout")
	b := validateTables(t, tables, "--coefficients", coeffs, "--from", "2026-01-01T00:00:05Z")
	require.Equal(t, a, b)
	require.Positive(t, a.Compare.Requests)
	require.Less(t, a.Compare.Requests, 100)
	require.Contains(t, a.ComparedOnly, "arrived after 2026-01-01T00:00:05Z (of 100 replayed)")
}

// craftedTables ingests the simulated fixture with edit applied to its
// spans: tables a vLLM trace could hold when clocks or exporters misbehave.
func craftedTables(t *testing.T, edit func(spans []otlpingest.Span)) string {
	t.Helper()
	var spans []otlpingest.Span
	require.NoError(t, otlpingest.ReadTraces([]string{"../../testdata/traces/simulated_run.jsonl.gz"}, otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
		for _, sp := range b.Spans {
			ev := make([]otlpingest.Event, len(sp.Events))
			for i, e := range sp.Events {
				ev[i] = e
				ev[i].Attrs = append([]otlpingest.KeyValue{}, e.Attrs...)
			}
			sp.Events, sp.Attrs = ev, append([]otlpingest.KeyValue{}, sp.Attrs...)
			spans = append(spans, sp)
		}
		return nil
	}))
	edit(spans)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	require.NoError(t, os.WriteFile(trace, append(otlpingest.AppendJSON(nil, spans), '\n'), 0o644))
	tables := filepath.Join(dir, "tables")
	_, err := otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: tables, AllowEmpty: true})
	require.NoError(t, err)
	return tables
}

// eventOf finds the named event of the i-th span called name.
func eventOf(spans []otlpingest.Span, name string, i int, event string) *otlpingest.Event {
	for s := range spans {
		if spans[s].Name != name {
			continue
		}
		if i > 0 {
			i--
			continue
		}
		for e := range spans[s].Events {
			if spans[s].Events[e].Name == event {
				return &spans[s].Events[e]
			}
		}
	}
	return nil
}

// TestValidateTablesHostile: tables from traces whose clocks run
// backwards (counted as negative) or jump decades (replayed as the trace
// says), a FIFO, and tables with no request (refused by name): never a
// hang or a panic.
func TestValidateTablesHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, _, err := runCLI(t, "validate", fifo, "--hardware", "h100-sxm")
	require.ErrorContains(t, err, "is not a regular file")

	args := []string{"--hardware", "h100-sxm", "--kv-blocks-cpu", "20000", "--kv-offload-threshold", "0.5"}
	backwards := craftedTables(t, func(spans []otlpingest.Span) {
		eventOf(spans, "llm_core", 3, "journey.FIRST_TOKEN").TimeUnixNano = 1 // before its arrival
		eventOf(spans, "llm_core", 7, "journey.FINISHED").TimeUnixNano = 2    // before its first token
	})
	rep := validateTables(t, append([]string{backwards}, args...)...)
	require.Equal(t, int64(254), rep.Records.Read)
	require.Len(t, rep.Records.Skipped, 1)
	require.Equal(t, "negative", rep.Records.Skipped[0].Reason)
	require.Equal(t, int64(2), rep.Records.Skipped[0].Count)

	decades := craftedTables(t, func(spans []otlpingest.Span) {
		eventOf(spans, "llm_request", 0, "api.ARRIVED").TimeUnixNano = 1_000_000_000 // 1970
	})
	// The request is replayed 56 years before the others (the simulator
	// skips idle time) and its measured TTFT is what the clocks say: the
	// reader does not judge a clock, it reports what the trace holds.
	rep = validateTables(t, append([]string{decades}, args...)...)
	require.Equal(t, int64(256), rep.Records.Read)
	require.Equal(t, 256, rep.Compare.Requests)

	empty := craftedTables(t, func(spans []otlpingest.Span) {
		for i := range spans {
			spans[i].Name = "GET /health"
		}
	})
	_, _, err = runCLI(t, append([]string{"validate", empty}, args...)...)
	require.ErrorContains(t, err, "no request can be replayed (0 rows)")
}
