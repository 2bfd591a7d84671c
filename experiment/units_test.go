package experiment

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// TestHopelessRatesSaturate: a link of almost no bandwidth once wrapped the
// conversions of bytes over GB/s to µs: a P/D transfer over a 1e-15 GB/s
// NIC (or at an efficiency of 1e-300) ended 9.2e18 µs before it started
// (CL-4: the clock would go back), and a store read at 1e-15 GB/s loaded in
// -9.2e18 µs. Every such conversion saturates (internal/units): the
// transfers are cut to 2^40 µs and counted, the loads take 2^40 µs each (a
// step clamped and counted), and every request is accounted for.
func TestHopelessRatesSaturate(t *testing.T) {
	pd := `version: 1
deployment:
  pools:
    - {name: p, role: prefill, model: llama-3.1-8b, hardware: h100-sxm}
    - {name: d, role: decode, model: llama-3.1-8b, hardware: h100-sxm}
  network: {%s}
workload:
  synthetic: {requests: 4, rate: 4, prompt_tokens: "const:2000", output_tokens: "const:4", prefix_groups: 0}
policies:
  disaggregation: {type: always}
`
	store := `version: 1
deployment:
  pools:
    - {name: h100, replicas: 2, kv_tiers: {store: true}}
  kv_store: {capacity_gb: 1000, get_gb_per_s: 1e-15}
workload:
  synthetic: {requests: 40, rate: 20, prompt_tokens: "const:2000", output_tokens: "const:4", prefix_groups: 2, prefix_tokens: 1024, prefix_fraction: 1}
policies:
  routing: {type: round-robin}
`
	for _, c := range []struct{ name, text string }{
		{"nic 1e-15", fmt.Sprintf(pd, "nic_gb_per_s: 1e-15")},
		{"efficiency 1e-300", fmt.Sprintf(pd, "efficiency: 1e-300")},
		{"store get 1e-15", store},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := parse(t, c.text)
			require.NoError(t, err)
			res, err := Run(context.Background(), e, &MemSinks{})
			require.NoError(t, err)
			m := res.Cluster
			rq := m.Requests
			require.Equal(t, rq.Arrived, rq.Completed, "every request served")
			require.Greater(t, m.DurationS, 0.0)
			if d := m.Disaggregation; d != nil {
				require.Equal(t, rq.Arrived, d.TransfersClamped)
				require.Contains(t, res.Warnings[0], "transfers_clamped")
				require.LessOrEqual(t, m.DurationS, float64(rq.Arrived+1)*float64(sim.MaxDurationUs)*1e-6)
				return
			}
			st := m.KVTiers.Store
			require.NotNil(t, st)
			require.Greater(t, st.LoadedBlocks, int64(0))
			require.Greater(t, st.LoadUs, int64(0))
			require.LessOrEqual(t, st.LoadUs, st.LoadedBlocks*(sim.MaxDurationUs+1_000_000))
		})
	}
}
