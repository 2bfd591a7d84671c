package deploy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/yamlfile"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// Deployment is a cluster: pools of identical instances, and the
// admission, routing and signal freshness in front of them. A deployment
// file (YAML) spells it with the keys below; every key is optional except
// pools, and an absent key keeps its default.
//
//	pools:                          # one or more, in instance order
//	  - name: h100                  # letters, digits, . _ -; default pool<i>
//	    replicas: 4                 # instances in the pool (>= 1), default 1
//	    model: llama-3.1-8b         # shipped name or config.json path
//	    hardware: h100-sxm          # shipped name or hardware JSON path
//	    tp: 1
//	    vllm:                       # physics.VLLMKnobs' keys, plus five
//	      max_num_seqs: 256
//	      max_batched_tokens: 8192
//	      chunked_prefill_enabled: true
//	      prefix_caching_enabled: true
//	      block_size_tokens: 16
//	      total_kv_blocks_gpu: auto # or a block count
//	      gpu_memory_utilization: 0.9
//	      total_kv_blocks_cpu: 0
//	      offload_threshold: 0.9
//	      long_prefill_token_threshold: 0
//	      max_model_len: 0          # vLLM --max-model-len; 0: the model's context
//	      async_scheduling: true    # vLLM --async-scheduling
//	      scheduler_reserve_full_isl: true  # admit only when the whole prompt fits
//	      output_delay_us: 1500     # step end to the client, per token
//	    scheduler: fcfs
//	    priority: constant
//	    priority_base: 0
//	    priority_age_weight: 1
//	    latency:
//	      model: roofline           # physics, roofline, blackbox; default automatic
//	      coefficients: c.yaml      # physics
//	      roofline: {compute_eff: 0.8, bandwidth_eff: 0.8, step_overhead_us: 900} # compute: share of the GPU's sustained GEMM rate
//	      blackbox: {alpha: [1200, 0.08, 1.5], beta: [6000, 0.2, 30]}
//	      noise: 0
//	admission:
//	  policy: always-admit          # token-bucket, reject-all
//	  token_bucket_capacity: 100000 # input tokens
//	  token_bucket_refill_rate: 50000 # input tokens per second
//	  latency_us: 0
//	routing:
//	  policy: round-robin           # least-loaded, always-busiest, weighted, vllm-dp
//	  scorers: prefix-affinity:3,queue-depth:2,kv-utilization:2
//	  latency_us: 0
//	  prefix_index_capacity: 10000  # blocks per instance
//	  snapshot_refresh_interval_us: 0 # every signal; 0 = read at each decision
//	observability:                  # per signal, overriding the line above
//	  queue_depth: 0                # refresh interval in µs; 0 or immediate
//	  batch_size: 0
//	  kv_utilization: 0
//	  free_kv_blocks: 0
//	  cache_hit_rate: 10000
//
// Relative paths (model, hardware, coefficients) are resolved from the
// file's folder. Unknown keys, wrong types and bad values are errors that
// name the file, line and key.
type Deployment struct {
	Source    string // the file, for errors
	Pools     []Pool
	Admission AdmissionSpec
	Routing   RoutingSpec
	// Freshness is each signal's refresh interval, µs.
	Freshness cluster.Freshness

	doc      *yamlfile.Doc // key lines
	fromFile bool          // errors name the file and line; else they stay *FieldError
}

// Pool is a number of identical instances.
type Pool struct {
	Name     string
	Replicas int
	Instance InstanceSpec
}

// AdmissionSpec configures admission.
type AdmissionSpec struct {
	Policy                string
	TokenBucketCapacity   float64 // input tokens
	TokenBucketRefillRate float64 // input tokens per second
	LatencyUs             int64
}

// RoutingSpec configures routing.
type RoutingSpec struct {
	Policy              string
	Scorers             string
	LatencyUs           int64
	PrefixIndexCapacity int
}

// DefaultAdmission and DefaultRouting are the cluster's defaults.
var (
	DefaultAdmission = AdmissionSpec{Policy: admit.AlwaysAdmitName, TokenBucketCapacity: 100_000, TokenBucketRefillRate: 50_000}
	DefaultRouting   = RoutingSpec{Policy: route.RoundRobinName, Scorers: route.DefaultScorers, PrefixIndexCapacity: route.DefaultPrefixIndexCapacity}
)

// MaxInstances bounds a deployment's size.
const MaxInstances = 4096

