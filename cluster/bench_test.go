package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
	ss "github.com/blis-sim/blis/steady"
)

// genSource streams blis run's default workload into a cluster one request
// ahead, so that a run of any length holds one request of its workload.
type genSource struct {
	g    *workload.Generator
	next sim.RequestSpec
	ok   bool
}

func newGenSource(tb testing.TB, n int, rate float64, seed int64) *genSource {
	w := workload.Spec{Requests: n, Rate: rate, PrefixGroups: 8, PrefixTokens: 512, PrefixFraction: 0.5}
	var err error
	if w.Prompt, err = workload.ParseDist("lognormal:mean=1024,cv=0.6,max=16384"); err != nil {
		tb.Fatal(err)
	}
	if w.Output, err = workload.ParseDist("lognormal:mean=256,cv=0.8,max=4096"); err != nil {
		tb.Fatal(err)
	}
	g, err := workload.NewGenerator(w, sim.NewRNG(seed).Stream(sim.StreamWorkload))
	if err != nil {
		tb.Fatal(err)
	}
	s := &genSource{g: g}
	s.advance()
	return s
}

func (s *genSource) advance() {
	s.ok = s.g.Remaining() > 0
	if s.ok {
		s.next, _ = s.g.Next()
	}
}

func (s *genSource) Peek() (int64, bool) { return s.next.ArrivalUs, s.ok }
func (s *genSource) Next() sim.RequestSpec {
	r := s.next
	s.advance()
	return r
}

