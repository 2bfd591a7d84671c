package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

type runOutput struct {
	Config  experiment.InstanceConfig `json:"config"`
	Metrics sim.Result                `json:"metrics"`
}

func parse(t *testing.T, out string) runOutput {
	t.Helper()
	var r runOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return r
}

func TestRunDefaultsAndDeterminism(t *testing.T) {
	a, diag, err := runCLI(t, "run", "--requests", "300")
	require.NoError(t, err)
	require.Contains(t, diag, "300 requests (300 completed, 0 dropped)")
	b, _, err := runCLI(t, "run", "--requests", "300")
	require.NoError(t, err)
	require.Equal(t, a, b, "same flags and seed, byte-identical stdout")
	r := parse(t, a)
	require.Equal(t, "physics", r.Config.Latency, "shipped coefficients apply to the defaults")
	require.Equal(t, "builtin:shipped/llama-3.1-8b_h100-sxm_tp1.yaml", r.Config.Coefficients)
	require.Equal(t, int64(300), r.Metrics.Requests.Completed)
	require.Greater(t, r.Metrics.TTFT.Mean, 0.0)
	require.NotContains(t, a, "µs per request", "wall-clock timing stays on stderr")

	c, _, err := runCLI(t, "run", "--requests", "300", "--seed", "7")
	require.NoError(t, err)
	require.NotEqual(t, a, c, "another seed, another workload")
}

