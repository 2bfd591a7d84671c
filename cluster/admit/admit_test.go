package admit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func TestTokenBucket(t *testing.T) {
	b, err := NewTokenBucket(1000, 100) // 100 input tokens per second
	require.NoError(t, err)
	req := func(p int64) *sim.RequestSpec { return &sim.RequestSpec{PromptTokens: p} }
	type step struct {
		at     int64
		prompt int64
		ok     bool
		reason string
		left   float64
	}
	for _, s := range []step{
		{0, 600, true, "", 400},                             // starts full
		{0, 500, false, ReasonNoTokens, 400},                // not enough: nothing taken
		{1_000_000, 500, true, "", 0},                       // +100 after one second
		{1_500_000, 51, false, ReasonNoTokens, 50},          // +50 after half a second
		{20_000_000, 1001, false, ReasonOverCapacity, 1000}, // refilled to capacity, not beyond
		{20_000_000, 1000, true, "", 0},
	} {
		ok, reason := b.Admit(req(s.prompt), s.at)
		require.Equal(t, s.ok, ok, "%+v", s)
		require.Equal(t, s.reason, reason, "%+v", s)
		require.InDelta(t, s.left, b.Tokens(), 1e-9, "%+v", s)
	}
}

func TestPolicies(t *testing.T) {
	for _, name := range Names {
		p, err := New(name, Params{TokenBucketCapacity: 10, TokenBucketRefillRate: 1, RatePerSecond: 1, Burst: 1, MaxInFlight: 1})
		require.NoError(t, err)
		require.Equal(t, name, p.Name())
	}
	ok, _ := AlwaysAdmit{}.Admit(&sim.RequestSpec{PromptTokens: 1 << 40}, 0)
	require.True(t, ok)
	ok, reason := RejectAll{}.Admit(&sim.RequestSpec{PromptTokens: 1}, 0)
	require.False(t, ok)
	require.Equal(t, ReasonRejectAll, reason)

	_, err := New("maybe", Params{})
	require.ErrorContains(t, err, "use one of always-admit, token-bucket, reject-all, rate-limit, tenant-quota")
	for _, p := range []Params{{TokenBucketCapacity: 0, TokenBucketRefillRate: 1}, {TokenBucketCapacity: -5, TokenBucketRefillRate: 1},
		{TokenBucketCapacity: 10, TokenBucketRefillRate: -1}} {
		_, err := New(TokenBucketName, p)
		require.Error(t, err, "%+v", p)
	}
}

// Names, New's vocabulary, lists the templates (the plug-ins' registry).
func TestNamesAreTheTemplates(t *testing.T) {
	var names []string
	for _, tp := range Templates {
		names = append(names, tp.Name)
	}
	require.ElementsMatch(t, names, Names)
}
