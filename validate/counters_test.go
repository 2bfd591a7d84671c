package validate

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestComparePhases(t *testing.T) {
	// Decode-only ticks: 4 running at 100 tokens/s is a 40 ms step; the
	// simulated side runs 50 ms. A saturated prefill tick: 64 running at
	// 1600 generated tokens/s (40 ms) and 8000 prompt tokens/s.
	meas := []CounterSecond{
		{GenerationPerS: 100, Running: 4},
		{GenerationPerS: 100, Running: 4},
		{GenerationPerS: 50, Running: 4}, // 80 ms: the median stays 40 (lower middle of 40, 40, 80)
		{PromptPerS: 8000, GenerationPerS: 1600, Running: 64, Waiting: 3},
		{PromptPerS: 8000, GenerationPerS: 1600, Running: 64, Waiting: 0}, // no queue: not saturated
		{Running: 5},                 // no token: no step time
		{GenerationPerS: 10},         // nobody running
		{PromptPerS: 10, Running: 2}, // prefill only, no queue
	}
	sim := []CounterSecond{
		{GenerationPerS: 80, Running: 4},
		{PromptPerS: 4000, GenerationPerS: 1000, Running: 64, Waiting: 1},
		{PromptPerS: 4000, GenerationPerS: 1000, Running: 64, Waiting: 1},
	}
	ph := ComparePhases(meas, sim, 1)
	require.Len(t, ph, 6)
	byName := map[string]Phase{}
	for _, p := range ph {
		byName[p.Name+" "+p.Unit] = p
	}
	d := byName["decode only, 1-7 running per engine ms"]
	require.Equal(t, PhaseStat{Ticks: 3, Median: 40}, d.Measured)
	require.Equal(t, PhaseStat{Ticks: 1, Median: 50}, d.Simulated)
	require.InDelta(t, 0.25, d.Err, 1e-12)
	for _, name := range []string{"decode only, 8-31 running per engine ms", "decode only, 32-127 running per engine ms", "decode only, 128+ running per engine ms"} {
		p := byName[name]
		require.Zero(t, p.Measured.Ticks, name)
		require.True(t, math.IsNaN(p.Measured.Median) && math.IsNaN(p.Err), name)
	}
	s := byName["prefilling, requests waiting ms"]
	require.Equal(t, PhaseStat{Ticks: 1, Median: 40}, s.Measured)
	require.Equal(t, PhaseStat{Ticks: 2, Median: 64}, s.Simulated)
	tp := byName["prefilling, requests waiting tokens/s"]
	require.Equal(t, 9600.0, tp.Measured.Median)
	require.Equal(t, 5000.0, tp.Simulated.Median)

	// Two engines: the bands are per engine and throughputs per engine.
	two := ComparePhases([]CounterSecond{{GenerationPerS: 400, Running: 16}, {PromptPerS: 100, GenerationPerS: 100, Running: 10, Waiting: 1}}, nil, 2)
	require.Equal(t, 1, two[1].Measured.Ticks, "16 running over 2 engines is 8 each")
	require.Equal(t, 40.0, two[1].Measured.Median)
	require.Equal(t, 100.0, two[5].Measured.Median)

	var b bytes.Buffer
	require.NoError(t, WritePhases(&b, ph))
	out := b.String()
	require.Contains(t, out, "+25.0%")
	require.Contains(t, out, "n/a")
	require.Equal(t, 1+len(ph), strings.Count(out, "\n"))
	js, err := json.Marshal(ph)
	require.NoError(t, err)
	require.Contains(t, string(js), `"err":null`)
	require.Contains(t, string(js), `"measured":{"ticks":3,"median":40}`)
}
