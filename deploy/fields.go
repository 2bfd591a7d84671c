package deploy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// keyFlag is the vocabulary: a deployment file key and blis run's flag for
// the same setting. Pool keys are relative to one pool; cluster keys are
// top-level. This table is the one place that pairs them.
var keyFlag = []struct{ key, flag string }{
	// Per instance (a pool's keys).
	{"model", "--model"},
	{"hardware", "--hardware"},
	{"tp", "--tp"},
	{"data_parallel_size", "--data-parallel-size"},
	{"enable_expert_parallel", "--enable-expert-parallel"},
	{"vllm.max_num_seqs", "--max-num-seqs"},
	{"vllm.max_batched_tokens", "--max-num-batched-tokens"},
	{"vllm.chunked_prefill_enabled", "--enable-chunked-prefill"},
	{"vllm.prefix_caching_enabled", "--enable-prefix-caching"},
	{"vllm.block_size_tokens", "--block-size"},
	{"vllm.total_kv_blocks_gpu", "--kv-blocks-gpu"},
	{"vllm.gpu_memory_utilization", "--gpu-memory-utilization"},
	{"vllm.total_kv_blocks_cpu", "--kv-blocks-cpu"},
	{"vllm.cpu_offloading", "--kv-blocks-cpu"},
	{"vllm.long_prefill_token_threshold", "--long-prefill-token-threshold"},
	{"vllm.max_model_len", "--max-model-len"},
	{"vllm.offload_threshold", "--kv-offload-threshold"},
	{"vllm.async_scheduling", "--async-scheduling"},
	{"vllm.scheduler_reserve_full_isl", "--scheduler-reserve-full-isl"},
	{"vllm.output_delay_us", "--output-delay-us"},
	{"scheduler", "--scheduler"},
	{"priority", "--priority"},
	{"priority_base", "--priority-base"},
	{"priority_age_weight", "--priority-age-weight"},
	{"latency.model", "--latency"},
	{"latency.coefficients", "--coefficients"},
	{"latency.roofline", "--roofline-compute-eff, --roofline-bandwidth-eff, --roofline-step-overhead-us"},
	{"latency.roofline.compute_eff", "--roofline-compute-eff"},
	{"latency.roofline.bandwidth_eff", "--roofline-bandwidth-eff"},
	{"latency.roofline.step_overhead_us", "--roofline-step-overhead-us"},
	{"latency.blackbox", "--alpha-coeffs, --beta-coeffs"},
	{"latency.blackbox.alpha", "--alpha-coeffs"},
	{"latency.blackbox.beta", "--beta-coeffs"},
	{"latency.noise", "--latency-noise"},
	{"replicas", "--num-instances"},
	// The cluster (top-level keys).
	{"admission.policy", "--admission-policy"},
	{"admission.token_bucket_capacity", "--token-bucket-capacity"},
	{"admission.token_bucket_refill_rate", "--token-bucket-refill-rate"},
	{"admission.latency_us", "--admission-latency"},
	{"routing.policy", "--routing-policy"},
	{"routing.scorers", "--routing-scorers"},
	{"routing.latency_us", "--routing-latency"},
	{"routing.prefix_index_capacity", "--prefix-index-capacity"},
	{"routing.snapshot_refresh_interval_us", "--snapshot-refresh-interval"},
}

// Flags lists, in table order and once each, every flag that Flag can
// name, so that the CLI can check that it defines them all.
func Flags() []string {
	var out []string
	for _, kf := range keyFlag {
		for _, f := range strings.Split(kf.flag, ", ") {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Flag is blis run's flag for a deployment key, or "" when there is none.
func Flag(key string) string {
	for _, kf := range keyFlag {
		if kf.key == key {
			return kf.flag
		}
	}
	return ""
}

// FlagError rewrites a *FieldError in blis run's terms, naming flags
// instead of keys ("--max-num-seqs: must be > 0, got 0"); other errors are
// returned unchanged.
func FlagError(err error) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return err
	}
	names := make([]string, len(fe.Fields))
	for i, k := range fe.Fields {
		names[i] = k
		if f := Flag(k); f != "" {
			names[i] = f
		}
	}
	return fmt.Errorf("%s: %w", strings.Join(names, ", "), fe.Err)
}
