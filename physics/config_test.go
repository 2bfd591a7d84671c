package physics

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustModel(t testing.TB, name string) ModelSpec {
	t.Helper()
	m, err := LoadModel(name)
	require.NoError(t, err)
	return m
}

func mustHW(t testing.TB, name string) HardwareSpec {
	t.Helper()
	h, err := LoadHardware(name)
	require.NoError(t, err)
	return h
}

func knobs(blocksGPU int64) VLLMKnobs {
	k := DefaultVLLMKnobs()
	k.TotalKVBlocksGPU = blocksGPU
	return k
}

func relEq(t *testing.T, want, got float64, what string) {
	t.Helper()
	if want == 0 {
		assert.Equal(t, 0.0, got, what)
		return
	}
	assert.InDelta(t, 0, (got-want)/want, 1e-15, "%s: want %v, got %v", what, want, got)
}

// Each expectation below is written out from first principles (2 FLOPs per
// multiply-add, weights h×out per projection) rather than from the code.
func TestPhysicsConstantsDense(t *testing.T) {
	cases := []struct {
		model, hw string
		tp        int
		// expectations
		flopsLinear, weightBytes, kvBytes, peakFlops, peakBW, comm float64
	}{
		{
			model: "llama-3.1-8b", hw: "h100-sxm", tp: 1,
			flopsLinear: 32*(4*4096*(4096+1024)+3*2*4096*14336) + 2*4096*128256,
			weightBytes: 32*(2*4096*(4096+1024)*2+3*4096*14336*2) + 4096*128256*2,
			kvBytes:     2 * 32 * 1024 * 2, // K and V, 32 layers, 8×128 wide, bf16
			peakFlops:   989.4e12, peakBW: 3.35e12, comm: 0,
		},
		{
			model: "llama-2-7b", hw: "a100-80gb", tp: 2,
			flopsLinear: 32*(4*4096*(4096+4096)+3*2*4096*11008) + 2*4096*32000,
			weightBytes: 32*(2*4096*(4096+4096)*2+3*4096*11008*2) + 4096*32000*2,
			kvBytes:     2 * 32 * 4096 * 2,
			peakFlops:   2 * 312e12, peakBW: 2 * 2.039e12,
			comm: 32 * 2 * 4096 * 2 * 2 * 1.0 / 2, // 2 all-reduces × h × fp16 × 2(tp−1)/tp
		},
		{
			model: "llama-2-70b", hw: "h100-sxm", tp: 4,
			flopsLinear: 80*(4*8192*(8192+1024)+3*2*8192*28672) + 2*8192*32000,
			weightBytes: 80*(2*8192*(8192+1024)*2+3*8192*28672*2) + 8192*32000*2,
			kvBytes:     2 * 80 * 1024 * 2,
			peakFlops:   4 * 989.4e12, peakBW: 4 * 3.35e12,
			comm: 80 * 2 * 8192 * 2 * 2 * 3.0 / 4,
		},
		{
			model: "gpt2", hw: "l40s", tp: 1,
			flopsLinear: 12*(4*768*(768+768)+2*2*768*3072) + 2*768*50257,
			weightBytes: 12*(2*768*(768+768)*4+2*768*3072*4) + 768*50257*4,
			kvBytes:     2 * 12 * 768 * 4,
			peakFlops:   362.05e12, peakBW: 0.864e12, comm: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			c, err := NewPhysicsConfig(mustModel(t, tc.model), mustHW(t, tc.hw), tc.tp, knobs(1000))
			require.NoError(t, err)
			relEq(t, tc.flopsLinear, c.FlopsLinearPerToken, "flops_linear_per_token")
			relEq(t, tc.weightBytes, c.WeightBytesTotal, "weight_bytes_total")
			relEq(t, tc.kvBytes, c.KVBytesPerToken, "kv_bytes_per_token")
			relEq(t, tc.peakFlops, c.HWPeakFlops, "hw_peak_flops")
			relEq(t, tc.peakBW, c.HWPeakBandwidth, "hw_peak_bandwidth")
			relEq(t, tc.comm, c.CommBytesPerToken, "comm_bytes_per_token")
			relEq(t, 16*tc.kvBytes, c.BlockSizeBytes, "block_size_bytes")
			relEq(t, math.Max(8192*tc.flopsLinear/tc.peakFlops, tc.weightBytes/tc.peakBW), c.RooflineStepTime, "roofline_step_time")
			relEq(t, float64(c.Model.NumLayers)*2*float64(c.Model.HiddenSize), c.AttnFlopsPerWorkUnit, "attention work unit")
			assert.Equal(t, c.WeightBytesTotal, c.EffectiveWeightBytes(1), "dense: effective bytes do not depend on the batch")
			assert.Equal(t, c.WeightBytesTotal, c.EffectiveWeightBytes(8192))
			assert.Equal(t, 0.0, c.MoEActivation(100), "dense models activate no experts")
		})
	}
}

