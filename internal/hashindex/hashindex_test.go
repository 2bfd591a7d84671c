package hashindex

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexMatchesAMap drives the index and a Go map with the same random
// operations. Keys have only a few distinct tags (high halves), so that
// tags collide, runs are long and every lookup must confirm against the
// caller's keys.
func TestIndexMatchesAMap(t *testing.T) {
	for _, tags := range []int{1, 6, 1 << 20} {
		r := rand.New(rand.NewPCG(9, uint64(tags)))
		const capacity = 64
		keys := make([]uint64, capacity)
		p := New(capacity, func(v int32) uint64 { return keys[v] })
		ref := map[uint64]int32{}
		var free []int32
		for v := int32(capacity - 1); v >= 0; v-- {
			free = append(free, v)
		}
		for i := 0; i < 200_000; i++ {
			k := uint64(r.IntN(tags))<<32 | uint64(r.IntN(300))
			switch r.IntN(3) {
			case 0:
				if len(free) > 0 {
					v := free[len(free)-1]
					_, had := ref[k]
					require.Equal(t, !had, p.Put(k, v))
					if !had {
						keys[v] = k
						ref[k] = v
						free = free[:len(free)-1]
					}
				}
			case 1:
				if v, had := ref[k]; had {
					p.Del(k, v)
					delete(ref, k)
					free = append(free, v)
				}
			default:
				v, ok := p.Get(k)
				want, had := ref[k]
				require.Equal(t, had, ok, "key %x", k)
				require.Equal(t, want, v)
			}
			require.Equal(t, len(ref), p.Len())
		}
	}
}

// The table was sized for its whole capacity up front,
// so a KV cache of 2^31 blocks took 32 GiB before holding a key. It now
// starts at EagerKeys keys and doubles when half full.
func TestIndexGrowsWithItsKeys(t *testing.T) {
	const eager = 1 << 16 // EagerKeys, spelled out so the test reads the same without it
	for _, capacity := range []int64{5, eager, 3*eager + 7, 1 << 31} {
		keys := map[int32]uint64{}
		p := New(capacity, func(v int32) uint64 { return keys[v] })
		require.LessOrEqual(t, len(p.slots), 2*eager, "capacity %d", capacity)
		r := rand.New(rand.NewPCG(7, uint64(capacity)))
		n := int32(min(capacity, 3*eager+7))
		for v := range n {
			k := r.Uint64()
			keys[v] = k
			require.True(t, p.Put(k, v))
			require.False(t, p.Put(k, v))
			// Never more than half full, and never beyond two slots a key
			// of capacity.
			require.LessOrEqual(t, 2*p.Len(), len(p.slots))
			require.LessOrEqual(t, int64(len(p.slots)), 2*max(capacity, 8))
		}
		for v := range n {
			got, ok := p.Get(keys[v])
			require.True(t, ok)
			require.Equal(t, v, got)
		}
		for v := int32(0); v < n; v += 2 {
			p.Del(keys[v], v)
		}
		for v := range n {
			got, ok := p.Get(keys[v])
			require.Equal(t, v%2 == 1, ok, "value %d", v)
			if ok {
				require.Equal(t, v, got)
			}
		}
		require.Equal(t, int(n/2), p.Len())
	}
}

// TestCloneIsIndependent: a clone answers as the original did when it was
// made, and changes to either never show in the other.
func TestCloneIsIndependent(t *testing.T) {
	keys := []uint64{1 << 32, 2 << 32, 3<<32 | 5}
	p := New(8, func(v int32) uint64 { return keys[v] })
	require.True(t, p.Put(keys[0], 0))
	require.True(t, p.Put(keys[1], 1))
	ckeys := append([]uint64(nil), keys...)
	c := p.Clone(func(v int32) uint64 { return ckeys[v] })
	p.Del(keys[0], 0)
	require.True(t, p.Put(keys[2], 2))
	for _, tc := range []struct {
		idx  *Index
		k    uint64
		want bool
	}{{p, keys[0], false}, {p, keys[2], true}, {c, keys[0], true}, {c, keys[1], true}, {c, keys[2], false}} {
		_, ok := tc.idx.Get(tc.k)
		require.Equal(t, tc.want, ok, "key %x", tc.k)
	}
	require.Equal(t, 2, p.Len())
	require.Equal(t, 2, c.Len())
}

// TestCloneIntoReusesTheTable: CloneInto overwrites an old index of
// another content and size with a copy of the original, in its table.
func TestCloneIntoReusesTheTable(t *testing.T) {
	keys := []uint64{1 << 32, 2 << 32, 3<<32 | 5}
	p := New(8, func(v int32) uint64 { return keys[v] })
	require.True(t, p.Put(keys[0], 0))
	old := New(1000, func(v int32) uint64 { return uint64(v) << 32 })
	for v := int32(1); v < 50; v++ {
		require.True(t, old.Put(uint64(v)<<32, v))
	}
	ckeys := append([]uint64(nil), keys...)
	c := p.CloneInto(old, func(v int32) uint64 { return ckeys[v] })
	require.Same(t, old, c)
	require.Equal(t, 1, c.Len())
	_, ok := c.Get(keys[0])
	require.True(t, ok)
	_, ok = c.Get(7 << 32)
	require.False(t, ok, "nothing of the old content")
	require.True(t, c.Put(keys[1], 1))
	_, ok = p.Get(keys[1])
	require.False(t, ok, "independent of the original")
}
