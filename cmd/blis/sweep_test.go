package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sweep's inputs: mixed-slo for 30 s behind least-loaded, over 2
// instance counts × 2 rate scales × 2 seeds.
var (
	sweepExp  = filepath.Join("..", "..", "sweep", "testdata", "exp.yaml")
	sweepGrid = filepath.Join("..", "..", "sweep", "testdata", "grid.yaml")
)

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}

// TestSweepFormsAgree: the grid file and --set lists give the same
// table, whatever the workers; the figure is drawn.
func TestSweepFormsAgree(t *testing.T) {
	dir := t.TempDir()
	out, diag, err := runCLI(t, "sweep", "--config", sweepExp, "--grid", sweepGrid, "--workers", "1")
	require.NoError(t, err)
	require.Contains(t, diag, "blis sweep: 8 runs (8 run now, 0 from earlier rows), 0 failed")
	require.Contains(t, diag, "blis sweep 8/8 runs", "plain progress lines when stderr is not a terminal")
	lines := strings.Split(out, "\n")
	require.Len(t, lines, 10)
	require.True(t, strings.HasPrefix(lines[0], "point,deployment.pools[0].replicas,workload.rate_scale,seed,status,error,stability,warmup_s,arrived,"), lines[0])
	require.True(t, strings.HasPrefix(lines[8], "3,2,1,43,ok,,"), lines[8])

	csv := filepath.Join(dir, "t.csv")
	_, _, err = runCLI(t, "sweep", "-q", "--scenario", "mixed-slo", "--routing-policy", "least-loaded", "--horizon", "30",
		"--set", "deployment.pools[0].replicas=1,2", "--set", "workload.rate_scale=0.5,1", "--seeds", "2", "--workers", "3",
		"--out", csv, "--plot", filepath.Join(dir, "t.svg"), "--plot-metric", "realtime_slo_attainment")
	require.NoError(t, err)
	got, err := os.ReadFile(csv)
	require.NoError(t, err)
	require.Equal(t, out, string(got))
	svg, err := os.ReadFile(filepath.Join(dir, "t.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "realtime_slo_attainment against deployment.pools[0].replicas")

	// --set over a grid file: a list adds an axis, one value sets a key.
	out2, _, err := runCLI(t, "sweep", "-q", "--config", sweepExp, "--grid", sweepGrid, "--seeds", "1", "--set", "run.horizon_s=20", "--set", "policies.scheduler.type=fcfs,sjf")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out2, "point,deployment.pools[0].replicas,workload.rate_scale,policies.scheduler.type,seed,"), out2)
	require.Equal(t, 9, strings.Count(out2, "\n"))
}

func TestSweepBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "workload.ratescale=1,2"}, "sweep workload.ratescale = 1: workload.ratescale: no such key; workload takes rate_scale, synthetic, spec, spec_file, scenario, replay"},
		{[]string{"--grid", sweepGrid, "--set", "workload.rate_scale=1,2"}, "--set workload.rate_scale: workload.rate_scale is swept twice"},
		{[]string{"--set", "run.seed=1,1"}, `the value "1" is given twice`},
		{[]string{"--out", "t.json"}, "--out: t.json: a table is .csv or .parquet"},
		{[]string{"--plot", "t.gif"}, "a figure is .png, .svg or .pdf"},
		{[]string{"--resume"}, "--resume reads the rows of --out: give --out"},
		{[]string{"--shard", "2/2"}, "the shard index must be from 0 to 1"},
		{[]string{"--emit", "slurm"}, `--emit "slurm": plan or k8s-indexed-job`},
		{[]string{"--emit", "k8s-indexed-job"}, "needs --shards N"},
		{[]string{"--otlp-trace", "x.jsonl"}, "unknown flag: --otlp-trace"},
		{[]string{"--rows", sweepGrid}, "its columns are not this sweep's"},
	} {
		_, _, err := runCLI(t, append([]string{"sweep", "-q", "--requests", "20"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	// Failed runs are rows; the status counts them.
	// (--workers is the sweep's, not run.workers, which an instance run refuses.)
	out, diag, err := runCLI(t, "sweep", "--requests", "20", "--set", "deployment.pools[0].vllm.max_num_seqs=0,8,-1", "--seeds", "2", "--workers", "2")
	require.Equal(t, 104, exitCode(t, err))
	require.ErrorContains(t, err, "4 of 6 runs failed")
	require.Equal(t, 4, strings.Count(out, ",error,\"sweep"))
	require.Contains(t, diag, "blis sweep: run 0 (point 0, seed 0) failed: sweep deployment.pools[0].vllm.max_num_seqs=0: must be >= 1 requests, got 0")
}

// TestSweepShardsMerge: shards from JOB_COMPLETION_INDEX, written apart
// and merged with --rows, give the local table byte for byte, in CSV and
// Parquet.
func TestSweepShardsMerge(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "-q", "--config", sweepExp, "--grid", sweepGrid}
	for _, format := range []string{"csv", "parquet"} {
		local := filepath.Join(dir, "local."+format)
		_, _, err := runCLI(t, append(args, "--out", local)...)
		require.NoError(t, err)
		merge := append([]string{}, args...)
		for i := range 3 {
			t.Setenv("JOB_COMPLETION_INDEX", string(rune('0'+i)))
			_, _, err := runCLI(t, append(args, "--shard", "JOB_COMPLETION_INDEX/3", "--out", filepath.Join(dir, "shard-{shard}."+format))...)
			require.NoError(t, err)
			merge = append(merge, "--rows", filepath.Join(dir, "shard-"+string(rune('0'+i))+"."+format))
		}
		merged := filepath.Join(dir, "merged."+format)
		_, diag, err := runCLI(t, append(merge, "--out", merged)...)
		require.NoError(t, err)
		require.Empty(t, diag, "quiet")
		a, _ := os.ReadFile(local)
		b, _ := os.ReadFile(merged)
		require.Equal(t, a, b, format)
	}
	// --emit plan: the sweep's size and columns.
	out, _, err := runCLI(t, append(args, "--emit", "plan")...)
	require.NoError(t, err)
	var plan struct {
		Points, Seeds, Runs int
		Columns             []struct{ Name, Type string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	require.Equal(t, [3]int{4, 2, 8}, [3]int{plan.Points, plan.Seeds, plan.Runs})
	require.Equal(t, "workload.rate_scale", plan.Columns[2].Name)
	require.Equal(t, "float", plan.Columns[2].Type)
}

// TestSweepEmitsTheIndexedJob: the manifest carries the arguments given
// and the input files.
func TestSweepEmitsTheIndexedJob(t *testing.T) {
	args := []string{"sweep", "--config", sweepExp, "--grid", sweepGrid, "--set", "policies.scheduler.type=sjf", "--emit", "k8s-indexed-job",
		"--shards", "4", "--image", "registry.example/blis:v1"}
	_, _, err := runCLI(t, append(args, "--out", "ignored.csv")...)
	require.ErrorContains(t, err, "--out is not read with --emit k8s-indexed-job, which prints instead of running")
	out, _, err := runCLI(t, args...)
	require.NoError(t, err)
	exp, _ := os.ReadFile(sweepExp)
	for _, s := range []string{"completionMode: Indexed", "completions: 4", "- --config\n            - config-exp.yaml", "- --grid\n            - grid-grid.yaml",
		"- --set\n            - policies.scheduler.type=sjf", "- JOB_COMPLETION_INDEX/4", "image: registry.example/blis:v1",
		"config-exp.yaml: |\n    " + strings.ReplaceAll(strings.TrimSpace(string(exp)), "\n", "\n    ")} {
		require.Contains(t, out, s)
	}
	require.NotContains(t, out, "ignored.csv")
}

// TestSIGINTThenResume: a real blis sweep interrupted mid-way exits 130
// leaving the rows it finished in --out; --resume runs the others and
// ends with the table of an uninterrupted sweep.
func TestSIGINTThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "t.parquet")
	args := []string{"sweep", "--config", sweepExp, "--set", "deployment.pools[0].replicas=1,2,3,4", "--set", "workload.rate_scale=0.5,1,1.5,2", "--set", "run.horizon_s=120",
		"--seeds", "3", "--workers", "1", "--out", out}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BLIS_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "runs") { // a tenth of the runs done
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			break
		}
	}
	var rest bytes.Buffer
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 130, ee.ExitCode(), rest.String())
	require.Contains(t, rest.String(), "run again with --resume to finish")
	_, diag, err := runCLI(t, append(args, "--resume", "--workers", "2")...)
	require.NoError(t, err)
	require.NotContains(t, diag, "(48 run now", "the finished rows were kept")
	resumed, _ := os.ReadFile(out)
	full := filepath.Join(dir, "full.parquet")
	start := time.Now()
	_, _, err = runCLI(t, append(args[:len(args)-1], full)...)
	require.NoError(t, err)
	t.Logf("the whole sweep: %v", time.Since(start))
	want, _ := os.ReadFile(full)
	require.Equal(t, want, resumed)
}

