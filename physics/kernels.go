package physics

import "math"

// Kernels is the time of a forward pass's kernels on one GPU type, from
// measured per-kernel profiles rather than one efficiency over the
// datasheet (docs/physics-spec.md, "Kernel times"): each projection GEMM
// by its shape (M rows of activations, N output and K input features on
// one tensor-parallel rank), each elementwise kernel (fused residual add
// and norm, rotary embedding, activation, embedding lookup) by the bytes
// it moves, and each layer's attention by its prefill FLOPs and the KV it
// reads. The GPU enters through two figures of its spec, its datasheet
// HBM bandwidth and its measured sustained GEMM rate
// (HardwareSpec.SustainedTFlops), so the same constants serve a GPU
// without a profile.
//
// The GEMM constants are a fit on Vidur's measured GEMMs of six models on
// H100 and four on A100 (testdata/vidur/; CUDA kernel durations, 1 to
// 32,768 tokens, TP 1 to 8), pooled over both GPUs; the elementwise and
// attention constants a fit on vLLM 0.19's own kernels on an RTX 4090 and
// an RTX PRO 6000 (LLMServingSim's layerwise profiles,
// testdata/llmservingsim-kernels/). The fits and their leave-one-model-out
// and leave-one-GPU-out errors are a test
// (TestKernelConstantsFitTheProfiles), which fails when these constants
// are not what the fits give. A GEMM takes
//
//	t = GEMMLatency + ((bytes / (GEMMBandwidthShare · BwPeak))^q + (FLOPs / (GEMMRateShare · GEMMRate))^q)^(1/q)
//
// with q = GEMMBlend: a fixed latency (a kernel's ramp and tail, ~5 µs on
// both GPUs), then a smooth maximum of the weight and activation stream
// and the tensor-core work, which a hard maximum would make too fast
// where the two are close (a GEMM of a few hundred rows). An elementwise
// kernel takes its latency plus its bytes at its share of the bandwidth.
type Kernels struct {
	// BwPeak is one GPU's datasheet HBM bandwidth, bytes/s.
	BwPeak float64
	// GEMMRate is one GPU's sustained GEMM rate, FLOP/s.
	GEMMRate float64
}

// The GEMM constants (pooled H100 and A100 fit).
const (
	GEMMLatencyUs      = 4.93
	GEMMBandwidthShare = 0.875
	GEMMRateShare      = 1.012
	GEMMBlend          = 1.508
)

// ElementwiseOp names one of the elementwise kernels of vLLM's decoder
// layer, as vLLM's layerwise profile times them.
type ElementwiseOp uint8

const (
	// OpNorm is vLLM's fused residual add and RMSNorm (fused_add_rms_norm:
	// reads the hidden state and the residual, writes both): twice a
	// layer, and the final norm once a step. It is not sharded: every
	// tensor-parallel rank normalizes the whole hidden state.
	OpNorm  ElementwiseOp = iota
	OpRope                // rotary embedding of the rank's query and key heads, in place
	OpAct                 // SiLU-and-multiply of the rank's MLP width (dense MLPs; a MoE's is inside its fused kernel)
	OpEmbed               // embedding lookup, once a step
	numElementwiseOps
)

func (o ElementwiseOp) String() string {
	return [...]string{"norm", "rope", "act", "embed"}[o]
}

// elementwiseConst holds each op's latency (µs) and share of the
// datasheet bandwidth, fitted on vLLM 0.19's own kernels
// (TestKernelConstantsFitTheProfiles). Shares above 1 are real: a
// forward pass's activations of a few thousand tokens stay in the GPU's
// L2 cache between the kernel that writes them and the one that reads
// them.
var elementwiseConst = [numElementwiseOps]struct{ latencyUs, share float64 }{
	OpNorm:  {2.26, 2.94},
	OpRope:  {2.35, 2.65},
	OpAct:   {2.35, 2.41},
	OpEmbed: {3.40, 4.39},
}

// ElementwiseConstants returns op's latency in µs and its share of the
// datasheet bandwidth.
func ElementwiseConstants(op ElementwiseOp) (latencyUs, share float64) {
	c := elementwiseConst[op]
	return c.latencyUs, c.share
}

// The attention constants, fitted on vLLM 0.19's own attention kernels
// (FlashAttention through vLLM's attention backend;
// TestKernelConstantsFitTheProfiles): a latency per layer, prefill
// attention's causal FLOPs at a share of the sustained GEMM rate, decode
// attention's KV read at a share of the datasheet bandwidth, and a
// prefill chunk's read of its context's KV, once per query head (a small
// chunk after a long context is a KV read, and the prefill kernel reads
// the KV of each query head's group for each head; the same count as
// feature spec 3.0's attention_read), at its own share.
const (
	AttentionLatencyUs      = 11.1
	PrefillAttentionShare   = 0.494
	DecodeAttentionShare    = 0.817
	PrefillContextReadShare = 0.569
)

// AttentionSeconds is one layer's attention on one tensor-parallel rank:
// its latency, the prefill chunks' FLOPs (2 × the rank's query width per
// (query, key) pair of Σ (context + chunk) × chunk), the decode queries'
// KV read, and the prefill chunks' read of their context's KV per query
// head. 0 for a step without attention work.
func (g Kernels) AttentionSeconds(prefillFlops, decodeKVBytes, prefillContextBytes float64) float64 {
	if !(prefillFlops > 0 || decodeKVBytes > 0) {
		return 0
	}
	return AttentionLatencyUs*1e-6 + prefillFlops/(PrefillAttentionShare*g.GEMMRate) +
		decodeKVBytes/(DecodeAttentionShare*g.BwPeak) + prefillContextBytes/(PrefillContextReadShare*g.BwPeak)
}

