package route

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// By hand: a prompt of 4 full blocks a b c d. Instance 0 holds a, b on
// its GPU and c in its CPU tier: (1 + 1 + 0.8) / 4 = 0.7 (d is nowhere it
// can read). Instance 1 holds a in its CPU tier and b, c, d on its GPU,
// and is linked to a store holding all four: a is worth max(0.8, 0.5),
// (0.8 + 1 + 1 + 1) / 4 = 0.95. Once instance 0's GPU drops b, its run
// stops there: 1 / 4.
func TestPreciseIndexScoresByTier(t *testing.T) {
	a, b, c, d := uint64(11), uint64(12), uint64(13), uint64(14)
	x := NewPreciseIndex(2, DefaultTierWeights)
	for _, ev := range []struct {
		i  int
		ev sim.KVBlockEvent
	}{
		{0, sim.KVBlockEvent{Hash: a, Tier: sim.TierGPU}}, {0, sim.KVBlockEvent{Hash: b, Tier: sim.TierGPU}}, {0, sim.KVBlockEvent{Hash: c, Tier: sim.TierCPU}},
		{1, sim.KVBlockEvent{Hash: a, Tier: sim.TierCPU}}, {1, sim.KVBlockEvent{Hash: b, Tier: sim.TierGPU}}, {1, sim.KVBlockEvent{Hash: c, Tier: sim.TierGPU}},
		{1, sim.KVBlockEvent{Hash: d, Tier: sim.TierGPU}},
	} {
		x.Apply(ev.i, ev.ev)
	}
	store := map[uint64]bool{a: true, b: true, c: true, d: true}
	x.SetStore(func(h uint64) bool { return store[h] })
	x.Link(1)
	dst := make([]float64, 2)
	hs := []uint64{a, b, c, d}
	x.Score(hs, 4, []int32{0, 1}, dst)
	require.InDelta(t, 0.7, dst[0], 1e-12)
	require.InDelta(t, 0.95, dst[1], 1e-12)
	x.Apply(0, sim.KVBlockEvent{Hash: b, Tier: sim.TierGPU, Removed: true})
	x.Score(hs, 4, []int32{0, 1}, dst)
	require.InDelta(t, 0.25, dst[0], 1e-12)
	require.Equal(t, 2, x.Blocks(0))
	// Linked, instance 0 reads b, c and d from the store too:
	// (1 + 0.5 + 0.8 + 0.5) / 4.
	x.Link(0)
	x.Score(hs, 4, []int32{0, 1}, dst)
	require.InDelta(t, 0.7, dst[0], 1e-12)
	x.Forget(0)
	x.Score(hs, 4, []int32{0, 1}, dst)
	require.Zero(t, dst[0])

	// Preconditions (prefix_mode and the tier weights are checked where
	// they are read).
	require.Contains(t, panicText(func() { _, _ = New(PrefixAffinityName, 2, Params{PrefixMode: "exact"}) }), `prefix index mode "exact" is not`)
	require.Contains(t, panicText(func() {
		_, _ = New(WeightedName, 2, Params{PrefixMode: PrefixPrecise, TierWeights: &TierWeights{1, 2, 0, 0}})
	}), "cpu tier weight 2 is not within [0, 1]")
	p, err := New(WeightedName, 2, Params{PrefixMode: PrefixPrecise})
	require.NoError(t, err)
	require.NotNil(t, p.(PreciseIndexer).PreciseIndex())
}
