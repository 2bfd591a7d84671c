package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// abortRig drives one engine by hand, as a caller on a shared clock does,
// and keeps every completion that Advance and Abort report.
type abortRig struct {
	t    *testing.T
	e    *Engine
	rec  *recorder
	done []Completion
}

func newAbortRig(t *testing.T, cfg Config) *abortRig {
	t.Helper()
	rec := &recorder{}
	cfg.Observer = rec
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	return &abortRig{t: t, e: e, rec: rec}
}

func (g *abortRig) inject(q RequestSpec, at int64) {
	g.t.Helper()
	require.NoError(g.t, g.e.Inject(q, at))
}

func (g *abortRig) advance() {
	g.t.Helper()
	require.NoError(g.t, g.e.Advance())
	g.done = append(g.done, g.e.Completions()...)
}

// until processes every event before at.
func (g *abortRig) until(at int64) {
	g.t.Helper()
	for {
		if t, ok := g.e.NextEventUs(); !ok || t >= at {
			return
		}
		g.advance()
	}
}

// through processes every event at or before at.
func (g *abortRig) through(at int64) { g.until(at + 1) }

// abort calls Abort and keeps what it reports at once.
func (g *abortRig) abort(id, at int64) bool {
	g.t.Helper()
	ok, err := g.e.Abort(id, at)
	require.NoError(g.t, err)
	g.done = append(g.done, g.e.Completions()...)
	return ok
}

func (g *abortRig) finish() *Result {
	g.t.Helper()
	g.until(math.MaxInt64)
	res, err := g.e.Finish()
	require.NoError(g.t, err)
	return res
}

// stateOf is the state of the live request id (stFree when it is gone).
func (g *abortRig) stateOf(id int64) (reqState, *request) {
	for i := range g.e.reqs {
		if r := &g.e.reqs[i]; r.state != stFree && r.spec.ID == id {
			return r.state, r
		}
	}
	return stFree, nil
}

func (g *abortRig) completion(id int64) Completion {
	g.t.Helper()
	for _, c := range g.done {
		if c.ID == id {
			return c
		}
	}
	g.t.Fatalf("request %d was never reported", id)
	return Completion{}
}

// finished is the request's journey.FINISHED events.
func (g *abortRig) finished(id int64) []JourneyEvent {
	var out []JourneyEvent
	for _, j := range g.rec.journeys {
		if j.Req == id && j.Kind == JourneyFinished {
			out = append(out, j)
		}
	}
	return out
}

