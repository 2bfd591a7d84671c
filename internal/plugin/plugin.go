// Package plugin is how a policy template is declared beside the code
// that runs it, as the llm-d endpoint picker registers its plugins by type
// name: a Template names its kind (routing, admission, ...), documents
// itself, declares its parameters (schema.Key: type, unit, default,
// range) and builds the policy from their values. Each policy package
// (cluster/route, cluster/admit, cluster/autoscale, cluster/disagg, sim
// for priority and scheduling) lists its templates in documentation
// order; package policy gathers them into the bundle's schema, its frozen
// golden and the generated docs, so adding a template is a change to the
// package that runs it (and the golden).
package plugin

import (
	"strings"

	"github.com/blis-sim/blis/internal/schema"
)

// Kind is a section of the policy bundle.
type Kind string

// The bundle's sections, in the order a request meets them (autoscale
// acts on the fleet, not on a request; disaggregation, added last, splits
// a request between a prefill and a decode instance once it is routed).
const (
	Admission      Kind = "admission"
	Priority       Kind = "priority"
	Routing        Kind = "routing"
	Scheduler      Kind = "scheduler"
	Autoscale      Kind = "autoscale"
	Disaggregation Kind = "disaggregation"
)

// Template is a policy template: a name within its kind, its parameters
// and how to build it.
type Template struct {
	Kind Kind
	Name string
	// Doc is one sentence (or a few) saying what the policy does, without
	// a final period.
	Doc string
	// Pathological templates exist to test anomaly detection: they
	// behave badly on purpose.
	Pathological bool
	Params       []schema.Key
	// Check, when set, checks rules across parameters (down < up, say);
	// it runs once, when the section is read, with every parameter in
	// range. Errors are *schema.Error keyed "params.NAME".
	Check func(p Params) error
	// Build makes the policy: an admit.Policy, a route.Policy, a
	// sim.PriorityPolicy, a sim.SchedulerPolicy, an autoscale.Builder or a
	// disagg.Decider, by Kind. Errors are *schema.Error keyed
	// "params.NAME" when a parameter is at fault.
	Build func(p Params, env Env) (any, error)
}

// Params are a section's parameter values, defaults filled in: the value
// of parameter name of the template's, of the type its Key declares.
type Params interface {
	Float(name string) float64
	Int(name string) int64
	Bool(name string) bool
	String(name string) string
	Map(name string) []schema.Entry
	Has(name string) bool
}

// Env is what building a policy needs to know of the experiment.
type Env struct {
	// Instances is the number of instances the router chooses among.
	Instances int
	// Tenants are the workload's tenant ids, by tenant index (nil when the
	// workload names none); a tenant map's keys must be among them.
	Tenants []string
	// TTFTUs and E2EUs are each SLO class's targets, µs (0: none), by
	// sim.SLOClass.
	TTFTUs, E2EUs [4]int64
	// QueueDepthRefreshUs is how often the instances' queue depths are
	// refreshed: vllm-dp's publication interval.
	QueueDepthRefreshUs int64
}

// TenantIndex is the index of tenant id among env's tenants; key names
// the parameter in errors.
func (env Env) TenantIndex(key, id string) (int, error) {
	for i, t := range env.Tenants {
		if t == id {
			return i, nil
		}
	}
	if len(env.Tenants) == 0 {
		return 0, schema.Errorf(key, "the workload names no tenants (a workload spec's tenants[].id, or a replayed trace's tenant_id column)")
	}
	return 0, schema.Errorf(key, "no tenant %q in the workload; its tenants are %s", schema.Clip(id), strings.Join(env.Tenants, ", "))
}
