package cluster_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

func benchCluster(b *testing.B, n, requests int, policy string) {
	spec := deploy.DefaultInstanceSpec()
	spec.Latency.Model = "roofline"
	var ins []cluster.Instance
	for i := 0; i < n; i++ {
		in, err := spec.Build(sim.NewRNG(1), i)
		if err != nil {
			b.Fatal(err)
		}
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, n), Config: in.Config})
	}
	w := workload.Spec{Requests: requests, Rate: 8 * float64(n), PrefixGroups: 8, PrefixTokens: 512, PrefixFraction: 0.5}
	w.Prompt, _ = workload.ParseDist("lognormal:mean=1024,cv=0.6,max=16384")
	w.Output, _ = workload.ParseDist("lognormal:mean=256,cv=0.8,max=4096")
	reqs, err := workload.Generate(w, sim.NewRNG(1).Stream("workload"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var rp route.Params
		if sc := os.Getenv("SCRATCH_SCORERS"); sc != "" {
			rp.Scorers, _ = route.ParseScorers(sc)
		}
		r, _ := route.New(policy, n, rp)
		c, err := cluster.New(cluster.Config{Instances: ins, Routing: r}, cluster.NewSliceSource(reqs))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(requests)/1000, "µs/req")
}

func BenchmarkClusterScratch(b *testing.B) {
	reqs := 100_000
	if v := os.Getenv("SCRATCH_REQS"); v != "" {
		reqs, _ = strconv.Atoi(v)
	}
	for _, n := range []int{4, 16} {
		policy := "weighted"
		if p := os.Getenv("SCRATCH_POLICY"); p != "" {
			policy = p
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchCluster(b, n, reqs, policy) })
	}
}

func BenchmarkSingleScratch(b *testing.B) {
	spec := deploy.DefaultInstanceSpec()
	spec.Latency.Model = "roofline"
	in, _ := spec.Build(sim.NewRNG(1), 0)
	w := workload.Spec{Requests: 100_000, Rate: 8, PrefixGroups: 8, PrefixTokens: 512, PrefixFraction: 0.5}
	w.Prompt, _ = workload.ParseDist("lognormal:mean=1024,cv=0.6,max=16384")
	w.Output, _ = workload.ParseDist("lognormal:mean=256,cv=0.8,max=4096")
	reqs, _ := workload.Generate(w, sim.NewRNG(1).Stream("workload"))
	for b.Loop() {
		cfg := in.Config
		cfg.Options.BoundedMemory = true
		s, _ := sim.New(cfg, reqs)
		res, err := s.Run()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Steps), "steps")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e5/1000, "µs/req")
}
