package experiment

import (
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
		{"version: 1\ndeployment:\n  kv_store: {capacity_gb: 10, high_watermark: 2}\n", "x.yaml:3: deployment.kv_store.high_watermark: must be in (0, 1], got 2"},
		{"version: 1\ndeployment:\n  kv_store: {latency_us: 10}\n", "deployment.kv_store.capacity_gb: is required"},
		{"version: 1\ndeployment:\n  kv_store: {capacity_gb: 10, bandwidth: 3}\n", "x.yaml:3"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {store: true}\n", "x.yaml:4: deployment.pools[0].kv_tiers.store: links to the deployment's kv_store, and it has none"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {capacity_gb: 10}}\n", "deployment.pools[0].kv_tiers.disk: sits behind the CPU tier"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {read_gb_per_s: 1}}\n", "deployment.pools[0].kv_tiers.disk.capacity_gb: is required"},
		{"version: 1\ndeployment:\n  pools:\n    - vllm: {total_kv_blocks_cpu: 10}\n      kv_tiers: {disk: {capacity_gb: 10, latency_us: -1}}\n", "deployment.pools[0].kv_tiers.disk.latency_us: must be in [0"},
		{"version: 1\ndeployment:\n  pools:\n    - kv_tiers: {disk: {capacity_gb: 10, speed: 1}}\n", "x.yaml:4"},
	} {
		d, err := Parse([]byte(c.file), "x.yaml")
		if err == nil {
			_, err = d.Resolve()
		}
		require.ErrorContains(t, err, c.want, c.file)
	}
}
