package experiment

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/blis-sim/blis/cluster"
)

// BenchmarkAutoscaledDay is the autoscaling work's speed target: 24 simulated hours of
// diurnal-autoscale, uncompressed, at a mean of 50 requests/s (4.3M
// requests), its HPA free to scale between 2 and 32 replicas; target
// < 60 s on the 2-core machine, memory bounded by the work in flight
// (terminated instances are retired). Run it with
//
//	go test ./experiment -run '^$' -bench AutoscaledDay -benchtime 1x
//
// BLIS_BENCH_HOURS shortens the day for a quick look.
func BenchmarkAutoscaledDay(b *testing.B) {
	benchDay(b, "diurnal-autoscale", 24, [][2]string{{"workload.spec.rate", "50"}, {"workload.spec.arrival.time_compression", "1"},
		{"deployment.pools[0].max_replicas", "32"}})
}

// benchDay runs a built-in day: scenario with sets, its duration hours
// (BLIS_BENCH_HOURS instead, if given), reporting the instances its first
// pool started and the heap the process reserved.
func benchDay(b *testing.B, scenario string, hours float64, sets [][2]string) {
	if h, err := strconv.ParseFloat(os.Getenv("BLIS_BENCH_HOURS"), 64); err == nil && h > 0 {
		hours = h
	}
	sets = append(sets, [2]string{"workload.spec.duration_s", strconv.FormatFloat(hours*3600, 'f', -1, 64)})
	for range b.N {
		d, err := LoadScenario(scenario)
		if err != nil {
			b.Fatal(err)
		}
		for _, kv := range sets {
			if err := d.Set(kv[0], kv[1], "bench"); err != nil {
				b.Fatal(err)
			}
		}
		e, err := d.Resolve()
		if err != nil {
			b.Fatal(err)
		}
		m := benchRun(b, e)
		b.ReportMetric(float64(m.Fleet.Pools[0].Created), "instances-created")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-MiB")
	}
}

// BenchmarkFleetDayHour is the fleet-day built-in experiment's scale
// benchmark: one simulated hour of it (about 3.6 M requests on 64-160
// Llama-3.1-8B/H100 replicas under an HPA, weighted routing), the day's
// first hour unless BLIS_BENCH_HOURS asks for more (24: the whole day,
// 86.4 M requests; docs/cluster.md states what was measured):
//
//	go test ./experiment -run '^$' -bench FleetDayHour -benchtime 1x
func BenchmarkFleetDayHour(b *testing.B) { benchDay(b, "fleet-day", 1, nil) }

// BenchmarkDisaggregated1M is the disaggregation work's speed target: 1M requests on P/D 8:8
// (Llama-3.1-8B on H100, 8 prefill and 8 decode instances, llm-d's
// weighted scorers and prefix-threshold decider), on the workload of the
// colocated 1M-request benchmark (BenchmarkCluster: blis run's default
// synthetic workload, 8 requests/s per instance); target < 30 s on the
// 2-core machine. Run it with
//
//	go test ./experiment -run '^$' -bench Disaggregated1M -benchtime 1x
//
// BLIS_BENCH_REQUESTS sets another request count.
func BenchmarkDisaggregated1M(b *testing.B) {
	requests := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("BLIS_BENCH_REQUESTS")); err == nil && n > 0 {
		requests = n
	}
	text := `version: 1
deployment:
  pools:
    - {name: prefill, role: prefill, model: llama-3.1-8b, hardware: h100-sxm, replicas: 8}
    - {name: decode, role: decode, model: llama-3.1-8b, hardware: h100-sxm, replicas: 8}
workload:
  synthetic: {requests: ` + strconv.Itoa(requests) + `, rate: 128}
policies:
  routing: {type: weighted}
  disaggregation: {type: prefix-threshold}
`
	for range b.N {
		d, err := Parse([]byte(text), "bench")
		if err != nil {
			b.Fatal(err)
		}
		e, err := d.Resolve()
		if err != nil {
			b.Fatal(err)
		}
		m := benchRun(b, e)
		b.ReportMetric(float64(m.Disaggregation.Disaggregated), "disaggregated")
	}
}

// benchRun runs e on every CPU and reports its requests and the wall
// time per request.
func benchRun(b *testing.B, e *Experiment) *cluster.Result {
	e.Run.Workers = runtime.GOMAXPROCS(0)
	res, err := Run(context.Background(), e, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := res.Cluster
	b.ReportMetric(float64(m.Requests.Arrived), "requests")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(m.Requests.Arrived)/float64(b.N), "µs/request")
	return m
}