// physicsFile writes a coefficient file for Llama-3.1-8B on H100 at TP 1
// with the default knobs, after letting edit change it.
func physicsFile(t *testing.T, edit func(*coefficients.File)) string {
	t.Helper()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	c, err := physics.NewPhysicsConfig(m, h, 1, physics.DefaultVLLMKnobs())
	require.NoError(t, err)
	f := &coefficients.File{
		SchemaVersion:      coefficients.SchemaVersion,
		FeatureSpecVersion: features.SpecV1, // the vector below is spec 1.0's
		AppliesTo:          coefficients.AppliesTo{Model: "llama-3.1-8b", Hardware: "h100-sxm", TP: 1, VLLM: c.Knobs},
		Gamma:              0.3,
		Overheads:          coefficients.Overheads{ArrivalBaseUs: 1000, DepartureBaseUs: 300},
		Provenance:         coefficients.Provenance{Tool: "test", ToolVersion: "0", Command: "written by run_test.go"},
	}
	for i := range f.Alpha {
		f.Alpha[i] = 0.01
	}
	// A step: 1.25 × the linear-compute and weight-loading seconds plus 1 ms.
	f.Beta[0], f.Beta[1], f.Beta[2], f.Beta[3], f.Beta[4] = 1.25, 1.25, 1.25, 1.25, 1.25
	f.Beta[features.NumBeta-1] = 0.001
	if edit != nil {
		edit(f)
	}
	data, err := f.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "coeffs.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// TestPhysicsModeDoesNotAddAlpha: the engine's queue produces the delay that
// alpha predicts, so alpha must not change a run; the overheads must.
func TestPhysicsModeDoesNotAddAlpha(t *testing.T) {
	runWith := func(path string) runOutput {
		out, _, err := runCLI(t, "run", "--requests", "200", "--rate", "20", "--coefficients", path)
		require.NoError(t, err)
		return parse(t, out)
	}
	base := runWith(physicsFile(t, nil))
	require.Equal(t, "physics", base.Config.Latency)
	otherAlpha := runWith(physicsFile(t, func(f *coefficients.File) {
		for i := range f.Alpha {
			f.Alpha[i] = 7
		}
	}))
	require.Equal(t, base.Metrics, otherAlpha.Metrics)
	slowerAPI := runWith(physicsFile(t, func(f *coefficients.File) { f.Overheads.ArrivalBaseUs += 5000 }))
	require.InDelta(t, base.Metrics.TTFT.Mean+5, slowerAPI.Metrics.TTFT.Mean, 1.0, "+5 ms of API time is +5 ms of TTFT")
}

// TestRunCoefficientsOutsideTheFittedSpan: a coefficient file predicts
// another TP, GPU or dense model with a warning, through the physics of
// that configuration; a MoE model on dense-only coefficients is refused.
func TestRunCoefficientsOutsideTheFittedSpan(t *testing.T) {
	path := physicsFile(t, func(f *coefficients.File) {
		f.FittedConfigs = []coefficients.FittedConfig{coefficients.NewFittedConfig("h100-tp1", mustPhysics(t, "llama-3.1-8b", "h100-sxm", 1), 100, 10)}
	})
	runWith := func(args ...string) (runOutput, string) {
		t.Helper()
		out, diag, err := runCLI(t, append([]string{"run", "-q", "--requests", "200", "--rate", "20", "--coefficients", path}, args...)...)
		require.NoError(t, err)
		return parse(t, out), diag
	}
	base, diag := runWith()
	require.Empty(t, diag, "the fitted configuration: no warning")
	require.Equal(t, "physics", base.Config.Latency)

	tp2, diag := runWith("--tp", "2")
	require.Equal(t, "physics", tp2.Config.Latency)
	require.Equal(t, path, tp2.Config.Coefficients)
	require.Equal(t, 1, strings.Count(diag, "\n"), diag)
	require.True(t, strings.HasPrefix(diag, "warning: "+path+": the coefficients were not fitted on this configuration (tp 2, fitted: 1);"), diag)
	require.Contains(t, diag, "fitted: h100-tp1 (llama-3.1-8b, dense, on 1 × H100-SXM; max_num_seqs 256", "the fitted configurations are listed")
	// Two GPUs share the linear compute and the weight loading.
	require.Less(t, tp2.Metrics.ITL.Mean, 0.8*base.Metrics.ITL.Mean)

	a100, diag := runWith("--hardware", "a100-80gb")
	require.Contains(t, diag, "(hardware A100-80GB, fitted: H100-SXM)")
	require.Greater(t, a100.Metrics.ITL.Mean, 1.2*base.Metrics.ITL.Mean, "A100's lower bandwidth and FLOP/s")

	_, diag = runWith("--model", "qwen2.5-7b")
	require.Contains(t, diag, "(model qwen2.5-7b, fitted: llama-3.1-8b)")

	_, diag = runWith("--kv-blocks-cpu", "2000")
	require.Contains(t, diag, "warning: "+path+": CPU offloading is on but no fitted configuration had it")

	_, _, err := runCLI(t, "run", "--requests", "10", "--coefficients", path, "--model", "mixtral-8x7b", "--tp", "2")
	require.ErrorContains(t, err, "cannot predict the MoE model mixtral-8x7b")

	// Without flags, the run is the file's applies_to: here TP 2 with 128
	// sequences, fitted, so no warning.
	tp2File := physicsFile(t, func(f *coefficients.File) {
		f.AppliesTo.TP, f.AppliesTo.VLLM.MaxNumSeqs, f.AppliesTo.VLLM.TotalKVBlocksGPU = 2, 128, 60000
		pc := mustPhysics(t, "llama-3.1-8b", "h100-sxm", 2)
		f.FittedConfigs = []coefficients.FittedConfig{coefficients.NewFittedConfig("tp2", pc, 100, 10)}
		f.FittedConfigs[0].MaxNumSeqs = 128
	})
	out, diag, err := runCLI(t, "run", "-q", "--requests", "100", "--coefficients", tp2File)
	require.NoError(t, err)
	require.Empty(t, diag)
	res := parse(t, out)
	require.Equal(t, 2, res.Config.TP)
	require.Equal(t, int64(128), res.Config.VLLM.MaxNumSeqs)
	require.Equal(t, int64(60000), res.Config.VLLM.TotalKVBlocksGPU, "applies_to's KV blocks with its configuration")
	out, diag, err = runCLI(t, "run", "-q", "--requests", "100", "--coefficients", tp2File, "--tp", "1")
	require.NoError(t, err)
	require.Contains(t, diag, "(tp 1, fitted: 2)")
	k := physics.DefaultVLLMKnobs()
	k.MaxNumSeqs = 128
	m, _ := physics.LoadModel("llama-3.1-8b")
	h, _ := physics.LoadHardware("h100-sxm")
	derived, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	require.Equal(t, derived.Knobs.TotalKVBlocksGPU, parse(t, out).Config.VLLM.TotalKVBlocksGPU, "derived for TP 1, not applies_to's")

	// A cluster of such instances warns once.
	_, diag, err = runCLI(t, "run", "-q", "--requests", "100", "--num-instances", "3", "--coefficients", path, "--tp", "2")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(diag, "warning: "), diag)
}

