package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blis-sim/blis/physics"
)

// benchWorkload is a Poisson stream at rate req/s with log-normal-ish
// prompts (mean ~1000) and outputs (mean ~200); a quarter share one of
// eight system prompts.
func benchWorkload(n int, rate float64) []RequestSpec {
	r := rand.New(rand.NewPCG(42, 1))
	out := make([]RequestSpec, n)
	var t float64
	for i := range out {
		t += r.ExpFloat64() / rate
		p := int64(200 + r.ExpFloat64()*800)
		o := int64(20 + r.ExpFloat64()*180)
		out[i] = RequestSpec{ID: int64(i), ArrivalUs: int64(t * 1e6), PromptTokens: p, OutputTokens: o}
		if r.IntN(4) == 0 {
			out[i].PrefixGroup = int32(1 + r.IntN(8))
			out[i].PrefixTokens = min(p, 512)
		}
	}
	return out
}

func llamaH100(tb testing.TB) *physics.PhysicsConfig {
	m, err := physics.LoadModel("llama-3.1-8b")
	if err != nil {
		tb.Fatal(err)
	}
	h, err := physics.LoadHardware("h100-sxm")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := physics.NewPhysicsConfig(m, h, 1, physics.DefaultVLLMKnobs())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkRun measures the simulator on one Llama-3.1-8B/H100 instance
// with the roofline model at ~80% of its throughput, vLLM's default request
// pipeline (async scheduling, output delay):
//
//	go test ./sim -run '^$' -bench Run -benchmem -count 3
//
// µs/req and allocs/req are per simulated request.
func BenchmarkRun(b *testing.B) {
	cfgP := llamaH100(b)
	for _, n := range []int{10_000, 100_000} {
		reqs := benchWorkload(n, 20)
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var steps int64
			for b.Loop() {
				s, err := New(Config{Engine: EngineConfig{VLLMKnobs: cfgP.Knobs, Pipeline: DefaultPipeline()}, Latency: DefaultRoofline(cfgP)}, reqs)
				if err != nil {
					b.Fatal(err)
				}
				res, err := s.Run()
				if err != nil {
					b.Fatal(err)
				}
				steps = res.Steps
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1000, "µs/req")
			b.ReportMetric(float64(steps), "steps")
		})
	}
}

// BenchmarkSchedulerOverload runs each queue policy under overload (10^5
// requests/s, ~500 times what the instance serves), where the waiting
// queue holds nearly the whole workload: the cost per request must stay
// flat as the workload grows (O(log n) queue operations).
//
//	go test ./sim -run '^$' -bench SchedulerOverload -benchmem
func BenchmarkSchedulerOverload(b *testing.B) {
	cfgP := llamaH100(b)
	policies := []Policies{
		{Scheduler: FCFS},
		{Scheduler: PriorityFCFS, Priority: PriorityPolicy{Kind: PrioritySLOBased, AgeWeight: 1}},
		{Scheduler: SJF},
		{Scheduler: ReversePriority, Priority: PriorityPolicy{Kind: PriorityInvertedSLO, AgeWeight: 1}},
	}
	for _, n := range []int{100_000, 400_000} {
		reqs := benchWorkload(n, 1e5)
		for i := range reqs {
			reqs[i].Priority = int32(i % 4)
		}
		for _, pol := range policies {
			b.Run(fmt.Sprintf("%s/requests=%d", pol.Scheduler, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s, err := New(Config{Engine: EngineConfig{VLLMKnobs: cfgP.Knobs, Pipeline: DefaultPipeline()}, Policies: pol,
						Latency: DefaultRoofline(cfgP), Options: Options{BoundedMemory: true}}, reqs)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1000, "µs/req")
			})
		}
	}
}

// BenchmarkSteadyState serves the BenchmarkRun workload of 10^4 requests
// again and again on one engine (each pass shifted in time and ids), after
// a first pass that warms it: the cost of a request in steady state, with
// allocs/op the allocations of a whole pass (0: none per request).
// Bounded memory is on, as exact percentiles keep a sample per request.
//
//	go test ./sim -run '^$' -bench SteadyState -benchmem
func BenchmarkSteadyState(b *testing.B) {
	cfgP := llamaH100(b)
	e, err := NewEngine(Config{Engine: EngineConfig{VLLMKnobs: cfgP.Knobs, Pipeline: DefaultPipeline()},
		Latency: DefaultRoofline(cfgP), Options: Options{BoundedMemory: true}})
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(10_000, 20)
	pass := make([]RequestSpec, len(reqs))
	var shift int64
	serve := func() {
		for i, r := range reqs {
			r.ArrivalUs += e.Now() + 1_000_000
			r.ID += shift
			pass[i] = r
		}
		shift += int64(len(reqs))
		drive(b, e, pass)
	}
	serve()
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(reqs))/1000, "µs/req")
}
