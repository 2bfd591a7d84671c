package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/blis-sim/blis/internal/loglin"

	"github.com/stretchr/testify/require"
)

// randomWorkload is n requests with random lengths, arrivals and prefix
// groups.
func randomWorkload(r *rand.Rand, n int) []RequestSpec {
	reqs := make([]RequestSpec, n)
	var at int64
	for i := range reqs {
		at += int64(r.ExpFloat64() * 2000)
		reqs[i] = RequestSpec{ID: int64(i), ArrivalUs: at, PromptTokens: int64(1 + r.IntN(900)), OutputTokens: int64(1 + r.IntN(120)), Priority: int32(r.IntN(3))}
		if g := r.IntN(3); g > 0 {
			reqs[i].PrefixGroup = int32(g)
			reqs[i].PrefixTokens = min(reqs[i].PromptTokens, int64(64*g))
		}
	}
	return reqs
}

// driveUpFront injects every request before the first Advance, the
// opposite of Run's just-in-time injection, and collects the completions.
func driveUpFront(t *testing.T, cfg Config, reqs []RequestSpec) (*Result, []Completion) {
	t.Helper()
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	for _, q := range reqs {
		require.NoError(t, e.Inject(q, q.ArrivalUs))
	}
	var done []Completion
	for {
		at, ok := e.NextEventUs()
		if !ok {
			break
		}
		require.NoError(t, e.Advance())
		require.Equal(t, at, e.Now())
		for _, c := range e.Completions() {
			require.GreaterOrEqual(t, c.DepartedUs, at, "a completion is reported no later than it happens")
			done = append(done, c)
		}
	}
	res, err := e.Finish()
	require.NoError(t, err)
	return res, done
}

// TestInjectionTimingDoesNotMatter: injecting the whole workload up front
// and injecting each request just in time (Run) give the same run, byte
// for byte, because events are ordered by time and kind before insertion
// order.
func TestInjectionTimingDoesNotMatter(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			cfg := baseConfig()
			cfg.Engine.TotalKVBlocksGPU = int64(60 + r.IntN(200))
			cfg.Policies.Scheduler = SchedulerPolicy(r.IntN(4))
			cfg.Options.RecordRequests = true
			reqs := randomWorkload(r, 300)
			a, err := json.Marshal(run(t, cfg, reqs))
			require.NoError(t, err)
			res, done := driveUpFront(t, cfg, reqs)
			b, err := json.Marshal(res)
			require.NoError(t, err)
			require.JSONEq(t, string(a), string(b))
			require.Equal(t, string(a), string(b))
			require.Equal(t, res.Requests.Completed+res.Requests.Dropped, int64(len(done)), "every request is reported once")
			seen := map[int64]bool{}
			for _, c := range done {
				require.False(t, seen[c.ID])
				seen[c.ID] = true
			}
		})
	}
}

func TestCompletionsCarryTheRequestsTimes(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 10 // 160 tokens: request 1 is unservable
	_, done := driveUpFront(t, cfg, specs([3]int64{0, 100, 3}, [3]int64{0, 200, 1}))
	require.Len(t, done, 2)
	drop, fin := done[0], done[1]
	require.True(t, drop.Dropped)
	require.Equal(t, int64(1), drop.ID)
	require.Contains(t, drop.Reason, "KV blocks")
	require.Equal(t, int64(100), drop.DepartedUs, "refused at enqueue, after the 100 µs API overhead")
	// Request 0 as TestSingleRequestByHand computes it: queued at 100,
	// first token at 1100, finished at 3100, departed 50 µs later.
	require.Equal(t, Completion{ID: 0, ArrivalUs: 0, InjectedUs: 0, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100,
		FinishedUs: 3100, DepartedUs: 3150, PromptTokens: 100, OutputTokens: 3}, fin)
}