func mustPhysics(t *testing.T, model, hardware string, tp int) *physics.PhysicsConfig {
	t.Helper()
	m, err := physics.LoadModel(model)
	require.NoError(t, err)
	h, err := physics.LoadHardware(hardware)
	require.NoError(t, err)
	c, err := physics.NewPhysicsConfig(m, h, tp, physics.DefaultVLLMKnobs())
	require.NoError(t, err)
	return c
}

func TestRunBadFlagsNameTheFlag(t *testing.T) {
	mixtral := physicsFile(t, func(f *coefficients.File) {
		f.AppliesTo.Model, f.AppliesTo.TP, f.AppliesTo.VLLM.TotalKVBlocksGPU = "mixtral-8x7b", 2, 0
	})
	// Within the loader's bound (1e9) but a step time of ~1e9 × the
	// per-step constant: beyond 2^40 µs on a full prefill.
	absurd := physicsFile(t, func(f *coefficients.File) { f.Beta[6] = 9e8 })
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kv-blocks-gpu", "-1"}, "--kv-blocks-gpu"},
		{[]string{"--kv-blocks-gpu", "0"}, "--kv-blocks-gpu"},
		{[]string{"--kv-blocks-gpu", "lots"}, "--kv-blocks-gpu"},
		{[]string{"--model", "llama-2-70b"}, "weights"}, // 140 GB of weights on one 80 GB GPU
		{[]string{"--kv-blocks-cpu", "-5"}, "--kv-blocks-cpu"},
		{[]string{"--rate", "-2"}, "--rate"},
		{[]string{"--rate", "0"}, "--rate"},
		{[]string{"--requests", "0"}, "--requests"},
		{[]string{"--scheduler", "lifo"}, "--scheduler"},
		{[]string{"--priority", "vip"}, "--priority"},
		{[]string{"--latency", "magic"}, "--latency"},
		{[]string{"--latency", "physics", "--max-num-seqs", "100"}, "--coefficients"},
		{[]string{"--roofline-compute-eff", "0.5"}, "--roofline-compute-eff, --roofline-bandwidth-eff, --roofline-step-overhead-us: only used by the roofline latency model (this instance uses physics)"},
		{[]string{"--coefficients", mixtral, "--model", "llama-3.1-8b"}, "--coefficients: " + mixtral + ": coefficients fitted only on MoE models cannot predict the dense model llama-3.1-8b"},
		{[]string{"--coefficients", filepath.Join(t.TempDir(), "none.yaml")}, "--coefficients"},
		{[]string{"--coefficients", "/nonexistent/c.yaml"}, "--coefficients"},
		{[]string{"--tp", "0"}, "--tp"},
		{[]string{"--model", "no-such-model"}, "--model"},
		{[]string{"--hardware", "tpu"}, "--hardware"},
		{[]string{"--max-num-seqs", "0"}, "--max-num-seqs: must be >= 1 requests, got 0"},
		{[]string{"--block-size", "0"}, "--block-size: must be within [1, 1024] tokens, got 0"},
		{[]string{"--prompt-tokens", "lognormal:mean=-1,cv=1"}, "--prompt-tokens"},
		{[]string{"--output-tokens", "banana"}, "--output-tokens"},
		{[]string{"--alpha-coeffs", "1,2", "--latency", "blackbox"}, "--alpha-coeffs"},
		{[]string{"--beta-coeffs", "1,x,3", "--latency", "blackbox"}, "--beta-coeffs"},
		// Out-of-range coefficients are refused
		// up front, not turned into 1 µs steps or an invariant failure.
		{[]string{"--beta-coeffs", "1e19,0,0", "--latency", "blackbox"}, "a one-token decode step takes more than 1099511627776 µs"},
		{[]string{"--alpha-coeffs", "1e19,0,0", "--latency", "blackbox"}, "arrival overhead"},
		{[]string{"--alpha-coeffs", "0,0,1e30", "--latency", "blackbox"}, "departure overhead"},
		{[]string{"--coefficients", absurd}, "coefficients are out of range"},
		{[]string{"--kv-events", "/tmp/x.jsonl"}, "--kv-events"},
		{[]string{"--horizon", "-1"}, "--horizon"},
		{[]string{"--latency-noise", "-0.1"}, "--latency-noise"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-step-sample-rate", "2"}, "--trace-step-sample-rate: must be within [0, 1], got 2"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-closure-interval", "0"}, "--trace-closure-interval: must be within [10, 10000] steps, got 0"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-closure-interval", "5"}, "--trace-closure-interval: must be within [10, 10000] steps, got 5"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-closure-interval", "0", "--num-instances", "2"}, "--trace-closure-interval: must be within [10, 10000] steps, got 0"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-max-events-per-span", "0"}, "--trace-max-events-per-span: must be within [1, 2147483647] events, got 0"},
		{[]string{"--otlp-trace", "/tmp/t.jsonl", "--trace-route", "/v1/x", "--num-instances", "2"}, `--trace-route: want one of /v1/completions, /v1/chat/completions, got "/v1/x"`},
		{[]string{"--priority-base", "Inf"}, "--priority-base: must be finite, got Inf"},
		{[]string{"--rate", "1e-300"}, "--rate, --requests: request 0: an arrival time is beyond the clock's range"},
		{[]string{"--rate", "1e-300", "--num-instances", "2"}, "--rate, --requests: request 0: an arrival time is beyond the clock's range"},
		{[]string{"--priority", "slo-based", "--priority-age-weight", "Inf"}, "--priority-age-weight: must be finite and >= 0 score per second, got Inf"},
		{[]string{"--priority-age-weight", "2"}, `--priority-age-weight: priority policy constant has no parameter "age_weight"; use one of base`},
		{[]string{"--kv-blocks-cpu", "100", "--kv-offload-threshold", "1.5"}, "--kv-offload-threshold"},
		{[]string{"--kv-offload-threshold", "0.5"}, "--kv-offload-threshold: has no effect without a CPU KV tier (--kv-blocks-cpu > 0)"},
		{[]string{"--gamma-cv", "3"}, "--gamma-cv: has no effect with poisson arrivals"},
		{[]string{"--prefix-groups", "0", "--prefix-fraction", "0.5"}, "--prefix-fraction: has no effect with --prefix-groups 0"},
		{[]string{"--latency", "roofline", "--roofline-compute-eff", "0"}, "--roofline"},
		{[]string{"--replay", "/nonexistent/requests.parquet"}, "--replay"},
		{[]string{"--arrival", "uniform"}, "--arrival"},
		{[]string{"--gamma-cv", "-1", "--arrival", "gamma"}, "--gamma-cv"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "--requests", "10"}, tc.args...)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, strings.TrimSpace(err.Error()), "\n", "one line")
		})
	}
}

func TestRunWritesAnIngestableTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "run.jsonl")
	kv := filepath.Join(dir, "kv.jsonl")
	out, diag, err := runCLI(t, "run", "--requests", "300", "--rate", "40", "--kv-blocks-gpu", "3000", "--kv-blocks-cpu", "20000",
		"--kv-offload-threshold", "0.5", "--otlp-trace", trace, "--kv-events", kv, "--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0")
	require.NoError(t, err)
	require.Contains(t, diag, "trace "+trace)
	res := parse(t, out)
	require.NotNil(t, res.Metrics.KVOffload)
	man, err := otlpingest.Ingest(otlpingest.FileSources([]string{trace, kv}), otlpingest.Options{OutDir: filepath.Join(dir, "tables")})
	require.NoError(t, err)
	rows := map[string]int64{}
	for _, tb := range man.Tables {
		rows[tb.Name] = tb.Rows
	}
	require.Equal(t, res.Metrics.Requests.Completed, rows[otlpingest.TableRequests])
	require.Equal(t, res.Metrics.Steps, rows[otlpingest.TableSteps], "every step sampled")
	if res.Metrics.KVOffload.StoredBlocks > 0 {
		require.Greater(t, rows[otlpingest.TableKVEvents], int64(0))
	}
	// Without rich steps a 100-step span holds 100 summaries, under the
	// SDK's 128-event limit, so nothing is lost.
	require.Zero(t, man.Issues.Total, "%+v", man.Issues.ByKind)
}