// TestCapacityFindsTheREADMEsCount: mixed-slo needs 3 instances for a
// realtime attainment of 0.98 (README); with one seed and runs of the
// scenario's length, 2 is too close to call.
func TestCapacityFindsTheREADMEsCount(t *testing.T) {
	out, diag, err := runCLI(t, "capacity", "--scenario", "mixed-slo", "--routing-policy", "least-loaded", "--search", "deployment.pools[0].replicas",
		"--min", "1", "--max", "4", "--target", "realtime_slo_attainment>=0.98", "--seeds", "1", "--precision", "0")
	require.NoError(t, err)
	var res struct {
		Answer  float64
		Bracket [2]float64
		Runs    int
		Target  string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 3.0, res.Answer)
	require.Equal(t, [2]float64{2, 3}, res.Bracket)
	require.Equal(t, 4, res.Runs)
	require.Contains(t, out, `"target": "realtime_slo_attainment>=0.98"`)
	require.Contains(t, diag, "deployment.pools[0].replicas = 1: realtime_slo_attainment 0.3009, 95 % interval 0.1429 to 0.4589 (1 seeds; indeterminate): misses")
	require.Contains(t, diag, "blis capacity: deployment.pools[0].replicas = 3 (bracket [2, 3]), 4 runs")
	require.Contains(t, diag, "blis capacity: too close to call at this precision: the target lies inside the interval at deployment.pools[0].replicas = 2")
	require.Contains(t, diag, "blis capacity: 2 fails: realtime_slo_attainment 0.9723, 95 % interval 0.9584 to 0.9862: too close to call realtime_slo_attainment>=0.98")
	require.Contains(t, out, `"run_precision": 0,`, "--precision 0: runs of the scenario's length")

	_, _, err = runCLI(t, "capacity", "-q", "--scenario", "mixed-slo", "--routing-policy", "least-loaded", "--search", "deployment.pools[0].replicas",
		"--min", "1", "--max", "2", "--target", "realtime_slo_attainment>=0.999", "--seeds", "1")
	require.Equal(t, 2, exitCode(t, err), "no value meets the target")
	out, _, err = runCLI(t, "capacity", "-q", "--requests", "200", "--search", "workload.rate_scale", "--min", "1", "--max", "8", "--target", "ttft_p99_ms<=200", "--workers", "2")
	require.NoError(t, err)
	require.Contains(t, out, `"find": "max"`)
	_, _, err = runCLI(t, "capacity", "--search", "workload.rate_scale", "--min", "1", "--max", "2", "--target", "slo>=1")
	require.ErrorContains(t, err, `--target: target "slo>=1": no metric "slo"`)
	_, _, err = runCLI(t, "capacity", "--search", "workload.rate_scale", "--min", "1", "--max", "2")
	require.ErrorContains(t, err, `required flag(s) "target" not set`)
}

