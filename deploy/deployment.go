package deploy

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/yamlfile"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// Deployment is a cluster's hardware and serving stack: pools of
// identical instances, in instance order, and the router in front of them
// (its latencies and how fresh the signals it reads are). The policies
// the router and the engines run are not part of it: they are the
// experiment's policy bundle (package policy).
type Deployment struct {
	Pools  []Pool
	Router Router
	// Network moves KV between prefill and decode instances (network.go);
	// it matters only under disaggregation.
	Network Network
	// KVStore is the KV store the pools share (nil: none; tiers.go).
	KVStore *KVStoreSpec
}

// Pool is a number of identical instances.
type Pool struct {
	Name     string
	Replicas int
	// Role is the pool's part under prefill/decode disaggregation: both
	// (the default), prefill or decode (network.go).
	Role     string
	Instance InstanceSpec
	// Fleet is the pool's autoscaling side: bounds, nodes, cost, start-up
	// and drain.
	Fleet Fleet
}

// Router is the router's physical side.
type Router struct {
	// AdmissionLatencyUs delays the routing decision after admission;
	// RoutingLatencyUs the request's arrival at the instance after the
	// decision (docs/experiment.md: real routers take 10-50 and 50-200 µs).
	AdmissionLatencyUs, RoutingLatencyUs int64
	// CapacityWaitTimeoutUs bounds how long a request waits at the router
	// while no instance is ready (a pool scaled to zero, or every instance
	// still starting); 0: only its own timeout. Default
	// DefaultCapacityWaitTimeoutUs.
	CapacityWaitTimeoutUs int64
	// Freshness is each instance-reported signal's refresh interval, µs
	// (0: read at every decision).
	Freshness cluster.Freshness
}

// DefaultCapacityWaitTimeoutUs is Knative's revision-timeout-seconds
// (300 s): how long its activator holds a request while a revision scales
// from zero.
const DefaultCapacityWaitTimeoutUs = 300_000_000

// MaxInstances bounds a deployment's size.
const MaxInstances = 4096

// PoolYAML is a pool as a file spells it: its name and size, and the
// instance's keys (InstanceYAML). An absent key keeps its default.
//
//   - name: h100                  # letters, digits, . _ -; default pool<i>
//     replicas: 4                 # instances in the pool (>= 1), default 1
//     role: both                  # both, prefill or decode (disaggregation)
//     model: llama-3.1-8b         # shipped name or config.json path
//     hardware: h100-sxm          # shipped name or hardware JSON path
//     tp: 1
//     data_parallel_size: 1       # vLLM --data-parallel-size (see docs/experiment.md)
//     enable_expert_parallel: false
//     vllm:                       # physics.VLLMKnobs' keys, plus six
//     max_num_seqs: 256
//     max_batched_tokens: 8192
//     chunked_prefill_enabled: true
//     prefix_caching_enabled: true
//     block_size_tokens: 16
//     total_kv_blocks_gpu: auto # or a block count
//     gpu_memory_utilization: 0.9
//     total_kv_blocks_cpu: 0
//     offload_threshold: 0.9
//     long_prefill_token_threshold: 0
//     max_model_len: 0          # vLLM --max-model-len; 0: the model's context
//     async_scheduling: true    # vLLM --async-scheduling
//     scheduler_reserve_full_isl: true  # admit only when the whole prompt fits
//     output_delay_us: 1500     # step end to the client, per token
//     latency:
//     model: auto               # physics, roofline, blackbox; auto chooses
//     coefficients: c.yaml      # physics
//     roofline: {compute_eff: 0.8, bandwidth_eff: 0.8, step_overhead_us: auto, kernels: true}
//     blackbox: {alpha: [1200, 0.08, 1.5], beta: [6000, 0.2, 30]}
//     noise: 0
type PoolYAML struct {
	Name         string `yaml:"name"`
	Replicas     *int   `yaml:"replicas"`
	InstanceYAML `yaml:",inline"`
	FleetYAML    `yaml:",inline"`
	Role         *string `yaml:"role"`
}