func TestStatusFollowsTheEngine(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.MaxNumSeqs = 1
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.Equal(t, Status{TotalKVBlocks: 1000, FreeKVBlocks: 1000}, e.Status())
	for _, q := range specs([3]int64{0, 100, 3}, [3]int64{0, 40, 2}) {
		require.NoError(t, e.Inject(q, 0))
	}
	st := e.Status()
	require.Equal(t, int64(2), st.InFlight, "injected requests are in flight before they arrive")
	require.Zero(t, st.QueueDepth)
	require.NoError(t, e.Advance()) // t=0: both arrive
	require.NoError(t, e.Advance()) // t=100: both queue; one step admits request 0 (one seat)
	st = e.Status()
	require.Equal(t, int64(100), st.AtUs)
	require.Equal(t, int64(1), st.QueueDepth)
	require.Equal(t, int64(1), st.BatchSize)
	// 100 prompt tokens + the first output token's slot: 7 blocks of 16.
	require.Equal(t, int64(1000-7), st.FreeKVBlocks)
	require.InDelta(t, 7.0/1000, st.KVUtilization, 1e-12)
	// vLLM's token counters count the step's tokens when it is scheduled:
	// request 0's prompt and its first token.
	require.Equal(t, [2]int64{100, 1}, [2]int64{st.PromptTokens, st.GenerationTokens})
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = e.Status() }), "Status allocates nothing")
	for {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		require.NoError(t, e.Advance())
	}
	st = e.Status()
	require.Zero(t, st.InFlight)
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
	require.Equal(t, [2]int64{140, 5}, [2]int64{st.PromptTokens, st.GenerationTokens}, "both prompts, every token once")
}

func TestCachedPrefixBlocksSeesTheGroupPrefix(t *testing.T) {
	cfg := baseConfig()
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	first := RequestSpec{ID: 7, PromptTokens: 300, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 256}
	require.NoError(t, e.Inject(first, 0))
	for {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		require.NoError(t, e.Advance())
	}
	same := RequestSpec{ID: 8, PromptTokens: 400, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 256}
	other := RequestSpec{ID: 9, PromptTokens: 400, OutputTokens: 1, PrefixGroup: 2, PrefixTokens: 256}
	h := AppendBlockHashes(nil, &same, 16, 400/16)
	require.Equal(t, int64(16), e.CachedPrefixBlocks(h), "the group's 16 prefix blocks, not the request's own")
	require.Zero(t, e.CachedPrefixBlocks(AppendBlockHashes(nil, &other, 16, 400/16)))
	// The chain is the engine's: extending a prefix gives the same leading hashes.
	require.Equal(t, h[:10], AppendBlockHashes(nil, &same, 16, 10))
	require.Equal(t, h, AppendBlockHashes(h[:10:10], &same, 16, 400/16))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = e.CachedPrefixBlocks(h) }))
}

func TestInjectRefusesTimeTravel(t *testing.T) {
	e, err := NewEngine(baseConfig())
	require.NoError(t, err)
	require.NoError(t, e.Inject(RequestSpec{ID: 0, ArrivalUs: 500, PromptTokens: 10, OutputTokens: 1}, 500))
	require.NoError(t, e.Advance())
	require.ErrorContains(t, e.Inject(RequestSpec{ID: 1, ArrivalUs: 100, PromptTokens: 10, OutputTokens: 1}, 400), "before the engine's clock")
	require.ErrorContains(t, e.Inject(RequestSpec{ID: 1, ArrivalUs: 900, PromptTokens: 10, OutputTokens: 1}, 800), "before its arrival_us")
	require.ErrorContains(t, e.Inject(RequestSpec{ID: 1, ArrivalUs: 900, PromptTokens: 0, OutputTokens: 1}, 900), "prompt_tokens")
	// A request injected later than it was sent waits from its send time.
	require.NoError(t, e.Inject(RequestSpec{ID: 1, ArrivalUs: 600, PromptTokens: 10, OutputTokens: 1}, 2000))
	var done []Completion
	for {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		require.NoError(t, e.Advance())
		done = append(done, e.Completions()...)
	}
	require.Len(t, done, 2)
	require.Equal(t, int64(600), done[1].ArrivalUs)
	require.Equal(t, int64(2000), done[1].InjectedUs)
	res, err := e.Finish()
	require.NoError(t, err)
	require.Equal(t, 2000+100+1000-600, int(res.TTFT.Max*1000), "TTFT counts from the send time")
}

