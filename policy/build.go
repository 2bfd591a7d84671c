package policy

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/sim"
)

// Bundle is the six sections, resolved.
type Bundle struct {
	Admission, Priority, Routing, Scheduler, Autoscale, Disaggregation Section
}

// DefaultBundle is every section's default template with its defaults:
// always-admit, constant, round-robin, fcfs, none, never.
func DefaultBundle() Bundle {
	return Bundle{Default(Admission), Default(Priority), Default(Routing), Default(Scheduler), Default(Autoscale), Default(Disaggregation)}
}

// Section is b's section of kind.
func (b *Bundle) Section(kind Kind) *Section {
	switch kind {
	case Admission:
		return &b.Admission
	case Priority:
		return &b.Priority
	case Routing:
		return &b.Routing
	case Scheduler:
		return &b.Scheduler
	case Autoscale:
		return &b.Autoscale
	case Disaggregation:
		return &b.Disaggregation
	}
	panic("policy: no section " + string(kind))
}

// Env is what building a policy needs to know of the experiment.
type Env struct {
	// Instances is the number of instances the router chooses among.
	Instances int
	// Tenants are the workload's tenant ids, by tenant index (nil when the
	// workload names none); a tenant map's keys must be among them.
	Tenants []string
	// TTFTUs and E2EUs are each SLO class's targets, µs (0: none), by
	// sim.SLOClass: the budgets of deadline-aware.
	TTFTUs, E2EUs [4]int64
	// QueueDepthRefreshUs is how often the instances' queue depths are
	// refreshed: vllm-dp's publication interval.
	QueueDepthRefreshUs int64
}

// tenantIndex is the index of tenant id among env's tenants.
func (env Env) tenantIndex(key, id string) (int, error) {
	for i, t := range env.Tenants {
		if t == id {
			return i, nil
		}
	}
	if len(env.Tenants) == 0 {
		return 0, fieldErr(key, "the workload names no tenants (a workload spec's tenants[].id, or a replayed trace's tenant_id column)")
	}
	return 0, fieldErr(key, "no tenant %q in the workload; its tenants are %s", clip.String(id), strings.Join(env.Tenants, ", "))
}

// Admission builds s, an admission section.
func (s Section) Admission(env Env) (admit.Policy, error) {
	s.mustBe(Admission)
	switch s.Type {
	case admit.TokenBucketName, admit.RateLimitName:
		mk := func() (admit.Policy, error) {
			if s.Type == admit.TokenBucketName {
				return admit.NewTokenBucket(s.Float("capacity"), s.Float("refill_rate"))
			}
			return admit.NewRateLimit(s.Float("rate"), s.Float("burst"))
		}
		p, err := mk()
		if err != nil || !s.Bool("per_tenant") {
			return p, err
		}
		return admit.NewPerTenant(s.Type, func() admit.Policy { p, _ := mk(); return p }), nil
	case admit.TenantQuotaName:
		var per []int64
		for _, e := range s.Map("tenants") {
			i, err := env.tenantIndex("params.tenants."+e.Key, e.Key)
			if err != nil {
				return nil, err
			}
			for len(per) <= i {
				per = append(per, 0)
			}
			per[i] = int64(e.V)
		}
		return admit.NewTenantQuota(s.Int("max_in_flight"), per)
	}
	return admit.New(s.Type, admit.Params{})
}

// Routing builds s, a routing section, for env.Instances instances.
func (s Section) Routing(env Env) (route.Policy, error) {
	s.mustBe(Routing)
	var p route.Params
	if s.Has("prefix_index_capacity") {
		p.PrefixIndexCapacity = int(s.Int("prefix_index_capacity"))
	}
	if s.Has("scorers") {
		for _, e := range s.Map("scorers") {
			p.Scorers = append(p.Scorers, route.WeightedScorer{Name: e.Key, Weight: e.V})
		}
	}
	if s.Has("min_match_share") {
		p.MinMatchShare = s.Float("min_match_share")
	}
	if s.Has("prefix_mode") {
		p.PrefixMode = s.String("prefix_mode")
		w := route.DefaultTierWeights
		w[sim.TierCPU], w[sim.TierDisk], w[sim.TierStore] = s.Float("cpu_weight"), s.Float("disk_weight"), s.Float("store_weight")
		p.TierWeights = &w
	}
	p.RefreshUs = env.QueueDepthRefreshUs
	return route.New(s.Type, env.Instances, p)
}

