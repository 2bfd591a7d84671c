package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/summary"
)

type clusterOutput struct {
	Config  experiment.ClusterConfig `json:"config"`
	Metrics cluster.Result           `json:"metrics"`
	Fitness *cluster.FitnessResult   `json:"fitness"`
}

func parseCluster(t *testing.T, out string) clusterOutput {
	t.Helper()
	var r clusterOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return r
}

// TestClusterRunFromREADME runs the README's cluster example (smaller).
func TestClusterRunFromREADME(t *testing.T) {
	out, diag, err := runCLI(t, "run", "--num-instances", "4", "--routing-policy", "weighted", "--requests", "400", "--rate", "30",
		"--fitness-weights", "throughput:1,p99_ttft:1")
	require.NoError(t, err)
	require.Contains(t, diag, "4 instances, 400 of 400 requests arrived (400 completed")
	r := parseCluster(t, out)
	require.Equal(t, 4, r.Config.Instances)
	require.Equal(t, "weighted", r.Config.Routing.Policy)
	require.Equal(t, "prefix-affinity:3,queue-depth:2,kv-utilization:2", r.Config.Routing.Scorers)
	require.Equal(t, "physics", r.Config.Pools[0].Latency)
	require.Equal(t, int64(400), r.Metrics.Requests.Completed)
	require.Len(t, r.Metrics.Instances, 4)
	var routed int64
	for _, in := range r.Metrics.Instances {
		require.Greater(t, in.Routed, int64(50), "the load is spread")
		routed += in.Routed
	}
	require.Equal(t, int64(400), routed)
	require.NotNil(t, r.Fitness)
	require.Greater(t, r.Fitness.Score, 0.0)
	require.Len(t, r.Fitness.Components, 2)
}

// TestClusterOutputIsDeterministic: the same flags and seed give
// byte-identical output over 100 runs, whatever GOMAXPROCS is.
func TestClusterOutputIsDeterministic(t *testing.T) {
	args := []string{"run", "--num-instances", "3", "--routing-policy", "weighted", "--requests", "150", "--rate", "40",
		"--snapshot-refresh-interval", "5000", "--latency-noise", "0.05", "--per-request", "-q"}
	sums := map[[32]byte]int{}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for i := 0; i < 100; i++ {
		runtime.GOMAXPROCS(1 + i%2)
		out, _, err := runCLI(t, args...)
		require.NoError(t, err)
		sums[sha256.Sum256([]byte(out))]++
	}
	require.Len(t, sums, 1, "100 runs, one output")
}

func TestClusterFlagsOverrideTheDeploymentFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`pools:
  - name: a
    replicas: 2
    vllm:
      max_num_seqs: 128
  - name: b
    hardware: a100-80gb
routing:
  policy: least-loaded
admission:
  policy: token-bucket
  token_bucket_capacity: 5000
  token_bucket_refill_rate: 1000
`), 0o644))
	out, _, err := runCLI(t, "run", "--deployment", path, "--requests", "200", "--rate", "20", "--max-num-seqs", "64", "--routing-policy", "round-robin")
	require.NoError(t, err)
	r := parseCluster(t, out)
	require.Equal(t, 3, r.Config.Instances)
	require.Equal(t, "round-robin", r.Config.Routing.Policy, "an explicit flag beats the file")
	require.Equal(t, "token-bucket", r.Config.Admission.Policy, "the file beats the default")
	require.Equal(t, int64(64), r.Config.Pools[0].VLLM.MaxNumSeqs)
	require.Equal(t, int64(64), r.Config.Pools[1].VLLM.MaxNumSeqs)
	require.Equal(t, "A100-80GB", r.Config.Pools[1].Hardware)
	require.Greater(t, r.Metrics.Requests.Rejected, int64(0), "a 5,000-token bucket at 1,000/s rejects some of 20 req/s")
	q := r.Metrics.Requests
	require.Equal(t, q.Arrived, q.Rejected+q.Completed+q.DroppedUnservable)
}

func TestClusterBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("pools:\n  - replicas: 2\n    vllm:\n      max_num_seqs: 0\n"), 0o644))
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("pools:\n  - replicas: 2\n    gpus: 8\n"), 0o644))
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("pools:\n  - replicas: 2\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--routing-policy", "random"}, "--routing-policy: routing policy \"random\" is not a template; use one of round-robin, least-loaded, weighted, prefix-affinity, vllm-dp, always-busiest"},
		{[]string{"--admission-policy", "maybe"}, "use one of always-admit, token-bucket, rate-limit, tenant-quota, reject-all"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "prefix-affinity:-1"}, "--routing-scorers: prefix-affinity: must be >= 0 weight, got -1"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "prefix-affinity:0,queue-depth:0"}, "--routing-scorers: the weights are all 0; at least one must be > 0"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "cache:1"}, "--routing-scorers: cache: \"cache\" is not one of prefix-affinity, queue-depth, kv-utilization, load-balance"},
		{[]string{"--num-instances", "0"}, "--num-instances: must be in [1, 4096], got 0"},
		{[]string{"--snapshot-refresh-interval", "-1"}, "--snapshot-refresh-interval: must be within [0, 1099511627776] µs"},
		{[]string{"--admission-policy", "token-bucket", "--token-bucket-capacity", "0"}, "--token-bucket-capacity: must be > 0"},
		{[]string{"--admission-policy", "token-bucket", "--token-bucket-refill-rate", "-3"}, "--token-bucket-refill-rate: must be >= 0"},
		{[]string{"--admission-latency", "-5"}, "--admission-latency: must be within [0, 1099511627776] µs, got -5"},
		{[]string{"--routing-latency", "-5"}, "--routing-latency: must be within [0, 1099511627776] µs, got -5"},
		{[]string{"--routing-policy", "weighted", "--prefix-index-capacity", "-1"}, "--prefix-index-capacity: must be within [0, 1073741824] blocks, got -1"},
		{[]string{"--prefix-index-capacity", "100"}, "--prefix-index-capacity: routing policy round-robin takes no parameters"},
		{[]string{"--token-bucket-capacity", "100"}, "--token-bucket-capacity: admission policy always-admit takes no parameters"},
		{[]string{"--admission-policy", "rate-limit", "--token-bucket-capacity", "100"}, `--token-bucket-capacity: admission policy rate-limit has no parameter "capacity"; use one of rate, burst, per_tenant`},
		{[]string{"--trace-level", "decisions"}, "--trace-level: decisions needs --decision-trace FILE"},
		{[]string{"--trace-level", "everything"}, "--trace-level: want one of none, decisions, detailed, got \"everything\""},
		{[]string{"--decision-trace", "/tmp/d.jsonl"}, "--decision-trace: needs --trace-level decisions"},
		{[]string{"--counterfactual-k", "-1"}, "--counterfactual-k: must be within [0, 1024] candidates, got -1"},
		{[]string{"--trace-level", "detailed"}, "--trace-level: detailed needs --decision-trace FILE"},
		{[]string{"--counterfactual-sample", "2"}, `--counterfactual-sample: "2" is neither a rate in (0, 1] nor every:N (every N-th decision)`},
		{[]string{"--counterfactual-sample", "every:0"}, `--counterfactual-sample: "every:0": every:N needs a whole number N >= 1 of decisions`},
		{[]string{"--counterfactual-sample", "0.5", "--counterfactual-k", "0"}, "--counterfactual-k: must be >= 1 with --counterfactual-sample"},
		{[]string{"--summarize-trace", filepath.Join(dir, "s.md"), "--summary-max-tokens", "50"}, "--summary-max-tokens: must be within [100, 100000] tokens, got 50"},
		{[]string{"--summary-max-tokens", "500"}, "--summary-max-tokens: has no effect without --summarize-trace FILE"},
		{[]string{"--num-instances", "2", "--workers", "-1"}, "--workers: must be within [0, 65536] goroutines, got -1"},
		{[]string{"--workers", "2"}, "--workers: is for cluster runs"},
		{[]string{"--fitness-weights", "speed:1"}, "--fitness-weights: fitness key \"speed\" is not a metric"},
		{[]string{"--fitness-weights", "throughput:0"}, "are all 0"},
		{[]string{"--num-instances", "2", "--max-num-seqs", "0"}, "--max-num-seqs: must be >= 1 requests, got 0"},
		{[]string{"--deployment", bad}, "bad.yaml:4: pools[0].vllm.max_num_seqs: must be >= 1 requests, got 0"},
		{[]string{"--deployment", unknown}, "unknown.yaml:3: unknown key \"gpus\" in a pool; use one of name, replicas"},
		{[]string{"--deployment", good, "--num-instances", "3"}, "--num-instances cannot be combined with --deployment"},
		{[]string{"--deployment", filepath.Join(dir, "missing.yaml")}, "--deployment: open"},
		{[]string{"--window", "10", "--window-out", "w.csv"}, `--window: "10" is not a duration; give a number and a unit, such as 10s, 500ms or 1m`},
		{[]string{"--window", "ten seconds", "--window-out", "w.csv"}, `--window: "ten seconds" is not a duration`},
		{[]string{"--window", "0s", "--window-out", "w.csv"}, "--window: must be > 0, got 0s"},
		{[]string{"--window", "9999999h", "--window-out", "w.csv"}, "--window: 9999999h is beyond the clock's 2305843009213693952 µs"},
		{[]string{"--window", "-5s", "--window-out", "w.csv"}, "--window: must be > 0, got -5s"},
		{[]string{"--window", "1500ns", "--window-out", "w.csv"}, "--window: 1500ns is not a whole number of microseconds"},
		{[]string{"--window", "1s"}, "--window: needs --window-out FILE (.csv or .jsonl) or --window-plot FILE (.png, .svg or .pdf)"},
		{[]string{"--window-out", "w.csv"}, "--window-out: needs --window D"},
		{[]string{"--window-plot", "w.png"}, "--window-plot: needs --window D"},
		{[]string{"--window", "1s", "--window-out", "w.txt"}, "--window-out: w.txt: the extension must be .csv or .jsonl"},
		{[]string{"--window", "1s", "--window-out", "windows"}, "--window-out: windows: the extension must be .csv or .jsonl"},
		{[]string{"--window", "1s", "--window-plot", "w.eps"}, "--window-plot: w.eps: the extension must be .png, .svg or .pdf"},
		{[]string{"--window", "1s", "--window-out", "w.csv", "--window-plot", "w.jpg"}, "--window-plot: w.jpg: the extension must be .png, .svg or .pdf"},
		{[]string{"--window", "1s", "--window-out", filepath.Join(dir, "no", "such", "w.csv")}, "--window-out " + filepath.Join(dir, "no", "such", "w.csv") + ": the folder " + filepath.Join(dir, "no", "such") + " does not exist"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "--requests", "10"}, tc.args...)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, strings.TrimSpace(err.Error()), "\n", "one line")
		})
	}
}