// TestAbortInEachState aborts request 0 (100 prompt tokens, 3 output
// tokens; with baseConfig queued at 100, steps [100,1100), [1100,2100),
// [2100,3100), a token at each step's end) in each place it can be.
func TestAbortInEachState(t *testing.T) {
	a := RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 3}
	for _, tc := range []struct {
		name     string
		injectAt int64
		drive    func(g *abortRig) int64 // returns the abort time
		// immediate: reported by Abort itself, not at a later step's end.
		immediate bool
		want      Completion
		steps     int64
		finished  int64 // time of journey.FINISHED (aborted); -1: none
		observed  bool  // the observer's Aborted is called
	}{
		{
			name: "not yet arrived", injectAt: 300,
			drive:     func(g *abortRig) int64 { g.until(200); return 200 },
			immediate: true, finished: -1,
			want: Completion{ID: 0, TimedOut: true, InjectedUs: 300, DepartedUs: 200, PromptTokens: 100},
		},
		{
			name:      "in API overhead",
			drive:     func(g *abortRig) int64 { g.until(50); return 50 },
			immediate: true, finished: -1, observed: true,
			want: Completion{ID: 0, TimedOut: true, DepartedUs: 50, PromptTokens: 100},
		},
		{
			name:      "in API overhead, its queueing due at the abort time",
			drive:     func(g *abortRig) int64 { g.until(100); return 100 },
			immediate: true, finished: -1, observed: true,
			want: Completion{ID: 0, TimedOut: true, DepartedUs: 100, PromptTokens: 100},
		},
		{
			name: "running, during its first step",
			drive: func(g *abortRig) int64 {
				g.until(500)
				return 500
			},
			steps: 1, finished: 1100, observed: true,
			want: Completion{ID: 0, TimedOut: true, EnqueuedUs: 100, FirstScheduledUs: 100, DepartedUs: 1100, PromptTokens: 100},
		},
		{
			name: "running, at the end of its step (before the next starts)",
			drive: func(g *abortRig) int64 {
				g.until(1100)
				return 1100
			},
			immediate: true, steps: 1, finished: 1100, observed: true,
			want: Completion{ID: 0, TimedOut: true, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100, DepartedUs: 1100,
				PromptTokens: 100, OutputTokens: 1},
		},
		{
			name: "running, after the step at the abort time started",
			drive: func(g *abortRig) int64 {
				g.through(1100)
				return 1100
			},
			steps: 2, finished: 2100, observed: true,
			want: Completion{ID: 0, TimedOut: true, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100, DepartedUs: 2100,
				PromptTokens: 100, OutputTokens: 1},
		},
		{
			name: "running, during a decode step",
			drive: func(g *abortRig) int64 {
				g.until(1500)
				return 1500
			},
			steps: 2, finished: 2100, observed: true,
			want: Completion{ID: 0, TimedOut: true, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100, DepartedUs: 2100,
				PromptTokens: 100, OutputTokens: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newAbortRig(t, baseConfig())
			g.inject(a, max(tc.injectAt, a.ArrivalUs))
			at := tc.drive(g)
			before := len(g.done)
			require.True(t, g.abort(0, at))
			require.Equal(t, at, g.e.Now(), "the clock moves to the abort")
			if tc.immediate {
				require.Len(t, g.done, before+1, "reported by Abort itself")
				require.Equal(t, int64(g.e.kv.total()), g.e.Status().FreeKVBlocks, "its blocks are free at once")
			} else {
				require.Len(t, g.done, before, "reported at the end of the step in flight")
				require.Equal(t, int64(1), g.e.Status().BatchSize, "it runs until the step ends")
				next, ok := g.e.NextEventUs()
				require.True(t, ok)
				require.Equal(t, tc.want.DepartedUs, next)
			}
			res := g.finish()
			require.Equal(t, tc.want, g.completion(0))
			require.Len(t, g.done, 1)
			require.Equal(t, tc.steps, res.Steps, "no step runs for the aborted request after the abort")
			require.Equal(t, Counts{Offered: 1, Injected: 1, TimedOut: 1}, res.Requests)
			require.Zero(t, res.TTFT.Count, "a timed-out request is not in the latencies of completed ones")
			require.Zero(t, res.E2E.Count)
			require.Equal(t, g.e.kv.total(), g.e.Status().FreeKVBlocks)
			fin := g.finished(0)
			if tc.finished < 0 {
				require.Empty(t, fin, "it never reached the scheduler")
			} else {
				require.Len(t, fin, 1)
				require.Equal(t, "aborted", fin[0].FinishStatus)
				require.Equal(t, tc.finished, fin[0].AtUs)
			}
			if tc.observed {
				require.Equal(t, []int64{0}, g.rec.aborted)
			} else {
				require.Empty(t, g.rec.aborted, "the instance never saw it")
			}
		})
	}
}

