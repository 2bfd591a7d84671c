package experiment

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tier keys: defaults, the link to the store, and errors at their
// file's line.
func TestKVTierKeys(t *testing.T) {
	d, err := Parse([]byte(`version: 1
deployment:
  pools:
    - name: a
      replicas: 2
      vllm: {total_kv_blocks_cpu: 1000}
      kv_tiers: {disk: {capacity_gb: 100}}
    - name: b
      kv_tiers: {store: false}
  kv_store: {capacity_gb: 500}
`), "x.yaml")
	require.NoError(t, err)
	e, err := d.Resolve()
	require.NoError(t, err)
	a, b := e.Deployment.Pools[0].Instance.Tiers, e.Deployment.Pools[1].Instance.Tiers
	require.Equal(t, 7.0, a.Disk.ReadGBPerS)
	require.Equal(t, 5.0, a.Disk.WriteGBPerS)
	require.Equal(t, int64(80), a.Disk.LatencyUs)
	require.NotNil(t, a.Store)
	require.Equal(t, 23.75, a.Store.GetGBPerSPerGPU)
	require.Nil(t, b.Store)
	ks := e.Deployment.KVStore
	require.Equal(t, 0.95, ks.HighWatermark)
	require.Equal(t, 0.05, ks.EvictionRatio)
	require.Equal(t, int64(1000), ks.Link.LatencyUs)
	require.Equal(t, int64(1000), ks.SyncUs)
	require.Equal(t, ModeCluster, e.Mode)

	for _, c := range []struct{ file, want string }{
		{"version: 1\ndeployment:\n  kv_store: {capacity_gb: 10, high_watermark: 2}\n", "x.yaml:3: deployment.kv_store.high_watermark: must be within (0, 1], got 2"},
		{"version: 1\ndeployment:\n  kv_store: {latency_us: 10}\n", "deployment.kv_store.capacity_gb: is required"},
		{"version: 1\ndeployment:\n  kv_store: {capacity_gb: 10, bandwidth: 3}\n", "x.yaml:3"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {store: true}\n", "x.yaml:4: deployment.pools[0].kv_tiers.store: links to the deployment's kv_store, and it has none"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {capacity_gb: 10}}\n", "deployment.pools[0].kv_tiers.disk: sits behind the CPU tier"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {read_gb_per_s: 1}}\n", "deployment.pools[0].kv_tiers.disk.capacity_gb: is required"},
		{"version: 1\ndeployment:\n  pools:\n    - vllm: {total_kv_blocks_cpu: 10}\n      kv_tiers: {disk: {capacity_gb: 10, latency_us: -1}}\n", "deployment.pools[0].kv_tiers.disk.latency_us: must be within [0"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {capacity_gb: 10, speed: 1}}\n", "x.yaml:4"},
	} {
		d, err := Parse([]byte(c.file), "x.yaml")
		if err == nil {
			_, err = d.Resolve()
		}
		require.ErrorContains(t, err, c.want, c.file)
	}
}

// sharedKVRows are the setups docs/kv-tiers.md and the README compare on
// the shared-kv scenario.
var sharedKVRows = []struct{ label, scenario, sets string }{
	{"per-instance caches only (`shared-kv-local`)", "shared-kv-local", ""},
	{"per-instance caches, prefix-affinity, a fixed 10,000-block router index", "shared-kv-local", "policies.routing.type=prefix-affinity policies.routing.params.prefix_index_capacity=10000"},
	{"per-instance caches, prefix-affinity (index sized from the instances)", "shared-kv-local", "policies.routing.type=prefix-affinity"},
	{"shared 1 TB store (`shared-kv`)", "shared-kv", ""},
	{"shared 300 GB store (evicting)", "shared-kv", "deployment.kv_store.capacity_gb=300"},
	{"shared 1 TB store, prefix-affinity routing", "shared-kv", "policies.routing.type=prefix-affinity"},
	{"shared 1 TB store, precise prefix-affinity (KV events, tier weights)", "shared-kv", "policies.routing.type=prefix-affinity policies.routing.params.prefix_mode=precise"},
	{"shared 1 TB store, llm-d's default scorers, precise", "shared-kv", "policies.routing.type=weighted policies.routing.params.prefix_mode=precise"},
}

// TestSharedKVDocs: the shared-kv table in docs/kv-tiers.md and the
// README is the one the scenarios give today.
func TestSharedKVDocs(t *testing.T) {
	out := make([]string, len(sharedKVRows))
	for i, row := range sharedKVRows {
		d, err := LoadScenario(row.scenario)
		require.NoError(t, err)
		for _, kv := range strings.Fields(row.sets) {
			k, v, _ := strings.Cut(kv, "=")
			require.NoError(t, d.Set(k, v, "test"))
		}
		e, err := d.Resolve()
		require.NoError(t, err)
		e.Run.Workers = 1
		res, err := Run(context.Background(), e, nil)
		require.NoError(t, err)
		m := res.Cluster
		fleet, gpu, store, evicted := m.PrefixCacheHitRate, m.PrefixCacheHitRate, "–", "–"
		if kt := m.KVTiers; kt != nil {
			fleet, gpu = 1-kt.ComputedRate, kt.GPU.HitRate
			if kt.Store != nil {
				store = fmt.Sprintf("%.1f %%", 100*kt.Store.HitRate)
			}
		}
		if ks := m.KVStore; ks != nil {
			evicted = fmt.Sprintf("%.0f GB / %d", float64(ks.PeakBytes)/1e9, ks.Evicted)
		}
		out[i] = fmt.Sprintf("| %s | %.1f %% | %.1f %% | %s | %s | %.1f | %.1f |\n", row.label, 100*fleet, 100*gpu, store, evicted, m.TTFT.P50, m.TTFT.P99)
	}
	table := "| setup | prompt tokens served from cache | GPU | store | store peak / blocks evicted | TTFT p50 (ms) | TTFT p99 (ms) |\n|---|---|---|---|---|---|---|\n" + strings.Join(out, "")
	rewriteDocsBlock(t, "shared-kv-table", table, "go test ./experiment -run SharedKVDocs -update", "docs/guides/disaggregation-and-kv-tiers.md", "docs/kv-tiers.md")
}

// A disk behind a small CPU tier serves what the CPU tier evicted, and
// the report echoes the tiers.
func TestDiskTierRuns(t *testing.T) {
	d, err := Parse([]byte(`version: 1
deployment:
  pools:
    - replicas: 2
      vllm: {total_kv_blocks_gpu: "2000", total_kv_blocks_cpu: 1000}
      kv_tiers: {disk: {capacity_gb: 100}}
workload:
  spec:
    version: 1
    duration_s: 120
    rate: 1
    tenants:
      - id: chat
        prompt_tokens: "lognormal:mean=4000,cv=0.5,max=16000"
        output_tokens: "lognormal:mean=200,cv=0.5,max=1000"
        request_types: [{type: chat, turns: "uniform:4,12", think_time_ms: "exponential:mean=20000"}]
policies:
  routing: {type: prefix-affinity}
`), "x.yaml")
	require.NoError(t, err)
	e, err := d.Resolve()
	require.NoError(t, err)
	res, err := Run(context.Background(), e, nil)
	require.NoError(t, err)
	kt := res.Cluster.KVTiers
	require.NotNil(t, kt)
	require.NotNil(t, kt.Disk)
	require.Greater(t, kt.Disk.HitTokens, int64(0))
	require.Greater(t, kt.Disk.StoredBlocks, int64(0))
	require.Nil(t, kt.Store)
}
