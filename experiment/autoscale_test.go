package experiment

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
)

// TestAutoscaleErrors: the fleet's keys are checked at Resolve, each
// error naming its line and key.
func TestAutoscaleErrors(t *testing.T) {
	const head = "version: 1\ndeployment:\n  pools:\n"
	for _, tc := range []struct{ yaml, want string }{
		{head + "    - {replicas: 2}\npolicies:\n  autoscale: {type: hpa}\n",
			"x.yaml:4: deployment.pools[0].max_replicas: give the pool's upper bound: autoscale hpa needs one"},
		{head + "    - {replicas: 0}\n", "x.yaml:4: deployment.pools[0].replicas: must be in [1, 4096], got 0"},
		{head + "    - {replicas: 0, min_replicas: 0}\n", "deployment.pools[0].replicas: is 0: a pool scaled to zero needs an autoscaler"},
		{head + "    - {replicas: 5, max_replicas: 4}\n", "deployment.pools[0].replicas: must be within [min_replicas, max_replicas] = [1, 4], got 5"},
		{head + "    - {min_replicas: 3, max_replicas: 2}\n", "deployment.pools[0].max_replicas: must be at least max(1, min_replicas) = 3, got 2"},
		{head + "    - {tp: 2, nodes: {gpus_per_node: 1}}\n", "deployment.pools[0].nodes.gpus_per_node: must be at least 2 (one instance's GPUs, tp × data_parallel_size), got 1"},
		{head + "    - {nodes: {provision_s: [5]}}\n", "deployment.pools[0].nodes.provision_s: want a list of 2 numbers, got 1"},
		{head + "    - {nodes: {provision_s: [9, 5]}}\n", "deployment.pools[0].nodes.provision_s: must be [min, max]"},
		{head + "    - {nodes: {price_per_gpu_hour: -1}}\n", "deployment.pools[0].nodes.price_per_gpu_hour: must be within [0, 1000000] $/GPU-hour, got -1"},
		{head + "    - {startup: {storage_gb_per_s: 0}}\n", "deployment.pools[0].startup.storage_gb_per_s: must be within [0.001, 10000] GB/s, got 0"},
		{head + "    - {startup: {warmup_penalty: 0.5}}\n", "deployment.pools[0].startup.warmup_penalty: must be within [1, 100], got 0.5"},
		{head + "    - {startup: {compile_s: -1}}\n", "deployment.pools[0].startup.compile_s: must be within [0, 604800] s, got -1"},
		{head + "    - {drain: {policy: later}}\n", `deployment.pools[0].drain.policy: want one of wait, immediate, redirect, got "later"`},
		{"version: 1\ndeployment:\n  mode: instance\n  pools:\n    - {max_replicas: 3}\n", "deployment.pools[0].max_replicas: is for cluster runs"},
		{"version: 1\ndeployment:\n  router: {capacity_wait_timeout_s: -1}\n", "deployment.router.capacity_wait_timeout_s: must be within [0, 1099511.627776] s, got -1"},
		{head + "    - {max_replicas: 4}\npolicies:\n  autoscale: {type: queue-depth, params: {up: 1, down: 2}}\n",
			"policies.autoscale.params.down: must be < up (1): the band between them is the hysteresis, got 2"},
		{head + "    - {max_replicas: 4}\npolicies:\n  autoscale: {type: hpa, params: {metric: running}}\n",
			"policies.autoscale.params.target: has no default with metric running; give one"},
	} {
		_, err := parse(t, tc.yaml)
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
}

// TestAutoscaleRunsFromAFileAndRoundTrips: an autoscaled experiment runs,
// scales, prints a configuration that reads back to the same report, and
// gives the same report for any worker count.
func TestAutoscaleRunsFromAFileAndRoundTrips(t *testing.T) {
	text := `version: 1
deployment:
  pools:
    - replicas: 1
      max_replicas: 4
      latency: {model: roofline}
      nodes: {gpus_per_node: 2, provision_s: [30, 90]}
      startup: {image_pull_s: 20, compile_s: 0, graph_capture_s: 5}
workload:
  synthetic: {requests: 2000, rate: 50}
policies:
  routing: {type: least-loaded}
  autoscale: {type: hpa, params: {metric: queue_depth, target: 2}}
`
	e, err := parse(t, text)
	require.NoError(t, err)
	out, err := e.Marshal()
	require.NoError(t, err)
	e2, err := parse(t, string(out))
	require.NoError(t, err, "%s", out)
	var reports [3]bytes.Buffer
	for i, x := range []*Experiment{e, e2, e} {
		if i == 2 {
			x.Run.Workers = 1
		} else {
			x.Run.Workers = 2
		}
		res, err := Run(context.Background(), x, nil)
		require.NoError(t, err)
		require.NoError(t, res.WriteJSON(&reports[i]))
		if i == 0 {
			m := res.Cluster
			f := m.Fleet
			require.NotNil(t, f)
			p := f.Pools[0]
			require.Equal(t, "hpa", p.Policy)
			require.Greater(t, p.ScaleUps, int64(0), "50/s is more than one instance serves")
			require.Greater(t, p.PeakReplicas, 1)
			require.LessOrEqual(t, p.PeakReplicas, 4)
			require.Equal(t, 2, p.Nodes, "4 replicas of 1 GPU on 2-GPU nodes")
			require.Equal(t, m.Requests.Arrived, m.Requests.Completed+m.Requests.Rejected+m.Requests.DroppedUnservable+m.Requests.Killed, "every request ends once")
			require.Equal(t, cluster.ScaledInstanceID(0), m.Instances[0].ID)
			require.Positive(t, f.Cost)
		}
	}
	require.Equal(t, reports[0].String(), reports[1].String(), "print-config reads back to the same run")
	require.Equal(t, reports[0].String(), reports[2].String(), "any worker count")
}

// TestScaleFromZero: a pool at zero serves: the first request waits at
// the router for a node, the image, the weights and the warm-up.
func TestScaleFromZero(t *testing.T) {
	e, err := parse(t, `version: 1
deployment:
  pools:
    - replicas: 0
      min_replicas: 0
      max_replicas: 2
      latency: {model: roofline}
      nodes: {provision_s: [60, 60]}
      startup: {image_pull_s: 30, compile_s: 10, graph_capture_s: 5}
workload:
  synthetic: {requests: 20, rate: 1}
policies:
  autoscale: {type: kpa}
run: {per_request: true}
`)
	require.NoError(t, err)
	res, err := Run(context.Background(), e, nil)
	require.NoError(t, err)
	m := res.Cluster
	require.Equal(t, int64(20), m.Requests.Completed)
	require.Positive(t, m.Fleet.WaitedForCapacity)
	load := m.Fleet.Pools[0].ReplicaSeconds["loading"]
	require.Greater(t, load, 30.0, "the image pull and the weights")
	// The first request waited for provisioning (60 s), the image (30 s),
	// the weights (16 GB at 1 GB/s) and the warm-up (15 s).
	first := m.PerRequest[0]
	for _, q := range m.PerRequest {
		if q.ArrivalUs < first.ArrivalUs {
			first = q
		}
	}
	require.Greater(t, first.TTFT, int64((60+30+16+15)*1e6))
	require.Less(t, first.TTFT, int64((60+30+17+15+5)*1e6))
}

// TestAutoscalingLeavesTheWorkloadAlone: the arrivals are the same with or
// without an autoscaler (named random streams: new instances draw from
// their own).
func TestAutoscalingLeavesTheWorkloadAlone(t *testing.T) {
	arrivals := func(autoscale string) []int64 {
		e, err := parse(t, "version: 1\ndeployment:\n  pools:\n    - {replicas: 1, max_replicas: 3, latency: {model: roofline, noise: 0.1}, startup: {image_pull_s: 0, compile_s: 0}}\n"+
			"workload:\n  synthetic: {requests: 1500, rate: 40}\npolicies:\n  autoscale: "+autoscale+"\nrun: {per_request: true}\n")
		require.NoError(t, err)
		res, err := Run(context.Background(), e, nil)
		require.NoError(t, err)
		var out []int64
		for _, q := range res.Cluster.PerRequest {
			out = append(out, q.ID, q.ArrivalUs, q.PromptTokens, q.OutputTokens)
		}
		if autoscale != "{type: none}" {
			require.Positive(t, res.Cluster.Fleet.Pools[0].ScaleUps+res.Cluster.Fleet.Pools[0].ScaleDowns)
		}
		return out
	}
	base := arrivals("{type: none}")
	for _, a := range []string{"{type: oscillator}", "{type: hpa, params: {metric: queue_depth, target: 1}}"} {
		require.Equal(t, base, arrivals(a), a)
	}
}