// InstanceYAML is an instance's keys.
type InstanceYAML struct {
	Model          *string      `yaml:"model"`
	Hardware       *string      `yaml:"hardware"`
	TP             *int         `yaml:"tp"`
	DP             *int         `yaml:"data_parallel_size"`
	ExpertParallel *bool        `yaml:"enable_expert_parallel"`
	VLLM           *VLLMYAML    `yaml:"vllm"`
	Latency        *LatencyYAML `yaml:"latency"`
	KVTiers        *KVTiersYAML `yaml:"kv_tiers"`
	// HostProfile is a host profile file (host.go); "" for none.
	HostProfile *string `yaml:"host_profile"`
}

// VLLMYAML is an instance's vllm keys.
type VLLMYAML struct {
	MaxNumSeqs           *int64   `yaml:"max_num_seqs"`
	MaxBatchedTokens     *int64   `yaml:"max_batched_tokens"`
	ChunkedPrefill       *bool    `yaml:"chunked_prefill_enabled"`
	PrefixCaching        *bool    `yaml:"prefix_caching_enabled"`
	BlockSize            *int64   `yaml:"block_size_tokens"`
	KVBlocksGPU          *string  `yaml:"total_kv_blocks_gpu"`
	GPUMemoryUtilization *float64 `yaml:"gpu_memory_utilization"`
	KVBlocksCPU          *int64   `yaml:"total_kv_blocks_cpu"`
	OffloadThreshold     *float64 `yaml:"offload_threshold"`
	LongPrefill          *int64   `yaml:"long_prefill_token_threshold"`
	MaxModelLen          *int64   `yaml:"max_model_len"`
	AsyncScheduling      *bool    `yaml:"async_scheduling"`
	Version              *string  `yaml:"version"`
	EnforceEager         *bool    `yaml:"enforce_eager"`
	ReserveFullISL       *bool    `yaml:"scheduler_reserve_full_isl"`
	OutputDelayUs        *int64   `yaml:"output_delay_us"`
}

// LatencyYAML is an instance's latency keys.
type LatencyYAML struct {
	Model        *string       `yaml:"model"`
	Coefficients *string       `yaml:"coefficients"`
	Roofline     *RooflineYAML `yaml:"roofline"`
	Blackbox     *BlackboxYAML `yaml:"blackbox"`
	Noise        *float64      `yaml:"noise"`
}

// RooflineYAML and BlackboxYAML are the latency models' parameters.
type RooflineYAML struct {
	ComputeEff     *float64 `yaml:"compute_eff"`
	BandwidthEff   *float64 `yaml:"bandwidth_eff"`
	StepOverheadUs *string  `yaml:"step_overhead_us"` // µs, or auto (StepCostOf)
	Kernels        *bool    `yaml:"kernels"`
}

type BlackboxYAML struct {
	Alpha *[]float64 `yaml:"alpha"`
	Beta  *[]float64 `yaml:"beta"`
}

// Mappings name the pool's mappings for unknown-key errors, by the Go
// type name yaml.v3 prints.
var Mappings = map[string]yamlfile.Mapping{
	"deploy.PoolYAML":     {What: "a pool", Keys: reflect.TypeOf(PoolYAML{})},
	"deploy.VLLMYAML":     {What: "vllm", Keys: reflect.TypeOf(VLLMYAML{})},
	"deploy.LatencyYAML":  {What: "latency", Keys: reflect.TypeOf(LatencyYAML{})},
	"deploy.RooflineYAML": {What: "latency.roofline", Keys: reflect.TypeOf(RooflineYAML{})},
	"deploy.BlackboxYAML": {What: "latency.blackbox", Keys: reflect.TypeOf(BlackboxYAML{})},
	"deploy.NodesYAML":    {What: "nodes", Keys: reflect.TypeOf(NodesYAML{})},
	"deploy.StartupYAML":  {What: "startup", Keys: reflect.TypeOf(StartupYAML{})},
	"deploy.DrainYAML":    {What: "drain", Keys: reflect.TypeOf(DrainYAML{})},
	"deploy.KVTiersYAML":  {What: "kv_tiers", Keys: reflect.TypeOf(KVTiersYAML{})},
	"deploy.DiskYAML":     {What: "kv_tiers.disk", Keys: reflect.TypeOf(DiskYAML{})},
	"deploy.KVStoreYAML":  {What: "kv_store", Keys: reflect.TypeOf(KVStoreYAML{})},
}

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidPoolName reports whether name may name a pool: 1-64 letters,
// digits, '.', '_' or '-'.
func ValidPoolName(name string) bool { return poolNameRE.MatchString(name) }

