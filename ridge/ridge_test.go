package ridge

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
)

// rows is a small in-memory data set for brute-force checks.
type rows struct {
	x [][]float64
	y []float64
	w []float64
}

func (d *rows) add(x []float64, y, w float64) {
	d.x = append(d.x, x)
	d.y = append(d.y, y)
	d.w = append(d.w, w)
}

func (d *rows) stats(p int) *Stats {
	s := NewStats(p)
	for i := range d.x {
		s.Add(d.x[i], d.y[i], d.w[i])
	}
	return s
}

// sse is the weighted SSE of coef on the rows, computed row by row.
func (d *rows) sse(coef []float64) float64 {
	var sum float64
	for i, x := range d.x {
		var pred float64
		for j, c := range coef {
			pred += c * x[j]
		}
		r := d.y[i] - pred
		sum += d.w[i] * r * r
	}
	return sum
}

// awkwardScales spans the magnitudes of the physics features.
func awkwardScales(p int) []float64 {
	sc := make([]float64, p)
	for j := range sc {
		sc[j] = math.Pow(10, -5+7*float64(j)/float64(p-1)) // 1e-5 .. 1e2
	}
	return sc
}

// randomRows draws n rows over p features: column j is scale[j] times a
// positive random value (different shapes per column), the last column is a
// constant bias 1 when bias is set; y = x·beta + noise·N(0,1); weights in
// [0.5, 2] unless unit.
func randomRows(rng *rand.Rand, n, p int, scale, beta []float64, noise float64, bias, unit bool) *rows {
	d := &rows{}
	for i := 0; i < n; i++ {
		x := make([]float64, p)
		for j := range x {
			switch j % 3 {
			case 0:
				x[j] = rng.Float64()
			case 1:
				x[j] = rng.ExpFloat64()
			default:
				x[j] = 0.5 + rng.NormFloat64()
			}
			x[j] *= scale[j]
		}
		if bias {
			x[p-1] = 1
		}
		var y float64
		for j := range x {
			y += beta[j] * x[j]
		}
		y += noise * rng.NormFloat64()
		w := 1.0
		if !unit {
			w = 0.5 + 1.5*rng.Float64()
		}
		d.add(x, y, w)
	}
	return d
}

func ones(p int) []float64 {
	v := make([]float64, p)
	for j := range v {
		v[j] = 1
	}
	return v
}

func biasOnly(p int) []bool {
	u := make([]bool, p)
	u[p-1] = true
	return u
}

func requireRel(t *testing.T, want, got, tol float64, msgAndArgs ...any) {
	t.Helper()
	den := math.Max(math.Abs(want), math.Abs(got))
	if den == 0 {
		return
	}
	require.LessOrEqual(t, math.Abs(want-got)/den, tol, msgAndArgs...)
}

func requireStatsEqual(t *testing.T, want, got *Stats, tol float64) {
	t.Helper()
	require.Equal(t, want.P(), got.P())
	require.Equal(t, want.N(), got.N())
	require.Equal(t, want.Bad(), got.Bad())
	requireRel(t, want.SumW(), got.SumW(), tol, "Σw")
	requireRel(t, want.YTWY(), got.YTWY(), tol, "y'Wy")
	for i := 0; i < want.P(); i++ {
		requireRel(t, want.XTWY(i), got.XTWY(i), tol, "X'Wy[%d]", i)
		for j := 0; j < want.P(); j++ {
			requireRel(t, want.XTWX(i, j), got.XTWX(i, j), tol, "X'WX[%d,%d]", i, j)
		}
	}
}

