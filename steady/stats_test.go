package steady

import (
	"github.com/blis-sim/blis/internal/loglin"

	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHistQuantileWithinItsResolution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []float64{50, 5_000, 2e6} {
		var h Hist
		v := make([]int64, 20_000)
		for i := range v {
			v[i] = int64(scale * r.ExpFloat64())
			h.Add(v[i])
		}
		slices.Sort(v)
		for _, p := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			want := v[loglin.NearestRank(p, int64(len(v)))-1]
			got := h.Quantile(p)
			require.InDelta(t, float64(want), float64(got), max(0.5, 0.004*float64(want)), "scale %v p %v", scale, p)
		}
	}
	var e Hist
	require.Zero(t, e.Quantile(0.5))
	e.Add(-5)
	require.Equal(t, int64(0), e.Quantile(0.5), "negative values count as 0")
}

func TestHistMergeIsAdding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b, all Hist
	for i := range 5000 {
		x := int64(r.IntN(1 << 22))
		if i%3 == 0 {
			x /= 1000 // b's values lie below a's: Merge grows downwards
			b.Add(x)
		} else {
			a.Add(x)
		}
		all.Add(x)
	}
	a.Merge(&b)
	for _, p := range []float64{0.1, 0.5, 0.99} {
		require.Equal(t, all.Quantile(p), a.Quantile(p))
	}
	require.Equal(t, all.Count(), a.Count())
	b.Reset()
	require.Zero(t, b.Count())
}

func TestMSER(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	noise := func(n int) []float64 {
		z := make([]float64, n)
		for i := range z {
			z[i] = 10 + r.NormFloat64()
		}
		return z
	}
	// A transient: the first 60 of 400 values start 30 above the mean
	// and decay.
	z := noise(400)
	for i := range 60 {
		z[i] += 30 * math.Exp(-float64(i)/15)
	}
	d, found := MSER(z)
	require.True(t, found)
	require.GreaterOrEqual(t, d, 30, "the transient's bulk removed")
	require.LessOrEqual(t, d, 120)
	// Stationary from the start: little is removed.
	d, found = MSER(noise(400))
	require.True(t, found)
	require.Less(t, d, 200)
	// A trend never settles: the minimum lies in the second half.
	z = noise(400)
	for i := range z {
		z[i] += 0.1 * float64(i)
	}
	_, found = MSER(z)
	require.False(t, found)
	_, found = MSER(noise(5))
	require.False(t, found, "too few values")
}

// ar1 is a stationary AR(1) series with mean mu and lag-1 correlation phi.
func ar1(r *rand.Rand, n int, mu, phi float64) []float64 {
	z := make([]float64, n)
	x := r.NormFloat64() / math.Sqrt(1-phi*phi)
	for i := range z {
		x = phi*x + r.NormFloat64()
		z[i] = mu + x
	}
	return z
}

func TestIndependenceTest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rejects := 0
	for range 400 {
		if !independent(ar1(r, 20, 0, 0)) {
			rejects++
		}
	}
	// Its level is 10 %.
	require.InDelta(t, 0.10, float64(rejects)/400, 0.05)
	rejects = 0
	for range 200 {
		if !independent(ar1(r, 40, 0, 0.8)) {
			rejects++
		}
	}
	require.Greater(t, rejects, 180, "strong correlation is found")
	require.True(t, independent([]float64{3, 3, 3, 3}), "constant means")
}

// The batch-means interval of a correlated series' mean covers it about
// 95 % of the time, once the batches are long enough (Law & Kelton
// §9.5.3's experiments show the same degradation for short runs).
func TestBatchMeansCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	covered, runs := 0, 300
	for range runs {
		s := NewSeries(false)
		for i, x := range ar1(r, 20_000, 5, 0.9) {
			s.AddRatio(x, 1, int64(i))
		}
		iv := s.mean(0, len(s.cells))
		require.True(t, iv.Has())
		if iv.Contains(5) {
			covered++
		}
	}
	require.GreaterOrEqual(t, float64(covered)/float64(runs), 0.90)
}