// The file's shape, for yaml.v3 with unknown keys refused.
type fileYAML struct {
	Pools         []poolYAML     `yaml:"pools"`
	Admission     *admissionYAML `yaml:"admission"`
	Routing       *routingYAML   `yaml:"routing"`
	Observability *obsYAML       `yaml:"observability"`
}

type poolYAML struct {
	Name              string       `yaml:"name"`
	Replicas          *int         `yaml:"replicas"`
	Model             *string      `yaml:"model"`
	Hardware          *string      `yaml:"hardware"`
	TP                *int         `yaml:"tp"`
	VLLM              *vllmYAML    `yaml:"vllm"`
	Scheduler         *string      `yaml:"scheduler"`
	Priority          *string      `yaml:"priority"`
	PriorityBase      *float64     `yaml:"priority_base"`
	PriorityAgeWeight *float64     `yaml:"priority_age_weight"`
	Latency           *latencyYAML `yaml:"latency"`
}

type vllmYAML struct {
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
	ReserveFullISL       *bool    `yaml:"scheduler_reserve_full_isl"`
	OutputDelayUs        *int64   `yaml:"output_delay_us"`
}

type latencyYAML struct {
	Model        *string `yaml:"model"`
	Coefficients *string `yaml:"coefficients"`
	Roofline     *struct {
		ComputeEff     *float64 `yaml:"compute_eff"`
		BandwidthEff   *float64 `yaml:"bandwidth_eff"`
		StepOverheadUs *float64 `yaml:"step_overhead_us"`
	} `yaml:"roofline"`
	Blackbox *struct {
		Alpha *[]float64 `yaml:"alpha"`
		Beta  *[]float64 `yaml:"beta"`
	} `yaml:"blackbox"`
	Noise *float64 `yaml:"noise"`
}

type admissionYAML struct {
	Policy                *string  `yaml:"policy"`
	TokenBucketCapacity   *float64 `yaml:"token_bucket_capacity"`
	TokenBucketRefillRate *float64 `yaml:"token_bucket_refill_rate"`
	LatencyUs             *int64   `yaml:"latency_us"`
}

type routingYAML struct {
	Policy              *string `yaml:"policy"`
	Scorers             *string `yaml:"scorers"`
	LatencyUs           *int64  `yaml:"latency_us"`
	PrefixIndexCapacity *int    `yaml:"prefix_index_capacity"`
	RefreshUs           *int64  `yaml:"snapshot_refresh_interval_us"`
}

type obsYAML struct {
	QueueDepth    *string `yaml:"queue_depth"`
	BatchSize     *string `yaml:"batch_size"`
	KVUtilization *string `yaml:"kv_utilization"`
	FreeKVBlocks  *string `yaml:"free_kv_blocks"`
	CacheHitRate  *string `yaml:"cache_hit_rate"`
}

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// LoadDeployment reads and validates a deployment file.
func LoadDeployment(path string) (*Deployment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseDeployment(data, path)
}

// ParseDeployment reads a deployment file's bytes; source names it in
// errors and relative paths are resolved from its folder.
func ParseDeployment(data []byte, source string) (*Deployment, error) {
	var f fileYAML
	doc, err := yamlfile.Decode(data, source, &f, yamlTypes)
	if err != nil {
		return nil, err
	}
	d := &Deployment{Source: source, doc: doc, fromFile: true}
	dir := filepath.Dir(source)
	if len(f.Pools) == 0 {
		return nil, d.errAt("pools", "at least one pool is required")
	}
	total := 0
	for i, py := range f.Pools {
		key := fmt.Sprintf("pools[%d]", i)
		p, err := d.pool(py, key, i, dir)
		if err != nil {
			return nil, err
		}
		for _, o := range d.Pools {
			if o.Name == p.Name {
				return nil, d.errAt(key+".name", "pool name %q is used twice", p.Name)
			}
		}
		total += p.Replicas
		if total > MaxInstances {
			return nil, d.errAt(key+".replicas", "the deployment has more than %d instances", MaxInstances)
		}
		d.Pools = append(d.Pools, p)
	}
	if err := d.cluster(&f); err != nil {
		return nil, err
	}
	return d, nil
}

