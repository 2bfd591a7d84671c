package cluster_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

// defaultWorkload is blis run's default workload shape with n requests at
// rate and prompts of at most maxPrompt tokens.
func defaultWorkload(t testing.TB, n int, rate float64, seed int64, maxPrompt int) []sim.RequestSpec {
	w := workload.Spec{Requests: n, Rate: rate, PrefixGroups: 8, PrefixTokens: 512, PrefixFraction: 0.5}
	var err error
	w.Prompt, err = workload.ParseDist(fmt.Sprintf("lognormal:mean=1024,cv=0.6,max=%d", maxPrompt))
	require.NoError(t, err)
	w.Output, err = workload.ParseDist("lognormal:mean=256,cv=0.8,max=4096")
	require.NoError(t, err)
	reqs, err := workload.Generate(w, sim.NewRNG(seed).Stream(sim.StreamWorkload))
	require.NoError(t, err)
	return reqs
}

// TestSingleInstanceCompatibility: one instance behind any routing policy
// (admitting everything, without latencies) serves every request exactly
// as the single-instance simulator does, noise included: instance 0 draws
// from the same stream.
func TestSingleInstanceCompatibility(t *testing.T) {
	reqs := defaultWorkload(t, 600, 9, 3, 4000)
	spec := deploy.DefaultInstanceSpec()
	spec.Latency.Noise = 0.05
	spec.VLLM.TotalKVBlocksGPU = 1200 // small enough to preempt, large enough for every request
	single, err := spec.Build(sim.NewRNG(7), 0)
	require.NoError(t, err)
	cfg := single.Config
	cfg.Options.RecordRequests = true
	s, err := sim.New(cfg, reqs)
	require.NoError(t, err)
	want, err := s.Run()
	require.NoError(t, err)
	require.Greater(t, want.Preemptions, int64(0), "the comparison covers preemption")
	byID := map[int64]sim.RequestRecord{}
	for _, r := range want.PerRequest {
		byID[r.ID] = r
	}
	for _, policy := range route.Names {
		t.Run(policy, func(t *testing.T) {
			in, err := spec.Build(sim.NewRNG(7), 0) // a fresh noise stream
			require.NoError(t, err)
			r, err := route.New(policy, 1, route.Params{})
			require.NoError(t, err)
			c, err := cluster.New(cluster.Config{Instances: []cluster.Instance{{ID: "instance_0", Config: in.Config}}, Routing: r, RecordRequests: true},
				cluster.NewSliceSource(reqs))
			require.NoError(t, err)
			got, err := c.Run()
			require.NoError(t, err)
			require.Len(t, got.PerRequest, len(want.PerRequest))
			for _, g := range got.PerRequest {
				w := byID[g.ID]
				require.Equal(t, "completed", g.Outcome)
				require.Equal(t, [8]int64{w.ArrivalUs, w.PromptTokens, w.OutputTokens, w.CachedTokens, w.Preemptions, w.SchedulingDelay, w.TTFT, w.E2E},
					[8]int64{g.ArrivalUs, g.PromptTokens, g.OutputTokens, g.CachedTokens, g.Preemptions, g.SchedulingDelay, g.TTFT, g.E2E}, "request %d", g.ID)
				require.Equal(t, w.DepartedUs, g.DepartedUs)
			}
			require.Equal(t, want.OutputTokens, got.OutputTokens)
			require.Equal(t, want.Preemptions, got.Preemptions)
			require.Equal(t, want.ITL, got.ITL, "the same inter-token histogram")
			require.Equal(t, want.PrefixCacheHitRate, got.PrefixCacheHitRate)
			require.Equal(t, want.DurationS, got.DurationS)
			require.Equal(t, want.TTFT.Mean, got.TTFT.Mean)
			require.Equal(t, want.TTFT.Max, got.TTFT.Max)
			require.Equal(t, want.Steps, got.Instances[0].Metrics.Steps)
		})
	}
}