// TestSlotsAreReused: an engine's memory follows its concurrency. Serving
// 2,000 requests one after the other uses one request slot.
func TestSlotsAreReused(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.BoundedMemory = true
	reqs := make([]RequestSpec, 2000)
	for i := range reqs {
		reqs[i] = RequestSpec{ID: int64(i), ArrivalUs: int64(i) * 1_000_000, PromptTokens: 50, OutputTokens: 3}
	}
	s, err := New(cfg, reqs)
	require.NoError(t, err)
	res, err := s.Run()
	require.NoError(t, err)
	require.Equal(t, int64(2000), res.Requests.Completed)
	require.Len(t, s.Engine().reqs, 1)
	require.Nil(t, res.TTFTUs, "bounded memory keeps no samples")
	require.Equal(t, int64(2000), res.Hist.TTFT.Count())
}

// TestBoundedMemoryAgreesWithExact: histogram summaries are the exact ones
// within the histogram's resolution; counts, means, minima and maxima are
// equal.
func TestBoundedMemoryAgreesWithExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	reqs := randomWorkload(r, 1500)
	cfg := baseConfig()
	cfg.Options.Exhaustive = false
	exact := run(t, cfg, reqs)
	cfg.Options.BoundedMemory = true
	bounded := run(t, cfg, reqs)
	for _, p := range []struct{ a, b Distribution }{{exact.TTFT, bounded.TTFT}, {exact.E2E, bounded.E2E}, {exact.SchedulingDelay, bounded.SchedulingDelay}} {
		require.Equal(t, p.a.Count, p.b.Count)
		require.InDelta(t, p.a.Mean, p.b.Mean, 1e-9)
		require.Equal(t, p.a.Min, p.b.Min)
		require.Equal(t, p.a.Max, p.b.Max)
		for _, q := range [][2]float64{{p.a.P50, p.b.P50}, {p.a.P90, p.b.P90}, {p.a.P99, p.b.P99}} {
			require.InDelta(t, q[0], q[1], max(0.001, q[0]/512))
		}
	}
	require.Equal(t, exact.ITL, bounded.ITL)
}

func TestHistogramMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var a, b, all Histogram
	for i := 0; i < 5000; i++ {
		v := int64(r.ExpFloat64() * 50_000)
		all.add(v)
		if i%3 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(nil)
	m.Merge(&Histogram{})
	require.Equal(t, all.Summarize(), m.Summarize())
	require.Equal(t, all.Count(), m.Count())
}

// A reset histogram is an empty one: reused for new values it summarizes
// exactly as a fresh histogram of those values does.
func TestHistogramReset(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var reused Histogram
	for round := 0; round < 3; round++ {
		var fresh Histogram
		for i := 0; i < 1000; i++ {
			v := int64(r.ExpFloat64() * float64(int64(1000)<<(4*round)))
			reused.add(v)
			fresh.add(v)
		}
		require.Equal(t, fresh.Summarize(), reused.Summarize(), "round %d", round)
		require.Equal(t, fresh.Quantile(0.99), reused.Quantile(0.99))
		reused.Reset()
		require.Zero(t, reused.Count())
		require.Equal(t, Distribution{}, reused.Summarize())
		for _, c := range reused.counts {
			require.Zero(t, c)
		}
	}
}

