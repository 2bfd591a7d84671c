// Package features computes the frozen physics-normalized feature vectors of
// docs/physics-spec.md (spec 1.0): 11 alpha features for the arrival-to-schedule delay
// and 16 beta features for the step time. A latency is a dot product of a
// coefficient vector with one of these vectors.
//
// AlphaFeatures and BetaFeatures are pure, allocate nothing and read the
// physics.PhysicsConfig only. docs/physics-spec.md states each formula, its
// units and where its inputs come from in simulation and in traces; the
// golden fixture testdata/physics_features_golden.json pins the values that
// the Python twin must reproduce.
package features

import (
	"math"

	"github.com/blis-sim/blis/physics"
)

const (
	// Epsilon floors every denominator.
	Epsilon = 1e-6
	// FeatureMax is the upper clamp of every feature; the lower is 0.
	FeatureMax = 100.0

	NumAlpha = 11
	NumBeta  = 16
)

// AlphaNames names the alpha features in vector order.
var AlphaNames = [NumAlpha]string{
	"batch_saturation",         // 1
	"kv_pressure",              // 2
	"admission_compute",        // 3
	"base_bias",                // 4
	"queue_drain",              // 5 gated
	"queue_memory_interaction", // 6 gated
	"prefix_cache_benefit",     // 7 gated
	"memory_admission_gap",     // 8 gated
	"preemption_disruption",    // 9 gated
	"cpu_offload_expansion",    // 10 gated
	"queued_regime_bias",       // 11 gated
}

// BetaNames names the beta features in vector order.
var BetaNames = [NumBeta]string{
	"prefill_linear_compute",   // 1
	"prefill_attention",        // 2
	"decode_weight_loading",    // 3
	"decode_attention_compute", // 4
	"kv_read",                  // 5
	"batch_utilization",        // 6
	"prefill_decode_mix",       // 7
	"moe_activation",           // 8
	"tp_communication",         // 9
	"gqa_ratio",                // 10
	"fixed_overhead",           // 11
	"preemption_overhead",      // 12
	"cpu_offload_transfer",     // 13
	"cpu_offload_kv_read",      // 14
	"chunked_prefill_mixed",    // 15
	"bias",                     // 16
}

// AlphaInput is the state seen by a request when it is queued. JSON keys are
// the golden fixture's.
type AlphaInput struct {
	RunningDepth int64   `json:"running_depth"`  // requests running in the reference step
	WaitingDepth int64   `json:"waiting_depth"`  // requests waiting in the reference step
	KVUsageRatio float64 `json:"kv_usage_ratio"` // GPU KV blocks in use / total, [0,1]
	PromptTokens int64   `json:"prompt_tokens"`  // this request's prompt
	// PrefixHitRatio is the share of the prompt served from the prefix
	// cache; 0 when prefix caching is off or unknown.
	PrefixHitRatio float64 `json:"prefix_hit_ratio"`
	KVFreeBytes    float64 `json:"kv_free_bytes"` // free GPU KV bytes, all TP ranks
	PreemptionEMA  float64 `json:"preemption_ema"`
}

// BetaInput is the composition of one engine step. JSON keys are the golden
// fixture's.
type BetaInput struct {
	PrefillTokens   int64 `json:"prefill_tokens"`
	DecodeTokens    int64 `json:"decode_tokens"`
	ScheduledTokens int64 `json:"scheduled_tokens"`
	NumPrefillReqs  int64 `json:"num_prefill_reqs"`
	NumDecodeReqs   int64 `json:"num_decode_reqs"`
	RunningDepth    int64 `json:"running_depth"`
	// SumPrefillAttnWork is Σ (computed_i + chunk_i) × chunk_i over the
	// step's prefill requests, chunk_i being the tokens scheduled this step.
	SumPrefillAttnWork float64 `json:"sum_prefill_attn_work"`
	// DecodeContextTokens is Σ context length over decode requests.
	DecodeContextTokens   int64   `json:"decode_context_tokens"`
	SumDecodeKVBlocks     int64   `json:"sum_decode_kv_blocks"`
	PreemptionEMA         float64 `json:"preemption_ema"`
	TransferBlocks        int64   `json:"transfer_blocks"`          // GPU↔CPU KV blocks moved this step
	CPUResidentReadBlocks int64   `json:"cpu_resident_read_blocks"` // CPU-resident KV blocks read this step
}

// clamp bounds a feature to [0, FeatureMax] and turns −0 into +0. NaN is
// returned as NaN so that an invalid input shows instead of hiding as a bound.
func clamp(x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x > FeatureMax {
		return FeatureMax
	}
	return x
}

func clamp01(x float64) float64 {
	if x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}

func div(n, d float64) float64 { return n / max(Epsilon, d) }