// TestClusterDecisionTraceAndAtomicOutputs: --trace-level decisions writes
// one line per decision; a run that fails leaves existing output files as
// they were.
func TestClusterDecisionTraceAndAtomicOutputs(t *testing.T) {
	dir := t.TempDir()
	dec := filepath.Join(dir, "decisions.jsonl")
	out, _, err := runCLI(t, "run", "--num-instances", "2", "--routing-policy", "least-loaded", "--requests", "50",
		"--trace-level", "decisions", "--decision-trace", dec, "--counterfactual-k", "2")
	require.NoError(t, err)
	r := parseCluster(t, out)
	data, err := os.ReadFile(dec)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, int(r.Metrics.Requests.Arrived+r.Metrics.Requests.Routed), "one admission and one routing line per request")
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &first))
	require.Equal(t, "routing", first["type"])
	require.Len(t, first["candidates"], 2)

	// A failing run (an unusable coefficient file, found after the outputs
	// are opened would be too late; here the workload fails) keeps the file.
	_, _, err = runCLI(t, "run", "--num-instances", "2", "--requests", "50", "--trace-level", "decisions", "--decision-trace", dec,
		"--prompt-tokens", "banana")
	require.Error(t, err)
	again, err := os.ReadFile(dec)
	require.NoError(t, err)
	require.Equal(t, data, again, "the earlier trace is untouched")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

