package sim

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
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
	rl.Kernels = false // the scalar bounds
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
	rl.Kernels = false // the scalar bounds
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
		rl.Kernels = false // the scalar bounds
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

// The roofline's tensor-parallel all-reduces are two per layer, each of
// the step's tokens' hidden states, at the time the collective model
// gives for that message on the path vLLM takes
// (physics.Collectives.AllReduce; its own test reproduces the public
// per-size tables). On H100 at TP 4, a decode batch's 1 MiB messages go
// to the custom all-reduce and a 4,096-token prefill chunk's 64 MiB to
// NCCL.
func TestRooflineAllReduceIsTheCollectiveModel(t *testing.T) {
	m, err := physics.LoadModel("llama-2-70b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	cfg, err := physics.NewPhysicsConfig(m, h, 4, physics.DefaultVLLMKnobs())
	require.NoError(t, err)
	rl := DefaultRoofline(cfg)
	perToken := float64(m.HiddenSize) * m.BytesPerParam
	for _, c := range []struct {
		tokens float64
		path   physics.AllReducePath
	}{{64, physics.PathCustomTwoShot}, {4096, physics.PathNCCL}, {16, physics.PathCustomOneShot}, {1024, physics.PathSymmMemMultimem}} {
		s, p := h.Collectives().AllReduce(c.tokens*perToken, 4)
		require.Equal(t, c.path, p, "%v tokens", c.tokens)
		require.InDelta(t, float64(2*m.NumLayers)*s, rl.allReduceSeconds(c.tokens), 1e-15)
	}
	// The dispatch is resolved once; a caller that changes Collectives
	// afterwards still gets the new model.
	pcie := rl.Collectives
	pcie.Kind = physics.InterconnectPCIe
	rl2 := *rl
	rl2.Collectives = pcie
	s, _ := pcie.AllReduce(64*perToken, 4)
	require.InDelta(t, float64(2*m.NumLayers)*s, rl2.allReduceSeconds(64), 1e-15)
	// A decode batch of 64 on Llama-2-70B at TP 4: 160 all-reduces of
	// 1 MiB, 3.2 ms per step (5.6 ms before this model, which read the
	// sizes of sglang pull 2904 as a quarter of what they are).
	require.InDelta(t, 3.2e-3, rl.allReduceSeconds(64), 0.1e-3)
}

// With Kernels the roofline is the sum of the measured kernel model's
// kernels (physics.Kernels), by hand here for a mixed step of a dense
// model at TP 1: per layer the four projection GEMMs at the step's tokens,
// the elementwise kernels and the attention; the LM head at one row per
// sampled request; the embedding and the final norm once. Halving both
// efficiencies doubles every kernel's streaming and compute time, not its
// latency.
func TestRooflineKernelsAreTheMeasuredKernelModel(t *testing.T) {
	cfg := llamaH100(t)
	rl := DefaultRoofline(cfg)
	rl.Kernels = true
	rl.StepOverheadUs, rl.PerRequestOverheadUs = 0, 0
	var b Batch
	b.Beta.AddPrefill(1024, 512)
	for range 32 {
		b.Beta.AddDecode(2000, 125)
	}
	in := &b.Beta
	k := cfg.Hardware.Kernels()
	m := cfg.Model
	tokens, hd, I := float64(in.ScheduledTokens), float64(m.HiddenSize), float64(m.IntermediateSize)
	layer := k.GEMMSeconds(tokens, cfg.QDim+2*cfg.KVDim, hd, 2) + k.GEMMSeconds(tokens, hd, cfg.QDim, 2) +
		k.GEMMSeconds(tokens, 2*I, hd, 2) + k.GEMMSeconds(tokens, hd, I, 2) +
		k.LayerElementwiseSeconds(cfg, tokens) +
		k.AttentionSeconds(in.SumPrefillAttnWork*2*cfg.QDim,
			(float64(in.SumDecodeKVBlocks)*cfg.BlockSizeBytes+tokens*cfg.KVBytesPerToken)/float64(m.NumLayers),
			1024*cfg.QHeadKVBytesPerToken()/float64(m.NumLayers))
	want := float64(m.NumLayers)*layer + k.GEMMSeconds(33, float64(m.VocabSize), hd, 2) + k.StepElementwiseSeconds(cfg, tokens)
	require.InDelta(t, want, rl.StepSeconds(&b), 1e-12)

	half := DefaultRoofline(cfg)
	half.Kernels, half.StepOverheadUs, half.PerRequestOverheadUs = true, 0, 0
	half.ComputeEfficiency, half.BandwidthEfficiency = DefaultComputeEfficiency/2, DefaultBandwidthEfficiency/2
	var one Batch
	one.Beta.AddDecode(1, 1)
	k2 := k
	k2.GEMMRate, k2.BwPeak = k.GEMMRate/2, k.BwPeak/2
	oneLayer := k2.GEMMSeconds(1, cfg.QDim+2*cfg.KVDim, hd, 2) + k2.GEMMSeconds(1, hd, cfg.QDim, 2) +
		k2.GEMMSeconds(1, 2*I, hd, 2) + k2.GEMMSeconds(1, hd, I, 2) + k2.LayerElementwiseSeconds(cfg, 1) +
		k2.AttentionSeconds(0, (cfg.BlockSizeBytes+cfg.KVBytesPerToken)/float64(m.NumLayers), 0)
	require.InDelta(t, float64(m.NumLayers)*oneLayer+k2.GEMMSeconds(1, float64(m.VocabSize), hd, 2)+k2.StepElementwiseSeconds(cfg, 1),
		half.StepSeconds(&one), 1e-12)
}

// TestRooflineSharedAcrossGoroutines: the engines of a pool share one
// roofline and a cluster steps them on several goroutines at once, so
// pricing a step must not write anything the roofline shares. Its kernel
// memo once lived in the roofline as entries of two plain words (count,
// time), so one goroutine could read another's count with a third's
// time: a run's output then depended on its threads' timing (seen as a
// few distinct outputs in a dozen runs of the same bursty cluster on a
// loaded machine). Two goroutines here price step sizes that land in the
// same memo slots (n and n + 64) on one roofline, each with its own
// batch, and every time must be the one a roofline alone gives. A torn
// read needs a thread to stop between two loads, so this rarely fails by
// its values; it is the race detector's case (`go test -race`, run by
// .ci/run on the tests that step engines on several goroutines), and
// TestLatencyModelsAreReadOnlyWhileStepping is the deterministic one.
func TestRooflineSharedAcrossGoroutines(t *testing.T) {
	cfg := llamaH100(t)
	shape := func(n int64) Batch {
		var b Batch
		b.Beta.AddPrefill(0, n)
		b.Beta.AddDecode(1000, 70)
		return b
	}
	const sizes = 256
	want := make([]int64, sizes)
	for n := range want {
		b := shape(int64(n + 1))
		want[n] = DefaultRoofline(cfg).StepTimeUs(&b) // a fresh roofline: no memo
	}
	shared := DefaultRoofline(cfg)
	const iters = 5_000
	errs := make(chan error, 2)
	for g := range 2 {
		go func() {
			var b Batch // the goroutine's engine's batch
			for i := range iters {
				n := (i*7 + g*64) % sizes
				s := shape(int64(n + 1))
				b.Beta = s.Beta
				if got := shared.StepTimeUs(&b); got != want[n] {
					errs <- fmt.Errorf("goroutine %d, step %d of %d tokens: %d µs, alone %d µs", g, i, n+1, got, want[n])
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		require.NoError(t, <-errs)
	}
}

// TestLatencyModelsAreReadOnlyWhileStepping: a model the engines of a
// pool share (deploy.Instance.Template) must not change while it prices
// steps, or engines stepped on several goroutines race on it (the
// roofline's kernel memo once lived in it). Noisy and SlowStart have
// state by design and are each instance's own (deploy.Instance.At,
// cluster's autoscaler).
func TestLatencyModelsAreReadOnlyWhileStepping(t *testing.T) {
	cfg := llamaH100(t)
	roof := DefaultRoofline(cfg)
	flat := DefaultRoofline(cfg)
	flat.Kernels = false
	phys := &Physics{Cfg: cfg}
	for i := range phys.Beta {
		phys.Beta[i] = 1e-3 * float64(i+1)
	}
	box := &Blackbox{Alpha: [3]float64{100, 0.1, 1}, Beta: [3]float64{500, 1, 20}}
	for _, tc := range []struct {
		name  string
		model LatencyModel
		copy  func() any
		now   func() any
	}{
		{"roofline", roof, func() any { c := *roof; return c }, func() any { return *roof }},
		{"roofline without kernels", flat, func() any { c := *flat; return c }, func() any { return *flat }},
		{"physics", phys, func() any { c := *phys; return c }, func() any { return *phys }},
		{"blackbox", box, func() any { c := *box; return c }, func() any { return *box }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.copy()
			var b Batch
			for n := range 300 {
				b.Beta = features.BetaInput{}
				b.Beta.AddPrefill(int64(n), int64(n%97+1))
				b.Beta.AddDecode(int64(1000+n), int64(70+n%5))
				require.Positive(t, tc.model.StepTimeUs(&b))
			}
			require.True(t, reflect.DeepEqual(before, tc.now()), "pricing steps changed the model")
		})
	}
}
