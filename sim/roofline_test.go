package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
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
	fc := cfg.HWPeakFlops * rl.ComputeEfficiency
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
	fc := cfg.HWPeakFlops * rl.ComputeEfficiency
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
