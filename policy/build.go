package policy

import (
	"fmt"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
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

// build builds s with its template's builder.
func (s Section) build(kind Kind, env Env) (any, error) {
	s.mustBe(kind)
	return s.Template().Build(s, env)
}

// Admission builds s, an admission section.
func (s Section) Admission(env Env) (admit.Policy, error) {
	p, err := s.build(Admission, env)
	if err != nil {
		return nil, err
	}
	return p.(admit.Policy), nil
}

// Routing builds s, a routing section, for env.Instances instances.
func (s Section) Routing(env Env) (route.Policy, error) {
	p, err := s.build(Routing, env)
	if err != nil {
		return nil, err
	}
	return p.(route.Policy), nil
}

// Scheduler builds s, a scheduler section.
func (s Section) Scheduler() (sim.SchedulerPolicy, error) {
	p, err := s.build(Scheduler, Env{})
	if err != nil {
		return 0, err
	}
	return p.(sim.SchedulerPolicy), nil
}

// Priority builds s, a priority section: the score every instance's
// scheduler orders its queue by.
func (s Section) Priority(env Env) (sim.PriorityPolicy, error) {
	p, err := s.build(Priority, env)
	pp, _ := p.(sim.PriorityPolicy)
	return pp, err
}

func (s Section) mustBe(k Kind) {
	if s.Kind != k {
		panic(fmt.Sprintf("policy: a %s section built as %s", s.Kind, k))
	}
}

// Autoscaler is a built autoscale section: New makes one policy per pool
// (nil for none: a fixed fleet), evaluated every IntervalUs.
type Autoscaler = autoscale.Builder

// Autoscale builds s, an autoscale section. Its rules across parameters
// were checked when it was read (ParseSection), so building it cannot
// fail for them.
func (s Section) Autoscale() (Autoscaler, error) {
	p, err := s.build(Autoscale, Env{})
	if err != nil {
		return Autoscaler{}, err
	}
	return p.(Autoscaler), nil
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
	p, err := s.build(Disaggregation, env)
	if err != nil || p == nil || p.(disagg.Decider) == nil {
		return Disaggregator{}, err
	}
	d := Disaggregator{Decider: p.(disagg.Decider)}
	if ws := s.Map("prefill_scorers"); len(ws) > 0 {
		rp := route.Params{Scorers: route.Scorers(ws), RefreshUs: env.QueueDepthRefreshUs}
		if d.Prefill, err = route.New(route.WeightedName, env.Instances, rp); err != nil {
			return d, fieldErr("params.prefill_scorers", "%v", err)
		}
		return d, nil
	}
	d.Prefill, err = routing.Routing(env)
	return d, err
}
