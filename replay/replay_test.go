package replay

import (
	"bytes"
	"context"
	"flag"
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
	"github.com/blis-sim/blis/internal/docs"
)

var update = flag.Bool("update", false, "rewrite the validation table of docs/guides/validating.md (go test ./replay -run ValidationTable -update)")

// vllmRuns are the four measured runs of testdata/vllm-runs, with the GPU
// a user must name for the three whose meta.json records none.
var vllmRuns = []struct{ dir, hardware string }{
	{"RTX4090/Llama-3.1-8B", ""},
	{"RTXPRO6000/Llama-3.1-8B", "rtx-pro-6000"},
	{"RTXPRO6000/Qwen3-32B", "rtx-pro-6000"},
	{"RTXPRO6000/Qwen3-30B-A3B-Instruct-2507", "rtx-pro-6000"},
}

func runsPath(dir string) string {
	return filepath.Join("..", "testdata", "vllm-runs", dir, "requests.jsonl")
}

var benchPath = filepath.Join("..", "sim", "workload", "records", "testdata", "vllm_bench.json")

// replayOf reads path and replays it with flags (name, value pairs, as
// blis validate's flags), as blis validate does.
func replayOf(t *testing.T, path string, ro ReadOptions, o Options, flags ...string) *Report {
	t.Helper()
	r, err := tryReplay(path, ro, o, flags...)
	require.NoError(t, err, "%s %v", path, flags)
	return r
}

func tryReplay(path string, ro ReadOptions, o Options, flags ...string) (*Report, error) {
	m, err := ReadRecords(path, ro)
	if err != nil {
		return nil, err
	}
	var given []experiment.FlagValue
	for i := 0; i+1 < len(flags); i += 2 {
		given = append(given, experiment.FlagValue{Name: strings.TrimPrefix(flags[i], "--"), Value: flags[i+1]})
	}
	d, err := experiment.Inputs{Flags: given}.Draft()
	if err != nil {
		return nil, err
	}
	return Run(context.Background(), m, d, o)
}

// The deployment comes from meta.json: vLLM's engine arguments, its KV
// block count, the GPU's CUDA name and its resolved async scheduling; the
// records are measured at the engine core, so there is no output delay.
func TestDeploymentFromMeta(t *testing.T) {
	v := replayOf(t, runsPath("RTX4090/Llama-3.1-8B"), ReadOptions{}, Options{})
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
	v = replayOf(t, runsPath("RTX4090/Llama-3.1-8B"), ReadOptions{}, Options{}, "max-num-seqs", "64", "async-scheduling", "false", "output-delay-us", "700")
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
	require.False(t, replayOf(t, runsPath("RTX4090/Llama-3.1-8B"), ReadOptions{Meta: offPath}, Options{}).Deployment.ReserveFull)
	require.True(t, replayOf(t, runsPath("RTX4090/Llama-3.1-8B"), ReadOptions{Meta: offPath}, Options{}, "scheduler-reserve-full-isl", "true").Deployment.ReserveFull)

	// Data parallelism with expert parallelism: two engines.
	v = replayOf(t, runsPath("RTXPRO6000/Qwen3-30B-A3B-Instruct-2507"), ReadOptions{}, Options{}, "hardware", "rtx-pro-6000")
	require.Equal(t, 2, v.Engines)
	require.Equal(t, 300, v.Compare.Metrics[0].Compared)
	require.NotNil(t, v.Lockstep, "a MoE model's data-parallel engines step in lockstep")
}