// A waiting request, never scheduled (one seat, taken), leaves the queue
// at the abort time even while a step is in flight; the other request is
// not disturbed.
func TestAbortQueuedRequest(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.MaxNumSeqs = 1
	g := newAbortRig(t, cfg)
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 3}, 0)
	g.inject(RequestSpec{ID: 1, PromptTokens: 40, OutputTokens: 2}, 0)
	g.until(500)
	st, _ := g.stateOf(1)
	require.Equal(t, stQueued, st)
	require.True(t, g.abort(1, 500))
	require.Equal(t, Completion{ID: 1, TimedOut: true, EnqueuedUs: 100, DepartedUs: 500, PromptTokens: 40}, g.completion(1))
	require.Zero(t, g.e.Status().QueueDepth)
	res := g.finish()
	require.Equal(t, Completion{ID: 0, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100, FinishedUs: 3100, DepartedUs: 3150,
		PromptTokens: 100, OutputTokens: 3}, g.completion(0))
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, TimedOut: 1}, res.Requests)
	require.Equal(t, []JourneyEvent{{Kind: JourneyFinished, Req: 1, AtUs: 500, Step: 1, Phase: PhasePrefill, PrefillTotal: 40,
		DecodeMax: 2, FinishStatus: "aborted", EnqueuedUs: 100}}, g.finished(1))
}

// A request preempted back to the queue keeps the tokens it delivered
// before; aborted there, it reports them and its preemption.
func TestAbortPreemptedRequest(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 20
	cfg.Engine.PrefixCachingEnabled = false
	g := newAbortRig(t, cfg)
	for _, q := range specs([3]int64{0, 128, 100}, [3]int64{0, 128, 100}) {
		g.inject(q, 0)
	}
	for {
		if st, r := g.stateOf(1); st == stQueued && r.preemptions > 0 {
			break
		}
		g.advance()
	}
	// As TestPreemptionRecomputesFromTheFront: both decode in 9 then 10
	// blocks; the 34th step (at 33100) needs 11 each, so request 1, the
	// tail, is preempted with 33 tokens delivered.
	require.Equal(t, int64(33100), g.e.Now())
	at := g.e.Now() + 300 // the 34th step is in flight
	require.True(t, g.abort(1, at))
	require.Equal(t, Completion{ID: 1, TimedOut: true, EnqueuedUs: 100, FirstScheduledUs: 100, FirstTokenUs: 1100, DepartedUs: at,
		PromptTokens: 128, OutputTokens: 33, Preemptions: 1}, g.completion(1))
	res := g.finish()
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, TimedOut: 1}, res.Requests)
	require.Equal(t, int64(100), g.completion(0).OutputTokens)
	require.Equal(t, int64(1), res.Preemptions, "request 0 runs alone once request 1 is gone")
}

// Abort refuses what it cannot abort: an unknown id, a request that
// finished (in the step in flight, or in its departure overhead), one
// already aborted; and it errs on times it cannot honor. Neither changes
// anything.
func TestAbortRefusals(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 3}, 0)
	g.inject(RequestSpec{ID: 1, ArrivalUs: 500, PromptTokens: 100, OutputTokens: 50}, 500)
	g.until(50)
	require.False(t, g.abort(42, 50), "never injected")
	_, err := g.e.Abort(1, 50)
	require.ErrorContains(t, err, "before its arrival_us")
	_, err = g.e.Abort(0, 700)
	require.ErrorContains(t, err, "to process first")

	g.until(1500) // request 1 is in its first step [1100, 2100)
	_, err = g.e.Abort(0, 1000)
	require.ErrorContains(t, err, "before the engine's clock")
	require.True(t, g.abort(1, 1500))
	require.False(t, g.abort(1, 1600), "already aborted, not yet gone")
	st := g.e.Status()
	g.until(2500) // request 0's last step [2100, 3100) is in flight; it finishes in it
	require.Equal(t, 1, len(g.done)-1, "request 1's abort took effect at 2100")
	require.True(t, g.completion(1).TimedOut)
	require.Equal(t, int64(3100), g.completion(0).FinishedUs, "request 0's completion is already reported")
	require.False(t, g.abort(0, 2500), "it finishes in the step in flight: vLLM processes that step's output first")
	require.Empty(t, g.e.Completions(), "a refused abort reports nothing")
	require.NotEqual(t, st, g.e.Status())
	st = g.e.Status()
	require.False(t, g.abort(0, 3120), "in its departure overhead")
	require.False(t, g.abort(1, 3120), "already gone")
	require.Equal(t, st, g.e.Status(), "a refused abort changes nothing, not even the clock")
	res := g.finish()
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, TimedOut: 1}, res.Requests)
	require.Equal(t, []int64{1}, g.rec.aborted)
}

