package deploy

import (
	"fmt"
	"strconv"
	"strings"
)

// The roofline's per-step CPU cost as a function of what a deployment
// states: the vLLM version, async scheduling and CUDA graphs
// (docs/simulator.md, "Per-step cost"). Each constant names the
// measurement it comes from; what no public measurement covers is said,
// not guessed.
const (
	// StepOverheadV1Us is the gap between the forward passes of vLLM's V1
	// engine with async scheduling and CUDA graphs, µs: vLLM PR 11133
	// (github.com/vllm-project/vllm/issues/10634) measured 150-170 µs between decode steps of Llama-2-7B
	// at batch 256 with the engine scheduling one step ahead, the GPU busy
	// throughout. It is all the engine core adds to the GPU's kernels,
	// whose own latencies (a GEMM's ~5 µs, an attention's ~11 µs, per
	// layer) the roofline's kernel model prices.
	StepOverheadV1Us = 160
	// PerRequestOverheadUs is the cost per running request per step with
	// async scheduling, µs: none beyond the fixed gap, which PR 11133
	// measured at batch 256.
	PerRequestOverheadUs = 0
	// ScalarStepOverheadUs and ScalarPerRequestOverheadUs are the per-step
	// cost of the roofline's scalar bounds (latency.roofline.kernels:
	// false), which have no kernel latencies: --calibrate on the four
	// vLLM 0.19 runs of testdata/vllm-runs found 883, 914, 899 and 900 µs
	// with them, the per-request 4 µs an estimate (docs/validation.md).
	ScalarStepOverheadUs       = 900
	ScalarPerRequestOverheadUs = 4
	// SyncPerRequestOverheadUs is what a step costs more per running
	// request without async scheduling, when the scheduler and the output
	// processing no longer overlap the forward pass, µs: github.com/vllm-project/vllm/issues/10634
	// (PR 11133), Llama-2-7B at batch 256, a gap of 5-6 ms between decode
	// steps, 150-170 µs with the engine scheduling one step ahead:
	// (5,500 - 160) / 256 = 20.9 µs per request.
	SyncPerRequestOverheadUs = 20.9
)

// vLLM's defaults by version (vLLM release notes): the V1 engine from
// 0.8.0, async scheduling on by default from 0.14.0.
var (
	vllmV1Since    = [3]int{0, 8, 0}
	vllmAsyncSince = [3]int{0, 14, 0}
)

// StepCost is the roofline's per-step cost for the spec: a fixed cost per
// step and a cost per running request, both µs, and a sentence saying
// why, for the run's notes. Warnings are settings the table does not
// model (the V0 engine, eager mode), for the caller to show.
type StepCost struct {
	FixedUs, PerRequestUs float64
	Why                   string
	Warnings              []string
}

// StepCostOf resolves the spec's per-step cost. An explicit
// latency.roofline.step_overhead_us replaces the fixed cost (the per-request
// cost stays the table's).
func StepCostOf(s InstanceSpec) StepCost {
	c := StepCost{FixedUs: StepOverheadV1Us, PerRequestUs: PerRequestOverheadUs}
	fixed, perReq := "vLLM PR 11133's measured gap between steps; the GPU's kernel latencies are the kernel model's", ""
	if s.Latency.Roofline != nil && s.Latency.Roofline.Scalar {
		c = StepCost{FixedUs: ScalarStepOverheadUs, PerRequestUs: ScalarPerRequestOverheadUs}
		fixed, perReq = "calibrated on four vLLM 0.19 runs with the roofline's scalar bounds", fmt.Sprintf("; %g µs per request estimated", float64(ScalarPerRequestOverheadUs))
	}
	set := s.Latency.Roofline != nil && s.Latency.Roofline.StepOverheadSet
	version := "vLLM V1"
	if v, ok := parseVersion(s.VLLMVersion); ok {
		version = "vLLM " + s.VLLMVersion
		if less(v, vllmV1Since) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("vllm.version %s runs vLLM's V0 engine, whose per-step CPU cost the simulator does not model; it takes V1's (docs/simulator.md, \"Per-step cost\")", s.VLLMVersion))
		}
		if s.AsyncScheduling && less(v, vllmAsyncSince) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("vllm.version %s schedules synchronously unless told to (async scheduling is on by default from 0.14); set vllm.async_scheduling: false (--async-scheduling=false) if the deployment did not turn it on", s.VLLMVersion))
		}
	}
	sched, graphs := "async scheduling", "CUDA graphs"
	if !s.AsyncScheduling {
		sched = "synchronous scheduling"
		c.PerRequestUs += SyncPerRequestOverheadUs
		perReq += fmt.Sprintf("; %g µs more per request without async scheduling (github.com/vllm-project/vllm/issues/10634)", SyncPerRequestOverheadUs)
	}
	if s.EnforceEager {
		graphs = "eager mode"
		if !set && s.Host == nil {
			c.Warnings = append(c.Warnings, "vllm.enforce_eager: kernel launches without CUDA graphs cost a deployment milliseconds per step by public reports (1.5-10 ms on 7B models), too scattered to price, and the per-step cost here is CUDA graphs'; calibrate it on a run of the deployment (blis validate --calibrate) and give it as latency.roofline.step_overhead_us (--roofline-step-overhead-us)")
		}
	}
	switch h := s.Host; {
	case set:
		c.FixedUs = s.Latency.Roofline.StepOverheadUs
		fixed = "latency.roofline.step_overhead_us"
	case h != nil:
		c.FixedUs = h.StepOverheadUs
		fixed = fmt.Sprintf("host_profile %s, calibrated on %s", h.Path, h.CalibratedOn.Records)
		c.Warnings = append(c.Warnings, h.hostNotes(s)...)
	}
	c.Why = fmt.Sprintf("per-step cost %g µs + %g µs per running request, for %s with %s and %s (%s%s)",
		c.FixedUs, c.PerRequestUs, version, sched, graphs, fixed, perReq)
	return c
}

// parseVersion reads "0.19.0", "0.19", "v0.19.1rc2" or "0.11.0+cu128" as
// major, minor, patch.
func parseVersion(s string) ([3]int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	var out [3]int
	if s == "" {
		return out, false
	}
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(p[:end])
		if err != nil {
			return out, false
		}
		out[i] = n
	}
	return out, len(parts) >= 2
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