// The counts cover only the buckets from the lowest value's to the
// highest's: whatever order values come in (rising, falling, random,
// ranges far apart, merged either way round), every quantile is the one
// counts over every bucket from 0 give, and the buckets held are at most
// twice the range.
func TestHistogramCoversItsRangeOnly(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dense := func(vs []int64, p float64) int64 {
		var counts []int64
		lo, hi := vs[0], vs[0]
		for _, v := range vs {
			i := loglin.Index(v, histBits)
			if i >= len(counts) {
				counts = append(counts, make([]int64, i+1-len(counts))...)
			}
			counts[i]++
			lo, hi = min(lo, v), max(hi, v)
		}
		return loglin.Quantile(counts, 0, int64(len(vs)), lo, hi, p, histBits)
	}
	orders := map[string]func([]int64){
		"rising":  func(v []int64) { slices.Sort(v) },
		"falling": func(v []int64) { slices.Sort(v); slices.Reverse(v) },
		"random":  func([]int64) {},
	}
	for name, order := range orders {
		for _, scale := range []float64{10, 3e4, 5e7} {
			vs := make([]int64, 3000)
			for i := range vs {
				vs[i] = int64(r.ExpFloat64() * scale)
				if i%2 == 1 {
					vs[i] += int64(scale) * 100 // a second range far above
				}
			}
			order(vs)
			var h, even, odd Histogram
			for i, v := range vs {
				h.add(v)
				if i%2 == 0 {
					even.add(v)
				} else {
					odd.add(v)
				}
			}
			var m1, m2 Histogram
			m1.Merge(&odd)
			m1.Merge(&even)
			m2.Merge(&even)
			m2.Merge(&odd)
			for _, p := range []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1} {
				want := dense(vs, p)
				require.Equal(t, want, h.Quantile(p), "%s, scale %g, p %g", name, scale, p)
				require.Equal(t, want, m1.Quantile(p), "merged odd first: %s, scale %g, p %g", name, scale, p)
				require.Equal(t, want, m2.Quantile(p), "merged even first: %s, scale %g, p %g", name, scale, p)
			}
			span := loglin.Index(slices.Max(vs), histBits) - loglin.Index(slices.Min(vs), histBits) + 1
			require.LessOrEqual(t, len(h.counts), 2*span, "%s, scale %g", name, scale)
		}
	}
}

func TestSharedBlocksAgreesWithBlockShared(t *testing.T) {
	for _, bs := range []int64{1, 7, 16} {
		for _, spec := range []RequestSpec{
			{ID: 1, PromptTokens: 300},
			{ID: 2, PromptTokens: 300, PrefixGroup: 3, PrefixTokens: 256},
			{ID: 3, PromptTokens: 300, PrefixGroup: 3, PrefixTokens: 15},
			{ID: 4, PromptTokens: 300, PrefixGroup: 3, PrefixTokens: 300},
			{ID: 5, PromptTokens: 300, OutputTokens: 40, Session: 9},
			{ID: 6, PromptTokens: 300, OutputTokens: 40, Session: 9, PrefixGroup: 2, PrefixTokens: 100},
			{ID: 7, PromptTokens: 300, Content: []uint64{5, 6, 7}, ContentTokens: 64},
			{ID: 8, PromptTokens: 100, Content: []uint64{5, 6, 7}, ContentTokens: 64},
			{ID: 9, PromptTokens: 300, Content: []uint64{5}, ContentTokens: 64, PrefixGroup: 1, PrefixTokens: 128},
		} {
			n := SharedBlocks(&spec, bs)
			for i := int64(0); i < (spec.PromptTokens+spec.OutputTokens)/bs+2; i++ {
				require.Equal(t, i < n, blockShared(&spec, i, bs), "block %d of %+v at block size %d", i, spec, bs)
			}
		}
	}
}

// drain advances e until it has no event left.
func drain(t *testing.T, e *Engine) {
	t.Helper()
	for {
		if _, ok := e.NextEventUs(); !ok {
			return
		}
		require.NoError(t, e.Advance())
	}
}

