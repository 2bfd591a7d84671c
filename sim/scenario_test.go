package sim

import (
	"github.com/blis-sim/blis/internal/loglin"

	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

// recorder is an observer that keeps what the tests look at.
type recorder struct {
	journeys []JourneyEvent
	steps    []StepSummary
	snaps    [][]RequestSnapshot
	dropped  []int64
	aborted  []int64
	kv       []KVEvent
}

func (r *recorder) Arrived(*RequestSpec)          {}
func (r *recorder) Journey(ev *JourneyEvent)      { r.journeys = append(r.journeys, *ev) }
func (r *recorder) Departed(int64, int64)         {}
func (r *recorder) Dropped(id, _ int64, _ string) { r.dropped = append(r.dropped, id) }
func (r *recorder) Aborted(id, _ int64)           { r.aborted = append(r.aborted, id) }
func (r *recorder) KV(ev *KVEvent)                { r.kv = append(r.kv, *ev) }
func (r *recorder) Step(s *StepSummary, src SnapshotSource) {
	r.steps = append(r.steps, *s)
	r.snaps = append(r.snaps, src.Snapshots(nil))
}

// firstScheduleOrder lists requests in the order they were first scheduled.
func (r *recorder) firstScheduleOrder() []int64 {
	var out []int64
	for _, j := range r.journeys {
		if j.Kind == JourneyScheduled && !j.Resume {
			out = append(out, j.Req)
		}
	}
	return out
}

func TestChunkedPrefillSplitsByBudgetAndThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		budget    int64
		threshold int64
		chunks    []int64 // prefill tokens per step
	}{
		{"budget", 512, 0, []int64{512, 512, 176}},
		{"threshold", 2048, 300, []int64{300, 300, 300, 300}},
		{"one step", 2048, 0, []int64{1200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.MaxBatchedTokens = tc.budget
			cfg.Engine.LongPrefillThreshold = tc.threshold
			rec := &recorder{}
			cfg.Observer = rec
			run(t, cfg, specs([3]int64{0, 1200, 2}))
			var got []int64
			for _, st := range rec.steps {
				if st.PrefillTok > 0 {
					got = append(got, st.PrefillTok)
				}
			}
			require.Equal(t, tc.chunks, got)
			// The prefill's attention work is context × chunk per step.
			var computed int64
			for i, st := range rec.steps[:len(tc.chunks)] {
				require.Equal(t, int64(1), st.NumPrefill)
				snap := rec.snaps[i][0]
				require.Equal(t, computed, snap.ComputedTokens)
				require.Equal(t, tc.chunks[i], snap.ScheduledThisStep)
				computed += tc.chunks[i]
			}
			// The token comes with the last chunk, not before.
			var ft JourneyEvent
			for _, j := range rec.journeys {
				if j.Kind == JourneyFirstToken {
					ft = j
				}
			}
			require.Equal(t, int64(len(tc.chunks)), ft.Step)
		})
	}
}

func TestChunkedPrefillOffWaitsForBudgetAndDropsTooLong(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.ChunkedPrefillEnabled = false
	cfg.Engine.MaxBatchedTokens = 600
	rec := &recorder{}
	cfg.Observer = rec
	// Request 0 decodes while request 1's 599-token prompt arrives: it fits
	// the budget left by one decode token (600 − 1) and runs whole. Request
	// 2's prompt exceeds the budget and is refused.
	res := run(t, cfg, specs([3]int64{0, 100, 20}, [3]int64{10, 599, 2}, [3]int64{20, 700, 2}))
	require.Equal(t, []int64{2}, rec.dropped)
	require.Equal(t, int64(1), res.Requests.Dropped)
	require.Equal(t, int64(2), res.Requests.Completed)
	for _, st := range rec.steps {
		require.LessOrEqual(t, st.Scheduled, cfg.Engine.MaxBatchedTokens)
		if st.PrefillTok > 0 {
			require.Contains(t, []int64{100, 599}, st.PrefillTok, "prefills are never split")
		}
	}
}