// yamlTypes names the file's mappings for error messages, with their keys.
var yamlTypes = map[string]yamlfile.Mapping{
	"deploy.fileYAML":      {What: "the top level", Keys: reflect.TypeOf(fileYAML{})},
	"deploy.poolYAML":      {What: "a pool", Keys: reflect.TypeOf(poolYAML{})},
	"deploy.vllmYAML":      {What: "vllm", Keys: reflect.TypeOf(vllmYAML{})},
	"deploy.latencyYAML":   {What: "latency", Keys: reflect.TypeOf(latencyYAML{})},
	"deploy.admissionYAML": {What: "admission", Keys: reflect.TypeOf(admissionYAML{})},
	"deploy.routingYAML":   {What: "routing", Keys: reflect.TypeOf(routingYAML{})},
	"deploy.obsYAML":       {What: "observability", Keys: reflect.TypeOf(obsYAML{})},
}

func (d *Deployment) errAt(key, format string, args ...any) error {
	return d.doc.Errorf(key, format, args...)
}

// Err rewrites a *FieldError from pool i's instances in file terms
// (file:line: pools[i].key: message); other errors get the file name.
func (d *Deployment) Err(pool int, err error) error {
	if !d.fromFile {
		return err
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", d.Source, err)
	}
	keys := make([]string, len(fe.Fields))
	for i, f := range fe.Fields {
		keys[i] = fmt.Sprintf("pools[%d].%s", pool, f)
	}
	return fmt.Errorf("%s:%d: %s: %w", d.Source, d.doc.Line(keys[0]), strings.Join(keys, ", "), fe.Err)
}

