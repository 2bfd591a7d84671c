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