// TestRNGStreamsAreIndependent: tracing draws from its own streams, so
// turning it on changes nothing in the results; noise draws from its own,
// so the workload stays the same when it is turned on.
func TestRNGStreamsAreIndependent(t *testing.T) {
	args := []string{"run", "--requests", "300", "--rate", "20", "--latency-noise", "0.1", "--per-request"}
	plain, _, err := runCLI(t, args...)
	require.NoError(t, err)
	traced, _, err := runCLI(t, append(args, "--otlp-trace", filepath.Join(t.TempDir(), "t.jsonl"), "--trace-step-sample-rate", "0.5")...)
	require.NoError(t, err)
	require.Equal(t, plain, traced)

	quiet, _, err := runCLI(t, "run", "--requests", "300", "--rate", "20", "--per-request")
	require.NoError(t, err)
	a, b := parse(t, plain), parse(t, quiet)
	require.NotEqual(t, a.Metrics.E2E, b.Metrics.E2E, "noise changes the latencies")
	type shape struct{ arrival, prompt, output int64 }
	shapes := func(r runOutput) map[int64]shape {
		m := map[int64]shape{}
		for _, q := range r.Metrics.PerRequest {
			m[q.ID] = shape{q.ArrivalUs, q.PromptTokens, q.OutputTokens}
		}
		return m
	}
	require.Equal(t, shapes(a), shapes(b), "but not the workload")
}

// TestOutputNeverOverwritesInput: an output path that is an input or
// another output is refused before the run, naming both flags, and the
// files are left as they were (internal/atomicfile.Check).
func TestOutputNeverOverwritesInput(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "x.csv")
	const trace = "arrival_us,prompt_tokens,output_tokens\n0,100,5\n1000,100,5\n"
	require.NoError(t, os.WriteFile(csv, []byte(trace), 0o644))
	earlier := filepath.Join(dir, "t.jsonl")
	require.NoError(t, os.WriteFile(earlier, []byte("earlier trace\n"), 0o644))
	rec := filepath.Join(dir, "requests.jsonl")
	require.NoError(t, os.WriteFile(rec, must(os.ReadFile("../../testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl")), 0o644))
	require.NoError(t, os.Link(rec, filepath.Join(dir, "requests.png")))
	same := filepath.Join(dir, "sub", "..", "x.csv")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"--otlp-trace is the --replay file", []string{"run", "--replay", csv, "--otlp-trace", csv}, "--otlp-trace " + csv + " is also the input --replay " + csv},
		{"spelled another way", []string{"run", "--replay", csv, "--otlp-trace", same}, "is also the input --replay"},
		{"--kv-events is --otlp-trace", []string{"run", "--kv-blocks-cpu", "1000", "--otlp-trace", earlier, "--kv-events", earlier},
			"--kv-events " + earlier + " is also the output --otlp-trace " + earlier},
		{"cluster: --window-out is --replay", []string{"run", "--replay", csv, "--window", "1s", "--window-out", csv}, "--window-out " + csv + " is also the input --replay"},
		{"cluster: --decision-trace is --otlp-trace", []string{"run", "--num-instances", "2", "--otlp-trace", earlier, "--trace-level", "decisions", "--decision-trace", earlier},
			"--decision-trace " + earlier + " is also the output --otlp-trace"},
		{"validate: --plot is RECORDS (a hard link)", []string{"validate", rec, "--plot", filepath.Join(dir, "requests.png")}, "is also the input RECORDS " + rec},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCLI(t, c.args...)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, trace, string(must(os.ReadFile(csv))), "the input is untouched")
			require.Equal(t, "earlier trace\n", string(must(os.ReadFile(earlier))), "the earlier output is untouched")
			for _, e := range must(os.ReadDir(dir)) {
				require.NotContains(t, e.Name(), ".tmp-", "no temporary file is left behind")
			}
		})
	}
}

