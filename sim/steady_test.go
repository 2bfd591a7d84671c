package sim

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// drive injects reqs, shifted by dt µs and dID ids, at their arrival
// times and advances the engine until it is idle, as Sim.Run does.
func drive(tb testing.TB, e *Engine, reqs []RequestSpec) {
	k := 0
	for {
		t, ok := e.NextEventUs()
		for k < len(reqs) && (!ok || reqs[k].ArrivalUs <= t) {
			if err := e.Inject(reqs[k], reqs[k].ArrivalUs); err != nil {
				tb.Fatal(err)
			}
			k++
			t, ok = e.NextEventUs()
		}
		if !ok {
			return
		}
		if err := e.Advance(); err != nil {
			tb.Fatal(err)
		}
	}
}

// shifted is reqs moved by dt µs, with ids moved by dID.
func shifted(reqs []RequestSpec, dt, dID int64) []RequestSpec {
	out := make([]RequestSpec, len(reqs))
	for i, r := range reqs {
		r.ArrivalUs += dt
		r.ID += dID
		out[i] = r
	}
	return out
}

// mallocs runs f and returns the heap allocations it made.
func mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// The engine allocates nothing in steady state. Steady
// state is an engine that has served a workload once: serving it again
// (shifted in time and ids, so that the prefix cache, the request slots
// and the pools are warm but no request is the same) must not allocate.
// Bounded memory is on: exact latency percentiles keep one sample per
// request by design (a slice that grows O(log n) times).
func TestSteadyStateAllocatesNothing(t *testing.T) {
	cfgP := llamaH100(t)
	e, err := NewEngine(Config{Engine: EngineConfig{VLLMKnobs: cfgP.Knobs, Pipeline: DefaultPipeline()},
		Latency: DefaultRoofline(cfgP), Options: Options{BoundedMemory: true}})
	require.NoError(t, err)
	reqs := benchWorkload(20_000, 20)
	drive(t, e, reqs)
	again := shifted(reqs, e.Now()+1_000_000, int64(len(reqs)))
	n := mallocs(func() { drive(t, e, again) })
	require.Zero(t, n, "allocations serving %d requests again", len(again))
}