// The fused mixture-of-experts kernel (vLLM's fused_moe: one launch
// computes every active expert's gate/up and down projections for the
// tokens routed to it): a grouped GEMM priced like one GEMM of all the
// active experts' weights and all the routed FLOPs, with the GEMM's
// bandwidth share and blend, its own latency and a compute share below
// cuBLAS's (its Triton kernels reach ~0.75 of the sustained rate). Fitted
// on vLLM 0.19's fused MoE layer of Qwen3-30B-A3B on an RTX PRO 6000, 1 to
// 2,048 tokens over 8 to 128 active experts
// (TestKernelConstantsFitTheProfiles).
const (
	MoELatencyUs = 8.52
	MoERateShare = 0.746
)

// FusedMoESeconds is one MoE layer's routed experts on one rank: the
// active experts' weights and the routed tokens' FLOPs.
func (g Kernels) FusedMoESeconds(weightBytes, flops float64) float64 {
	if !(weightBytes > 0 || flops > 0) {
		return 0
	}
	return MoELatencyUs*1e-6 + blend(weightBytes/(GEMMBandwidthShare*g.BwPeak), flops/(MoERateShare*g.GEMMRate))
}

// Kernels returns the kernel model of the hardware.
func (h HardwareSpec) Kernels() Kernels {
	return Kernels{BwPeak: h.BwPeakTBs * 1e12, GEMMRate: h.SustainedTFlops() * 1e12}
}

// GEMMSeconds is the time of an m × k by k × n GEMM whose elements take
// elemBytes each: the weights (n × k), the activations read (m × k) and
// written (m × n).
func (g Kernels) GEMMSeconds(m, n, k, elemBytes float64) float64 {
	if !(m > 0) {
		return 0
	}
	mem := elemBytes * (n*k + m*k + m*n) / (GEMMBandwidthShare * g.BwPeak)
	cmp := 2 * m * n * k / (GEMMRateShare * g.GEMMRate)
	return GEMMLatencyUs*1e-6 + blend(mem, cmp)
}

// blend is the smooth maximum (a^q + b^q)^(1/q), q = GEMMBlend, of two
// non-negative times, computed from the larger so that neither power
// overflows.
func blend(a, b float64) float64 {
	hi, lo := a, b
	if lo > hi {
		hi, lo = lo, hi
	}
	if !(hi > 0) || math.IsInf(hi, 1) {
		return max(hi, 0)
	}
	return hi * math.Pow(1+math.Pow(lo/hi, GEMMBlend), 1/GEMMBlend)
}

// ElementwiseSeconds is the time of one elementwise kernel that moves
// bytes (read and written).
func (g Kernels) ElementwiseSeconds(op ElementwiseOp, bytes float64) float64 {
	if !(bytes > 0) {
		return 0
	}
	c := elementwiseConst[op]
	return c.latencyUs*1e-6 + bytes/(c.share*g.BwPeak)
}

// ElementwiseBytes is what one elementwise op moves (reads and writes)
// for tokens tokens on one tensor-parallel rank of c's model: the norm and
// the embedding work on the whole hidden state on every rank, the rotary
// embedding on the rank's query and key heads, the activation on the
// rank's MLP width (0 for a mixture of experts, whose activation runs
// inside its fused expert kernel).
func (c *PhysicsConfig) ElementwiseBytes(op ElementwiseOp, tokens float64) float64 {
	m := c.Model
	b, h, tp := m.BytesPerParam, float64(m.HiddenSize), float64(c.TP)
	switch op {
	case OpNorm:
		return 4 * tokens * h * b
	case OpEmbed:
		return 2 * tokens * h * b
	case OpRope:
		return 2 * tokens * (c.QDim + c.KVDim) / tp * b
	case OpAct:
		if m.IsMoE() {
			return 0
		}
		passes := 2.0 // read, write
		if m.NMLPProj == 3 {
			passes = 3 // read gate and up, write their product
		}
		return passes * tokens * float64(m.IntermediateSize) / tp * b
	}
	return 0
}

// LayerElementwiseSeconds is one layer's elementwise kernels for tokens
// tokens: two fused add-and-norms, the rotary embedding and the
// activation (vLLM's decoder layer).
func (g Kernels) LayerElementwiseSeconds(c *PhysicsConfig, tokens float64) float64 {
	if !(tokens > 0) {
		return 0
	}
	return 2*g.ElementwiseSeconds(OpNorm, c.ElementwiseBytes(OpNorm, tokens)) +
		g.ElementwiseSeconds(OpRope, c.ElementwiseBytes(OpRope, tokens)) +
		g.ElementwiseSeconds(OpAct, c.ElementwiseBytes(OpAct, tokens))
}

// StepElementwiseSeconds is a step's kernels outside its layers: the
// embedding lookup and the final norm.
func (g Kernels) StepElementwiseSeconds(c *PhysicsConfig, tokens float64) float64 {
	if !(tokens > 0) {
		return 0
	}
	return g.ElementwiseSeconds(OpEmbed, c.ElementwiseBytes(OpEmbed, tokens)) + g.ElementwiseSeconds(OpNorm, c.ElementwiseBytes(OpNorm, tokens))
}
