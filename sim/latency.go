package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/physics"
)

// Batch is the composition of one engine step as a latency model sees it.
type Batch struct {
	// Beta is the step in the physics model's terms (prefill chunks with
	// their attention work, decode context, KV blocks, preemption EMA, CPU
	// transfers). RunningDepth is the running queue after scheduling.
	Beta features.BetaInput
	// ReloadBlocks is the number of KV blocks read back from the CPU tier
	// for this step (also counted in Beta.TransferBlocks).
	ReloadBlocks int64
	// AtUs is when the step starts.
	AtUs int64

	// memo is the latency models' cache for this batch's engine
	// (LatencyMemo): its own, or one it shares with the engines the same
	// goroutine steps (Engine.ShareLatencyMemo).
	memo *LatencyMemo
}

// LatencyMemo is what a roofline keeps between steps: the last kernel
// costs by token count, for each roofline that priced a step with it. It
// is not in the Roofline, which the engines of a pool share and which a
// cluster's workers read on several goroutines at once: a memo there was
// written concurrently, so that a reader could pair one writer's count
// with another's time and a run's output depended on its threads'
// timing. An engine makes its own on its first step; engines stepped on
// one goroutine may share one (Engine.ShareLatencyMemo), which keeps it
// warm across a fleet. Its values are a function of the roofline, the
// count and the efficiencies alone, so what it holds never changes a
// result. The zero value is empty and ready.
type LatencyMemo struct {
	models []kernelMemo // by roofline, at most maxMemoModels
	next   int          // the slot the next roofline takes when full
}

// maxMemoModels bounds the rooflines one memo keeps (a fleet's pools,
// usually one or two): a caller that builds a roofline per engine gets
// slots reused, not a memo that grows with the fleet.
const maxMemoModels = 8

// ShareLatencyMemo makes the engine keep its latency model's memo in m
// (nil: its own again). The engines sharing one m must never step
// concurrently.
func (e *Engine) ShareLatencyMemo(m *LatencyMemo) { e.batch.memo = m }

// LatencyModel predicts the time of an engine step and the request-level
// overheads outside the engine loop. Implementations are deterministic given
// their own state; the engine calls StepTimeUs exactly once per step.
type LatencyModel interface {
	Name() string
	// StepTimeUs is the step's cycle time: schedule, forward pass, sampling
	// and output processing, rounded to µs with saturation (ToUs). The
	// engine clamps it into [1, MaxDurationUs] and counts every step it
	// clamps (Result.StepTimesClamped): a model may well extrapolate below
	// 1 µs on a tiny step, and that must be visible, not silent.
	StepTimeUs(b *Batch) int64
	// ArrivalOverheadUs is the delay from api.ARRIVED to journey.QUEUED (API
	// handling and tokenization). It delays the enqueue but does not block the
	// engine.
	ArrivalOverheadUs(promptTokens int64) int64
	// DepartureOverheadUs is the delay from journey.FINISHED to api.DEPARTED
	// (detokenization and response).
	DepartureOverheadUs(outputTokens int64) int64
	// PreemptionGamma is the EMA factor of the preemption feature.
	PreemptionGamma() float64
}

// Time bounds. Every duration the engine adds to its clock (a step, an
// overhead, the output delay) is at most MaxDurationUs, and every arrival
// at most MaxTimeUs, so that no sum of them can overflow int64; a run whose
// clock passes MaxTimeUs stops with a *LimitError (docs/simulator.md,
// "Time bounds").
const (
	// MaxDurationUs is 2^40 µs, about 12.7 days: no step or overhead of a
	// real deployment comes near it.
	MaxDurationUs = units.MaxDurationUs
	// MaxTimeUs is 2^61 µs, about 73,000 years.
	MaxTimeUs = units.MaxTimeUs
)

// ToUs rounds v µs to an integer with saturation (internal/units.Round):
// NaN and values beyond int64's range become math.MaxInt64 or
// math.MinInt64, which the engine's clamp and the setup checks
// (CheckLatency) see as out of range, instead of the wrapped value a plain
// conversion gives.
func ToUs(v float64) int64 { return units.Round(v) }

// overheadUs is an overhead in [0, MaxDurationUs] µs (CheckLatency refuses
// models whose overheads pass the bound on the configuration).
func overheadUs(v float64) int64 { return min(max(ToUs(v), 0), MaxDurationUs) }

