package experiment

import (
	"fmt"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/plural"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

// InstanceReport is the JSON a single-instance run prints.
type InstanceReport struct {
	Tool    string `json:"tool"`
	Version int    `json:"version"`
	// Partial marks a run cancelled before its end: the metrics are those
	// of a horizon at the moment it stopped.
	Partial  bool                   `json:"partial,omitempty"`
	Config   InstanceConfig         `json:"config"`
	Workload *workload.ReplayReport `json:"replay,omitempty"`
	Metrics  *sim.Result            `json:"metrics"`
}

// InstanceConfig is the single-instance run's configuration as the
// report echoes it.
type InstanceConfig struct {
	InstanceEcho
	Workload string  `json:"workload"`
	Seed     int64   `json:"seed"`
	HorizonS float64 `json:"horizon_s"`
}

// InstanceEcho is an instance as the report echoes it.
type InstanceEcho struct {
	Model        string            `json:"model"`
	Hardware     string            `json:"hardware"`
	TP           int               `json:"tp"`
	VLLM         physics.VLLMKnobs `json:"vllm"`
	LongPrefill  int64             `json:"long_prefill_token_threshold"`
	MaxModelLen  int64             `json:"max_model_len,omitempty"` // when given: the model's otherwise
	Async        bool              `json:"async_scheduling"`
	ReserveFull  bool              `json:"scheduler_reserve_full_isl"`
	OutputDelay  int64             `json:"output_delay_us"`
	Scheduler    string            `json:"scheduler"`
	Priority     string            `json:"priority"`
	Latency      string            `json:"latency"`
	Coefficients string            `json:"coefficients,omitempty"`
	Noise        float64           `json:"latency_noise"`
	// KVTiers are the pool's disk and store link (absent without).
	KVTiers *deploy.TierSpec `json:"kv_tiers,omitempty"`
}

// ClusterReport is the JSON a cluster run prints.
type ClusterReport struct {
	Tool     string                 `json:"tool"`
	Version  int                    `json:"version"`
	Partial  bool                   `json:"partial,omitempty"`
	Config   ClusterConfig          `json:"config"`
	Workload *workload.ReplayReport `json:"replay,omitempty"`
	Spec     *SpecReport            `json:"workload_spec,omitempty"`
	Metrics  *cluster.Result        `json:"metrics"`
	Fitness  *cluster.FitnessResult `json:"fitness,omitempty"`
}

// SpecReport is what a workload spec's tenants sent.
type SpecReport struct {
	Source  string                 `json:"source"`
	Tenants []workload.TenantStats `json:"tenants"`
}

// ClusterConfig is a cluster run's configuration as the report echoes
// it.
type ClusterConfig struct {
	Instances int           `json:"instances"`
	Pools     []PoolEcho    `json:"pools"`
	Admission AdmissionEcho `json:"admission"`
	Routing   RoutingEcho   `json:"routing"`
	Policies  PoliciesEcho  `json:"policies"`
	// Network is the KV transfers' (under disaggregation only).
	Network       *deploy.Network  `json:"network,omitempty"`
	Observability map[string]int64 `json:"observability_refresh_us"`
	Workload      string           `json:"workload"`
	Seed          int64            `json:"seed"`
	HorizonS      float64          `json:"horizon_s"`
	// WindowUs is run.window (absent without it, so that a run's JSON
	// does not change).
	WindowUs int64 `json:"window_us,omitempty"`
	// KVStore is the fleet's shared KV store (absent without).
	KVStore *deploy.KVStoreSpec `json:"kv_store,omitempty"`
}

// PoolEcho is a pool as the report echoes it.
type PoolEcho struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Role and the pool's transfer physics, under disaggregation only.
	Role *cluster.PDPool `json:"disaggregation,omitempty"`
	InstanceEcho
	// Fleet is the pool's bounds, nodes, price, start-up and drain; its
	// start-up times as the run uses them (weights from the model's
	// bytes).
	Fleet *FleetEcho `json:"fleet,omitempty"`
}

// FleetEcho is a pool's fleet as the report echoes it.
type FleetEcho struct {
	deploy.Fleet
	// LoadS is the weights' load time, WarmS compile and graph capture.
	LoadS float64 `json:"weights_load_s"`
	WarmS float64 `json:"warm_s"`
}

// AdmissionEcho and RoutingEcho are the admission and routing policies
// in the report's first form (policies has every parameter).
type AdmissionEcho struct {
	Policy         string  `json:"policy"`
	BucketCapacity float64 `json:"token_bucket_capacity,omitempty"`
	BucketRefill   float64 `json:"token_bucket_refill_rate,omitempty"`
	LatencyUs      int64   `json:"latency_us"`
}

type RoutingEcho struct {
	Policy              string `json:"policy"`
	Scorers             string `json:"scorers,omitempty"`
	LatencyUs           int64  `json:"latency_us"`
	PrefixIndexCapacity int    `json:"prefix_index_capacity,omitempty"`
}

