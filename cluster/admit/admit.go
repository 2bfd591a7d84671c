// Package admit holds the cluster's admission policies (docs/cluster.md): the
// first gate a request meets, deciding at its arrival whether it enters the
// cluster. A rejected request is counted with its reason by the cluster; it
// never reaches routing.
//
// Policies are deterministic and keep their own state; one policy value
// serves one run. Decisions are made in arrival order. A policy that
// counts the requests in the cluster (tenant-quota) learns of their
// departures as an Observer; PerTenant gives any policy one state per
// tenant.
package admit

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/sim"
)

// Policy decides whether a request is admitted.
type Policy interface {
	Name() string
	// Admit decides for req at nowUs (non-decreasing across calls); req is
	// valid only during the call. A rejection comes with a short reason, a
	// constant string.
	Admit(req *sim.RequestSpec, nowUs int64) (ok bool, reason string)
}

// Observer is implemented by a policy that must learn when an admitted
// request leaves the cluster (completed, dropped, timed out, or refused
// by its instance as too long): Left is called once per admitted
// request, at its departure time.
//
// The cluster calls Left in its event order, after the arrivals of the
// same instant (a request arriving when another departs does not see the
// departure), with nowUs non-decreasing across Admit and Left calls. A
// departure later than the end of the run (a horizon or a cancellation) is
// never reported. req is valid only during the call.
type Observer interface {
	Left(req *sim.RequestSpec, nowUs int64)
}

// Names of the built-in policies.
const (
	AlwaysAdmitName = "always-admit"
	TokenBucketName = "token-bucket"
	RejectAllName   = "reject-all"
	RateLimitName   = "rate-limit"
	TenantQuotaName = "tenant-quota"
)

// Names lists the built-in policies, the default first.
var Names = []string{AlwaysAdmitName, TokenBucketName, RejectAllName, RateLimitName, TenantQuotaName}

// Rejection reasons.
const (
	ReasonRejectAll    = "reject-all"
	ReasonNoTokens     = "token-bucket: not enough tokens"
	ReasonOverCapacity = "token-bucket: input larger than the bucket"
	ReasonRateLimited  = "rate-limit: over the rate"
	ReasonOverQuota    = "tenant-quota: tenant at its in-flight limit"
	// ReasonBadTenant rejects, in the per-tenant policies, a request whose
	// tenant lies outside [0, MaxTenants): it cannot have a state of its
	// own without unbounded memory.
	ReasonBadTenant = "per-tenant: tenant index out of range"
)

// Params are the policies' parameters.
type Params struct {
	// TokenBucketCapacity is the bucket's size in input tokens (> 0), and
	// TokenBucketRefillRate the tokens added per simulated second (>= 0).
	TokenBucketCapacity   float64
	TokenBucketRefillRate float64
	// RatePerSecond is the rate limit's refill in requests per simulated
	// second (> 0), and Burst the requests its bucket holds (>= 1).
	RatePerSecond, Burst float64
	// PerTenant gives each tenant a bucket of its own (token-bucket and
	// rate-limit only; PerTenant).
	PerTenant bool
	// MaxInFlight is tenant-quota's limit of admitted requests in the
	// cluster per tenant (>= 1), and TenantMaxInFlight[t], when > 0, tenant
	// t's own limit instead.
	MaxInFlight       int64
	TenantMaxInFlight []int64
}

