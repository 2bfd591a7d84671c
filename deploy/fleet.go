package deploy

import (
	"path/filepath"
	"strings"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/internal/units"
)

// Fleet is a pool's side of autoscaling: the bounds an autoscaler keeps
// it in, the nodes its instances run on and what they cost, how long an
// instance takes to start and how a scale-down drains it. Times are in
// seconds, as a file gives them; DefaultFleet says where each default
// comes from (docs/autoscaling.md has the table).
type Fleet struct {
	// MinReplicas and MaxReplicas bound the pool's size under an
	// autoscaler (a fixed pool keeps Replicas). MaxGiven says whether the
	// file gave the maximum: an autoscaler needs one, as Kubernetes'
	// HorizontalPodAutoscaler needs maxReplicas.
	MinReplicas int  `json:"min_replicas"`
	MaxReplicas int  `json:"max_replicas"`
	MaxGiven    bool `json:"-"`
	// GPUsPerNode is a node's GPU count; at most MaxNodes nodes (0: no
	// limit). A node takes a delay uniform in ProvisionS to provision and
	// is released after NodeIdleS empty. PricePerGPUHour bills each node's
	// GPUs from its provisioning to its release.
	GPUsPerNode     int        `json:"gpus_per_node"`
	MaxNodes        int        `json:"max_nodes"`
	ProvisionS      [2]float64 `json:"provision_s"`
	NodeIdleS       float64    `json:"node_idle_s"`
	PricePerGPUHour float64    `json:"price_per_gpu_hour"`
	// PriceSource says where the price came from (the default table's
	// source, or "deployment").
	PriceSource string `json:"-"`
	// An instance starts in ImagePullS (once per node: the kubelet keeps
	// the image), then loads its weights at StorageGBps, then compiles
	// (CompileS) and captures its CUDA graphs (GraphCaptureS), unrouted.
	ImagePullS    float64 `json:"image_pull_s"`
	StorageGBps   float64 `json:"storage_gb_per_s"`
	CompileS      float64 `json:"compile_s"`
	GraphCaptureS float64 `json:"graph_capture_s"`
	// WarmupPenalty > 1 slows a new instance's steps by that factor when
	// it starts taking requests, falling linearly to 1 over WarmupS.
	WarmupPenalty float64 `json:"warmup_penalty"`
	WarmupS       float64 `json:"warmup_s"`
	// Drain is wait, immediate or redirect; DrainTimeoutS bounds wait and
	// redirect (0: none).
	Drain         string  `json:"drain"`
	DrainTimeoutS float64 `json:"drain_timeout_s"`
}

// Defaults of a pool's fleet, with their sources.
const (
	// DefaultGPUsPerNode is an 8-GPU server (NVIDIA HGX/DGX H100 and A100,
	// AWS p5.48xlarge, g6e.48xlarge).
	DefaultGPUsPerNode = 8
	// DefaultProvisionMinS and DefaultProvisionMaxS: a GPU node takes 2-8
	// min to be ready (BEE-30068; AKS reports ~10 min for an A100 node and
	// its pod, end to end).
	DefaultProvisionMinS = 120
	DefaultProvisionMaxS = 480
	// DefaultNodeIdleS is the cluster autoscaler's
	// --scale-down-unneeded-time (10 min).
	DefaultNodeIdleS = 600
	// DefaultImagePullS: pulling a 10 GB inference image (vLLM's class)
	// with overlayfs takes 7-10 min (tensorfuse.io, "snapshotter"
	// benchmarks); the low end.
	DefaultImagePullS = 420
	// DefaultStorageGBps: 70B weights (~140 GB) load in 1-10 min
	// (BEE-30068), 0.23-2.3 GB/s; 1 GB/s within that range.
	DefaultStorageGBps = 1.0
	// DefaultCompileS is torch.compile's time in vLLM's start-up on a cold
	// cache (~39 s, route179.dev 2026-06-30); 0 for a warm compile cache.
	DefaultCompileS = 39
	// DefaultGraphCaptureS: capturing vLLM's 67 CUDA graphs "can take more
	// than 10 s" (vllm-project/vllm#20098).
	DefaultGraphCaptureS = 10
	// DefaultWarmupS is the design's --warmup-duration example (docs/autoscaling.md) (the penalty
	// itself is off by default: an instance is routed to only once warm).
	DefaultWarmupS = 60
	// DefaultDrainTimeoutS is Kubernetes' terminationGracePeriodSeconds.
	DefaultDrainTimeoutS = 30
)

// GPUPrice is a default price per GPU-hour and where it comes from.
type GPUPrice struct {
	USD    float64
	Source string
}