// An error leaves the last call's completions as they were.
func TestAbortErrorKeepsCompletions(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 1}, 0)
	g.inject(RequestSpec{ID: 1, ArrivalUs: 5000, PromptTokens: 100, OutputTokens: 1}, 5000)
	g.through(100)
	require.Len(t, g.e.Completions(), 1)
	_, err := g.e.Abort(1, 10_000)
	require.Error(t, err)
	require.Len(t, g.e.Completions(), 1)
}

// The full blocks of an aborted request stay cached as free blocks, as a
// completed request's do: a later request of its prefix group hits them.
func TestAbortedRequestsPrefixStaysCached(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	first := RequestSpec{ID: 0, PromptTokens: 300, OutputTokens: 50, PrefixGroup: 1, PrefixTokens: 256}
	g.inject(first, 0)
	g.until(1500) // prefilled in [100, 1100); decoding
	require.True(t, g.abort(0, 1500))
	g.until(math.MaxInt64)
	require.Equal(t, g.e.kv.total(), g.e.Status().FreeKVBlocks)
	next := RequestSpec{ID: 1, ArrivalUs: g.e.Now(), PromptTokens: 400, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 256}
	require.Equal(t, int64(16), g.e.CachedPrefixBlocks(AppendBlockHashes(nil, &next, 16, 400/16)))
	g.inject(next, g.e.Now())
	res := g.finish()
	require.Equal(t, int64(256), res.CachedPromptTokens, "the second request's 256 prefix tokens come from the aborted one's blocks")
	require.Equal(t, int64(256), g.completion(1).CachedTokens)
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, TimedOut: 1}, res.Requests)
}

// INV-1 with timed-out requests: every offered request is completed,
// dropped, timed out or still inside, at a horizon and at the end; the
// engine's status agrees; the JSON reports timed_out only when there are.
func TestAbortAccounting(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 30 // 480 tokens: request 3 is unservable
	reqs := []RequestSpec{
		{ID: 0, PromptTokens: 100, OutputTokens: 5},
		{ID: 1, PromptTokens: 100, OutputTokens: 5},
		{ID: 2, PromptTokens: 100, OutputTokens: 5},
		{ID: 3, PromptTokens: 600, OutputTokens: 5},
		{ID: 4, ArrivalUs: 9000, PromptTokens: 100, OutputTokens: 5},
	}
	run := func(horizon int64) (*abortRig, *Result) {
		g := newAbortRig(t, cfg)
		for _, q := range reqs {
			g.inject(q, q.ArrivalUs)
		}
		g.until(50)
		require.True(t, g.abort(2, 50))
		g.until(1500)
		require.True(t, g.abort(1, 1500))
		require.Equal(t, int64(3), g.e.Status().InFlight, "requests 0, 1 (until its step ends) and 4")
		g.until(horizon)
		res, err := g.e.Finish()
		require.NoError(t, err)
		return g, res
	}
	_, res := run(2000)
	require.Equal(t, Counts{Offered: 5, Injected: 4, Dropped: 1, TimedOut: 1, StillRunning: 2}, res.Requests,
		"at 2000 request 1's abort waits for its step's end at 2100")
	g, res := run(math.MaxInt64)
	require.Equal(t, Counts{Offered: 5, Injected: 5, Completed: 2, Dropped: 1, TimedOut: 2}, res.Requests)
	require.Zero(t, g.e.Status().InFlight)
	require.Equal(t, int64(2), res.TTFT.Count)
	// Output tokens count what the engine generated: request 1's two
	// (its second, at the end of the step in flight, was never delivered).
	require.Equal(t, int64(5+5+2), res.OutputTokens)
	require.Equal(t, int64(1), g.completion(1).OutputTokens)
	b, err := json.Marshal(res.Requests)
	require.NoError(t, err)
	require.Contains(t, string(b), `"timed_out":2`)
	b, err = json.Marshal(Counts{Offered: 1, Completed: 1})
	require.NoError(t, err)
	require.NotContains(t, string(b), "timed_out")
}

