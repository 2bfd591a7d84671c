package simtest

import (
	"testing"

	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/stretchr/testify/require"
)

func config() sim.Config {
	return sim.Config{
		Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{
			MaxNumSeqs: 8, MaxBatchedTokens: 256, ChunkedPrefillEnabled: true,
			BlockSizeTokens: 16, TotalKVBlocksGPU: 60, PrefixCachingEnabled: true,
		}},
		Latency: &sim.Blackbox{Alpha: [3]float64{1000, 0.1, 2}, Beta: [3]float64{5000, 20, 100}},
		Options: sim.Options{RecordRequests: true},
	}
}

func requests(n int, gapUs int64, id0 int64) []sim.RequestSpec {
	reqs := make([]sim.RequestSpec, n)
	for i := range reqs {
		// Some arrivals land on a step boundary (gap a multiple of 1000).
		reqs[i] = sim.RequestSpec{ID: id0 + int64(i), ArrivalUs: int64(i) * gapUs, PromptTokens: int64(40 + 37*(i%5)), OutputTokens: int64(3 + i%7)}
	}
	return reqs
}

// Each engine driven by Interleave ends exactly as it does alone under
// sim.Run: the engines share nothing but the clock.
func TestInterleaveMatchesRun(t *testing.T) {
	reqs := [][]sim.RequestSpec{requests(40, 3000, 0), requests(25, 7000, 100), requests(0, 0, 0)}
	engines := make([]*sim.Engine, len(reqs))
	for k := range engines {
		var err error
		engines[k], err = sim.NewEngine(config())
		require.NoError(t, err)
	}
	require.NoError(t, Interleave(engines, reqs))
	for k, e := range engines {
		got, err := e.Finish()
		require.NoError(t, err)
		s, err := sim.New(config(), reqs[k])
		require.NoError(t, err)
		want, err := s.Run()
		require.NoError(t, err)
		require.Equal(t, want, got, "engine %d", k)
		require.Equal(t, int64(len(reqs[k])), got.Requests.Offered)
	}
}

func TestInterleaveReportsInjectErrors(t *testing.T) {
	e, err := sim.NewEngine(config())
	require.NoError(t, err)
	bad := []sim.RequestSpec{{ID: 1, ArrivalUs: 0, PromptTokens: 0, OutputTokens: 1}}
	require.Error(t, Interleave([]*sim.Engine{e}, [][]sim.RequestSpec{bad}))
}