func TestPreemptionRecomputesFromTheFront(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 20 // 320 tokens
	cfg.Engine.PrefixCachingEnabled = false
	rec := &recorder{}
	cfg.Observer = rec
	cfg.Options.RecordRequests = true
	// Both prompts fit together (2 × 8 blocks), but their decodes outgrow
	// the cache: the later-admitted request is preempted, then resumes.
	res := run(t, cfg, specs([3]int64{0, 128, 100}, [3]int64{0, 128, 100}))
	require.Equal(t, int64(2), res.Requests.Completed)
	require.Greater(t, res.Preemptions, int64(0))
	var preempted, resumed []int64
	for _, j := range rec.journeys {
		if j.Kind == JourneyPreempted {
			preempted = append(preempted, j.Req)
		}
		if j.Kind == JourneyScheduled && j.Resume {
			resumed = append(resumed, j.Req)
			require.Equal(t, int64(128), j.PrefillDone, "vLLM reports the high-water mark, not the recompute")
			require.Equal(t, PhaseDecode, j.Phase, "it has produced tokens before")
		}
	}
	require.Equal(t, int64(1), preempted[0], "the tail (last admitted) is preempted first")
	require.Equal(t, len(preempted), len(resumed))
	for _, r := range res.PerRequest {
		require.Equal(t, int64(100), r.OutputTokens)
	}
}

func TestPrefixCacheSharesGroupBlocks(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.RecordRequests = true
	reqs := []RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 300, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 256},
		{ID: 1, ArrivalUs: 50_000, PromptTokens: 280, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 256},
		{ID: 2, ArrivalUs: 100_000, PromptTokens: 280, OutputTokens: 2, PrefixGroup: 2, PrefixTokens: 256},
	}
	res := run(t, cfg, reqs)
	byID := map[int64]RequestRecord{}
	for _, r := range res.PerRequest {
		byID[r.ID] = r
	}
	require.Equal(t, int64(0), byID[0].CachedTokens)
	require.Equal(t, int64(256), byID[1].CachedTokens, "16 full blocks of the shared prefix")
	require.Equal(t, int64(0), byID[2].CachedTokens, "another group shares nothing")
	require.InDelta(t, 256.0/860, res.PrefixCacheHitRate, 1e-12)
}

func TestPrefixCacheNeverServesTheWholePrompt(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.RecordRequests = true
	// Identical 256-token prompts: 16 full blocks, but one token must be
	// computed to sample from, so at most 15 blocks are cached.
	reqs := []RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 256, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 256},
		{ID: 1, ArrivalUs: 50_000, PromptTokens: 256, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 256},
	}
	res := run(t, cfg, reqs)
	require.Equal(t, int64(240), res.PerRequest[1].CachedTokens)
}

func TestSchedulingPolicies(t *testing.T) {
	// Request 0 occupies the single seat; 1..4 queue behind it and are
	// admitted one at a time in policy order.
	reqs := []RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 10, OutputTokens: 50},
		{ID: 1, ArrivalUs: 10, PromptTokens: 400, OutputTokens: 2, Priority: 1},
		{ID: 2, ArrivalUs: 20, PromptTokens: 100, OutputTokens: 2, Priority: 3},
		{ID: 3, ArrivalUs: 30, PromptTokens: 300, OutputTokens: 2, Priority: 2},
		{ID: 4, ArrivalUs: 40, PromptTokens: 200, OutputTokens: 2, Priority: 3},
	}
	for _, tc := range []struct {
		sched SchedulerPolicy
		prio  PriorityPolicy
		order []int64
	}{
		{FCFS, PriorityPolicy{}, []int64{0, 1, 2, 3, 4}},
		{SJF, PriorityPolicy{}, []int64{0, 2, 4, 3, 1}},
		{PriorityFCFS, PriorityPolicy{}, []int64{0, 2, 4, 3, 1}},
		{ReversePriority, PriorityPolicy{}, []int64{0, 1, 3, 2, 4}},
		// Age dominates the static priority: oldest first.
		{PriorityFCFS, PriorityPolicy{Kind: PrioritySLOBased, AgeWeight: 1e9}, []int64{0, 1, 2, 3, 4}},
		// Inverted: youngest first.
		{PriorityFCFS, PriorityPolicy{Kind: PriorityInvertedSLO, AgeWeight: 1e9}, []int64{0, 4, 3, 2, 1}},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.sched, tc.prio.Kind), func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.MaxNumSeqs = 1
			cfg.Policies.Scheduler, cfg.Policies.Priority = tc.sched, tc.prio
			rec := &recorder{}
			cfg.Observer = rec
			run(t, cfg, reqs)
			require.Equal(t, tc.order, rec.firstScheduleOrder())
		})
	}
}

