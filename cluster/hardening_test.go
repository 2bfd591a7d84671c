package cluster_test

// docs/hardening.md, class 2: metrics on empty input.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
)

// A named tenant that sent nothing (weight 0) is listed but not counted in
// Jain's index: two tenants that sent alike are perfectly fair (1), not
// 2/3 as counting the silent one gave.
func TestJainIndexLeavesOutTenantsThatSentNothing(t *testing.T) {
	res, _ := specCluster(t, 2, `version: 1
duration_s: 20
rate: 4
tenants:
  - id: a
    prompt_tokens: "100"
    output_tokens: "20"
  - id: b
    prompt_tokens: "100"
    output_tokens: "20"
  - id: silent
    weight: 0
    prompt_tokens: "100"
    output_tokens: "20"
`)
	f := res.Fairness
	require.NotNil(t, f)
	require.Len(t, f.Tenants, 3, "the silent tenant is listed")
	require.Zero(t, f.Tenants[2].Arrived)
	x, y := f.Tenants[0].OutputTokensPerS, f.Tenants[1].OutputTokensPerS
	require.Greater(t, x, 0.0)
	require.InDelta(t, (x+y)*(x+y)/(2*(x*x+y*y)), f.JainIndex, 1e-12, "n counts the two tenants that sent")
}

// A latency key without samples scores 0 (the worst), never the 1 of a
// 0 ms latency; its raw value is null with its sample count in JSON.
func TestFitnessOfALatencyWithoutSamples(t *testing.T) {
	ws, err := cluster.ParseFitnessWeights("p99_ttft:1,mean_e2e:1,throughput:1")
	require.NoError(t, err)
	empty := cluster.Fitness(&cluster.Result{}, ws)
	require.Zero(t, empty.Score, "a run that served nothing")
	b, err := json.Marshal(empty)
	require.NoError(t, err)
	require.JSONEq(t, `{"score":0,"components":[
		{"key":"p99_ttft","raw":null,"normalized":0,"weight":1,"samples":0},
		{"key":"mean_e2e","raw":null,"normalized":0,"weight":1,"samples":0},
		{"key":"throughput","raw":0,"normalized":0,"weight":1}]}`, string(b))

	// Property: any served run scores above the run that served nothing,
	// for every key.
	served := &cluster.Result{RequestsPerS: 0.01, OutputTokensPerS: 0.01}
	for _, dist := range []*int64{&served.TTFT.Count, &served.ITL.Count, &served.E2E.Count, &served.SchedulingDelay.Count} {
		*dist = 1
	}
	served.TTFT.P99, served.TTFT.Max, served.E2E.Mean = 1e9, 1e9, 1e9
	for _, k := range cluster.FitnessKeys() {
		w, err := cluster.ParseFitnessWeights(k + ":1")
		require.NoError(t, err)
		require.Greater(t, cluster.Fitness(served, w).Score, cluster.Fitness(&cluster.Result{}, w).Score, k)
	}
}