// arrivalUs and departureUs round an overhead formula to whole µs.
func arrivalUs(o *coefficients.Overheads, prompt int64) int64 { return overheadUs(o.ArrivalUs(prompt)) }
func departureUs(o *coefficients.Overheads, output int64) int64 {
	return overheadUs(o.DepartureUs(output))
}

// Blackbox is the seed's regression model: step = β0 + β1·cache-miss
// (prefill) tokens + β2·decode tokens; queueing = α0 + α1·prompt tokens;
// α2 per output token between FINISHED and DEPARTED. All in µs.
type Blackbox struct {
	Alpha [3]float64
	Beta  [3]float64
	// TransferUsPerBlock is the PCIe time of one KV block moved to or from
	// the CPU tier, added to the step (docs/simulator.md: non-blocking transfers add
	// to step time). 0 without a CPU tier.
	TransferUsPerBlock float64
}

func (m *Blackbox) Name() string { return "blackbox" }

func (m *Blackbox) StepTimeUs(b *Batch) int64 {
	return ToUs(m.Beta[0] + m.Beta[1]*float64(b.Beta.PrefillTokens) + m.Beta[2]*float64(b.Beta.DecodeTokens) +
		m.TransferUsPerBlock*float64(b.Beta.TransferBlocks))
}

func (m *Blackbox) ArrivalOverheadUs(p int64) int64 {
	return overheadUs(m.Alpha[0] + m.Alpha[1]*float64(p))
}

func (m *Blackbox) DepartureOverheadUs(o int64) int64 { return overheadUs(m.Alpha[2] * float64(o)) }
func (m *Blackbox) PreemptionGamma() float64          { return DefaultPreemptionGamma }

// DefaultPreemptionGamma is the EMA factor when no coefficients give one.
const DefaultPreemptionGamma = 0.3

// Validate checks that the coefficients are finite and the step time of an
// empty step is positive.
func (m *Blackbox) Validate() error {
	for i, v := range append(m.Alpha[:], m.Beta[:]...) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			name := fmt.Sprintf("alpha%d", i)
			if i >= 3 {
				name = fmt.Sprintf("beta%d", i-3)
			}
			return fmt.Errorf("blackbox coefficient %s must be finite and >= 0, got %v", name, v)
		}
	}
	return nil
}

// Roofline is an analytical step time from the model and hardware: one
// forward pass whose linear layers and attention are each bounded by
// compute or memory bandwidth (they are separate kernels, run one after the
// other), plus the tensor- and expert-parallel collectives, CPU-tier
// transfers and a fixed per-step and per-request overhead.
type Roofline struct {
	Cfg *physics.PhysicsConfig
	// ComputeEfficiency is the share of the card's sustained GEMM rate
	// (physics.HardwareSpec.SustainedTFlops: measured, not the datasheet
	// peak) that a forward pass's linear layers and attention reach, in
	// (0, 1]; BandwidthEfficiency the share of peak HBM bandwidth.
	ComputeEfficiency   float64
	BandwidthEfficiency float64
	// StepOverheadUs is the per-step CPU and launch cost (scheduler, sampler,
	// output processing); PerRequestOverheadUs adds per running request.
	StepOverheadUs       float64
	PerRequestOverheadUs float64
	// Collectives prices the tensor-parallel all-reduces (two per layer)
	// and the expert-parallel all-gather and reduce-scatter: the path
	// vLLM takes for each message by size, world size and topology, and
	// each path's measured latency and bandwidth
	// (physics.HardwareSpec.Collectives, docs/physics-spec.md).
	Collectives physics.Collectives
	// plan is Collectives' all-reduce dispatch at Cfg.TP, resolved once
	// (DefaultRoofline, Validate) for planOf.
	plan   physics.AllReducePlan
	planOf physics.Collectives
	// gemm is the linear layers' compute by the step's token count when
	// the hardware has a GEMM table by shape (physics.GEMMShapes; nil
	// without): resolved with the plan.
	gemm *gemmCost
	// TransferBaseUs is the fixed cost of a step that moves KV blocks over
	// PCIe.
	TransferBaseUs float64
	Overheads      coefficients.Overheads
	// Kernels prices the linear layers by the measured kernel model
	// (physics.Kernels: each projection GEMM by its shape, and the
	// elementwise kernels by their bytes) instead of one roofline over the
	// step's linear FLOPs and weight bytes; the kernels' rates are scaled
	// by ComputeEfficiency and BandwidthEfficiency over their defaults
	// (kernelScale). kern is the hardware's model, resolved with the plan.
	Kernels bool
	kern    physics.Kernels
	// DPPadding is vLLM's data-parallel padding: with CUDA graphs (not
	// --enforce-eager) every rank of a data-parallel group pads its
	// forward pass to the group's largest batch (GroupStepDeltaUs).
	DPPadding bool
	// plans counts resolvePlan's calls: a memo filled under an earlier
	// plan is stale.
	plans int64
}