// New returns the named policy. An unknown name is an error that lists the
// valid ones; so is PerTenant with a policy other than token-bucket and
// rate-limit. Parameters a policy does not use are ignored.
func New(name string, p Params) (Policy, error) {
	if p.PerTenant && name != TokenBucketName && name != RateLimitName {
		if !slices.Contains(Names, name) {
			return nil, unknown(name)
		}
		return nil, fmt.Errorf("admission policy %s has no per-tenant variant; only %s and %s do", name, TokenBucketName, RateLimitName)
	}
	switch name {
	case AlwaysAdmitName:
		return AlwaysAdmit{}, nil
	case RejectAllName:
		return RejectAll{}, nil
	case TokenBucketName:
		if p.PerTenant {
			// Validated once here, so that the tenants' buckets cannot fail.
			if _, err := NewTokenBucket(p.TokenBucketCapacity, p.TokenBucketRefillRate); err != nil {
				return nil, err
			}
			return NewPerTenant(TokenBucketName, func() Policy {
				b, _ := NewTokenBucket(p.TokenBucketCapacity, p.TokenBucketRefillRate)
				return b
			}), nil
		}
		return NewTokenBucket(p.TokenBucketCapacity, p.TokenBucketRefillRate)
	case RateLimitName:
		if p.PerTenant {
			if _, err := NewRateLimit(p.RatePerSecond, p.Burst); err != nil {
				return nil, err
			}
			return NewPerTenant(RateLimitName, func() Policy {
				r, _ := NewRateLimit(p.RatePerSecond, p.Burst)
				return r
			}), nil
		}
		r, err := NewRateLimit(p.RatePerSecond, p.Burst)
		if err != nil {
			return nil, err
		}
		return r, nil
	case TenantQuotaName:
		q, err := NewTenantQuota(p.MaxInFlight, p.TenantMaxInFlight)
		if err != nil {
			return nil, err
		}
		return q, nil
	}
	return nil, unknown(name)
}

func unknown(name string) error {
	return fmt.Errorf("admission policy %q is not a policy; use one of %s", name, strings.Join(Names, ", "))
}

// AlwaysAdmit admits every request (the default).
type AlwaysAdmit struct{}

func (AlwaysAdmit) Name() string                                 { return AlwaysAdmitName }
func (AlwaysAdmit) Admit(*sim.RequestSpec, int64) (bool, string) { return true, "" }

// RejectAll rejects every request (pathological, for testing).
type RejectAll struct{}

func (RejectAll) Name() string { return RejectAllName }
func (RejectAll) Admit(*sim.RequestSpec, int64) (bool, string) {
	return false, ReasonRejectAll
}

// TokenBucket rate-limits by input tokens (docs/cluster.md; the design digest's
// decision): each request costs its prompt-token count; the bucket starts
// full, holds at most Capacity tokens and refills at RefillRate tokens per
// simulated second. A request that costs more than the bucket holds is
// rejected without taking any; one that costs more than the whole capacity
// can never be admitted and says so.
type TokenBucket struct {
	capacity, rate float64
	tokens         float64
	lastUs         int64
}

// NewTokenBucket returns a full bucket.
func NewTokenBucket(capacity, refillPerSecond float64) (*TokenBucket, error) {
	if !(capacity > 0) || math.IsInf(capacity, 0) {
		return nil, fmt.Errorf("token bucket capacity must be > 0 and finite, got %v", capacity)
	}
	if !(refillPerSecond >= 0) || math.IsInf(refillPerSecond, 0) {
		return nil, fmt.Errorf("token bucket refill rate must be >= 0 and finite, got %v", refillPerSecond)
	}
	return &TokenBucket{capacity: capacity, rate: refillPerSecond, tokens: capacity}, nil
}

func (b *TokenBucket) Name() string { return TokenBucketName }

// Tokens is the bucket's level at its last decision.
func (b *TokenBucket) Tokens() float64 { return b.tokens }

func (b *TokenBucket) Admit(req *sim.RequestSpec, nowUs int64) (bool, string) {
	if nowUs > b.lastUs {
		b.tokens = min(b.capacity, b.tokens+b.rate*float64(nowUs-b.lastUs)*1e-6)
		b.lastUs = nowUs
	}
	cost := float64(req.PromptTokens)
	switch {
	case cost > b.capacity:
		return false, ReasonOverCapacity
	case cost > b.tokens:
		return false, ReasonNoTokens
	}
	b.tokens -= cost
	return true, ""
}