func TestExactRecovery(t *testing.T) {
	const p = 16
	scale := awkwardScales(p)
	scale[p-1] = 1
	tests := []struct {
		name   string
		lambda float64
		unit   bool
	}{
		{"tiny lambda, random weights", 1e-12, false},
		{"tiny lambda, unit weights", 1e-12, true},
		{"lambda 0", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			beta := make([]float64, p)
			for j := range beta {
				// Each term contributes O(1) seconds: coefficients span 1e-2 .. 1e5.
				beta[j] = (0.5 + rng.Float64()) / scale[j]
				if j%2 == 1 {
					beta[j] = -beta[j]
				}
			}
			d := randomRows(rng, 400, p, scale, beta, 0, true, tt.unit)
			fit, err := Solve(d.stats(p), Options{Lambda: tt.lambda, Unpenalized: biasOnly(p)})
			require.NoError(t, err)
			require.Equal(t, MethodCholesky, fit.Method)
			require.Equal(t, p, fit.Rank)
			for j := range beta {
				requireRel(t, beta[j], fit.Coef[j], 1e-8, "coef %d", j)
				require.False(t, fit.Dropped[j])
			}
			for i, x := range d.x {
				require.InDelta(t, d.y[i], fit.Predict(x), 1e-10, "row %d", i)
			}
			require.Greater(t, fit.Cond, 1.0)
		})
	}
}

func TestAgainstDirectSolve(t *testing.T) {
	const p = 8
	tests := []struct {
		name   string
		lambda float64 // multiple of Σw
		unpen  []bool
	}{
		{"lambda 0", 0, nil},
		{"small lambda", 1e-3, nil},
		{"lambda = Σw, bias unpenalized", 1, biasOnly(p)},
		{"large lambda, bias unpenalized", 100, biasOnly(p)},
		{"large lambda, all penalized", 100, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			scale := awkwardScales(p)
			beta := make([]float64, p)
			for j := range beta {
				beta[j] = rng.NormFloat64() / scale[j]
			}
			d := randomRows(rng, 200, p, scale, beta, 0.3, true, false)
			s := d.stats(p)
			lambda := tt.lambda * s.SumW()
			fit, err := Solve(s, Options{Lambda: lambda, Unpenalized: tt.unpen})
			require.NoError(t, err)
			require.Equal(t, MethodCholesky, fit.Method)

			// Naive closed form from the rows: (X'WX + λ diag(s²))⁻¹ X'Wy.
			a := mat.NewDense(p, p, nil)
			rhs := mat.NewVecDense(p, nil)
			var sumW float64
			for i, x := range d.x {
				w := d.w[i]
				sumW += w
				for r := 0; r < p; r++ {
					rhs.SetVec(r, rhs.AtVec(r)+w*x[r]*d.y[i])
					for c := 0; c < p; c++ {
						a.Set(r, c, a.At(r, c)+w*x[r]*x[c])
					}
				}
			}
			for j := 0; j < p; j++ {
				sj := math.Sqrt(a.At(j, j) / sumW)
				requireRel(t, sj, fit.Scale[j], 1e-12, "scale %d", j)
				if tt.unpen == nil || !tt.unpen[j] {
					a.Set(j, j, a.At(j, j)+lambda*sj*sj)
				}
			}
			var inv mat.Dense
			require.NoError(t, inv.Inverse(a))
			var want mat.VecDense
			want.MulVec(&inv, rhs)
			for j := 0; j < p; j++ {
				requireRel(t, want.AtVec(j), fit.Coef[j], 1e-9, "coef %d", j)
			}
		})
	}
}

func TestWeightEqualsDuplicate(t *testing.T) {
	const p = 5
	rng := rand.New(rand.NewPCG(5, 6))
	d := randomRows(rng, 50, p, ones(p), []float64{1, -2, 3, 0.5, 4}, 0.5, true, true)
	weighted := NewStats(p)
	dup := NewStats(p)
	for i, x := range d.x {
		w := 1.0
		if i%3 == 0 {
			w = 2
			dup.Add(x, d.y[i], 1)
		}
		weighted.Add(x, d.y[i], w)
		dup.Add(x, d.y[i], 1)
	}
	requireRel(t, dup.SumW(), weighted.SumW(), 1e-14)
	requireRel(t, dup.YTWY(), weighted.YTWY(), 1e-12)
	for _, lambda := range []float64{0, 1, 100} {
		fw, err := Solve(weighted, Options{Lambda: lambda, Unpenalized: biasOnly(p)})
		require.NoError(t, err)
		fd, err := Solve(dup, Options{Lambda: lambda, Unpenalized: biasOnly(p)})
		require.NoError(t, err)
		for j := range fw.Coef {
			requireRel(t, fd.Coef[j], fw.Coef[j], 1e-10, "lambda %g coef %d", lambda, j)
		}
	}
}

