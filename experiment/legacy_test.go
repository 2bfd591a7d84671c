package experiment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
)

func legacy(t *testing.T, text string) (*Experiment, error) {
	t.Helper()
	d := NewDraft()
	if err := d.ParseDeployment([]byte(text), "x.yaml"); err != nil {
		return nil, err
	}
	return d.Resolve()
}

func TestDeploymentFileBecomesAnExperiment(t *testing.T) {
	e, err := legacy(t, `pools:
  - name: big
    replicas: 2
    scheduler: priority-fcfs
    priority: slo-based
    priority_age_weight: 2
    vllm:
      max_num_seqs: 128
      total_kv_blocks_gpu: 20000
  - name: small
    hardware: a100-80gb
    scheduler: priority-fcfs
    priority: slo-based
    priority_age_weight: 2
    vllm:
      scheduler_reserve_full_isl: false
    latency:
      model: roofline
      roofline: {compute_eff: 0.5}
      noise: 0.1
routing:
  policy: weighted
  scorers: prefix-affinity:3,queue-depth:2
  snapshot_refresh_interval_us: 5000
observability:
  cache_hit_rate: immediate
admission:
  policy: token-bucket
  token_bucket_capacity: 1000
  latency_us: 20
`)
	require.NoError(t, err)
	require.Equal(t, ModeCluster, e.Mode)
	d := e.Deployment
	require.Equal(t, 3, d.NumInstances())
	require.Equal(t, "big", d.Pools[0].Name)
	require.Equal(t, int64(128), d.Pools[0].Instance.VLLM.MaxNumSeqs)
	require.Equal(t, int64(20000), d.Pools[0].Instance.VLLM.TotalKVBlocksGPU)
	require.Equal(t, "a100-80gb", d.Pools[1].Instance.Hardware)
	require.False(t, d.Pools[1].Instance.ReserveFullSequence)
	require.Equal(t, 0.5, d.Pools[1].Instance.Latency.Roofline.ComputeEff)
	require.Equal(t, "weighted", e.Policies.Routing.Type)
	require.Equal(t, "prefix-affinity", e.Policies.Routing.Map("scorers")[0].Key)
	require.Equal(t, "token-bucket", e.Policies.Admission.Type)
	require.Equal(t, 1000.0, e.Policies.Admission.Float("capacity"))
	require.Equal(t, "priority-fcfs", e.Policies.Scheduler.Type)
	require.Equal(t, "slo-based", e.Policies.Priority.Type)
	require.Equal(t, 2.0, e.Policies.Priority.Float("age_weight"))
	require.Equal(t, int64(20), d.Router.AdmissionLatencyUs)
	want := cluster.Uniform(5000)
	want[cluster.SigCacheHitRate] = 0
	require.Equal(t, want, d.Router.Freshness, "a per-signal setting overrides the shared interval")
}

