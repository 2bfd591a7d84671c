package experiment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const smallPD = `version: 1
deployment:
  pools:
    - {name: p, role: prefill, model: llama-3.1-8b, hardware: h100-sxm}
    - {name: d, role: decode, model: llama-3.1-8b, hardware: h100-sxm%s}
  network: {%s}
workload:
  synthetic: {requests: 40, rate: 8, prompt_tokens: "const:2000", output_tokens: "const:16", prefix_groups: 0}
policies:
  disaggregation: {type: always}
run: {per_request: true}
`

// TestExpiredCopyIsRecomputed: with an abort timeout of 1 ms every prefill
// copy is freed before its decode instance pulls it; the transfers once
// moved the freed KV anyway. Now no byte moves: each decode instance finds
// its copy gone and computes the prompt itself, counted.
func TestExpiredCopyIsRecomputed(t *testing.T) {
	e, err := parse(t, sprintfPD("", "abort_timeout_s: 0.001"))
	require.NoError(t, err)
	res, err := Run(context.Background(), e, &MemSinks{})
	require.NoError(t, err)
	m := res.Cluster
	pd := m.Disaggregation
	require.Equal(t, int64(40), m.Requests.Completed)
	require.Equal(t, int64(40), pd.AbortTimeouts)
	require.Equal(t, int64(40), pd.KVLost)
	require.Zero(t, pd.Transfers)
	require.Zero(t, pd.Bytes)
	var failed int64
	for _, in := range m.Instances {
		failed += in.Metrics.KVLoadsFailed
	}
	require.Equal(t, int64(40), failed)
}

// TestRunEndsAtItsLastDeparture: a decode pool too small for the prompts
// (100 blocks of 16 tokens, 2,000-token prompts) drops every request; the
// prefill copies nobody will pull once held the run up to their abort
// timeout (480 s), stretching duration_s far past the last departure and
// lowering every rate. The run now ends at its last departure or step end.
func TestRunEndsAtItsLastDeparture(t *testing.T) {
	e, err := parse(t, sprintfPD(", vllm: {total_kv_blocks_gpu: 100}", ""))
	require.NoError(t, err)
	res, err := Run(context.Background(), e, &MemSinks{})
	require.NoError(t, err)
	m := res.Cluster
	require.Equal(t, int64(40), m.Requests.DroppedUnservable)
	var first, last int64 = -1, 0
	for _, r := range m.PerRequest {
		if first < 0 || r.ArrivalUs < first {
			first = r.ArrivalUs
		}
		last = max(last, r.DepartedUs)
	}
	require.Less(t, m.DurationS, 60.0, "not until the copies' 480 s timeouts")
	require.InDelta(t, float64(last-first)*1e-6, m.DurationS, 1, "the last departure, or a step's end just after it")
}

// TestPDAtTheHorizonAccountsForEveryRequest: a horizon that stops a
// disaggregated run while a prefill instance's queue waits for blocks its
// copies hold (their transfers on a link at 0.1% efficiency still going;
// or, with a decode pool too small for the prompts, copies of dropped
// requests held until their 480 s abort timeout) failed INV-1 there. Now
// every request is accounted for: those waiting are still queued.
func TestPDAtTheHorizonAccountsForEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name, decode, network string
		horizon               float64
	}{
		{"slow network", "", "efficiency: 0.001", 30},
		{"held copies", ", vllm: {total_kv_blocks_gpu: 100}", "", 600},
	} {
		text := strings.Replace(sprintfPD(tc.decode, tc.network), "run: {per_request: true}",
			fmt.Sprintf("run: {horizon_s: %v, debug_invariants: true}", tc.horizon), 1)
		text = strings.Replace(text, "name: p, role: prefill,", "name: p, role: prefill, vllm: {total_kv_blocks_gpu: 300},", 1)
		e, err := parse(t, text)
		require.NoError(t, err)
		res, err := Run(context.Background(), e, &MemSinks{})
		require.NoError(t, err, tc.name)
		n := res.Cluster.Requests
		require.Positive(t, n.StillQueued, tc.name)
		inSystem := n.AwaitingCapacity + n.AwaitingRouting + n.InTransit + n.StillInAPI + n.StillQueued + n.StillRunning
		require.Equal(t, n.Arrived, n.Completed+n.DroppedUnservable+inSystem, tc.name)
		t.Logf("%s: %+v", tc.name, n)
	}
}

// TestPDDeadlockEndsTheRun: two instances that both prefill and decode,
// 20 blocks each, copies no abort timeout frees (abort_timeout_s: 0), and
// a prefill router that sends each prefill to the other instance: each
// keeps the other's copies, and the decode parts wait for the blocks they
// hold. The run failed CL-2 at its end ("no event is left but ... in
// flight"); with an autoscaler and no horizon it evaluated forever. It
// now ends where nothing moves, the stuck requests counted in the system,
// with a warning naming the key.
func TestPDDeadlockEndsTheRun(t *testing.T) {
	for _, autoscale := range []string{"", "\n  autoscale: {type: kpa, params: {interval_s: 1}}"} {
		text := strings.ReplaceAll(`version: 1
deployment:
  pools:
    - {name: a, replicas: 2, min_replicas: 2, max_replicas: 2, vllm: {total_kv_blocks_gpu: 20}}
  network: {abort_timeout_s: 0}
workload:
  synthetic: {requests: 20, rate: 100, prompt_tokens: 'const:200', output_tokens: 'const:5', prefix_groups: 0}
policies:
  disaggregation: {type: always, params: {prefill_scorers: {queue-depth: 1}}}AUTOSCALE
run: {debug_invariants: true}
`, "AUTOSCALE", autoscale)
		e, err := parse(t, text)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := Run(ctx, e, &MemSinks{})
		cancel()
		require.NoError(t, err, autoscale)
		require.False(t, res.Partial, autoscale)
		n := res.Cluster.Requests
		require.Equal(t, int64(20), n.Completed+n.StillQueued, autoscale)
		require.Positive(t, n.StillQueued, autoscale)
		require.Contains(t, strings.Join(res.Warnings, "\n"), "could not move when the run ended", autoscale)
		require.Contains(t, strings.Join(res.Warnings, "\n"), "deployment.network.abort_timeout_s", autoscale)
	}
}

// TestMaxNodesHoldsTheInitialInstances: two one-GPU instances on at most
// one one-GPU node once both served, one on no node, billed nothing; the
// experiment is now refused at the key.
func TestMaxNodesHoldsTheInitialInstances(t *testing.T) {
	_, err := parse(t, `version: 1
deployment:
  pools:
    - {name: h, replicas: 2, nodes: {max_nodes: 1, gpus_per_node: 1}}
`)
	require.ErrorContains(t, err, "deployment.pools[0].nodes.max_nodes: 1 nodes of 1 GPUs hold 1 instances of 1 GPUs, and the pool starts with 2")
	_, err = parse(t, `version: 1
deployment:
  pools:
    - {name: h, replicas: 2, nodes: {max_nodes: 1, gpus_per_node: 2}}
`)
	require.NoError(t, err)
}

func sprintfPD(decode, network string) string { return fmt.Sprintf(smallPD, decode, network) }
