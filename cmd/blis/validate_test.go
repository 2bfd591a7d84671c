package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/experiment"
)

// vllmRuns are the four measured runs of testdata/vllm-runs, with the GPU
// a user must name for the three whose meta.json records none.
var vllmRuns = []struct{ dir, hardware string }{
	{"RTX4090/Llama-3.1-8B", ""},
	{"RTXPRO6000/Llama-3.1-8B", "rtx-pro-6000"},
	{"RTXPRO6000/Qwen3-32B", "rtx-pro-6000"},
	{"RTXPRO6000/Qwen3-30B-A3B-Instruct-2507", "rtx-pro-6000"},
}

func runsPath(dir string) string {
	return filepath.Join("..", "..", "testdata", "vllm-runs", dir, "requests.jsonl")
}

type validateOut struct {
	Records struct {
		Rows, Read int64
	} `json:"records"`
	MeasuredAt string                  `json:"measured_at"`
	Meta       string                  `json:"meta"`
	Deployment experiment.InstanceEcho `json:"deployment"`
	Engines    int                     `json:"engines"`
	Compare    struct {
		Requests int `json:"requests"`
		Metrics  []struct {
			Metric   string `json:"metric"`
			Compared int    `json:"compared"`
			Measured struct {
				Mean float64 `json:"mean"`
			} `json:"measured_ms"`
			Simulated struct {
				Mean float64 `json:"mean"`
			} `json:"simulated_ms"`
			ErrMean *float64 `json:"err_mean"`
		} `json:"metrics"`
	} `json:"compare"`
	Calibrated *calibration `json:"calibrated"`
	Counters   *struct {
		Rows int64 `json:"Rows"`
		Read int64 `json:"Read"`
	} `json:"counters"`
	Phases []struct {
		Phase    string `json:"phase"`
		Unit     string `json:"unit"`
		Measured struct {
			Ticks  int      `json:"ticks"`
			Median *float64 `json:"median"`
		} `json:"measured"`
		Simulated struct {
			Ticks  int      `json:"ticks"`
			Median *float64 `json:"median"`
		} `json:"simulated"`
	} `json:"phases"`
}

func validateJSON(t *testing.T, args ...string) validateOut {
	t.Helper()
	out, _, err := runCLI(t, append([]string{"validate", "-q", "--json"}, args...)...)
	require.NoError(t, err, "%v", args)
	var v validateOut
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	return v
}

// The deployment comes from meta.json: vLLM's engine arguments, its KV
// block count, the GPU's CUDA name and its resolved async scheduling; the
// records are measured at the engine core, so there is no output delay.
func TestValidateDeploymentFromMeta(t *testing.T) {
	v := validateJSON(t, runsPath("RTX4090/Llama-3.1-8B"))
	d := v.Deployment
	require.Equal(t, "RTX-4090", d.Hardware)
	require.Equal(t, int64(2588), d.VLLM.TotalKVBlocksGPU)
	require.Equal(t, int64(256), d.VLLM.MaxNumSeqs)
	require.Equal(t, int64(2048), d.VLLM.MaxBatchedTokens)
	require.True(t, d.Async)
	require.Equal(t, int64(0), d.OutputDelay)
	require.Equal(t, 1, v.Engines)
	require.Equal(t, "engine", v.MeasuredAt)
	require.Equal(t, int64(300), v.Records.Read)
	require.Equal(t, 300, v.Compare.Requests)
	// The data's README: mean TTFT 65.5 s, ITL 32.4 ms, E2E 86.6 s.
	want := map[string]float64{"ttft": 65486, "itl": 32.45, "e2e": 86608}
	for _, m := range v.Compare.Metrics {
		require.Equal(t, 300, m.Compared, m.Metric)
		require.InDelta(t, want[m.Metric], m.Measured.Mean, want[m.Metric]*0.001, m.Metric)
	}

	// A flag beats meta.json.
	v = validateJSON(t, runsPath("RTX4090/Llama-3.1-8B"), "--max-num-seqs", "64", "--async-scheduling=false", "--output-delay-us", "700")
	require.Equal(t, int64(64), v.Deployment.VLLM.MaxNumSeqs)
	require.False(t, v.Deployment.Async)
	require.Equal(t, int64(700), v.Deployment.OutputDelay)

	// scheduler_reserve_full_isl from the resolved config (true in these
	// runs, vLLM's default), and a flag beats it.
	require.True(t, d.ReserveFull)
	meta, err := os.ReadFile(filepath.Join(filepath.Dir(runsPath("RTX4090/Llama-3.1-8B")), "meta.json"))
	require.NoError(t, err)
	off := strings.Replace(string(meta), `"scheduler_reserve_full_isl": true`, `"scheduler_reserve_full_isl": false`, 1)
	require.NotEqual(t, string(meta), off)
	offPath := filepath.Join(t.TempDir(), "meta.json")
	require.NoError(t, os.WriteFile(offPath, []byte(off), 0o644))
	require.False(t, validateJSON(t, runsPath("RTX4090/Llama-3.1-8B"), "--meta", offPath).Deployment.ReserveFull)
	require.True(t, validateJSON(t, runsPath("RTX4090/Llama-3.1-8B"), "--meta", offPath, "--scheduler-reserve-full-isl").Deployment.ReserveFull)

	// Data parallelism with expert parallelism: two engines.
	v = validateJSON(t, runsPath("RTXPRO6000/Qwen3-30B-A3B-Instruct-2507"), "--hardware", "rtx-pro-6000")
	require.Equal(t, 2, v.Engines)
	require.Equal(t, 300, v.Compare.Metrics[0].Compared)
}

func TestValidateErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	line := `{"request_id": "bench-0", "input_toks": 100, "output_toks": 10, "arrival_time": 1000.5, "queued_ts": 50.5, "scheduled_ts": 50.5, "first_token_ts": 50.6, "last_token_ts": 51.0}` + "\n"
	reqs := write("requests.jsonl", line)
	azure := write("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n")
	for _, tc := range []struct {
		name string
		meta string // "" for no meta.json
		args []string
		want string
	}{
		{"no GPU recorded", `{"schema_version": 1, "engine_kwargs": {"model": "meta-llama/Llama-3.1-8B"}}`, nil, "records no GPU: give --hardware"},
		{"unknown GPU", `{"schema_version": 1, "engine_kwargs": {"model": "meta-llama/Llama-3.1-8B"}, "hardware": {"device_name": "NVIDIA Quantum 9000"}}`, nil, `GPU "NVIDIA Quantum 9000" is not a shipped hardware spec`},
		{"wrong type", `{"schema_version": 1, "engine_kwargs": {"model": "m", "max_num_seqs": "many"}}`, nil, `field "engine_kwargs.max_num_seqs"`},
		{"bad value", `{"schema_version": 1, "engine_kwargs": {"model": "m", "tensor_parallel_size": 0}}`, nil, `"engine_kwargs.tensor_parallel_size": must be >= 1`},
		{"schema", `{"engine_kwargs": {"model": "m"}}`, nil, `"schema_version": must be 1`},
		{"no model", `{"schema_version": 1}`, nil, `"engine_kwargs.model": missing`},
		{"unknown model", `{"schema_version": 1, "engine_kwargs": {"model": "acme/NoSuchModel"}}`, []string{"--hardware", "h100-sxm"}, `model "acme/NoSuchModel" is neither a file nor a shipped model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := write("meta.json", tc.meta)
			_, _, err := runCLI(t, append([]string{"validate", reqs, "--meta", meta}, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, _, err := runCLI(t, "validate", azure, "--hardware", "h100-sxm")
	require.ErrorContains(t, err, "azure records carry no measured latencies")
	bad := write("bad.jsonl", line+`{"request_id": "bench-1", "input_toks": -3, "output_toks": 10, "arrival_time": 1001, "queued_ts": 51, "scheduled_ts": 51, "first_token_ts": 51.1, "last_token_ts": 52}`+"\n")
	_, _, err = runCLI(t, "validate", bad, "--format", "vllm-runs", "--hardware", "h100-sxm", "--model", "llama-3.1-8b", "--strict")
	require.ErrorContains(t, err, "bad.jsonl:2")
	// Without --strict the row is counted as skipped, and said so.
	out, stderr, err := runCLI(t, "validate", bad, "--format", "vllm-runs", "--hardware", "h100-sxm", "--model", "llama-3.1-8b")
	require.NoError(t, err)
	require.Contains(t, out, "1 requests (2 rows, 1 skipped)")
	require.Contains(t, stderr, "skipped 1 rows: negative (first at line 2)")
}

// The engine counters next to a vllm-runs file are compared phase by phase
// with the simulation's windows of the same tick; --counters names another
// file (for any records), and a bad one is an error naming it.
func TestValidateEngineCounters(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	v := validateJSON(t, path, "--hardware", "rtx-pro-6000")
	require.NotNil(t, v.Counters)
	require.Equal(t, int64(67), v.Counters.Read)
	require.Len(t, v.Phases, 6)
	decode := v.Phases[3] // 128+ running: the full batch of max_num_seqs 128
	require.Equal(t, "decode only, 128+ running per engine", decode.Phase)
	require.Equal(t, "ms", decode.Unit)
	require.Positive(t, decode.Measured.Ticks)
	require.Positive(t, decode.Simulated.Ticks)
	// 128 requests over generated tokens per second, measured: 27 ms.
	require.InDelta(t, 27.0, *decode.Measured.Median, 0.5)
	out, _, err := runCLI(t, "validate", "-q", path, "--hardware", "rtx-pro-6000")
	require.NoError(t, err)
	require.Contains(t, out, "engine counters: "+filepath.Join(filepath.Dir(path), "timeseries.csv")+", 67 ticks of 1 s measured")

	// Records of another format: no counters unless named.
	bench := filepath.Join("..", "..", "sim", "workload", "records", "testdata", "vllm_bench.json")
	b := validateJSON(t, bench, "--model", "llama-3.1-8b")
	require.Nil(t, b.Counters)
	require.Empty(t, b.Phases)
	c := validateJSON(t, bench, "--model", "llama-3.1-8b", "--counters", filepath.Join(filepath.Dir(path), "timeseries.csv"))
	require.Len(t, c.Phases, 6)

	dir := t.TempDir()
	bad := filepath.Join(dir, "ts.csv")
	require.NoError(t, os.WriteFile(bad, []byte("t,prompt_throughput,gen_throughput,running\n1,1,1,1\n"), 0o644))
	_, _, err = runCLI(t, "validate", "-q", bench, "--model", "llama-3.1-8b", "--counters", bad)
	require.ErrorContains(t, err, "--counters: "+bad+":1: missing column waiting")
	one := filepath.Join(dir, "one.csv")
	require.NoError(t, os.WriteFile(one, []byte("t,prompt_throughput,gen_throughput,running,waiting\n1,1,1,1,0\n"), 0o644))
	_, _, err = runCLI(t, "validate", "-q", bench, "--model", "llama-3.1-8b", "--counters", one)
	require.ErrorContains(t, err, "the tick length needs two")
	skips := filepath.Join(dir, "skips.csv")
	require.NoError(t, os.WriteFile(skips, []byte("t,prompt_throughput,gen_throughput,running,waiting\n1,1,1,1,0\n2,-1,1,1,0\n3,1,1,1,0\n"), 0o644))
	_, stderr, err := runCLI(t, "validate", bench, "--model", "llama-3.1-8b", "--counters", skips)
	require.NoError(t, err)
	require.Contains(t, stderr, skips+": skipped 1 rows: negative (first at line 3)")
	_, _, err = runCLI(t, "validate", "-q", path, "--hardware", "rtx-pro-6000", "--counters", skips, "--strict")
	require.ErrorContains(t, err, skips+":3: prompt_throughput: -1 is negative")
}

// --calibrate lowers the loss, is deterministic, and its flags reproduce
// the calibrated comparison.
func TestValidateCalibrate(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	a := validateJSON(t, path, "--hardware", "rtx-pro-6000", "--calibrate")
	b := validateJSON(t, path, "--hardware", "rtx-pro-6000", "--calibrate")
	require.NotNil(t, a.Calibrated)
	a.Calibrated.WallS, b.Calibrated.WallS = 0, 0
	require.Equal(t, a, b)
	require.Less(t, a.Calibrated.Loss, a.Calibrated.StartLoss)
	require.Equal(t, []string{"roofline-bandwidth-eff", "roofline-compute-eff", "roofline-step-overhead-us"}, sortedKeys(a.Calibrated.Flags))
	again := validateJSON(t, append([]string{path, "--hardware", "rtx-pro-6000"}, calibratedArgs(a.Calibrated, false)...)...)
	require.Equal(t, a.Compare, again.Compare)

	_, _, err := runCLI(t, "validate", path, "--hardware", "rtx-pro-6000", "--latency", "blackbox", "--calibrate")
	require.ErrorContains(t, err, "nothing to calibrate")

	// Records measured at the client keep the output delay, and calibrate
	// it too.
	bench := filepath.Join("..", "..", "sim", "workload", "records", "testdata", "vllm_bench.json")
	v := validateJSON(t, bench, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--latency", "roofline")
	require.Equal(t, "client", v.MeasuredAt)
	require.Equal(t, int64(1500), v.Deployment.OutputDelay)
	c := validateJSON(t, bench, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--latency", "roofline", "--calibrate")
	require.Len(t, c.Calibrated.Flags, 4)
	require.Equal(t, []string{"roofline-step-overhead-us", "output-delay-us"}, c.Calibrated.Pipeline, "what carries to other deployments")
	require.Equal(t, int64(c.Calibrated.Flags["output-delay-us"]), c.Deployment.OutputDelay)
	require.Less(t, c.Calibrated.Loss, c.Calibrated.StartLoss)
}

// calibratedArgs are the flags --calibrate printed; with pipelineOnly,
// those that carry to another deployment (calibration.Pipeline).
func calibratedArgs(c *calibration, pipelineOnly bool) []string {
	var a []string
	for _, k := range sortedKeys(c.Flags) {
		if pipelineOnly && !slices.Contains(c.Pipeline, k) {
			continue
		}
		a = append(a, "--"+k, fmt.Sprint(c.Flags[k]))
	}
	return a
}

// TestValidationTableInREADME recomputes the README's validation table:
// each run with the defaults, and each run predicted with what carries from
// the calibration of each of the other three (the median of the three
// predictions): the pipeline parameters, and the efficiencies too when the
// other run is of the same GPU, model and parallelism. Regenerate with go test ./cmd/blis -run
// ValidationTable -update.
func TestValidationTableInREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 calibrations and 16 replays")
	}
	const begin, end = "<!-- validation-table -->\n", "<!-- /validation-table -->\n"
	type errs [3]float64 // TTFT, ITL, E2E error of the mean
	get := func(v validateOut) errs {
		var e errs
		for i, m := range v.Compare.Metrics {
			require.NotNil(t, m.ErrMean)
			e[i] = *m.ErrMean
		}
		return e
	}
	args := func(i int, extra ...string) []string {
		a := []string{runsPath(vllmRuns[i].dir)}
		if h := vllmRuns[i].hardware; h != "" {
			a = append(a, "--hardware", h)
		}
		return append(a, extra...)
	}
	def := make([]errs, len(vllmRuns))
	cals := make([]*calibration, len(vllmRuns))
	deps := make([]string, len(vllmRuns))
	for i := range vllmRuns {
		v := validateJSON(t, args(i)...)
		def[i] = get(v)
		deps[i] = fmt.Sprintf("%s on %d × %s, TP %d", v.Deployment.Model, v.Engines, v.Deployment.Hardware, v.Deployment.TP)
		cals[i] = validateJSON(t, args(i, "--calibrate")...).Calibrated
		require.Contains(t, cals[i].Pipeline, "roofline-step-overhead-us")
		require.NotContains(t, cals[i].Pipeline, "roofline-compute-eff")
	}
	held := make([]errs, len(vllmRuns))
	for i := range vllmRuns {
		var per [3][]float64
		for j := range vllmRuns {
			if j == i {
				continue
			}
			e := get(validateJSON(t, args(i, calibratedArgs(cals[j], deps[i] != deps[j])...)...))
			for k := range e {
				per[k] = append(per[k], e[k])
			}
		}
		for k := range per {
			slices.Sort(per[k])
			held[i][k] = per[k][1]
		}
	}
	pct := func(x float64) string { return fmt.Sprintf("%+.1f %%", 100*x) }
	median := func(rows []errs, k int) string {
		var a []float64
		for _, r := range rows {
			a = append(a, math.Abs(r[k]))
		}
		slices.Sort(a)
		return fmt.Sprintf("%.1f %%", 100*(a[1]+a[2])/2)
	}
	var b strings.Builder
	b.WriteString("| run | TTFT | ITL | E2E | TTFT, calibrated elsewhere | ITL | E2E | calibrated on it: compute, bandwidth efficiency, step overhead |\n|---|---|---|---|---|---|---|---|\n")
	for i, r := range vllmRuns {
		f := cals[i].Flags
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.3g, %.3g, %.0f µs |\n", r.dir, pct(def[i][0]), pct(def[i][1]), pct(def[i][2]),
			pct(held[i][0]), pct(held[i][1]), pct(held[i][2]), f["roofline-compute-eff"], f["roofline-bandwidth-eff"], f["roofline-step-overhead-us"])
	}
	fmt.Fprintf(&b, "| median \\|error\\| | %s | %s | %s | %s | %s | %s | |\n", median(def, 0), median(def, 1), median(def, 2),
		median(held, 0), median(held, 1), median(held, 2))

	readme := filepath.Join("..", "..", "README.md")
	data, err := os.ReadFile(readme)
	require.NoError(t, err)
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	require.True(t, i >= 0 && j > i, "README.md has no %q ... %q section", begin, end)
	got := s[:i+len(begin)] + b.String() + s[j:]
	if *update {
		require.NoError(t, os.WriteFile(readme, []byte(got), 0o644))
		return
	}
	require.Equal(t, s, got, "README.md's validation table is stale: go test ./cmd/blis -run ValidationTable -update")
}

// --data-parallel-size N is one vLLM server of N engines behind vLLM's own
// balancer; with --enable-expert-parallel its MoE experts are sharded.
func TestDataParallelRun(t *testing.T) {
	out, _, err := runCLI(t, "run", "-q", "--model", "qwen3-30b-a3b-instruct-2507", "--hardware", "rtx-pro-6000",
		"--data-parallel-size", "2", "--enable-expert-parallel", "--requests", "200", "--rate", "20")
	require.NoError(t, err)
	r := parseCluster(t, out)
	require.Len(t, r.Metrics.Instances, 2)
	require.Equal(t, int64(200), r.Metrics.Requests.Completed)
	for _, in := range r.Metrics.Instances {
		require.Greater(t, in.Routed, int64(60), "the balancer spreads the load")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-parallel-size", "2", "--num-instances", "2"}, "--data-parallel-size cannot be combined with --num-instances"},
		{[]string{"--data-parallel-size", "0"}, "--data-parallel-size must be >= 1"},
		{[]string{"--enable-expert-parallel"}, "--enable-expert-parallel"},
		{[]string{"--output-delay-us", "-5"}, "--output-delay-us"},
	} {
		_, _, err := runCLI(t, append([]string{"run", "-q", "--requests", "10"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// A host profile carries what --calibrate finds on one run to another
// run of the same host: the per-step cost (and, from client records, the
// output delay), which stderr then names.
func TestValidateHostProfile(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "host.yaml")
	_, _, err := runCLI(t, "validate", runsPath("RTXPRO6000/Llama-3.1-8B"), "--hardware", "rtx-pro-6000", "--save-host-profile", profile)
	require.ErrorContains(t, err, "--save-host-profile needs --calibrate")
	a := validateJSON(t, runsPath("RTXPRO6000/Llama-3.1-8B"), "--hardware", "rtx-pro-6000", "--calibrate", "--save-host-profile", profile)
	h, err := deploy.LoadHostProfile(profile)
	require.NoError(t, err)
	require.Equal(t, a.Calibrated.Flags["roofline-step-overhead-us"], h.StepOverheadUs)
	require.Nil(t, h.OutputDelayUs, "engine-side records fit no output delay")
	require.Equal(t, deploy.HostRun{Records: runsPath("RTXPRO6000/Llama-3.1-8B"), Model: "meta-llama/Llama-3.1-8B", Hardware: "rtx-pro-6000",
		VLLMVersion: "0.19.0", AsyncScheduling: true}, h.CalibratedOn)

	other := runsPath("RTX4090/Llama-3.1-8B")
	_, stderr, err := runCLI(t, "validate", other, "--host-profile", profile)
	require.NoError(t, err)
	require.Contains(t, stderr, fmt.Sprintf("roofline per-step cost %g µs + 4 µs per running request, for vLLM 0.19.0 with async scheduling and CUDA graphs (host_profile %s", h.StepOverheadUs, profile))
	carried := validateJSON(t, other, "--host-profile", profile)
	given := validateJSON(t, other, "--roofline-step-overhead-us", fmt.Sprint(h.StepOverheadUs))
	require.Equal(t, given.Compare, carried.Compare, "the profile is the flag")
	_, stderr, err = runCLI(t, "validate", other, "--host-profile", profile, "--enforce-eager")
	require.NoError(t, err)
	require.Contains(t, stderr, "was calibrated with enforce_eager false and this pool has true")
}
