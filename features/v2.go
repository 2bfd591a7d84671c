package features

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/physics"
)

// Feature spec versions (docs/physics-spec.md). Spec 1.0 is the frozen set
// of the first design; spec 2.0 is the roofline set chosen by held-out error on
// measured step times of other configurations (docs/physics-spec.md,
// "Spec 2.0"); spec 3.0 is spec 2.0 with attention split by phase and the
// KV read counted per query head (docs/physics-spec.md, "Spec 3.0"). A
// coefficient file names the spec its vector follows; 1.0 and 2.0 stay
// frozen and selectable.
const (
	SpecV1 = "1.0"
	SpecV2 = "2.0"
	SpecV3 = "3.0"
	// DefaultSpec is what calibrate fit uses unless told otherwise.
	DefaultSpec = SpecV3
)

// NumBetaV2 is the width of the spec 2.0 beta vector. It is below NumBeta,
// so a spec 2.0 vector fits in a [NumBeta]float64 with the tail zero.
const NumBetaV2 = 9

// BetaV2Names names the spec 2.0 beta features in vector order.
var BetaV2Names = [NumBetaV2]string{
	"linear_compute_bound", // 1 linear layers, when compute bounds them
	"linear_memory_bound",  // 2 linear layers, when weight reads bound them
	"attention_compute",    // 3 attention FLOPs: prefill pairs and decode queries
	"kv_read",              // 4 KV the step's attention reads
	"tp_comm_bandwidth",    // 5 all-reduce bytes over the GPU link
	"tp_comm_latency",      // 6 all-reduce hops × 10 µs
	"layer_latency",        // 7 per-step constant: 1000 GPU cycles per layer
	"cpu_offload_transfer", // 8 as spec 1.0's
	"cpu_offload_kv_read",  // 9 as spec 1.0's
}

// CommHopSeconds and LayerCycles scale features 6 and 7 so that their
// coefficients are near 1: a ring all-reduce hop of 10 µs, 1000 cycles of
// fixed kernel latency per layer. They are units, not fitted values.
const (
	CommHopSeconds = 1e-5
	LayerCycles    = 1000.0
)

// NumBetaV3 is the width of the spec 3.0 beta vector, spec 2.0's.
const NumBetaV3 = NumBetaV2

// BetaV3Names names the spec 3.0 beta features in vector order: spec
// 2.0's, with features 3 and 4 redefined.
var BetaV3Names = [NumBetaV3]string{
	"linear_compute_bound", // 1 as spec 2.0's
	"linear_memory_bound",  // 2 as spec 2.0's
	"prefill_attention",    // 3 prefill attention FLOPs (causal pairs)
	"attention_read",       // 4 KV read by attention, once per query head
	"tp_comm_bandwidth",    // 5 as spec 2.0's
	"tp_comm_latency",      // 6 as spec 2.0's
	"layer_latency",        // 7 as spec 2.0's
	"cpu_offload_transfer", // 8 as spec 2.0's
	"cpu_offload_kv_read",  // 9 as spec 2.0's
}

// Specs lists the feature specs this package computes.
var Specs = []string{SpecV1, SpecV2, SpecV3}

// BetaNamesOf returns the beta feature names of a spec, or an error naming
// the spec when it is unknown.
func BetaNamesOf(spec string) ([]string, error) {
	switch spec {
	case SpecV1:
		return BetaNames[:], nil
	case SpecV2:
		return BetaV2Names[:], nil
	case SpecV3:
		return BetaV3Names[:], nil
	}
	return nil, fmt.Errorf("feature spec %q is not %s, %s or %s", spec, SpecV1, SpecV2, SpecV3)
}

// CheckSpec reports whether the features of spec can be computed for c:
// specs 2.0 and 3.0 need the GPU's boost clock.
func CheckSpec(c *physics.PhysicsConfig, spec string) error {
	if _, err := BetaNamesOf(spec); err != nil {
		return err
	}
	if spec != SpecV1 && !(c.HWClockHz > 0) {
		return fmt.Errorf("hardware %q: boost_clock_mhz is not set; feature spec %s needs the GPU's boost clock (add it to the hardware spec JSON from the datasheet)", c.Hardware.Name, spec)
	}
	return nil
}

// Beta computes the beta features of spec into a NumBeta-wide vector (specs
// 2.0 and 3.0 leave entries NumBetaV2.. at 0). spec must be valid
// (CheckSpec).
func Beta(spec string, c *physics.PhysicsConfig, in BetaInput) [NumBeta]float64 {
	var f [NumBeta]float64
	switch spec {
	case SpecV2:
		v := BetaFeaturesV2(c, in)
		copy(f[:], v[:])
		return f
	case SpecV3:
		v := BetaFeaturesV3(c, in)
		copy(f[:], v[:])
		return f
	}
	return BetaFeatures(c, in)
}

// PrefillContextTokens estimates the KV tokens a step's prefill chunks read
// from before the chunk (their cached or earlier-chunked context), from
// Σ(context × chunk) ≥ Σ chunk²: exact for one chunk, and 0 for whole
// prompts.
func PrefillContextTokens(in *BetaInput) float64 {
	if in.PrefillTokens <= 0 {
		return 0
	}
	p := float64(in.PrefillTokens)
	ctx := in.SumPrefillAttnWork/p - p/float64(max(1, in.NumPrefillReqs))
	return math.Max(0, ctx) * float64(in.NumPrefillReqs)
}