// PoliciesEcho is the policy bundle, every parameter.
type PoliciesEcho struct {
	Admission policy.Section `json:"admission"`
	Priority  policy.Section `json:"priority"`
	Routing   policy.Section `json:"routing"`
	Scheduler policy.Section `json:"scheduler"`
	Autoscale policy.Section `json:"autoscale"`
	// Disaggregation is absent when never (the echo of a run without it
	// keeps its shape, and its trace ids).
	Disaggregation *policy.Section `json:"disaggregation,omitempty"`
}

func echoInstance(e *Experiment, spec *deploy.InstanceSpec, in *deploy.Instance) InstanceEcho {
	var tiers *deploy.TierSpec
	if t := spec.Tiers; t.Disk != nil || t.Store != nil {
		tiers = &t
	}
	return InstanceEcho{
		KVTiers: tiers,
		Model:   in.Phys.Model.Name, Hardware: in.Phys.Hardware.Name, TP: in.Phys.TP, VLLM: in.Phys.Knobs,
		LongPrefill: spec.LongPrefillThreshold, MaxModelLen: spec.MaxModelLen, Async: spec.AsyncScheduling, ReserveFull: spec.ReserveFullSequence,
		OutputDelay: spec.OutputDelayUs, Scheduler: e.Policies.Scheduler.Type, Priority: e.Policies.Priority.Type,
		Latency: in.Config.Latency.Name(), Coefficients: in.CoefficientsSource, Noise: spec.Latency.Noise,
	}
}

// describeWorkload is the workload in one line.
func (e *Experiment) describeWorkload() string {
	w := &e.Workload
	switch w.Kind {
	case Replay:
		return "replay " + w.Replay.Path
	case Requests:
		return plural.Of(len(w.Requests), "request") + " given in-process"
	case Synthetic:
	default:
		return w.Spec.String()
	}
	s := w.Synthetic
	wl := fmt.Sprintf("%s, %s arrivals at %g/s, prompt %s, output %s", plural.Of(s.Requests, "request"), s.Arrival, s.Rate, s.Prompt, s.Output)
	if s.Arrival == workload.ArrivalGamma {
		wl += fmt.Sprintf(" (gamma cv %g)", s.GammaCV)
	}
	if s.PrefixGroups > 0 {
		wl += fmt.Sprintf(", %g share %d-token prefixes of %d groups", s.PrefixFraction, s.PrefixTokens, s.PrefixGroups)
	}
	return wl
}

func (e *Experiment) echoInstanceRun(in *deploy.Instance) InstanceConfig {
	return InstanceConfig{InstanceEcho: echoInstance(e, &e.Deployment.Pools[0].Instance, in), Workload: e.describeWorkload(), Seed: e.Run.Seed, HorizonS: e.Run.HorizonS}
}

func (e *Experiment) echoCluster(b *deploy.Built) ClusterConfig {
	d := &e.Deployment
	cc := ClusterConfig{Instances: d.NumInstances(), Workload: e.describeWorkload(), Seed: e.Run.Seed, HorizonS: e.Run.HorizonS,
		Observability: map[string]int64{}, WindowUs: e.Run.WindowUs, KVStore: d.KVStore}
	for i, p := range d.Pools {
		ps := p.Scaling(b.Pools[i])
		fl := &FleetEcho{Fleet: p.Fleet, LoadS: float64(ps.LoadUs) / 1e6, WarmS: float64(ps.WarmUs) / 1e6}
		cc.Pools = append(cc.Pools, PoolEcho{Name: p.Name, Replicas: p.Replicas, InstanceEcho: echoInstance(e, &p.Instance, b.Pools[i]), Fleet: fl})
	}
	a := e.Policies.Admission
	cc.Admission = AdmissionEcho{Policy: a.Type, LatencyUs: d.Router.AdmissionLatencyUs}
	if a.Type == admit.TokenBucketName {
		cc.Admission.BucketCapacity, cc.Admission.BucketRefill = a.Float("capacity"), a.Float("refill_rate")
	}
	r := e.Policies.Routing
	cc.Routing = RoutingEcho{Policy: r.Type, LatencyUs: d.Router.RoutingLatencyUs}
	if r.Type == route.WeightedName {
		var ws []route.WeightedScorer
		for _, s := range r.Map("scorers") {
			ws = append(ws, route.WeightedScorer{Name: s.Key, Weight: s.V})
			if s.Key == route.PrefixAffinity {
				cc.Routing.PrefixIndexCapacity = int(r.Int("prefix_index_capacity"))
			}
		}
		cc.Routing.Scorers = route.FormatScorers(ws)
	}
	p := &e.Policies
	cc.Policies = PoliciesEcho{p.Admission, p.Priority, p.Routing, p.Scheduler, p.Autoscale, nil}
	if e.Disaggregated() {
		cc.Policies.Disaggregation = &p.Disaggregation
		cc.Network = &d.Network
		if pd, err := d.PDPools(b); err == nil { // an error fails the run before its report
			for i := range pd {
				cc.Pools[i].Role = &pd[i]
			}
		}
	}
	for s := cluster.Signal(0); s < cluster.NumSignals; s++ {
		cc.Observability[s.String()] = d.Router.Freshness[s]
	}
	return cc
}

func msToUs(ms float64) int64 { return units.MsToUs(ms) }