// kernelMemo keeps the last kernel costs by token count (a step's
// layers) and by sampled requests (its LM head), direct-mapped: steps
// repeat their sizes, and each entry costs a dozen powers to compute. It
// holds what one roofline priced, with the efficiencies and plan it was
// filled under (LatencyMemo).
type kernelMemo struct {
	of     *Roofline
	plans  int64
	ce, be float64
	layer  [64]memoEntry // by tokens
	head   [64]memoEntry // by sampled requests
}

type memoEntry struct {
	key int64 // the count + 1; 0 is empty
	v   float64
}

// CloneLatency returns a copy, for Engine.Clone.
func (m *Roofline) CloneLatency() (LatencyModel, error) {
	c := *m
	return &c, nil
}

// DefaultRoofline returns a roofline with efficiencies and overheads typical
// of vLLM on recent GPUs. They are estimates, not measurements; see
// docs/simulator.md.
func DefaultRoofline(cfg *physics.PhysicsConfig) *Roofline {
	m := &Roofline{
		Cfg: cfg,
		// 0.8 of the sustained GEMM rate: with DefaultGEMMShare, 0.6 of
		// the datasheet peak on a card without a measured rate, the
		// default before cards had one.
		ComputeEfficiency:    DefaultComputeEfficiency,
		BandwidthEfficiency:  DefaultBandwidthEfficiency,
		StepOverheadUs:       160,
		PerRequestOverheadUs: 0,
		Collectives:          cfg.Hardware.Collectives(),
		TransferBaseUs:       50,
		Overheads:            DefaultOverheads(),
		Kernels:              true,
		DPPadding:            true,
	}
	m.resolvePlan()
	return m
}

// resolvePlan resolves the all-reduce dispatch for the current
// Collectives and TP.
func (m *Roofline) resolvePlan() {
	m.plan, m.planOf = m.Collectives.Plan(m.Cfg.TP), m.Collectives
	m.gemm = newGEMMCost(m.Cfg, m.Cfg.Hardware.GEMMShapes())
	m.kern = m.Cfg.Hardware.Kernels()
	m.plans++
}

// DefaultComputeEfficiency is the roofline's default share of the sustained
// GEMM rate (Roofline.ComputeEfficiency), DefaultBandwidthEfficiency its
// default share of peak HBM bandwidth.
const (
	DefaultComputeEfficiency   = 0.8
	DefaultBandwidthEfficiency = 0.8
)

// DefaultOverheads are request-level overheads of a vLLM API server, used
// by the roofline and as a blackbox default: 1.2 ms of request handling
// (an estimate) plus the prompt's tokenization, 1.9 µs a token (a
// HuggingFace fast tokenizer encoding 22,000 tokens in 41.7 ms on one
// thread, ModelTC/LightLLM pull 1258; "a few hundred milliseconds" for
// 256K tokens in vLLM pull 10635); 0.4 ms + 1.5 µs per output token from
// the last token to the response's end (estimates).
func DefaultOverheads() coefficients.Overheads {
	return coefficients.Overheads{ArrivalBaseUs: 1200, ArrivalPerPromptTokenUs: DefaultTokenizeUsPerToken, DepartureBaseUs: 400, DeparturePerOutputTokenUs: 1.5}
}

// DefaultTokenizeUsPerToken is the API server's tokenization time per
// prompt token, µs (DefaultOverheads).
const DefaultTokenizeUsPerToken = 1.9