// A session's next turn re-sends the previous turn's prompt and output:
// its leading blocks are the previous turn's and hit the cache, while a
// request of another session with the same lengths hits nothing.
func TestSessionTurnHitsThePreviousTurn(t *testing.T) {
	e, err := NewEngine(baseConfig())
	require.NoError(t, err)
	turn1 := RequestSpec{ID: 1, PromptTokens: 200, OutputTokens: 56, Session: 4}
	require.NoError(t, e.Inject(turn1, 0))
	drain(t, e)
	turn2 := RequestSpec{ID: 2, ArrivalUs: e.Now(), PromptTokens: 256 + 100, OutputTokens: 10, Session: 4}
	other := RequestSpec{ID: 3, PromptTokens: 356, OutputTokens: 10, Session: 5}
	own := RequestSpec{ID: 1, PromptTokens: 356, OutputTokens: 10}
	h2 := AppendBlockHashes(nil, &turn2, 16, 356/16)
	require.Equal(t, AppendBlockHashes(nil, &turn1, 16, 256/16), h2[:256/16], "turn 2 starts with turn 1's stream")
	// The last output token is never fed back, so turn 1's KV covers 255
	// tokens: 15 full blocks.
	require.Equal(t, int64(15), e.CachedPrefixBlocks(h2), "turn 1's prompt and output blocks are cached")
	require.Zero(t, e.CachedPrefixBlocks(AppendBlockHashes(nil, &other, 16, 356/16)))
	require.NotEqual(t, AppendBlockHashes(nil, &own, 16, 2), h2[:2], "a session's content differs from a request's own of the same id")
	require.NoError(t, e.Inject(turn2, e.Now()))
	drain(t, e)
	res, err := e.Finish()
	require.NoError(t, err)
	require.Equal(t, int64(240), res.CachedPromptTokens, "the second turn's first 240 tokens come from the cache")
}

// Named content (a Mooncake trace's hash ids) is shared exactly as far as
// two requests' id lists agree, in whole chunks inside the prompt.
func TestContentIDsSharePrefixes(t *testing.T) {
	a := RequestSpec{ID: 1, PromptTokens: 512 * 3, Content: []uint64{11, 12, 13}, ContentTokens: 512}
	b := RequestSpec{ID: 2, PromptTokens: 512*3 + 100, Content: []uint64{11, 12, 99, 5}, ContentTokens: 512}
	ha, hb := AppendBlockHashes(nil, &a, 16, 96), AppendBlockHashes(nil, &b, 16, 96)
	require.Equal(t, ha[:64], hb[:64], "the first two chunks agree")
	require.NotEqual(t, ha[64], hb[64], "the third differs")
	require.Equal(t, int64(96), SharedBlocks(&b, 16), "the fourth chunk lies beyond the prompt")
	require.Error(t, RequestSpec{ID: 1, PromptTokens: 5, OutputTokens: 1, Content: []uint64{1}}.Validate())
}

// vLLM's scheduler_reserve_full_isl: a waiting request is admitted only
// when its whole prompt fits in the free blocks, though it computes (and
// is allocated) only a chunk this step. 20 blocks of 16 tokens: request 0
// (160 tokens, 10 blocks) leaves 10; request 1's 200-token prompt needs
// 13 blocks, its first 96-token chunk (the budget's rest) 6.
func TestReserveFullSequenceGatesAdmission(t *testing.T) {
	for _, tc := range []struct {
		reserve bool
		batch   int64
	}{{false, 2}, {true, 1}} {
		cfg := baseConfig()
		cfg.Engine.TotalKVBlocksGPU = 20
		cfg.Engine.MaxBatchedTokens = 256
		cfg.Engine.ReserveFullSequence = tc.reserve
		e, err := NewEngine(cfg)
		require.NoError(t, err)
		for _, q := range specs([3]int64{0, 160, 50}, [3]int64{0, 200, 2}) {
			require.NoError(t, e.Inject(q, 0))
		}
		require.NoError(t, e.Advance()) // t=0: both arrive
		require.NoError(t, e.Advance()) // t=100: both queue; the first step
		st := e.Status()
		require.Equal(t, tc.batch, st.BatchSize, "reserve %v", tc.reserve)
		if tc.reserve {
			require.Equal(t, int64(1), st.QueueDepth)
			require.Equal(t, int64(20-10), st.FreeKVBlocks, "request 1 holds nothing while it waits")
		} else {
			require.Equal(t, int64(20-10-6), st.FreeKVBlocks, "request 1's first chunk only")
		}
		drain(t, e)
		res, err := e.Finish()
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Requests.Completed, "both finish either way (reserve %v)", tc.reserve)
	}
}
