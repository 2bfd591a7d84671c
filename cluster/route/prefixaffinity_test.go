package route

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func TestPrefixAffinityPolicy(t *testing.T) {
	// Instance k has routed prompts A (4 shared blocks) to 2 and B (its
	// first 2 blocks shared with A's) to 0 and 1.
	A := []uint64{11, 12, 13, 14}
	B := []uint64{11, 12, 21}
	prepare := func(t *testing.T, minShare float64) *PrefixAffinityPolicy {
		p := NewPrefixAffinity(4, 100, minShare)
		p.Routed(&Request{Hashes: A, Blocks: 8}, 2)
		p.Routed(&Request{Hashes: B, Blocks: 3}, 0)
		p.Routed(&Request{Hashes: B, Blocks: 3}, 1)
		return p
	}
	// Loads 1, 3, 9, 0 (instance 3 holds nothing and is idle).
	loads := view([4]float64{1, 0, 0, 0}, [4]float64{1, 1, 1, 0}, [4]float64{5, 2, 2, 0}, [4]float64{})
	for _, tc := range []struct {
		name     string
		minShare float64
		req      *Request
		v        *View
		want     int
		shares   []float64
	}{
		// All of A's 4 shared blocks of 8 at instance 2: a hit, although it
		// is the busiest.
		{"hit beats load", 0, &Request{Hashes: A, Blocks: 8}, loads, 2, []float64{0.25, 0.25, 0.5, 0}},
		// A prompt starting 11, 12, 99: 2 of 4 blocks at 0, 1 and 2; the
		// least loaded of those, 0, not the idle instance 3.
		{"tie on share goes to the lower load", 0, &Request{Hashes: []uint64{11, 12, 99}, Blocks: 4}, loads, 0, []float64{0.5, 0.5, 0.5, 0}},
		{"tie on share and load goes to the lower index", 0, &Request{Hashes: []uint64{11, 12, 99}, Blocks: 4},
			view([4]float64{3, 0, 0, 0}, [4]float64{0, 1, 1, 0}, [4]float64{1, 1, 0, 0}, [4]float64{}), 1, []float64{0.5, 0.5, 0.5, 0}},
		// Nothing cached anywhere: least-loaded, instance 3.
		{"miss goes to the least loaded", 0, &Request{Hashes: []uint64{77, 78}, Blocks: 2}, loads, 3, []float64{0, 0, 0, 0}},
		{"miss ties go to the lowest index", 0, &Request{Hashes: []uint64{77}, Blocks: 2},
			view([4]float64{1, 0, 0, 0}, [4]float64{0, 0, 0, 0}, [4]float64{0, 0, 0, 0}, [4]float64{0, 1, 0, 0}), 1, []float64{0, 0, 0, 0}},
		{"a prompt shorter than a block misses", 0, &Request{}, loads, 3, []float64{0, 0, 0, 0}},
		// A threshold of 0.5: a best share of exactly 0.5 is not above it.
		{"share at the threshold is a miss", 0.5, &Request{Hashes: A, Blocks: 8}, loads, 3, []float64{0.25, 0.25, 0.5, 0}},
		{"share above the threshold is a hit", 0.49, &Request{Hashes: A, Blocks: 8}, loads, 2, []float64{0.25, 0.25, 0.5, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := prepare(t, tc.minShare)
			tc.req.Spec = &sim.RequestSpec{}
			require.Equal(t, tc.want, p.Route(tc.req, tc.v))
			got := make([]float64, 4)
			p.Score(tc.req, tc.v, got)
			require.Equal(t, tc.shares, got)
		})
	}
}

// TestPrefixAffinityPolicyLearns: the index learns from Routed, with the
// same capacity semantics as the weighted policy's scorer (an instance's
// set holds capacity blocks, own blocks included).
func TestPrefixAffinityPolicyLearns(t *testing.T) {
	p, err := New(PrefixAffinityName, 2, Params{PrefixIndexCapacity: 4})
	require.NoError(t, err)
	require.True(t, p.NeedsHashes())
	require.Equal(t, PrefixAffinityName, p.Name())
	v := view([4]float64{}, [4]float64{})
	req := &Request{Spec: &sim.RequestSpec{}, Hashes: []uint64{5, 6}, Blocks: 3}
	require.Equal(t, 0, p.Route(req, v), "nothing known: least-loaded, lowest index")
	v.InFlight[0] = 1
	require.Equal(t, 1, p.Route(req, v), "nothing known: least-loaded")
	p.Routed(req, 1)
	v.InFlight[1] = 5
	require.Equal(t, 1, p.Route(req, v), "it follows its prefix")
	// Its 2 shared and 1 own block, then another prompt's 3 own blocks:
	// the set of 4 evicts the oldest, the first prompt's own block and its
	// tail block 6, keeping its head.
	p.Routed(&Request{Spec: &sim.RequestSpec{}, Hashes: nil, Blocks: 3}, 1)
	pa := p.(*PrefixAffinityPolicy)
	require.Equal(t, 4, pa.Index().Len(1))
	require.Equal(t, 1, pa.Index().Match(1, req.Hashes), "block 6 went first; the prompt's head is evicted last")
	p.Routed(&Request{Spec: &sim.RequestSpec{}, Hashes: nil, Blocks: 4}, 1)
	require.Equal(t, 0, p.Route(req, v), "evicted: a miss again")
}