func TestBatchRatio(t *testing.T) {
	// A ratio: Σnum/Σden, not the mean of the cells' ratios.
	num := []float64{1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3}
	den := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	iv := batchRatio(num, den)
	require.InDelta(t, 2, iv.Estimate, 1e-12)
	require.True(t, iv.Has())
	iv = batchRatio([]float64{1, 2}, []float64{0, 0})
	require.False(t, iv.Has())
	iv = batchRatio([]float64{1, 2}, []float64{1, 1})
	require.False(t, iv.Has(), "too few cells")
	require.InDelta(t, 1.5, iv.Estimate, 1e-12)
}

// The sectioning interval of a percentile of i.i.d. values covers the
// true percentile about 95 % of the time.
func TestQuantileCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const mean = 10_000.0
	truth := -mean * math.Log(1-0.99) // exponential's p99
	covered, runs := 0, 200
	for range runs {
		s := NewSeries(true)
		for i := range 40_000 {
			s.Add(int64(mean*r.ExpFloat64()), int64(i))
		}
		iv, ok := s.quantile(0.99, 0, len(s.cells))
		require.True(t, ok)
		require.True(t, iv.Has())
		if iv.Contains(truth) {
			covered++
		}
	}
	require.GreaterOrEqual(t, float64(covered)/float64(runs), 0.88)
	s := NewSeries(true)
	for i := range 1000 {
		s.Add(int64(i), int64(i))
	}
	iv, ok := s.quantile(0.99, 0, len(s.cells))
	require.True(t, ok)
	require.False(t, iv.Has(), "1,000 values are too few for a p99 interval")
}

func TestSeriesBoundedMemory(t *testing.T) {
	s := NewSeries(true)
	for i := range 1_000_003 {
		s.Add(int64(i%1000), int64(i))
	}
	require.LessOrEqual(t, len(s.cells), maxCells)
	require.GreaterOrEqual(t, len(s.cells), maxCells/2)
	require.LessOrEqual(t, len(s.hists), maxCells/cellsPerSection)
	require.Equal(t, int64(1_000_003), s.Count())
	var n int64
	for _, c := range s.cells {
		n += c.n
		require.Equal(t, s.m, c.n)
	}
	require.Equal(t, s.Count(), n+s.open.n)
}

func TestReplicateAndPool(t *testing.T) {
	iv := Replicate([]float64{1, 2, 3})
	require.InDelta(t, 2, iv.Estimate, 1e-12)
	// t(2, 0.975) = 4.303; s = 1.
	require.InDelta(t, 4.302653*1/math.Sqrt(3), iv.HalfWidth(), 1e-5)
	require.False(t, Replicate([]float64{4}).Has())
	p := Pool([]Interval{{Estimate: 1, Low: 0, High: 2, Batches: 10, Independent: true}, {Estimate: 3, Low: 2, High: 4, Batches: 10, Independent: true}})
	require.InDelta(t, 2, p.Estimate, 1e-12)
	require.InDelta(t, math.Sqrt(2)/2, p.HalfWidth(), 1e-12)
}

func TestTrend(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	flat := ar1(r, 400, 50, 0.5)
	g, _, ok := trend(flat, 1)
	require.True(t, ok)
	require.True(t, g.Contains(0) || math.Abs(g.Estimate) < 0.05, "%+v", g)
	rising := ar1(r, 400, 50, 0.5)
	for i := range rising {
		rising[i] += 0.5 * float64(i)
	}
	g, _, ok = trend(rising, 1)
	require.True(t, ok)
	require.InDelta(t, 0.5, g.Estimate, 0.05)
	require.Greater(t, g.Low, 0.0)
	_, _, ok = trend(flat[:5], 1)
	require.False(t, ok)
}

func TestDepartureHeapPopsInTimeOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	var h depHeap
	var want []int64
	for range 1000 {
		at := r.Int64N(1000)
		h.push(dep{at: at})
		want = append(want, at)
		if r.IntN(3) == 0 {
			slices.Sort(want)
			require.Equal(t, want[0], h.pop().at)
			want = want[1:]
		}
	}
	slices.Sort(want)
	for _, w := range want {
		require.Equal(t, w, h.pop().at)
	}
	require.Empty(t, h)
}