// The engine counters next to a vllm-runs file are compared phase by phase
// with the simulation's windows of the same tick; ReadOptions.Counters
// names another file (for any records), and a bad one is an error naming
// it.
func TestEngineCounters(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	v := replayOf(t, path, ReadOptions{}, Options{}, "hardware", "rtx-pro-6000")
	require.NotNil(t, v.Counters)
	require.Equal(t, int64(67), v.Counters.Read)
	require.Len(t, v.Phases, 6)
	decode := v.Phases[3] // 128+ running: the full batch of max_num_seqs 128
	require.Equal(t, "decode only, 128+ running per engine", decode.Name)
	require.Positive(t, decode.Measured.Ticks)
	require.Positive(t, decode.Simulated.Ticks)
	// 128 requests over generated tokens per second, measured: 27 ms.
	require.InDelta(t, 27.0, decode.Measured.Median, 0.5)
	var text bytes.Buffer
	require.NoError(t, v.WriteText(&text))
	require.Contains(t, text.String(), "engine counters: "+filepath.Join(filepath.Dir(path), "timeseries.csv")+", 67 ticks of 1 s measured")

	// Records of another format: no counters unless named.
	b := replayOf(t, benchPath, ReadOptions{}, Options{}, "model", "llama-3.1-8b")
	require.Nil(t, b.Counters)
	require.Empty(t, b.Phases)
	c := replayOf(t, benchPath, ReadOptions{Counters: filepath.Join(filepath.Dir(path), "timeseries.csv")}, Options{}, "model", "llama-3.1-8b")
	require.Len(t, c.Phases, 6)

	dir := t.TempDir()
	bad := filepath.Join(dir, "ts.csv")
	require.NoError(t, os.WriteFile(bad, []byte("t,prompt_throughput,gen_throughput,running\n1,1,1,1\n"), 0o644))
	_, err := ReadRecords(benchPath, ReadOptions{Counters: bad})
	require.ErrorContains(t, err, "--counters: "+bad+":1: missing column waiting")
	one := filepath.Join(dir, "one.csv")
	require.NoError(t, os.WriteFile(one, []byte("t,prompt_throughput,gen_throughput,running,waiting\n1,1,1,1,0\n"), 0o644))
	_, err = ReadRecords(benchPath, ReadOptions{Counters: one})
	require.ErrorContains(t, err, "the tick length needs two")
	skips := filepath.Join(dir, "skips.csv")
	require.NoError(t, os.WriteFile(skips, []byte("t,prompt_throughput,gen_throughput,running,waiting\n1,1,1,1,0\n2,-1,1,1,0\n3,1,1,1,0\n"), 0o644))
	m, err := ReadRecords(benchPath, ReadOptions{Counters: skips})
	require.NoError(t, err)
	require.Contains(t, m.Skips(), skips+": skipped 1 rows: negative (first at line 3)")
	_, err = ReadRecords(path, ReadOptions{Counters: skips, Strict: true})
	require.ErrorContains(t, err, skips+":3: prompt_throughput: -1 is negative")
}

// Calibrate lowers the loss, is deterministic, and its flags reproduce
// the calibrated comparison.
func TestCalibrate(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	a := replayOf(t, path, ReadOptions{}, Options{Calibrate: true}, "hardware", "rtx-pro-6000")
	b := replayOf(t, path, ReadOptions{}, Options{Calibrate: true}, "hardware", "rtx-pro-6000")
	require.NotNil(t, a.Calibrated)
	a.Calibrated.WallS, b.Calibrated.WallS = 0, 0
	require.Equal(t, a.Calibrated, b.Calibrated)
	require.Equal(t, a.Compare, b.Compare)
	require.Less(t, a.Calibrated.Loss, a.Calibrated.StartLoss)
	require.Equal(t, []string{"roofline-bandwidth-eff", "roofline-compute-eff", "roofline-step-overhead-us"}, sortedKeys(a.Calibrated.Flags))
	again := replayOf(t, path, ReadOptions{}, Options{}, append([]string{"hardware", "rtx-pro-6000"}, calibratedArgs(a.Calibrated, false)...)...)
	require.Equal(t, a.Compare, again.Compare)

	_, err := tryReplay(path, ReadOptions{}, Options{Calibrate: true}, "hardware", "rtx-pro-6000", "latency", "blackbox")
	require.ErrorContains(t, err, "nothing to calibrate")

	// Records measured at the client keep the output delay, and calibrate
	// it too.
	v := replayOf(t, benchPath, ReadOptions{}, Options{}, "model", "llama-3.1-8b", "hardware", "h100-sxm", "latency", "roofline")
	require.Equal(t, "client", v.MeasuredAt)
	require.Equal(t, int64(1500), v.Deployment.OutputDelay)
	c := replayOf(t, benchPath, ReadOptions{}, Options{Calibrate: true}, "model", "llama-3.1-8b", "hardware", "h100-sxm", "latency", "roofline")
	require.Len(t, c.Calibrated.Flags, 4)
	require.Equal(t, []string{"roofline-step-overhead-us", "output-delay-us"}, c.Calibrated.Pipeline, "what carries to other deployments")
	require.Equal(t, int64(c.Calibrated.Flags["output-delay-us"]), c.Deployment.OutputDelay)
	require.Less(t, c.Calibrated.Loss, c.Calibrated.StartLoss)
}

