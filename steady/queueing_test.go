package steady_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/steady"
)

// Queueing fixtures: the simulator as a single-server queue, checked
// against queueing theory. One instance with a batch of one request
// (max_num_seqs 1), no async scheduling, no output delay and a blackbox
// step time is a FIFO single server; a request of one output token is
// served in one step, its time β0 + β1 · prompt tokens. Constant prompts
// make it M/D/1; exponentially distributed prompts (rounded to whole
// tokens, at least 1) with β0 = 0 make it M/G/1 with a service time
// close to exponential (M/M/1-like). The mean wait in the queue is
// Pollaczek–Khinchine's
//
//	Wq = λ E[S²] / (2 (1 − ρ)),  ρ = λ E[S]
//
// (Kleinrock 1975, vol. 1 §5.6), the simulator's scheduling delay.

// queue is one such run: n Poisson arrivals at lambda per second (after
// initial requests queued at time 0), service β0 µs + β1 µs per prompt
// token, prompts from prompt; analyzed by a collector of cfg.
func queue(t testing.TB, seed uint64, n, initial int, lambda, beta0, beta1 float64, prompt func(*rand.Rand) int64, cfg steady.Config) *sim.Result {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	reqs := make([]sim.RequestSpec, 0, n+initial)
	at := 0.0
	for i := range n + initial {
		if i >= initial {
			at += r.ExpFloat64() / lambda * 1e6
		}
		reqs = append(reqs, sim.RequestSpec{ID: int64(i), ArrivalUs: int64(at), PromptTokens: prompt(r), OutputTokens: 1})
	}
	knobs := physics.VLLMKnobs{MaxNumSeqs: 1, MaxBatchedTokens: 1 << 20, ChunkedPrefillEnabled: true, BlockSizeTokens: 16,
		TotalKVBlocksGPU: 1 << 16, GPUMemoryUtilization: 0.9}
	s, err := sim.New(sim.Config{Engine: sim.EngineConfig{VLLMKnobs: knobs}, Latency: &sim.Blackbox{Beta: [3]float64{beta0, beta1, 0}},
		Options: sim.Options{BoundedMemory: true}}, reqs)
	require.NoError(t, err)
	s.Analyze(steady.NewCollector(cfg))
	res, err := s.Run()
	require.NoError(t, err)
	return res
}

func constant(n int64) func(*rand.Rand) int64 { return func(*rand.Rand) int64 { return n } }

// exponential draws whole tokens as the workload's exponential
// distribution does: mean·Exp(1) rounded, at least 1.
func exponential(mean float64) func(*rand.Rand) int64 {
	return func(r *rand.Rand) int64 { return max(1, int64(math.Round(mean*r.ExpFloat64()))) }
}

// exponentialMoments are E[k] and E[k²] of exponential(mean)'s tokens.
func exponentialMoments(mean float64) (m1, m2 float64) {
	cdf := func(x float64) float64 { return 1 - math.Exp(-max(x, 0)/mean) }
	for k := 1; k < int(60*mean); k++ {
		lo, hi := float64(k)-0.5, float64(k)+0.5
		if k == 1 {
			lo = math.Inf(-1)
		}
		p := cdf(hi) - cdf(lo)
		m1 += p * float64(k)
		m2 += p * float64(k) * float64(k)
	}
	return m1, m2
}

var stationary = steady.Config{Stationary: true}

// md1 is an M/D/1 queue of service sUs at utilization rho: its run and
// Pollaczek–Khinchine's mean wait, ms.
func md1(t testing.TB, seed uint64, n int, rho, sUs float64) (*sim.Result, float64) {
	lambda := rho / (sUs / 1e6)
	res := queue(t, seed, n, 0, lambda, sUs, 0, constant(16), stationary)
	return res, lambda * (sUs / 1e6) * (sUs / 1e6) / (2 * (1 - rho)) * 1e3
}

// mm1 is the M/M/1-like queue: exponential prompts of mean 1,000 tokens
// at 10 µs each (a 10 ms mean service).
func mm1(t testing.TB, seed uint64, n int, rho float64) (*sim.Result, float64) {
	const mean, beta1 = 1000.0, 10.0
	m1, m2 := exponentialMoments(mean)
	es, es2 := beta1*m1/1e6, beta1*beta1*m2/1e12
	lambda := rho / es
	res := queue(t, seed, n, 0, lambda, 0, beta1, exponential(mean), stationary)
	return res, lambda * es2 / (2 * (1 - rho)) * 1e3
}

// coverage is the share of seeds whose steady-state mean wait's interval
// holds Pollaczek–Khinchine's value.
func coverage(t testing.TB, seeds, n int, run func(seed uint64) (*sim.Result, float64)) (float64, []string) {
	var misses []string
	covered := 0
	for k := range seeds {
		res, want := run(uint64(k + 1))
		ss := res.SteadyState
		require.NotNil(t, ss, "seed %d: %s", k+1, res.Stability.Why)
		require.NotNil(t, ss.Sched)
		if ss.Sched.Contains(want) {
			covered++
		} else {
			misses = append(misses, fmt.Sprintf("seed %d: %.3f [%.3f, %.3f] against %.3f", k+1, ss.Sched.Estimate, ss.Sched.Low, ss.Sched.High, want))
		}
	}
	return float64(covered) / float64(seeds), misses
}

