// Package deploy assembles simulated vLLM instances and clusters from
// their description: a model, a GPU, a tensor-parallel degree, vLLM's
// settings and a latency model become a sim.Config (KV blocks derived from
// device memory when not given, the latency model built and checked); a
// deployment file (YAML) describes heterogeneous pools of such instances
// and the cluster's admission, routing and signal freshness.
//
// Both blis run and the cluster tests build instances here, so there is
// one place that knows how. Errors are *FieldError values naming the
// setting by its key in a deployment file's pool (vllm.max_num_seqs,
// latency.coefficients, ...); Flag maps a key to blis run's flag, and the
// deployment loader adds the file and line.
package deploy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// InstanceSpec describes one vLLM instance. The zero value is not valid;
// start from DefaultInstanceSpec.
type InstanceSpec struct {
	Model    string // shipped model name or path to a HuggingFace config.json
	Hardware string // shipped hardware name or path to a hardware spec JSON
	TP       int
	// DP is the data-parallel size of the vLLM server the instance is one
	// engine of (--data-parallel-size), and ExpertParallel its
	// --enable-expert-parallel: the routed experts of a mixture-of-experts
	// model sharded over the DP × TP ranks. A DP server is DP instances
	// behind the vllm-dp router; DP itself only matters with
	// ExpertParallel. 0 means 1.
	DP             int
	ExpertParallel bool
	// VLLM holds vLLM's settings. TotalKVBlocksGPU 0 means derive it from
	// device memory as vLLM does; CPUOffloading is set from
	// TotalKVBlocksCPU > 0.
	VLLM                 physics.VLLMKnobs
	LongPrefillThreshold int64 // vLLM --long-prefill-token-threshold (0: no cap)
	// MaxModelLen is vLLM's --max-model-len: the context a request's
	// prompt and output must fit. 0 takes the model's (ModelSpec's
	// max_position_embeddings, or n_positions), as vLLM derives it; a
	// value above the model's is refused, as vLLM refuses it.
	MaxModelLen      int64
	OffloadThreshold float64 // GPU KV usage above which evicted blocks go to the CPU tier
	// AsyncScheduling is vLLM's --async-scheduling (on by default): the
	// engine core schedules one step ahead, so a new request joins one
	// step later.
	AsyncScheduling bool
	// VLLMVersion is the vLLM release the deployment runs ("0.19.0"; ""
	// unstated: a current V1 engine), EnforceEager vLLM's --enforce-eager
	// (no CUDA graphs). With AsyncScheduling they decide the roofline's
	// per-step cost (StepCostOf).
	VLLMVersion  string
	EnforceEager bool
	// Host is the host profile the pool takes its per-step cost (and
	// output delay) from (host.go); nil for none.
	Host *HostProfile
	// ReserveFullSequence is vLLM's scheduler_reserve_full_isl (on by
	// default; sim.EngineConfig.ReserveFullSequence).
	ReserveFullSequence bool
	// OutputDelayUs is the delay from a token's step end to the client
	// (sim.Pipeline.OutputDelayUs), µs.
	OutputDelayUs int64
	// ArrivalAtEngine: the arrivals are the engine's own, no API-side
	// processing before them (sim.Pipeline.ArrivalAtEngine). Not a key:
	// blis validate sets it for records measured at the engine core.
	ArrivalAtEngine bool
	// Tiers are the KV tiers behind the CPU tier: a local disk and the
	// link to the deployment's shared store (tiers.go).
	Tiers TierSpec

	// Policies are the engine's scheduler and priority score (an
	// experiment's policies.scheduler and policies.priority, built by
	// package policy).
	Policies sim.Policies

	Latency LatencySpec
}

// LatencySpec chooses and parameterizes the latency model.
type LatencySpec struct {
	// Model is physics, roofline or blackbox; "" chooses physics when
	// Coefficients is set or a shipped coefficient file was fitted on this
	// configuration (coefficients.FindShipped), else roofline.
	Model string
	// Coefficients is a coefficient YAML written by calibrate fit
	// (physics). It may have been fitted on other configurations
	// (Instance.Warnings says so), but not on another architecture family.
	Coefficients string
	// Roofline and Blackbox override the models' defaults; each is only
	// valid with its model.
	Roofline *RooflineParams
	Blackbox *BlackboxParams
	// Noise is the log-normal σ of multiplicative step-time noise, in
	// [0, 2]; 0 for none.
	Noise float64
}