func TestUnservableRequestsAreDroppedAndCounted(t *testing.T) {
	cfg := baseConfig()
	// 160 tokens: a request holds at most prompt + output − 1 of them.
	cfg.Engine.TotalKVBlocksGPU = 10
	rec := &recorder{}
	cfg.Observer = rec
	res := run(t, cfg, specs([3]int64{0, 100, 61}, [3]int64{0, 100, 62}, [3]int64{0, 161, 1}))
	require.Equal(t, []int64{1, 2}, rec.dropped)
	require.Equal(t, Counts{Offered: 3, Injected: 3, Completed: 1, Dropped: 2}, res.Requests)
}

func TestHorizonLeavesWorkCounted(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.HorizonUs = 5000
	res := run(t, cfg, specs([3]int64{0, 100, 100}, [3]int64{4950, 100, 2}, [3]int64{9000, 10, 1}))
	require.Equal(t, Counts{Offered: 3, Injected: 2, Completed: 0, StillArrival: 1, StillRunning: 1}, res.Requests)
}

func TestCPUOffloadReloadsEvictedPrefixes(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 40
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading = 200, true
	cfg.Engine.OffloadThreshold = 0.0
	rec := &recorder{}
	cfg.Observer = rec
	cfg.Options.RecordRequests = true
	// Group 1's prefix is computed, evicted from the GPU by group 2's
	// requests, stored to the CPU, and reloaded for the last request.
	reqs := []RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 300, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 288},
		{ID: 1, ArrivalUs: 100_000, PromptTokens: 600, OutputTokens: 2},
		{ID: 2, ArrivalUs: 200_000, PromptTokens: 300, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 288},
	}
	res := run(t, cfg, reqs)
	require.NotNil(t, res.KVOffload)
	require.Greater(t, res.KVOffload.StoredBlocks, int64(0))
	// Request 1's 38 blocks reuse the 21 never-used blocks, then request
	// 0's freed blocks tail first: prefix blocks 17..2 are evicted (and
	// stored), 0 and 1 stay on the GPU.
	require.Equal(t, int64(16), res.KVOffload.ReloadedBlocks)
	require.Equal(t, int64(288), res.PerRequest[2].CachedTokens)
	var loads int64
	for _, ev := range rec.kv {
		if ev.Kind == KVLoad {
			loads += ev.Blocks
			require.Equal(t, int64(2), ev.Req)
		}
	}
	require.Equal(t, int64(16), loads)
}

// TestInvariantsHoldOnRandomRuns drives random workloads through random
// configurations with every invariant checked in full after every step.
func TestInvariantsHoldOnRandomRuns(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{
			Engine: EngineConfig{
				VLLMKnobs: physics.VLLMKnobs{
					MaxNumSeqs:            int64(1 + r.IntN(32)),
					MaxBatchedTokens:      int64(64 + r.IntN(2048)),
					ChunkedPrefillEnabled: r.IntN(4) != 0,
					BlockSizeTokens:       int64([]int{1, 8, 16, 32}[r.IntN(4)]),
					TotalKVBlocksGPU:      int64(8 + r.IntN(400)),
					PrefixCachingEnabled:  r.IntN(3) != 0,
				},
				LongPrefillThreshold: int64([]int{0, 0, 128, 512}[r.IntN(4)]),
			},
			Policies: Policies{Scheduler: SchedulerPolicy(r.IntN(4)), Priority: PriorityPolicy{Kind: PriorityKind(r.IntN(3)), AgeWeight: r.Float64()}},
			Latency:  constModel{step: int64(1 + r.IntN(3000)), arrive: int64(r.IntN(500)), depart: int64(r.IntN(100))},
			Options:  Options{Exhaustive: true},
		}
		if cfg.Engine.PrefixCachingEnabled && r.IntN(2) == 0 {
			cfg.Engine.TotalKVBlocksCPU, cfg.Engine.OffloadThreshold = int64(1+r.IntN(300)), r.Float64()
			cfg.Engine.CPUOffloading = true
		}
		n := 50 + r.IntN(150)
		reqs := make([]RequestSpec, n)
		var at int64
		for i := range reqs {
			at += int64(r.ExpFloat64() * 3000)
			reqs[i] = RequestSpec{ID: int64(i), ArrivalUs: at, PromptTokens: int64(1 + r.IntN(1500)), OutputTokens: int64(1 + r.IntN(200)), Priority: int32(r.IntN(3))}
			if g := r.IntN(4); g > 0 {
				reqs[i].PrefixGroup = int32(g)
				reqs[i].PrefixTokens = min(reqs[i].PromptTokens, int64(100*g))
			}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			res := run(t, cfg, reqs)
			require.Equal(t, int64(n), res.Requests.Completed+res.Requests.Dropped)
			var out int64
			for _, q := range reqs {
				out += q.OutputTokens
			}
			if res.Requests.Dropped == 0 {
				require.Equal(t, out, res.OutputTokens)
			}
			require.True(t, slices.IsSorted([]float64{res.TTFT.Min, res.TTFT.P50, res.TTFT.P90, res.TTFT.P95, res.TTFT.P99, res.TTFT.Max}))
		})
	}
}

