package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendBlockHashesFastPath checks the hash chain against its
// definition, block by block through blockContent, for every kind of
// content and from any starting length: the loop past the shared blocks
// must give the same hashes.
func TestAppendBlockHashesFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 2000 {
		bs := int64(1 + r.IntN(32))
		spec := RequestSpec{ID: r.Int64N(1 << 40), PromptTokens: 1 + r.Int64N(2000), OutputTokens: 1 + r.Int64N(500)}
		if r.IntN(2) == 0 {
			spec.PrefixGroup, spec.PrefixTokens = int32(1+r.IntN(5)), r.Int64N(spec.PromptTokens+1)
		}
		if r.IntN(3) == 0 {
			spec.ContentTokens = 1 + r.Int64N(600)
			for range r.IntN(6) {
				spec.Content = append(spec.Content, r.Uint64())
			}
			if len(spec.Content) == 0 {
				spec.ContentTokens = 0
			}
		}
		if r.IntN(4) == 0 {
			spec.Session = 1 + r.Int64N(100)
		}
		n := (spec.PromptTokens+spec.OutputTokens)/bs + int64(r.IntN(3))
		var want []uint64
		var parent uint64
		for i := range n {
			parent = chain(parent, blockContent(&spec, i, bs))
			want = append(want, parent)
		}
		require.Equal(t, want, AppendBlockHashes(nil, &spec, bs, n), "%+v", spec)
		k := r.Int64N(n + 1)
		require.Equal(t, want, AppendBlockHashes(want[:k:k], &spec, bs, n), "from %d: %+v", k, spec)
	}
}