// Pool resolves y, the pool at index i, over the defaults: relative paths
// (model, hardware, coefficients) are resolved from dir when the file
// exists there. Errors are *FieldError values keyed relative to the pool.
func (y *PoolYAML) Pool(i int, dir string) (Pool, error) {
	p := Pool{Name: y.Name, Replicas: 1, Role: RoleBoth, Instance: DefaultInstanceSpec()}
	if p.Name == "" {
		p.Name = fmt.Sprintf("pool%d", i)
	}
	if y.Role != nil {
		if _, err := cluster.ParseRole(*y.Role); err != nil {
			return p, fieldErr("role", err)
		}
		p.Role = *y.Role
	}
	if !ValidPoolName(p.Name) {
		return p, fieldErrf("name", "%q must be 1-64 letters, digits, '.', '_' or '-'", clip.String(p.Name))
	}
	switch {
	case y.Replicas != nil:
		p.Replicas = *y.Replicas
	case y.MinReplicas != nil:
		p.Replicas = *y.MinReplicas // a Deployment under an HPA starts at its minimum
	}
	// 0 replicas: a pool that starts scaled to zero (min_replicas 0).
	if lo := min(1, *or(y.MinReplicas, 1)); p.Replicas < lo || p.Replicas > MaxInstances {
		return p, fieldErrf("replicas", "must be in [%d, %d], got %d", lo, MaxInstances, p.Replicas)
	}
	if err := y.InstanceYAML.coefficientDefaults(&p.Instance); err != nil {
		return p, err
	}
	if err := y.InstanceYAML.Apply(&p.Instance, dir); err != nil {
		return p, err
	}
	p.Fleet = DefaultFleet(p.Instance, p.Replicas)
	return p, y.FleetYAML.apply(&p.Fleet, p.Replicas, y.Replicas != nil, p.Instance.GPUs())
}

func or[T any](p *T, def T) *T {
	if p == nil {
		return &def
	}
	return p
}

// coefficientDefaults takes what y does not give of the model, hardware,
// TP and vLLM settings from its coefficient file's applies_to, the
// configuration it was fitted on, so that a file fitted on another
// configuration runs on that one unless told otherwise. The GPU KV blocks
// are applies_to's only when the model, hardware, TP, block size and
// memory utilization all are (else derived: applies_to's count is another
// configuration's).
func (y *InstanceYAML) coefficientDefaults(s *InstanceSpec) error {
	if y.Latency == nil || y.Latency.Coefficients == nil || *y.Latency.Coefficients == "" {
		return nil
	}
	path := *y.Latency.Coefficients
	cf, err := coefficients.Load(path)
	if err != nil {
		return fieldErr("latency.coefficients", err)
	}
	a, k := cf.AppliesTo, &s.VLLM
	v := y.VLLM
	if v == nil {
		v = &VLLMYAML{}
	}
	if y.Model == nil {
		if _, err := physics.LoadModel(a.Model); err != nil {
			return fieldErrf("latency.coefficients", "%s: its applies_to.model %q is neither a shipped model nor a file; give the model", clip.String(path), clip.String(a.Model))
		}
		s.Model = a.Model
	}
	if y.Hardware == nil {
		if _, err := physics.LoadHardware(a.Hardware); err != nil {
			return fieldErrf("latency.coefficients", "%s: its applies_to.hardware %q is neither shipped hardware nor a file; give the hardware", clip.String(path), clip.String(a.Hardware))
		}
		s.Hardware = a.Hardware
	}
	if y.TP == nil {
		s.TP = a.TP
	}
	for _, d := range []struct {
		given bool
		set   func()
	}{
		{v.MaxNumSeqs != nil, func() { k.MaxNumSeqs = a.VLLM.MaxNumSeqs }},
		{v.MaxBatchedTokens != nil, func() { k.MaxBatchedTokens = a.VLLM.MaxBatchedTokens }},
		{v.ChunkedPrefill != nil, func() { k.ChunkedPrefillEnabled = a.VLLM.ChunkedPrefillEnabled }},
		{v.PrefixCaching != nil, func() { k.PrefixCachingEnabled = a.VLLM.PrefixCachingEnabled }},
		{v.BlockSize != nil, func() { k.BlockSizeTokens = a.VLLM.BlockSizeTokens }},
		{v.GPUMemoryUtilization != nil, func() { k.GPUMemoryUtilization = a.VLLM.GPUMemoryUtilization }},
		{v.KVBlocksCPU != nil, func() { k.TotalKVBlocksCPU = a.VLLM.TotalKVBlocksCPU }},
	} {
		if !d.given {
			d.set()
		}
	}
	if v.KVBlocksGPU == nil && y.Model == nil && y.Hardware == nil && y.TP == nil && v.BlockSize == nil && v.GPUMemoryUtilization == nil {
		k.TotalKVBlocksGPU = a.VLLM.TotalKVBlocksGPU
	}
	return nil
}