// Scheduler builds s, a scheduler section.
func (s Section) Scheduler() (sim.SchedulerPolicy, error) {
	s.mustBe(Scheduler)
	return sim.ParseScheduler(s.Type)
}

// Priority builds s, a priority section: the score every instance's
// scheduler orders its queue by.
func (s Section) Priority(env Env) (sim.PriorityPolicy, error) {
	s.mustBe(Priority)
	kind, err := sim.ParsePriority(s.Type)
	if err != nil {
		return sim.PriorityPolicy{}, err
	}
	p := sim.PriorityPolicy{Kind: kind, Base: s.Float("base")}
	if s.Has("age_weight") {
		p.AgeWeight = s.Float("age_weight")
	}
	if s.Has("realtime_score") {
		p.ClassScore[sim.SLONone] = s.Float("default_score")
		p.ClassScore[sim.SLORealtime] = s.Float("realtime_score")
		p.ClassScore[sim.SLOInteractive] = s.Float("interactive_score")
		p.ClassScore[sim.SLOBatch] = s.Float("batch_score")
	}
	if s.Type == "tenant-priority" {
		p.DefaultTenantScore = s.Float("default_score")
		for _, e := range s.Map("tenants") {
			i, err := env.tenantIndex("params.tenants."+e.Key, e.Key)
			if err != nil {
				return p, err
			}
			for len(p.TenantScore) <= i {
				p.TenantScore = append(p.TenantScore, p.DefaultTenantScore)
			}
			p.TenantScore[i] = e.V
		}
	}
	if s.Has("default_budget_ms") {
		def := units.MsToUs(s.Float("default_budget_ms"))
		for c := range p.DeadlineUs {
			switch {
			case env.TTFTUs[c] > 0:
				p.DeadlineUs[c] = env.TTFTUs[c]
			case env.E2EUs[c] > 0:
				p.DeadlineUs[c] = env.E2EUs[c]
			default:
				p.DeadlineUs[c] = def
			}
		}
	}
	return p, p.Validate()
}

func (s Section) mustBe(k Kind) {
	if s.Kind != k {
		panic(fmt.Sprintf("policy: a %s section built as %s", s.Kind, k))
	}
}

// Autoscaler is a built autoscale section: New makes one policy per pool
// (nil for none: a fixed fleet), evaluated every IntervalUs.
type Autoscaler struct {
	New        func() autoscale.Policy
	IntervalUs int64
}

