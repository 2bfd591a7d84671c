// Package policy is the policy bundle of seeds 000 and 002: the admission,
// priority, routing, scheduler, autoscale and disaggregation policies of an experiment, as
// one unit that an optimizer or a sweep swaps. Each of the six sections
// names a built-in template and sets its parameters:
//
//	admission: {type: token-bucket, params: {capacity: 200000, refill_rate: 100000}}
//	priority:  {type: slo-based}
//	routing:   {type: weighted, params: {scorers: {prefix-affinity: 3, queue-depth: 2}}}
//	scheduler: {type: priority-fcfs}
//	autoscale: {type: none}
//	disaggregation: {type: never}
//
// Templates returns every template with its parameters, their units,
// defaults and ranges: the schema. The schema only grows: a template or
// parameter, once published, is never renamed or removed, nor its type
// or unit changed (testdata/schema.golden.json freezes it; docs/policies.md
// is generated from it).
//
// A Section is a resolved section: a template and a value for every one of
// its parameters, defaults filled in. ParseSection makes one from what a
// file or a flag gave (Raw) and refuses unknown templates and parameters,
// wrong types and values out of range, naming the key. The Build methods
// turn a Section into the policy the cluster or the engine runs; they need
// the experiment's context (Env): the instance count, the workload's
// tenants and its SLO targets.
//
// Policies are deterministic: a policy's state depends only on the
// requests and times it is given, and a built policy serves one run.
package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/sim"
)

// Kind is a section of the bundle.
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

// Kinds lists the sections in file order.
var Kinds = []Kind{Admission, Priority, Routing, Scheduler, Autoscale, Disaggregation}

// ParamType is a parameter's type.
type ParamType string

// Parameter types. A map's keys are tenant ids, or the names in
// Param.Keys; its values are numbers.
const (
	Float    ParamType = "float"
	Int      ParamType = "int"
	Bool     ParamType = "bool"
	String   ParamType = "string"
	FloatMap ParamType = "map[string]float"
	IntMap   ParamType = "map[string]int"
)

// Param is one parameter of a template.
type Param struct {
	Name string
	Type ParamType
	// Unit of the value (of a map's values); "" when dimensionless.
	Unit string
	Doc  string
	// Default is the value when the parameter is not given.
	Default Value
	// Min and Max bound a number (a map's values); MinOpen and MaxOpen
	// exclude the bound itself. Every number must also be finite.
	Min, Max         float64
	MinOpen, MaxOpen bool
	// Keys, when set, are the only keys a map may have; otherwise a
	// map is keyed by the workload's tenant ids.
	Keys []string
	// Enum lists a string's values.
	Enum []string
	// DefaultBy, when set, makes the default depend on another
	// parameter's value (a string's): the parameter takes the case's
	// value when not given, and must be given when no case matches.
	DefaultBy *DefaultBy
}

// DefaultBy is a default that depends on parameter Param.
type DefaultBy struct {
	Param string
	Cases []Case
}

// Case is DefaultBy's value V when the other parameter is When.
type Case struct {
	When string
	V    Value
}

// Template is a built-in policy.
type Template struct {
	Kind Kind
	Name string
	Doc  string
	// Pathological templates exist to test anomaly detection: they
	// behave badly on purpose.
	Pathological bool
	Params       []Param
}

// Value is a parameter's value; the field its type uses is set.
type Value struct {
	F float64 // Float
	I int64   // Int
	B bool    // Bool
	S string  // String
	M []Entry // FloatMap, IntMap: in the order given
}

// Entry is one key of a map parameter.
type Entry struct {
	Key string
	V   float64 // an IntMap's values are whole numbers
}

func num(v float64) Value   { return Value{F: v} }
func integer(v int64) Value { return Value{I: v} }
func text(v string) Value   { return Value{S: v} }