// resolve makes a relative file path relative to the deployment file's
// folder when that file exists; a shipped name stays as it is.
func resolve(ref, dir string) string {
	if ref == "" || filepath.IsAbs(ref) {
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

func (d *Deployment) pool(py poolYAML, key string, i int, dir string) (Pool, error) {
	p := Pool{Name: py.Name, Replicas: 1, Instance: DefaultInstanceSpec()}
	if p.Name == "" {
		p.Name = fmt.Sprintf("pool%d", i)
	}
	if !poolNameRE.MatchString(p.Name) {
		return p, d.errAt(key+".name", "%q must be 1-64 letters, digits, '.', '_' or '-'", p.Name)
	}
	if py.Replicas != nil {
		p.Replicas = *py.Replicas
	}
	if p.Replicas < 1 || p.Replicas > MaxInstances {
		return p, d.errAt(key+".replicas", "must be in [1, %d], got %d", MaxInstances, p.Replicas)
	}
	s := &p.Instance
	set(&s.Model, py.Model)
	s.Model = resolve(s.Model, dir)
	set(&s.Hardware, py.Hardware)
	s.Hardware = resolve(s.Hardware, dir)
	set(&s.TP, py.TP)
	set(&s.Scheduler, py.Scheduler)
	set(&s.Priority, py.Priority)
	set(&s.PriorityBase, py.PriorityBase)
	set(&s.PriorityAgeWeight, py.PriorityAgeWeight)
	if v := py.VLLM; v != nil {
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
		set(&s.ReserveFullSequence, v.ReserveFullISL)
		set(&s.OutputDelayUs, v.OutputDelayUs)
		if v.KVBlocksGPU != nil && *v.KVBlocksGPU != "auto" {
			n, err := strconv.ParseInt(*v.KVBlocksGPU, 10, 64)
			if err != nil || n <= 0 {
				return p, d.errAt(key+".vllm.total_kv_blocks_gpu", "must be a block count > 0 or auto, got %q", *v.KVBlocksGPU)
			}
			k.TotalKVBlocksGPU = n
		}
	}
	if l := py.Latency; l != nil {
		set(&s.Latency.Model, l.Model)
		set(&s.Latency.Coefficients, l.Coefficients)
		s.Latency.Coefficients = resolve(s.Latency.Coefficients, dir)
		set(&s.Latency.Noise, l.Noise)
		if r := l.Roofline; r != nil {
			rp := DefaultRooflineParams
			set(&rp.ComputeEff, r.ComputeEff)
			set(&rp.BandwidthEff, r.BandwidthEff)
			set(&rp.StepOverheadUs, r.StepOverheadUs)
			s.Latency.Roofline = &rp
		}
		if b := l.Blackbox; b != nil {
			bp := DefaultBlackboxParams
			for _, c := range []struct {
				name string
				src  *[]float64
				dst  *[3]float64
			}{{"alpha", b.Alpha, &bp.Alpha}, {"beta", b.Beta, &bp.Beta}} {
				if c.src == nil {
					continue
				}
				if len(*c.src) != 3 {
					return p, d.errAt(key+".latency.blackbox."+c.name, "wants three numbers, got %d", len(*c.src))
				}
				copy(c.dst[:], *c.src)
			}
			s.Latency.Blackbox = &bp
		}
	}
	return p, nil
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func (d *Deployment) cluster(f *fileYAML) error {
	d.Admission, d.Routing = DefaultAdmission, DefaultRouting
	if a := f.Admission; a != nil {
		set(&d.Admission.Policy, a.Policy)
		set(&d.Admission.TokenBucketCapacity, a.TokenBucketCapacity)
		set(&d.Admission.TokenBucketRefillRate, a.TokenBucketRefillRate)
		set(&d.Admission.LatencyUs, a.LatencyUs)
	}
	if r := f.Routing; r != nil {
		set(&d.Routing.Policy, r.Policy)
		set(&d.Routing.Scorers, r.Scorers)
		set(&d.Routing.LatencyUs, r.LatencyUs)
		set(&d.Routing.PrefixIndexCapacity, r.PrefixIndexCapacity)
		if r.RefreshUs != nil {
			if *r.RefreshUs < 0 {
				return d.errAt("routing.snapshot_refresh_interval_us", "must be >= 0 µs, got %d", *r.RefreshUs)
			}
			d.Freshness = cluster.Uniform(*r.RefreshUs)
		}
	}
	if o := f.Observability; o != nil {
		for sig, v := range []*string{o.QueueDepth, o.BatchSize, o.KVUtilization, o.FreeKVBlocks, o.CacheHitRate} {
			if v == nil {
				continue
			}
			key := "observability." + cluster.Signal(sig).String()
			us, err := ParseRefresh(*v)
			if err != nil {
				return d.errAt(key, "%v", err)
			}
			d.Freshness[sig] = us
		}
	}
	if err := d.Admission.Validate(); err != nil {
		return d.keyErr(err)
	}
	return d.keyErr(d.Routing.Validate(1))
}

// keyErr places a *FieldError of the cluster settings in the file.
func (d *Deployment) keyErr(err error) error {
	var fe *FieldError
	if err == nil || !d.fromFile || !errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("%s:%d: %s: %w", d.Source, d.doc.Line(fe.Fields[0]), strings.Join(fe.Fields, ", "), fe.Err)
}

// ParseRefresh reads a signal's refresh setting: "immediate" or 0 for a
// read at every decision, else an interval in µs.
func ParseRefresh(s string) (int64, error) {
	if s == "immediate" {
		return 0, nil
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil || us < 0 {
		return 0, fmt.Errorf("%q must be immediate or a refresh interval in µs >= 0", s)
	}
	return us, nil
}

// Validate checks the admission settings; errors are *FieldError under
// admission.
func (a AdmissionSpec) Validate() error {
	// Bounded like every other duration (sim.MaxDurationUs), so that the
	// clock plus it cannot overflow.
	if a.LatencyUs < 0 || a.LatencyUs > sim.MaxDurationUs {
		return fieldErrf("admission.latency_us", "must be within [0, %d] µs, got %d", sim.MaxDurationUs, a.LatencyUs)
	}
	_, err := a.Build()
	return err
}

// Build returns the admission policy.
func (a AdmissionSpec) Build() (admit.Policy, error) {
	if a.Policy == admit.TokenBucketName {
		if !(a.TokenBucketCapacity > 0) || math.IsInf(a.TokenBucketCapacity, 0) {
			return nil, fieldErrf("admission.token_bucket_capacity", "must be > 0 input tokens, got %v", a.TokenBucketCapacity)
		}
		if !(a.TokenBucketRefillRate >= 0) || math.IsInf(a.TokenBucketRefillRate, 0) {
			return nil, fieldErrf("admission.token_bucket_refill_rate", "must be >= 0 input tokens per second, got %v", a.TokenBucketRefillRate)
		}
	}
	p, err := admit.New(a.Policy, admit.Params{TokenBucketCapacity: a.TokenBucketCapacity, TokenBucketRefillRate: a.TokenBucketRefillRate})
	if err != nil {
		return nil, fieldErr("admission.policy", err)
	}
	return p, nil
}

// Validate checks the routing settings for n instances; errors are
// *FieldError under routing.
func (r RoutingSpec) Validate(n int) error {
	_, err := r.Build(n)
	return err
}

// Build returns the routing policy for n instances.
func (r RoutingSpec) Build(n int) (route.Policy, error) {
	if r.LatencyUs < 0 || r.LatencyUs > sim.MaxDurationUs {
		return nil, fieldErrf("routing.latency_us", "must be within [0, %d] µs, got %d", sim.MaxDurationUs, r.LatencyUs)
	}
	if r.PrefixIndexCapacity < 1 || r.PrefixIndexCapacity > route.MaxPrefixIndexCapacity {
		return nil, fieldErrf("routing.prefix_index_capacity", "must be within [1, %d] blocks, got %d", route.MaxPrefixIndexCapacity, r.PrefixIndexCapacity)
	}
	var ws []route.WeightedScorer
	if r.Policy == route.WeightedName {
		var err error
		if ws, err = route.ParseScorers(r.Scorers); err != nil {
			return nil, fieldErr("routing.scorers", err)
		}
	}
	p, err := route.New(r.Policy, n, route.Params{Scorers: ws, PrefixIndexCapacity: r.PrefixIndexCapacity})
	if err != nil {
		return nil, fieldErr("routing.policy", err)
	}
	return p, nil
}

// NumInstances is the deployment's instance count.
func (d *Deployment) NumInstances() int {
	n := 0
	for _, p := range d.Pools {
		n += p.Replicas
	}
	return n
}

// Built is a deployment's cluster configuration and what was chosen for
// each pool.
type Built struct {
	Config cluster.Config
	// Pools[i] is pool i's first instance, for its physics constants and
	// latency choice (a pool's instances differ only in their noise
	// streams).
	Pools []*Instance
}

// Build assembles the cluster: every pool's instances in order, numbered
// across pools (cluster.InstanceID), each with its own noise stream
// (sim.InstanceStream by global index), and the policies.
func (d *Deployment) Build(rng sim.RNG) (*Built, error) {
	n := d.NumInstances()
	if n < 1 {
		return nil, fmt.Errorf("%s: the deployment has no instance", d.Source)
	}
	b := &Built{}
	idx := 0
	for pi, p := range d.Pools {
		for r := 0; r < p.Replicas; r++ {
			in, err := p.Instance.Build(rng, idx)
			if err != nil {
				return nil, d.Err(pi, err)
			}
			if r == 0 {
				b.Pools = append(b.Pools, in)
			}
			b.Config.Instances = append(b.Config.Instances, cluster.Instance{ID: cluster.InstanceID(idx, n), Pool: p.Name, Config: in.Config})
			idx++
		}
	}
	var err error
	if b.Config.Admission, err = d.Admission.Build(); err != nil {
		return nil, d.keyErr(err)
	}
	if b.Config.Routing, err = d.Routing.Build(n); err != nil {
		return nil, d.keyErr(err)
	}
	if p, ok := b.Config.Routing.(*route.VLLMDP); ok {
		// vLLM's balancer adds its own sends between two publications of
		// the queue depths it reads.
		p.RefreshUs = d.Freshness[cluster.SigQueueDepth]
	}
	b.Config.AdmissionLatencyUs = d.Admission.LatencyUs
	b.Config.RoutingLatencyUs = d.Routing.LatencyUs
	b.Config.Freshness = d.Freshness
	return b, nil
}

// VLLMDPPublishUs is how often vLLM's DP coordinator publishes the
// engines' waiting and running counts to its load balancer (100 ms when
// they change; vllm/v1/engine/coordinator.py).
const VLLMDPPublishUs = 100_000

// Server is one vLLM server as spec describes it: one instance, or for
// spec.DP > 1 that many engines behind vLLM's own data-parallel load
// balancer (the vllm-dp router, reading counts refreshed every
// VLLMDPPublishUs). Its errors are Uniform's.
func Server(spec InstanceSpec) (*Deployment, error) {
	n := max(1, spec.DP)
	d, err := Uniform(spec, n)
	if err != nil || n == 1 {
		return d, err
	}
	d.Routing.Policy = route.VLLMDPName
	d.Freshness = cluster.Uniform(VLLMDPPublishUs)
	return d, nil
}

// Uniform is a deployment of n identical instances of spec under the
// default cluster settings, as --num-instances makes. Its errors are
// *FieldError values (a pool's keys, or replicas for n).
func Uniform(spec InstanceSpec, n int) (*Deployment, error) {
	if n < 1 || n > MaxInstances {
		return nil, fieldErrf("replicas", "must be in [1, %d], got %d", MaxInstances, n)
	}
	return &Deployment{Source: "flags", Pools: []Pool{{Name: "pool0", Replicas: n, Instance: spec}},
		Admission: DefaultAdmission, Routing: DefaultRouting}, nil
}