func TestShards(t *testing.T) {
	const p = 16
	rng := rand.New(rand.NewPCG(7, 8))
	scale := awkwardScales(p)
	d := randomRows(rng, 3000, p, scale, ones(p), 1, true, false)
	all := d.stats(p)
	shards := []*Stats{NewStats(p), NewStats(p), NewStats(p)}
	for i, x := range d.x {
		shards[rng.IntN(3)].Add(x, d.y[i], d.w[i])
	}
	merged := NewStats(p)
	for _, sh := range shards {
		require.NoError(t, merged.AddStats(sh))
	}
	requireStatsEqual(t, all, merged, 1e-12)

	// Sub undoes AddStats.
	before := merged.Clone()
	extra := randomRows(rng, 100, p, scale, ones(p), 1, true, false).stats(p)
	require.NoError(t, merged.AddStats(extra))
	require.NoError(t, merged.Sub(extra))
	requireStatsEqual(t, before, merged, 1e-12)
	before = merged.Clone()

	// train = total − fold equals the sum of the other shards.
	train := all.Clone()
	require.NoError(t, train.Sub(shards[1]))
	other := shards[0].Clone()
	require.NoError(t, other.AddStats(shards[2]))
	requireStatsEqual(t, other, train, 1e-10)

	// Shape errors leave the receiver unchanged.
	require.ErrorIs(t, merged.AddStats(NewStats(p-1)), ErrShape)
	require.ErrorIs(t, merged.Sub(NewStats(p+1)), ErrShape)
	requireStatsEqual(t, before, merged, 0)

	merged.Reset()
	require.Equal(t, int64(0), merged.N())
	require.Equal(t, 0.0, merged.SumW())
	require.Equal(t, p, merged.P())
}

func TestBufferedRowsAreVisibleAndReadsDoNotWrite(t *testing.T) {
	const p = 5
	rng := rand.New(rand.NewPCG(27, 28))
	for _, n := range []int{0, 1, 7, 8, 9, 21} { // around the 8-row buffer
		d := randomRows(rng, n, p, ones(p), ones(p), 1, false, false)
		s := d.stats(p)
		// Brute force from rows.
		var ytwy, sumW float64
		xtwy := make([]float64, p)
		xtwx := make([]float64, p*p)
		for i, x := range d.x {
			w, y := d.w[i], d.y[i]
			sumW += w
			ytwy += w * y * y
			for a := 0; a < p; a++ {
				xtwy[a] += w * y * x[a]
				for b := 0; b < p; b++ {
					xtwx[a*p+b] += w * x[a] * x[b]
				}
			}
		}
		requireRel(t, sumW, s.SumW(), 1e-14)
		requireRel(t, ytwy, s.YTWY(), 1e-12)
		for a := 0; a < p; a++ {
			requireRel(t, xtwy[a], s.XTWY(a), 1e-12)
			for b := 0; b < p; b++ {
				requireRel(t, xtwx[a*p+b], s.XTWX(a, b), 1e-12, "n %d (%d,%d)", n, a, b)
			}
		}
		if n == 0 {
			continue
		}
		before := s.Clone()
		_, err := Solve(s, Options{Lambda: 1})
		require.NoError(t, err)
		_ = SSE(s, ones(p))
		_, err = s.MarshalBinary()
		require.NoError(t, err)
		other := NewStats(p)
		require.NoError(t, other.AddStats(s))
		_, err = CrossValidate([]*Stats{s, other}, []float64{1}, nil)
		require.NoError(t, err)
		require.Equal(t, before, s, "n %d: a reader modified its argument", n)
		requireStatsEqual(t, s, other, 0)
		// AddStats and Sub of itself.
		twice := s.Clone()
		require.NoError(t, twice.AddStats(twice))
		requireRel(t, 2*s.SumW(), twice.SumW(), 1e-15)
		requireRel(t, 2*s.XTWX(0, 1), twice.XTWX(0, 1), 1e-14)
		require.NoError(t, twice.Sub(s))
		requireStatsEqual(t, s, twice, 1e-12)
	}
	// p = 0 with buffered rows.
	z := NewStats(0)
	z.Add(nil, 1, 1)
	require.NoError(t, NewStats(0).AddStats(z))
}

