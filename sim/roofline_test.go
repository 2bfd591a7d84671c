package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// The roofline bounds the linear layers and attention separately, because
// they are separate kernels run one after the other in the forward pass: a
// step whose linear layers are compute-bound (a long prefill chunk) and
// whose attention is memory-bound (many long decode contexts) costs the
// sum of the two bounds, not the larger of the two totals.
func TestRooflineBoundsLinearAndAttentionSeparately(t *testing.T) {
	cfg := llamaH100(t)
	rl := DefaultRoofline(cfg)
	rl.StepOverheadUs, rl.PerRequestOverheadUs = 0, 0
	var b Batch
	b.Beta.AddPrefill(0, 2048)
	for range 64 {
		b.Beta.AddDecode(8000, 500)
	}
	in := &b.Beta
	fc := cfg.Hardware.SustainedTFlops() * 1e12 * rl.ComputeEfficiency
	bw := cfg.HWPeakBandwidth * rl.BandwidthEfficiency
	tokens := float64(in.ScheduledTokens)
	sampled := float64(in.NumPrefillReqs + in.NumDecodeReqs)
	linFlops := tokens*(cfg.FlopsLinearPerToken-cfg.FlopsLMHead) + sampled*cfg.FlopsLMHead
	attnBytes := float64(in.SumDecodeKVBlocks)*cfg.BlockSizeBytes + tokens*cfg.KVBytesPerToken
	attnFlops := (in.SumPrefillAttnWork + 2*float64(in.DecodeContextTokens)) * cfg.AttnFlopsPerWorkUnit
	// The premise: linear compute-bound, attention memory-bound.
	require.Greater(t, linFlops/fc, cfg.WeightBytesTotal/bw)
	require.Greater(t, attnBytes/bw, attnFlops/fc)
	want := linFlops/fc + attnBytes/bw
	require.InDelta(t, want, rl.StepSeconds(&b), 1e-12)
	// One roofline over the whole step would have hidden the KV read under
	// the compute.
	whole := max((linFlops+attnFlops)/fc, (cfg.WeightBytesTotal+attnBytes)/bw)
	require.Greater(t, rl.StepSeconds(&b), whole*1.1)
}

// vLLM computes logits only for the last position of each scheduled
// request (gpu_model_runner's logits_indices), so the LM head costs one
// token per request, not one per prompt token.
func TestRooflineLMHeadPerScheduledRequest(t *testing.T) {
	cfg := llamaH100(t)
	rl := DefaultRoofline(cfg)
	fc := cfg.Hardware.SustainedTFlops() * 1e12 * rl.ComputeEfficiency
	one, four := Batch{}, Batch{}
	one.Beta.AddPrefill(0, 4096)
	for range 4 {
		four.Beta.AddPrefill(0, 1024)
	}
	one.Beta.RunningDepth, four.Beta.RunningDepth = 4, 4
	// Same tokens; four requests sample three more tokens, and their
	// causal attention is a quarter of one 4096-token prompt's.
	dAttn := (four.Beta.SumPrefillAttnWork - one.Beta.SumPrefillAttnWork) * cfg.AttnFlopsPerWorkUnit / fc
	require.InDelta(t, 3*cfg.FlopsLMHead/fc+dAttn, rl.StepSeconds(&four)-rl.StepSeconds(&one), 1e-12)
}

// The compute ceiling is the card's sustained GEMM rate, not its datasheet
// peak: the measured gemm_tflops when the spec has one, else
// physics.DefaultGEMMShare of the peak. Two cards with the same datasheet
// peak but different measured rates get prefill steps in the ratio of
// the measurements.
func TestRooflineComputeCeilingIsTheSustainedGEMMRate(t *testing.T) {
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	require.Greater(t, h.GEMMTFlops, 0.0, "the shipped H100 spec carries a measured rate")
	prefill := func(h physics.HardwareSpec) float64 {
		cfg, err := physics.NewPhysicsConfig(m, h, 1, physics.DefaultVLLMKnobs())
		require.NoError(t, err)
		rl := DefaultRoofline(cfg)
		rl.StepOverheadUs, rl.PerRequestOverheadUs = 0, 0
		var b Batch
		b.Beta.AddPrefill(0, 8192)
		return rl.StepSeconds(&b)
	}
	measured := prefill(h)
	unmeasured := h
	unmeasured.GEMMTFlops = 0
	require.InDelta(t, h.TFlopsPeak*physics.DefaultGEMMShare, unmeasured.SustainedTFlops(), 1e-9)
	// A compute-bound step scales with 1 / ceiling.
	require.InDelta(t, unmeasured.SustainedTFlops()/h.GEMMTFlops, measured/prefill(unmeasured), 1e-9)
	faster := h
	faster.GEMMTFlops = 2 * h.GEMMTFlops
	require.InDelta(t, 0.5, prefill(faster)/measured, 1e-9)
}

// The tensor-parallel all-reduce reproduces the measurements it comes
// from: vLLM's custom all-reduce on H100 SXM (sgl-project/sglang pull
// 2904, "vllm" table, µs by message size and TP), within 25 % at 512 KiB
// and 1 MiB (the table is without CUDA graphs, so a launch sits in each
// measured value). Above 8 MiB a message goes to NCCL at 0.8 of the link.
func TestRooflineAllReduceFollowsMeasurements(t *testing.T) {
	m, err := physics.LoadModel("llama-2-70b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	measured := map[int]map[int64]float64{ // TP → message bytes → µs
		2: {512 << 10: 17.7, 1 << 20: 26.6},
		4: {512 << 10: 26.9, 1 << 20: 40.2},
		8: {512 << 10: 30.4, 1 << 20: 45.0},
	}
	perToken := float64(m.HiddenSize) * m.BytesPerParam
	for tp, bySize := range measured {
		cfg, err := physics.NewPhysicsConfig(m, h, tp, physics.DefaultVLLMKnobs())
		require.NoError(t, err)
		rl := DefaultRoofline(cfg)
		perAR := func(bytes float64) float64 { return rl.allReduceSeconds(bytes/perToken) / float64(2*m.NumLayers) * 1e6 }
		for size, us := range bySize {
			require.InEpsilon(t, us, perAR(float64(size)), 0.25, "TP %d, %d bytes", tp, size)
		}
		// Past the custom all-reduce's limit: NCCL's share of the link.
		big := float64(64 << 20)
		busBytes := big * 2 * float64(tp-1) / float64(tp)
		require.InDelta(t, rl.AllReduceLatencyUs+busBytes/(cfg.HWInterconnectBW*rl.NCCLLinkShare)*1e6, perAR(big), 1e-6)
	}
}