// randomCluster builds a random cluster, policies and workload from seed.
func randomCluster(t *testing.T, seed uint64) (cluster.Config, []sim.RequestSpec) {
	r := rand.New(rand.NewPCG(seed, 99))
	n := 1 + r.IntN(5)
	var ins []cluster.Instance
	for i := 0; i < n; i++ {
		k := physics.VLLMKnobs{
			MaxNumSeqs: int64(1 + r.IntN(16)), MaxBatchedTokens: int64(128 + r.IntN(1024)), ChunkedPrefillEnabled: r.IntN(5) != 0,
			BlockSizeTokens: int64([]int{8, 16, 32}[r.IntN(3)]), TotalKVBlocksGPU: int64(60 + r.IntN(300)), PrefixCachingEnabled: r.IntN(4) != 0,
		}
		cfg := sim.Config{
			Engine:   sim.EngineConfig{VLLMKnobs: k},
			Policies: sim.Policies{Scheduler: sim.SchedulerPolicy(r.IntN(4))},
			Latency:  &sim.Blackbox{Alpha: [3]float64{float64(r.IntN(500)), 0.1, 1}, Beta: [3]float64{float64(500 + r.IntN(3000)), 1, 20}},
			Options:  sim.Options{Exhaustive: true},
		}
		if k.PrefixCachingEnabled && r.IntN(3) == 0 {
			cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = int64(20+r.IntN(200)), true, r.Float64()
		}
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, n), Config: cfg})
	}
	var rp route.Params
	policy := route.Names[r.IntN(len(route.Names))]
	if policy == route.WeightedName {
		for _, name := range route.ScorerNames {
			if r.IntN(2) == 0 {
				rp.Scorers = append(rp.Scorers, route.WeightedScorer{Name: name, Weight: float64(1 + r.IntN(5))})
			}
		}
		if rp.Scorers == nil {
			rp.Scorers = []route.WeightedScorer{{Name: route.PrefixAffinity, Weight: 1}}
		}
		rp.PrefixIndexCapacity = 1 + r.IntN(200)
	}
	rt, err := route.New(policy, n, rp)
	require.NoError(t, err)
	ad, err := admit.New(admit.Names[r.IntN(2)], admit.Params{TokenBucketCapacity: float64(500 + r.IntN(5000)), TokenBucketRefillRate: float64(r.IntN(100_000))})
	require.NoError(t, err)
	var fresh cluster.Freshness
	for s := range fresh {
		fresh[s] = []int64{0, 0, 1000, 50_000}[r.IntN(4)]
	}
	cfg := cluster.Config{Instances: ins, Admission: ad, Routing: rt, Freshness: fresh,
		AdmissionLatencyUs: []int64{0, 0, 300}[r.IntN(3)], RoutingLatencyUs: []int64{0, 0, 200}[r.IntN(3)], RecordRequests: true}
	if r.IntN(4) == 0 {
		cfg.HorizonUs = int64(100_000 + r.IntN(2_000_000))
	}
	reqs := make([]sim.RequestSpec, 40+r.IntN(200))
	var at int64
	for i := range reqs {
		at += int64(r.ExpFloat64() * 5000)
		reqs[i] = sim.RequestSpec{ID: int64(i), ArrivalUs: at, PromptTokens: int64(1 + r.IntN(1200)), OutputTokens: int64(1 + r.IntN(150)),
			Tenant: int32(r.IntN(3)), SLOClass: sim.SLOClass(r.IntN(4))}
		if g := r.IntN(4); g > 0 {
			reqs[i].PrefixGroup, reqs[i].PrefixTokens = int32(g), min(reqs[i].PromptTokens, int64(128*g))
		}
	}
	// In half the clusters, a third of the clients give up after up to
	// 300 ms (drawn last, so the rest of the cluster is as before).
	if r.IntN(2) == 0 {
		for i := range reqs {
			if r.IntN(3) == 0 {
				reqs[i].TimeoutUs = int64(1 + r.IntN(300_000))
			}
		}
	}
	return cfg, reqs
}

// TestInvariantsHoldOnRandomClusters drives random clusters (1-5
// instances, every policy and scorer, stale signals, latencies, small
// caches with preemption and unservable requests, horizons, client
// timeouts) with every
// engine invariant checked in full after every step and the cluster
// invariants at the end; each run is repeated and must match byte for byte.
func TestInvariantsHoldOnRandomClusters(t *testing.T) {
	var timedOut int64
	defer func() {
		if !t.Failed() {
			require.Greater(t, timedOut, int64(50), "the runs exercise timeouts")
		}
	}()
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			workers := 0
			run := func() (*cluster.Result, string) {
				cfg, reqs := randomCluster(t, seed)
				cfg.Workers = workers
				c, err := cluster.New(cfg, cluster.NewSliceSource(reqs))
				require.NoError(t, err)
				res, err := c.Run()
				require.NoError(t, err)
				out, err := json.Marshal(res)
				require.NoError(t, err)
				return res, string(out)
			}
			res, a := run()
			workers = 3
			_, b := run()
			require.Equal(t, a, b, "same inputs, same output, whether one or three workers advance the instances")
			q := res.Requests
			timedOut += q.TimedOut
			in := q.AwaitingRouting + q.InTransit + q.StillInAPI + q.StillQueued + q.StillRunning
			require.Equal(t, q.Arrived, q.Rejected+q.Completed+q.DroppedUnservable+q.TimedOut+in, "CL-1")
			var routed, completed int64
			for _, ir := range res.Instances {
				routed += ir.Routed
				completed += ir.Metrics.Requests.Completed
			}
			require.Equal(t, q.Routed, routed)
			require.Equal(t, q.Completed, completed)
			// Every request that left has one record, with a causal timeline.
			require.Len(t, res.PerRequest, int(q.Rejected+q.Completed+q.DroppedUnservable+q.TimedOut))
			for _, r := range res.PerRequest {
				require.GreaterOrEqual(t, r.DepartedUs, r.ArrivalUs)
				if r.Outcome == "completed" {
					require.True(t, r.SchedulingDelay <= r.TTFT && r.TTFT <= r.E2E, "%+v", r)
				}
			}
		})
	}
}