func TestMarshalRoundTrip(t *testing.T) {
	const p = 4
	rng := rand.New(rand.NewPCG(9, 10))
	s := randomRows(rng, 20, p, ones(p), ones(p), 1, false, false).stats(p)
	s.Add([]float64{math.NaN(), 0, 0, 0}, 1, 1)
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	var got Stats
	require.NoError(t, got.UnmarshalBinary(b))
	requireStatsEqual(t, s, &got, 0)
	require.Error(t, got.UnmarshalBinary(b[:len(b)-1]))
	require.Error(t, got.UnmarshalBinary([]byte("nonsense")))
}

func TestCollinear(t *testing.T) {
	const p = 4
	rng := rand.New(rand.NewPCG(11, 12))
	d := &rows{}
	for i := 0; i < 100; i++ {
		a, b := rng.Float64(), 1e-3*rng.ExpFloat64()
		x := []float64{a, a, b, 1}
		d.add(x, 2*a+3e3*b+0.5, 0.5+rng.Float64())
	}
	s := d.stats(p)

	t.Run("lambda 0 falls back", func(t *testing.T) {
		fit, err := Solve(s, Options{Lambda: 0, Unpenalized: biasOnly(p)})
		require.NoError(t, err)
		require.Equal(t, MethodSVD, fit.Method)
		require.Equal(t, 3, fit.Rank)
		for i, x := range d.x {
			require.InDelta(t, d.y[i], fit.Predict(x), 1e-10, "row %d", i)
		}
		// Minimum norm in scaled coordinates splits the effect evenly.
		requireRel(t, fit.Coef[0], fit.Coef[1], 1e-8)
		requireRel(t, 2, fit.Coef[0]+fit.Coef[1], 1e-9)
	})
	t.Run("lambda > 0 uses Cholesky", func(t *testing.T) {
		fit, err := Solve(s, Options{Lambda: 1e-3 * s.SumW(), Unpenalized: biasOnly(p)})
		require.NoError(t, err)
		require.Equal(t, MethodCholesky, fit.Method)
		requireRel(t, fit.Coef[0], fit.Coef[1], 1e-9)
	})
	t.Run("two collinear unpenalized columns", func(t *testing.T) {
		s2 := NewStats(p)
		for i, x := range d.x {
			s2.Add([]float64{x[0], x[2], 1, 1}, d.y[i], d.w[i])
		}
		fit, err := Solve(s2, Options{Lambda: 1, Unpenalized: []bool{false, false, true, true}})
		require.NoError(t, err)
		require.Equal(t, MethodSVD, fit.Method)
		requireRel(t, fit.Coef[2], fit.Coef[3], 1e-8)
	})
}

func TestUnpenalizedBias(t *testing.T) {
	const p = 6
	rng := rand.New(rand.NewPCG(13, 14))
	scale := awkwardScales(p)
	beta := make([]float64, p)
	for j := range beta {
		beta[j] = 1 / scale[j]
	}
	d := randomRows(rng, 300, p, scale, beta, 0.1, true, false)
	s := d.stats(p)
	var wy float64
	for i := range d.y {
		wy += d.w[i] * d.y[i]
	}
	mean := wy / s.SumW()
	fit, err := Solve(s, Options{Lambda: 1e12 * s.SumW(), Unpenalized: biasOnly(p)})
	require.NoError(t, err)
	require.Equal(t, MethodCholesky, fit.Method)
	for j := 0; j < p-1; j++ {
		// In scaled units the penalized coefficients vanish.
		require.Less(t, math.Abs(fit.Coef[j]*fit.Scale[j]), 1e-9, "coef %d", j)
	}
	requireRel(t, mean, fit.Coef[p-1], 1e-9)
}

