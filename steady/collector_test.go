package steady

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// fifo feeds c a single-server FIFO queue (Lindley's recursion): n
// Poisson arrivals at lambda per second, service times from svc (µs),
// and first a queue of initial requests all arriving at time 0. It
// returns the clock at the end.
func fifo(c *Collector, r *rand.Rand, n, initial int, lambda float64, svc func() int64) int64 {
	type req struct{ arrive, start, done int64 }
	var reqs []req
	t := int64(0)
	for i := range n + initial {
		if i >= initial {
			t += int64(r.ExpFloat64() / lambda * 1e6)
		}
		reqs = append(reqs, req{arrive: t})
	}
	free := int64(0)
	for i := range reqs {
		reqs[i].start = max(free, reqs[i].arrive)
		reqs[i].done = reqs[i].start + svc()
		free = reqs[i].done
	}
	// Arrivals and completions in time order (an arrival first at a tie).
	j := 0
	for _, q := range reqs {
		for j < len(reqs) && reqs[j].done < q.arrive {
			d := reqs[j]
			c.Served(&Request{At: d.done, TTFTUs: d.done - d.arrive, E2EUs: d.done - d.arrive, SchedUs: d.start - d.arrive, OutputTokens: 1})
			c.Depart(d.done, 0)
			j++
		}
		c.Arrive(q.arrive)
		c.Route(q.arrive, 0)
		if c.Due() && c.Check(q.arrive) {
			return q.arrive
		}
	}
	end := reqs[len(reqs)-1].arrive
	for ; j < len(reqs); j++ {
		d := reqs[j]
		c.Served(&Request{At: d.done, TTFTUs: d.done - d.arrive, E2EUs: d.done - d.arrive, SchedUs: d.start - d.arrive, OutputTokens: 1})
		c.Depart(d.done, 0)
		end = d.done
	}
	return end
}

func expSvc(r *rand.Rand, meanUs float64) func() int64 {
	return func() int64 { return int64(meanUs * r.ExpFloat64()) }
}

func TestVerdictsOfAQueue(t *testing.T) {
	for _, tc := range []struct {
		rho  float64
		want string
	}{{0.7, Stable}, {1.05, Unstable}, {1.5, Unstable}} {
		r := rand.New(rand.NewPCG(21, uint64(tc.rho*100)))
		c := NewCollector(Config{Stationary: true})
		end := fifo(c, r, 60_000, 0, tc.rho*100, expSvc(r, 10_000))
		rep := c.Report(end)
		require.Equal(t, tc.want, rep.Stability.Verdict, "rho %v: %s", tc.rho, rep.Stability.Why)
		if tc.want == Stable {
			require.NotNil(t, rep.SteadyState)
		}
	}
}

// M/M/1's mean time in the system is 1/(μ − λ); the interval covers it.
func TestMM1SojournCoverage(t *testing.T) {
	covered, runs := 0, 40
	const mu, lambda = 100.0, 70.0
	want := 1e3 / (mu - lambda) // ms
	for k := range runs {
		r := rand.New(rand.NewPCG(31, uint64(k)))
		c := NewCollector(Config{Stationary: true})
		end := fifo(c, r, 100_000, 0, lambda, expSvc(r, 1e6/mu))
		rep := c.Report(end)
		require.NotNil(t, rep.SteadyState, rep.Stability.Why)
		if rep.SteadyState.E2E.Mean.Contains(want) {
			covered++
		}
	}
	require.GreaterOrEqual(t, float64(covered)/float64(runs), 0.85)
}

