package sim

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The GPU blocks, the prefix index and the CPU tier were
// allocated for the configured sizes up front (--kv-blocks-cpu 99999999999
// took 22 GB before being killed, --kv-blocks-gpu 2147483647 ran out of
// memory). Memory now follows the blocks used: a huge cache serving a few
// requests costs what a small one does.
func TestKVMemoryFollowsUse(t *testing.T) {
	reqs := make([]RequestSpec, 40)
	for i := range reqs {
		reqs[i] = RequestSpec{ID: int64(i), ArrivalUs: int64(i) * 3000, PromptTokens: int64(200 + 37*i), OutputTokens: int64(5 + i%7)}
		if i%2 == 0 {
			reqs[i].PrefixGroup, reqs[i].PrefixTokens = int32(1+i%3), 128
		}
	}
	for _, tc := range []struct {
		name     string
		gpu, cpu int64
	}{
		// 2.5 GB each if allocated up front again: enough to fail, not
		// enough to take the machine. The reported sizes (2^31 − 1 GPU,
		// 99,999,999,999 CPU blocks) ran in 38 MB (docs/simulator.md).
		{"gpu", 1 << 26, 0},
		{"gpu and cpu", 1 << 26, 1 << 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.TotalKVBlocksGPU = tc.gpu
			if tc.cpu > 0 {
				// Every eviction is stored to the CPU tier.
				cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = tc.cpu, true, 0
			}
			var res *Result
			n := allocated(func() { res = run(t, cfg, reqs) })
			require.Equal(t, int64(len(reqs)), res.Requests.Completed)
			require.Less(t, n, uint64(32<<20), "%d bytes allocated for %d GPU and %d CPU blocks", n, tc.gpu, tc.cpu)
		})
	}
}

// A cache larger than the blocks allocated up front grows as it fills,
// and behaves as the free list it stands for: every invariant holds
// (checked after every step) and the run equals one on a cache whose
// blocks were all allocated at the start.
func TestKVCacheGrowsPastEagerBlocks(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = eagerBlocks + 3000
	cfg.Engine.MaxNumSeqs = 64
	cfg.Engine.MaxBatchedTokens = 1 << 16
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = 5000, true, 0.5
	var reqs []RequestSpec
	for i := range 300 {
		r := RequestSpec{ID: int64(i), ArrivalUs: int64(i) * 400, PromptTokens: int64(3000 + 977*i%20000), OutputTokens: int64(3 + i%40)}
		if i%3 == 0 {
			r.PrefixGroup, r.PrefixTokens = int32(1+i%5), 2048
		}
		reqs = append(reqs, r)
	}
	s, err := New(cfg, reqs)
	require.NoError(t, err)
	lazy, err := s.Run()
	require.NoError(t, err)
	kv := s.Engine().kv
	require.Greater(t, len(kv.blocks), eagerBlocks, "the run must use blocks beyond the eager ones")
	require.Greater(t, lazy.KVEvictions, int64(0))
	require.NotNil(t, lazy.KVOffload)
	require.Greater(t, lazy.KVOffload.StoredBlocks, int64(0))

	// The same run with every block allocated at the start.
	s, err = New(cfg, reqs)
	require.NoError(t, err)
	kv = s.Engine().kv
	kv.blocks = make([]kvBlock, 0, kv.n)
	eager, err := s.Run()
	require.NoError(t, err)
	require.Equal(t, lazy, eager)
}

// TestFreeRingIsLRU drives the cache's free ring and a reference LRU list
// (a slice: release appends, allocation takes the front, a hit on a free
// block removes it where it is) with the same random releases, cache hits
// and allocations, and requires the same blocks allocated, in order. Hits
// on free blocks are frequent, so that stale entries pile up and the ring
// compacts and grows.
func TestFreeRingIsLRU(t *testing.T) {
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 3))
		const total = 300
		c := newKVCache(total, 16, false, nil)
		var ref []int32  // the released free blocks, LRU first
		var held []int32 // blocks with one reference
		var fresh int32  // the next block never used
		for range 20_000 {
			switch op := r.IntN(10); {
			case op < 4: // allocate
				n := int64(1 + r.IntN(4))
				var got []int32
				got, ok := c.allocate(n, got)
				require.Equal(t, n <= c.numFree+int64(len(got)), ok)
				if !ok {
					continue
				}
				for _, b := range got {
					if fresh < total { // blocks never used come first, in id order
						require.Equal(t, fresh, b)
						fresh++
						continue
					}
					require.Equal(t, ref[0], b, "LRU order")
					ref = ref[1:]
				}
				held = append(held, got...)
			case op < 7: // release
				if len(held) == 0 {
					continue
				}
				k := r.IntN(len(held))
				b := held[k]
				held = slices.Delete(held, k, k+1)
				c.release([]int32{b})
				ref = append(ref, b)
			default: // a prefix hit on a free block
				if len(ref) == 0 {
					continue
				}
				k := r.IntN(len(ref))
				b := ref[k]
				ref = slices.Delete(ref, k, k+1)
				held = c.acquire([]int32{b}, held)
			}
			require.Equal(t, int64(total-len(held)), c.numFree)
			var live []int32
			c.eachReleased(func(b int32) { live = append(live, b) })
			require.True(t, slices.Equal(ref, live), "free list %v, want %v", live, ref)
		}
	}
}