// abortRun drives a random workload with random client timeouts: each
// request is injected up to 2 ms after it is sent (so some are aborted
// before they arrive) and a random half give up a random time after
// sending; now and then a request sent so far gives up just as the next
// event is due. An abort due at an event's time is applied before or after
// that event at random. It returns the result, every completion, and how
// many timed-out requests left from each place (checkAbortRun).
func abortRun(t *testing.T, seed uint64) (*Result, []Completion, map[string]int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	cfg := Config{
		Engine: EngineConfig{
			VLLMKnobs: physics.VLLMKnobs{
				MaxNumSeqs:            int64(1 + r.IntN(16)),
				MaxBatchedTokens:      int64(64 + r.IntN(1024)),
				ChunkedPrefillEnabled: r.IntN(4) != 0,
				BlockSizeTokens:       int64([]int{1, 8, 16}[r.IntN(3)]),
				TotalKVBlocksGPU:      int64(20 + r.IntN(200)),
				PrefixCachingEnabled:  r.IntN(3) != 0,
			},
			LongPrefillThreshold: int64([]int{0, 0, 128}[r.IntN(3)]),
		},
		Policies: Policies{Scheduler: SchedulerPolicy(r.IntN(4))},
		Latency:  constModel{step: int64(1 + r.IntN(2000)), arrive: int64(r.IntN(500)), depart: int64(r.IntN(100))},
		Options:  Options{Exhaustive: true},
	}
	if cfg.Engine.PrefixCachingEnabled && r.IntN(2) == 0 {
		cfg.Engine.TotalKVBlocksCPU, cfg.Engine.OffloadThreshold, cfg.Engine.CPUOffloading = int64(1+r.IntN(100)), r.Float64(), true
	}
	reqs := randomWorkload(r, 60+r.IntN(80))
	type abort struct{ id, at int64 }
	var aborts []abort
	inject := make([]int64, len(reqs))
	for i, q := range reqs {
		inject[i] = q.ArrivalUs + int64(r.IntN(3))*int64(r.IntN(1000))
		if r.IntN(2) == 0 {
			aborts = append(aborts, abort{q.ID, q.ArrivalUs + int64(r.ExpFloat64()*20_000)})
		}
	}
	slices.SortStableFunc(aborts, func(a, b abort) int { return cmp.Compare(a.at, b.at) })
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	var done []Completion
	accepted := map[int64]bool{}
	abortAt := map[int64]int64{}
	abortOne := func(id, at int64) {
		got, err := e.Abort(id, at)
		require.NoError(t, err)
		if got {
			require.False(t, accepted[id], "request %d aborted twice", id)
			accepted[id], abortAt[id] = true, at
		}
		done = append(done, e.Completions()...)
	}
	const never = math.MaxInt64
	for next := 0; ; {
		ev, in, ab := int64(never), int64(never), int64(never)
		if t0, ok := e.NextEventUs(); ok {
			ev = t0
		}
		if next < len(reqs) {
			in = reqs[next].ArrivalUs
		}
		if len(aborts) > 0 {
			ab = aborts[0].at
		}
		switch {
		case ev == never && in == never && ab == never:
			res, err := e.Finish()
			require.NoError(t, err)
			kinds := checkAbortRun(t, e, res, reqs, done, accepted, abortAt)
			return res, done, kinds
		case in <= ab && in <= ev:
			// The router hands a request over when it is sent, for the
			// instance to receive it then or later.
			require.NoError(t, e.Inject(reqs[next], inject[next]))
			next++
		case ab < ev || (ab == ev && r.IntN(2) == 0):
			a := aborts[0]
			aborts = aborts[1:]
			abortOne(a.id, a.at)
		case next > 0 && r.IntN(10) == 0:
			// A client that gives up just as an event is due, often a
			// step's end: any request sent so far, gone or not.
			abortOne(reqs[r.IntN(next)].ID, ev)
		default:
			require.NoError(t, e.Advance())
			done = append(done, e.Completions()...)
		}
	}
}

