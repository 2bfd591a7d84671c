package admit

import (
	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
)

// pPerTenant is token-bucket's and rate-limit's per_tenant parameter.
var pPerTenant = schema.Key{Name: "per_tenant", Type: schema.Bool, Doc: "one independent bucket per tenant, each with this capacity and rate, instead of one shared by all"}

// Defaults of the templates' parameters, with their sources.
const (
	// DefaultTokenBucketCapacity and DefaultTokenBucketRefill: the token
	// bucket of docs/cluster.md (Admission): 100,000 input tokens,
	// refilled at 50,000 a second.
	DefaultTokenBucketCapacity = 100_000
	DefaultTokenBucketRefill   = 50_000
	// DefaultRateLimit and DefaultRateLimitBurst: 100 requests/s from a
	// bucket of 1000 (docs/cluster.md, Admission).
	DefaultRateLimit      = 100
	DefaultRateLimitBurst = 1000
	// DefaultMaxInFlight is vLLM's max_num_seqs: one instance's full
	// batch.
	DefaultMaxInFlight = 256
)

// Templates are the admission policies as plug-ins (internal/plugin), in
// documentation order: the default first, the pathological last.
var Templates = []plugin.Template{
	{Kind: plugin.Admission, Name: AlwaysAdmitName, Doc: "Admits every request",
		Build: func(plugin.Params, plugin.Env) (any, error) { return AlwaysAdmit{}, nil }},
	{Kind: plugin.Admission, Name: TokenBucketName, Doc: "A bucket of input tokens (docs/cluster.md, Admission and C6): a request costs its prompt tokens; the bucket starts full, holds at most `capacity` and refills at `refill_rate`; a request that finds too few tokens is rejected and takes none",
		Params: []schema.Key{
			{Name: "capacity", Type: schema.Float, Unit: "input tokens", Doc: "the bucket's size; a prompt longer than it is always rejected", Default: schema.F(DefaultTokenBucketCapacity), MinOpen: true, Max: schema.Unbounded},
			{Name: "refill_rate", Type: schema.Float, Unit: "input tokens/s", Doc: "tokens added per simulated second", Default: schema.F(DefaultTokenBucketRefill), Max: schema.Unbounded},
			pPerTenant,
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			return New(TokenBucketName, Params{TokenBucketCapacity: p.Float("capacity"), TokenBucketRefillRate: p.Float("refill_rate"), PerTenant: p.Bool("per_tenant")})
		}},
	{Kind: plugin.Admission, Name: RateLimitName, Doc: "A request-count bucket, as Envoy's local rate limit filter (max_tokens, tokens_per_fill): each request costs 1; the bucket starts full with `burst` requests and refills at `rate`",
		Params: []schema.Key{
			{Name: "rate", Type: schema.Float, Unit: "requests/s", Doc: "requests admitted per simulated second, sustained", Default: schema.F(DefaultRateLimit), MinOpen: true, Max: schema.Unbounded},
			{Name: "burst", Type: schema.Float, Unit: "requests", Doc: "requests admitted at once from a full bucket", Default: schema.F(DefaultRateLimitBurst), Min: 1, Max: schema.Unbounded},
			pPerTenant,
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			return New(RateLimitName, Params{RatePerSecond: p.Float("rate"), Burst: p.Float("burst"), PerTenant: p.Bool("per_tenant")})
		}},
	{Kind: plugin.Admission, Name: TenantQuotaName, Doc: "A concurrency limit per tenant: a request is rejected while its tenant has `max_in_flight` admitted requests that have not left the cluster",
		Params: []schema.Key{
			{Name: "max_in_flight", Type: schema.Int, Unit: "requests", Doc: "each tenant's limit (default vLLM's max_num_seqs: one instance's full batch)", Default: schema.I(DefaultMaxInFlight), Min: 1, Max: 1 << 40},
			{Name: "tenants", Type: schema.IntMap, Unit: "requests", Doc: "limits of named tenants, overriding max_in_flight (keys: the workload's tenant ids)", Min: 1, Max: 1 << 40},
		},
		Build: func(p plugin.Params, env plugin.Env) (any, error) {
			var per []int64
			for _, e := range p.Map("tenants") {
				i, err := env.TenantIndex("params.tenants."+e.Key, e.Key)
				if err != nil {
					return nil, err
				}
				for len(per) <= i {
					per = append(per, 0)
				}
				per[i] = int64(e.V)
			}
			return NewTenantQuota(p.Int("max_in_flight"), per)
		}},
	{Kind: plugin.Admission, Name: RejectAllName, Pathological: true, Doc: "Rejects every request",
		Build: func(plugin.Params, plugin.Env) (any, error) { return RejectAll{}, nil }},
}
