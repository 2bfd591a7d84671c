// Package policy is an experiment's policy bundle: the admission,
// priority, routing, scheduler, autoscale and disaggregation policies, as
// one unit that an optimizer or a sweep swaps. Each of the six sections
// names a template and sets its parameters:
//
//	admission: {type: token-bucket, params: {capacity: 200000, refill_rate: 100000}}
//	priority:  {type: slo-based}
//	routing:   {type: weighted, params: {scorers: {prefix-affinity: 3, queue-depth: 2}}}
//	scheduler: {type: priority-fcfs}
//	autoscale: {type: none}
//	disaggregation: {type: never}
//
// The templates are plug-ins (internal/plugin) declared and registered
// beside the code that runs them: cluster/admit, cluster/route,
// cluster/autoscale and cluster/disagg list theirs, and package sim its
// priority and scheduler templates, each with its parameters (a
// schema.Key: type, unit, default, range), its rules across parameters
// and its builder. This package keeps the bundle, the file format, the
// frozen schema and the generated docs: Templates returns every template,
// the schema only grows (a template or parameter, once published, is
// never renamed or removed, nor its type or unit changed:
// testdata/schema.golden.json freezes it; docs/policies.md is generated
// from it), and a test checks the prose lists of the README and
// docs/cluster.md against it.
//
// A Section is a resolved section: a template and a value for every one of
// its parameters, defaults filled in. ParseSection makes one from what a
// file or a flag gave (Raw) and refuses unknown templates and parameters,
// wrong types, values out of range and broken rules across parameters,
// naming the key: it is the one check. The Build methods (Admission,
// Routing, ...) turn a Section into the policy the cluster or the engine
// runs; they need the experiment's context (Env): the instance count, the
// workload's tenants and its SLO targets.
//
// Policies are deterministic: a policy's state depends only on the
// requests and times it is given, and a built policy serves one run.
package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/sim"
)

// Kind is a section of the bundle.
type Kind = plugin.Kind

// The bundle's sections, in the order a request meets them (autoscale
// acts on the fleet, not on a request; disaggregation, added last, splits
// a request between a prefill and a decode instance once it is routed).
const (
	Admission      = plugin.Admission
	Priority       = plugin.Priority
	Routing        = plugin.Routing
	Scheduler      = plugin.Scheduler
	Autoscale      = plugin.Autoscale
	Disaggregation = plugin.Disaggregation
)

// Kinds lists the sections in file order.
var Kinds = []Kind{Admission, Priority, Routing, Scheduler, Autoscale, Disaggregation}

// A parameter is a schema.Key: its type, unit, default and range; a
// template is a plugin.Template, declared beside the code that runs it.
type (
	Param     = schema.Key
	ParamType = schema.Type
	Value     = schema.Value
	Entry     = schema.Entry
	DefaultBy = schema.DefaultBy
	Case      = schema.Case
	Template  = plugin.Template
	Env       = plugin.Env
)

// Parameter types.
const (
	Float    = schema.Float
	Int      = schema.Int
	Bool     = schema.Bool
	String   = schema.String
	FloatMap = schema.FloatMap
	IntMap   = schema.IntMap
)

// templates is the schema, in documentation order: each kind's templates
// as the package that runs them lists them, its default first,
// pathological templates last.
var templates = slices.Concat(admit.Templates, sim.PriorityTemplates, route.Templates, sim.SchedulerTemplates, autoscale.Templates, disagg.Templates)

// Templates lists kind's templates, its default first.
func Templates(kind Kind) []Template {
	var out []Template
	for _, t := range templates {
		if t.Kind == kind {
			out = append(out, t)
		}
	}
	return out
}

// Names lists kind's template names, its default first.
func Names(kind Kind) []string {
	var out []string
	for _, t := range Templates(kind) {
		out = append(out, t.Name)
	}
	return out
}

// Lookup is kind's template called name; an unknown name is an error
// listing the valid ones.
func Lookup(kind Kind, name string) (*Template, error) {
	for i := range templates {
		if t := &templates[i]; t.Kind == kind && t.Name == name {
			return t, nil
		}
	}
	if !slices.Contains(Kinds, kind) {
		return nil, fmt.Errorf("%q is not a policy section; use one of %s", schema.Clip(string(kind)), joinKinds())
	}
	return nil, fmt.Errorf("%s policy %q is not a template; use one of %s", kind, schema.Clip(name), strings.Join(Names(kind), ", "))
}

func joinKinds() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// param is t's parameter called name, or nil.
func param(t *Template, name string) (int, *Param) {
	for i := range t.Params {
		if t.Params[i].Name == name {
			return i, &t.Params[i]
		}
	}
	return -1, nil
}

// paramNames lists t's parameters in schema order.
func paramNames(t *Template) []string {
	out := make([]string, len(t.Params))
	for i, p := range t.Params {
		out[i] = p.Name
	}
	return out
}
