package cluster_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/kvstore"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

const sessionsSpec = `version: 1
duration_s: 60
rate: 1
tenants:
  - id: chat
    prompt_tokens: "lognormal:mean=2000,cv=0.3"
    output_tokens: "lognormal:mean=150,cv=0.3"
    request_types: [{type: chat, turns: "6", think_time_ms: "exponential:mean=2000"}]
`

// storeCluster runs chat sessions round-robin over n instances, each with a
// link to a shared store of storeBytes (0: no store), on workers workers.
func storeCluster(t *testing.T, n int, storeBytes int64, workers int) (*cluster.Result, string) {
	return storeClusterRouted(t, n, storeBytes, workers, nil)
}

func storeClusterRouted(t *testing.T, n int, storeBytes int64, workers int, rt route.Policy) (*cluster.Result, string) {
	t.Helper()
	spec, err := workload.ParseSpec([]byte(sessionsSpec), "test.yaml")
	require.NoError(t, err)
	inst := deploy.DefaultInstanceSpec()
	var ins []cluster.Instance
	for i := 0; i < n; i++ {
		b, err := inst.Build(sim.NewRNG(1), i)
		require.NoError(t, err)
		if storeBytes > 0 {
			b.Config.Engine.Tiers = sim.KVTiers{BlockBytes: int64(b.Phys.BlockSizeBytes),
				Store: sim.StoreLink{GetBytesPerS: sim.DefaultStoreBytesPerSPerGPU, PutBytesPerS: sim.DefaultStoreBytesPerSPerGPU, LatencyUs: sim.DefaultStoreLatencyUs}}
		}
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, n), Config: b.Config})
	}
	cfg := cluster.Config{Instances: ins, Workers: workers, Routing: rt}
	if storeBytes > 0 {
		cfg.KVStore = &cluster.KVStore{Store: kvstore.Config{CapacityBytes: storeBytes}}
	}
	c, err := cluster.New(cfg, workload.NewSource(spec, sim.NewRNG(1)))
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	out, err := json.Marshal(res)
	require.NoError(t, err)
	return res, string(out)
}

// Round-robin spreads a session's turns over four instances, so each turn
// mostly misses its instance's own cache; the shared store holds every
// turn's blocks and serves them to the next turn wherever it lands.
func TestSharedStoreRaisesTheFleetHitRate(t *testing.T) {
	alone, _ := storeCluster(t, 4, 0, 1)
	shared, a := storeCluster(t, 4, 64<<30, 1)
	require.Nil(t, alone.KVTiers)
	require.NotNil(t, shared.KVTiers)
	require.NotNil(t, shared.KVTiers.Store)
	require.NotNil(t, shared.KVStore)
	served := 1 - shared.KVTiers.ComputedRate
	t.Logf("GPU-only hit rate %.3f; with the store: GPU %.3f, store %.3f, served %.3f; TTFT p50 %.1f → %.1f ms",
		alone.PrefixCacheHitRate, shared.KVTiers.GPU.HitRate, shared.KVTiers.Store.HitRate, served, alone.TTFT.P50, shared.TTFT.P50)
	require.Greater(t, shared.KVTiers.Store.HitRate, 0.3)
	require.Greater(t, served, alone.PrefixCacheHitRate+0.3)
	require.Less(t, shared.TTFT.P50, alone.TTFT.P50)
	require.Greater(t, shared.KVStore.Puts, int64(0))
	require.Equal(t, shared.KVTiers.Store.LoadedBlocks, shared.KVStore.Gets+shared.KVStore.MissedGets)

	// Same output on two workers: the store changes only at sync points.
	_, b := storeCluster(t, 4, 64<<30, 2)
	require.Equal(t, a, b)

	// A small store evicts at its watermark, and still the same output.
	small, c := storeCluster(t, 4, 2<<30, 1)
	_, d := storeCluster(t, 4, 2<<30, 2)
	require.Equal(t, c, d)
	require.Greater(t, small.KVStore.Evictions, int64(0))
	require.LessOrEqual(t, small.KVStore.PeakBytes, int64(2<<30))
}

func TestStoreLinkWithoutAStoreIsRefused(t *testing.T) {
	b, err := deploy.DefaultInstanceSpec().Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	b.Config.Engine.Tiers = sim.KVTiers{BlockBytes: 1 << 20, Store: sim.StoreLink{GetBytesPerS: 1e9, PutBytesPerS: 1e9}}
	_, err = cluster.New(cluster.Config{Instances: []cluster.Instance{{ID: "a", Config: b.Config}}}, cluster.NewSliceSource(nil))
	require.ErrorContains(t, err, "has a link to a KV store, and the cluster has none")
}

// The router's prefix index is sized from each instance's KV capacity:
// its GPU blocks and the CPU tier behind them, in the router's blocks.
func TestPrefixIndexSizedFromTheInstances(t *testing.T) {
	var ins []cluster.Instance
	var want []int
	for i, cpu := range []int64{0, 5000} {
		spec := deploy.DefaultInstanceSpec()
		spec.VLLM.TotalKVBlocksCPU = cpu
		b, err := spec.Build(sim.NewRNG(1), i)
		require.NoError(t, err)
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, 2), Config: b.Config})
		want = append(want, int(b.Config.Engine.TotalKVBlocksGPU+cpu))
	}
	rt, err := route.New(route.PrefixAffinityName, 2, route.Params{})
	require.NoError(t, err)
	_, err = cluster.New(cluster.Config{Instances: ins, Routing: rt}, cluster.NewSliceSource(nil))
	require.NoError(t, err)
	x := rt.(route.PrefixIndexer).PrefixIndex()
	require.Greater(t, want[0], route.DefaultPrefixIndexCapacity)
	require.Equal(t, want[0], x.Capacity(0))
	require.Equal(t, want[1], x.Capacity(1))
	// At 32-token router blocks, half as many.
	rt, _ = route.New(route.PrefixAffinityName, 2, route.Params{})
	_, err = cluster.New(cluster.Config{Instances: ins, Routing: rt, RouterBlockSize: 32}, cluster.NewSliceSource(nil))
	require.NoError(t, err)
	require.Equal(t, want[1]/2, rt.(route.PrefixIndexer).PrefixIndex().Capacity(1))
}

// The precise prefix index reads the instances' KV events: it routes a
// session's turns where its blocks are, as the approximate index does from
// its own decisions, and the same on any number of workers.
func TestPrecisePrefixIndex(t *testing.T) {
	run := func(mode string, store int64, workers int) (*cluster.Result, string) {
		rt, err := route.New(route.PrefixAffinityName, 4, route.Params{PrefixMode: mode})
		require.NoError(t, err)
		return storeClusterRouted(t, 4, store, workers, rt)
	}
	approx, _ := run(route.PrefixApproximate, 0, 1)
	precise, a := run(route.PrefixPrecise, 0, 1)
	_, b := run(route.PrefixPrecise, 0, 2)
	require.Equal(t, a, b)
	t.Logf("GPU hit rate: approximate %.3f, precise %.3f", approx.PrefixCacheHitRate, precise.PrefixCacheHitRate)
	require.Greater(t, precise.PrefixCacheHitRate, 0.8)
	require.InDelta(t, approx.PrefixCacheHitRate, precise.PrefixCacheHitRate, 0.05)
	withStore, c := run(route.PrefixPrecise, 64<<30, 1)
	_, d := run(route.PrefixPrecise, 64<<30, 2)
	require.Equal(t, c, d)
	require.Greater(t, 1-withStore.KVTiers.ComputedRate, 0.8)
}