// TestClusterTraceIngests: --otlp-trace of a cluster names every span's
// instance, and calibrate's ingest reads it back with each instance's
// steps complete and separate.
func TestClusterTraceIngests(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "cluster.jsonl")
	out, _, err := runCLI(t, "run", "--num-instances", "3", "--routing-policy", "least-loaded", "--requests", "150", "--rate", "30",
		"--otlp-trace", trace, "--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0")
	require.NoError(t, err)
	r := parseCluster(t, out)
	man, err := otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: filepath.Join(dir, "tables")})
	require.NoError(t, err)
	rows := map[string]int64{}
	for _, tb := range man.Tables {
		rows[tb.Name] = tb.Rows
	}
	var steps int64
	for _, in := range r.Metrics.Instances {
		steps += in.Metrics.Steps
	}
	require.Equal(t, r.Metrics.Requests.Completed, rows[otlpingest.TableRequests])
	require.Equal(t, steps, rows[otlpingest.TableSteps], "every instance's every step, none merged away")
	require.Zero(t, man.Issues.Total, "%+v", man.Issues.ByKind)
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	for _, id := range []string{"instance_0", "instance_1", "instance_2"} {
		require.Contains(t, string(data), `"service.instance.id","value":{"stringValue":"`+id+`"}`)
	}
}

// The experiment's vocabulary (its flag-to-key table) names only flags
// that blis run defines, with the defaults the flags show, so an error
// named in flag terms names a real flag.
func TestExperimentFlagsExist(t *testing.T) {
	cmd := newRunCmd()
	require.NotEmpty(t, experiment.Flags)
	for _, f := range experiment.Flags {
		fl := cmd.Flags().Lookup(f.Name)
		require.NotNil(t, fl, "experiment.Flags has --%s, which blis run does not define", f.Name)
		require.Equal(t, f.Default, strings.TrimSuffix(fl.DefValue, ".0"), "--%s", f.Name)
	}
}