// checkAbortRun checks a run's end and sorts its timed-out requests by
// where they were when their client gave up.
func checkAbortRun(t *testing.T, e *Engine, res *Result, reqs []RequestSpec, done []Completion, accepted map[int64]bool,
	abortAt map[int64]int64) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	st := e.Status()
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks, "every block is free at the end")
	require.Zero(t, st.InFlight)
	// Every request is reported once, and exactly the accepted aborts as
	// timed out.
	require.Len(t, done, len(reqs))
	seen := map[int64]bool{}
	var timedOut int64
	for _, c := range done {
		require.False(t, seen[c.ID], "request %d reported twice", c.ID)
		seen[c.ID] = true
		if c.TimedOut {
			timedOut++
			require.True(t, accepted[c.ID], "request %d timed out without an accepted abort", c.ID)
			require.Less(t, c.OutputTokens, reqs[c.ID].OutputTokens)
			require.Equal(t, c.FirstTokenUs == 0, c.OutputTokens == 0)
			require.Zero(t, c.FinishedUs)
			at := abortAt[c.ID]
			require.GreaterOrEqual(t, c.DepartedUs, at)
			switch {
			case c.DepartedUs > at:
				kinds["running, at its step's end"]++
			case c.EnqueuedUs == 0 && c.InjectedUs > at:
				kinds["not yet arrived"]++
			case c.EnqueuedUs == 0:
				kinds["in API overhead"]++
			case c.Preemptions > 0:
				kinds["preempted"]++ // waiting or running again
			case c.FirstScheduledUs == 0:
				kinds["queued"]++
			default:
				kinds["running, between steps"]++
			}
		} else {
			require.False(t, accepted[c.ID], "request %d: an accepted abort but it did not time out", c.ID)
		}
	}
	require.Equal(t, timedOut, res.Requests.TimedOut)
	require.Equal(t, int64(len(reqs)), res.Requests.Completed+res.Requests.Dropped+res.Requests.TimedOut)
	require.Equal(t, res.Requests.Offered, res.Requests.Injected)
	require.Equal(t, res.Requests.Completed, res.TTFT.Count)
	return kinds
}

// Random workloads with random client timeouts, every invariant checked in
// full after every step and abort: every request ends completed, dropped
// or timed out, each reported once, with every KV block free at the end.
func TestAbortsOnRandomRuns(t *testing.T) {
	var timedOut, completed int64
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			res, _, k := abortRun(t, seed)
			timedOut += res.Requests.TimedOut
			completed += res.Requests.Completed
			for name, n := range k {
				kinds[name] += n
			}
		})
	}
	require.Positive(t, completed)
	t.Logf("%d timed out: %v", timedOut, kinds)
	for _, name := range []string{"not yet arrived", "in API overhead", "queued", "preempted", "running, between steps", "running, at its step's end"} {
		require.Positive(t, kinds[name], "no abort %s", name)
	}
}

// The same calls give the same run, byte for byte (INV-6).
func TestAbortsAreDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		a, da, _ := abortRun(t, seed)
		b, db, _ := abortRun(t, seed)
		ja, err := json.Marshal(a)
		require.NoError(t, err)
		jb, err := json.Marshal(b)
		require.NoError(t, err)
		require.Equal(t, string(ja), string(jb))
		require.Equal(t, da, db)
		require.Positive(t, a.Requests.TimedOut)
	}
}
