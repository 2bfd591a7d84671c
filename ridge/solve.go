package ridge

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Methods reported in Fit.Method.
const (
	// MethodCholesky: the scaled penalized system was positive definite and
	// well conditioned; solved by Cholesky.
	MethodCholesky = "cholesky"
	// MethodSVD: Cholesky failed or the system was too ill conditioned;
	// minimum-norm solution from a rank-truncated SVD of the scaled system.
	MethodSVD = "svd"
	// MethodNone: every column was dropped; all coefficients are 0.
	MethodNone = "none"
)

const (
	// MaxCholeskyCond is the largest condition-number estimate of the scaled
	// penalized system that Solve accepts from Cholesky before it falls back
	// to the SVD.
	MaxCholeskyCond = 1e12
	// SVDRcond is the relative singular-value threshold of the SVD fallback:
	// directions with σ ≤ SVDRcond·σ_max are treated as absent.
	SVDRcond = 1e-12
)

var (
	// ErrShape reports mismatched dimensions.
	ErrShape = errors.New("ridge: dimension mismatch")
	// ErrNoData reports statistics without usable rows (p == 0, no rows, Σw ≤ 0).
	ErrNoData = errors.New("ridge: no data")
)

// BadRowsError is returned by Solve when the statistics include rows that Add
// rejected.
type BadRowsError struct {
	Bad int64 // number of rejected rows
	N   int64 // number of accepted rows
}

func (e *BadRowsError) Error() string {
	return fmt.Sprintf("ridge: %d of %d rows had a non-finite x, y or w, or w < 0", e.Bad, e.Bad+e.N)
}

// Options configure Solve.
type Options struct {
	// Lambda ≥ 0 is the penalty weight: Solve minimizes
	// Σ w (y − x·β)² + Lambda·Σ_j (s_j β_j)² over penalized columns j.
	Lambda float64
	// Unpenalized[j] = true for bias columns (a constant feature): not
	// shrunk. Either empty (every column penalized) or of length p.
	Unpenalized []bool
}

// Fit is a solved model.
type Fit struct {
	Coef []float64
	// Dropped[j] is true for a column that carries no information (all
	// zeros in this data): its coefficient is 0 and it is left out of the
	// solve.
	Dropped []bool
	// Scale[j] = s_j = sqrt(X'WX_jj / Σw), the weighted RMS of column j,
	// used in the penalty of penalized columns and to equilibrate the system
	// for every kept column; 0 for dropped columns.
	Scale []float64
	// Method is MethodCholesky, MethodSVD or MethodNone.
	Method string
	// Cond estimates the condition number of the scaled penalized system:
	// Cholesky's 1-norm estimate, or σ_max/σ_rank over the directions the
	// SVD kept.
	Cond float64
	// Rank is the number of directions solved for: the number of kept
	// columns for Cholesky, the numerical rank for the SVD.
	Rank int
	// Lambda is the penalty the model was solved with.
	Lambda float64
}

// Predict returns Coef · x. It panics if len(x) != len(Coef).
func (f *Fit) Predict(x []float64) float64 {
	if len(x) != len(f.Coef) {
		panic(fmt.Sprintf("ridge: Predict: len(x) = %d, want %d", len(x), len(f.Coef)))
	}
	var sum float64
	for j, c := range f.Coef {
		sum += c * x[j]
	}
	return sum
}