func TestPhysicsConstantsHardwareCeilings(t *testing.T) {
	h := mustHW(t, "h100-sxm")
	for _, tp := range []int{1, 2, 4} {
		c, err := NewPhysicsConfig(mustModel(t, "llama-3.1-8b"), h, tp, knobs(1000))
		require.NoError(t, err)
		// More GPUs must mean a higher ceiling: the seed divided instead.
		relEq(t, float64(tp)*989.4e12, c.HWPeakFlops, "flops")
		relEq(t, float64(tp)*3.35e12, c.HWPeakBandwidth, "bandwidth")
		relEq(t, float64(tp)*64e9*0.75, c.HWPCIeBandwidthEff, "pcie")
		relEq(t, 450e9, c.HWInterconnectBW, "interconnect is one device's link")
	}
}

func TestPhysicsConstantsMoE(t *testing.T) {
	m := mustModel(t, "mixtral-8x7b")
	c, err := NewPhysicsConfig(m, mustHW(t, "h100-sxm"), 2, knobs(1000))
	require.NoError(t, err)
	const L, h, I, E, k, kvDim = 32.0, 4096.0, 14336.0, 8.0, 2.0, 1024.0
	attnW := 2 * h * (h + kvDim) * 2
	expert := 3 * h * I * 2
	router := h * E * 2
	lm := h * 32000 * 2
	// A token runs through top_k whole experts.
	relEq(t, L*(4*h*(h+kvDim)+3*2*h*I*k+2*h*E)+2*h*32000, c.FlopsLinearPerToken, "flops_linear_per_token")
	relEq(t, L*(attnW+k*expert+router)+lm, c.WeightBytesTotal, "weight_bytes_total")
	relEq(t, L*(attnW+E*expert+router)+2*lm, c.ParamBytesResident, "resident parameters")
	assert.InDelta(t, 46.70e9, c.ParamBytesResident/2, 0.01e9, "Mixtral-8x7B has 46.7B parameters")
	relEq(t, 0.25, c.MoETopKFraction, "top_k / E")

	// effective_weight_bytes: top_k experts for one token, all of them for many.
	relEq(t, c.WeightBytesTotal, c.EffectiveWeightBytes(1), "B=1")
	relEq(t, c.WeightBytesTotal, c.EffectiveWeightBytes(0), "B=0 is treated as 1")
	relEq(t, L*(attnW+router)+lm+L*expert*E*(1-math.Pow(0.75, 4)), c.EffectiveWeightBytes(4), "B=4")
	relEq(t, L*(attnW+router)+lm+L*expert*E, c.EffectiveWeightBytes(4096), "B→∞ loads every expert")

	assert.Equal(t, 0.0, c.MoEActivation(0), "empty step guard")
	assert.Equal(t, 0.25, c.MoEActivation(1))
	assert.Equal(t, 1-math.Pow(0.75, 50), c.MoEActivation(50))
	assert.Equal(t, 1.0, c.MoEActivation(2048), "0.75^2048 underflows")
}

