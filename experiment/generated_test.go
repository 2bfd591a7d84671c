package experiment_test

import "testing"

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
	// Disaggregation: a network slow enough that KV transfers outlast the
	// horizon. The prefill instance's queue waited for blocks its copies
	// held (released when their transfers end), with no event of its own:
	// INV-1 failed at the horizon ("no event is left but 501 of 966
	// requests are neither completed, ..."). Now counted in the system.
	"slow-network-at-the-horizon": `version: 1
deployment:
  pools:
    - {vllm: {total_kv_blocks_gpu: 200}}
    - {role: decode}
  network: {efficiency: 0.001}
policies:
  disaggregation: {type: prefix-threshold}
run: {horizon_s: 600}
`,
	// Disaggregation: a decode pool too small for the prompts drops them
	// (refused in its API stage, as vLLM refuses a prompt past its
	// context), and their prefill copies wait for the 480 s abort timer,
	// as vLLM's do; the prefill instance's queue waited for those blocks
	// and INV-1 failed once a horizon stopped the run ("no event is left
	// but 14 of 20 requests are neither completed, ..."). Now 6 dropped,
	// 14 still queued.
	"held-copies-at-the-horizon": `version: 1
deployment:
  pools:
    - {role: prefill, vllm: {total_kv_blocks_gpu: 200}}
    - {role: decode, vllm: {total_kv_blocks_gpu: 40}}
workload:
  synthetic: {requests: 20, prompt_tokens: 'const:1000'}
policies:
  disaggregation: {type: always}
run: {horizon_s: 600}
`,
}

func TestGeneratedExperiments(t *testing.T) {
	for name, text := range generated {
		t.Run(name, func(t *testing.T) { checkExperiment(t, text) })
	}
}
