package validate

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObjective(t *testing.T) {
	r := Report{Metrics: []MetricReport{
		{Measured: Summary{Mean: 100}, Simulated: Summary{Mean: 110}, ErrMean: 0.1},
		{Measured: Summary{Mean: 100}, Simulated: Summary{Mean: 100 / 1.1}, ErrMean: -0.09},
		{Measured: Summary{Mean: 0}, Simulated: Summary{Mean: 5}, ErrMean: math.NaN()},
	}}
	// 10 % slow and 1/1.1 fast weigh the same; the NaN metric is left out.
	l := math.Log(1.1)
	require.InDelta(t, 2*l*l, Objective(r), 1e-15)
	require.True(t, math.IsInf(Objective(Report{}), 1))
}

func TestSearchFindsTheMinimum(t *testing.T) {
	// A separable bowl with its minimum inside the ranges, one parameter on
	// a log scale.
	s := Search{Params: []Param{{Name: "a", Lo: 1, Hi: 10000, Log: true}, {Name: "b", Lo: -5, Hi: 5}}, Rounds: 2, Evals: 40}
	eval := func(x []float64) (float64, error) {
		da := math.Log(x[0] / 300)
		db := x[1] - 1.5
		return da*da + db*db, nil
	}
	res, err := s.Run([]float64{10, 0}, eval)
	require.NoError(t, err)
	require.InDelta(t, 300, res.Best[0], 1)
	require.InDelta(t, 1.5, res.Best[1], 1e-3)
	require.Less(t, res.Loss, res.StartLoss)
	require.Equal(t, 1+2*2*40, res.Evaluation)

	// Deterministic, and never worse than the start.
	again, err := s.Run([]float64{10, 0}, eval)
	require.NoError(t, err)
	require.Equal(t, res, again)
	flat := func([]float64) (float64, error) { return 1, nil }
	kept, err := s.Run([]float64{10, 0}, flat)
	require.NoError(t, err)
	require.Equal(t, []float64{10, 0}, kept.Best)

	boom := errors.New("boom")
	_, err = s.Run([]float64{10, 0}, func([]float64) (float64, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
}

// A start whose loss is not finite (no metric to compare: every measured
// mean 0) stops the search with ErrNothingToCompare after one evaluation,
// never a result with an infinite or NaN loss.
func TestSearchRefusesNothingToCompare(t *testing.T) {
	s := Search{Params: []Param{{Name: "a", Lo: 1, Hi: 10, Log: true}}, Rounds: 2, Evals: 16}
	for _, bad := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		n := 0
		_, err := s.Run([]float64{2}, func([]float64) (float64, error) { n++; return bad, nil })
		require.ErrorIs(t, err, ErrNothingToCompare)
		require.Equal(t, 1, n)
	}
	require.True(t, math.IsInf(Objective(Report{Metrics: []MetricReport{{Measured: Summary{Mean: 0}, Simulated: Summary{Mean: 3}}}}), 1))
}