func TestKVBlocksDerivedFromMemory(t *testing.T) {
	m := mustModel(t, "llama-3.1-8b")
	h := mustHW(t, "h100-sxm")
	c, err := NewPhysicsConfig(m, h, 1, knobs(0))
	require.NoError(t, err)
	b := c.KVBudget
	relEq(t, 80*0.9*(1<<30), b.Requested, "requested")
	relEq(t, c.ParamBytesResident, b.Weights, "weights")
	relEq(t, 8192*(2*14336+4*4096)*2+256*128256*4, b.Activations, "activations")
	relEq(t, 16*131072, b.BlockBytes, "block bytes")
	assert.Equal(t, int64(math.Floor((b.Requested-b.Weights-b.Activations-b.Overhead)/b.BlockBytes)), c.Knobs.TotalKVBlocksGPU)
	// Public vLLM logs put this setup at roughly 450K KV tokens.
	tokens := c.Knobs.TotalKVBlocksGPU * 16
	assert.Greater(t, tokens, int64(420_000))
	assert.Less(t, tokens, int64(480_000))

	// TP 2 halves the weights per device, so more than twice the blocks fit.
	c2, err := NewPhysicsConfig(m, h, 2, knobs(0))
	require.NoError(t, err)
	assert.Greater(t, c2.Knobs.TotalKVBlocksGPU, 2*c.Knobs.TotalKVBlocksGPU)

	// Given blocks are kept.
	c3, err := NewPhysicsConfig(m, h, 1, knobs(1234))
	require.NoError(t, err)
	assert.Equal(t, int64(1234), c3.Knobs.TotalKVBlocksGPU)
	assert.Zero(t, c3.KVBudget.Blocks)

	_, err = NewPhysicsConfig(mustModel(t, "mixtral-8x7b"), h, 1, knobs(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not fit")
}

func TestKVHeadsReplicatedBeyondTP(t *testing.T) {
	m := mustModel(t, "qwen2.5-7b") // 4 KV heads
	h := mustHW(t, "h100-sxm")
	c4, err := NewPhysicsConfig(m, h, 4, knobs(1000))
	require.NoError(t, err)
	relEq(t, 2*28*4*128*2, c4.KVBytesPerToken, "tp=4: one head per rank")
	// 28 heads: tp=7 divides heads, kv=4 and 7 do not divide each other.
	_, err = NewPhysicsConfig(m, h, 7, knobs(1000))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "num_key_value_heads")
}

func TestNewPhysicsConfigErrors(t *testing.T) {
	m := mustModel(t, "llama-3.1-8b")
	h := mustHW(t, "h100-sxm")
	cases := []struct {
		name string
		mod  func(*ModelSpec, *HardwareSpec, *int, *VLLMKnobs)
		want string
	}{
		{"tp not dividing heads", func(_ *ModelSpec, _ *HardwareSpec, tp *int, _ *VLLMKnobs) { *tp = 3 }, "does not divide num_attention_heads"},
		{"tp zero", func(_ *ModelSpec, _ *HardwareSpec, tp *int, _ *VLLMKnobs) { *tp = 0 }, "tp must be >= 1"},
		{"zero heads", func(m *ModelSpec, _ *HardwareSpec, _ *int, _ *VLLMKnobs) { m.NumHeads = 0 }, `"num_attention_heads"`},
		{"no batch budget", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.MaxBatchedTokens = 0 }, `"max_batched_tokens"`},
		{"negative batch budget", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.MaxBatchedTokens = -5 }, `"max_batched_tokens"`},
		{"no seqs", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.MaxNumSeqs = 0 }, `"max_num_seqs"`},
		{"no block size", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.BlockSizeTokens = 0 }, `"block_size_tokens"`},
		{"utilization", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.GPUMemoryUtilization = 1.2 }, `"gpu_memory_utilization"`},
		{"offload without cpu blocks", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.CPUOffloading = true }, `"total_kv_blocks_cpu"`},
		{"cpu blocks without offload", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.TotalKVBlocksCPU = 10 }, `"total_kv_blocks_cpu"`},
		{"tp without interconnect", func(_ *ModelSpec, h *HardwareSpec, tp *int, _ *VLLMKnobs) {
			*tp = 2
			h.InterconnectBandwidthGBs = 0
		}, `"interconnect_bandwidth_gb_s"`},
		{"no memory to derive blocks", func(_ *ModelSpec, h *HardwareSpec, _ *int, k *VLLMKnobs) {
			h.MemoryGiB = 0
			k.TotalKVBlocksGPU = 0
		}, `"memory_gib"`},
		{"unknown bytes", func(m *ModelSpec, _ *HardwareSpec, _ *int, _ *VLLMKnobs) { m.BytesPerParam = 0 }, `"bytes_per_param"`},
		// A huge block size is named as such, not as
		// a model that does not fit.
		{"huge block size", func(_ *ModelSpec, _ *HardwareSpec, _ *int, k *VLLMKnobs) { k.BlockSizeTokens = 1e9 }, `"block_size_tokens": must be in [1, 1024]`},
		{"block larger than the KV space", func(_ *ModelSpec, h *HardwareSpec, _ *int, k *VLLMKnobs) {
			k.BlockSizeTokens, k.TotalKVBlocksGPU = 1024, 0
			h.MemoryGiB = 18.7 // 0.9 × 18.7 GiB minus weights, activations and overhead: 0.06 GiB, less than one 0.125 GiB block
		}, `"block_size_tokens": one block of 1024 tokens takes 0.12 GiB per device`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mm, hh, tp, k := m, h, 1, knobs(1000)
			tc.mod(&mm, &hh, &tp, &k)
			_, err := NewPhysicsConfig(mm, hh, tp, k)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), "error %q should mention %s", err, tc.want)
		})
	}
}