// RooflineParams are the roofline's tunable efficiencies and overhead.
type RooflineParams struct {
	ComputeEff   float64 // share of the card's sustained GEMM rate reached, (0, 1]
	BandwidthEff float64 // share of peak HBM bandwidth reached, (0, 1]
	// StepOverheadUs is the fixed CPU and launch cost per step, µs, when
	// StepOverheadSet; otherwise it follows from the deployment
	// (StepCostOf: "auto").
	StepOverheadUs  float64
	StepOverheadSet bool
	// Scalar is latency.roofline.kernels: false, the roofline before the
	// measured kernel model (one compute and one bandwidth bound over the
	// linear layers and over attention; docs/simulator.md).
	Scalar bool
}

// BlackboxParams are the blackbox regression's coefficients (µs).
type BlackboxParams struct {
	Alpha [3]float64 // queueing µs, µs per prompt token; µs per output token at departure
	Beta  [3]float64 // step µs, µs per prefill token, µs per decode token
}

// Defaults of the latency parameters.
var (
	DefaultRooflineParams = RooflineParams{ComputeEff: sim.DefaultComputeEfficiency, BandwidthEff: 0.8, StepOverheadUs: StepOverheadV1Us}
	DefaultBlackboxParams = BlackboxParams{Alpha: [3]float64{1200, 0.08, 1.5}, Beta: [3]float64{6000, 0.2, 30}}
)

// Defaults of an instance: the model and GPU the shipped coefficients
// were fitted on, and the CPU tier's offload threshold.
const (
	DefaultModel            = "llama-3.1-8b"
	DefaultHardware         = "h100-sxm"
	DefaultOffloadThreshold = 0.9
)

// DefaultInstanceSpec is Llama-3.1-8B on one H100 with vLLM's default
// settings (physics.DefaultVLLMKnobs), the KV cache derived from memory,
// fcfs scheduling and the automatic latency model choice.
func DefaultInstanceSpec() InstanceSpec {
	return InstanceSpec{
		Model:               DefaultModel,
		Hardware:            DefaultHardware,
		TP:                  1,
		VLLM:                physics.DefaultVLLMKnobs(),
		OffloadThreshold:    DefaultOffloadThreshold,
		AsyncScheduling:     true,
		ReserveFullSequence: true,
		OutputDelayUs:       sim.DefaultOutputDelayUs,
		Policies:            sim.Policies{Scheduler: sim.FCFS, Priority: sim.PriorityPolicy{Kind: sim.PriorityConstant}},
	}
}

// Instance is a built instance: its physics constants, the engine
// configuration (no observer; Options zero) and what was chosen.
type Instance struct {
	Phys   *physics.PhysicsConfig
	Config sim.Config
	// LatencyName is the model chosen (physics, roofline, blackbox; the
	// noise wrapper is in Config.Latency.Name()), and CoefficientsSource
	// the coefficient file used ("builtin:shipped/..." for a shipped one).
	LatencyName        string
	CoefficientsSource string
	// RooflineFallback: no latency model was named and no shipped
	// coefficients fit the configuration, so the roofline was taken.
	RooflineFallback bool
	// Warnings are about the choices, for the caller to show: a coefficient
	// file used outside the configurations it was fitted on
	// (coefficients.File.Check), each starting with the file's name.
	Warnings []string
	// StepCost is the roofline's per-step cost and why (nil with another
	// latency model).
	StepCost *StepCost
	// noise is the latency noise a template's instances draw (At).
	noise float64
}

// FieldError is an invalid setting. Fields are key paths of a deployment
// file's pool (model, vllm.max_num_seqs, latency.roofline, ...); several
// when a combination is at fault.
type FieldError struct {
	Fields []string
	Err    error
}

func (e *FieldError) Error() string { return strings.Join(e.Fields, ", ") + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, err error) error { return &FieldError{Fields: []string{field}, Err: err} }

func fieldErrf(field, format string, args ...any) error {
	return fieldErr(field, fmt.Errorf(format, args...))
}

// knobField is the pool key of a physics.VLLMKnobs or sim.EngineConfig
// field name.
func knobField(name string) string { return "vllm." + name }

// asField turns a *physics.FieldError from the knobs or the engine into a
// FieldError under vllm.
func asField(err error, fallback ...string) error {
	var fe *physics.FieldError
	if errors.As(err, &fe) && fe.Source != "" && fe.Source != "vllm" {
		// A model or hardware file's own field: the file is at fault.
		return &FieldError{Fields: fallback, Err: err}
	}
	if errors.As(err, &fe) {
		return fieldErr(knobField(fe.Field), errors.New(fe.Msg))
	}
	return &FieldError{Fields: fallback, Err: err}
}

// Build assembles the instance. Its noise stream, if any, is
// sim.InstanceStream(sim.StreamLatencyNoise, index) of rng, so that
// instances never share or shift each other's draws.
func (s InstanceSpec) Build(rng sim.RNG, index int) (*Instance, error) {
	t, err := s.Template()
	if err != nil {
		return nil, err
	}
	return t.At(rng, index), nil
}