func TestDeploymentFileErrorsNameItsLines(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "x.yaml: empty file"},
		{"pools: []", "x.yaml:1: pools: at least one pool is required"},
		{"pools:\n  - replicas: 0", "x.yaml:2: pools[0].replicas: must be in [1, 4096], got 0"},
		{"pools:\n  - vllm:\n      max_num_seqs: 0", "x.yaml:3: pools[0].vllm.max_num_seqs: must be >= 1 requests, got 0"},
		{"pools:\n  - foo: 1", `x.yaml:2: unknown key "foo" in a pool; use one of name, replicas, model`},
		{"pools:\n  - {}\nrouting:\n  refresh: 5", `x.yaml:4: unknown key "refresh" in routing; use one of policy, scorers`},
		{"pools:\n  - tp: x", "x.yaml:2: pools[0].tp: want a whole number, got \"x\""},
		{"pools:\n  - {}\nrouting:\n  policy: rr", `x.yaml:4: routing.policy: routing policy "rr" is not a template; use one of round-robin`},
		{"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: a:1", `x.yaml:5: routing.scorers: "a" is not one of prefix-affinity, queue-depth, kv-utilization, load-balance`},
		{"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: queue-depth:0", `x.yaml:5: routing.scorers: the weights are all 0; at least one must be > 0`},
		{"pools:\n  - {}\nrouting:\n  snapshot_refresh_interval_us: -1", "x.yaml:4: routing.snapshot_refresh_interval_us: must be within [0, 1099511627776] µs, got -1"},
		{"pools:\n  - {}\nobservability:\n  kv_utilization: -5", `x.yaml:4: observability.kv_utilization: "-5" must be immediate or a refresh interval`},
		{"pools:\n  - {}\nadmission:\n  policy: token-bucket\n  token_bucket_capacity: 0", "x.yaml:5: admission.token_bucket_capacity: must be > 0 input tokens, got 0"},
		{"pools:\n  - {}\nadmission:\n  token_bucket_capacity: 10", "x.yaml:4: admission.token_bucket_capacity: admission policy always-admit takes no parameters"},
		{"pools:\n  - {}\nadmission:\n  policy: maybe", `x.yaml:4: admission.policy: admission policy "maybe" is not a template`},
		{"pools:\n - name: a\n - name: a", `x.yaml:3: pools[1].name: pool name "a" is used twice`},
		{"pools:\n - name: 'a b'", `x.yaml:2: pools[0].name: "a b" must be 1-64 letters`},
		{"pools:\n  - latency:\n      blackbox: {alpha: [1,2]}", "x.yaml:3: pools[0].latency.blackbox.alpha: want a list of 3 numbers, got 2"},
		{"pools:\n  - vllm:\n      total_kv_blocks_gpu: lots", `x.yaml:3: pools[0].vllm.total_kv_blocks_gpu: must be a block count > 0 or auto, got "lots"`},
		{"pools:\n  - replicas: 4000\n  - replicas: 100", "x.yaml:3: pools[1].replicas: the deployment has more than 4096 instances"},
		{"pools:\n  - name: ok\n  - name: bad\n    model: no-such-model", `x.yaml:4: pools[1].model: model "no-such-model" is neither a file nor a shipped model`},
		{"pools:\n  - scheduler: lifo", `x.yaml:2: pools[0].scheduler: scheduler policy "lifo" is not a template`},
		{"pools:\n  - scheduler: sjf\n  - scheduler: fcfs", `x.yaml:3: pools[1].scheduler: "fcfs" differs from pools[0]'s "sjf"; every pool runs the experiment's one scheduler`},
		{"pools:\n  - priority: slo-based\n  - {}", "x.yaml:3: pools[1].priority: differs from pools[0]'s"},
		{"pools:\n  - priority_age_weight: 2", `x.yaml:2: pools[0].priority_age_weight: priority policy constant has no parameter "age_weight"`},
		{"a: 1\n---\nb: 2", "x.yaml:2: a second YAML document"},
	} {
		_, err := legacy(t, tc.yaml)
		require.Error(t, err, "%q", tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
}

// TestDeploymentFilePathsResolveFromTheFile: model, hardware and
// coefficient paths are relative to the file's folder; shipped names
// stay names.
func TestDeploymentFilePathsResolveFromTheFile(t *testing.T) {
	dir := t.TempDir()
	model, err := os.ReadFile("../physics/data/models/llama-2-7b.json")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "mine.json"), model, 0o644))
	path := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte("pools:\n  - model: models/mine.json\n    hardware: h100-sxm\n"), 0o644))
	exp := filepath.Join(dir, "exp.yaml")
	require.NoError(t, os.WriteFile(exp, []byte("version: 1\ndeployment:\n  pools:\n    - model: models/mine.json\n"), 0o644))
	t.Chdir(t.TempDir()) // elsewhere: the path must not depend on the working directory
	d := NewDraft()
	require.NoError(t, d.LoadDeployment(path))
	e, err := d.Resolve()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "models", "mine.json"), e.Deployment.Pools[0].Instance.Model)
	require.Equal(t, "h100-sxm", e.Deployment.Pools[0].Instance.Hardware)
	d, err = Load(exp)
	require.NoError(t, err)
	e, err = d.Resolve()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "models", "mine.json"), e.Deployment.Pools[0].Instance.Model)
	// An experiment file with a deployment and a deployment file: one or
	// the other.
	require.ErrorContains(t, d.LoadDeployment(path), "has a deployment already; give one or the other")
}

// TestFlagsOverADeploymentFile: --num-instances is refused with a
// deployment file (set each pool's replicas there), other flags apply to
// every pool, and errors still name the file's lines.
func TestFlagsOverADeploymentFile(t *testing.T) {
	d := NewDraft()
	require.NoError(t, d.ParseDeployment([]byte("pools:\n  - {name: a, replicas: 2}\n  - {name: b}\n"), "d.yaml"))
	require.ErrorContains(t, d.SetFlag("num-instances", "3"), "--num-instances cannot be combined with --deployment")
	require.NoError(t, d.SetFlag("max-num-seqs", "64"))
	e, err := d.Resolve()
	require.NoError(t, err)
	for _, p := range e.Deployment.Pools {
		require.Equal(t, int64(64), p.Instance.VLLM.MaxNumSeqs)
	}
	require.ErrorContains(t, d.SetFlag("data-parallel-size", "2"), "--data-parallel-size cannot be combined with a deployment of 2 pools")
	err = d.SetFlag("tp", "0")
	require.True(t, strings.HasPrefix(err.Error(), "--tp"), "%v", err)
}
