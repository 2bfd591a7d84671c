package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// leftCall is one admit.Observer call.
type leftCall struct {
	id, atUs int64
	tenant   int32
	prompt   int64
}

// recordingAdmission wraps a policy and records its admissions and the
// departures the cluster reports to it, forwarding them.
type recordingAdmission struct {
	admit.Policy
	admitted map[int64]bool
	left     []leftCall
	lastUs   int64
	t        *testing.T
}

func (r *recordingAdmission) Admit(req *sim.RequestSpec, nowUs int64) (bool, string) {
	require.GreaterOrEqual(r.t, nowUs, r.lastUs, "time never goes back across Admit and Left")
	r.lastUs = nowUs
	ok, reason := r.Policy.Admit(req, nowUs)
	if ok {
		r.admitted[req.ID] = true
	}
	return ok, reason
}

func (r *recordingAdmission) Left(req *sim.RequestSpec, nowUs int64) {
	require.GreaterOrEqual(r.t, nowUs, r.lastUs, "time never goes back across Admit and Left")
	r.lastUs = nowUs
	r.left = append(r.left, leftCall{id: req.ID, atUs: nowUs, tenant: req.Tenant, prompt: req.PromptTokens})
	if o, ok := r.Policy.(admit.Observer); ok {
		o.Left(req, nowUs)
	}
}

// observedCluster is a random cluster of 2-4 instances whose requests
// leave every way there is: completed, dropped (small KV caches), refused
// as too long (instance 0's context), timed out; with or without
// admission latency and a horizon. Its admission is a per-tenant quota.
func observedCluster(t *testing.T, seed uint64, workers int) (Config, []sim.RequestSpec, *recordingAdmission) {
	r := rand.New(rand.NewPCG(seed, 7))
	n := 2 + r.IntN(3)
	var ins []Instance
	for i := 0; i < n; i++ {
		cfg := sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{
				MaxNumSeqs: int64(1 + r.IntN(8)), MaxBatchedTokens: int64(256 + r.IntN(512)), ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: int64(40 + r.IntN(100)), PrefixCachingEnabled: r.IntN(2) == 0,
			}},
			Latency: &sim.Blackbox{Alpha: [3]float64{float64(r.IntN(300)), 0.1, 1}, Beta: [3]float64{float64(500 + r.IntN(2000)), 1, 20}},
			Options: sim.Options{Exhaustive: true},
		}
		if i == 0 {
			cfg.Engine.MaxModelLen = 900
		}
		ins = append(ins, Instance{ID: InstanceID(i, n), Config: cfg})
	}
	rt, err := route.New(route.Names[r.IntN(len(route.Names))], n, route.Params{})
	require.NoError(t, err)
	q, err := admit.NewTenantQuota(int64(1+r.IntN(4)), []int64{int64(r.IntN(3))})
	require.NoError(t, err)
	rec := &recordingAdmission{Policy: q, admitted: map[int64]bool{}, t: t}
	cfg := Config{Instances: ins, Admission: rec, Routing: rt, RecordRequests: true, Workers: workers,
		AdmissionLatencyUs: []int64{0, 300}[r.IntN(2)], RoutingLatencyUs: []int64{0, 200}[r.IntN(2)]}
	if r.IntN(3) == 0 {
		cfg.HorizonUs = int64(50_000 + r.IntN(500_000))
	}
	reqs := make([]sim.RequestSpec, 100+r.IntN(200))
	var at int64
	for i := range reqs {
		at += int64(r.ExpFloat64() * 3000)
		reqs[i] = sim.RequestSpec{ID: int64(i), ArrivalUs: at, PromptTokens: int64(1 + r.IntN(1500)), OutputTokens: int64(1 + r.IntN(100)),
			Tenant: int32(r.IntN(3))}
		if r.IntN(3) == 0 {
			reqs[i].TimeoutUs = int64(1 + r.IntN(100_000))
		}
	}
	return cfg, reqs, rec
}