// Expert parallelism over DP × TP ranks: each GPU holds 1/EP of the routed
// experts (so more KV cache), a step reads the local experts the whole
// group's tokens touch, and every MoE layer adds an all-gather and a
// reduce-scatter.
func TestExpertParallel(t *testing.T) {
	m, err := LoadModel("qwen3-30b-a3b-instruct-2507")
	require.NoError(t, err)
	h, err := LoadHardware("rtx-pro-6000")
	require.NoError(t, err)
	k := DefaultVLLMKnobs()
	k.MaxNumSeqs, k.MaxBatchedTokens = 128, 2048
	one, err := NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	ep, err := NewParallelConfig(m, h, Parallel{TP: 1, DP: 2, ExpertParallel: true}, k)
	require.NoError(t, err)
	dp, err := NewParallelConfig(m, h, Parallel{TP: 1, DP: 2}, k)
	require.NoError(t, err)
	require.Equal(t, 2, ep.EP)
	require.Equal(t, 1, dp.EP)

	// DP alone changes nothing for one engine.
	require.Equal(t, one.Knobs.TotalKVBlocksGPU, dp.Knobs.TotalKVBlocksGPU)
	require.Equal(t, one.EffectiveWeightBytes(512), dp.ExpertWeightBytesEP(512))
	require.Zero(t, dp.EPExchangeBytesPerToken())

	// Half the experts off the GPU: 64 × 48 experts of 3 × 2048 × 768 bf16
	// weights, 28.99 GB, become KV blocks of 48 × 4 × 128 × 2 × 2 × 16 bytes.
	halfExperts := 64.0 * 48 * 3 * 2048 * 768 * 2
	block := 48.0 * 4 * 128 * 2 * 2 * 16
	require.InDelta(t, halfExperts/block, float64(ep.Knobs.TotalKVBlocksGPU-one.Knobs.TotalKVBlocksGPU), 1)

	// One token touches 8 experts; the group's two tokens 15.9 of 128 on
	// average, half of them local.
	expert := 48.0 * 3 * 2048 * 768 * 2
	require.InDelta(t, ep.WeightBytesNonExpert+expert*64*(1-math.Pow(1-8.0/128, 2)), ep.ExpertWeightBytesEP(1), 1)
	// Many tokens touch every local expert: the rank reads half of them.
	require.InDelta(t, ep.WeightBytesNonExpert+expert*64, ep.ExpertWeightBytesEP(4096), expert*1e-6)
	// Alone, an engine assumes the other rank has as many tokens; its
	// group says how many the ranks have in all.
	require.Equal(t, ep.ExpertWeightBytesEP(3), ep.ExpertWeightBytesGroup(6))
	require.InDelta(t, ep.WeightBytesNonExpert+expert*64*(1-math.Pow(1-8.0/128, 5)), ep.ExpertWeightBytesGroup(5), 1)
	require.Equal(t, ep.ExpertWeightBytesGroup(1), ep.ExpertWeightBytesGroup(0), "at least one token")
	require.Equal(t, dp.EffectiveWeightBytes(7), dp.ExpertWeightBytesGroup(7), "without expert parallelism")
	// All-gather and reduce-scatter of the other rank's hidden states, per
	// layer.
	require.Equal(t, 48.0*2*2048*2*1, ep.EPExchangeBytesPerToken())

	_, err = NewParallelConfig(m, h, Parallel{TP: 1, DP: 3, ExpertParallel: true}, k)
	require.ErrorContains(t, err, "does not divide the 128 experts")
	dense, err := LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	_, err = NewParallelConfig(dense, h, Parallel{TP: 1, DP: 2, ExpertParallel: true}, k)
	require.ErrorContains(t, err, "needs a mixture-of-experts model")
	_, err = NewParallelConfig(m, h, Parallel{TP: 1, DP: 0}, k)
	require.ErrorContains(t, err, "data-parallel size must be >= 1")
}

func TestHardwareForDevice(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA GeForce RTX 4090":                      "RTX-4090",
		"nvidia rtx pro 6000 blackwell server edition": "RTX-PRO-6000",
		"NVIDIA H100 80GB HBM3":                        "H100-SXM",
	} {
		h, ok := HardwareForDevice(name)
		require.True(t, ok, name)
		require.Equal(t, want, h.Name)
	}
	for _, name := range []string{"", "NVIDIA A100 80GB PCIe", "NVIDIA Quantum 9000"} {
		_, ok := HardwareForDevice(name)
		require.False(t, ok, name)
	}
}