// benchCluster runs requests of blis run's default workload (Llama-3.1-8B
// on H100s, roofline latency; prompts ~1,024 tokens, outputs ~256, half of
// them sharing one of 8 system prompts) at 8 requests/s per instance,
// about the rate one instance sustains, through n instances behind policy.
func benchCluster(b *testing.B, n, requests int, policy string) {
	spec := deploy.DefaultInstanceSpec()
	spec.Latency.Model = "roofline"
	d, err := deploy.Uniform(spec, n)
	if err != nil {
		b.Fatal(err)
	}
	built, err := d.Build(sim.NewRNG(1))
	if err != nil {
		b.Fatal(err)
	}
	built.Config.Workers = runtime.GOMAXPROCS(0)
	if v := os.Getenv("BLIS_BENCH_WORKERS"); v != "" {
		if built.Config.Workers, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	if v := os.Getenv("BLIS_BENCH_WINDOW_US"); v != "" { // the cost of time windows
		if built.Config.WindowUs, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var res *cluster.Result
	for b.Loop() {
		if built.Config.Routing, err = route.New(policy, n, route.Params{}); err != nil {
			b.Fatal(err)
		}
		if os.Getenv("BLIS_BENCH_ANALYSIS") == "1" { // the cost of the output analysis
			var ids []string
			for _, in := range built.Config.Instances {
				ids = append(ids, in.ID)
			}
			built.Config.Analysis = ss.NewCollector(ss.Config{Stationary: true, PerInstance: true, InstanceIDs: ids})
		}
		c, err := cluster.New(built.Config, newGenSource(b, requests, 8*float64(n), 1))
		if err != nil {
			b.Fatal(err)
		}
		if res, err = c.Run(); err != nil {
			b.Fatal(err)
		}
	}
	if res.Requests.Completed != int64(requests) {
		b.Fatalf("%d of %d requests completed", res.Requests.Completed, requests)
	}
	per := float64(b.N) * float64(requests)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per/1000, "µs/req")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-MiB")

}

// BenchmarkCluster measures whole cluster runs (the targets:
// 10,000 requests on 4 instances < 1 s; 1,000,000 on 16 with the weighted
// policy and prefix-affinity < 20 s):
//
//	go test ./cluster -run '^$' -bench 'Cluster/' -benchtime 1x
//
// µs/req is wall time per request, allocs/op and B/op are per run,
// heap-MiB is the heap the run reserved. Set BLIS_BENCH_LARGE=0 to skip
// the 1,000,000-request case (about 20 s), BLIS_BENCH_WINDOW_US to add
// time windows of that many µs.
func BenchmarkCluster(b *testing.B) {
	cases := []struct {
		n, requests int
		policy      string
	}{
		{4, 10_000, route.WeightedName},
		{16, 1_000_000, route.WeightedName},
	}
	for _, c := range cases {
		if c.requests > 100_000 && os.Getenv("BLIS_BENCH_LARGE") == "0" {
			continue
		}
		b.Run(fmt.Sprintf("requests=%d/instances=%d/%s", c.requests, c.n, c.policy), func(b *testing.B) {
			benchCluster(b, c.n, c.requests, c.policy)
		})
	}
}

// BenchmarkClusterScaling shows how the cost per request grows with the
// number of instances at the same load per instance, for each routing
// policy (100,000 requests; BLIS_BENCH_REQUESTS changes it; 1 to 1,024
// instances):
//
//	go test ./cluster -run '^$' -bench ClusterScaling -benchtime 1x
//	go test ./cluster -run '^$' -bench 'ClusterScaling/weighted/instances=128$' -benchtime 1x
func BenchmarkClusterScaling(b *testing.B) {
	requests := 100_000
	if v := os.Getenv("BLIS_BENCH_REQUESTS"); v != "" {
		var err error
		if requests, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, policy := range []string{route.RoundRobinName, route.LeastLoadedName, route.WeightedName} {
		for _, n := range []int{1, 4, 16, 64, 128, 1024} {
			b.Run(fmt.Sprintf("%s/instances=%d", policy, n), func(b *testing.B) { benchCluster(b, n, requests, policy) })
		}
	}
}

// BenchmarkRoute measures one weighted routing decision with the default
// scorers on 16 instances whose prefix indexes are warm, and its
// allocations (none expected).
func BenchmarkRoute(b *testing.B) {
	const n = 16
	p, err := route.New(route.WeightedName, n, route.Params{})
	if err != nil {
		b.Fatal(err)
	}
	var v route.View
	v.Resize(n)
	r := rand.New(rand.NewPCG(1, 2))
	reqs := make([]sim.RequestSpec, 4096)
	for i := range reqs {
		reqs[i] = sim.RequestSpec{ID: int64(i), PromptTokens: int64(200 + r.IntN(1800)), OutputTokens: 1}
		if r.IntN(2) == 0 {
			reqs[i].PrefixGroup, reqs[i].PrefixTokens = int32(1+r.IntN(8)), 512
		}
	}
	var buf []uint64
	route1 := func(spec *sim.RequestSpec) {
		full := spec.PromptTokens / 16
		buf = sim.AppendBlockHashes(buf[:0], spec, 16, min(full, sim.SharedBlocks(spec, 16)))
		req := route.Request{Spec: spec, Hashes: buf, Blocks: int(full)}
		for i := 0; i < n; i++ {
			v.QueueDepth[i], v.BatchSize[i], v.KVUtilization[i] = int64(r.IntN(4)), int64(r.IntN(30)), r.Float64()
		}
		p.Routed(&req, p.Route(&req, &v))
	}
	for i := range reqs {
		route1(&reqs[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		route1(&reqs[i%len(reqs)])
		i++
	}
}

// idleBytes is the heap an idle instance costs: n instances of blis run's
// default (Llama-3.1-8B on an H100, 28,279 KV blocks) behind the weighted
// router, built and not yet serving, over n.
func idleBytes(tb testing.TB, n int) float64 {
	spec := deploy.DefaultInstanceSpec()
	d, err := deploy.Uniform(spec, n)
	if err != nil {
		tb.Fatal(err)
	}
	var before, after runtime.MemStats
	// Twice: objects with finalizers (an earlier test's files) go in the
	// second collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	built, err := d.Build(sim.NewRNG(1))
	if err != nil {
		tb.Fatal(err)
	}
	if built.Config.Routing, err = route.New(route.WeightedName, n, route.Params{}); err != nil {
		tb.Fatal(err)
	}
	c, err := cluster.New(built.Config, cluster.NewSliceSource(nil))
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// TestIdleInstanceMemory: an idle instance costs at most 64 KiB of heap
// (its KV cache, prefix index and metrics grow as they fill), so that
// 4,096 instances fit in well under 1 GB before they serve. Allocation
// sizes are deterministic; the bound has room for the runtime's own.
func TestIdleInstanceMemory(t *testing.T) {
	b := idleBytes(t, 512)
	if b <= 0 { // memory another test held went meanwhile: again
		b = idleBytes(t, 512)
	}
	if b > 64<<10 {
		t.Fatalf("an idle instance costs %.0f bytes of heap, more than 64 KiB", b)
	}
}

// BenchmarkIdleInstance reports the heap an idle instance costs, at 4,096
// instances:
//
//	go test ./cluster -run '^$' -bench IdleInstance -benchtime 1x
func BenchmarkIdleInstance(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(idleBytes(b, 4096)/1024, "KiB/instance")
	}
}