// TestAdmissionObserverSeesEveryDeparture: the admission policy is told of
// every admitted request's departure exactly once, at its departure time,
// with its spec, in the same order for one worker or three; departures
// after the horizon are not reported, rejected requests never are.
func TestAdmissionObserverSeesEveryDeparture(t *testing.T) {
	outcomes := map[string]int{}
	var rejected int64
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			run := func(workers int) (*Result, *recordingAdmission, []sim.RequestSpec, string) {
				cfg, reqs, rec := observedCluster(t, seed, workers)
				c, err := New(cfg, NewSliceSource(reqs))
				require.NoError(t, err)
				res, err := c.Run()
				require.NoError(t, err)
				out, err := json.Marshal(res)
				require.NoError(t, err)
				return res, rec, reqs, string(out)
			}
			res, rec, reqs, a := run(0)
			_, rec3, _, b := run(3)
			require.Equal(t, a, b, "one worker or three: the same result")
			require.Equal(t, rec.left, rec3.left, "one worker or three: the same departures, in the same order")

			horizon := int64(0)
			if cfg, _, _ := observedCluster(t, seed, 0); cfg.HorizonUs > 0 {
				horizon = cfg.HorizonUs
			}
			want := map[int64]int64{} // id → departure
			for _, r := range res.PerRequest {
				outcomes[r.Outcome]++
				if r.Outcome == Rejected.String() {
					require.False(t, rec.admitted[r.ID])
					continue
				}
				require.True(t, rec.admitted[r.ID], "request %d left without being admitted", r.ID)
				if horizon == 0 || r.DepartedUs <= horizon {
					want[r.ID] = r.DepartedUs
				}
			}
			got := map[int64]int64{}
			for _, l := range rec.left {
				_, twice := got[l.id]
				require.False(t, twice, "request %d reported twice", l.id)
				got[l.id] = l.atUs
				spec := reqs[l.id]
				require.Equal(t, [2]int64{int64(spec.Tenant), spec.PromptTokens}, [2]int64{int64(l.tenant), l.prompt}, "request %d's own spec", l.id)
			}
			require.Equal(t, want, got)
			rejected += res.Requests.Rejected
			if horizon == 0 {
				q := rec.Policy.(*admit.TenantQuota)
				for tn := int32(0); tn < 3; tn++ {
					require.Zero(t, q.InFlight(tn), "every place is free at the end")
				}
			}
		})
	}
	// Every way out is exercised, and the quota does reject.
	for _, o := range []Outcome{Completed, Dropped, TooLong, TimedOut, Rejected} {
		require.Greater(t, outcomes[o.String()], 0, "outcome %s", o)
	}
	require.Greater(t, rejected, int64(0))
}

// cancelAfter is a source that cancels a context when its k-th request is
// taken (it does not observe completions, so workers stay usable).
type cancelAfter struct {
	Source
	k, taken int
	cancel   context.CancelFunc
}

func (s *cancelAfter) Next() sim.RequestSpec {
	s.taken++
	if s.taken == s.k {
		s.cancel()
	}
	return s.Source.Next()
}

// longCluster is a cluster of 3 instances serving many requests: enough
// instants for several of RunContext's looks at its context.
func longCluster(t *testing.T, workers int, horizonUs int64) (Config, []sim.RequestSpec) {
	r := rand.New(rand.NewPCG(11, 3))
	var ins []Instance
	for i := 0; i < 3; i++ {
		ins = append(ins, Instance{ID: InstanceID(i, 3), Config: sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 512, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: 400, PrefixCachingEnabled: true}},
			Latency: &sim.Blackbox{Alpha: [3]float64{100, 0.1, 1}, Beta: [3]float64{800, 1, 20}},
		}})
	}
	rt, err := route.New(route.LeastLoadedName, 3, route.Params{})
	require.NoError(t, err)
	q, err := admit.NewTenantQuota(6, nil)
	require.NoError(t, err)
	reqs := make([]sim.RequestSpec, 3000)
	var at int64
	for i := range reqs {
		at += int64(r.ExpFloat64() * 2000)
		reqs[i] = sim.RequestSpec{ID: int64(i), ArrivalUs: at, PromptTokens: int64(1 + r.IntN(800)), OutputTokens: int64(1 + r.IntN(60)), Tenant: int32(r.IntN(2))}
	}
	return Config{Instances: ins, Admission: q, Routing: rt, Workers: workers, HorizonUs: horizonUs, RecordRequests: true}, reqs
}

func resultJSON(t *testing.T, res *Result) string {
	out, err := json.Marshal(res)
	require.NoError(t, err)
	return string(out)
}

func requireConserved(t *testing.T, q Counts) {
	in := q.AwaitingRouting + q.InTransit + q.StillInAPI + q.StillQueued + q.StillRunning
	require.Equal(t, q.Arrived, q.Rejected+q.Completed+q.DroppedUnservable+q.RejectedTooLong+q.TimedOut+in, "CL-1: %+v", q)
}

// waitGoroutines waits (a few seconds at most) for the goroutine count to
// fall back to n: stopped workers exit on their own time.
func waitGoroutines(t *testing.T, n int) {
	for i := 0; runtime.NumGoroutine() > n && i < 400; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), n, "the workers are stopped")
}

