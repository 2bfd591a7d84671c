package experiment_test

import (
	"strings"
	"testing"
)

// Experiments the generator found, each a minimal file.

// generated are fixed: each holds the generator's property.
var generated = map[string]string{
	// A saturation autoscaler evaluated every millisecond on a pool
	// scaled from zero: the HPA scanned every recommendation of its
	// 300 s window at each evaluation (2.9 simulated seconds in 2 minutes
	// of wall time, past the run's bound).
	"autoscaler-every-millisecond": `version: 1
deployment:
  pools:
    - {name: pool0, replicas: 0, min_replicas: 0, max_replicas: 3}
workload:
  synthetic: {requests: 20, rate: 8}
policies:
  autoscale: {type: saturation, params: {interval_s: 0.001}}
`,
	// Every scale-up built an engine and allocated its whole GPU KV cache
	// (~1 ms for an H100's 400,000 blocks): an oscillator kept evaluating
	// for 12.7 days (requests held by a 2^40 µs admission latency) was
	// 73,000 builds, past the run's bound; here a day of it.
	"scale-ups-over-days": `version: 1
deployment:
  pools:
    - {max_replicas: 2}
  router: {admission_latency_us: 1099511627776}
workload:
  synthetic: {requests: 5}
policies:
  autoscale: {type: oscillator}
run: {horizon_s: 86400}
`,
	// The fleet's mean size divided its replica-seconds, counted to the
	// horizon, by the run's span, which ends at its last activity: an
	// oscillator that kept scaling for 600 s after a 0.5 s span reported
	// a mean of 541.6 replicas with a peak of 2 (checkReport checks every
	// pool's mean against its peak).
	"fleet-mean-above-peak": `version: 1
deployment:
  pools:
    - {max_replicas: 2}
  router: {admission_latency_us: 1099511627776}
workload:
  synthetic: {requests: 5}
policies:
  autoscale: {type: oscillator}
run: {horizon_s: 600}
`,
	// KPA summed every sample of its 60 s stable window at each
	// evaluation: at interval_s 0.001 that was 60,000 per evaluation, and
	// 300 simulated seconds (requests held by the admission latency keep
	// it evaluating) took minutes.
	"kpa-every-millisecond": `version: 1
deployment:
  pools:
    - {name: a, max_replicas: 3}
  router: {admission_latency_us: 1000000000}
workload:
  synthetic: {requests: 20, rate: 8}
policies:
  autoscale: {type: kpa, params: {interval_s: 0.001}}
run: {horizon_s: 300}
`,
	// Under disaggregation, a decode pool scaled from zero failed the run
	// at its first request ("no instance decodes (every pool's role is
	// prefill)", naming no key).
	"decode-scaled-from-zero": `version: 1
deployment:
  pools:
    - {name: p, role: prefill, max_replicas: 2}
    - {name: d, role: decode, replicas: 0, min_replicas: 0, max_replicas: 2}
workload:
  synthetic: {requests: 5}
policies:
  autoscale: {type: kpa}
  disaggregation: {type: always}
`,
	// A scale-down ended a request still in transit to its instance
	// (routed, not there yet after the routing latency): CL-3, departed
	// before it was injected.
	"scale-down-of-a-request-in-transit": `version: 1
deployment:
  pools:
    - {replicas: 3, min_replicas: 1, max_replicas: 3}
  router: {routing_latency_us: 100000000}
workload:
  synthetic: {requests: 20, rate: 1000}
policies:
  autoscale: {type: kpa}
run: {horizon_s: 600}
`,
}

func TestGeneratedExperiments(t *testing.T) {
	for name, text := range generated {
		t.Run(name, func(t *testing.T) { checkExperiment(t, text) })
	}
}

// knownDefects fail the generator's property today, each with its
// symptom; their owners fix them. A test here fails when its experiment
// stops failing: then move it to generated, and remove the generator's
// avoidance of its class (its comment in wholegen_test.go names it).
var knownDefects = map[string]struct{ text, symptom string }{
	// Disaggregation: a network slow enough that transfers outlast the
	// horizon fails the prefill instance's INV-1 at the horizon.
	"TestKnownDefectSlowNetworkAtTheHorizon": {`version: 1
deployment:
  pools:
    - {vllm: {total_kv_blocks_gpu: 200}}
    - {role: decode}
  network: {efficiency: 0.001}
policies:
  disaggregation: {type: prefix-threshold}
run: {horizon_s: 600}
`, "invariant INV-1 failed: instance instance_0: invariant INV-1 violated at t=598971845 µs (step 47966): no event is left but 501 of 966 requests are neither completed, dropped, rejected nor timed out"},
	// Disaggregation: a prefill instance whose KV is held by copies that
	// a decode pool too small for the prompts dropped (released only by
	// the 480 s abort timer) fails INV-1 once a horizon stops the run
	// (at any horizon from 0.5 s; without one the run ends at 2,880 s,
	// every request dropped).
	"TestKnownDefectHeldCopiesAtTheHorizon": {`version: 1
deployment:
  pools:
    - {role: prefill, vllm: {total_kv_blocks_gpu: 200}}
    - {role: decode, vllm: {total_kv_blocks_gpu: 40}}
workload:
  synthetic: {requests: 20, prompt_tokens: 'const:1000'}
policies:
  disaggregation: {type: always}
run: {horizon_s: 600}
`, "invariant INV-1 failed: instance instance_0: invariant INV-1 violated at t=480219980 µs (step 6): no event is left but 14 of 20 requests are neither completed, dropped, rejected nor timed out"},
}

func TestKnownDefects(t *testing.T) {
	for name, d := range knownDefects {
		t.Run(name, func(t *testing.T) {
			got := property(t, d.text)
			if !strings.Contains(got, d.symptom) {
				t.Fatalf("the known defect no longer shows (got %q): move its experiment to generated and remove the generator's avoidance of it", got)
			}
		})
	}
}
