package ridge

import (
	"errors"
	"fmt"
	"math"
)

// CVResult is the outcome of CrossValidate.
type CVResult struct {
	Lambdas []float64 // the grid, as given
	// MSE[i] is the validation SSE of Lambdas[i] summed over folds, divided
	// by the total Σw of the validation rows: a weighted mean squared error.
	MSE        []float64
	Best       int     // index of the best λ
	BestLambda float64 // Lambdas[Best]
}

// cvTieRel is the relative difference below which two validation MSEs are a
// tie (and the larger λ wins): SSE from statistics carries rounding of about
// ε·y'Wy, so exact equality is not a meaningful test.
const cvTieRel = 1e-12

// CrossValidate scores each λ in lambdas by K-fold cross-validation from
// statistics alone. folds[k] are the statistics of fold k (K ≥ 2). For each λ
// and fold k it trains on all folds but k, scores the weighted SSE on fold k,
// and sums over folds; MSE is that sum over the total Σw of all folds. The
// best λ has the smallest MSE; ties (within a relative 1e-12) go to the
// larger λ, the simpler model.
//
// The training statistics are the sum of the other folds, accumulated
// directly rather than as total − fold, so that no cancellation occurs.
func CrossValidate(folds []*Stats, lambdas []float64, unpenalized []bool) (*CVResult, error) {
	if len(folds) < 2 {
		return nil, fmt.Errorf("ridge: cross-validation needs at least 2 folds, got %d", len(folds))
	}
	if len(lambdas) == 0 {
		return nil, errors.New("ridge: empty lambda grid")
	}
	for i, l := range lambdas {
		if math.IsNaN(l) || math.IsInf(l, 0) || l < 0 {
			return nil, fmt.Errorf("ridge: lambdas[%d] = %v: must be finite and ≥ 0", i, l)
		}
	}
	if folds[0] == nil {
		return nil, errors.New("ridge: fold 0 is nil")
	}
	p := folds[0].p
	var totalW float64
	flushed := make([]*Stats, len(folds))
	for k, f := range folds {
		if f == nil {
			return nil, fmt.Errorf("ridge: fold %d is nil", k)
		}
		f = f.flushed()
		flushed[k] = f
		if f.p != p {
			return nil, fmt.Errorf("%w: fold %d has %d features, fold 0 has %d", ErrShape, k, f.p, p)
		}
		if f.bad != 0 {
			return nil, fmt.Errorf("ridge: fold %d: %w", k, &BadRowsError{Bad: f.bad, N: f.n})
		}
		if !f.finite() {
			return nil, fmt.Errorf("ridge: fold %d: the statistics overflowed", k)
		}
		totalW += f.sumW
	}
	if !(totalW > 0) {
		return nil, fmt.Errorf("%w: total validation Σw = %g", ErrNoData, totalW)
	}

	res := &CVResult{
		Lambdas: append([]float64(nil), lambdas...),
		MSE:     make([]float64, len(lambdas)),
	}
	train := NewStats(p)
	for k, f := range flushed {
		train.Reset()
		for o, g := range flushed {
			if o != k {
				if err := train.AddStats(g); err != nil {
					return nil, err
				}
			}
		}
		for i, l := range lambdas {
			fit, err := Solve(train, Options{Lambda: l, Unpenalized: unpenalized})
			if err != nil {
				return nil, fmt.Errorf("ridge: fold %d, lambda %g: %w", k, l, err)
			}
			res.MSE[i] += SSE(f, fit.Coef)
		}
	}
	for i := range res.MSE {
		res.MSE[i] /= totalW
	}
	best := 0
	for i := 1; i < len(lambdas); i++ {
		a, b := res.MSE[i], res.MSE[best]
		tie := math.Abs(a-b) <= cvTieRel*math.Max(math.Abs(a), math.Abs(b))
		if (!tie && a < b) || (tie && lambdas[i] > lambdas[best]) {
			best = i
		}
	}
	res.Best = best
	res.BestLambda = lambdas[best]
	return res, nil
}
