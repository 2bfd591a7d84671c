package experiment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"
)

// generatedRefusals are experiments the generator found refused naming
// no key: each is now refused naming the key given.
var generatedRefusals = map[string]struct{ text, key string }{
	// Pools of different models sharing a kv_store were refused by the
	// cluster naming an instance ("instance instance_1: its KV blocks
	// ... differ").
	"store-of-mixed-models": {`version: 1
deployment:
  pools:
    - {name: a, model: qwen2.5-7b}
    - {name: b, model: llama-3.1-8b}
  kv_store: {capacity_gb: 100}
workload:
  synthetic: {requests: 5}
`, "deployment.kv_store"},
	// A roofline step time past 2^40 µs in a cluster was refused by the
	// engine naming an instance ("instance instance_0: latency model
	// roofline: a one-token decode step takes more than ...").
	"roofline-step-beyond-the-bound": {`version: 1
deployment:
  pools:
    - {name: a, replicas: 2, latency: {model: roofline, roofline: {step_overhead_us: 1e300}}}
workload:
  synthetic: {requests: 5}
`, "deployment.pools[0].latency"},
	// The same in instance mode (refused naming nothing).
	"roofline-step-beyond-the-bound-instance": {`version: 1
deployment:
  pools:
    - {latency: {model: roofline, roofline: {compute_eff: 1e-15}}}
workload:
  synthetic: {requests: 5}
`, "deployment.pools[0].latency"},
}

func TestGeneratedRefusalsNameTheirKey(t *testing.T) {
	for name, g := range generatedRefusals {
		t.Run(name, func(t *testing.T) {
			d, err := experiment.Parse([]byte(g.text), fileName)
			require.NoError(t, err)
			_, err = d.Resolve()
			var ee *experiment.Error
			require.ErrorAs(t, err, &ee)
			require.Equal(t, []string{g.key}, ee.Keys, "%v", err)
			require.LessOrEqual(t, len(err.Error()), 600)
			checkExperiment(t, g.text)
		})
	}
}