// GPUPrices are on-demand prices per GPU-hour in USD by shipped hardware
// name (docs/autoscaling.md); a hardware not listed has no default price.
var GPUPrices = map[string]GPUPrice{
	"h100-sxm":  {2.95, "on-demand median over 37 providers, aimultiple.com GPU index, 2026-05-20"},
	"a100-80gb": {1.30, "middle of the specialty-cloud on-demand range $1.10-1.50, mercatus-ai.com, May 2026"},
	"l40s":      {1.46, "median over 13 marketplaces, aiminingco.com, week of 2026-06-15"},
	"rtx-4090":  {0.34, "gputracker.dev live feed, 2026-03-19"},
}

// DefaultFleet is the fleet of a pool of replicas instances of spec.
func DefaultFleet(spec InstanceSpec, replicas int) Fleet {
	f := Fleet{MinReplicas: min(1, replicas), MaxReplicas: max(1, replicas),
		GPUsPerNode: max(DefaultGPUsPerNode, spec.GPUs()), ProvisionS: [2]float64{DefaultProvisionMinS, DefaultProvisionMaxS},
		NodeIdleS: DefaultNodeIdleS, ImagePullS: DefaultImagePullS, StorageGBps: DefaultStorageGBps,
		CompileS: DefaultCompileS, GraphCaptureS: DefaultGraphCaptureS, WarmupPenalty: 1, WarmupS: DefaultWarmupS,
		Drain: "wait", DrainTimeoutS: DefaultDrainTimeoutS}
	hw := strings.TrimSuffix(filepath.Base(spec.Hardware), ".json")
	if p, ok := GPUPrices[hw]; ok {
		f.PricePerGPUHour, f.PriceSource = p.USD, p.Source
	}
	return f
}

// GPUs is one instance's GPUs: TP × DP ranks.
func (s InstanceSpec) GPUs() int { return max(1, s.TP) * max(1, s.DP) }

// FleetYAML is a pool's fleet keys, beside its replicas:
//
//	min_replicas: 1            # autoscaler's lower bound (default 1; 0: scale to zero)
//	max_replicas: 16           # its upper bound (required with an autoscaler)
//	nodes:
//	  gpus_per_node: 8
//	  max_nodes: 0             # 0: no limit
//	  provision_s: [120, 480]  # a new node's delay, uniform in [min, max]
//	  idle_s: 600              # an empty node is released after this
//	  price_per_gpu_hour: 2.95 # default: docs/autoscaling.md's table by hardware
//	startup:
//	  image_pull_s: 420        # once per node
//	  storage_gb_per_s: 1      # weight bytes / this
//	  compile_s: 39
//	  graph_capture_s: 10
//	  warmup_penalty: 1        # > 1: steps that much slower when first routed to
//	  warmup_s: 60             # ... falling to 1 over this
//	drain: {policy: wait, timeout_s: 30}   # wait, immediate, redirect
type FleetYAML struct {
	MinReplicas *int         `yaml:"min_replicas"`
	MaxReplicas *int         `yaml:"max_replicas"`
	Nodes       *NodesYAML   `yaml:"nodes"`
	Startup     *StartupYAML `yaml:"startup"`
	Drain       *DrainYAML   `yaml:"drain"`
}

// NodesYAML is a pool's nodes keys.
type NodesYAML struct {
	GPUsPerNode     *int       `yaml:"gpus_per_node"`
	MaxNodes        *int       `yaml:"max_nodes"`
	ProvisionS      *[]float64 `yaml:"provision_s"`
	IdleS           *float64   `yaml:"idle_s"`
	PricePerGPUHour *float64   `yaml:"price_per_gpu_hour"`
}

// StartupYAML is a pool's startup keys.
type StartupYAML struct {
	ImagePullS     *float64 `yaml:"image_pull_s"`
	StorageGBps    *float64 `yaml:"storage_gb_per_s"`
	CompileS       *float64 `yaml:"compile_s"`
	GraphCaptureS  *float64 `yaml:"graph_capture_s"`
	WarmupPenalty  *float64 `yaml:"warmup_penalty"`
	WarmupDuration *float64 `yaml:"warmup_s"`
}

// DrainYAML is a pool's drain keys.
type DrainYAML struct {
	Policy   *string  `yaml:"policy"`
	TimeoutS *float64 `yaml:"timeout_s"`
}