func TestDroppedColumn(t *testing.T) {
	const p = 5
	rng := rand.New(rand.NewPCG(15, 16))
	beta := []float64{1, 2, 0, 4, 5} // column 2 will be all zeros
	d := randomRows(rng, 100, p, ones(p), beta, 0, true, false)
	for _, x := range d.x {
		x[2] = 0
	}
	// A zero-weight row with a nonzero value does not make the column informative.
	d.add([]float64{1, 1, 7, 1, 1}, 0, 0)
	for _, lambda := range []float64{0, 1e-12} {
		fit, err := Solve(d.stats(p), Options{Lambda: lambda, Unpenalized: biasOnly(p)})
		require.NoError(t, err)
		require.Equal(t, []bool{false, false, true, false, false}, fit.Dropped)
		require.Equal(t, 0.0, fit.Coef[2])
		require.Equal(t, 0.0, fit.Scale[2])
		require.Equal(t, MethodCholesky, fit.Method)
		require.Equal(t, 4, fit.Rank)
		for _, j := range []int{0, 1, 3, 4} {
			requireRel(t, beta[j], fit.Coef[j], 1e-9)
		}
	}

	all := NewStats(2)
	all.Add([]float64{0, 0}, 1, 1)
	fit, err := Solve(all, Options{})
	require.NoError(t, err)
	require.Equal(t, MethodNone, fit.Method)
	require.Equal(t, []float64{0, 0}, fit.Coef)
}

func TestBadInputs(t *testing.T) {
	const p = 3
	good := func() *Stats {
		s := NewStats(p)
		rng := rand.New(rand.NewPCG(17, 18))
		for i := 0; i < 20; i++ {
			s.Add([]float64{rng.Float64(), rng.Float64(), 1}, rng.Float64(), 1)
		}
		return s
	}
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		stats   func() *Stats
		opt     Options
		bad     int64 // > 0: want a *BadRowsError with this count
		is      error
		errText string
	}{
		{"NaN in x", func() *Stats { s := good(); s.Add([]float64{nan, 0, 1}, 1, 1); return s }, Options{}, 1, nil, "1 of 21 rows"},
		{"Inf in y", func() *Stats { s := good(); s.Add([]float64{1, 0, 1}, inf, 1); return s }, Options{}, 1, nil, "1 of 21 rows"},
		{"negative weight", func() *Stats { s := good(); s.Add([]float64{1, 0, 1}, 1, -1); return s }, Options{}, 1, nil, "1 of 21 rows"},
		{"three bad rows", func() *Stats {
			s := good()
			s.Add([]float64{1, -inf, 1}, 1, 1)
			s.Add([]float64{1, 0, 1}, nan, 1)
			s.Add([]float64{1, 0, 1}, 1, inf)
			return s
		}, Options{}, 3, nil, "3 of 23 rows"},
		{"bad row in a merged shard", func() *Stats {
			s := good()
			o := NewStats(p)
			o.Add([]float64{nan, nan, nan}, 1, 1)
			_ = s.AddStats(o)
			return s
		}, Options{}, 1, nil, "1 of 21 rows"},
		{"empty", func() *Stats { return NewStats(p) }, Options{}, 0, ErrNoData, "no rows"},
		{"p = 0", func() *Stats { return NewStats(0) }, Options{}, 0, ErrNoData, "zero features"},
		{"Σw = 0", func() *Stats { s := NewStats(p); s.Add([]float64{1, 2, 3}, 1, 0); return s }, Options{}, 0, ErrNoData, "Σw"},
		{"lambda < 0", good, Options{Lambda: -1}, 0, nil, "lambda"},
		{"lambda NaN", good, Options{Lambda: nan}, 0, nil, "lambda"},
		{"lambda Inf", good, Options{Lambda: inf}, 0, nil, "lambda"},
		{"Unpenalized length", good, Options{Unpenalized: []bool{true}}, 0, ErrShape, "Unpenalized"},
		{"overflow", func() *Stats { s := NewStats(1); s.Add([]float64{1e200}, 1e200, 1); return s }, Options{}, 0, nil, "overflowed"},
		{"over-subtracted", func() *Stats { s := NewStats(p); _ = s.Sub(good()); return s }, Options{}, 0, nil, "inconsistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fit, err := Solve(tt.stats(), tt.opt)
			require.Error(t, err)
			require.Nil(t, fit)
			require.Contains(t, err.Error(), tt.errText)
			if tt.bad > 0 {
				var be *BadRowsError
				require.True(t, errors.As(err, &be), "%v", err)
				require.Equal(t, tt.bad, be.Bad)
			}
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
	require.Panics(t, func() { NewStats(p).Add([]float64{1}, 1, 1) })
	require.NoError(t, func() error { _, err := Solve(good(), Options{}); return err }())
}

func TestSSEFromStats(t *testing.T) {
	const p = 16
	rng := rand.New(rand.NewPCG(19, 20))
	scale := awkwardScales(p)
	beta := make([]float64, p)
	for j := range beta {
		beta[j] = rng.NormFloat64() / scale[j]
	}
	d := randomRows(rng, 500, p, scale, beta, 0.2, true, false)
	s := d.stats(p)
	fit, err := Solve(s, Options{Lambda: 1e-2 * s.SumW(), Unpenalized: biasOnly(p)})
	require.NoError(t, err)
	other := make([]float64, p)
	for j := range other {
		other[j] = beta[j] * (1 + 0.1*rng.NormFloat64())
	}
	tests := []struct {
		name string
		coef []float64
	}{
		{"fitted", fit.Coef},
		{"truth", beta},
		{"perturbed", other},
		{"zero", make([]float64, p)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireRel(t, d.sse(tt.coef), SSE(s, tt.coef), 1e-9)
		})
	}
	// An exact fit clamps at 0 rather than going negative.
	exact := randomRows(rng, 50, 3, ones(3), []float64{1, 2, 3}, 0, true, false).stats(3)
	require.GreaterOrEqual(t, SSE(exact, []float64{1, 2, 3}), 0.0)
	require.Less(t, SSE(exact, []float64{1, 2, 3}), 1e-14*exact.YTWY())
}

