package disagg

import (
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
)

// Templates are the disaggregation deciders as plug-ins
// (internal/plugin), in documentation order, the default first. Each
// builds a Decider (nil for never); the prefill instance is picked by the
// bundle (prefill_scorers, else the routing section again).
var Templates = []plugin.Template{
	{Kind: plugin.Disaggregation, Name: NeverName, Doc: "No disaggregation: every request is prefilled and decoded on the instance the router picks (every pool's role must be both)",
		Build: func(plugin.Params, plugin.Env) (any, error) { return Decider(nil), nil }},
	{Kind: plugin.Disaggregation, Name: AlwaysName, Doc: "Every request's prompt is computed on a prefill instance (role prefill or both) and its KV moved to the decode instance the router picked (role decode or both), which decodes it (docs/disaggregation.md)",
		Params: []schema.Key{route.PrefillScorersParam},
		Build:  func(plugin.Params, plugin.Env) (any, error) { return New(AlwaysName, 0) }},
	{Kind: plugin.Disaggregation, Name: PrefixThresholdName, Doc: "llm-d's prefix-based P/D decider: the router picks the decode instance first; the request is disaggregated when more than `threshold` of its prompt tokens are not in that instance's prefix cache, else served there whole",
		Params: []schema.Key{
			{Name: "threshold", Type: schema.Int, Unit: "tokens", Doc: "non-cached prompt tokens above which the prompt is computed on a prefill instance (llm-d's prefix-based-pd-decider nonCachedTokens, default 16)",
				Default: schema.I(DefaultPrefixThreshold), Source: "llm-d prefix-based-pd-decider nonCachedTokens: 16 (deploy/config/pd-epp-config.yaml)", Min: 0, Max: 1 << 40},
			route.PrefillScorersParam,
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) { return New(PrefixThresholdName, p.Int("threshold")) }},
}