// Validate checks the efficiencies and overheads.
func (m *Roofline) Validate() error {
	if m.Cfg == nil {
		return fmt.Errorf("roofline needs a physics configuration")
	}
	if !(m.ComputeEfficiency > 0 && m.ComputeEfficiency <= 1) || !(m.BandwidthEfficiency > 0 && m.BandwidthEfficiency <= 1) {
		return fmt.Errorf("roofline efficiencies must be in (0, 1], got compute %v, bandwidth %v", m.ComputeEfficiency, m.BandwidthEfficiency)
	}
	m.resolvePlan()
	if (m.Cfg.TP > 1 || m.Cfg.EP > 1) && !(m.Collectives.LinkBytesPerS > 0) {
		return fmt.Errorf("roofline collectives need the interconnect's bandwidth (> 0), got %v bytes/s", m.Collectives.LinkBytesPerS)
	}
	for _, v := range []float64{m.StepOverheadUs, m.PerRequestOverheadUs, m.TransferBaseUs} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("roofline overheads must be finite and >= 0, got %v", v)
		}
	}
	return m.Overheads.Validate()
}

func (m *Roofline) Name() string { return "roofline" }

// StepSeconds is the roofline time of a step in seconds, before rounding.
// An engine of a data-parallel expert-parallel group is priced as if every
// rank of the group had as many tokens as this one (soloShape); its
// group prices it at the group's own shape (GroupStepUs).
func (m *Roofline) StepSeconds(b *Batch) float64 {
	pad, group := m.soloShape(b.Beta.ScheduledTokens)
	return m.stepSeconds(b, pad, group)
}

// soloShape is the forward pass's tokens and the MoE layers' tokens of an
// engine priced alone: its own tokens, and under expert parallelism as
// many again from each other data-parallel rank.
func (m *Roofline) soloShape(tokens int64) (pad, group float64) {
	pad = float64(tokens)
	if m.Cfg.EP > 1 {
		return pad, pad * float64(m.Cfg.DP)
	}
	return pad, pad
}

// stepSeconds is StepSeconds for a forward pass over pad tokens (the
// batch's own, or more under data-parallel padding: the padded rows go
// through every GEMM, elementwise kernel and collective, not attention
// nor the LM head) whose MoE layers, under expert parallelism, process
// group tokens: every data-parallel rank's, gathered.
func (m *Roofline) stepSeconds(b *Batch, pad, group float64) float64 {
	c := m.Cfg
	in := &b.Beta
	tokens := pad
	t := (m.StepOverheadUs + m.PerRequestOverheadUs*float64(in.RunningDepth)) * 1e-6
	if in.ScheduledTokens > 0 {
		// Linear layers and attention are separate kernels that run one
		// after the other, so each has its own roofline. Linear layers
		// read the weights once; vLLM computes logits only at each
		// scheduled request's last position (gpu_model_runner's
		// logits_indices), so the LM head costs one token per request.
		// Attention: a prefill chunk's queries against its context
		// (causal, so half of the 4·q_dim per pair) and each decode query
		// against its whole context, reading that KV (decode blocks,
		// prefill context) and writing the step's.
		sampled := float64(in.NumPrefillReqs + in.NumDecodeReqs)
		own := float64(in.ScheduledTokens)
		linFlops := tokens*(c.FlopsLinearPerToken-c.FlopsLMHead) + sampled*c.FlopsLMHead
		attnFlops := in.SumPrefillAttnWork*c.AttnFlopsPerWorkUnit + float64(in.DecodeContextTokens)*2*c.AttnFlopsPerWorkUnit
		kvRead := float64(in.SumDecodeKVBlocks)*c.BlockSizeBytes + prefillContextBytes(in, c)
		fc, bw := c.Hardware.SustainedTFlops()*1e12*float64(c.TP)*m.ComputeEfficiency, c.HWPeakBandwidth*m.BandwidthEfficiency
		switch {
		case m.Kernels:
			t += m.kernelSeconds(b, tokens, group, sampled, fc, bw)
		default:
			if g := m.gemm; g != nil {
				// Each GEMM at its shape's share of the sustained rate.
				linFlops = tokens*g.layers.at(int64(tokens)) + sampled*g.head.at(in.NumPrefillReqs+in.NumDecodeReqs)
			}
			t += math.Max(linFlops/fc, c.ExpertWeightBytesGroup(group)/bw)
			t += math.Max(attnFlops/fc, (kvRead+own*c.KVBytesPerToken)/bw)
		}
		if m.Cfg.TP > 1 {
			t += m.allReduceSeconds(tokens)
		}
		if m.Cfg.EP > 1 {
			// The expert-parallel all-gather and reduce-scatter around every
			// MoE layer (NCCL's): two collectives per layer, each moving
			// half of the step's exchange.
			n := float64(2 * c.Model.NumLayers)
			t += n * m.Collectives.NCCLGather(tokens*c.EPExchangeBytesPerToken()/n, c.EP)
		}
	}
	if in.TransferBlocks > 0 {
		t += m.TransferBaseUs*1e-6 + float64(in.TransferBlocks)*c.BlockSizeBytes/c.HWPCIeBandwidthEff
	}
	return t
}