// Solve fits the weighted Ridge model summarized by s. See the package
// documentation for the penalty, the scaling and the fallback.
func Solve(s *Stats, opt Options) (*Fit, error) {
	if s == nil {
		return nil, errors.New("ridge: nil Stats")
	}
	s = s.flushed()
	if err := checkSolvable(s); err != nil {
		return nil, err
	}
	lambda := opt.Lambda
	if math.IsNaN(lambda) || math.IsInf(lambda, 0) || lambda < 0 {
		return nil, fmt.Errorf("ridge: lambda must be finite and ≥ 0, got %v", lambda)
	}
	p := s.p
	if len(opt.Unpenalized) != 0 && len(opt.Unpenalized) != p {
		return nil, fmt.Errorf("%w: len(Unpenalized) = %d, want 0 or %d", ErrShape, len(opt.Unpenalized), p)
	}
	unpen := func(j int) bool { return len(opt.Unpenalized) != 0 && opt.Unpenalized[j] }

	fit := &Fit{
		Coef:    make([]float64, p),
		Dropped: make([]bool, p),
		Scale:   make([]float64, p),
		Lambda:  lambda,
	}
	kept := make([]int, 0, p)
	for j := 0; j < p; j++ {
		d := s.xtwx[j*p+j]
		if d <= 0 { // an all-zero column (or one whose weight is all 0)
			fit.Dropped[j] = true
			continue
		}
		sj := math.Sqrt(d / s.sumW)
		if sj == 0 || math.IsInf(sj, 0) {
			// Σw is so large relative to X'WX_jj that s_j underflows (or
			// the reverse): the column cannot be equilibrated.
			return nil, fmt.Errorf("ridge: column %d has an unrepresentable scale (X'WX_jj = %g, Σw = %g)", j, d, s.sumW)
		}
		fit.Scale[j] = sj
		kept = append(kept, j)
	}
	k := len(kept)
	if k == 0 {
		fit.Method = MethodNone
		return fit, nil
	}

	// Equilibrated system M γ = b with M = D A D, b = D X'Wy, β = D γ,
	// A = X'WX + λ·diag(s²) (penalized columns only) and
	// D_a = 1/sqrt(A_aa) = 1/(s_a·sqrt(Σw + λ·[a penalized])): diag(1/s)
	// normalized so that M has a unit diagonal.
	r := make([]float64, k)
	for a, ja := range kept {
		t := s.sumW
		if !unpen(ja) {
			t += lambda
		}
		r[a] = fit.Scale[ja] * math.Sqrt(t)
	}
	m := mat.NewSymDense(k, nil)
	b := mat.NewVecDense(k, nil)
	for a, ja := range kept {
		for c := a; c < k; c++ {
			jc := kept[c]
			v := s.xtwx[ja*p+jc]
			if c == a && !unpen(ja) {
				v += lambda * fit.Scale[ja] * fit.Scale[ja]
			}
			m.SetSym(a, c, v/r[a]/r[c])
		}
		b.SetVec(a, s.xtwy[ja]/r[a])
	}
	if hasNonFinite(r) || hasNonFinite(m.RawSymmetric().Data) || hasNonFinite(b.RawVector().Data) {
		return nil, errors.New("ridge: the penalized system overflowed (lambda too large?)")
	}

	gamma := mat.NewVecDense(k, nil)
	var chol mat.Cholesky
	solved := false
	if chol.Factorize(m) && chol.Cond() <= MaxCholeskyCond {
		// SolveVecTo only reports a Condition error above
		// mat.ConditionTolerance, which the check above already excludes.
		if err := chol.SolveVecTo(gamma, b); err == nil && !hasNonFinite(gamma.RawVector().Data) {
			fit.Method = MethodCholesky
			fit.Cond = chol.Cond()
			fit.Rank = k
			solved = true
		}
	}
	if !solved {
		var svd mat.SVD
		if !svd.Factorize(m, mat.SVDThin) {
			return nil, errors.New("ridge: SVD of the penalized system did not converge")
		}
		rank := svd.Rank(SVDRcond)
		if rank == 0 {
			return nil, errors.New("ridge: the penalized system is numerically zero")
		}
		svd.SolveVecTo(gamma, b, rank)
		sv := svd.Values(nil)
		fit.Method = MethodSVD
		fit.Cond = sv[0] / sv[rank-1]
		fit.Rank = rank
	}
	for a, ja := range kept {
		fit.Coef[ja] = gamma.AtVec(a) / r[a]
	}
	if hasNonFinite(fit.Coef) {
		return nil, fmt.Errorf("ridge: %s solve produced non-finite coefficients", fit.Method)
	}
	return fit, nil
}

// checkSolvable returns an error for flushed statistics that no model can be
// fitted to.
func checkSolvable(s *Stats) error {
	switch {
	case s.p == 0:
		return fmt.Errorf("%w: zero features", ErrNoData)
	case s.bad > 0:
		return &BadRowsError{Bad: s.bad, N: s.n}
	case s.bad < 0 || s.n < 0:
		return fmt.Errorf("ridge: inconsistent statistics (rows %d, bad rows %d): a shard was subtracted that was never added", s.n, s.bad)
	case s.n == 0:
		return fmt.Errorf("%w: no rows", ErrNoData)
	case !s.finite():
		return errors.New("ridge: the statistics overflowed (features or responses too large)")
	case !(s.sumW > 0):
		return fmt.Errorf("%w: Σw = %g", ErrNoData, s.sumW)
	}
	return nil
}

func hasNonFinite(v []float64) bool {
	chk := 0.0
	for _, x := range v {
		chk += x - x
	}
	return chk != 0
}

// SSE returns the weighted sum of squared errors of coef on the rows
// summarized by s, from the statistics alone:
// y'Wy − 2 β'X'Wy + β'X'WXβ, clamped at ≥ 0 against rounding. Its absolute
// rounding error is about ε·y'Wy, so it resolves errors down to roughly 1e-13
// of the mean square response. It panics if len(coef) != P().
func SSE(s *Stats, coef []float64) float64 {
	p := s.p
	if len(coef) != p {
		panic(fmt.Sprintf("ridge: SSE: len(coef) = %d, want %d", len(coef), p))
	}
	var lin, quad float64
	for i, bi := range coef {
		lin += bi * s.xtwy[i]
		row := s.xtwx[i*p : i*p+p]
		// Diagonal once, strict upper triangle twice.
		var off float64
		for j := i + 1; j < p; j++ {
			off += row[j] * coef[j]
		}
		quad += bi * (row[i]*bi + 2*off)
	}
	sse := s.ytwy - 2*lin + quad
	// Buffered rows, row by row.
	for r := 0; r < s.pend; r++ {
		res := s.py[r]
		for j, c := range coef {
			res -= c * s.px[j*rankK+r]
		}
		sse += s.pw[r] * res * res
	}
	if sse < 0 {
		return 0
	}
	return sse
}