// apply sets f from y; errors are *FieldError values keyed relative to
// the pool. Each value is within its key's range (PoolKeys, checked when
// the file or flag was read); apply checks the rules across keys.
func (y *FleetYAML) apply(f *Fleet, replicas int, replicasGiven bool, gpus int) error {
	set(&f.MinReplicas, y.MinReplicas)
	if y.MaxReplicas != nil {
		f.MaxReplicas, f.MaxGiven = *y.MaxReplicas, true
	}
	if f.MaxReplicas < max(1, f.MinReplicas) {
		return fieldErrf("max_replicas", "must be at least max(1, min_replicas) = %d, got %d", max(1, f.MinReplicas), f.MaxReplicas)
	}
	if replicasGiven && (replicas < f.MinReplicas || replicas > f.MaxReplicas) {
		return fieldErrf("replicas", "must be within [min_replicas, max_replicas] = [%d, %d], got %d", f.MinReplicas, f.MaxReplicas, replicas)
	}
	if n := y.Nodes; n != nil {
		set(&f.GPUsPerNode, n.GPUsPerNode)
		if f.GPUsPerNode < gpus {
			return fieldErrf("nodes.gpus_per_node", "must be at least %d (one instance's GPUs, tp × data_parallel_size), got %d", gpus, f.GPUsPerNode)
		}
		set(&f.MaxNodes, n.MaxNodes)
		// The pool's initial instances must fit its nodes: one that found
		// no GPU once served anyway, on no node, billed nothing.
		if per := f.GPUsPerNode / gpus; f.MaxNodes > 0 && replicas > f.MaxNodes*per {
			return fieldErrf("nodes.max_nodes", "%d nodes of %d GPUs hold %d instances of %d GPUs, and the pool starts with %d (replicas): raise max_nodes or gpus_per_node, or start with fewer", f.MaxNodes, f.GPUsPerNode, f.MaxNodes*per, gpus, replicas)
		}
		if n.ProvisionS != nil {
			p := *n.ProvisionS
			if p[0] > p[1] {
				return fieldErrf("nodes.provision_s", "must be [min, max] with min <= max, got %v", p)
			}
			f.ProvisionS = [2]float64{p[0], p[1]}
		}
		set(&f.NodeIdleS, n.IdleS)
		if v := n.PricePerGPUHour; v != nil {
			f.PricePerGPUHour, f.PriceSource = *v, "deployment"
		}
	}
	if s := y.Startup; s != nil {
		set(&f.ImagePullS, s.ImagePullS)
		set(&f.CompileS, s.CompileS)
		set(&f.GraphCaptureS, s.GraphCaptureS)
		set(&f.WarmupS, s.WarmupDuration)
		set(&f.StorageGBps, s.StorageGBps)
		set(&f.WarmupPenalty, s.WarmupPenalty)
	}
	if d := y.Drain; d != nil {
		set(&f.Drain, d.Policy)
		set(&f.DrainTimeoutS, d.TimeoutS)
	}
	return nil
}

// YAML is f as a pool's keys, every key given (what --print-config
// writes).
func (f Fleet) YAML() FleetYAML {
	y := FleetYAML{MinReplicas: ptr(f.MinReplicas),
		Nodes: &NodesYAML{GPUsPerNode: ptr(f.GPUsPerNode), MaxNodes: ptr(f.MaxNodes), ProvisionS: ptr([]float64{f.ProvisionS[0], f.ProvisionS[1]}),
			IdleS: ptr(f.NodeIdleS), PricePerGPUHour: ptr(f.PricePerGPUHour)},
		Startup: &StartupYAML{ImagePullS: ptr(f.ImagePullS), StorageGBps: ptr(f.StorageGBps), CompileS: ptr(f.CompileS),
			GraphCaptureS: ptr(f.GraphCaptureS), WarmupPenalty: ptr(f.WarmupPenalty), WarmupDuration: ptr(f.WarmupS)},
		Drain: &DrainYAML{Policy: ptr(f.Drain), TimeoutS: ptr(f.DrainTimeoutS)}}
	if f.MaxGiven {
		y.MaxReplicas = ptr(f.MaxReplicas)
	}
	return y
}

func secondsUs(s float64) int64 { return units.SecondsToUs(s) }

// Scaling is the pool's cluster.PoolScaling without its policy: in's
// weights (all of its ranks') load at the storage rate.
func (p *Pool) Scaling(in *Instance) cluster.PoolScaling {
	f := p.Fleet
	weights := in.Phys.ParamBytesResident * float64(max(1, p.Instance.DP))
	drain, _ := cluster.ParseDrain(f.Drain)
	return cluster.PoolScaling{Name: p.Name, Min: p.Replicas, Max: p.Replicas,
		GPUsPerReplica: p.Instance.GPUs(), GPUsPerNode: f.GPUsPerNode, MaxNodes: f.MaxNodes,
		ProvisionMinUs: secondsUs(f.ProvisionS[0]), ProvisionMaxUs: secondsUs(f.ProvisionS[1]), NodeIdleUs: secondsUs(f.NodeIdleS),
		ImagePullUs: secondsUs(f.ImagePullS), LoadUs: secondsUs(weights / (f.StorageGBps * 1e9)),
		WarmUs: secondsUs(f.CompileS + f.GraphCaptureS), Drain: drain, DrainTimeoutUs: secondsUs(f.DrainTimeoutS),
		PricePerGPUHour: f.PricePerGPUHour, WarmupFactor: f.WarmupPenalty, WarmupUs: secondsUs(f.WarmupS)}
}
