package route

import (
	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/sim"
)

// Parameters shared by several routing templates (and, for
// PrefillScorersParam, the disaggregation templates).
var (
	pIndexCap = schema.Key{Name: "prefix_index_capacity", Type: schema.Int, Unit: "blocks", Doc: "router-side prefix index size per instance, least recently used blocks evicted first; 0: each instance's own KV capacity (its GPU blocks, CPU tier and disk; a fixed 10000 forgot what the instances still held: docs/kv-tiers.md)",
		Default: schema.I(AutoPrefixIndexCapacity), Min: 0, Max: MaxPrefixIndexCapacity}
	pPrefixMode = schema.Key{Name: "prefix_mode", Type: schema.String, Doc: "approximate: the router's own prefix index, learned from its decisions; precise: the instances' KV events, block by block and tier by tier, as llm-d's precise prefix-cache scorer (docs/kv-tiers.md)",
		Default: schema.S(PrefixApproximate), Enum: []string{PrefixApproximate, PrefixPrecise}}
	pTierWeights = []schema.Key{
		{Name: "cpu_weight", Type: schema.Float, Doc: "precise mode: what a block in an instance's CPU tier is worth against one on its GPU (1); llm-d's kvCacheBackendConfigs cpu weight", Default: schema.F(DefaultTierWeights[sim.TierCPU]), Max: 1},
		{Name: "disk_weight", Type: schema.Float, Doc: "precise mode: a block on an instance's local disk (ours)", Default: schema.F(DefaultTierWeights[sim.TierDisk]), Max: 1},
		{Name: "store_weight", Type: schema.Float, Doc: "precise mode: a block in the fleet's shared KV store, for the instances linked to it (ours)", Default: schema.F(DefaultTierWeights[sim.TierStore]), Max: 1},
	}
	// PrefillScorersParam is the prefill profile's scorers under
	// disaggregation (llm-d runs a prefill profile with its own scorers
	// after the decode one).
	PrefillScorersParam = schema.Key{Name: "prefill_scorers", Type: schema.FloatMap, Unit: "weight", Doc: "the prefill instance is picked by the weighted policy with these scorers and weights among the instances that prefill (normalized to sum to 1); not given: the routing section's policy, run again among them",
		Max: schema.Unbounded, Keys: ScorerNames}
)

// DefaultScorerWeights are the weighted policy's default scorers: llm-d's
// endpoint picker's prefix, queue and KV-cache scorers at 3:2:2
// (DefaultScorers as text).
var DefaultScorerWeights = []schema.Entry{{Key: PrefixAffinity, V: 3}, {Key: QueueDepth, V: 2}, {Key: KVUtilization, V: 2}}

// Templates are the routing policies as plug-ins (internal/plugin), in
// documentation order: the default first, the pathological last. Adding a
// policy is adding it here (and to the frozen schema,
// policy/testdata/schema.golden.json).
var Templates = []plugin.Template{
	{Kind: plugin.Routing, Name: RoundRobinName, Doc: "Each instance in turn", Build: build(RoundRobinName)},
	{Kind: plugin.Routing, Name: LeastLoadedName, Doc: "The instance with the least load (queue depth + running batch + the router's in-flight), the lowest index on a tie", Build: build(LeastLoadedName)},
	{Kind: plugin.Routing, Name: WeightedName, Doc: "llm-d's endpoint picker: each scorer scores every instance in [0, 1], the weighted sum (weights normalized) picks the best, the lowest index on a tie",
		Params: []schema.Key{
			{Name: "scorers", Type: schema.FloatMap, Unit: "weight", Doc: "scorers and their weights, normalized to sum to 1 (at least one > 0)", Default: schema.Value{M: DefaultScorerWeights},
				Max: schema.Unbounded, Keys: ScorerNames},
			pIndexCap, pPrefixMode, pTierWeights[0], pTierWeights[1], pTierWeights[2],
		},
		Build: build(WeightedName)},
	{Kind: plugin.Routing, Name: PrefixAffinityName, Doc: "The instance whose router-side prefix index holds the longest share of the request's blocks, the least loaded among equals; least-loaded on a miss",
		Params: []schema.Key{pIndexCap,
			{Name: "min_match_share", Type: schema.Float, Doc: "a hit needs more than this share of the request's blocks cached", MaxOpen: true, Max: 1},
			pPrefixMode, pTierWeights[0], pTierWeights[1], pTierWeights[2],
		},
		Build: build(PrefixAffinityName)},
	{Kind: plugin.Routing, Name: VLLMDPName, Doc: "vLLM's own data-parallel load balancer: the engine with the lowest 4 × waiting + running in the counts it last published (every queue_depth refresh), with its own sends since then added", Build: build(VLLMDPName)},
	{Kind: plugin.Routing, Name: AlwaysBusiestName, Pathological: true, Doc: "The most loaded instance", Build: build(AlwaysBusiestName)},
}

// build is the routing template name's builder: its parameters as
// Params, for env.Instances instances.
func build(name string) func(plugin.Params, plugin.Env) (any, error) {
	return func(s plugin.Params, env plugin.Env) (any, error) {
		return New(name, env.Instances, ParamsOf(s, env))
	}
}

// ParamsOf reads a routing section's parameters (those its template has)
// as Params.
func ParamsOf(s plugin.Params, env plugin.Env) Params {
	var p Params
	if s.Has("prefix_index_capacity") {
		p.PrefixIndexCapacity = int(s.Int("prefix_index_capacity"))
	}
	if s.Has("scorers") {
		p.Scorers = Scorers(s.Map("scorers"))
	}
	if s.Has("min_match_share") {
		p.MinMatchShare = s.Float("min_match_share")
	}
	if s.Has("prefix_mode") {
		p.PrefixMode = s.String("prefix_mode")
		w := DefaultTierWeights
		w[sim.TierCPU], w[sim.TierDisk], w[sim.TierStore] = s.Float("cpu_weight"), s.Float("disk_weight"), s.Float("store_weight")
		p.TierWeights = &w
	}
	p.RefreshUs = env.QueueDepthRefreshUs
	return p
}

// Scorers are a scorers parameter's entries as WeightedScorers.
func Scorers(m []schema.Entry) []WeightedScorer {
	var out []WeightedScorer
	for _, e := range m {
		out = append(out, WeightedScorer{Name: e.Key, Weight: e.V})
	}
	return out
}