// TestRNGIsolation: the open-loop workload does not depend on the policy
// or the number of instances (docs/cluster.md: draws in one stream never shift
// another), so every run of the same seed offers the same requests.
func TestRNGIsolation(t *testing.T) {
	offered := func(n int, policy string) []cluster.RequestRecord {
		spec := deploy.DefaultInstanceSpec()
		spec.Latency.Noise = 0.1
		d, err := deploy.Uniform(spec, n)
		require.NoError(t, err)
		b, err := d.Build(sim.NewRNG(5))
		require.NoError(t, err)
		b.Config.Routing, err = route.New(policy, n, route.Params{})
		require.NoError(t, err)
		b.Config.RecordRequests = true
		c, err := cluster.New(b.Config, cluster.NewSliceSource(defaultWorkload(t, 200, 20, 5, 16384)))
		require.NoError(t, err)
		res, err := c.Run()
		require.NoError(t, err)
		return res.PerRequest
	}
	shape := func(rs []cluster.RequestRecord) map[int64][3]int64 {
		m := map[int64][3]int64{}
		for _, r := range rs {
			m[r.ID] = [3]int64{r.ArrivalUs, r.PromptTokens, r.OutputTokens}
		}
		return m
	}
	base := shape(offered(1, route.RoundRobinName))
	require.Len(t, base, 200)
	require.Equal(t, base, shape(offered(3, route.WeightedName)))
	require.Equal(t, base, shape(offered(5, route.LeastLoadedName)))
}

func TestNewRefusesBadConfigurations(t *testing.T) {
	in := deploy.DefaultInstanceSpec()
	b, err := in.Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	one := []cluster.Instance{{ID: "a", Config: b.Config}}
	src := cluster.NewSliceSource(nil)
	for _, tc := range []struct {
		cfg  cluster.Config
		want string
	}{
		{cluster.Config{}, "at least one instance"},
		{cluster.Config{Instances: []cluster.Instance{{ID: "b", Config: b.Config}, {ID: "a", Config: b.Config}}}, "sort in index order"},
		{cluster.Config{Instances: []cluster.Instance{{ID: "a", Config: b.Config}, {ID: "a", Config: b.Config}}}, "not unique"},
		{cluster.Config{Instances: one, AdmissionLatencyUs: -1}, "admission latency"},
		{cluster.Config{Instances: one, RoutingLatencyUs: -1}, "routing latency"},
		{cluster.Config{Instances: one, Freshness: cluster.Freshness{0, -5}}, "batch_size refresh interval"},
		{cluster.Config{Instances: one, CounterfactualK: -1}, "counterfactual"},
		{cluster.Config{Instances: []cluster.Instance{{ID: "a", Config: sim.Config{}}}}, "instance a"},
	} {
		_, err := cluster.New(tc.cfg, src)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = cluster.New(cluster.Config{Instances: one}, nil)
	require.ErrorContains(t, err, "source")
	require.Equal(t, "instance_07", cluster.InstanceID(7, 16))
	require.Equal(t, "instance_7", cluster.InstanceID(7, 10))
	require.Equal(t, "instance_0", cluster.InstanceID(0, 1))
}

// TestSourceMustNotGoBack: a source that gives an arrival before the
// cluster's clock is an error, not a silent reordering.
func TestSourceMustNotGoBack(t *testing.T) {
	in, err := deploy.DefaultInstanceSpec().Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	reqs := []sim.RequestSpec{{ID: 0, ArrivalUs: 1000, PromptTokens: 10, OutputTokens: 1}, {ID: 1, ArrivalUs: 500, PromptTokens: 10, OutputTokens: 1}}
	c, err := cluster.New(cluster.Config{Instances: []cluster.Instance{{ID: "a", Config: in.Config}}}, cluster.NewSliceSource(reqs))
	require.NoError(t, err)
	_, err = c.Run()
	require.ErrorContains(t, err, "before the cluster's clock")
}

func TestFitness(t *testing.T) {
	ws, err := cluster.ParseFitnessWeights("throughput:0.5,p99_ttft:0.3,tokens_per_sec:1,mean_scheduling_delay:2")
	require.NoError(t, err)
	r := &cluster.Result{RequestsPerS: 100, OutputTokensPerS: 10_000}
	r.TTFT.P99 = 50 // ms: 50,000 µs
	r.SchedulingDelay.Mean = 1
	r.TTFT.Count, r.SchedulingDelay.Count = 10, 10
	f := cluster.Fitness(r, ws)
	require.InDelta(t, 0.5*0.5+0.3/(1+50)+1*0.5+2*0.5, f.Score, 1e-12)
	require.InDelta(t, 0.0196, f.Components[1].Normalized, 1e-4, "the design's worked example (docs/cluster.md, fitness)")
	for _, bad := range []string{"throughput", "speed:1", "throughput:-1", "throughput:0,p50_e2e:0", "p99_ttft:1,p99_ttft:2", "p42_ttft:1"} {
		_, err := cluster.ParseFitnessWeights(bad)
		require.Error(t, err, bad)
	}
	require.Len(t, cluster.FitnessKeys(), 2+6*4)
}
