// Package physics derives the configuration constants of the
// physics-normalized latency model: FLOPs and bytes per token from a model's
// architecture, the hardware ceilings they are divided by, and the vLLM knobs
// that bound a batch. docs/physics-spec.md is the canonical statement of every
// formula here, with its units, its derivation and where the seed differs.
//
// Everything is float64 and evaluated left to right in the order written,
// because the Python twin (tools/physics_trainer) must reproduce each value to
// 1e-10 and the golden fixture (testdata/physics_features_golden.json) pins them.
package physics

import (
	"fmt"
	"math"
)

// PhysicsConfig holds the constants derived once per (model, hardware, TP,
// vLLM knobs). It is immutable after NewPhysicsConfig; feature computation
// only reads it.
type PhysicsConfig struct {
	Model    ModelSpec    `json:"-"`
	Hardware HardwareSpec `json:"-"`
	TP       int          `json:"-"`
	Knobs    VLLMKnobs    `json:"-"` // TotalKVBlocksGPU is resolved (derived when it was 0)
	// DP and EP are the data-parallel group size this engine belongs to and
	// the expert-parallel degree (1, 1 without them). With EP > 1 the
	// routed experts are sharded over the EP ranks (EP = DP × TP, vLLM's
	// --enable-expert-parallel); everything else is as at DP 1. They do not
	// enter the physics features, which describe one engine (spec 1.0).
	DP, EP int `json:"-"`

	// KVBudget explains a derived TotalKVBlocksGPU; zero when it was given.
	KVBudget KVMemoryBudget `json:"-"`

	QDim  float64 `json:"q_dim"`  // num_attention_heads × head_dim
	KVDim float64 `json:"kv_dim"` // num_key_value_heads × head_dim

	// FLOPs per token, multiply-add counted as 2.
	FlopsAttnLinear     float64 `json:"flops_attn_linear"`      // per layer: Q, K, V, O projections
	FlopsMLP            float64 `json:"flops_mlp"`              // per layer: active experts (or the dense MLP), shared expert, router
	FlopsLMHead         float64 `json:"flops_lm_head"`          // vocabulary projection, once per token
	FlopsLinearPerToken float64 `json:"flops_linear_per_token"` // num_layers × (attn + mlp) + lm_head

	// AttnFlopsPerWorkUnit multiplies Σ(context × chunk) and decode context
	// tokens in the attention features: num_layers × 2 × q_dim.
	AttnFlopsPerWorkUnit float64 `json:"attn_flops_per_work_unit"`

	// Weight bytes read by one step.
	WeightBytesAttn      float64 `json:"weight_bytes_attn"` // per layer
	WeightBytesMLP       float64 `json:"weight_bytes_mlp"`  // per layer, top_k experts + shared expert + router
	WeightBytesLMHead    float64 `json:"weight_bytes_lm_head"`
	WeightBytesTotal     float64 `json:"weight_bytes_total"`      // num_layers × (attn + mlp) + lm_head: a one-token step
	WeightBytesNonExpert float64 `json:"weight_bytes_non_expert"` // MoE: everything but routed experts, all layers
	ExpertBytes          float64 `json:"expert_bytes"`            // MoE: one routed expert across all layers
	ParamBytesResident   float64 `json:"param_bytes_resident"`    // everything held in device memory, all experts and embeddings

	KVBytesPerToken float64 `json:"kv_bytes_per_token"` // K and V for one token, all layers, all TP ranks
	BlockSizeBytes  float64 `json:"block_size_bytes"`   // block_size_tokens × kv_bytes_per_token

	// Ceilings of the TP group: per-device work divided by per-device peak
	// equals total work divided by tp × per-device peak.
	HWPeakFlops        float64 `json:"hw_peak_flops"`         // FLOP/s
	HWPeakBandwidth    float64 `json:"hw_peak_bandwidth"`     // bytes/s, HBM
	HWPCIeBandwidthEff float64 `json:"hw_pcie_bandwidth_eff"` // bytes/s, host link × pcie_efficiency
	HWInterconnectBW   float64 `json:"hw_interconnect_bw"`    // bytes/s, one device's link (not multiplied by tp)
	HWClockHz          float64 `json:"hw_clock_hz"`           // boost clock, Hz; 0 when the spec does not give it

	CommBytesPerToken float64 `json:"comm_bytes_per_token"` // bytes each device sends per token in TP all-reduces
	RooflineStepTime  float64 `json:"roofline_step_time"`   // seconds, a full-budget step

	MoETopKFraction    float64 `json:"moe_topk_fraction"`     // top_k / num_experts; 0 for dense
	GQARatio           float64 `json:"gqa_ratio"`             // num_key_value_heads / num_attention_heads
	GPUKVCapacityBytes float64 `json:"gpu_kv_capacity_bytes"` // total_kv_blocks_gpu × block_size_bytes
	CPUKVCapacityBytes float64 `json:"cpu_kv_capacity_bytes"` // total_kv_blocks_cpu × block_size_bytes
}