// blis capacity's hostile inputs: each refused before anything runs,
// with the flag named. --precision is the runs' (it once was the
// bracket's width: NaN never stopped, -1 was silently the default);
// --resolution is the bracket's now. A --max its key cannot take is
// named as such, not after --min ran as "seed 0".
func TestCapacityRefusesBadValues(t *testing.T) {
	base := []string{"capacity", "-q", "--search", "deployment.pools[0].replicas", "--min", "1", "--max", "4", "--target", "ttft_p99_ms<=500", "--rate", "50"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--precision", "nan"}, "--precision: must be finite, got nan"},
		{[]string{"--precision", "-1"}, "--precision: must be a relative half-width in [0.0001, 1]"},
		{[]string{"--precision", "1e-15"}, "--precision: 1e-15 is finer than 0.0001"},
		{[]string{"--resolution", "nan"}, "--resolution NaN: give a bracket width >= 0"},
		{[]string{"--resolution", "-1"}, "--resolution -1: give a bracket width >= 0"},
		{[]string{"--resolution", "inf"}, "--resolution +Inf: give a bracket width >= 0"},
		{[]string{"--max", "1e9"}, "--max 1000000000: deployment.pools[0].replicas cannot take it: blis capacity --max: must be within [0, 4096] instances"},
		{[]string{"--min", "nan"}, "--min NaN: give a finite number"},
		{[]string{"--max-requests", "0"}, "--max-requests: must be within [1, 2147483647] requests, got 0"},
		{[]string{"--max-sim-time", "1ns"}, "--max-sim-time: a duration (30m, 24h; whole µs): 1ns is not a whole number of microseconds"},
		// Accepted and ignored: a negative --workers (blis sweep refuses it).
		{[]string{"--workers", "-1"}, "--workers -1: the runs at once, 0 for one per CPU"},
		// Errors that named no flag.
		{[]string{"--seeds", "0"}, "--seeds: must be within [1, 65536] seeds, got 0"},
		{[]string{"--find", "sideways"}, `--find "sideways": max or min`},
		// A float beyond ±2^63 wrapped: "--max -9223372036854775808".
		{[]string{"--max", "1e300"}, "--max 1e+300: deployment.pools[0].replicas takes whole numbers, and the search reads them exactly up to ±2^53"},
		{[]string{"--max", "9223372036854775807"}, "--max 9.223372036854776e+18: deployment.pools[0].replicas takes whole numbers"},
	} {
		_, _, err := runCLI(t, append(append([]string{}, base...), tc.args...)...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
		require.NotContains(t, err.Error(), "-9223372036854775808", "%v", tc.args)
	}
	// An unknown key is named as such, not asked a direction; a value far
	// from 1 is written with an exponent, not 300 digits.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--search", "bogus.key", "--min", "1", "--max", "2"}, "--search bogus.key: bogus: no such key"},
		{[]string{"--search", "workload.synthetic.rate", "--min", "1e-300", "--max", "1", "--requests", "5"}, "workload.synthetic.rate = 1e-300, seed 42: "},
	} {
		_, _, err := runCLI(t, append([]string{"capacity", "-q", "--target", "ttft_p99_ms<=500"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
		require.Less(t, len(err.Error()), 400, "%v", tc.args)
	}
}

// --points: one row per point, refused with --shard (a shard has only
// some of each point's seeds) and for a file that is not a table.
func TestSweepPoints(t *testing.T) {
	dir := t.TempDir()
	pts := filepath.Join(dir, "p.csv")
	_, _, err := runCLI(t, "sweep", "-q", "--requests", "100", "--set", "deployment.pools[0].replicas=1,2", "--seeds", "2", "--points", pts)
	require.NoError(t, err)
	data, err := os.ReadFile(pts)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[0], "point,deployment.pools[0].replicas,seeds,stability,"), lines[0])
	_, _, err = runCLI(t, "sweep", "-q", "--requests", "100", "--set", "deployment.pools[0].replicas=1,2", "--shard", "0/2", "--points", pts)
	require.ErrorContains(t, err, "--points: a shard has only some of each point's seeds")
	_, _, err = runCLI(t, "sweep", "-q", "--requests", "100", "--points", filepath.Join(dir, "p.txt"))
	require.ErrorContains(t, err, "--points: ")
	_, _, err = runCLI(t, "sweep", "-q", "--requests", "100", "--points", pts, "--out", pts)
	require.ErrorContains(t, err, "--points", "the table and the points are one file")
}

// A table opened and saved by a spreadsheet starts with a byte order
// mark; as --rows it was refused ("column 1 is \"\ufeffpoint\""), while
// blis's replay CSVs read one. Its rows are taken, none run again.
func TestSweepRowsWithAByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "-q", "--requests", "20", "--set", "workload.rate_scale=1,2"}
	table := filepath.Join(dir, "t.csv")
	_, _, err := runCLI(t, append(args, "--out", table)...)
	require.NoError(t, err)
	data, err := os.ReadFile(table)
	require.NoError(t, err)
	bom := filepath.Join(dir, "bom.csv")
	require.NoError(t, os.WriteFile(bom, append([]byte("\ufeff"), data...), 0o644))
	out, _, err := runCLI(t, append(args, "--rows", bom)...)
	require.NoError(t, err)
	require.Equal(t, string(data), out)
}
