package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestToUs: rounding to µs saturates instead of wrapping (1e19 µs
// converted to MinInt64 and was clamped to 1 µs).
func TestToUs(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want int64
	}{
		{2.5, 3}, {-0.4, 0}, {-2.5, -3}, {1e12, 1e12},
		{1e19, math.MaxInt64}, {math.Inf(1), math.MaxInt64}, {math.NaN(), math.MaxInt64},
		{-1e19, math.MinInt64}, {math.Inf(-1), math.MinInt64},
	} {
		require.Equal(t, tc.want, ToUs(tc.v), "%v", tc.v)
	}
}

// shapeModel's step time depends on the batch: out for a step with
// exactly two decodes, 1000 µs otherwise (CheckLatency's probes never
// schedule exactly two decodes in this configuration).
type shapeModel struct {
	constModel
	out int64
}

func (m shapeModel) StepTimeUs(b *Batch) int64 {
	if b.Beta.NumDecodeReqs == 2 && b.Beta.NumPrefillReqs == 0 {
		return m.out
	}
	return 1000
}

// TestStepTimeClampsAreCounted: a step time below 1 µs or above
// MaxDurationUs is clamped and counted in the result, never silently.
func TestStepTimeClampsAreCounted(t *testing.T) {
	for _, tc := range []struct {
		out       int64
		low, high int64
	}{
		{-7, 1, 0}, {0, 1, 0}, {math.MinInt64, 1, 0},
		{MaxDurationUs + 1, 0, 1}, {math.MaxInt64, 0, 1},
		{1, 0, 0}, {MaxDurationUs, 0, 0},
	} {
		cfg := baseConfig()
		cfg.Latency = shapeModel{constModel: constModel{arrive: 100, depart: 50}, out: tc.out}
		// Two requests that arrive together: one prefill step (1000 µs),
		// then one step of exactly two decodes, then they finish.
		res := run(t, cfg, specs([3]int64{0, 10, 2}, [3]int64{0, 10, 2}))
		if tc.low == 0 && tc.high == 0 {
			require.Nil(t, res.StepTimesClamped, "%d", tc.out)
			continue
		}
		require.Equal(t, &Clamped{ToOneUs: tc.low, ToMaxDuration: tc.high}, res.StepTimesClamped, "%d", tc.out)
	}
}

// TestCheckLatencyRefusesOutOfRangeModels:
// coefficients whose step times or overheads are beyond MaxDurationUs on
// the configuration are an error at setup, not an overflow or an
// invariant failure later. The noise wrapper is probed through and draws
// nothing.
func TestCheckLatencyRefusesOutOfRangeModels(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    LatencyModel
		want string
	}{
		{"valid", &Blackbox{Alpha: [3]float64{100, 1, 2}, Beta: [3]float64{1000, 10, 5}}, ""},
		{"step base 1e19", &Blackbox{Beta: [3]float64{1e19, 0, 0}}, "a one-token decode step takes more than"},
		{"per prefill token", &Blackbox{Beta: [3]float64{1000, 1e10, 0}}, "a prefill step of 512 tokens"},
		{"arrival 1e19", &Blackbox{Alpha: [3]float64{1e19, 0, 0}, Beta: [3]float64{1000, 0, 0}}, "arrival overhead"},
		{"departure 1e30", &Blackbox{Alpha: [3]float64{0, 0, 1e30}, Beta: [3]float64{1000, 0, 0}}, "departure overhead"},
		{"noisy", NewNoisy(&Blackbox{Beta: [3]float64{1e19, 0, 0}}, 0.1, nil), "a one-token decode step"},
		{"NaN", constModel{step: math.MaxInt64}, "non-finite"},
	} {
		cfg := baseConfig()
		cfg.Latency = tc.m
		_, err := New(cfg, specs([3]int64{0, 10, 2}))
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	// The noisy model's stream is untouched by the check.
	rng := rand.New(rand.NewPCG(1, 2))
	probe := rand.New(rand.NewPCG(1, 2))
	cfg := baseConfig()
	cfg.Latency = NewNoisy(constModel{step: 1000}, 0.1, rng)
	require.NoError(t, CheckLatency(cfg.Latency, &cfg.Engine))
	require.Equal(t, probe.Uint64(), rng.Uint64())
}

// TestTimeLimits: arrivals beyond MaxTimeUs are input
// errors, and a clock driven past it stops with a *LimitError, not an
// invariant failure.
func TestTimeLimits(t *testing.T) {
	cfg := baseConfig()
	_, err := New(cfg, specs([3]int64{math.MaxInt64, 10, 2}))
	require.ErrorContains(t, err, "beyond the simulator's")

	cfg.Latency = constModel{step: MaxDurationUs, arrive: 0, depart: 0}
	s, err := New(cfg, specs([3]int64{MaxTimeUs - 10, 10, 2}))
	require.NoError(t, err)
	_, err = s.Run()
	var le *LimitError
	require.True(t, errors.As(err, &le), "%v", err)
	var ie *InvariantError
	require.False(t, errors.As(err, &ie))
	require.Contains(t, err.Error(), "past 2305843009213693952 µs")
}
