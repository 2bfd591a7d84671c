package sim

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// constModel is a latency model whose step time is fixed, so that tests can
// compute every timestamp by hand.
type constModel struct {
	step, arrive, depart int64
}

func (m constModel) Name() string                    { return "const" }
func (m constModel) StepTimeUs(*Batch) int64         { return m.step }
func (m constModel) ArrivalOverheadUs(int64) int64   { return m.arrive }
func (m constModel) DepartureOverheadUs(int64) int64 { return m.depart }
func (m constModel) PreemptionGamma() float64        { return DefaultPreemptionGamma }

func baseConfig() Config {
	return Config{
		Engine: EngineConfig{VLLMKnobs: physics.VLLMKnobs{
			MaxNumSeqs:            8,
			MaxBatchedTokens:      512,
			ChunkedPrefillEnabled: true,
			BlockSizeTokens:       16,
			TotalKVBlocksGPU:      1000,
			PrefixCachingEnabled:  true,
		}},
		Latency: constModel{step: 1000, arrive: 100, depart: 50},
		Options: Options{Exhaustive: true},
	}
}

func specs(rows ...[3]int64) []RequestSpec {
	out := make([]RequestSpec, len(rows))
	for i, r := range rows {
		out[i] = RequestSpec{ID: int64(i), ArrivalUs: r[0], PromptTokens: r[1], OutputTokens: r[2]}
	}
	return out
}

func run(t *testing.T, cfg Config, reqs []RequestSpec) *Result {
	t.Helper()
	s, err := New(cfg, reqs)
	require.NoError(t, err)
	res, err := s.Run()
	require.NoError(t, err)
	return res
}

func TestSingleRequestByHand(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.RecordRequests = true
	// Prompt 100 fits one step; 3 output tokens: the prefill step samples the
	// first, two decode steps the rest.
	res := run(t, cfg, specs([3]int64{0, 100, 3}))
	rec := res.PerRequest[0]
	require.Equal(t, int64(100), rec.SchedulingDelay) // queued at 100, scheduled at once
	require.Equal(t, int64(1100), rec.TTFT)           // first step ends at 1100
	require.Equal(t, int64(3100+50), rec.E2E)         // two more steps, then departure overhead
	require.Equal(t, int64(3), res.Steps)
	require.Equal(t, 1.0, res.ITL.Mean) // 1 ms between tokens
	require.Equal(t, int64(2), res.ITL.Count)
}

func TestDeterministic(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 60
	var reqs []RequestSpec
	for i := 0; i < 200; i++ {
		reqs = append(reqs, RequestSpec{ID: int64(i), ArrivalUs: int64(i * 700), PromptTokens: int64(50 + i*37%400), OutputTokens: int64(5 + i*13%60)})
	}
	a, _ := json.Marshal(run(t, cfg, reqs))
	b, _ := json.Marshal(run(t, cfg, reqs))
	require.Equal(t, string(a), string(b))
	var res Result
	require.NoError(t, json.Unmarshal(a, &res))
	require.Greater(t, res.Preemptions, int64(0), "the small cache must force preemptions")
	require.Equal(t, int64(200), res.Requests.Completed)
}