func indicator(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Gate is the probabilistic-OR congestion gate g = s + m − s·m, with batch
// saturation s = running/max_num_seqs and KV pressure m both clamped to [0,1].
func Gate(c *physics.PhysicsConfig, runningDepth int64, kvUsageRatio float64) (s, m, g float64) {
	s = clamp01(div(float64(runningDepth), float64(c.Knobs.MaxNumSeqs)))
	m = clamp01(kvUsageRatio)
	sm := float64(s * m) // the conversion forbids fusing into an FMA, for parity with Python
	g = s + m - sm
	return s, m, g
}

// AlphaFeatures computes the 11 alpha features.
func AlphaFeatures(c *physics.PhysicsConfig, in AlphaInput) [NumAlpha]float64 {
	s, m, g := Gate(c, in.RunningDepth, in.KVUsageRatio)
	prompt := float64(in.PromptTokens)
	waiting := float64(in.WaitingDepth)
	var f [NumAlpha]float64
	f[0] = s
	f[1] = m
	f[2] = div(prompt*c.FlopsLinearPerToken, c.HWPeakFlops)
	f[3] = 1
	f[4] = g * math.Log1p(max(0, waiting)) * c.RooflineStepTime // log1p is NaN below −1
	f[5] = div(g*m*waiting, float64(c.Knobs.MaxNumSeqs))
	f[6] = div(g*in.PrefixHitRatio*prompt, float64(c.Knobs.MaxBatchedTokens))
	f[7] = div(g*prompt*c.KVBytesPerToken, in.KVFreeBytes)
	f[8] = g * in.PreemptionEMA
	f[9] = div(g*indicator(c.Knobs.CPUOffloading)*c.CPUKVCapacityBytes, c.GPUKVCapacityBytes)
	f[10] = g
	for i := range f {
		f[i] = clamp(f[i])
	}
	return f
}

// BetaFeatures computes the 16 beta features.
func BetaFeatures(c *physics.PhysicsConfig, in BetaInput) [NumBeta]float64 {
	prefill := float64(in.PrefillTokens)
	decode := float64(in.DecodeTokens)
	sched := float64(in.ScheduledTokens)
	offload := indicator(c.Knobs.CPUOffloading)
	var f [NumBeta]float64
	f[0] = div(prefill*c.FlopsLinearPerToken, c.HWPeakFlops)
	f[1] = div(in.SumPrefillAttnWork*c.AttnFlopsPerWorkUnit, c.HWPeakFlops)
	if in.DecodeTokens > 0 {
		f[2] = div(c.EffectiveWeightBytes(in.ScheduledTokens), c.HWPeakBandwidth)
	}
	f[3] = div(float64(in.DecodeContextTokens)*c.AttnFlopsPerWorkUnit, c.HWPeakFlops)
	f[4] = div(float64(in.SumDecodeKVBlocks)*c.BlockSizeBytes, c.HWPeakBandwidth)
	f[5] = div(sched, float64(c.Knobs.MaxBatchedTokens))
	f[6] = div(prefill, prefill+decode)
	f[7] = c.MoEActivation(in.ScheduledTokens)
	f[8] = div(c.CommBytesPerToken*sched, c.HWInterconnectBW)
	f[9] = c.GQARatio
	f[10] = 1 / max(1, sched)
	f[BetaPreemptionIndex] = in.PreemptionEMA
	f[12] = div(offload*float64(in.TransferBlocks)*c.BlockSizeBytes, c.HWPCIeBandwidthEff)
	f[13] = div(offload*float64(in.CPUResidentReadBlocks)*c.BlockSizeBytes, c.HWPCIeBandwidthEff)
	f[14] = indicator(c.Knobs.ChunkedPrefillEnabled && in.NumPrefillReqs > 0 && in.NumDecodeReqs > 0)
	f[15] = 1
	for i := range f {
		f[i] = clamp(f[i])
	}
	return f
}

// BetaPreemptionIndex is the position of preemption_overhead, the only beta
// feature that reads PreemptionEMA.
const BetaPreemptionIndex = 11

// SetBetaPreemptionEMA replaces f's preemption feature by the value
// BetaFeatures gives for ema, so that a caller trying several EMA decay
// rates computes the other 15 features once.
func SetBetaPreemptionEMA(f *[NumBeta]float64, ema float64) {
	f[BetaPreemptionIndex] = clamp(ema)
}

// AddPrefill adds one prefill request to the step: chunk new tokens on top
// of computed tokens already in its KV cache. Its attention work is
// context × chunk with context = computed + chunk, which is prompt² for an
// unchunked prefill and much less for a late chunk.
func (b *BetaInput) AddPrefill(computed, chunk int64) {
	b.PrefillTokens += chunk
	b.ScheduledTokens += chunk
	b.NumPrefillReqs++
	b.RunningDepth++
	b.SumPrefillAttnWork += float64(computed+chunk) * float64(chunk)
}

// AddDecode adds one decode request that attends over context tokens (its
// KV length including the token generated this step) held in kvBlocks blocks.
func (b *BetaInput) AddDecode(context, kvBlocks int64) {
	b.DecodeTokens++
	b.ScheduledTokens++
	b.NumDecodeReqs++
	b.RunningDepth++
	b.DecodeContextTokens += context
	b.SumDecodeKVBlocks += kvBlocks
}