// BetaFeaturesV2 computes the spec 2.0 beta features, each in seconds (so a
// coefficient is a slowdown factor over the ceiling it divides by):
//
//  1. and 2. the linear layers' roofline, max(tokens × FLOPs per token /
//     peak FLOP/s, weight bytes read / peak bandwidth), put in feature 1 when
//     compute bounds it and in feature 2 otherwise, so that compute and
//     bandwidth get their own efficiency;
//  3. attention FLOPs: Σ(context × chunk) of prefills (causal) plus
//     2 × context of each decode query, at peak FLOP/s;
//  4. the KV read by attention: decode contexts plus prefill context,
//     at peak bandwidth;
//  5. the all-reduce bytes per device over the GPU link (TP > 1);
//  6. all-reduce latency: 2 per layer, 2(tp−1) ring hops each, at
//     CommHopSeconds a hop;
//  7. the per-step constant: LayerCycles GPU cycles per layer at the boost
//     clock (the fixed latency of small kernels scales with the clock);
//  8. and 9. the CPU-offload transfer and CPU-resident read of spec 1.0.
//
// Features 1–7 are 0 for a step that schedules no token. Every feature is
// clamped to [0, FeatureMax] as in spec 1.0.
func BetaFeaturesV2(c *physics.PhysicsConfig, in BetaInput) [NumBetaV2]float64 {
	var f [NumBetaV2]float64
	offload := indicator(c.Knobs.CPUOffloading)
	f[7] = div(offload*float64(in.TransferBlocks)*c.BlockSizeBytes, c.HWPCIeBandwidthEff)
	f[8] = div(offload*float64(in.CPUResidentReadBlocks)*c.BlockSizeBytes, c.HWPCIeBandwidthEff)
	if in.ScheduledTokens > 0 {
		sched := float64(in.ScheduledTokens)
		layers := float64(c.Model.NumLayers)
		compute := div(sched*c.FlopsLinearPerToken, c.HWPeakFlops)
		memory := div(c.EffectiveWeightBytes(in.ScheduledTokens), c.HWPeakBandwidth)
		if compute >= memory {
			f[0] = compute
		} else {
			f[1] = memory
		}
		f[2] = div((in.SumPrefillAttnWork+2*float64(in.DecodeContextTokens))*c.AttnFlopsPerWorkUnit, c.HWPeakFlops)
		f[3] = div((float64(in.DecodeContextTokens)+PrefillContextTokens(&in))*c.KVBytesPerToken, c.HWPeakBandwidth)
		if c.TP > 1 {
			f[4] = div(c.CommBytesPerToken*sched, c.HWInterconnectBW)
			f[5] = 2 * layers * 2 * float64(c.TP-1) * CommHopSeconds
		}
		f[6] = div(layers*LayerCycles, c.HWClockHz)
	}
	for i := range f {
		f[i] = clamp(f[i])
	}
	return f
}

// BetaFeaturesV3 computes the spec 3.0 beta features: spec 2.0's, with
// attention split by phase and its KV read counted per query head
// (docs/physics-spec.md, "Spec 3.0"):
//
//  3. prefill attention: Σ(context × chunk) × attn_flops_per_work_unit at
//     peak FLOP/s (causal pairs), without spec 2.0's decode term;
//  4. attention's KV read, once per query head: (decode context + prefill
//     context) tokens × 2 (K and V) × layers × q_dim × dtype bytes at peak
//     bandwidth. A kernel that runs one query head per thread block (vLLM's
//     paged attention) reads each KV head once per query head of its
//     group; for a model without GQA (q_dim = kv_dim) it is spec 2.0's KV
//     read. Decode attention's FLOPs are proportional to it and in it.
//
// Features 1, 2 and 5–9 are spec 2.0's.
func BetaFeaturesV3(c *physics.PhysicsConfig, in BetaInput) [NumBetaV3]float64 {
	f := BetaFeaturesV2(c, in)
	if in.ScheduledTokens > 0 {
		f[2] = clamp(div(in.SumPrefillAttnWork*c.AttnFlopsPerWorkUnit, c.HWPeakFlops))
		f[3] = clamp(div((float64(in.DecodeContextTokens)+PrefillContextTokens(&in))*c.QHeadKVBytesPerToken(), c.HWPeakBandwidth))
	}
	return f
}

// LowerBoundSeconds is the least time the step can take on the hardware:
// its FLOPs at peak FLOP/s or its bytes (weights once, the KV it reads) at
// peak bandwidth, whichever is longer. A measured step below it did not do
// the work it names (calibrate fit leaves such steps out, by reason).
func LowerBoundSeconds(c *physics.PhysicsConfig, in *BetaInput) float64 {
	if in.ScheduledTokens <= 0 {
		return 0
	}
	sched := float64(in.ScheduledTokens)
	flops := sched*c.FlopsLinearPerToken + (in.SumPrefillAttnWork+2*float64(in.DecodeContextTokens))*c.AttnFlopsPerWorkUnit
	bytes := c.EffectiveWeightBytes(in.ScheduledTokens) + (float64(in.DecodeContextTokens)+PrefillContextTokens(in))*c.KVBytesPerToken
	return math.Max(flops/c.HWPeakFlops, bytes/c.HWPeakBandwidth)
}