// TestNewPrefixAffinityPanicsOnBrokenPreconditions: the constructor
// guards its documented preconditions (the template's parameters are
// range-checked where they are read, policy's TestRoutingParamsRefused).
func TestNewPrefixAffinityPanicsOnBrokenPreconditions(t *testing.T) {
	for _, tc := range []struct {
		capacity int
		share    float64
		want     string
	}{
		{-1, 0, "capacity"},
		{MaxPrefixIndexCapacity + 1, 0, "capacity"},
		{10, -0.1, "share"},
		{10, 1, "share"},
		{10, math.NaN(), "share"},
	} {
		require.Contains(t, panicText(func() { NewPrefixAffinity(2, tc.capacity, tc.share) }), tc.want, "%+v", tc)
	}
	require.Contains(t, panicText(func() { _, _ = New(PrefixAffinityName, 2, Params{MinMatchShare: 1.5}) }), "share")
	require.Contains(t, panicText(func() { _, _ = New(PrefixAffinityName, 2, Params{PrefixMode: "exact"}) }), "prefix index mode")
	w := DefaultTierWeights
	w[sim.TierCPU] = 1.5
	require.Contains(t, panicText(func() { _, _ = New(PrefixAffinityName, 2, Params{PrefixMode: PrefixPrecise, TierWeights: &w}) }), "cpu tier weight 1.5")
	p, err := New(PrefixAffinityName, 2, Params{})
	require.NoError(t, err)
	require.Equal(t, 0.0, p.(*PrefixAffinityPolicy).MinMatchShare())
}

// panicText is f's panic value as text, "" when f returns.
func panicText(f func()) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestPrefixAffinityPolicyDecidesWithoutAllocating: in steady state (the
// index holding the prompts, buffers sized), a decision and its Routed
// allocate nothing.
func TestPrefixAffinityPolicyDecidesWithoutAllocating(t *testing.T) {
	p := NewPrefixAffinity(3, 100, 0)
	v := view([4]float64{1, 0, 0, 0}, [4]float64{0, 0, 0, 0}, [4]float64{2, 0, 0, 0})
	reqs := []*Request{
		{Spec: &sim.RequestSpec{}, Hashes: []uint64{1, 2, 3}, Blocks: 5},
		{Spec: &sim.RequestSpec{}, Hashes: []uint64{1, 2, 4}, Blocks: 5},
		{Spec: &sim.RequestSpec{}, Hashes: []uint64{9}, Blocks: 2},
	}
	scores := make([]float64, 3)
	step := func() {
		for _, r := range reqs {
			p.Score(r, v, scores)
			p.Routed(r, p.Route(r, v))
		}
	}
	step()
	step()
	require.Zero(t, testing.AllocsPerRun(100, step))
}

// An index sized from the instances (AutoPrefixIndexCapacity) holds, per
// instance, the blocks the cluster reports; until then a fixed 10,000 (docs/kv-tiers.md).
func TestPrefixIndexSizedPerInstance(t *testing.T) {
	p, err := New(PrefixAffinityName, 2, Params{})
	require.NoError(t, err)
	x := p.(PrefixIndexer).PrefixIndex()
	require.True(t, x.Auto())
	require.Equal(t, DefaultPrefixIndexCapacity, x.Capacity(0))
	x.SizeInstance(0, 3)
	x.SizeInstance(1, 40_000)
	require.Equal(t, 3, x.Capacity(0))
	require.Equal(t, 40_000, x.Capacity(1))
	hs := []uint64{1, 2, 3, 4, 5}
	x.Record(0, hs, 0)
	x.Record(1, hs, 0)
	require.Equal(t, 3, x.Len(0), "instance 0 holds 3 blocks")
	require.Equal(t, 3, x.Match(0, hs), "the prompt's head stays: its tail is evicted first")
	require.Equal(t, 5, x.Match(1, hs))
	fixed, err := New(PrefixAffinityName, 2, Params{PrefixIndexCapacity: 7})
	require.NoError(t, err)
	fx := fixed.(PrefixIndexer).PrefixIndex()
	fx.SizeInstance(0, 3)
	require.False(t, fx.Auto())
	require.Equal(t, 7, fx.Capacity(0), "a given capacity is kept")
}