// Autoscale builds s, an autoscale section.
func (s Section) Autoscale() (Autoscaler, error) {
	s.mustBe(Autoscale)
	if s.Type == "none" {
		return Autoscaler{}, nil
	}
	us := func(name string) int64 { return units.SecondsToUs(s.Float(name)) }
	a := Autoscaler{IntervalUs: max(1, us("interval_s"))}
	metric := func() autoscale.Metric { m, _ := autoscale.ParseMetric(s.String("metric")); return m }
	switch s.Type {
	case "hpa":
		c := autoscale.DefaultHPA(metric(), s.Float("target"))
		c.Tolerance = s.Float("tolerance")
		c.UpWindowUs, c.DownWindowUs = us("scale_up_window_s"), us("scale_down_window_s")
		c.UpPercent, c.UpPods, c.UpPeriodUs = s.Float("scale_up_percent"), int(s.Int("scale_up_pods")), us("scale_up_period_s")
		c.DownPercent, c.DownPeriodUs = s.Float("scale_down_percent"), us("scale_down_period_s")
		if c.Metric == autoscale.MetricSLOAttainment && c.Target > 1 {
			return a, fieldErr("params.target", "an SLO attainment target is a share, within (0, 1], got %s", fmtNum(c.Target))
		}
		a.New = func() autoscale.Policy { return autoscale.NewHPA(c) }
	case "saturation":
		c := autoscale.SaturationConfig{KVThreshold: s.Float("kv_threshold"), ScaleUp: s.Float("scale_up"), ScaleDown: s.Float("scale_down"), QueueThreshold: s.Float("queue_threshold")}
		if c.ScaleDown >= c.ScaleUp {
			return a, fieldErr("params.scale_down", "must be < scale_up (%s), got %s", fmtNum(c.ScaleUp), fmtNum(c.ScaleDown))
		}
		b := autoscale.DefaultHPA("", 1)
		b.DownWindowUs = us("scale_down_window_s")
		a.New = func() autoscale.Policy { return autoscale.NewActuated(autoscale.NewSaturation(c), b) }
	case "queue-depth", "target-utilization":
		c := autoscale.ThresholdConfig{Metric: autoscale.MetricQueueDepth, Up: s.Float("up"), Down: s.Float("down"),
			Step: int(s.Int("step")), SustainUs: us("sustain_s"), CooldownUs: us("cooldown_s")}
		if s.Has("metric") {
			c.Metric = metric()
			c.HigherBetter = c.Metric == autoscale.MetricSLOAttainment
		}
		if c.Down >= c.Up {
			return a, fieldErr("params.down", "must be < up (%s): the band between them is the hysteresis, got %s", fmtNum(c.Up), fmtNum(c.Down))
		}
		name := s.Type
		a.New = func() autoscale.Policy { return autoscale.NewThreshold(name, c) }
	case "kpa":
		c := autoscale.KPAConfig{Target: s.Float("target"), StableWindowUs: us("stable_window_s"), PanicWindowUs: us("panic_window_s"),
			PanicThreshold: s.Float("panic_threshold"), MaxUpRate: s.Float("max_scale_up_rate"), MaxDownRate: s.Float("max_scale_down_rate")}
		if c.PanicWindowUs > c.StableWindowUs {
			return a, fieldErr("params.panic_window_s", "must be <= stable_window_s (%s s), got %s s", fmtNum(s.Float("stable_window_s")), fmtNum(s.Float("panic_window_s")))
		}
		a.New = func() autoscale.Policy { return autoscale.NewKPA(c) }
	case "oscillator":
		step := int(s.Int("step"))
		a.New = func() autoscale.Policy { return &autoscale.Oscillator{Step: step} }
	default:
		return a, fieldErr("type", "autoscale policy %q has no builder", s.Type)
	}
	return a, nil
}

// Disaggregator is a built disaggregation section: the decider (nil for
// never: no disaggregation) and the policy that picks a request's prefill
// instance.
type Disaggregator struct {
	Decider disagg.Decider
	Prefill route.Policy
}

// Disaggregation builds s, a disaggregation section; routing is the
// bundle's routing section, which picks the prefill instance when s sets
// no prefill_scorers (a second instance of it: its state is its own).
func (s Section) Disaggregation(env Env, routing Section) (Disaggregator, error) {
	s.mustBe(Disaggregation)
	if s.Type == disagg.NeverName {
		return Disaggregator{}, nil
	}
	var d Disaggregator
	var err error
	var threshold int64
	if s.Has("threshold") {
		threshold = s.Int("threshold")
	}
	if d.Decider, err = disagg.New(s.Type, threshold); err != nil {
		return d, err
	}
	if ws := s.Map("prefill_scorers"); len(ws) > 0 {
		var p route.Params
		for _, e := range ws {
			p.Scorers = append(p.Scorers, route.WeightedScorer{Name: e.Key, Weight: e.V})
		}
		p.RefreshUs = env.QueueDepthRefreshUs
		if d.Prefill, err = route.New(route.WeightedName, env.Instances, p); err != nil {
			return d, fieldErr("params.prefill_scorers", "%v", err)
		}
		return d, nil
	}
	d.Prefill, err = routing.Routing(env)
	return d, err
}