// Parameters shared by several templates.
var (
	pPerTenant = Param{Name: "per_tenant", Type: Bool, Doc: "one independent bucket per tenant, each with this capacity and rate, instead of one shared by all"}
	pBase      = Param{Name: "base", Type: Float, Unit: "score", Doc: "added to every request's score (with the request's own integer priority; higher is served first by priority-fcfs)", Min: math.Inf(-1), Max: math.Inf(1)}
	pAgeWeight = Param{Name: "age_weight", Type: Float, Unit: "score per second", Doc: "score per second since the request's arrival", Default: num(1), Max: math.Inf(1)}
	// pPrefillScorers is the prefill profile's scorers (llm-d runs a
	// prefill profile with its own scorers after the decode one).
	pPrefillScorers = Param{Name: "prefill_scorers", Type: FloatMap, Unit: "weight", Doc: "the prefill instance is picked by the weighted policy with these scorers and weights among the instances that prefill (normalized to sum to 1); not given: the routing section's policy, run again among them",
		Max: math.Inf(1), Keys: route.ScorerNames}
	pPrefixMode = Param{Name: "prefix_mode", Type: String, Doc: "approximate: the router's own prefix index, learned from its decisions; precise: the instances' KV events, block by block and tier by tier, as llm-d's precise prefix-cache scorer (docs/kv-tiers.md)",
		Default: text(route.PrefixApproximate), Enum: []string{route.PrefixApproximate, route.PrefixPrecise}}
	pTierWeights = []Param{
		{Name: "cpu_weight", Type: Float, Doc: "precise mode: what a block in an instance's CPU tier is worth against one on its GPU (1); llm-d's kvCacheBackendConfigs cpu weight", Default: num(route.DefaultTierWeights[sim.TierCPU]), Max: 1},
		{Name: "disk_weight", Type: Float, Doc: "precise mode: a block on an instance's local disk (ours)", Default: num(route.DefaultTierWeights[sim.TierDisk]), Max: 1},
		{Name: "store_weight", Type: Float, Doc: "precise mode: a block in the fleet's shared KV store, for the instances linked to it (ours)", Default: num(route.DefaultTierWeights[sim.TierStore]), Max: 1},
	}
	pIndexCap = Param{Name: "prefix_index_capacity", Type: Int, Unit: "blocks", Doc: "router-side prefix index size per instance, least recently used blocks evicted first; 0: each instance's own KV capacity (its GPU blocks, CPU tier and disk; seed 001's fixed 10000 forgot what the instances still held)", Default: integer(route.AutoPrefixIndexCapacity), Min: 0, Max: route.MaxPrefixIndexCapacity}
)

// classScores are slo-based's and inverted-slo's per-class scores (seed
// 002 F.1: realtime 100, batch 10, any other 50).
func classScores() []Param {
	p := func(name, what string, v float64) Param {
		return Param{Name: name, Type: Float, Unit: "score", Doc: "score of " + what, Default: num(v), Min: math.Inf(-1), Max: math.Inf(1)}
	}
	return []Param{
		p("realtime_score", "a realtime request", 100),
		p("interactive_score", "an interactive request", 50),
		p("batch_score", "a batch request", 10),
		p("default_score", "a request without an SLO class", 50),
	}
}

