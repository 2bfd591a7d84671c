package admit

import (
	"fmt"

	"github.com/blis-sim/blis/sim"
)

// MaxTenants bounds the tenant indices the per-tenant policies keep a
// state for (the cluster's own bound on tenant indices; a workload spec
// has at most 10,000 tenants). Their memory follows the largest index
// seen, so an index beyond it is rejected (ReasonBadTenant) rather than
// allowed to allocate without bound.
const MaxTenants = 1 << 20

// tenantIndex is req's tenant as a slice index, or false when it lies
// outside [0, MaxTenants).
func tenantIndex(req *sim.RequestSpec) (int, bool) {
	t := int(req.Tenant)
	return t, t >= 0 && t < MaxTenants
}

// PerTenant keeps one independent policy per tenant
// (sim.RequestSpec.Tenant): each tenant's requests are decided by its own
// policy, created on the tenant's first request, so that, say, a token
// bucket limits every tenant separately and one tenant exhausting its
// bucket leaves the others' untouched. The policies are kept in a slice
// indexed by tenant (never a map: no iteration order to leak), grown to the
// largest tenant index seen; a tenant outside [0, MaxTenants) is rejected
// with ReasonBadTenant.
//
// Left is forwarded to the tenant's policy when it is an Observer.
type PerTenant struct {
	name string
	mk   func() Policy
	ps   []Policy // by tenant; nil until the tenant's first request
}

// NewPerTenant returns the per-tenant variant of the policies mk makes;
// name is what Name reports, the inner policy's name. mk is called once per
// tenant, at its first request, and must return a fresh policy each time.
func NewPerTenant(name string, mk func() Policy) *PerTenant {
	return &PerTenant{name: name, mk: mk}
}

func (p *PerTenant) Name() string { return p.name }

// Tenant is tenant t's policy, nil before its first request.
func (p *PerTenant) Tenant(t int32) Policy {
	if t < 0 || int(t) >= len(p.ps) {
		return nil
	}
	return p.ps[t]
}

func (p *PerTenant) Admit(req *sim.RequestSpec, nowUs int64) (bool, string) {
	t, ok := tenantIndex(req)
	if !ok {
		return false, ReasonBadTenant
	}
	if t >= len(p.ps) {
		p.ps = append(p.ps, make([]Policy, t+1-len(p.ps))...)
	}
	if p.ps[t] == nil {
		p.ps[t] = p.mk()
	}
	return p.ps[t].Admit(req, nowUs)
}

// Left forwards to the tenant's policy; a tenant without one (never seen,
// out of range) has nothing to learn.
func (p *PerTenant) Left(req *sim.RequestSpec, nowUs int64) {
	if o, ok := p.Tenant(req.Tenant).(Observer); ok {
		o.Left(req, nowUs)
	}
}

// TenantQuota limits each tenant's concurrency: a request is rejected
// (ReasonOverQuota) when its tenant already has its limit of admitted
// requests that have not yet left the cluster. It counts a request from
// its admission to its Left call (an Observer: the cluster reports every
// admitted request's departure), so a request waiting out the admission
// or routing latency counts, and a departure frees its place for the
// arrivals after it.
type TenantQuota struct {
	def       int64
	perTenant []int64 // overrides when > 0
	inflight  []int64 // by tenant, grown to the largest tenant admitted
}

// NewTenantQuota returns a quota of defaultLimit in-flight requests per
// tenant, perTenant[t] instead for tenant t when it is > 0 (0: the
// default; tenants beyond the slice take the default). Limits must be >= 1;
// perTenant is copied.
func NewTenantQuota(defaultLimit int64, perTenant []int64) (*TenantQuota, error) {
	if defaultLimit < 1 {
		return nil, fmt.Errorf("tenant quota must be >= 1 in-flight request, got %d", defaultLimit)
	}
	if len(perTenant) > MaxTenants {
		return nil, fmt.Errorf("tenant quota: %d per-tenant limits, more than the %d tenants a run supports", len(perTenant), MaxTenants)
	}
	for t, l := range perTenant {
		if l < 0 {
			return nil, fmt.Errorf("tenant quota of tenant %d must be >= 1 in-flight request (or 0 for the default), got %d", t, l)
		}
	}
	return &TenantQuota{def: defaultLimit, perTenant: append([]int64(nil), perTenant...)}, nil
}

func (q *TenantQuota) Name() string { return TenantQuotaName }

// Limit is tenant t's in-flight limit.
func (q *TenantQuota) Limit(t int32) int64 {
	if t >= 0 && int(t) < len(q.perTenant) && q.perTenant[t] > 0 {
		return q.perTenant[t]
	}
	return q.def
}

// InFlight is the number of tenant t's admitted requests that have not left.
func (q *TenantQuota) InFlight(t int32) int64 {
	if t < 0 || int(t) >= len(q.inflight) {
		return 0
	}
	return q.inflight[t]
}

func (q *TenantQuota) Admit(req *sim.RequestSpec, _ int64) (bool, string) {
	t, ok := tenantIndex(req)
	if !ok {
		return false, ReasonBadTenant
	}
	if q.InFlight(req.Tenant) >= q.Limit(req.Tenant) {
		return false, ReasonOverQuota
	}
	if t >= len(q.inflight) {
		q.inflight = append(q.inflight, make([]int64, t+1-len(q.inflight))...)
	}
	q.inflight[t]++
	return true, ""
}

// Left frees the request's place. A request this policy never admitted
// (a tenant never seen, or nothing in flight) changes nothing.
func (q *TenantQuota) Left(req *sim.RequestSpec, _ int64) {
	if t := req.Tenant; t >= 0 && int(t) < len(q.inflight) && q.inflight[t] > 0 {
		q.inflight[t]--
	}
}