func TestRunContext(t *testing.T) {
	t.Run("not cancelled: Run's result", func(t *testing.T) {
		for _, workers := range []int{0, 3} {
			for _, horizon := range []int64{0, 900_000} {
				cfg, reqs := longCluster(t, workers, horizon)
				c, err := New(cfg, NewSliceSource(reqs))
				require.NoError(t, err)
				want, err := c.Run()
				require.NoError(t, err)
				for _, ctx := range []context.Context{context.Background(), context.WithoutCancel(context.Background())} {
					cctx, cancel := context.WithCancel(ctx)
					cfg, reqs := longCluster(t, workers, horizon)
					c, err := New(cfg, NewSliceSource(reqs))
					require.NoError(t, err)
					got, err := c.RunContext(cctx)
					cancel()
					require.NoError(t, err)
					require.Equal(t, resultJSON(t, want), resultJSON(t, got), "workers %d, horizon %d", workers, horizon)
				}
			}
		}
	})

	t.Run("cancelled mid-run: a horizon at the stop", func(t *testing.T) {
		base := runtime.NumGoroutine()
		for _, workers := range []int{0, 3} {
			cfg, reqs := longCluster(t, workers, 0)
			ctx, cancel := context.WithCancel(context.Background())
			src := &cancelAfter{Source: NewSliceSource(reqs), k: 500, cancel: cancel}
			c, err := New(cfg, src)
			require.NoError(t, err)
			res, err := c.RunContext(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.NotNil(t, res)
			q := res.Requests
			requireConserved(t, q)
			require.GreaterOrEqual(t, q.Arrived, int64(500))
			require.Less(t, q.Arrived, int64(len(reqs)), "stopped early")
			require.Greater(t, q.Completed, int64(0))
			require.Less(t, q.Completed, int64(len(reqs)))
			// Every event before the next one left was processed, none
			// after: the same result as a horizon just before it (with
			// workers too, whose last window's departures were processed).
			next, ok := c.NextEventUs()
			require.True(t, ok)
			require.GreaterOrEqual(t, next, c.Now())
			cfg, reqs = longCluster(t, 0, next-1)
			h, err := New(cfg, NewSliceSource(reqs))
			require.NoError(t, err)
			want, err := h.Run()
			require.NoError(t, err)
			require.Equal(t, resultJSON(t, want), resultJSON(t, res), "workers %d", workers)
		}
		waitGoroutines(t, base)
	})

	t.Run("cancelled before the start", func(t *testing.T) {
		base := runtime.NumGoroutine()
		for _, workers := range []int{0, 3} {
			cfg, reqs := longCluster(t, workers, 0)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			c, err := New(cfg, NewSliceSource(reqs))
			require.NoError(t, err)
			res, err := c.RunContext(ctx)
			require.True(t, errors.Is(err, context.Canceled))
			require.NotNil(t, res)
			require.Zero(t, res.Requests.Completed)
			require.Zero(t, res.Requests.Arrived, "no event processed")
			requireConserved(t, res.Requests)
		}
		waitGoroutines(t, base)
	})

	t.Run("deadline", func(t *testing.T) {
		cfg, reqs := longCluster(t, 0, 0)
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		c, err := New(cfg, NewSliceSource(reqs))
		require.NoError(t, err)
		res, err := c.RunContext(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotNil(t, res)
	})
}

// TestRunContextStopsAfterAWindowsDepartures: a context found done right
// after a parallel window, with departures the window reported still
// pending, is acted on only once they are processed: the result is still
// a horizon's just before the next event left.
func TestRunContextStopsAfterAWindowsDepartures(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("workers need GOMAXPROCS >= 2")
	}
	cfg, reqs := longCluster(t, 3, 0)
	c, err := New(cfg, NewSliceSource(reqs))
	require.NoError(t, err)
	require.True(t, c.parallelOK())
	// Drive the run as RunContext does until a window leaves departures
	// before its end pending.
	c.startWorkers()
	pending := false
	for i := 0; i < 100_000 && !pending; i++ {
		at, ok := c.NextEventUs()
		require.True(t, ok)
		if c.inst.len() > 0 {
			if _, next := c.inst.top(); next >= at && next < c.bound() {
				b := c.bound() // bound changes nothing
				require.NoError(t, c.parallelWindow(b))
				c.windowEnd = b
				at, _ = c.NextEventUs()
				pending = at < b
				continue
			}
		}
		require.NoError(t, c.Step())
	}
	c.stopWorkers()
	require.True(t, pending, "a window with departures left to process")
	require.Greater(t, c.windowEnd, c.Now())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := c.RunContext(ctx)
	require.ErrorIs(t, err, context.Canceled)
	next, ok := c.NextEventUs()
	require.True(t, ok)
	require.GreaterOrEqual(t, next, c.windowEnd, "the window's departures were processed first")
	requireConserved(t, res.Requests)
	cfg, reqs = longCluster(t, 0, next-1)
	h, err := New(cfg, NewSliceSource(reqs))
	require.NoError(t, err)
	want, err := h.Run()
	require.NoError(t, err)
	require.Equal(t, resultJSON(t, want), resultJSON(t, res))
}