func TestHistogramQuantilesWithinResolution(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Histogram
	vals := make([]int64, 50_000)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 20_000)
		h.add(vals[i])
	}
	slices.Sort(vals)
	for _, p := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		exact := vals[loglin.NearestRank(p, int64(len(vals)))-1]
		got := h.Quantile(p)
		require.InDelta(t, float64(exact), float64(got), max(1, float64(exact)/512), "p=%v", p)
	}
	require.Equal(t, vals[0], h.Quantile(0))
	require.Equal(t, vals[len(vals)-1], h.Quantile(1))
	for i := 0; i < 1024; i++ {
		require.Equal(t, int64(i), loglin.Mid(loglin.Index(int64(i), histBits), histBits), "exact below 1024")
	}
	for _, v := range []int64{1024, 1025, 5000, 1 << 20, 1<<40 + 12345} {
		i := loglin.Index(v, histBits)
		require.InDelta(t, float64(v), float64(loglin.Mid(i, histBits)), float64(v)/512, "v=%d", v)
		require.Equal(t, i, loglin.Index(loglin.Mid(i, histBits), histBits), "the midpoint lies in its own bucket")
	}
}

func TestLatencyModelsChargeCPUTransfers(t *testing.T) {
	cfg := llamaH100(t)
	b := &Batch{}
	b.Beta.AddDecode(1000, 63)
	b.Beta.RunningDepth = 1
	moved := *b
	moved.Beta.TransferBlocks = 100
	bb := &Blackbox{Beta: [3]float64{5000, 0, 30}, TransferUsPerBlock: 12}
	require.Equal(t, bb.StepTimeUs(b)+1200, bb.StepTimeUs(&moved))
	rl := DefaultRoofline(cfg)
	want := rl.TransferBaseUs*1e-6 + 100*cfg.BlockSizeBytes/cfg.HWPCIeBandwidthEff
	require.InDelta(t, want, rl.StepSeconds(&moved)-rl.StepSeconds(b), 1e-12)
}

func TestPhysicsStepIsTheDotProduct(t *testing.T) {
	cfg := llamaH100(t)
	m := &Physics{Cfg: cfg, Gamma: 0.3}
	for i := range m.Beta {
		m.Beta[i] = float64(i+1) * 0.01
	}
	b := &Batch{}
	b.Beta.AddPrefill(1024, 512)
	b.Beta.AddDecode(3000, 188)
	b.Beta.RunningDepth = 2
	f := features.BetaFeatures(cfg, b.Beta)
	var want float64
	for i := range f {
		want += m.Beta[i] * f[i]
	}
	require.Equal(t, int64(math.Round(want*1e6)), m.StepTimeUs(b))
	require.NoError(t, m.Validate())
	m.Beta[3] = math.NaN()
	require.ErrorContains(t, m.Validate(), "decode_attention_compute")
}

func TestNoiseHasMeanOne(t *testing.T) {
	n := NewNoisy(constModel{step: 10_000}, 0.2, NewRNG(1).Stream(StreamLatencyNoise))
	var sum float64
	const k = 100_000
	for i := 0; i < k; i++ {
		sum += float64(n.StepTimeUs(&Batch{}))
	}
	require.InDelta(t, 10_000, sum/k, 20, "σ/√k ≈ 6 µs")
	again := NewNoisy(constModel{step: 10_000}, 0.2, NewRNG(1).Stream(StreamLatencyNoise))
	first := NewNoisy(constModel{step: 10_000}, 0.2, NewRNG(1).Stream(StreamLatencyNoise))
	require.Equal(t, first.StepTimeUs(&Batch{}), again.StepTimeUs(&Batch{}), "the stream is reproducible")
}