// kernelSeconds is the step's linear layers and elementwise kernels by
// the measured kernel model: each layer's projection GEMMs at the step's
// tokens (on one tensor-parallel rank), the LM head at one row per sampled
// request, and each layer's norms, residual adds, rotary embedding and
// activation, plus the embedding lookup. The routed experts of a MoE
// layer (grouped kernels the profiles do not cover) keep the roofline's
// bound at fc and bw. The kernels' rates scale with the efficiencies over
// their defaults.
func (m *Roofline) kernelSeconds(bt *Batch, tokens, group, sampled, fc, bw float64) float64 {
	in := &bt.Beta
	c := m.Cfg
	md := c.Model
	k := m.kern
	k.GEMMRate *= m.ComputeEfficiency / DefaultComputeEfficiency
	k.BwPeak *= m.BandwidthEfficiency / DefaultBandwidthEfficiency
	b, hd, tp := md.BytesPerParam, float64(md.HiddenSize), float64(c.TP)
	mm := m.memoOf(bt)
	layer := m.layerKernels(mm, k, int64(tokens), tokens, b, hd, tp)
	var experts float64
	if md.IsMoE() {
		// The routed experts: vLLM's fused MoE kernel over the experts the
		// step's tokens touch on this rank (under expert parallelism, those
		// the data-parallel group's tokens touch among the rank's own, for
		// the group's tokens routed to them: group × top_k / EP on average,
		// written as group / DP × top_k / TP since EP = DP × TP).
		L := float64(md.NumLayers)
		routed := tokens
		if c.EP > 1 {
			routed = group / float64(c.DP)
		}
		flops := routed * float64(md.NMLPProj) * 2 * hd * float64(md.IntermediateSize) * float64(md.TopK) / tp
		weights := (c.ExpertWeightBytesGroup(group) - c.WeightBytesNonExpert) / (L * tp)
		experts = L * k.FusedMoESeconds(weights, flops)
	}
	var head float64
	ns := int64(sampled)
	if e := &mm.head[ns&63]; e.key == ns+1 {
		head = e.v
	} else {
		head = k.GEMMSeconds(sampled, float64(md.VocabSize)/tp, hd, b)
		*e = memoEntry{ns + 1, head}
	}
	// Attention per layer and rank: the prefill chunks' pairs, the decode
	// queries' KV (their blocks, and the step's own KV written), and the
	// prefill chunks' context per query head.
	L := float64(md.NumLayers)
	perLayer := 1 / (L * tp)
	layer += k.AttentionSeconds(in.SumPrefillAttnWork*2*c.QDim/tp,
		(float64(in.SumDecodeKVBlocks)*c.BlockSizeBytes+float64(in.ScheduledTokens)*c.KVBytesPerToken)*perLayer,
		features.PrefillContextTokens(in)*c.QHeadKVBytesPerToken()*perLayer)
	step := k.StepElementwiseSeconds(c, tokens)
	return L*layer + experts + head + step
}

// memoOf is m's part of bt's memo, emptied unless it was filled at m's
// current efficiencies and plan (the memo is made on the batch's first
// step).
func (m *Roofline) memoOf(bt *Batch) *kernelMemo {
	lm := bt.memo
	if lm == nil {
		lm = new(LatencyMemo)
		bt.memo = lm
	}
	var mm *kernelMemo
	for i := range lm.models {
		if lm.models[i].of == m {
			mm = &lm.models[i]
			break
		}
	}
	switch {
	case mm != nil:
	case len(lm.models) < maxMemoModels:
		lm.models = append(lm.models, kernelMemo{})
		mm = &lm.models[len(lm.models)-1]
	default:
		mm = &lm.models[lm.next]
		lm.next = (lm.next + 1) % maxMemoModels
	}
	if mm.of != m || mm.plans != m.plans || mm.ce != m.ComputeEfficiency || mm.be != m.BandwidthEfficiency {
		*mm = kernelMemo{of: m, plans: m.plans, ce: m.ComputeEfficiency, be: m.BandwidthEfficiency}
	}
	return mm
}