// Apply sets what y gives on s; relative paths are resolved from dir.
// Errors are *FieldError values keyed relative to the instance.
func (y *InstanceYAML) Apply(s *InstanceSpec, dir string) error {
	set(&s.Model, y.Model)
	if y.Model != nil {
		s.Model = resolve(s.Model, dir)
	}
	set(&s.Hardware, y.Hardware)
	if y.Hardware != nil {
		s.Hardware = resolve(s.Hardware, dir)
	}
	set(&s.TP, y.TP)
	set(&s.DP, y.DP)
	set(&s.ExpertParallel, y.ExpertParallel)
	if v := y.VLLM; v != nil {
		k := &s.VLLM
		set(&k.MaxNumSeqs, v.MaxNumSeqs)
		set(&k.MaxBatchedTokens, v.MaxBatchedTokens)
		set(&k.ChunkedPrefillEnabled, v.ChunkedPrefill)
		set(&k.PrefixCachingEnabled, v.PrefixCaching)
		set(&k.BlockSizeTokens, v.BlockSize)
		set(&k.GPUMemoryUtilization, v.GPUMemoryUtilization)
		set(&k.TotalKVBlocksCPU, v.KVBlocksCPU)
		set(&s.OffloadThreshold, v.OffloadThreshold)
		set(&s.LongPrefillThreshold, v.LongPrefill)
		set(&s.MaxModelLen, v.MaxModelLen)
		set(&s.AsyncScheduling, v.AsyncScheduling)
		set(&s.EnforceEager, v.EnforceEager)
		if v.Version != nil {
			if _, ok := parseVersion(*v.Version); !ok && strings.TrimSpace(*v.Version) != "" {
				return fieldErrf("vllm.version", "want a vLLM release such as 0.19.0, got %q", clip.String(*v.Version))
			}
			s.VLLMVersion = strings.TrimSpace(*v.Version)
		}
		set(&s.ReserveFullSequence, v.ReserveFullISL)
		set(&s.OutputDelayUs, v.OutputDelayUs)
		if v.KVBlocksGPU != nil {
			n, err := ParseKVBlocks(*v.KVBlocksGPU)
			if err != nil {
				return fieldErr("vllm.total_kv_blocks_gpu", err)
			}
			k.TotalKVBlocksGPU = n
		}
	}
	if t := y.KVTiers; t != nil {
		if err := t.apply(&s.Tiers); err != nil {
			return err
		}
	}
	if err := y.applyHost(s, dir); err != nil {
		return err
	}
	l := y.Latency
	if l == nil {
		return nil
	}
	set(&s.Latency.Model, l.Model)
	if s.Latency.Model == "auto" {
		s.Latency.Model = ""
	}
	set(&s.Latency.Coefficients, l.Coefficients)
	if l.Coefficients != nil {
		s.Latency.Coefficients = resolve(s.Latency.Coefficients, dir)
	}
	set(&s.Latency.Noise, l.Noise)
	if r := l.Roofline; r != nil {
		rp := DefaultRooflineParams
		if s.Latency.Roofline != nil {
			rp = *s.Latency.Roofline
		}
		set(&rp.ComputeEff, r.ComputeEff)
		set(&rp.BandwidthEff, r.BandwidthEff)
		if r.Kernels != nil {
			rp.Scalar = !*r.Kernels
		}
		if r.StepOverheadUs != nil {
			switch text := strings.TrimSpace(*r.StepOverheadUs); text {
			case "auto":
				rp.StepOverheadUs, rp.StepOverheadSet = DefaultRooflineParams.StepOverheadUs, false
			default:
				us, err := strconv.ParseFloat(text, 64)
				if err != nil || !(us >= 0) || math.IsInf(us, 0) {
					return fieldErrf("latency.roofline.step_overhead_us", "want µs >= 0 or auto (from the vLLM version, async scheduling and CUDA graphs), got %q", clip.String(*r.StepOverheadUs))
				}
				rp.StepOverheadUs, rp.StepOverheadSet = us, true
			}
		}
		s.Latency.Roofline = &rp
	}
	if b := l.Blackbox; b != nil {
		bp := DefaultBlackboxParams
		if s.Latency.Blackbox != nil {
			bp = *s.Latency.Blackbox
		}
		for _, c := range []struct {
			name string
			src  *[]float64
			dst  *[3]float64
		}{{"alpha", b.Alpha, &bp.Alpha}, {"beta", b.Beta, &bp.Beta}} {
			if c.src == nil {
				continue
			}
			if len(*c.src) != 3 {
				return fieldErrf("latency.blackbox."+c.name, "wants three numbers, got %d", len(*c.src))
			}
			copy(c.dst[:], *c.src)
		}
		s.Latency.Blackbox = &bp
	}
	return nil
}