// The simulator is an M/D/1 queue: its mean wait matches
// Pollaczek–Khinchine (11.67 ms at ρ = 0.7 and a 10 ms service) within
// its interval for most seeds. Quick: 20 seeds here, the full 100 in
// BenchmarkQueueingCoverage (.ci/run).
func TestMD1Coverage(t *testing.T) {
	cov, misses := coverage(t, 20, 20_000, func(seed uint64) (*sim.Result, float64) { return md1(t, seed, 20_000, 0.7, 10_000) })
	require.GreaterOrEqual(t, cov, 0.85, "%v", misses)
}

func TestMM1Coverage(t *testing.T) {
	cov, misses := coverage(t, 20, 20_000, func(seed uint64) (*sim.Result, float64) { return mm1(t, seed, 20_000, 0.7) })
	require.GreaterOrEqual(t, cov, 0.85, "%v", misses)
}

// The verdicts: stable at ρ = 0.7, unstable at ρ = 1.05, for both
// queues, on several seeds.
func TestQueueVerdicts(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		for _, tc := range []struct {
			rho  float64
			want string
		}{{0.7, steady.Stable}, {1.05, steady.Unstable}} {
			res, _ := md1(t, seed, 20_000, tc.rho, 10_000)
			require.Equal(t, tc.want, res.Stability.Verdict, "M/D/1 rho %v seed %d: %s", tc.rho, seed, res.Stability.Why)
			res, _ = mm1(t, seed, 20_000, tc.rho)
			require.Equal(t, tc.want, res.Stability.Verdict, "M/M/1 rho %v seed %d: %s", tc.rho, seed, res.Stability.Why)
		}
	}
	// Unstable: the backlog grows at λ − μ = 5 per second (λ = 105, μ =
	// 100).
	res, _ := md1(t, 1, 40_000, 1.05, 10_000)
	g := res.Stability.Growth
	require.True(t, g.Contains(5) || math.Abs(g.Estimate-5) < 1, "%+v", g)
	require.Nil(t, res.SteadyState, "no steady state: the warm-up never ends")
}

// MSER removes the transient of a queue that starts full: 500 requests
// queued at time 0 drain at μ − λ = 30 per second (ρ = 0.7, μ = 100),
// about 17 s; the estimate without removal is biased upwards, with it it
// covers Pollaczek–Khinchine's value.
func TestMSERRemovesAFullStart(t *testing.T) {
	const rho, sUs = 0.7, 10_000.0
	lambda := rho / (sUs / 1e6)
	want := lambda * (sUs / 1e6) * (sUs / 1e6) / (2 * (1 - rho)) * 1e3
	auto := queue(t, 3, 40_000, 500, lambda, sUs, 0, constant(16), stationary)
	none := queue(t, 3, 40_000, 500, lambda, sUs, 0, constant(16), steady.Config{Stationary: true, Warmup: steady.WarmupNone})
	require.Equal(t, steady.Stable, auto.Stability.Verdict, auto.Stability.Why)
	w := auto.SteadyState.Warmup
	require.Greater(t, w.RemovedS, 12.0, "%+v", w)
	require.Less(t, w.RemovedS, 200.0, "%+v", w)
	require.Greater(t, none.SteadyState.Sched.Estimate, want*1.5, "without removal the start's queue biases the mean wait")
	require.True(t, auto.SteadyState.Sched.Contains(want), "%+v against %.3f", auto.SteadyState.Sched, want)
}

// BenchmarkQueueingCoverage is the full coverage check: 100 seeds of
// each queue, 100,000 requests each; the interval must hold
// Pollaczek–Khinchine's value for at least 90 of them. It reports the
// coverage (.ci/run runs it).
//
//	go test ./steady -run '^$' -bench QueueingCoverage -benchtime 1x
func BenchmarkQueueingCoverage(b *testing.B) {
	for range b.N {
		md, mdMiss := coverage(b, 100, 100_000, func(seed uint64) (*sim.Result, float64) { return md1(b, seed, 100_000, 0.7, 10_000) })
		mm, mmMiss := coverage(b, 100, 100_000, func(seed uint64) (*sim.Result, float64) { return mm1(b, seed, 100_000, 0.7) })
		b.ReportMetric(md, "md1-coverage")
		b.ReportMetric(mm, "mm1-coverage")
		if md < 0.9 || mm < 0.9 {
			b.Fatalf("coverage M/D/1 %.2f, M/M/1 %.2f: %v %v", md, mm, mdMiss, mmMiss)
		}
	}
}
