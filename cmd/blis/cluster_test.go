package main

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/otlpingest"
)

type clusterOutput struct {
	Config  clusterConfig          `json:"config"`
	Metrics cluster.Result         `json:"metrics"`
	Fitness *cluster.FitnessResult `json:"fitness"`
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
		{[]string{"--routing-policy", "random"}, "--routing-policy: routing policy \"random\" is not a policy; use one of round-robin, least-loaded, always-busiest, weighted"},
		{[]string{"--admission-policy", "maybe"}, "use one of always-admit, token-bucket, reject-all"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "prefix-affinity:-1"}, "--routing-scorers: scorer prefix-affinity: weight \"-1\" must be a finite number >= 0"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "prefix-affinity:0,queue-depth:0"}, "--routing-scorers: scorer weights \"prefix-affinity:0,queue-depth:0\" are all 0"},
		{[]string{"--routing-policy", "weighted", "--routing-scorers", "cache:1"}, "use one of prefix-affinity, queue-depth, kv-utilization, load-balance"},
		{[]string{"--num-instances", "0"}, "--num-instances: must be in [1, 4096], got 0"},
		{[]string{"--snapshot-refresh-interval", "-1"}, "--snapshot-refresh-interval must be >= 0"},
		{[]string{"--admission-policy", "token-bucket", "--token-bucket-capacity", "0"}, "--token-bucket-capacity: must be > 0"},
		{[]string{"--admission-policy", "token-bucket", "--token-bucket-refill-rate", "-3"}, "--token-bucket-refill-rate: must be >= 0"},
		{[]string{"--admission-latency", "-5"}, "--admission-latency: must be >= 0"},
		{[]string{"--routing-latency", "-5"}, "--routing-latency: must be >= 0"},
		{[]string{"--prefix-index-capacity", "0"}, "--prefix-index-capacity: must be >= 1"},
		{[]string{"--trace-level", "decisions"}, "--trace-level decisions needs --decision-trace FILE"},
		{[]string{"--trace-level", "everything"}, "--trace-level \"everything\" is not a level"},
		{[]string{"--decision-trace", "/tmp/d.jsonl"}, "--decision-trace needs --trace-level decisions"},
		{[]string{"--counterfactual-k", "-1"}, "--counterfactual-k must be >= 0"},
		{[]string{"--num-instances", "2", "--workers", "-1"}, "--workers must be >= 0"},
		{[]string{"--workers", "2"}, "--workers is for cluster runs"},
		{[]string{"--fitness-weights", "speed:1"}, "--fitness-weights: fitness key \"speed\" is not a metric"},
		{[]string{"--fitness-weights", "throughput:0"}, "are all 0"},
		{[]string{"--num-instances", "2", "--max-num-seqs", "0"}, "--max-num-seqs: must be > 0"},
		{[]string{"--deployment", bad}, "bad.yaml:4: pools[0].vllm.max_num_seqs: must be > 0, got 0"},
		{[]string{"--deployment", unknown}, "unknown.yaml:3: unknown key \"gpus\" in a pool; use one of name, replicas"},
		{[]string{"--deployment", good, "--num-instances", "3"}, "--num-instances cannot be combined with --deployment"},
		{[]string{"--deployment", filepath.Join(dir, "missing.yaml")}, "--deployment: open"},
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

// The deployment vocabulary (deploy's key-to-flag table) names only flags
// that blis run defines, so an error rewritten in flag terms names a real
// flag, and a renamed flag cannot leave the table behind.
func TestDeployFlagsExist(t *testing.T) {
	cmd := newRunCmd()
	flags := deploy.Flags()
	require.NotEmpty(t, flags)
	for _, f := range flags {
		require.True(t, strings.HasPrefix(f, "--"), "%q", f)
		require.NotNil(t, cmd.Flags().Lookup(strings.TrimPrefix(f, "--")), "deploy names %s, which blis run does not define", f)
	}
}
