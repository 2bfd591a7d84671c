package sim

import (
	"math"

	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/internal/units"
)

// Priority and scheduler templates as plug-ins (internal/plugin): the
// score every instance's scheduler orders its queue by, and the order.

// Default class scores of slo-based and inverted-slo: realtime 100, batch
// 10, any other 50 (docs/policies.md).
const (
	DefaultRealtimeScore    = 100
	DefaultInteractiveScore = 50
	DefaultBatchScore       = 10
	DefaultClassScore       = 50
	// DefaultBudgetMs is deadline-aware's budget of a request whose
	// class has no target: the interactive class's published TTFT target.
	DefaultBudgetMs = 1000
)

var (
	pBase      = schema.Key{Name: "base", Type: schema.Float, Unit: "score", Doc: "added to every request's score (with the request's own integer priority; higher is served first by priority-fcfs)", Min: math.Inf(-1), Max: math.Inf(1)}
	pAgeWeight = schema.Key{Name: "age_weight", Type: schema.Float, Unit: "score per second", Doc: "score per second since the request's arrival", Default: schema.F(1), Max: math.Inf(1)}
)

// classScores are slo-based's and inverted-slo's per-class scores.
func classScores() []schema.Key {
	p := func(name, what string, v float64) schema.Key {
		return schema.Key{Name: name, Type: schema.Float, Unit: "score", Doc: "score of " + what, Default: schema.F(v), Min: math.Inf(-1), Max: math.Inf(1)}
	}
	return []schema.Key{
		p("realtime_score", "a realtime request", DefaultRealtimeScore),
		p("interactive_score", "an interactive request", DefaultInteractiveScore),
		p("batch_score", "a batch request", DefaultBatchScore),
		p("default_score", "a request without an SLO class", DefaultClassScore),
	}
}

// PriorityTemplates are the priority policies, in documentation order:
// the default first, the pathological last. Each builds a PriorityPolicy.
var PriorityTemplates = []plugin.Template{
	{Kind: plugin.Priority, Name: "constant", Doc: "Score = base + the request's priority",
		Params: []schema.Key{pBase}, Build: buildPriority("constant")},
	{Kind: plugin.Priority, Name: "slo-based", Doc: "Score = base + priority + the class's score + age_weight × age: classes first, then older requests (no starvation)",
		Params: append([]schema.Key{pBase, pAgeWeight}, classScores()...), Build: buildPriority("slo-based")},
	{Kind: plugin.Priority, Name: "tenant-priority", Doc: "Score = base + priority + the tenant's score",
		Params: []schema.Key{pBase,
			{Name: "tenants", Type: schema.FloatMap, Unit: "score", Doc: "scores of named tenants (keys: the workload's tenant ids)", Min: math.Inf(-1), Max: math.Inf(1)},
			{Name: "default_score", Type: schema.Float, Unit: "score", Doc: "score of a tenant not listed", Min: math.Inf(-1), Max: math.Inf(1)},
		}, Build: buildPriority("tenant-priority")},
	{Kind: plugin.Priority, Name: "deadline-aware", Doc: "Earliest deadline first: score = base + priority − (arrival + budget) in seconds, the budget being the request's SLO class's TTFT target, else its E2E target (the workload's targets)",
		Params: []schema.Key{pBase,
			{Name: "default_budget_ms", Type: schema.Float, Unit: "ms", Doc: "budget of a request whose class has no TTFT or E2E target, or that has no class (default the interactive class's published TTFT target)", Default: schema.F(DefaultBudgetMs), Max: 1e9},
		}, Build: buildPriority("deadline-aware")},
	{Kind: plugin.Priority, Name: "inverted-slo", Pathological: true, Doc: "The inverse of slo-based: score = base + priority − the class's score − age_weight × age",
		Params: append([]schema.Key{pBase, pAgeWeight}, classScores()...), Build: buildPriority("inverted-slo")},
}

// buildPriority builds priority template name.
func buildPriority(name string) func(plugin.Params, plugin.Env) (any, error) {
	return func(s plugin.Params, env plugin.Env) (any, error) { return priorityOf(name, s, env) }
}

func priorityOf(name string, s plugin.Params, env plugin.Env) (PriorityPolicy, error) {
	kind, err := ParsePriority(name)
	if err != nil {
		return PriorityPolicy{}, err
	}
	p := PriorityPolicy{Kind: kind, Base: s.Float("base")}
	if s.Has("age_weight") {
		p.AgeWeight = s.Float("age_weight")
	}
	if s.Has("realtime_score") {
		p.ClassScore[SLONone] = s.Float("default_score")
		p.ClassScore[SLORealtime] = s.Float("realtime_score")
		p.ClassScore[SLOInteractive] = s.Float("interactive_score")
		p.ClassScore[SLOBatch] = s.Float("batch_score")
	}
	if kind == PriorityTenant {
		p.DefaultTenantScore = s.Float("default_score")
		for _, e := range s.Map("tenants") {
			i, err := env.TenantIndex("params.tenants."+e.Key, e.Key)
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

// SchedulerTemplates are the schedulers, in documentation order: the
// default first, the pathological last. Each builds a SchedulerPolicy.
var SchedulerTemplates = []plugin.Template{
	{Kind: plugin.Scheduler, Name: "fcfs", Doc: "First come, first served; preempted requests return to the front", Build: buildScheduler("fcfs")},
	{Kind: plugin.Scheduler, Name: "priority-fcfs", Doc: "Highest priority score first, then arrival", Build: buildScheduler("priority-fcfs")},
	{Kind: plugin.Scheduler, Name: "sjf", Doc: "Shortest prompt first, then arrival", Build: buildScheduler("sjf")},
	{Kind: plugin.Scheduler, Name: "reverse-priority", Pathological: true, Doc: "Lowest priority score first", Build: buildScheduler("reverse-priority")},
}

func buildScheduler(name string) func(plugin.Params, plugin.Env) (any, error) {
	return func(plugin.Params, plugin.Env) (any, error) { return ParseScheduler(name) }
}