// templates is the schema, in documentation order: each kind's default
// first, pathological templates last.
var templates = []Template{
	{Kind: Admission, Name: admit.AlwaysAdmitName, Doc: "Admits every request"},
	{Kind: Admission, Name: admit.TokenBucketName, Doc: "A bucket of input tokens (seed 001): a request costs its prompt tokens; the bucket starts full, holds at most `capacity` and refills at `refill_rate`; a request that finds too few tokens is rejected and takes none",
		Params: []Param{
			{Name: "capacity", Type: Float, Unit: "input tokens", Doc: "the bucket's size; a prompt longer than it is always rejected", Default: num(100_000), MinOpen: true, Max: math.Inf(1)},
			{Name: "refill_rate", Type: Float, Unit: "input tokens/s", Doc: "tokens added per simulated second", Default: num(50_000), Max: math.Inf(1)},
			pPerTenant,
		}},
	{Kind: Admission, Name: admit.RateLimitName, Doc: "A request-count bucket, as Envoy's local rate limit filter (max_tokens, tokens_per_fill): each request costs 1; the bucket starts full with `burst` requests and refills at `rate`",
		Params: []Param{
			{Name: "rate", Type: Float, Unit: "requests/s", Doc: "requests admitted per simulated second, sustained (seed 002 F.1's 100/s)", Default: num(100), MinOpen: true, Max: math.Inf(1)},
			{Name: "burst", Type: Float, Unit: "requests", Doc: "requests admitted at once from a full bucket (seed 002 F.1's bucket_size 1000)", Default: num(1000), Min: 1, Max: math.Inf(1)},
			pPerTenant,
		}},
	{Kind: Admission, Name: admit.TenantQuotaName, Doc: "A concurrency limit per tenant: a request is rejected while its tenant has `max_in_flight` admitted requests that have not left the cluster",
		Params: []Param{
			{Name: "max_in_flight", Type: Int, Unit: "requests", Doc: "each tenant's limit (default vLLM's max_num_seqs: one instance's full batch)", Default: integer(256), Min: 1, Max: 1 << 40},
			{Name: "tenants", Type: IntMap, Unit: "requests", Doc: "limits of named tenants, overriding max_in_flight (keys: the workload's tenant ids)", Min: 1, Max: 1 << 40},
		}},
	{Kind: Admission, Name: admit.RejectAllName, Pathological: true, Doc: "Rejects every request"},

	{Kind: Priority, Name: "constant", Doc: "Score = base + the request's priority",
		Params: []Param{pBase}},
	{Kind: Priority, Name: "slo-based", Doc: "Score = base + priority + the class's score + age_weight × age: classes first, then older requests (no starvation)",
		Params: append([]Param{pBase, pAgeWeight}, classScores()...)},
	{Kind: Priority, Name: "tenant-priority", Doc: "Score = base + priority + the tenant's score",
		Params: []Param{pBase,
			{Name: "tenants", Type: FloatMap, Unit: "score", Doc: "scores of named tenants (keys: the workload's tenant ids)", Min: math.Inf(-1), Max: math.Inf(1)},
			{Name: "default_score", Type: Float, Unit: "score", Doc: "score of a tenant not listed", Min: math.Inf(-1), Max: math.Inf(1)},
		}},
	{Kind: Priority, Name: "deadline-aware", Doc: "Earliest deadline first: score = base + priority − (arrival + budget) in seconds, the budget being the request's SLO class's TTFT target, else its E2E target (the workload's targets)",
		Params: []Param{pBase,
			{Name: "default_budget_ms", Type: Float, Unit: "ms", Doc: "budget of a request whose class has no TTFT or E2E target, or that has no class (default the interactive class's published TTFT target)", Default: num(1000), Max: 1e9},
		}},
	{Kind: Priority, Name: "inverted-slo", Pathological: true, Doc: "The inverse of slo-based: score = base + priority − the class's score − age_weight × age",
		Params: append([]Param{pBase, pAgeWeight}, classScores()...)},

	{Kind: Routing, Name: route.RoundRobinName, Doc: "Each instance in turn"},
	{Kind: Routing, Name: route.LeastLoadedName, Doc: "The instance with the least load (queue depth + running batch + the router's in-flight), the lowest index on a tie"},
	{Kind: Routing, Name: route.WeightedName, Doc: "llm-d's endpoint picker (seed 001): each scorer scores every instance in [0, 1], the weighted sum (weights normalized) picks the best, the lowest index on a tie",
		Params: []Param{
			{Name: "scorers", Type: FloatMap, Unit: "weight", Doc: "scorers and their weights, normalized to sum to 1 (at least one > 0)", Default: Value{M: []Entry{{route.PrefixAffinity, 3}, {route.QueueDepth, 2}, {route.KVUtilization, 2}}},
				Max: math.Inf(1), Keys: route.ScorerNames},
			pIndexCap, pPrefixMode, pTierWeights[0], pTierWeights[1], pTierWeights[2],
		}},
	{Kind: Routing, Name: route.PrefixAffinityName, Doc: "The instance whose router-side prefix index holds the longest share of the request's blocks, the least loaded among equals; least-loaded on a miss",
		Params: []Param{pIndexCap,
			{Name: "min_match_share", Type: Float, Doc: "a hit needs more than this share of the request's blocks cached", MaxOpen: true, Max: 1},
			pPrefixMode, pTierWeights[0], pTierWeights[1], pTierWeights[2],
		}},
	{Kind: Routing, Name: route.VLLMDPName, Doc: "vLLM's own data-parallel load balancer: the engine with the lowest 4 × waiting + running in the counts it last published (every queue_depth refresh), with its own sends since then added"},
	{Kind: Routing, Name: route.AlwaysBusiestName, Pathological: true, Doc: "The most loaded instance"},

	{Kind: Scheduler, Name: "fcfs", Doc: "First come, first served; preempted requests return to the front"},
	{Kind: Scheduler, Name: "priority-fcfs", Doc: "Highest priority score first, then arrival"},
	{Kind: Scheduler, Name: "sjf", Doc: "Shortest prompt first, then arrival"},
	{Kind: Scheduler, Name: "reverse-priority", Pathological: true, Doc: "Lowest priority score first"},

	{Kind: Autoscale, Name: "none", Doc: "A fixed fleet: every pool keeps its replicas"},
	{Kind: Autoscale, Name: "hpa", Doc: "Kubernetes' HorizontalPodAutoscaler (autoscaling/v2) on one metric, with its defaults: desired = ceil(ready × metric / target) unless within the tolerance; a scale-down takes the highest recommendation of its stabilization window, a scale-up the lowest of its own; rate limits per period",
		Params: []Param{
			pInterval(15, "the HPA controller's sync period (--horizontal-pod-autoscaler-sync-period)"),
			pMetric,
			{Name: "target", Type: Float, Unit: "metric's unit", Doc: "the metric's target per ready replica (slo_attainment: the share of requests to keep within their SLO, which scales up when attainment falls under it); defaults: llm-d's saturation thresholds (kvCacheThreshold 0.8, queueLengthThreshold 5) and Knative's concurrency target (100 × 70 %)",
				MinOpen: true, Max: math.Inf(1),
				DefaultBy: &DefaultBy{Param: "metric", Cases: []Case{{"kv_utilization", num(0.8)}, {"queue_depth", num(5)}, {"in_flight", num(70)}}}},
			{Name: "tolerance", Type: Float, Doc: "no change while metric/target is within 1 ± tolerance (--horizontal-pod-autoscaler-tolerance)", Default: num(0.1), Max: 1, MaxOpen: true},
			{Name: "scale_up_window_s", Type: Float, Unit: "s", Doc: "scale-up stabilization window (behavior.scaleUp.stabilizationWindowSeconds)", Max: 3600},
			{Name: "scale_down_window_s", Type: Float, Unit: "s", Doc: "scale-down stabilization window (behavior.scaleDown.stabilizationWindowSeconds)", Default: num(300), Max: 3600},
			{Name: "scale_up_percent", Type: Float, Unit: "%", Doc: "a scale-up adds at most this share of the replicas per scale_up_period_s (or scale_up_pods, whichever is more)", Default: num(100), MinOpen: true, Max: 1e6},
			{Name: "scale_up_pods", Type: Int, Unit: "replicas", Doc: "a scale-up may always add this many per scale_up_period_s", Default: integer(4), Min: 0, Max: 1 << 20},
			{Name: "scale_up_period_s", Type: Float, Unit: "s", Doc: "the scale-up rate policies' period", Default: num(15), MinOpen: true, Max: 1800},
			{Name: "scale_down_percent", Type: Float, Unit: "%", Doc: "a scale-down removes at most this share of the replicas per scale_down_period_s", Default: num(100), MinOpen: true, Max: 100},
			{Name: "scale_down_period_s", Type: Float, Unit: "s", Doc: "the scale-down rate policy's period", Default: num(15), MinOpen: true, Max: 1800},
		}},
	{Kind: Autoscale, Name: "saturation", Doc: "llm-d's workload-variant-autoscaler saturation analyzer (v2): KV-token demand (tokens in use and queued prompts) against supply (each ready replica's min(KV capacity × kv_threshold, its compute-bound capacity: the tokens in use when the queue is saturated, else the average of the last 10 such observations, else N·(I + O/2), N = min(B·O/(I+O), S))); scale up above scale_up of the supply, down under scale_down; the recommendation goes through an HPA, as WVA's does",
		Params: []Param{
			pInterval(60, "WVA's reconcile interval (its chart's reconcileInterval)"),
			{Name: "kv_threshold", Type: Float, Doc: "a replica's usable share of its KV capacity (kvCacheThreshold)", Default: num(0.8), MinOpen: true, Max: 1},
			{Name: "scale_up", Type: Float, Doc: "scale up when demand exceeds this share of the supply (ScaleUpThreshold)", Default: num(0.85), MinOpen: true, Max: 1},
			{Name: "scale_down", Type: Float, Doc: "scale down when demand is under this share of the supply (ScaleDownBoundary)", Default: num(0.70), Max: 1, MaxOpen: true},
			{Name: "queue_threshold", Type: Float, Unit: "requests", Doc: "waiting requests per replica from which the queue is saturated and the tokens in use are the observed compute-bound capacity (queueLengthThreshold)", Default: num(5), MinOpen: true, Max: math.Inf(1)},
			{Name: "scale_down_window_s", Type: Float, Unit: "s", Doc: "the scale-down stabilization window of the HPA that actuates WVA's desired replicas (wva_desired_replicas, an external metric; Kubernetes' default; its tolerance 0.1 and rate limits apply too)", Default: num(300), Max: 3600},
		}},
	{Kind: Autoscale, Name: "queue-depth", Doc: "A threshold policy on the waiting requests per ready replica: add `step` replicas when the queue stays above `up` for `sustain_s`, remove `step` when it stays under `down`; then wait `cooldown_s` (seed 000: queue over threshold for 60 s → scale up)",
		Params: append([]Param{pInterval(15, "the HPA's sync period"),
			{Name: "up", Type: Float, Unit: "requests", Doc: "scale up above this queue per replica (llm-d's queueLengthThreshold)", Default: num(5), Max: math.Inf(1)},
			{Name: "down", Type: Float, Unit: "requests", Doc: "scale down below this queue per replica (< up: the hysteresis band)", Default: num(0.5), Max: math.Inf(1)},
		}, thresholdParams(60)...)},
	{Kind: Autoscale, Name: "target-utilization", Doc: "A threshold policy on a utilization metric (seed 002's threshold template: up 0.8, down 0.3, cooldown 60 s): add `step` replicas when the metric stays above `up` for `sustain_s`, remove `step` when under `down`; then wait `cooldown_s`",
		Params: append([]Param{pInterval(15, "the HPA's sync period"), pMetric,
			{Name: "up", Type: Float, Unit: "metric's unit", Doc: "scale up above this (slo_attainment: scale down above it)", Default: num(0.8), Max: math.Inf(1)},
			{Name: "down", Type: Float, Unit: "metric's unit", Doc: "scale down below this (slo_attainment: scale up below it); < up", Default: num(0.3), Max: math.Inf(1)},
		}, thresholdParams(0)...)},
	{Kind: Autoscale, Name: "kpa", Doc: "Knative's pod autoscaler: the pool's concurrency (requests in flight, those waiting at the router included) averaged over a stable and a panic window; desired = average / target; panic when the panic window wants panic_threshold × the ready replicas, then scale on it and never down until a stable window passes",
		Params: []Param{
			pInterval(2, "Knative's tick-interval"),
			{Name: "target", Type: Float, Unit: "requests/replica", Doc: "concurrency per replica (container-concurrency-target-default 100 × container-concurrency-target-percentage 70 %)", Default: num(70), MinOpen: true, Max: math.Inf(1)},
			{Name: "stable_window_s", Type: Float, Unit: "s", Doc: "the stable window (stable-window)", Default: num(60), MinOpen: true, Max: 3600},
			{Name: "panic_window_s", Type: Float, Unit: "s", Doc: "the panic window (panic-window-percentage 10 % of the stable window)", Default: num(6), MinOpen: true, Max: 3600},
			{Name: "panic_threshold", Type: Float, Doc: "panic when the panic window wants this many times the ready replicas (panic-threshold-percentage 200 %)", Default: num(2), Min: 1, Max: 1000},
			{Name: "max_scale_up_rate", Type: Float, Doc: "at most this many times the ready replicas per evaluation (max-scale-up-rate)", Default: num(1000), Min: 1, MinOpen: true, Max: 1e6},
			{Name: "max_scale_down_rate", Type: Float, Doc: "at least the ready replicas over this per evaluation (max-scale-down-rate)", Default: num(2), Min: 1, MinOpen: true, Max: 1e6},
		}},
	{Kind: Autoscale, Name: "oscillator", Pathological: true, Doc: "Ignores every metric and alternately adds and removes `step` replicas at each evaluation",
		Params: []Param{pInterval(15, "the HPA's sync period"),
			{Name: "step", Type: Int, Unit: "replicas", Doc: "replicas added, then removed", Default: integer(1), Min: 1, Max: 1 << 20},
		}},

	{Kind: Disaggregation, Name: disagg.NeverName, Doc: "No disaggregation: every request is prefilled and decoded on the instance the router picks (every pool's role must be both)"},
	{Kind: Disaggregation, Name: disagg.AlwaysName, Doc: "Every request's prompt is computed on a prefill instance (role prefill or both) and its KV moved to the decode instance the router picked (role decode or both), which decodes it (docs/disaggregation.md)",
		Params: []Param{pPrefillScorers}},
	{Kind: Disaggregation, Name: disagg.PrefixThresholdName, Doc: "llm-d's prefix-based P/D decider: the router picks the decode instance first; the request is disaggregated when more than `threshold` of its prompt tokens are not in that instance's prefix cache, else served there whole",
		Params: []Param{
			{Name: "threshold", Type: Int, Unit: "tokens", Doc: "non-cached prompt tokens above which the prompt is computed on a prefill instance (llm-d's prefix-based-pd-decider nonCachedTokens, default 16)", Default: integer(disagg.DefaultPrefixThreshold), Min: 0, Max: 1 << 40},
			pPrefillScorers,
		}},
}