// Template is the instance without what depends on its index (its noise
// stream): At makes each instance of a pool from it, where building every
// one anew read the model, the hardware and the coefficients again (a
// fleet of 4,096 instances, or an autoscaler adding tens of thousands).
// The latency models are read-only while stepping, so the instances share
// the template's.
func (s InstanceSpec) Template() (*Instance, error) {
	in, err := s.build()
	if err != nil {
		return nil, err
	}
	in.noise = s.Latency.Noise
	return in, nil
}

// At is the instance of index made from template t: a copy whose latency
// model, with noise, draws from the instance's own stream.
func (t *Instance) At(rng sim.RNG, index int) *Instance {
	in := *t
	if t.noise > 0 {
		in.Config.Latency = sim.NewNoisySource(t.Config.Latency, t.noise, rng.Source(sim.InstanceStream(sim.StreamLatencyNoise, index)))
	}
	return &in
}

func (s InstanceSpec) build() (*Instance, error) {
	m, err := physics.LoadModel(s.Model)
	if err != nil {
		return nil, fieldErr("model", err)
	}
	h, err := physics.LoadHardware(s.Hardware)
	if err != nil {
		return nil, fieldErr("hardware", err)
	}
	if s.TP < 1 {
		return nil, fieldErrf("tp", "must be >= 1, got %d", s.TP)
	}
	k := s.VLLM
	if k.TotalKVBlocksGPU < 0 {
		return nil, fieldErrf(knobField("total_kv_blocks_gpu"), "must be a block count > 0 or 0 to derive it, got %d", k.TotalKVBlocksGPU)
	}
	if k.TotalKVBlocksCPU < 0 {
		return nil, fieldErrf(knobField("total_kv_blocks_cpu"), "must be >= 0, got %d", k.TotalKVBlocksCPU)
	}
	k.CPUOffloading = k.TotalKVBlocksCPU > 0
	if s.DP < 0 {
		return nil, fieldErrf("data_parallel_size", "must be >= 1, got %d", s.DP)
	}
	cfg, err := physics.NewParallelConfig(m, h, physics.Parallel{TP: s.TP, DP: max(1, s.DP), ExpertParallel: s.ExpertParallel}, k)
	if err != nil {
		fields := []string{"model", "hardware", "tp"}
		if s.ExpertParallel {
			fields = append(fields, "enable_expert_parallel")
		}
		return nil, asField(err, fields...)
	}
	in := &Instance{Phys: cfg}
	lat, err := s.latency(in)
	if err != nil {
		return nil, err
	}
	if s.Host != nil && in.LatencyName != "roofline" {
		in.Warnings = append(in.Warnings, fmt.Sprintf("host_profile %s: only the roofline latency model takes its per-step cost (this pool uses %s, whose step times include their own); its output delay applies", s.Host.Path, in.LatencyName))
	}
	if n := s.Latency.Noise; !(n >= 0 && n <= 2) {
		return nil, fieldErrf("latency.noise", "must be in [0, 2], got %v", n)
	}
	maxLen, err := s.maxModelLen(m)
	if err != nil {
		return nil, err
	}
	pipe := sim.Pipeline{OutputDelayUs: s.OutputDelayUs, ArrivalAtEngine: s.ArrivalAtEngine}
	if s.AsyncScheduling {
		pipe.AsyncDepth = 1
	}
	in.Config = sim.Config{
		Engine: sim.EngineConfig{VLLMKnobs: cfg.Knobs, LongPrefillThreshold: s.LongPrefillThreshold, OffloadThreshold: s.OffloadThreshold,
			Pipeline: pipe, MaxModelLen: maxLen, ReserveFullSequence: s.ReserveFullSequence},
		Policies: s.Policies,
		Latency:  lat,
	}
	kt, err := s.Tiers.engineTiers(cfg.BlockSizeBytes, s.GPUs(), k.TotalKVBlocksCPU)
	if err != nil {
		return nil, err
	}
	if kt.On() && !k.PrefixCachingEnabled {
		return nil, fieldErrf("kv_tiers", "needs vllm.prefix_caching_enabled: a tier's blocks are found again by their prefix hash")
	}
	in.Config.Engine.Tiers = kt
	if err := in.Config.Engine.Validate(); err != nil {
		return nil, asField(err)
	}
	if err := in.Config.Policies.Priority.Validate(); err != nil {
		var fe *physics.FieldError
		if errors.As(err, &fe) {
			return nil, fieldErr(fe.Field, errors.New(fe.Msg))
		}
		return nil, fieldErr("priority_age_weight", err)
	}
	return in, nil
}