// TestClusterWindows: --window writes consecutive windows to --window-out
// (CSV or JSON lines) and --window-plot (PNG, SVG or PDF); the rows add up to
// the run's counts; the run's JSON is the same as without windows but for
// the echoed window; the files are byte-identical for any --workers; a
// single-instance run given --window runs as a 1-instance cluster.
func TestClusterWindows(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	dir := t.TempDir()
	base := []string{"run", "--num-instances", "3", "--routing-policy", "least-loaded", "--requests", "300", "--rate", "30", "-q"}
	plain, _, err := runCLI(t, base...)
	require.NoError(t, err)

	csvPath, pngPath := filepath.Join(dir, "w.csv"), filepath.Join(dir, "w.png")
	out, _, err := runCLI(t, append(base, "--window", "2s", "--window-out", csvPath, "--window-plot", pngPath, "--workers", "1")...)
	require.NoError(t, err)
	require.Equal(t, plain, strings.Replace(out, ",\n    \"window_us\": 2000000", "", 1), "the JSON only echoes the window")
	r := parseCluster(t, out)
	f, err := os.Open(csvPath)
	require.NoError(t, err)
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	require.Equal(t, cluster.WindowColumns(), recs[0])
	col := func(name string) int { return slices.Index(recs[0], name) }
	var arrived, completed, tokens int64
	for k, rec := range recs[1:] {
		start, err := strconv.ParseInt(rec[col("start_us")], 10, 64)
		require.NoError(t, err)
		require.Equal(t, int64(k)*2_000_000, start, "consecutive 2 s windows from 0")
		for _, c := range []struct {
			name string
			sum  *int64
		}{{"arrived", &arrived}, {"completed", &completed}, {"output_tokens", &tokens}} {
			n, err := strconv.ParseInt(rec[col(c.name)], 10, 64)
			require.NoError(t, err)
			*c.sum += n
		}
	}
	require.Equal(t, [3]int64{300, r.Metrics.Requests.Completed, r.Metrics.OutputTokens}, [3]int64{arrived, completed, tokens})
	data, err := os.ReadFile(pngPath)
	require.NoError(t, err)
	_, err = png.Decode(bytes.NewReader(data))
	require.NoError(t, err)

	jsonlPath, svgPath := filepath.Join(dir, "w.jsonl"), filepath.Join(dir, "w.SVG")
	_, _, err = runCLI(t, append(base, "--window", "2000ms", "--window-out", jsonlPath, "--window-plot", svgPath, "--workers", "2")...)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(jsonlPath)))), "\n")
	require.Len(t, lines, len(recs)-1)
	for k, line := range lines {
		// The JSON lines hold the CSV's values, two workers or one.
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		require.Len(t, m, len(recs[0]))
		for i, name := range recs[0] {
			v := ""
			if m[name] != nil {
				v = m[name].(json.Number).String()
			}
			require.Equal(t, recs[k+1][i], v, "window %d, %s", k, name)
		}
	}
	svg := string(must(os.ReadFile(svgPath)))
	require.True(t, strings.HasPrefix(svg, "<svg") || strings.HasPrefix(svg, "<?xml"))
	pdfPath := filepath.Join(dir, "w.pdf")
	_, _, err = runCLI(t, append(base, "--window", "2s", "--window-plot", pdfPath)...)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(must(os.ReadFile(pdfPath)), []byte("%PDF-")))

	// The same files for one and two workers.
	csv2 := filepath.Join(dir, "w2.csv")
	_, _, err = runCLI(t, append(base, "--window", "2s", "--window-out", csv2, "--workers", "2")...)
	require.NoError(t, err)
	require.Equal(t, must(os.ReadFile(csvPath)), must(os.ReadFile(csv2)), "--workers 1 and 2 write the same windows")

	// One instance: a cluster of one.
	one := filepath.Join(dir, "one.csv")
	out, diag, err := runCLI(t, "run", "--requests", "50", "--window", "1s", "--window-out", one)
	require.NoError(t, err)
	require.Contains(t, diag, "blis: 1 instance, 50 of 50 requests arrived")
	require.Equal(t, 1, parseCluster(t, out).Config.Instances)
	require.FileExists(t, one)

	// A window too short for the run fails, naming the flag, and leaves no
	// file behind.
	trace := filepath.Join(dir, "two.csv")
	require.NoError(t, os.WriteFile(trace, []byte("arrival_us,prompt_tokens,output_tokens\n0,100,5\n30000000,100,5\n"), 0o644))
	short := filepath.Join(dir, "short.csv")
	_, _, err = runCLI(t, "run", "--replay", trace, "--window", "1us", "--window-out", short)
	require.ErrorContains(t, err, "--window: too many time windows")
	require.NoFileExists(t, short)
	for _, e := range must(os.ReadDir(dir)) {
		require.NotContains(t, e.Name(), ".tmp-", "no temporary file is left behind")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestClusterSummaryAndDetailedTrace: the README's command of
// docs/anomalies.md writes the summary within its budget and the
// detailed trace, the same bytes twice.
func TestClusterSummaryAndDetailedTrace(t *testing.T) {
	dir := t.TempDir()
	var outs []string
	for k := range 2 {
		sum, dec := filepath.Join(dir, fmt.Sprint(k, ".md")), filepath.Join(dir, fmt.Sprint(k, ".jsonl"))
		out, _, err := runCLI(t, "run", "--num-instances", "4", "--rate", "20", "--requests", "500", "--counterfactual-sample", "every:50",
			"--summarize-trace", sum, "--summary-max-tokens", "400", "--trace-level", "detailed", "--decision-trace", dec)
		require.NoError(t, err)
		s, err := os.ReadFile(sum)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(s), "# Run summary\n"))
		require.LessOrEqual(t, summary.Tokens(string(s)), 400)
		d, err := os.ReadFile(dec)
		require.NoError(t, err)
		require.Contains(t, string(d), `"type":"batch"`)
		require.Contains(t, string(d), `"type":"counterfactual"`)
		require.Contains(t, out, `"counterfactual"`)
		outs = append(outs, out+string(s)+string(d))
	}
	require.Equal(t, outs[0], outs[1])
}