// NewPhysicsConfig validates its inputs and derives every constant. A zero
// knobs.TotalKVBlocksGPU is derived from device memory (see KVMemoryBudget).
func NewPhysicsConfig(m ModelSpec, h HardwareSpec, tp int, k VLLMKnobs) (*PhysicsConfig, error) {
	return NewParallelConfig(m, h, Parallel{TP: tp, DP: 1}, k)
}

// Parallel is how one vLLM server spreads a model over GPUs: TP ranks per
// engine, DP engines (--data-parallel-size), and whether the routed
// experts of a mixture-of-experts model are sharded over all DP × TP
// ranks (--enable-expert-parallel) instead of split by TP.
type Parallel struct {
	TP, DP         int
	ExpertParallel bool
}

// NewParallelConfig is NewPhysicsConfig for an engine of a data-parallel
// group, with expert parallelism. DP alone changes nothing for one engine;
// expert parallelism changes the weights each GPU holds (and so the KV
// cache it has room for) and what a step reads (ExpertWeightBytesEP).
func NewParallelConfig(m ModelSpec, h HardwareSpec, par Parallel, k VLLMKnobs) (*PhysicsConfig, error) {
	ep, err := checkParallel(m, h, par, k)
	if err != nil {
		return nil, err
	}
	c := &PhysicsConfig{Model: m, Hardware: h, TP: par.TP, Knobs: k, DP: par.DP, EP: ep}
	c.deriveModel()
	c.deriveKVPerToken()
	c.deriveHardware()
	if err := c.resolveKVBlocks(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkParallel validates the inputs of NewParallelConfig and returns the
// expert-parallel degree: 1, or DP × TP with expert parallelism, which
// must divide the experts.
func checkParallel(m ModelSpec, h HardwareSpec, par Parallel, k VLLMKnobs) (ep int, err error) {
	tp := par.TP
	if par.DP < 1 {
		return 0, fmt.Errorf("data-parallel size must be >= 1, got %d", par.DP)
	}
	ep = 1
	if par.ExpertParallel {
		if !m.IsMoE() {
			return 0, fmt.Errorf("expert parallelism needs a mixture-of-experts model; %q is dense", m.Name)
		}
		ep = par.DP * tp
		if ep < 1 || m.NumExperts%ep != 0 {
			return 0, fmt.Errorf("expert parallelism over %d ranks (data-parallel %d × tensor-parallel %d) does not divide the %d experts of %q", ep, par.DP, tp, m.NumExperts, m.Name)
		}
	}
	if err := m.Validate(); err != nil {
		return 0, err
	}
	if err := h.Validate(); err != nil {
		return 0, err
	}
	if err := k.Validate(); err != nil {
		return 0, err
	}
	if tp < 1 {
		return 0, fmt.Errorf("tp must be >= 1, got %d", tp)
	}
	if m.NumHeads%tp != 0 {
		return 0, fmt.Errorf("tp %d does not divide num_attention_heads %d of model %q", tp, m.NumHeads, m.Name)
	}
	if m.NumKVHeads%tp != 0 && tp%m.NumKVHeads != 0 {
		return 0, fmt.Errorf("tp %d and num_key_value_heads %d of model %q: one must divide the other", tp, m.NumKVHeads, m.Name)
	}
	if tp > 1 && !(h.InterconnectBandwidthGBs > 0) {
		return 0, fieldErr(h.Name, "interconnect_bandwidth_gb_s", "must be > 0 for tp %d", tp)
	}
	return ep, nil
}

// deriveModel derives the model's constants: attention dimensions, FLOPs
// per token and weight bytes (per layer, per step and resident).
func (c *PhysicsConfig) deriveModel() {
	m := c.Model
	L := float64(m.NumLayers)
	hd := float64(m.HiddenSize)
	dt := m.BytesPerParam
	I := float64(m.IntermediateSize)
	nproj := float64(m.NMLPProj)
	vocab := float64(m.VocabSize)

	c.QDim = float64(m.NumHeads) * float64(m.HeadDim)
	c.KVDim = float64(m.NumKVHeads) * float64(m.HeadDim)

	// FLOPs. Q and O are h×q_dim, K and V are h×kv_dim; 2 FLOPs per weight.
	c.FlopsAttnLinear = 4 * hd * (c.QDim + c.KVDim)
	c.FlopsMLP = nproj * 2 * hd * I
	c.WeightBytesAttn = 2 * hd * (c.QDim + c.KVDim) * dt
	c.WeightBytesMLP = nproj * hd * I * dt
	c.FlopsLMHead = 2 * hd * vocab
	c.WeightBytesLMHead = hd * vocab * dt
	if m.IsMoE() {
		E := float64(m.NumExperts)
		topk := float64(m.TopK)
		shared := float64(m.SharedExpertIntermediateSize)
		// intermediate_size is one expert's width, so a token pays for top_k
		// whole experts (not top_k/E of one: see the spec's errata). The
		// router is an h×E matrix.
		c.FlopsMLP = nproj*2*hd*I*topk + nproj*2*hd*shared + 2*hd*E
		c.WeightBytesMLP = nproj*hd*I*topk*dt + nproj*hd*shared*dt + hd*E*dt
		nonExpertPerLayer := c.WeightBytesAttn + nproj*hd*shared*dt + hd*E*dt
		c.ExpertBytes = L * (nproj * hd * I * dt)
		c.WeightBytesNonExpert = L*nonExpertPerLayer + c.WeightBytesLMHead
		c.ParamBytesResident = L*(nonExpertPerLayer+nproj*hd*I*E*dt) + c.WeightBytesLMHead
		c.MoETopKFraction = topk / E
	} else {
		c.ParamBytesResident = L*(c.WeightBytesAttn+c.WeightBytesMLP) + c.WeightBytesLMHead
	}
	if !m.TieWordEmbeddings {
		c.ParamBytesResident += hd * vocab * dt // input embedding table
	}
	c.FlopsLinearPerToken = L*(c.FlopsAttnLinear+c.FlopsMLP) + c.FlopsLMHead
	c.WeightBytesTotal = L*(c.WeightBytesAttn+c.WeightBytesMLP) + c.WeightBytesLMHead
	c.AttnFlopsPerWorkUnit = L * 2 * c.QDim
}

// deriveKVPerToken derives the KV cache bytes of one token and of one
// block.
func (c *PhysicsConfig) deriveKVPerToken() {
	m, tp := c.Model, c.TP
	L := float64(m.NumLayers)
	dt := m.BytesPerParam
	// KV heads are replicated when tp exceeds them, so each rank holds at
	// least one.
	kvHeadsStored := float64(m.NumKVHeads)
	if tp > m.NumKVHeads {
		kvHeadsStored = float64(tp)
	}
	c.KVBytesPerToken = 2 * L * kvHeadsStored * float64(m.HeadDim) * dt
	c.BlockSizeBytes = float64(c.Knobs.BlockSizeTokens) * c.KVBytesPerToken
}

// deriveHardware derives the TP group's ceilings, the TP communication per
// token, the roofline time of a full-budget step and the GQA ratio. It
// needs deriveModel's FLOPs and weight bytes.
func (c *PhysicsConfig) deriveHardware() {
	m, h, k := c.Model, c.Hardware, c.Knobs
	L := float64(m.NumLayers)
	hd := float64(m.HiddenSize)
	dt := m.BytesPerParam
	tpf := float64(c.TP)

	c.HWPeakFlops = h.TFlopsPeak * 1e12 * tpf
	c.HWPeakBandwidth = h.BwPeakTBs * 1e12 * tpf
	c.HWPCIeBandwidthEff = h.PCIeBandwidthGBs * 1e9 * h.pcieEfficiency() * tpf
	c.HWInterconnectBW = h.InterconnectBandwidthGBs * 1e9
	c.HWClockHz = h.BoostClockMHz * 1e6

	// Two all-reduces per layer of h × dtype bytes per token; a ring
	// all-reduce sends 2(tp−1)/tp of the message from each device.
	if c.TP > 1 {
		c.CommBytesPerToken = L * 2 * hd * dt * 2 * (tpf - 1) / tpf
	}
	c.RooflineStepTime = math.Max(
		float64(k.MaxBatchedTokens)*c.FlopsLinearPerToken/c.HWPeakFlops,
		c.WeightBytesTotal/c.HWPeakBandwidth)
	c.GQARatio = float64(m.NumKVHeads) / float64(m.NumHeads)
}

// resolveKVBlocks derives a zero Knobs.TotalKVBlocksGPU from device memory
// (KVBudget says how; with expert parallelism each rank holds 1/EP of the
// routed experts) and the GPU and CPU KV capacities in bytes.
func (c *PhysicsConfig) resolveKVBlocks() error {
	if c.Knobs.TotalKVBlocksGPU == 0 {
		m, tp, ep := c.Model, c.TP, c.EP
		resident := c.ParamBytesResident
		if ep > 1 {
			// Each rank holds 1/ep of the routed experts instead of 1/tp.
			allExperts := c.ExpertBytes * float64(m.NumExperts)
			resident += allExperts*float64(tp)/float64(ep) - allExperts
		}
		b, err := kvBudget(m, c.Hardware, tp, c.Knobs, resident, c.KVBytesPerToken)
		if err != nil {
			return err
		}
		c.KVBudget = b
		c.Knobs.TotalKVBlocksGPU = b.Blocks
	}
	c.GPUKVCapacityBytes = float64(c.Knobs.TotalKVBlocksGPU) * c.BlockSizeBytes
	c.CPUKVCapacityBytes = float64(c.Knobs.TotalKVBlocksCPU) * c.BlockSizeBytes
	return nil
}

// QHeadKVBytesPerToken is the KV an attention kernel reads per token of
// context when each query head reads its KV head itself: 2 (K and V) ×
// layers × q_dim × dtype bytes, KVBytesPerToken × heads / kv_heads without
// KV-head replication (feature spec 3.0's attention_read; equal to
// KVBytesPerToken for a model without GQA).
func (c *PhysicsConfig) QHeadKVBytesPerToken() float64 {
	return 2 * float64(c.Model.NumLayers) * c.QDim * c.Model.BytesPerParam
}

// MoEActivation is the expected share of routed experts that a step with
// scheduledTokens tokens touches, 1 − (1 − top_k/E)^B, assuming independent
// uniform routing. It is 0 for dense models and for an empty step.
func (c *PhysicsConfig) MoEActivation(scheduledTokens int64) float64 {
	if c.Model.NumExperts == 0 || scheduledTokens <= 0 {
		return 0
	}
	return 1 - math.Pow(1-c.MoETopKFraction, float64(scheduledTokens))
}

// EffectiveWeightBytes is the weight traffic of a step with scheduledTokens
// tokens: for MoE, attention, shared and LM-head weights plus the expected
// number of distinct routed experts, E × (1 − (1 − top_k/E)^max(1,B)); for a
// dense model, WeightBytesTotal.
func (c *PhysicsConfig) EffectiveWeightBytes(scheduledTokens int64) float64 {
	if c.Model.NumExperts == 0 {
		return c.WeightBytesTotal
	}
	b := max(scheduledTokens, 1)
	unique := float64(c.Model.NumExperts) * (1 - math.Pow(1-c.MoETopKFraction, float64(b)))
	return c.WeightBytesNonExpert + c.ExpertBytes*unique
}

// ExpertWeightBytesEP is the weight traffic of one engine's step with
// scheduledTokens tokens under expert parallelism: the non-expert weights
// and the distinct routed experts of this rank's 1/EP share that the whole
// data-parallel group's tokens touch (every engine of the group runs each
// MoE layer on all the group's tokens, assumed as many as this one's; the
// ranks step in lockstep). Without expert parallelism it is
// EffectiveWeightBytes.
func (c *PhysicsConfig) ExpertWeightBytesEP(scheduledTokens int64) float64 {
	if c.EP <= 1 || c.Model.NumExperts == 0 {
		return c.EffectiveWeightBytes(scheduledTokens)
	}
	return c.ExpertWeightBytesGroup(float64(max(scheduledTokens, 1)) * float64(c.DP))
}

// ExpertWeightBytesGroup is ExpertWeightBytesEP when the data-parallel
// group's MoE layers process groupTokens tokens in all (every rank's,
// gathered before each MoE layer): the non-expert weights and the
// distinct experts of this rank's 1/EP share that groupTokens tokens
// touch. Without expert parallelism it is EffectiveWeightBytes of
// groupTokens.
func (c *PhysicsConfig) ExpertWeightBytesGroup(groupTokens float64) float64 {
	groupTokens = max(groupTokens, 1)
	if c.EP <= 1 || c.Model.NumExperts == 0 {
		return c.EffectiveWeightBytes(int64(min(groupTokens, 1<<62)))
	}
	local := float64(c.Model.NumExperts) / float64(c.EP)
	unique := local * (1 - math.Pow(1-c.MoETopKFraction, groupTokens))
	return c.WeightBytesNonExpert + c.ExpertBytes*unique*float64(c.TP)
}

// EPExchangeBytesPerToken is what one rank receives per token of its own
// in the expert-parallel exchange of a step: vLLM's default all-to-all
// backend (allgather_reducescatter) all-gathers every rank's hidden states
// before each MoE layer and reduce-scatters the outputs after it, so each
// rank receives (EP − 1) other ranks' tokens twice per layer. 0 without
// expert parallelism.
func (c *PhysicsConfig) EPExchangeBytesPerToken() float64 {
	if c.EP <= 1 {
		return 0
	}
	return float64(c.Model.NumLayers) * 2 * float64(c.Model.HiddenSize) * c.Model.BytesPerParam * float64(c.EP-1)
}