// layerKernels is one layer's projection GEMMs (a MoE layer's router and
// shared expert) and elementwise kernels at the step's tokens, from the
// memo when it holds them.
func (m *Roofline) layerKernels(mm *kernelMemo, k physics.Kernels, n int64, tokens, b, hd, tp float64) float64 {
	e := &mm.layer[n&63]
	if e.key == n+1 {
		return e.v
	}
	c := m.Cfg
	md := c.Model
	v := k.GEMMSeconds(tokens, (c.QDim+2*c.KVDim)/tp, hd, b) + k.GEMMSeconds(tokens, hd, c.QDim/tp, b)
	if md.IsMoE() {
		v += k.GEMMSeconds(tokens, float64(md.NumExperts), hd, b) // router
		if sh := float64(md.SharedExpertIntermediateSize); sh > 0 {
			v += k.GEMMSeconds(tokens, float64(md.NMLPProj-1)*sh/tp, hd, b) + k.GEMMSeconds(tokens, hd, sh/tp, b)
		}
	} else {
		inter := float64(md.IntermediateSize)
		v += k.GEMMSeconds(tokens, float64(md.NMLPProj-1)*inter/tp, hd, b) + k.GEMMSeconds(tokens, hd, inter/tp, b)
	}
	v += k.LayerElementwiseSeconds(c, tokens)
	*e = memoEntry{n + 1, v}
	return v
}

// allReduceSeconds is the time of a step's tensor-parallel all-reduces,
// two per layer, each of the step's tokens' hidden states (tokens ×
// hidden × dtype bytes), on the path vLLM takes for that message
// (physics.Collectives.AllReduce).
func (m *Roofline) allReduceSeconds(tokens float64) float64 {
	c := m.Cfg
	p := &m.plan
	if p.N() != c.TP || m.planOf != m.Collectives {
		// Collectives changed after the plan was resolved.
		fresh := m.Collectives.Plan(c.TP)
		p = &fresh
	}
	s, _ := p.AllReduce(tokens * float64(c.Model.HiddenSize) * c.Model.BytesPerParam)
	return float64(2*c.Model.NumLayers) * s
}

// prefillContextBytes is the KV a prefill chunk reads from its context.
func prefillContextBytes(in *features.BetaInput, c *physics.PhysicsConfig) float64 {
	return features.PrefillContextTokens(in) * c.KVBytesPerToken
}

func (m *Roofline) StepTimeUs(b *Batch) int64         { return ToUs(m.StepSeconds(b) * 1e6) }
func (m *Roofline) ArrivalOverheadUs(p int64) int64   { return arrivalUs(&m.Overheads, p) }
func (m *Roofline) DepartureOverheadUs(o int64) int64 { return departureUs(&m.Overheads, o) }
func (m *Roofline) PreemptionGamma() float64          { return DefaultPreemptionGamma }
func (m *Physics) stepSeconds(f *[features.NumBeta]float64) float64 {
	var s float64
	for i, v := range f {
		s += m.Beta[i] * v
	}
	return s
}

// Physics is the physics-normalized model: step time = β · the beta
// features of Spec (features.SpecV1, the 16 of docs/physics-spec.md's spec 1.0, when empty), in
// seconds. The alpha vector is not used for timing: the
// simulator's own queue produces the QUEUED→SCHEDULED delay that alpha
// predicts from a trace, and adding it would count queue wait twice. What
// the simulator does take from a fit are the overheads outside the engine
// loop (docs/simulator.md, "How the alpha model enters the simulation").
type Physics struct {
	Cfg *physics.PhysicsConfig
	// Spec is the feature spec of Beta: features.SpecV1 ("" means it) or
	// features.SpecV2, whose vector fills the first features.NumBetaV2
	// entries.
	Spec      string
	Beta      [features.NumBeta]float64
	Gamma     float64
	Overheads coefficients.Overheads
}

// Validate checks the coefficients.
func (m *Physics) Validate() error {
	if m.Cfg == nil {
		return fmt.Errorf("physics model needs a physics configuration")
	}
	if err := features.CheckSpec(m.Cfg, m.spec()); err != nil {
		return err
	}
	names, _ := features.BetaNamesOf(m.spec())
	for i, v := range m.Beta {
		if i < len(names) && (math.IsNaN(v) || math.IsInf(v, 0)) {
			return fmt.Errorf("beta coefficient %s is not finite: %v", names[i], v)
		}
		if i >= len(names) && v != 0 {
			return fmt.Errorf("feature spec %s has %d beta features, but beta coefficient %d is %v", m.spec(), len(names), i+1, v)
		}
	}
	if !(m.Gamma > 0 && m.Gamma <= 1) {
		return fmt.Errorf("preemption gamma must be in (0, 1], got %v", m.Gamma)
	}
	return m.Overheads.Validate()
}