// ParseKVBlocks reads a GPU KV block count: a number > 0, or auto (0) to
// derive it from device memory.
func ParseKVBlocks(s string) (int64, error) {
	if s == "auto" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("must be a block count > 0 or auto, got %q", clip.String(s))
	}
	return n, nil
}

// resolve makes a relative file path relative to dir when that file
// exists; a shipped name stays as it is.
func resolve(ref, dir string) string {
	if ref == "" || filepath.IsAbs(ref) || dir == "" {
		return ref
	}
	if p := filepath.Join(dir, ref); fileExists(p) {
		return p
	}
	return ref
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// NumInstances is the deployment's instance count.
func (d *Deployment) NumInstances() int {
	n := 0
	for _, p := range d.Pools {
		n += p.Replicas
	}
	return n
}

// PoolOf is the index of instance i's pool.
func (d *Deployment) PoolOf(i int) int {
	for p, pool := range d.Pools {
		if i < pool.Replicas {
			return p
		}
		i -= pool.Replicas
	}
	return len(d.Pools) - 1
}

// Built is a deployment's cluster configuration (its instances and
// router settings; no policies: nil means always-admit and round-robin)
// and what was chosen for each pool.
type Built struct {
	Config cluster.Config
	// Pools[i] is pool i's first instance, for its physics constants and
	// latency choice (a pool's instances differ only in their noise
	// streams).
	Pools []*Instance
}

// PoolError is an error building pool Pool's instances.
type PoolError struct {
	Pool int
	Err  error // a *FieldError when a setting is at fault
}

func (e *PoolError) Error() string { return fmt.Sprintf("pool %d: %v", e.Pool, e.Err) }
func (e *PoolError) Unwrap() error { return e.Err }

// Build assembles every pool's instances in order, numbered across pools
// (cluster.InstanceID), each with its own noise stream (sim.InstanceStream
// by global index). Errors are *PoolError values.
func (d *Deployment) Build(rng sim.RNG) (*Built, error) {
	n := d.NumInstances()
	b := &Built{}
	idx := 0
	for pi, p := range d.Pools {
		t, err := p.Instance.Template()
		if err != nil {
			return nil, &PoolError{Pool: pi, Err: err}
		}
		if p.Replicas == 0 { // scaled to zero: built for its constants only
			b.Pools = append(b.Pools, t.At(rng, idx))
		}
		for r := 0; r < p.Replicas; r++ {
			in := t.At(rng, idx)
			if r == 0 {
				b.Pools = append(b.Pools, in)
			}
			ci := cluster.Instance{ID: cluster.InstanceID(idx, n), Pool: p.Name, Config: in.Config}
			if p.Instance.DP > 1 && in.Phys.Model.IsMoE() {
				// The engines of a data-parallel MoE server step together
				// (sim/lockstep.go); a dense model's are independent.
				ci.Lockstep = p.Name
			}
			b.Config.Instances = append(b.Config.Instances, ci)
			idx++
		}
	}
	b.Config.AdmissionLatencyUs = d.Router.AdmissionLatencyUs
	b.Config.RoutingLatencyUs = d.Router.RoutingLatencyUs
	b.Config.Freshness = d.Router.Freshness
	if d.KVStore != nil {
		b.Config.KVStore = d.KVStore.Cluster()
	}
	if n == 0 && len(b.Pools) > 0 {
		b.Config.RouterBlockSize = b.Pools[0].Config.Engine.BlockSizeTokens
	}
	return b, nil
}

// VLLMDPPublishUs is how often vLLM's DP coordinator publishes the
// engines' waiting and running counts to its load balancer (100 ms when
// they change; vllm/v1/engine/coordinator.py).
const VLLMDPPublishUs = 100_000

// Uniform is a deployment of n identical instances of spec, as
// --num-instances makes, with an instant router reading fresh signals.
// Its error is a *FieldError on replicas.
func Uniform(spec InstanceSpec, n int) (*Deployment, error) {
	if n < 1 || n > MaxInstances {
		return nil, fieldErrf("replicas", "must be in [1, %d], got %d", MaxInstances, n)
	}
	return &Deployment{Pools: []Pool{{Name: "pool0", Replicas: n, Role: RoleBoth, Instance: spec, Fleet: DefaultFleet(spec, n)}}, Network: DefaultNetwork()}, nil
}

// YAML is s as a pool's keys, every key given (the inverse of Apply, up
// to paths): what an experiment's --print-config writes. The latency
// model's parameters are written when s names that model, the offload
// threshold when there is a CPU tier.
func (s InstanceSpec) YAML() InstanceYAML {
	k := s.VLLM
	kv := "auto"
	if k.TotalKVBlocksGPU > 0 {
		kv = strconv.FormatInt(k.TotalKVBlocksGPU, 10)
	}
	y := InstanceYAML{
		Model: &s.Model, Hardware: &s.Hardware, TP: &s.TP, DP: ptr(max(1, s.DP)), ExpertParallel: &s.ExpertParallel,
		VLLM: &VLLMYAML{
			MaxNumSeqs: &k.MaxNumSeqs, MaxBatchedTokens: &k.MaxBatchedTokens, ChunkedPrefill: &k.ChunkedPrefillEnabled,
			PrefixCaching: &k.PrefixCachingEnabled, BlockSize: &k.BlockSizeTokens, KVBlocksGPU: &kv,
			GPUMemoryUtilization: &k.GPUMemoryUtilization, KVBlocksCPU: &k.TotalKVBlocksCPU,
			LongPrefill: &s.LongPrefillThreshold, MaxModelLen: &s.MaxModelLen, AsyncScheduling: &s.AsyncScheduling,
			EnforceEager: &s.EnforceEager, ReserveFullISL: &s.ReserveFullSequence, OutputDelayUs: &s.OutputDelayUs,
		},
	}
	if s.VLLMVersion != "" {
		y.VLLM.Version = &s.VLLMVersion
	}
	if k.TotalKVBlocksCPU > 0 { // no effect without a CPU tier
		y.VLLM.OffloadThreshold = &s.OffloadThreshold
	}
	y.KVTiers = s.Tiers.yaml()
	if s.Host != nil {
		y.HostProfile = &s.Host.Path
	}
	l := s.Latency
	model := l.Model
	if model == "" {
		model = "auto"
	}
	y.Latency = &LatencyYAML{Model: &model, Noise: &l.Noise}
	if l.Coefficients != "" {
		y.Latency.Coefficients = &l.Coefficients
	}
	if r := l.Roofline; r != nil || model == "roofline" {
		p := DefaultRooflineParams
		if r != nil {
			p = *r
		}
		overhead := "auto"
		if p.StepOverheadSet {
			overhead = strconv.FormatFloat(p.StepOverheadUs, 'g', -1, 64)
		}
		kernels := !p.Scalar
		y.Latency.Roofline = &RooflineYAML{ComputeEff: &p.ComputeEff, BandwidthEff: &p.BandwidthEff, StepOverheadUs: &overhead, Kernels: &kernels}
	}
	if b := l.Blackbox; b != nil || model == "blackbox" {
		p := DefaultBlackboxParams
		if b != nil {
			p = *b
		}
		a, be := p.Alpha[:], p.Beta[:]
		y.Latency.Blackbox = &BlackboxYAML{Alpha: &a, Beta: &be}
	}
	return y
}

func ptr[T any](v T) *T { return &v }
