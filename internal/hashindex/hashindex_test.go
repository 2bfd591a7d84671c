package hashindex

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexMatchesAMap drives the open-addressing index and a Go map
// with the same random operations, with keys forced into long probe runs.
func TestIndexMatchesAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	p := New(64)
	ref := map[uint64]int32{}
	for i := 0; i < 200_000; i++ {
		// Few distinct low bits: many keys share a home slot.
		k := uint64(1+r.IntN(100))<<20 | uint64(r.IntN(8)) // never 0, which the index stores as 1
		switch r.IntN(3) {
		case 0:
			if len(ref) < 64 {
				_, had := ref[k]
				require.Equal(t, !had, p.Put(k, int32(i)))
				if !had {
					ref[k] = int32(i)
				}
			}
		case 1:
			p.Del(k)
			delete(ref, k)
		default:
			v, ok := p.Get(k)
			want, had := ref[k]
			require.Equal(t, had, ok)
			require.Equal(t, want, v)
		}
		require.Equal(t, len(ref), p.Len())
	}
}
