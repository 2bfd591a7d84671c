package admit

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/sim"
)

// RateLimit limits the request rate with a token bucket counting requests,
// as Envoy's local rate limit filter does (max_tokens, tokens_per_fill):
// each request costs one token whatever its size; the bucket starts full,
// holds at most Burst tokens and refills at Rate tokens per simulated
// second, lazily at each decision (TokenBucket's arithmetic). A request
// finding less than one token is rejected (ReasonRateLimited) without
// taking any.
type RateLimit struct {
	rate, burst float64
	tokens      float64
	lastUs      int64
}

// rateSlack is how far below one token a request still passes: the refill
// is a float product, and a request arriving exactly one refill period
// after the bucket emptied must not be rejected by its rounding.
const rateSlack = 1e-9

// NewRateLimit returns a full bucket of burst requests refilled at
// ratePerSecond requests per simulated second. The rate must be > 0 and
// finite (a bucket that never refills would admit burst requests, then
// nothing), the burst >= 1 (a bucket that cannot hold one request admits
// nothing) and finite.
func NewRateLimit(ratePerSecond, burst float64) (*RateLimit, error) {
	if !(ratePerSecond > 0) || math.IsInf(ratePerSecond, 0) {
		return nil, fmt.Errorf("rate limit must be > 0 and finite requests per second, got %v", ratePerSecond)
	}
	if !(burst >= 1) || math.IsInf(burst, 0) {
		return nil, fmt.Errorf("rate limit burst must be >= 1 and finite requests, got %v", burst)
	}
	return &RateLimit{rate: ratePerSecond, burst: burst, tokens: burst}, nil
}

func (r *RateLimit) Name() string { return RateLimitName }

// Tokens is the bucket's level, in requests, at its last decision.
func (r *RateLimit) Tokens() float64 { return r.tokens }

func (r *RateLimit) Admit(_ *sim.RequestSpec, nowUs int64) (bool, string) {
	if nowUs > r.lastUs {
		r.tokens = min(r.burst, r.tokens+r.rate*float64(nowUs-r.lastUs)*1e-6)
		r.lastUs = nowUs
	}
	if r.tokens < 1-rateSlack {
		return false, ReasonRateLimited
	}
	r.tokens = max(0, r.tokens-1) // the slack never leaves the level below 0
	return true, ""
}