func (m *Physics) ArrivalOverheadUs(p int64) int64   { return arrivalUs(&m.Overheads, p) }
func (m *Physics) DepartureOverheadUs(o int64) int64 { return departureUs(&m.Overheads, o) }
func (m *Physics) PreemptionGamma() float64          { return m.Gamma }
func (m *Physics) Name() string                      { return "physics" }

func (m *Physics) spec() string {
	if m.Spec == "" {
		return features.SpecV1
	}
	return m.Spec
}

func (m *Physics) StepTimeUs(b *Batch) int64 {
	f := features.Beta(m.spec(), m.Cfg, b.Beta)
	return ToUs(m.stepSeconds(&f) * 1e6)
}

// Noisy multiplies another model's step time by mean-one log-normal noise
// drawn from its own RNG stream: a ground truth that no linear model in the
// physics features fits exactly.
type Noisy struct {
	Inner LatencyModel
	Sigma float64
	rng   *rand.Rand
	src   *rand.PCG // rng's source when known (NewNoisySource): Engine.Clone copies it
}

// NewNoisy wraps a model; sigma is the log-normal σ (≈ the coefficient of
// variation for small σ).
func NewNoisy(inner LatencyModel, sigma float64, rng *rand.Rand) *Noisy {
	return &Noisy{Inner: inner, Sigma: sigma, rng: rng}
}

// NewNoisySource is NewNoisy drawing from src (RNG.Source), whose state an
// engine clone can copy (Engine.Clone); it draws exactly what NewNoisy
// with rand.New(src) does.
func NewNoisySource(inner LatencyModel, sigma float64, src *rand.PCG) *Noisy {
	return &Noisy{Inner: inner, Sigma: sigma, rng: rand.New(src), src: src}
}

func (m *Noisy) Name() string                      { return m.Inner.Name() + "+noise" }
func (m *Noisy) ArrivalOverheadUs(p int64) int64   { return m.Inner.ArrivalOverheadUs(p) }
func (m *Noisy) DepartureOverheadUs(o int64) int64 { return m.Inner.DepartureOverheadUs(o) }
func (m *Noisy) PreemptionGamma() float64          { return m.Inner.PreemptionGamma() }

func (m *Noisy) StepTimeUs(b *Batch) int64 {
	base := m.Inner.StepTimeUs(b)
	f := math.Exp(m.Sigma*m.rng.NormFloat64() - m.Sigma*m.Sigma/2)
	if base == math.MaxInt64 || base == math.MinInt64 {
		return base // out of range stays out of range
	}
	return ToUs(float64(max(base, 1)) * f)
}

// CheckLatency refuses a latency model whose step times or overheads are
// out of range on the engine's configuration: it probes a one-token
// decode step, a full prefill step of MaxBatchedTokens, a step of
// MaxNumSeqs decodes that fill the KV cache, and the overheads of the
// longest request the cache holds. A step time that is not finite or
// above MaxDurationUs (an absurd coefficient such as a bias of 1e30 s) is
// an error naming the step; one below 1 µs is not (the engine clamps and
// counts it). Noise wrappers are probed through to their inner model, so
// the check draws no random number.
func CheckLatency(m LatencyModel, c *EngineConfig) error {
	m = innermost(m)
	kvTokens := max(1, c.TotalKVBlocksGPU) * max(1, c.BlockSizeTokens)
	var one, prefill, full Batch
	one.Beta.AddDecode(1, 1)
	prefill.Beta.AddPrefill(0, max(1, c.MaxBatchedTokens))
	seqs := max(1, min(c.MaxNumSeqs, c.MaxBatchedTokens))
	for range seqs {
		full.Beta.AddDecode(kvTokens/seqs, max(1, c.TotalKVBlocksGPU/seqs))
	}
	for _, p := range []struct {
		what string
		b    *Batch
	}{
		{"a one-token decode step", &one},
		{fmt.Sprintf("a prefill step of %d tokens", prefill.Beta.ScheduledTokens), &prefill},
		{fmt.Sprintf("a step of %d decodes that fill the KV cache", seqs), &full},
	} {
		if us := m.StepTimeUs(p.b); us > MaxDurationUs {
			return fmt.Errorf("latency model %s: %s takes more than %d µs (2^40, about 12.7 days), or a non-finite time: its coefficients are out of range for this configuration", m.Name(), p.what, MaxDurationUs)
		}
	}
	if us := m.ArrivalOverheadUs(kvTokens); us >= MaxDurationUs {
		return fmt.Errorf("latency model %s: the arrival overhead of a %d-token prompt is %d µs or more (2^40): its coefficients are out of range", m.Name(), kvTokens, MaxDurationUs)
	}
	if us := m.DepartureOverheadUs(kvTokens); us >= MaxDurationUs {
		return fmt.Errorf("latency model %s: the departure overhead of a %d-token output is %d µs or more (2^40): its coefficients are out of range", m.Name(), kvTokens, MaxDurationUs)
	}
	return nil
}

