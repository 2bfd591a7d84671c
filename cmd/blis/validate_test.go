package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/replay"
)

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
	Calibrated *replay.Calibration `json:"calibrated"`
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
		{[]string{"--data-parallel-size", "0"}, "--data-parallel-size: must be within [1, 4096] engines, got 0"},
		{[]string{"--enable-expert-parallel"}, "--enable-expert-parallel"},
		{[]string{"--output-delay-us", "-5"}, "--output-delay-us"},
	} {
		_, _, err := runCLI(t, append([]string{"run", "-q", "--requests", "10"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// The command wires its flags to package replay (whose tests cover the
// replay itself): a flag beats meta.json, --json and the table print the
// same run, --counters names its flag in errors, --calibrate
// --save-host-profile writes a profile that --host-profile reads.
func TestValidateCLI(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	v := validateJSON(t, path, "--hardware", "rtx-pro-6000", "--max-num-seqs", "64")
	require.Equal(t, int64(64), v.Deployment.VLLM.MaxNumSeqs)
	require.Equal(t, "engine", v.MeasuredAt)
	require.Len(t, v.Phases, 6)
	out, _, err := runCLI(t, "validate", "-q", path, "--hardware", "rtx-pro-6000")
	require.NoError(t, err)
	require.Contains(t, out, "engine counters: "+filepath.Join(filepath.Dir(path), "timeseries.csv")+", 67 ticks of 1 s measured")

	bench := filepath.Join("..", "..", "sim", "workload", "records", "testdata", "vllm_bench.json")
	bad := filepath.Join(t.TempDir(), "ts.csv")
	require.NoError(t, os.WriteFile(bad, []byte("t,prompt_throughput,gen_throughput,running\n1,1,1,1\n"), 0o644))
	_, _, err = runCLI(t, "validate", "-q", bench, "--model", "llama-3.1-8b", "--counters", bad)
	require.ErrorContains(t, err, "--counters: "+bad+":1: missing column waiting")

	profile := filepath.Join(t.TempDir(), "host.yaml")
	_, _, err = runCLI(t, "validate", path, "--hardware", "rtx-pro-6000", "--save-host-profile", profile)
	require.ErrorContains(t, err, "--save-host-profile needs --calibrate")
	a := validateJSON(t, bench, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--latency", "roofline", "--calibrate", "--save-host-profile", profile)
	require.Len(t, a.Calibrated.Flags, 4)
	h, err := deploy.LoadHostProfile(profile)
	require.NoError(t, err)
	require.Equal(t, a.Calibrated.Flags["roofline-step-overhead-us"], h.StepOverheadUs)
	require.NotNil(t, h.OutputDelayUs, "client records fit the output delay")
	_, stderr, err := runCLI(t, "validate", runsPath("RTX4090/Llama-3.1-8B"), "--host-profile", profile)
	require.NoError(t, err)
	require.Contains(t, stderr, "(host_profile "+profile)
}
