package admit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

var (
	_ Observer = (*TenantQuota)(nil)
	_ Observer = (*PerTenant)(nil)
)

func TestRateLimit(t *testing.T) {
	type step struct {
		at     int64
		ok     bool
		reason string
		left   float64
	}
	for _, tc := range []struct {
		name        string
		rate, burst float64
		steps       []step
	}{
		{"refill and cap", 10, 2, []step{
			{0, true, "", 1}, // starts full
			{0, true, "", 0},
			{0, false, ReasonRateLimited, 0},
			{50_000, false, ReasonRateLimited, 0.5}, // half a token after 50 ms: nothing taken
			{100_000, true, "", 0},                  // 0.5 + 0.5 exactly one period after emptying
			{10_000_000, true, "", 1},               // refilled to the burst, not beyond
			{10_000_000, true, "", 0},
			{10_000_000, false, ReasonRateLimited, 0},
		}},
		// One request per third of a second: 333,333 µs is just short of it.
		{"fractional period", 3, 1, []step{
			{0, true, "", 0},
			{333_333, false, ReasonRateLimited, 0.999999},
			{333_334, true, "", 0}, // 1.000002 capped at the burst, then taken
		}},
		// Refilled in pieces that add up to one token exactly, which the
		// float sum puts at 0.9999999999999999: the request one period after
		// the bucket emptied still passes.
		{"refill in pieces", 10, 1, []step{
			{0, true, "", 0},
			{1, false, ReasonRateLimited, 0.00001},
			{6002, false, ReasonRateLimited, 0.06002},
			{100_000, true, "", 0},
		}},
		// A burst that is not an integer holds its whole requests.
		{"fractional burst", 1, 2.5, []step{
			{0, true, "", 1.5},
			{0, true, "", 0.5},
			{0, false, ReasonRateLimited, 0.5},
			{500_000, true, "", 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRateLimit(tc.rate, tc.burst)
			require.NoError(t, err)
			require.Equal(t, tc.burst, r.Tokens(), "starts full")
			for _, s := range tc.steps {
				// Its size does not matter: each request costs one token.
				ok, reason := r.Admit(&sim.RequestSpec{PromptTokens: 1 << 20}, s.at)
				require.Equal(t, s.ok, ok, "%+v", s)
				require.Equal(t, s.reason, reason, "%+v", s)
				require.InDelta(t, s.left, r.Tokens(), 1e-9, "%+v", s)
			}
		})
	}
}

// TestRateLimitExactPeriods: with requests every quarter of the refill
// period, exactly every fourth passes, however many float refills add up
// to a whole token.
func TestRateLimitExactPeriods(t *testing.T) {
	for _, rate := range []float64{1, 8, 10, 16, 40, 80, 1000, 3125} {
		r, err := NewRateLimit(rate, 1)
		require.NoError(t, err)
		quarter := int64(1e6/rate) / 4
		for k := int64(0); k < 40_000; k++ {
			ok, _ := r.Admit(&sim.RequestSpec{}, k*quarter)
			require.Equal(t, k%4 == 0, ok, "rate %v, request %d at %d µs", rate, k, k*quarter)
		}
	}
}

func TestPerTenantIsolatesTenants(t *testing.T) {
	p, err := New(RateLimitName, Params{RatePerSecond: 1, Burst: 1, PerTenant: true})
	require.NoError(t, err)
	require.Equal(t, RateLimitName, p.Name())
	pt := p.(*PerTenant)
	req := func(tenant int32) *sim.RequestSpec { return &sim.RequestSpec{Tenant: tenant} }
	for _, s := range []struct {
		at     int64
		tenant int32
		ok     bool
		reason string
	}{
		{0, 1, true, ""},
		{0, 1, false, ReasonRateLimited}, // tenant 1 exhausted its bucket...
		{0, 1, false, ReasonRateLimited},
		{0, 0, true, ""}, // ...tenant 0's is untouched
		{0, 0, false, ReasonRateLimited},
		{1_000_000, 1, true, ""}, // each refills on its own
		{1_000_000, 0, true, ""},
		{1_000_000, -1, false, ReasonBadTenant},
		{1_000_000, MaxTenants, false, ReasonBadTenant},
		{1_000_000, math.MaxInt32, false, ReasonBadTenant},
	} {
		ok, reason := p.Admit(req(s.tenant), s.at)
		require.Equal(t, s.ok, ok, "%+v", s)
		require.Equal(t, s.reason, reason, "%+v", s)
	}
	require.Len(t, pt.ps, 2, "memory follows the largest valid tenant seen")
	require.Nil(t, pt.Tenant(5))
	ok, _ := p.Admit(req(5), 2_000_000)
	require.True(t, ok)
	require.Len(t, pt.ps, 6)
	require.Nil(t, pt.Tenant(3), "tenants in between get no policy")
	require.NotSame(t, pt.Tenant(0), pt.Tenant(1))
	// Neither the rate limit nor the token bucket observes departures:
	// forwarding Left to them, or to a tenant never seen, does nothing.
	pt.Left(req(1), 2_000_000)
	pt.Left(req(42), 2_000_000)
	pt.Left(req(-3), 2_000_000)

	// The per-tenant token bucket through New.
	b, err := New(TokenBucketName, Params{TokenBucketCapacity: 100, TokenBucketRefillRate: 0, PerTenant: true})
	require.NoError(t, err)
	require.Equal(t, TokenBucketName, b.Name())
	for _, s := range []struct {
		tenant int32
		prompt int64
		ok     bool
	}{{1, 80, true}, {1, 80, false}, {0, 80, true}, {2, 100, true}, {0, 20, true}, {0, 1, false}} {
		ok, _ := b.Admit(&sim.RequestSpec{Tenant: s.tenant, PromptTokens: s.prompt}, 0)
		require.Equal(t, s.ok, ok, "%+v", s)
	}
}

// TestPerTenantAdmitsWithoutAllocating: once a tenant has its policy, a
// decision allocates nothing.
func TestPerTenantAdmitsWithoutAllocating(t *testing.T) {
	p := NewPerTenant(RateLimitName, func() Policy { r, _ := NewRateLimit(1e6, 10); return r })
	req := &sim.RequestSpec{Tenant: 3}
	now := int64(0)
	p.Admit(req, now)
	require.Zero(t, testing.AllocsPerRun(100, func() {
		now++
		p.Admit(req, now)
	}))
}

func TestTenantQuota(t *testing.T) {
	// Tenant 0 takes the default 2, tenant 1 its own 1, tenant 2 the
	// default (0 in the list), tenant 7 beyond the list the default.
	q, err := NewTenantQuota(2, []int64{0, 1, 0})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1, 2, 2}, []int64{q.Limit(0), q.Limit(1), q.Limit(2), q.Limit(7)})
	req := func(tenant int32) *sim.RequestSpec { return &sim.RequestSpec{Tenant: tenant} }
	type step struct {
		left   bool // a departure instead of an arrival
		tenant int32
		ok     bool
		reason string
	}
	for i, s := range []step{
		{false, 0, true, ""},
		{false, 0, true, ""},
		{false, 0, false, ReasonOverQuota},
		{false, 1, true, ""}, // tenant 0 at its limit does not hold tenant 1 back
		{false, 1, false, ReasonOverQuota},
		{false, 7, true, ""},
		{true, 0, true, ""}, // a departure frees one place...
		{false, 0, true, ""},
		{false, 0, false, ReasonOverQuota}, // ...only one
		{true, 1, true, ""},
		{true, 1, true, ""}, // a Left with nothing in flight does not go below 0
		{false, 1, true, ""},
		{false, 1, false, ReasonOverQuota},
		{true, 9, true, ""}, // a tenant never seen: nothing, no panic
		{true, -1, true, ""},
		{false, -1, false, ReasonBadTenant},
		{false, MaxTenants, false, ReasonBadTenant},
	} {
		at := int64(i) * 10
		if s.left {
			q.Left(req(s.tenant), at)
			continue
		}
		ok, reason := q.Admit(req(s.tenant), at)
		require.Equal(t, s.ok, ok, "step %d %+v", i, s)
		require.Equal(t, s.reason, reason, "step %d %+v", i, s)
	}
	require.Equal(t, []int64{2, 1, 0, 1}, []int64{q.InFlight(0), q.InFlight(1), q.InFlight(2), q.InFlight(7)})
	require.Len(t, q.inflight, 8, "memory follows the largest tenant admitted")

	// The quota per tenant through PerTenant: Left reaches the tenant's own.
	p := NewPerTenant(TenantQuotaName, func() Policy { q, _ := NewTenantQuota(1, nil); return q })
	ok, _ := p.Admit(req(2), 0)
	require.True(t, ok)
	ok, reason := p.Admit(req(2), 0)
	require.False(t, ok)
	require.Equal(t, ReasonOverQuota, reason)
	p.Left(req(2), 5)
	p.Left(req(4), 5) // never seen
	ok, _ = p.Admit(req(2), 5)
	require.True(t, ok, "the departure reached tenant 2's quota")
}

func TestNewRefusesBadParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want string
	}{
		{RateLimitName, Params{Burst: 1}, "rate limit must be > 0"},
		{RateLimitName, Params{RatePerSecond: -1, Burst: 1}, "rate limit must be > 0"},
		{RateLimitName, Params{RatePerSecond: math.NaN(), Burst: 1}, "rate limit must be > 0"},
		{RateLimitName, Params{RatePerSecond: math.Inf(1), Burst: 1}, "rate limit must be > 0"},
		{RateLimitName, Params{RatePerSecond: 1, Burst: 0.5}, "burst must be >= 1"},
		{RateLimitName, Params{RatePerSecond: 1, Burst: math.NaN()}, "burst must be >= 1"},
		{RateLimitName, Params{RatePerSecond: 1, Burst: math.Inf(1)}, "burst must be >= 1"},
		{RateLimitName, Params{RatePerSecond: 1, PerTenant: true}, "burst must be >= 1"},
		{TokenBucketName, Params{TokenBucketRefillRate: 1, PerTenant: true}, "capacity must be > 0"},
		{TenantQuotaName, Params{}, "tenant quota must be >= 1"},
		{TenantQuotaName, Params{MaxInFlight: 1, TenantMaxInFlight: []int64{3, -1}}, "tenant 1 must be >= 1"},
		{AlwaysAdmitName, Params{PerTenant: true}, "no per-tenant variant"},
		{TenantQuotaName, Params{MaxInFlight: 1, PerTenant: true}, "no per-tenant variant"},
		{"maybe", Params{PerTenant: true}, "is not a policy"},
	} {
		p, err := New(tc.name, tc.p)
		require.ErrorContains(t, err, tc.want, "%s %+v", tc.name, tc.p)
		if tc.name != TokenBucketName {
			require.Nil(t, p, "no half-made policy in the interface")
		}
	}
}