// innermost is m without its noise and slow-start wrappers.
func innermost(m LatencyModel) LatencyModel {
	for {
		switch w := m.(type) {
		case *Noisy:
			m = w.Inner
		case *SlowStart:
			m = w.Inner
		default:
			return m
		}
	}
}

// SlowStart is the optional warm-up penalty of an instance the autoscaler
// started: from Start on, its steps take Factor times the inner model's
// time, the factor falling linearly to 1 over DurationUs (cold caches,
// lazily compiled kernels: vLLM's first requests after a cold start are
// slower, blog.vllm.ai 2025-10-03 and 2025-10-26). Applied to each step
// as it runs, never to results afterwards. Before Start, and after the
// penalty has run out, steps take the inner model's time.
type SlowStart struct {
	Inner      LatencyModel
	Factor     float64 // >= 1
	DurationUs int64   // > 0
	startUs    int64
	started    bool
}

// Start begins the penalty at atUs (the instance became ready).
func (m *SlowStart) Start(atUs int64) { m.startUs, m.started = atUs, true }

func (m *SlowStart) Name() string                      { return m.Inner.Name() }
func (m *SlowStart) ArrivalOverheadUs(p int64) int64   { return m.Inner.ArrivalOverheadUs(p) }
func (m *SlowStart) DepartureOverheadUs(o int64) int64 { return m.Inner.DepartureOverheadUs(o) }
func (m *SlowStart) PreemptionGamma() float64          { return m.Inner.PreemptionGamma() }

func (m *SlowStart) StepTimeUs(b *Batch) int64 {
	base := m.Inner.StepTimeUs(b)
	since := b.AtUs - m.startUs
	if !m.started || since >= m.DurationUs || since < 0 || base <= 0 || base >= MaxDurationUs {
		return base
	}
	f := 1 + (m.Factor-1)*(1-float64(since)/float64(m.DurationUs))
	return ToUs(float64(base) * f)
}

// GroupStepDeltaUs prices b's step at its data-parallel group's shape g
// (sim/lockstep.go) against StepSeconds's: with DPPadding the forward
// pass runs the group's largest batch's tokens (the padded rows through
// every GEMM, elementwise kernel and collective) and, under expert
// parallelism, the MoE layers process that many from every member;
// without it (eager mode) the forward pass runs the batch's own tokens
// and the MoE layers the members' sum. Simplifications: a padded row is
// routed like any token; the exchange is priced at this rank's rows as if
// every rank sent as many (exact when padded); the experts' load is even
// across ranks (each rank's share of the routed tokens is 1/EP).
func (m *Roofline) GroupStepDeltaUs(b *Batch, g GroupShape) int64 {
	own := b.Beta.ScheduledTokens
	if own <= 0 || g.Members < 1 {
		return 0
	}
	pad, group := float64(own), float64(max(g.SumTokens, own))
	if m.DPPadding {
		pad = float64(max(own, g.MaxTokens))
		group = pad * float64(g.Members)
	}
	if m.Cfg.EP <= 1 {
		group = pad
	}
	soloPad, soloGroup := m.soloShape(own)
	if pad == soloPad && group == soloGroup {
		return 0 // the group's largest member, priced alone as it is
	}
	return ToUs((m.stepSeconds(b, pad, group) - m.stepSeconds(b, soloPad, soloGroup)) * 1e6)
}
