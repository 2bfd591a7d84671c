package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/sim"
)

func poolYAML(t *testing.T, text string) PoolYAML {
	t.Helper()
	var y PoolYAML
	require.NoError(t, yaml.Unmarshal([]byte(text), &y))
	return y
}

func TestPoolAppliesWhatIsGiven(t *testing.T) {
	y := poolYAML(t, `
name: small
replicas: 3
hardware: a100-80gb
vllm: {max_num_seqs: 64, total_kv_blocks_gpu: "2000", scheduler_reserve_full_isl: false}
latency: {model: roofline, roofline: {compute_eff: 0.5}, noise: 0.1}
`)
	p, err := y.Pool(1, "")
	require.NoError(t, err)
	require.Equal(t, "small", p.Name)
	require.Equal(t, 3, p.Replicas)
	s := p.Instance
	require.Equal(t, "a100-80gb", s.Hardware)
	require.Equal(t, "llama-3.1-8b", s.Model, "a key not given keeps its default")
	require.Equal(t, int64(64), s.VLLM.MaxNumSeqs)
	require.Equal(t, int64(2000), s.VLLM.TotalKVBlocksGPU)
	require.False(t, s.ReserveFullSequence)
	require.Equal(t, 0.5, s.Latency.Roofline.ComputeEff)
	require.Equal(t, DefaultRooflineParams.BandwidthEff, s.Latency.Roofline.BandwidthEff, "the roofline's other parameters keep their defaults")

	def, err := (&PoolYAML{}).Pool(2, "")
	require.NoError(t, err)
	require.Equal(t, "pool2", def.Name)
	require.Equal(t, 1, def.Replicas)
	require.Equal(t, DefaultInstanceSpec().VLLM, def.Instance.VLLM)
}

func TestPoolErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key, msg string }{
		{"replicas: 0", "replicas", "must be in [1, 4096], got 0"},
		{"name: 'a b'", "name", `"a b" must be 1-64 letters`},
		{"vllm: {total_kv_blocks_gpu: lots}", "vllm.total_kv_blocks_gpu", `must be a block count > 0 or auto, got "lots"`},
		{"latency: {blackbox: {alpha: [1, 2]}}", "latency.blackbox.alpha", "wants three numbers, got 2"},
		{"latency: {coefficients: /nonexistent.yaml}", "latency.coefficients", "nonexistent"},
	} {
		y := poolYAML(t, tc.yaml)
		_, err := y.Pool(0, "")
		var fe *FieldError
		require.ErrorAs(t, err, &fe, tc.yaml)
		require.Equal(t, []string{tc.key}, fe.Fields, tc.yaml)
		require.ErrorContains(t, err, tc.msg, tc.yaml)
	}
}

// TestInstanceYAMLRoundTrips: YAML writes every key so that Apply gives
// the same spec back (what --print-config relies on).
func TestInstanceYAMLRoundTrips(t *testing.T) {
	specs := []InstanceSpec{DefaultInstanceSpec()}
	s := DefaultInstanceSpec()
	s.Model, s.TP, s.VLLM.TotalKVBlocksGPU, s.VLLM.TotalKVBlocksCPU, s.OffloadThreshold = "mixtral-8x7b", 4, 3000, 50000, 0.5
	s.Latency.Model, s.Latency.Noise = "roofline", 0.05
	specs = append(specs, s)
	b := DefaultInstanceSpec()
	b.Latency.Model = "blackbox"
	b.Latency.Blackbox = &BlackboxParams{Alpha: [3]float64{1, 2, 3}, Beta: [3]float64{4, 5, 6}}
	specs = append(specs, b)
	for _, want := range specs {
		y := want.YAML()
		data, err := yaml.Marshal(y)
		require.NoError(t, err)
		var back InstanceYAML
		require.NoError(t, yaml.Unmarshal(data, &back))
		got := DefaultInstanceSpec()
		require.NoError(t, back.Apply(&got, ""))
		want.DP = max(1, want.DP)
		if want.Latency.Model == "roofline" && want.Latency.Roofline == nil {
			want.Latency.Roofline = &DefaultRooflineParams
		}
		require.Equal(t, want, got, "%s", data)
	}
}