// foldRows splits d into k folds by row index.
func foldRows(d *rows, k int) []*rows {
	out := make([]*rows, k)
	for f := range out {
		out[f] = &rows{}
	}
	for i := range d.x {
		out[i%k].add(d.x[i], d.y[i], d.w[i])
	}
	return out
}

func TestCrossValidate(t *testing.T) {
	const (
		p = 16
		k = 5
	)
	t.Run("matches brute force", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		scale := awkwardScales(p)
		beta := make([]float64, p)
		for j := range beta {
			beta[j] = rng.NormFloat64() / scale[j]
		}
		d := randomRows(rng, 400, p, scale, beta, 2, true, false)
		parts := foldRows(d, k)
		folds := make([]*Stats, k)
		for f, part := range parts {
			folds[f] = part.stats(p)
		}
		lambdas := []float64{0, 1e-4, 1e-2, 1, 1e2, 1e4}
		res, err := CrossValidate(folds, lambdas, biasOnly(p))
		require.NoError(t, err)
		require.Equal(t, lambdas, res.Lambdas)
		require.Len(t, res.MSE, len(lambdas))

		// Brute force: train from rows, score on rows.
		var totalW float64
		for _, w := range d.w {
			totalW += w
		}
		want := make([]float64, len(lambdas))
		for i, l := range lambdas {
			for f := range parts {
				train := &rows{}
				for o, part := range parts {
					if o != f {
						for r := range part.x {
							train.add(part.x[r], part.y[r], part.w[r])
						}
					}
				}
				fit, err := Solve(train.stats(p), Options{Lambda: l, Unpenalized: biasOnly(p)})
				require.NoError(t, err)
				want[i] += parts[f].sse(fit.Coef)
			}
			want[i] /= totalW
			requireRel(t, want[i], res.MSE[i], 1e-8, "lambda %g", l)
		}
		best := 0
		for i := range want {
			if want[i] < want[best] {
				best = i
			}
		}
		require.Equal(t, best, res.Best)
		require.Equal(t, lambdas[best], res.BestLambda)
	})
	t.Run("pure noise picks the largest lambda", func(t *testing.T) {
		for seed := uint64(0); seed < 5; seed++ {
			rng := rand.New(rand.NewPCG(23, seed))
			beta := make([]float64, p)
			beta[p-1] = 3 // only the bias matters
			d := randomRows(rng, 80, p, ones(p), beta, 1, true, false)
			parts := foldRows(d, k)
			folds := make([]*Stats, k)
			var sumW float64
			for f, part := range parts {
				folds[f] = part.stats(p)
				sumW += folds[f].SumW()
			}
			// λ is measured against Σw: 1e3·Σw leaves only the bias.
			lambdas := []float64{1e-3 * sumW, 0, 1e3 * sumW, 1e-1 * sumW, 1e-6 * sumW} // unsorted
			res, err := CrossValidate(folds, lambdas, biasOnly(p))
			require.NoError(t, err)
			require.Equal(t, 2, res.Best, "seed %d: MSE %v", seed, res.MSE)
			require.Equal(t, lambdas[2], res.BestLambda)
		}
	})
	t.Run("ties go to the larger lambda", func(t *testing.T) {
		// Only the bias column carries data: every λ gives the same model.
		folds := make([]*Stats, 3)
		for f := range folds {
			folds[f] = NewStats(2)
			for i := 0; i < 10; i++ {
				folds[f].Add([]float64{0, 1}, float64(i+f), 1)
			}
		}
		res, err := CrossValidate(folds, []float64{1, 10, 0, 5}, []bool{false, true})
		require.NoError(t, err)
		require.Equal(t, 1, res.Best)
	})
	t.Run("errors", func(t *testing.T) {
		one := NewStats(2)
		one.Add([]float64{1, 1}, 1, 1)
		_, err := CrossValidate([]*Stats{one}, []float64{1}, nil)
		require.Error(t, err)
		_, err = CrossValidate([]*Stats{one, one}, nil, nil)
		require.Error(t, err)
		_, err = CrossValidate([]*Stats{one, one}, []float64{-1}, nil)
		require.Error(t, err)
		_, err = CrossValidate([]*Stats{one, NewStats(3)}, []float64{1}, nil)
		require.ErrorIs(t, err, ErrShape)
		badFold := one.Clone()
		badFold.Add([]float64{math.NaN(), 1}, 1, 1)
		_, err = CrossValidate([]*Stats{one, badFold}, []float64{1}, nil)
		var be *BadRowsError
		require.ErrorAs(t, err, &be)
		// An empty fold cannot be trained on without the others.
		_, err = CrossValidate([]*Stats{one, NewStats(2)}, []float64{1}, nil)
		require.ErrorIs(t, err, ErrNoData)
	})
}

func TestAddDoesNotAllocate(t *testing.T) {
	s := NewStats(16)
	x := ones(16)
	allocs := testing.AllocsPerRun(1000, func() { s.Add(x, 1, 1) })
	require.Equal(t, 0.0, allocs)
}

func benchRows(p, n int) [][]float64 {
	rng := rand.New(rand.NewPCG(25, 26))
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = make([]float64, p)
		for j := range xs[i] {
			xs[i][j] = rng.Float64()
		}
	}
	return xs
}

func BenchmarkAdd(b *testing.B) {
	const p = 16
	xs := benchRows(p, 1024)
	s := NewStats(p)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(xs[i&1023], 0.5, 1.5)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/row")
}

func BenchmarkSolve(b *testing.B) {
	const p = 16
	xs := benchRows(p, 4096)
	s := NewStats(p)
	for i, x := range xs {
		x[p-1] = 1
		s.Add(x, float64(i%7), 1)
	}
	opt := Options{Lambda: 1e-3 * s.SumW(), Unpenalized: biasOnly(p)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Solve(s, opt); err != nil {
			b.Fatal(err)
		}
	}
}
