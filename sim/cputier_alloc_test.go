package sim

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/hardening.md, class 4: the CPU tier's memory follows the blocks stored, not
// its size: an unused tier of a million blocks costs under 1 KB (its first
// chunk reserved ~2.5 MB per instance before), and storing n blocks
// allocates O(n) whatever the capacity.
func TestCPUTierMemoryFollowsUse(t *testing.T) {
	alloc := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	tiers := make([]*cpuTier, 100)
	got := alloc(func() {
		for i := range tiers {
			tiers[i] = newCPUTier(1_000_000, 0.9)
		}
	})
	require.Less(t, got, uint64(100*1024), "100 unused tiers of 10^6 blocks")
	for _, capacity := range []int64{1000, 1 << 30} {
		tr := newCPUTier(capacity, 0.9)
		got := alloc(func() {
			for h := uint64(1); h <= 1000; h++ {
				tr.store(h, int64(h), false)
			}
		})
		require.Less(t, got, uint64(1000*200), "1000 blocks stored in a tier of %d", capacity)
		require.EqualValues(t, 1000, len(tr.entries))
	}
	runtime.KeepAlive(tiers)
}
