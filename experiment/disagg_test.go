package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDisaggregationErrors: roles, the decider and the network are
// checked together, each error naming the file, line and key.
func TestDisaggregationErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n",
			"x.yaml:3: deployment.pools[0].role, policies.disaggregation.type: a prefill pool needs a disaggregation decider (always or prefix-threshold), got never"},
		{"version: 1\ndeployment:\n  pools: [{role: sideways}]\n",
			`x.yaml:3: deployment.pools[0].role: want one of both, prefill, decode, got "sideways"`},
		{"version: 1\ndeployment:\n  pools: [{replicas: 2}]\n  network: {nic_gb_per_s: 25}\n",
			"x.yaml:4: deployment.network: has no effect without disaggregation (policies.disaggregation is never)"},
		{"version: 1\ndeployment:\n  pools: [{role: decode, replicas: 2}]\npolicies:\n  disaggregation: {type: always}\n",
			"policies.disaggregation.type: always: no pool prefills (every role is decode)"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n  network: {efficiency: 1.5}\npolicies:\n  disaggregation: {type: always}\n",
			"x.yaml:4: deployment.network.efficiency: must be within (0, 1], got 1.5"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n  network: {abort_timeout_s: -1}\npolicies:\n  disaggregation: {type: always}\n",
			"deployment.network.abort_timeout_s: must be within [0, 604800] s, got -1"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n  network: {bandwidth: 3}\npolicies:\n  disaggregation: {type: always}\n",
			`unknown key "bandwidth" in deployment.network; use one of nic_gb_per_s, efficiency, latency_us, abort_timeout_s`},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\npolicies:\n  disaggregation: {type: prefix-threshold, params: {threshold: -1}}\n",
			"policies.disaggregation.params.threshold: must be"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\npolicies:\n  disaggregation: {type: always, params: {prefill_scorers: {nope: 1}}}\n",
			"policies.disaggregation.params.prefill_scorers"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\npolicies:\n  disaggregation: {type: always}\nrun: {counterfactual_sample: every:10}\n",
			"x.yaml:6: run.counterfactual_sample, policies.disaggregation.type: counterfactual simulation is not available with prefill/decode disaggregation"},
	} {
		_, err := parse(t, tc.text)
		require.Error(t, err, tc.text)
		require.Contains(t, err.Error(), tc.want, tc.text)
	}
}

// TestDisaggregatedRun: a P/D run through the experiment reports its
// split and transfers, echoes the pools' roles and links, and the same
// experiment and seed give the same bytes on any worker count.
func TestDisaggregatedRun(t *testing.T) {
	text := `version: 1
deployment:
  pools:
    - {name: p, role: prefill, model: llama-3.1-8b, hardware: h100-sxm}
    - {name: d, role: decode, model: llama-3.1-8b, hardware: h100-sxm}
workload:
  synthetic: {requests: 200, rate: 4, prompt_tokens: "const:2000", output_tokens: "const:16", prefix_groups: 0}
policies:
  disaggregation: {type: always}
`
	var out [2]bytes.Buffer
	for i, workers := range []int{1, 2} {
		e, err := parse(t, text)
		require.NoError(t, err)
		e.Run.Workers = workers
		res, err := Run(context.Background(), e, &MemSinks{})
		require.NoError(t, err)
		m := res.Cluster
		require.NotNil(t, m.Disaggregation)
		require.Equal(t, int64(200), m.Disaggregation.Disaggregated)
		require.Equal(t, int64(200), m.Disaggregation.Transfers)
		// 2,000 tokens of Llama-3.1-8B's 131,072 B each, every request.
		require.Equal(t, 200*2000*131072.0, m.Disaggregation.Bytes)
		// One 50 GB/s NIC at 0.87 on each side: 262,144,000 B in 6,026 µs,
		// plus 20 µs of latency, for a transfer alone on its link.
		require.InDelta(t, 6.046, m.Disaggregation.TransferMs.Min, 0.002)
		require.Equal(t, int64(200), m.Requests.Completed)
		// By role: the prefill instance computed every prompt and one token
		// per request; the decode instance every output token.
		roles := m.Disaggregation.Roles
		require.Len(t, roles, 2)
		require.Equal(t, "prefill", roles[0].Role.String())
		require.InDelta(t, 200*2000, roles[0].PromptTokensPerS*m.DurationS, 1e-6)
		require.InDelta(t, 200, roles[0].OutputTokensPerS*m.DurationS, 1e-6)
		require.InDelta(t, 200*16, roles[1].OutputTokensPerS*m.DurationS, 1e-6)
		require.NoError(t, res.WriteJSON(&out[i]))
	}
	require.Equal(t, out[0].String(), out[1].String())
	var flat bytes.Buffer
	require.NoError(t, json.Compact(&flat, out[0].Bytes()))
	for _, want := range []string{`"disaggregation":{"pool":"p","role":"prefill","kv_bytes_per_token":131072`, `"network":{"nic_bytes_per_s":50000000000,"efficiency":0.87,"latency_us":20,"abort_timeout_us":480000000}`} {
		require.True(t, strings.Contains(flat.String(), want), "report lacks %s", want)
	}
}

// TestDisaggregatedUnderScaling: an autoscaler that keeps adding and
// removing instances (oscillator, every second) terminates prefill
// instances that still hold KV their decode instances have not pulled;
// they are retired only once it is pulled, and every request is served.
// The decode instances are small (400 KV blocks: three 2,000-token
// requests at once), so handoffs wait for blocks and prefill instances
// hold KV for seconds.
func TestDisaggregatedUnderScaling(t *testing.T) {
	text := `version: 1
deployment:
  pools:
    - {name: p, role: prefill, replicas: 2, min_replicas: 1, max_replicas: 3, nodes: {provision_s: [0, 0]}, startup: {image_pull_s: 0, storage_gb_per_s: 1000, compile_s: 0, graph_capture_s: 0}, drain: {policy: wait}}
    - {name: d, role: decode, replicas: 2, min_replicas: 1, max_replicas: 3, nodes: {provision_s: [0, 0]}, startup: {image_pull_s: 0, storage_gb_per_s: 1000, compile_s: 0, graph_capture_s: 0}, drain: {policy: wait}, vllm: {total_kv_blocks_gpu: 400}}
workload:
  synthetic: {requests: 600, rate: 20, prompt_tokens: "const:2000", output_tokens: "const:64", prefix_groups: 0}
policies:
  disaggregation: {type: always}
  autoscale: {type: oscillator, params: {interval_s: 1}}
`
	e, err := parse(t, text)
	require.NoError(t, err)
	e.Run.Workers = 1
	res, err := Run(context.Background(), e, &MemSinks{})
	require.NoError(t, err)
	m := res.Cluster
	require.Equal(t, int64(600), m.Requests.Completed)
	require.Equal(t, int64(600), m.Disaggregation.Transfers)
	require.Greater(t, m.Disaggregation.PullsWaited, int64(0))
	require.Greater(t, m.Fleet.Pools[0].ScaleDowns, int64(5))
}