// pInterval is an autoscale template's evaluation interval.
func pInterval(def float64, what string) Param {
	return Param{Name: "interval_s", Type: Float, Unit: "s", Doc: "the policy is evaluated this often, per pool (default " + what + ")", Default: num(def), Min: 0.001, Max: 86400}
}

// pMetric is the metric an HPA or a threshold policy reads.
var pMetric = Param{Name: "metric", Type: String, Doc: "kv_utilization: mean share of KV blocks in use; queue_depth: waiting requests per replica; running: running batch per replica; in_flight: requests routed and not finished per replica; slo_attainment: share of the requests finished since the last evaluation that met their SLO class's targets (higher is better)",
	Default: text("kv_utilization"), Enum: []string{"kv_utilization", "queue_depth", "running", "in_flight", "slo_attainment"}}

// thresholdParams are the threshold templates' step, sustain and cooldown.
func thresholdParams(sustain float64) []Param {
	return []Param{
		{Name: "step", Type: Int, Unit: "replicas", Doc: "replicas added or removed at once", Default: integer(1), Min: 1, Max: 1 << 20},
		{Name: "sustain_s", Type: Float, Unit: "s", Doc: "the condition must hold this long (at every evaluation) before acting", Default: num(sustain), Max: 86400},
		{Name: "cooldown_s", Type: Float, Unit: "s", Doc: "no change for this long after one (seed 002's cooldown_seconds)", Default: num(60), Max: 86400},
	}
}

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
		return nil, fmt.Errorf("%q is not a policy section; use one of %s", clip.String(string(kind)), joinKinds())
	}
	return nil, fmt.Errorf("%s policy %q is not a template; use one of %s", kind, clip.String(name), strings.Join(Names(kind), ", "))
}