// A run that starts with 300 requests queued at time 0 has a transient
// the rule removes: the warm-up covers the time the queue takes to drain
// towards its stationary level.
func TestMSERRemovesAFullQueueStart(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	c := NewCollector(Config{Stationary: true})
	end := fifo(c, r, 40_000, 300, 70, expSvc(r, 10_000))
	rep := c.Report(end)
	ss := rep.SteadyState
	require.NotNil(t, ss)
	// 300 queued drain at μ − λ = 30 per second: about 10 s.
	require.Greater(t, ss.Warmup.RemovedS, 5.0, "%+v", ss.Warmup)
	require.Equal(t, Stable, rep.Stability.Verdict, rep.Stability.Why)
	// Without removal, the mean time in the system is biased up.
	cn := NewCollector(Config{Stationary: true, Warmup: WarmupNone})
	r = rand.New(rand.NewPCG(41, 42))
	end = fifo(cn, r, 40_000, 300, 70, expSvc(r, 10_000))
	none := cn.Report(end).SteadyState
	require.Greater(t, none.E2E.Mean.Estimate, ss.E2E.Mean.Estimate)
	require.Equal(t, "none", none.Warmup.Rule)
}

func TestStoppingRule(t *testing.T) {
	// Stable: stops once the mean E2E is within 5 %.
	r := rand.New(rand.NewPCG(51, 52))
	c := NewCollector(Config{Stationary: true, Rule: &Rule{Rel: 0.05, Metric: "e2e_mean_ms", MinArrivals: 1000}})
	end := fifo(c, r, 1_000_000, 0, 50, expSvc(r, 10_000))
	rep := c.Report(end)
	s := rep.Stability.Stop
	require.NotNil(t, s)
	require.Equal(t, StopPrecision, s.Reason)
	require.Less(t, s.Arrivals, int64(1_000_000))
	iv, ok := rep.Metric("e2e_mean_ms")
	require.True(t, ok)
	require.LessOrEqual(t, iv.Relative(), 0.05)
	// Unstable: stops early, unstable.
	c = NewCollector(Config{Stationary: true, Rule: &Rule{Rel: 0.05, Metric: "e2e_mean_ms", MinArrivals: 1000}})
	end = fifo(c, r, 1_000_000, 0, 120, expSvc(r, 10_000))
	rep = c.Report(end)
	require.Equal(t, StopUnstable, rep.Stability.Stop.Reason)
	require.Equal(t, Unstable, rep.Stability.Verdict)
	require.Less(t, rep.Stability.Stop.Arrivals, int64(100_000))
}

// A run whose requests all arrive at one instant (--rate 1e300) said
// "the run is too short to tell: 0 s analyzed; about 0 s (0 requests at
// this rate) would tell"; a short run whose analyzed half held no arrival
// said "0 requests at this rate". Neither advice can be followed.
func TestTooShortToTellGivesAdviceThatCanBeFollowed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c := NewCollector(Config{Stationary: true})
	end := fifo(c, r, 0, 50, 1, expSvc(r, 10_000))
	st := c.Report(end).Stability
	require.Equal(t, Indeterminate, st.Verdict)
	require.Equal(t, "every request arrived at the same instant: a burst has no arrival rate, so no steady state to tell", st.Why)

	c = NewCollector(Config{Stationary: true})
	end = fifo(c, r, 5, 0, 8, expSvc(r, 10_000))
	st = c.Report(end).Stability
	require.Equal(t, Indeterminate, st.Verdict)
	require.Greater(t, st.NeededRequests, int64(0), st.Why)
	require.NotContains(t, st.Why, "about 0 s")
	require.NotContains(t, st.Why, "(0 requests")
}

// --warmup 1000h on a 25 s run said "too short to tell: 0 s analyzed;
// about 50 s would tell": no run of that length tells, since the warm-up
// removes it all. It says so.
func TestAWarmupAsLongAsTheRunIsNamed(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := NewCollector(Config{Stationary: true, Warmup: WarmupFixed, WarmupUs: 3_600_000_000_000})
	end := fifo(c, r, 200, 0, 8, expSvc(r, 10_000))
	st := c.Report(end).Stability
	require.Equal(t, Indeterminate, st.Verdict)
	require.Regexp(t, `^the warm-up given \(3600000 s\) removes the whole run \(\d+ s of arrivals\): nothing is left to judge`, st.Why)
	require.NotContains(t, st.Why, "would tell")
}