// TestTraceIDsDifferAcrossRuns: the trace, span and request ids of a
// simulated trace derive from the run's whole configuration, so two runs
// that differ only in --rate (or any other setting) share none, and
// ingesting both traces together keeps every span of both; the same run
// gives the same trace, byte for byte.
func TestTraceIDsDifferAcrossRuns(t *testing.T) {
	idRE := regexp.MustCompile(`"(traceId|spanId)":"([0-9a-f]+)"|"gen_ai.request.id","value":\{"stringValue":"([^"]+)"`)
	ids := func(path string) map[string]bool {
		out := map[string]bool{}
		for _, m := range idRE.FindAllStringSubmatch(string(must(os.ReadFile(path))), -1) {
			out[m[2]+m[3]] = true
		}
		return out
	}
	for _, c := range []struct {
		name string
		a, b []string
	}{
		{"single instance, --rate", []string{"--rate", "30"}, []string{"--rate", "31"}},
		{"cluster, --rate", []string{"--num-instances", "2", "--rate", "30"}, []string{"--num-instances", "2", "--rate", "31"}},
		{"single instance, --max-num-seqs", []string{"--rate", "30"}, []string{"--rate", "30", "--max-num-seqs", "64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			base := []string{"run", "-q", "--requests", "120", "--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0"}
			run := func(name string, args []string) string {
				path := filepath.Join(dir, name)
				_, _, err := runCLI(t, append(append(append([]string{}, base...), args...), "--otlp-trace", path)...)
				require.NoError(t, err)
				return path
			}
			pa, pb := run("a.jsonl", c.a), run("b.jsonl", c.b)
			require.Equal(t, must(os.ReadFile(pa)), must(os.ReadFile(run("a-again.jsonl", c.a))), "the same run, the same trace")
			ia, ib := ids(pa), ids(pb)
			require.Greater(t, len(ia), 240)
			for id := range ia {
				require.False(t, ib[id], "id %s in both runs' traces", id)
			}

			ingest := func(name string, paths ...string) map[string]int64 {
				man, err := otlpingest.Ingest(otlpingest.FileSources(paths), otlpingest.Options{OutDir: filepath.Join(dir, name)})
				require.NoError(t, err)
				require.Zero(t, man.Issues.Total, "no span dropped as a duplicate: %+v", man.Issues.ByKind)
				rows := map[string]int64{}
				for _, tb := range man.Tables {
					rows[tb.Name] = tb.Rows
				}
				return rows
			}
			alone, other, both := ingest("a", pa), ingest("b", pb), ingest("both", pa, pb)
			for _, tb := range otlpingest.TableNames {
				require.Equal(t, alone[tb]+other[tb], both[tb], "%s: both runs' rows, none merged away", tb)
			}
			require.Equal(t, int64(240), both[otlpingest.TableRequests], "every request of both runs")
			require.Positive(t, both[otlpingest.TableSteps])
		})
	}
}

// TestRunWarnsAboutDroppedRequests: requests the instance can never serve
// are named on stderr with the reason and a hint (even under -q), single
// instance and cluster, not only counted in the output.
func TestRunWarnsAboutDroppedRequests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kv-blocks-gpu", "1"}, []string{"warning: 20 of 20 requests dropped as unservable (requests.dropped_unservable): the first, request 0, needs ", " KV blocks, the cache has 1; give the instance more KV blocks"}},
		{[]string{"--enable-chunked-prefill=false", "--max-num-batched-tokens", "100"}, []string{"warning: 20 of 20 requests dropped as unservable", "exceeds the 100-token budget and chunked prefill is off; raise --max-num-batched-tokens"}},
		{[]string{"--kv-blocks-gpu", "1", "--num-instances", "2"}, []string{"warning: instance instance_0: 10 of 10 requests dropped", "warning: instance instance_1: 10 of 10 requests dropped"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, err := runCLI(t, append([]string{"run", "-q", "--requests", "20"}, tc.args...)...)
			require.NoError(t, err)
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
		})
	}
	_, errOut, err := runCLI(t, "run", "-q", "--requests", "20")
	require.NoError(t, err)
	require.NotContains(t, errOut, "dropped as unservable")
}
