package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/sim"
)

func TestDeploymentBuildsPoolsInOrder(t *testing.T) {
	d, err := ParseDeployment([]byte(`pools:
  - name: big
    replicas: 2
    vllm:
      max_num_seqs: 128
      total_kv_blocks_gpu: 20000
  - name: small
    hardware: a100-80gb
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
`), "d.yaml")
	require.NoError(t, err)
	require.Equal(t, 3, d.NumInstances())
	b, err := d.Build(sim.NewRNG(1))
	require.NoError(t, err)
	var ids, pools []string
	for _, in := range b.Config.Instances {
		ids, pools = append(ids, in.ID), append(pools, in.Pool)
	}
	require.Equal(t, []string{"instance_0", "instance_1", "instance_2"}, ids)
	require.Equal(t, []string{"big", "big", "small"}, pools)
	require.Equal(t, int64(128), b.Config.Instances[0].Config.Engine.MaxNumSeqs)
	require.Equal(t, int64(20000), b.Config.Instances[1].Config.Engine.TotalKVBlocksGPU)
	require.Equal(t, "A100-80GB", b.Pools[1].Phys.Hardware.Name)
	require.True(t, b.Config.Instances[0].Config.Engine.ReserveFullSequence, "vLLM's default")
	require.False(t, b.Config.Instances[2].Config.Engine.ReserveFullSequence)
	require.Equal(t, "roofline+noise", b.Config.Instances[2].Config.Latency.Name())
	require.Equal(t, "weighted", b.Config.Routing.Name())
	require.Equal(t, "token-bucket", b.Config.Admission.Name())
	require.Equal(t, int64(20), b.Config.AdmissionLatencyUs)
	want := cluster.Uniform(5000)
	want[cluster.SigCacheHitRate] = 0
	require.Equal(t, want, b.Config.Freshness, "a per-signal setting overrides the shared interval")
}

func TestDeploymentErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "x.yaml: empty file"},
		{"pools: []", "x.yaml:1: pools: at least one pool is required"},
		{"pools:\n  - replicas: 0", "x.yaml:2: pools[0].replicas: must be in [1, 4096], got 0"},
		{"pools:\n  - vllm:\n      max_num_seqs: 0", "x.yaml:3: pools[0].vllm.max_num_seqs: must be > 0, got 0"},
		{"pools:\n  - foo: 1", `x.yaml:2: unknown key "foo" in a pool; use one of name, replicas, model`},
		{"pools:\n  - {}\nrouting:\n  refresh: 5", `x.yaml:4: unknown key "refresh" in routing; use one of policy, scorers`},
		{"pools:\n  - tp: x", "x.yaml:2: cannot read !!str `x` into int"},
		{"pools:\n  - {}\nrouting:\n  policy: rr", `x.yaml:4: routing.policy: routing policy "rr" is not a policy; use one of round-robin, least-loaded, always-busiest, weighted`},
		{"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: a:1", `x.yaml:5: routing.scorers: scorer "a" is not a scorer`},
		{"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: queue-depth:0", "x.yaml:5: routing.scorers: scorer weights \"queue-depth:0\" are all 0"},
		{"pools:\n  - {}\nrouting:\n  snapshot_refresh_interval_us: -1", "x.yaml:4: routing.snapshot_refresh_interval_us: must be >= 0"},
		{"pools:\n  - {}\nobservability:\n  kv_utilization: -5", `x.yaml:4: observability.kv_utilization: "-5" must be immediate or a refresh interval`},
		{"pools:\n  - {}\nadmission:\n  policy: token-bucket\n  token_bucket_capacity: 0", "x.yaml:5: admission.token_bucket_capacity: must be > 0"},
		{"pools:\n  - {}\nadmission:\n  policy: maybe", `x.yaml:4: admission.policy: admission policy "maybe" is not a policy`},
		{"pools:\n - name: a\n - name: a", `x.yaml:3: pools[1].name: pool name "a" is used twice`},
		{"pools:\n - name: 'a b'", `x.yaml:2: pools[0].name: "a b" must be 1-64 letters`},
		{"pools:\n  - latency:\n      blackbox: {alpha: [1,2]}", "x.yaml:3: pools[0].latency.blackbox.alpha: wants three numbers, got 2"},
		{"pools:\n  - vllm:\n      total_kv_blocks_gpu: lots", `x.yaml:3: pools[0].vllm.total_kv_blocks_gpu: must be a block count > 0 or auto, got "lots"`},
		{"pools:\n  - replicas: 4000\n  - replicas: 100", "x.yaml:3: pools[1].replicas: the deployment has more than 4096 instances"},
		{"a: 1\n---\nb: 2", "x.yaml:2: a second YAML document"},
	} {
		d, err := ParseDeployment([]byte(tc.yaml), "x.yaml")
		if err == nil {
			_, err = d.Build(sim.NewRNG(1)) // some errors show only when an instance is built
		}
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
	// Errors found when building name the pool's key and its line.
	d, err := ParseDeployment([]byte("pools:\n  - name: ok\n  - name: bad\n    model: no-such-model\n"), "x.yaml")
	require.NoError(t, err)
	_, err = d.Build(sim.NewRNG(1))
	require.ErrorContains(t, err, `x.yaml:4: pools[1].model: model "no-such-model" is neither a file nor a shipped model`)
	d, err = ParseDeployment([]byte("pools:\n  - scheduler: lifo\n"), "x.yaml")
	require.NoError(t, err)
	_, err = d.Build(sim.NewRNG(1))
	require.ErrorContains(t, err, `x.yaml:2: pools[0].scheduler: scheduler "lifo" is not a policy`)
}

// TestDeploymentPathsResolveFromTheFile: model, hardware and coefficient
// paths are relative to the deployment file's folder; shipped names stay
// names.
func TestDeploymentPathsResolveFromTheFile(t *testing.T) {
	dir := t.TempDir()
	model, err := os.ReadFile("../physics/data/models/llama-2-7b.json")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "mine.json"), model, 0o644))
	path := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte("pools:\n  - model: models/mine.json\n    hardware: h100-sxm\n"), 0o644))
	t.Chdir(t.TempDir()) // elsewhere: the path must not depend on the working directory
	d, err := LoadDeployment(path)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "models", "mine.json"), d.Pools[0].Instance.Model)
	require.Equal(t, "h100-sxm", d.Pools[0].Instance.Hardware)
	_, err = d.Build(sim.NewRNG(1))
	require.NoError(t, err)
}

func TestUniform(t *testing.T) {
	d, err := Uniform(DefaultInstanceSpec(), 3)
	require.NoError(t, err)
	b, err := d.Build(sim.NewRNG(1))
	require.NoError(t, err)
	require.Len(t, b.Config.Instances, 3)
	require.Equal(t, "round-robin", b.Config.Routing.Name())
	_, err = Uniform(DefaultInstanceSpec(), 0)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(FlagError(err).Error(), "--num-instances: "))
	// Build errors of a flag-made deployment stay field errors, for the CLI.
	spec := DefaultInstanceSpec()
	spec.TP = 0
	d, err = Uniform(spec, 2)
	require.NoError(t, err)
	_, err = d.Build(sim.NewRNG(1))
	require.Equal(t, "--tp: must be >= 1, got 0", FlagError(err).Error())
}
