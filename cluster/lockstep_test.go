package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// tokenLatency is a step of base µs plus perToken µs per scheduled token,
// so that a long prefill and a short one differ by hand-computable times.
type tokenLatency struct{ base, perToken int64 }

func (m tokenLatency) Name() string { return "token" }
func (m tokenLatency) StepTimeUs(b *sim.Batch) int64 {
	return m.base + m.perToken*b.Beta.ScheduledTokens
}
func (m tokenLatency) ArrivalOverheadUs(int64) int64   { return 100 }
func (m tokenLatency) DepartureOverheadUs(int64) int64 { return 50 }
func (m tokenLatency) PreemptionGamma() float64        { return sim.DefaultPreemptionGamma }

// CloneLatency: tokenLatency has no state, so a clone shares it.
func (m tokenLatency) CloneLatency() (sim.LatencyModel, error) { return m, nil }

// lockstepRig is two instances of a 1,000 µs + 10 µs per token step,
// routed round-robin, in one data-parallel group named group ("" for
// none).
func lockstepRig(group string) *Config {
	cfg := &Config{RecordRequests: true}
	for i := range 2 {
		cfg.Instances = append(cfg.Instances, Instance{ID: InstanceID(i, 2), Pool: "dp", Lockstep: group, Config: sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 4096, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: 1000, PrefixCachingEnabled: true}},
			Latency: tokenLatency{base: 1000, perToken: 10},
			Options: sim.Options{Exhaustive: true},
		}})
	}
	return cfg
}

// TestLockstepByHand: a 1,000-token prompt on instance 0 and a 10-token
// one on instance 1, both queued at 100 µs. Alone, instance 1's prefill
// takes 1,100 µs (first token at 1,200) and its two decode steps 1,010 µs
// each (gone at 3,270). In lockstep its prefill waits for instance 0's,
// 11,000 µs (first token at 11,100, 9,900 µs of waiting); the next step is
// both engines' decode (1,010 µs, to 12,110: request 0's last token);
// then instance 0, idle, runs a dummy batch of one token (1,010 µs) beside
// request 1's last decode, which ends at 13,120 (gone at 13,170).
func TestLockstepByHand(t *testing.T) {
	reqs := []sim.RequestSpec{{ID: 0, PromptTokens: 1000, OutputTokens: 2}, {ID: 1, PromptTokens: 10, OutputTokens: 3}}
	alone := runPD(t, lockstepRig(""), reqs)
	require.Equal(t, int64(1_200), byRequest(alone)[1].TTFT)
	require.Equal(t, int64(3_270), byRequest(alone)[1].E2E)
	require.Nil(t, alone.Instances[0].Metrics.Lockstep)

	res := runPD(t, lockstepRig("dp"), reqs)
	byID := byRequest(res)
	require.Equal(t, int64(11_100), byID[0].TTFT)
	require.Equal(t, int64(12_160), byID[0].E2E)
	require.Equal(t, int64(11_100), byID[1].TTFT)
	require.Equal(t, int64(13_170), byID[1].E2E)
	require.Equal(t, &sim.LockstepResult{WaitMs: 0, DummySteps: 1}, res.Instances[0].Metrics.Lockstep)
	require.Equal(t, &sim.LockstepResult{WaitMs: 9.9, DummySteps: 0}, res.Instances[1].Metrics.Lockstep)
	require.Equal(t, int64(3), res.Instances[1].Metrics.Steps)
	require.Equal(t, int64(2), res.Instances[0].Metrics.Steps, "a dummy batch is not a step of the engine's own")
}

// TestLockstepArrivalWaitsForTheGroup: a request that reaches an idle
// member while the other member's long step runs joins at that step's end,
// not at once; with the group idle it starts a step at once, and the idle
// member runs a dummy batch beside it.
func TestLockstepArrivalWaitsForTheGroup(t *testing.T) {
	reqs := []sim.RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 2000, OutputTokens: 1},     // instance 0: 100 → 21,100
		{ID: 1, ArrivalUs: 5_000, PromptTokens: 10, OutputTokens: 1},   // instance 1: queued 5,100, waits to 21,100
		{ID: 2, ArrivalUs: 100_000, PromptTokens: 10, OutputTokens: 1}, // instance 0, group idle: 100,100 → 101,200
	}
	res := runPD(t, lockstepRig("dp"), reqs)
	byID := byRequest(res)
	require.Equal(t, int64(21_100), byID[0].TTFT)
	require.Equal(t, int64(21_100+1_100-5_000), byID[1].TTFT, "queued at the group's step end, then its own prefill")
	require.Equal(t, int64(1_200), byID[2].TTFT)
	require.Equal(t, int64(2), res.Instances[1].Metrics.Lockstep.DummySteps, "beside requests 0 and 2")
	require.Equal(t, int64(1), res.Instances[0].Metrics.Lockstep.DummySteps, "beside request 1")
	require.Zero(t, res.Instances[0].Metrics.Lockstep.WaitMs+res.Instances[1].Metrics.Lockstep.WaitMs,
		"every real batch here is its group's longest: only dummy batches wait")
}

func byRequest(res *Result) map[int64]RequestRecord {
	m := map[int64]RequestRecord{}
	for _, r := range res.PerRequest {
		m[r.ID] = r
	}
	return m
}

// TestLockstepCounterfactual: a sampled decision's clones of lockstep
// members step alone (the group's other members are not cloned), but a
// step already committed stays: request 1, routed at 5,000 µs to instance
// 1 while it runs a dummy batch beside instance 0's 2,000-token prefill
// (to 21,100), is queued in its clone after that batch and prefilled in
// 1,100 µs, a TTFT of 17.2 ms, as in the run; request 0's clone is the
// run's 21.1 ms. Sampling leaves the run unchanged.
func TestLockstepCounterfactual(t *testing.T) {
	reqs := []sim.RequestSpec{
		{ID: 0, PromptTokens: 2000, OutputTokens: 1},
		{ID: 1, ArrivalUs: 5_000, PromptTokens: 10, OutputTokens: 1},
	}
	plain := runPD(t, lockstepRig("dp"), reqs)
	cfg := lockstepRig("dp")
	cfg.CounterfactualK = 1
	cfg.Counterfactual = &Counterfactual{EveryN: 1}
	res := runPD(t, cfg, reqs)
	require.Equal(t, byRequest(plain), byRequest(res))
	cf := res.Counterfactual
	require.NotNil(t, cf)
	require.Equal(t, int64(2), cf.Sampled)
	require.Equal(t, int64(2), cf.Resolved)
	require.Equal(t, 17.2, cf.ChosenTTFT.Min)
	require.Equal(t, 21.1, cf.ChosenTTFT.Max)
	require.Equal(t, byRequest(res)[1].TTFT, int64(17_200))
}
