package loglin

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNearestRank(t *testing.T) {
	for _, c := range []struct {
		p    float64
		n    int64
		want int64
	}{
		{0, 10, 1}, {0.1, 10, 1}, {0.11, 10, 2}, {0.5, 10, 5}, {0.5, 11, 6},
		{0.99, 100, 99}, {0.991, 100, 100}, {1, 100, 100}, {1.5, 7, 7}, {0.5, 1, 1},
	} {
		require.Equal(t, c.want, NearestRank(c.p, c.n), "p %v n %v", c.p, c.n)
	}
}

// Every value lies in its bucket's range, buckets are ordered as their
// values, and the midpoint is within 2^-(bits-1) of every value of its
// bucket, for both layouts in use.
func TestIndexAndMid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range []int{8, 10} {
		exact := int64(1) << b
		for v := range exact {
			require.Equal(t, int(v), Index(v, b))
			require.Equal(t, v, Mid(int(v), b))
		}
		prev := Index(exact-1, b)
		for i := 0; i < 200_000; i++ {
			v := exact + r.Int64N(math.MaxInt64/4)>>r.IntN(60)
			idx := Index(v, b)
			require.GreaterOrEqual(t, idx, Index(exact, b))
			mid := Mid(idx, b)
			require.LessOrEqual(t, math.Abs(float64(mid-v)), float64(v)/float64(int64(1)<<(b-1)), "b %d v %d", b, v)
		}
		for v := exact - 1; v < exact*64; v++ {
			idx := Index(v, b)
			require.GreaterOrEqual(t, idx, prev, "b %d v %d", b, v)
			require.LessOrEqual(t, idx, prev+1, "b %d v %d: no bucket skipped", b, v)
			prev = idx
		}
		require.Less(t, Index(math.MaxInt64, b), 64<<(b-1)+int(exact), "b %d: the top bucket", b)
	}
}

// Quantile reads the nearest rank from the buckets, whatever bucket the
// counts start at, and the extremes exactly.
func TestQuantile(t *testing.T) {
	const b = 8
	vals := []int64{3, 3, 7, 300, 1000, 5000, 5001, 1 << 30}
	lo := Index(vals[0], b)
	counts := make([]int64, Index(vals[len(vals)-1], b)-lo+1)
	for _, v := range vals {
		counts[Index(v, b)-lo]++
	}
	n := int64(len(vals))
	for _, c := range []struct {
		p    float64
		want int64
	}{
		{0, 3}, {0.125, 3}, {0.25, 3}, {0.3, 7}, {0.5, Mid(Index(300, b), b)}, {0.6, Mid(Index(1000, b), b)},
		{0.75, Mid(Index(5000, b), b)}, {0.8, Mid(Index(5001, b), b)}, {1, 1 << 30},
	} {
		require.Equal(t, c.want, Quantile(counts, lo, n, vals[0], vals[len(vals)-1], c.p, b), "p %v", c.p)
	}
	require.InDelta(t, 1000, float64(Quantile(counts, lo, n, 3, 1<<30, 0.6, b)), 1000.0/128)
}