// maxModelLen is the instance's context: MaxModelLen, else the model's
// (0 when the model's config gives none: no limit). vLLM takes the
// smallest of the config's context keys (max_position_embeddings,
// n_positions, ...) and refuses a --max-model-len above it unless told
// otherwise (VLLM_ALLOW_LONG_MAX_MODEL_LEN); so does this.
func (s InstanceSpec) maxModelLen(m physics.ModelSpec) (int64, error) {
	model := int64(m.MaxPositionEmbeddings)
	switch {
	case s.MaxModelLen < 0:
		return 0, fieldErrf(knobField("max_model_len"), "must be > 0, or 0 for the model's context, got %d", s.MaxModelLen)
	case s.MaxModelLen == 0:
		return model, nil
	case model > 0 && s.MaxModelLen > model:
		return 0, fieldErrf(knobField("max_model_len"), "%d is more than the model's context of %d tokens (max_position_embeddings of %s); vLLM refuses it too", s.MaxModelLen, model, m.Name)
	}
	return s.MaxModelLen, nil
}

func (s InstanceSpec) latency(in *Instance) (sim.LatencyModel, error) {
	cfg := in.Phys
	l := s.Latency
	name := l.Model
	shipped := coefficients.FindShipped(cfg)
	if name == "" {
		name = "roofline"
		if l.Coefficients != "" || shipped != nil {
			name = "physics"
		} else {
			in.RooflineFallback = true
		}
	}
	in.LatencyName = name
	if l.Roofline != nil && name != "roofline" {
		return nil, fieldErrf("latency.roofline", "only used by the roofline latency model (this instance uses %s)", name)
	}
	if l.Blackbox != nil && name != "blackbox" {
		return nil, fieldErrf("latency.blackbox", "only used by the blackbox latency model (this instance uses %s)", name)
	}
	if l.Coefficients != "" && name != "physics" {
		return nil, fieldErrf("latency.coefficients", "only used by the physics latency model (this instance uses %s)", name)
	}
	switch name {
	case "physics":
		var cf *coefficients.File
		switch {
		case l.Coefficients != "":
			var err error
			if cf, err = coefficients.Load(l.Coefficients); err != nil {
				return nil, fieldErr("latency.coefficients", err)
			}
			warnings, err := cf.Check(cfg)
			if err != nil {
				return nil, fieldErr("latency.coefficients", fmt.Errorf("%s: %w", l.Coefficients, err))
			}
			for _, w := range warnings {
				in.Warnings = append(in.Warnings, l.Coefficients+": "+w)
			}
			in.CoefficientsSource = l.Coefficients
		case shipped != nil:
			cf, in.CoefficientsSource = shipped.File, "builtin:"+shipped.Name
		default:
			return nil, fieldErrf("latency.coefficients", "the physics latency model needs a coefficient file (written by calibrate fit): no shipped coefficients were fitted on this model, hardware, TP and vLLM settings (give a file; one fitted on other settings is used with a warning)")
		}
		p := &sim.Physics{Cfg: cfg, Spec: cf.Spec(), Beta: cf.Beta, Gamma: cf.Gamma, Overheads: cf.Overheads}
		if err := p.Validate(); err != nil {
			return nil, fieldErr("latency.coefficients", err)
		}
		return p, nil
	case "roofline":
		p := DefaultRooflineParams
		if l.Roofline != nil {
			p = *l.Roofline
		}
		m := sim.DefaultRoofline(cfg)
		cost := StepCostOf(s)
		in.StepCost = &cost
		m.ComputeEfficiency, m.BandwidthEfficiency = p.ComputeEff, p.BandwidthEff
		m.Kernels = !p.Scalar
		m.DPPadding = !s.EnforceEager
		m.StepOverheadUs, m.PerRequestOverheadUs = cost.FixedUs, cost.PerRequestUs
		if err := m.Validate(); err != nil {
			return nil, fieldErr("latency.roofline", err)
		}
		return m, nil
	case "blackbox":
		p := DefaultBlackboxParams
		if l.Blackbox != nil {
			p = *l.Blackbox
		}
		m := &sim.Blackbox{Alpha: p.Alpha, Beta: p.Beta}
		if cfg.Knobs.CPUOffloading {
			m.TransferUsPerBlock = cfg.BlockSizeBytes / cfg.HWPCIeBandwidthEff * 1e6
		}
		if err := m.Validate(); err != nil {
			return nil, fieldErr("latency.blackbox", err)
		}
		return m, nil
	}
	return nil, fieldErrf("latency.model", "%q is not a latency model; use physics, roofline or blackbox", clip.String(name))
}