func joinKinds() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// param is t's parameter called name, or nil.
func (t *Template) param(name string) (int, *Param) {
	for i := range t.Params {
		if t.Params[i].Name == name {
			return i, &t.Params[i]
		}
	}
	return -1, nil
}

// ParamNames lists t's parameters in schema order.
func (t *Template) ParamNames() []string {
	out := make([]string, len(t.Params))
	for i, p := range t.Params {
		out[i] = p.Name
	}
	return out
}

// RangeString describes p's range, as errors and the docs print it.
func (p *Param) RangeString() string {
	if p.Type == String {
		return "one of " + strings.Join(p.Enum, ", ")
	}
	if p.Type == Bool || (p.Keys != nil && math.IsInf(p.Max, 1) && p.Min == 0 && !p.MinOpen) {
		if p.Keys != nil {
			return ">= 0"
		}
		return ""
	}
	lo, hi := "[", "]"
	if p.MinOpen {
		lo = "("
	}
	if p.MaxOpen {
		hi = ")"
	}
	switch {
	case math.IsInf(p.Min, -1) && math.IsInf(p.Max, 1):
		return "finite"
	case math.IsInf(p.Max, 1):
		if p.MinOpen {
			return "> " + fmtNum(p.Min)
		}
		return ">= " + fmtNum(p.Min)
	}
	return lo + fmtNum(p.Min) + ", " + fmtNum(p.Max) + hi
}