// calibratedArgs are the flags Calibrate found, as name, value pairs; with
// pipelineOnly, those that carry to another deployment.
func calibratedArgs(c *Calibration, pipelineOnly bool) []string {
	var a []string
	for _, k := range sortedKeys(c.Flags) {
		if pipelineOnly && !slices.Contains(c.Pipeline, k) {
			continue
		}
		a = append(a, k, fmt.Sprint(c.Flags[k]))
	}
	return a
}

// A host profile carries what the calibration finds on one run to another
// run of the same host: the per-step cost (and, from client records, the
// output delay).
func TestHostProfile(t *testing.T) {
	path := runsPath("RTXPRO6000/Llama-3.1-8B")
	plain := replayOf(t, path, ReadOptions{}, Options{}, "hardware", "rtx-pro-6000")
	_, err := plain.HostProfile()
	require.ErrorContains(t, err, "--save-host-profile needs --calibrate")
	a := replayOf(t, path, ReadOptions{}, Options{Calibrate: true}, "hardware", "rtx-pro-6000")
	data, err := a.HostProfile()
	require.NoError(t, err)
	profile := filepath.Join(t.TempDir(), "host.yaml")
	require.NoError(t, os.WriteFile(profile, data, 0o644))
	h, err := deploy.LoadHostProfile(profile)
	require.NoError(t, err)
	require.Equal(t, a.Calibrated.Flags["roofline-step-overhead-us"], h.StepOverheadUs)
	require.Nil(t, h.OutputDelayUs, "engine-side records fit no output delay")
	require.Equal(t, deploy.HostRun{Records: path, Model: "meta-llama/Llama-3.1-8B", Hardware: "rtx-pro-6000",
		VLLMVersion: "0.19.0", AsyncScheduling: true, RooflineKernels: true}, h.CalibratedOn)

	other := runsPath("RTX4090/Llama-3.1-8B")
	carried := replayOf(t, other, ReadOptions{}, Options{}, "host-profile", profile)
	require.Contains(t, strings.Join(carried.Notes, "\n"), fmt.Sprintf("roofline per-step cost %g µs + 0 µs per running request, for vLLM 0.19.0 with async scheduling and CUDA graphs (host_profile %s", h.StepOverheadUs, profile))
	given := replayOf(t, other, ReadOptions{}, Options{}, "roofline-step-overhead-us", fmt.Sprint(h.StepOverheadUs))
	require.Equal(t, given.Compare, carried.Compare, "the profile is the flag")
	eager := replayOf(t, other, ReadOptions{}, Options{}, "host-profile", profile, "enforce-eager", "true")
	require.Contains(t, strings.Join(eager.Warnings, "\n"), "was calibrated with enforce_eager false and this pool has true")
}

// TestValidationTableInDocs recomputes the validation table of
// docs/guides/validating.md:
// each run with the defaults, and each run predicted with what carries from
// the calibration of each of the other three (the median of the three
// predictions): the pipeline parameters, and the efficiencies too when the
// other run is of the same GPU, model and parallelism. Regenerate with go
// test ./replay -run ValidationTable -update.
func TestValidationTableInDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 calibrations and 16 replays")
	}
	type errs [3]float64 // TTFT, ITL, E2E error of the mean
	get := func(v *Report) errs {
		var e errs
		for i, m := range v.Compare.Metrics {
			require.False(t, math.IsNaN(m.ErrMean))
			e[i] = m.ErrMean
		}
		return e
	}
	run := func(i int, o Options, extra ...string) *Report {
		var flags []string
		if h := vllmRuns[i].hardware; h != "" {
			flags = append(flags, "hardware", h)
		}
		return replayOf(t, runsPath(vllmRuns[i].dir), ReadOptions{}, o, append(flags, extra...)...)
	}
	def := make([]errs, len(vllmRuns))
	cals := make([]*Calibration, len(vllmRuns))
	deps := make([]string, len(vllmRuns))
	for i := range vllmRuns {
		v := run(i, Options{})
		def[i] = get(v)
		deps[i] = fmt.Sprintf("%s on %d × %s, TP %d", v.Deployment.Model, v.Engines, v.Deployment.Hardware, v.Deployment.TP)
		cals[i] = run(i, Options{Calibrate: true}).Calibrated
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
			e := get(run(i, Options{}, calibratedArgs(cals[j], deps[i] != deps[j])...))
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

	docs.CheckBlock(t, filepath.Join("..", ""), *update, "go test ./replay -run ValidationTable -update", "validation-table", b.String(), "docs/guides/validating.md")
}
