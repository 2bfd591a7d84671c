package validate

import (
	"errors"
	"math"
)

// ErrNothingToCompare is Search.Run's error when the start's loss is not
// finite: no metric has a measured and a simulated mean above 0 to
// compare (Objective's +Inf), so every probe ties and the "fit" would be
// the start, reported with an infinite loss.
var ErrNothingToCompare = errors.New("no metric (TTFT, ITL, E2E) has a measured mean above 0 to fit against")

// Param is one parameter a calibration searches, within [Lo, Hi] (Lo > 0
// when Log: the search runs on its logarithm).
type Param struct {
	Name   string
	Lo, Hi float64
	Log    bool
}

// Objective is the calibration's loss of a report: the sum over the
// metrics of the squared log ratio of the simulated to the measured mean,
// so that 10 % too slow and 10 % too fast weigh alike, and TTFT, ITL and
// E2E alike whatever their scale. Metrics without a comparison (NaN) are
// left out; +Inf when none is left.
func Objective(r Report) float64 {
	var s float64
	n := 0
	for _, m := range r.Metrics {
		if math.IsNaN(m.ErrMean) || !(m.Measured.Mean > 0) || !(m.Simulated.Mean > 0) {
			continue
		}
		d := math.Log(m.Simulated.Mean / m.Measured.Mean)
		s += d * d
		n++
	}
	if n == 0 {
		return math.Inf(1)
	}
	return s
}

// Search is the calibration's search: Rounds rounds of coordinate descent,
// each parameter in turn minimized by golden-section search with Evals
// evaluations over its whole range, the others held. It is deterministic:
// the points evaluated depend only on the ranges, the start and the
// losses. eval returns the loss of a parameter vector (an error stops the
// search).
type Search struct {
	Params []Param
	Rounds int
	Evals  int
}

// Result is a search's outcome: the best parameters, their loss, the
// start's loss, and the number of evaluations.
type Result struct {
	Best       []float64
	Loss       float64
	StartLoss  float64
	Evaluation int
}

// Run minimizes eval from start (len(Params) values within their ranges).
func (s Search) Run(start []float64, eval func([]float64) (float64, error)) (Result, error) {
	x := append([]float64(nil), start...)
	res := Result{}
	loss, err := eval(x)
	if err != nil {
		return res, err
	}
	res.Evaluation++
	res.StartLoss = loss
	if math.IsInf(loss, 0) || math.IsNaN(loss) {
		return res, ErrNothingToCompare
	}
	const invPhi = 0.6180339887498949
	for round := 0; round < s.Rounds; round++ {
		for i, p := range s.Params {
			to := func(u float64) float64 {
				if p.Log {
					return math.Exp(u)
				}
				return u
			}
			lo, hi := p.Lo, p.Hi
			if p.Log {
				lo, hi = math.Log(lo), math.Log(hi)
			}
			f := func(u float64) (float64, error) {
				y := append([]float64(nil), x...)
				y[i] = to(u)
				res.Evaluation++
				return eval(y)
			}
			a, b := lo, hi
			c, d := b-invPhi*(b-a), a+invPhi*(b-a)
			fc, err := f(c)
			if err != nil {
				return res, err
			}
			fd, err := f(d)
			if err != nil {
				return res, err
			}
			for k := 2; k < s.Evals; k++ {
				if fc <= fd {
					b, d, fd = d, c, fc
					c = b - invPhi*(b-a)
					if fc, err = f(c); err != nil {
						return res, err
					}
				} else {
					a, c, fc = c, d, fd
					d = a + invPhi*(b-a)
					if fd, err = f(d); err != nil {
						return res, err
					}
				}
			}
			// Keep the current value unless a probe beat it.
			if fc < loss && fc <= fd {
				x[i], loss = to(c), fc
			} else if fd < loss {
				x[i], loss = to(d), fd
			}
		}
	}
	res.Best, res.Loss = x, loss
	return res, nil
}