// TestCoefficientDefaults: what a pool does not give of the configuration
// comes from its coefficient file's applies_to; what it gives wins.
func TestCoefficientDefaults(t *testing.T) {
	path, err := filepath.Abs("../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml")
	require.NoError(t, err)
	y := poolYAML(t, "latency: {coefficients: "+path+"}\nvllm: {max_num_seqs: 32}")
	p, err := y.Pool(0, "")
	require.NoError(t, err)
	require.Equal(t, "llama-3.1-8b", p.Instance.Model)
	require.Equal(t, int64(32), p.Instance.VLLM.MaxNumSeqs, "given beats applies_to")
	require.Positive(t, p.Instance.VLLM.TotalKVBlocksGPU, "applies_to's KV blocks: nothing that sizes them was given")
	y = poolYAML(t, "latency: {coefficients: "+path+"}\nhardware: a100-80gb")
	p, err = y.Pool(0, "")
	require.NoError(t, err)
	require.Zero(t, p.Instance.VLLM.TotalKVBlocksGPU, "another GPU: derive the blocks")
}

func TestBuildNumbersInstancesAcrossPools(t *testing.T) {
	a, b := DefaultInstanceSpec(), DefaultInstanceSpec()
	b.Hardware = "a100-80gb"
	b.Latency.Noise = 0.1
	d := &Deployment{Pools: []Pool{{Name: "big", Replicas: 2, Instance: a}, {Name: "small", Replicas: 1, Instance: b}},
		Router: Router{AdmissionLatencyUs: 20}}
	built, err := d.Build(sim.NewRNG(1))
	require.NoError(t, err)
	var ids, pools []string
	for _, in := range built.Config.Instances {
		ids, pools = append(ids, in.ID), append(pools, in.Pool)
	}
	require.Equal(t, []string{"instance_0", "instance_1", "instance_2"}, ids)
	require.Equal(t, []string{"big", "big", "small"}, pools)
	require.Equal(t, "A100-80GB", built.Pools[1].Phys.Hardware.Name)
	require.Equal(t, int64(20), built.Config.AdmissionLatencyUs)
	require.Equal(t, []int{0, 0, 1}, []int{d.PoolOf(0), d.PoolOf(1), d.PoolOf(2)})
	require.Equal(t, 3, d.NumInstances())

	b.TP = 0
	d.Pools[1].Instance = b
	_, err = d.Build(sim.NewRNG(1))
	var pe *PoolError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Pool)
}

func TestUniform(t *testing.T) {
	d, err := Uniform(DefaultInstanceSpec(), 3)
	require.NoError(t, err)
	require.Equal(t, 3, d.NumInstances())
	_, err = Uniform(DefaultInstanceSpec(), 0)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, []string{"replicas"}, fe.Fields)
}

func TestResolveKeepsShippedNamesAndFindsFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "m.json"), []byte("{}"), 0o644))
	require.Equal(t, filepath.Join(dir, "m.json"), resolve("m.json", dir))
	require.Equal(t, "h100-sxm", resolve("h100-sxm", dir))
	require.Equal(t, "/abs/x", resolve("/abs/x", dir))
}

// TestDataParallelMoEStepsInLockstep: the engines of a data-parallel
// server step in lockstep for a mixture-of-experts model only, as vLLM's
// do (sim/lockstep.go); a dense model's, or one engine, stay independent.
func TestDataParallelMoEStepsInLockstep(t *testing.T) {
	for _, tc := range []struct {
		model string
		dp    int
		want  string
	}{
		{"mixtral-8x7b", 2, "dp"},
		{"mixtral-8x7b", 1, ""},
		{"llama-3.1-8b", 2, ""},
	} {
		in := DefaultInstanceSpec()
		in.Model, in.DP, in.VLLM.TotalKVBlocksGPU = tc.model, tc.dp, 2000
		d := &Deployment{Pools: []Pool{{Name: "dp", Replicas: 2, Instance: in}}}
		built, err := d.Build(sim.NewRNG(1))
		require.NoError(t, err, tc.model)
		for _, ci := range built.Config.Instances {
			require.Equal(t, tc.want, ci.Lockstep, "%s at DP %d", tc.model, tc.dp)
		}
	}
}
