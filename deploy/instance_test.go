package deploy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func TestDefaultInstanceUsesTheShippedCoefficients(t *testing.T) {
	in, err := DefaultInstanceSpec().Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	require.Equal(t, "physics", in.LatencyName)
	require.Equal(t, "builtin:shipped/llama-3.1-8b_h100-sxm_tp1.yaml", in.CoefficientsSource)
	require.Greater(t, in.Config.Engine.TotalKVBlocksGPU, int64(10_000), "derived from H100 memory")
	require.NoError(t, in.Config.Validate())
}

func TestLatencyChoice(t *testing.T) {
	spec := DefaultInstanceSpec()
	spec.Model = "mixtral-8x7b"
	spec.Hardware = "a100-80gb"
	spec.TP = 4
	in, err := spec.Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	require.Equal(t, "roofline", in.LatencyName, "no shipped coefficients for Mixtral on A100")

	spec.Latency = LatencySpec{Model: "blackbox", Blackbox: &BlackboxParams{Beta: [3]float64{100, 1, 2}}, Noise: 0.1}
	in, err = spec.Build(sim.NewRNG(1), 3)
	require.NoError(t, err)
	require.Equal(t, "blackbox+noise", in.Config.Latency.Name())
	var b sim.Batch
	b.Beta.PrefillTokens = 10
	// Instance 3's noise stream is its own.
	want := sim.NewNoisy(&sim.Blackbox{Beta: [3]float64{100, 1, 2}}, 0.1, sim.NewRNG(1).Stream("latency-noise/instance_3"))
	require.Equal(t, want.StepTimeUs(&b), in.Config.Latency.StepTimeUs(&b))
}

func TestBuildErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		edit func(*InstanceSpec)
		key  string
	}{
		{func(s *InstanceSpec) { s.Model = "no-such-model" }, "model"},
		{func(s *InstanceSpec) { s.Hardware = "tpu" }, "hardware"},
		{func(s *InstanceSpec) { s.TP = 0 }, "tp"},
		{func(s *InstanceSpec) { s.VLLM.MaxNumSeqs = 0 }, "vllm.max_num_seqs"},
		{func(s *InstanceSpec) { s.VLLM.BlockSizeTokens = -1 }, "vllm.block_size_tokens"},
		{func(s *InstanceSpec) { s.VLLM.TotalKVBlocksGPU = -3 }, "vllm.total_kv_blocks_gpu"},
		{func(s *InstanceSpec) { s.VLLM.TotalKVBlocksCPU = 10; s.OffloadThreshold = 2 }, "vllm.offload_threshold"},
		{func(s *InstanceSpec) { s.LongPrefillThreshold = -1 }, "vllm.long_prefill_token_threshold"},
		{func(s *InstanceSpec) { s.MaxModelLen = -1 }, "vllm.max_model_len"},
		{func(s *InstanceSpec) { s.MaxModelLen = 131073 }, "vllm.max_model_len"},
		{func(s *InstanceSpec) { s.Policies.Priority.AgeWeight = -1 }, "priority_age_weight"},
		{func(s *InstanceSpec) { s.Latency.Model = "magic" }, "latency.model"},
		{func(s *InstanceSpec) { s.Latency.Noise = 5 }, "latency.noise"},
		{func(s *InstanceSpec) { s.Latency.Roofline = &RooflineParams{ComputeEff: 1, BandwidthEff: 1} }, "latency.roofline"},
		{func(s *InstanceSpec) {
			s.Latency.Model = "roofline"
			s.Latency.Roofline = &RooflineParams{ComputeEff: 0, BandwidthEff: 1}
		}, "latency.roofline"},
		{func(s *InstanceSpec) { s.Latency.Model = "roofline"; s.Latency.Blackbox = &DefaultBlackboxParams }, "latency.blackbox"},
		{func(s *InstanceSpec) { s.Latency.Coefficients = "/nonexistent.yaml" }, "latency.coefficients"},
		{func(s *InstanceSpec) { s.Latency.Model = "physics"; s.VLLM.MaxNumSeqs = 100 }, "latency.coefficients"},
	} {
		spec := DefaultInstanceSpec()
		tc.edit(&spec)
		_, err := spec.Build(sim.NewRNG(1), 0)
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%v", err)
		require.Equal(t, []string{tc.key}, fe.Fields, "%v", err)
	}
}

// The context is the model config's (vLLM derives
// max_model_len from it), or a smaller --max-model-len.
func TestMaxModelLen(t *testing.T) {
	for _, tc := range []struct {
		model string
		given int64
		want  int64
	}{
		{"llama-3.1-8b", 0, 131072},
		{"gpt2", 0, 1024},
		{"llama-2-7b", 0, 4096},
		{"gpt2", 512, 512},
		{"gpt2", 1024, 1024},
	} {
		spec := DefaultInstanceSpec()
		spec.Model, spec.MaxModelLen = tc.model, tc.given
		spec.Latency.Model = "roofline"
		in, err := spec.Build(sim.NewRNG(1), 0)
		require.NoError(t, err)
		require.Equal(t, tc.want, in.Config.Engine.MaxModelLen, "%s, given %d", tc.model, tc.given)
	}
	spec := DefaultInstanceSpec()
	spec.Model, spec.MaxModelLen = "gpt2", 1025
	d, err := Uniform(spec, 1)
	require.NoError(t, err)
	_, err = d.Build(sim.NewRNG(1))
	var pe *PoolError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Pool)
	require.ErrorContains(t, err, "vllm.max_model_len: 1025 is more than the model's context of 1024 tokens")
}
