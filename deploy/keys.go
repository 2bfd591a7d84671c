package deploy

import (
	"strconv"
	"strings"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/kvstore"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// The deployment's keys, each declared once: its type, unit, default
// (with where the default comes from), range and meaning. The experiment
// file's decoder checks every value against its key before anything
// reads it (experiment.Keys), the flags take their defaults from here,
// and the docs' tables are generated from or checked against these.
// Names are relative to a pool (PoolKeys), to deployment.network
// (NetworkKeys), to deployment.kv_store (KVStoreKeys) and to
// deployment.router (RouterKeys). Rules across keys (replicas within
// [min_replicas, max_replicas], a node that holds an instance) stay with
// the code that applies them.

// maxFleetS bounds every delay of a pool's fleet: a week.
const maxFleetS = 7 * 86400

// Bounds of the KV tiers' sizes (1 EB) and rates (1 PB/s, as sim does).
const (
	maxTierGB     = 1e9
	maxTierGBPerS = 1e6
)

var maxDurationUs = float64(sim.MaxDurationUs)

// PoolKeys are a pool's keys: its name and size, the instance's model,
// GPU, parallelism, vLLM settings, latency model and KV tiers, and the
// fleet's bounds, nodes, start-up and drain (the fleet's keys have an
// effect in a cluster only).
var PoolKeys = []schema.Key{
	{Name: "name", Type: schema.String, DefaultText: "pool<i>", Doc: "1-64 letters, digits, '.', '_' or '-'"},
	{Name: "replicas", Type: schema.Int, Unit: "instances", Default: schema.I(1), DefaultText: "1, or min_replicas", Min: 0, Max: MaxInstances,
		Doc: "instances in the pool; at most 4096 in all; 0 only for a pool an autoscaler may scale from zero (min_replicas 0)"},
	{Name: "role", Type: schema.String, Default: schema.S(RoleBoth), Enum: []string{RoleBoth, RolePrefill, RoleDecode},
		Doc: "the pool's part under prefill/decode disaggregation (docs/disaggregation.md)"},
	{Name: "model", Type: schema.String, Default: schema.S(DefaultModel), Doc: "a shipped model name or a HuggingFace config.json"},
	{Name: "hardware", Type: schema.String, Default: schema.S(DefaultHardware), Doc: "a shipped hardware name or a hardware spec JSON"},
	{Name: "tp", Type: schema.Int, Unit: "GPUs", Default: schema.I(1), Min: 1, Max: 1 << 16, Doc: "tensor-parallel degree: GPUs per engine"},
	{Name: "data_parallel_size", Type: schema.Int, Unit: "engines", Default: schema.I(1), Min: 1, Max: MaxInstances,
		Doc: "vLLM --data-parallel-size: N > 1 is one server of N engines behind vLLM's own balancer"},
	{Name: "enable_expert_parallel", Type: schema.Bool, Doc: "vLLM --enable-expert-parallel: routed experts sharded over the data-parallel × tensor-parallel ranks"},
	{Name: "vllm.max_num_seqs", Type: schema.Int, Unit: "requests", Default: schema.I(physics.DefaultVLLMKnobs().MaxNumSeqs), Min: 1, Max: schema.Unbounded,
		Source: "vLLM's default", Doc: "vLLM --max-num-seqs: running requests at most"},
	{Name: "vllm.max_batched_tokens", Type: schema.Int, Unit: "tokens", Default: schema.I(physics.DefaultVLLMKnobs().MaxBatchedTokens), Min: 1, Max: schema.Unbounded,
		Source: "vLLM's default", Doc: "vLLM --max-num-batched-tokens: token budget per step"},
	{Name: "vllm.chunked_prefill_enabled", Type: schema.Bool, Default: schema.B(physics.DefaultVLLMKnobs().ChunkedPrefillEnabled), Doc: "vLLM --enable-chunked-prefill"},
	{Name: "vllm.prefix_caching_enabled", Type: schema.Bool, Default: schema.B(physics.DefaultVLLMKnobs().PrefixCachingEnabled), Doc: "vLLM --enable-prefix-caching"},
	{Name: "vllm.block_size_tokens", Type: schema.Int, Unit: "tokens", Default: schema.I(physics.DefaultVLLMKnobs().BlockSizeTokens), Min: 1, Max: physics.MaxBlockSizeTokens,
		Source: "vLLM's default", Doc: "vLLM --block-size: tokens per KV block"},
	{Name: "vllm.total_kv_blocks_gpu", Type: schema.String, Default: schema.S("auto"), Doc: "GPU KV blocks, a count > 0, or auto to derive them from device memory as vLLM does"},
	{Name: "vllm.gpu_memory_utilization", Type: schema.Float, Default: schema.F(physics.DefaultVLLMKnobs().GPUMemoryUtilization), MinOpen: true, Max: 1,
		Source: "vLLM's default", Doc: "vLLM --gpu-memory-utilization: share of device memory vLLM may use (when deriving the GPU KV blocks)"},
	{Name: "vllm.total_kv_blocks_cpu", Type: schema.Int, Unit: "blocks", Min: 0, Max: schema.Unbounded, Doc: "CPU KV blocks for offload (0: no CPU tier)"},
	{Name: "vllm.offload_threshold", Type: schema.Float, Default: schema.F(DefaultOffloadThreshold), Min: 0, Max: 1,
		Doc: "GPU KV usage above which evicted blocks are stored to the CPU tier (with a CPU tier only)"},
	{Name: "vllm.long_prefill_token_threshold", Type: schema.Int, Unit: "tokens", Min: 0, Max: schema.Unbounded, Doc: "vLLM --long-prefill-token-threshold: prefill tokens per request per step (0: no cap)"},
	{Name: "vllm.max_model_len", Type: schema.Int, Unit: "tokens", Min: 0, Max: schema.Unbounded, Doc: "vLLM --max-model-len (0: the model's context)"},
	{Name: "vllm.async_scheduling", Type: schema.Bool, Default: schema.B(true), Source: "vLLM V1's default", Doc: "vLLM --async-scheduling: the engine core schedules one step ahead"},
	{Name: "vllm.version", Type: schema.String, DefaultText: "a current V1 engine", Doc: "the vLLM release the deployment runs (0.19.0): with async_scheduling and enforce_eager it sets the roofline's per-step cost"},
	{Name: "vllm.enforce_eager", Type: schema.Bool, Doc: "vLLM --enforce-eager: no CUDA graphs"},
	{Name: "vllm.scheduler_reserve_full_isl", Type: schema.Bool, Default: schema.B(true), Source: "vLLM's default", Doc: "admit a request only when the free KV blocks hold its whole sequence so far"},
	{Name: "vllm.output_delay_us", Type: schema.Int, Unit: "µs", Default: schema.I(sim.DefaultOutputDelayUs), Min: 0, Max: 3600e6,
		Doc: "from the end of the step that produced a token to the client receiving it"},
	{Name: "latency.model", Type: schema.String, Default: schema.S("auto"), Enum: []string{"auto", "physics", "roofline", "blackbox"},
		Doc: "auto: physics with coefficients fitted on this configuration, else roofline"},
	{Name: "latency.coefficients", Type: schema.String, Doc: "a coefficient file written by calibrate fit (physics)"},
	{Name: "latency.roofline.compute_eff", Type: schema.Float, Default: schema.F(DefaultRooflineParams.ComputeEff), MinOpen: true, Max: 1,
		Doc: "roofline: share of the GPU's sustained GEMM rate reached"},
	{Name: "latency.roofline.bandwidth_eff", Type: schema.Float, Default: schema.F(DefaultRooflineParams.BandwidthEff), MinOpen: true, Max: 1,
		Doc: "roofline: share of peak HBM bandwidth reached"},
	{Name: "latency.roofline.kernels", Type: schema.Bool, Default: schema.B(true),
		Doc: "roofline: price each kernel by the measured kernel model; false: the scalar compute and bandwidth bounds"},
	{Name: "latency.roofline.step_overhead_us", Type: schema.String, Default: schema.S("auto"),
		Doc: "roofline: fixed cost per step, µs, or auto: from the vLLM version, async scheduling and CUDA graphs"},
	{Name: "latency.blackbox.alpha", Type: schema.List, Len: 3, Unit: "µs", Default: schema.L(DefaultBlackboxParams.Alpha[:]...), Min: 0, Max: schema.Unbounded,
		Doc: "blackbox: queueing µs, µs per prompt token; µs per output token at departure"},
	{Name: "latency.blackbox.beta", Type: schema.List, Len: 3, Unit: "µs", Default: schema.L(DefaultBlackboxParams.Beta[:]...), Min: 0, Max: schema.Unbounded,
		Doc: "blackbox: step µs, µs per prefill token, µs per decode token"},
	{Name: "latency.noise", Type: schema.Float, Min: 0, Max: 2, Doc: "log-normal σ of mean-one step-time noise (0: none)"},
	{Name: "kv_tiers.disk.capacity_gb", Type: schema.Float, Unit: "GB", DefaultText: "required", MinOpen: true, Max: maxTierGB,
		Doc: "the local drive's size for KV; blocks = ⌊capacity / block bytes⌋"},
	{Name: "kv_tiers.disk.read_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(sim.DefaultDiskReadBytesPerS / 1e9), MinOpen: true, Max: maxTierGBPerS,
		Source: "a PCIe 4.0 ×4 NVMe drive's sequential read (Samsung 980 PRO datasheet: 7,000 MB/s)", Doc: "the drive's read rate"},
	{Name: "kv_tiers.disk.write_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(sim.DefaultDiskWriteBytesPerS / 1e9), MinOpen: true, Max: maxTierGBPerS,
		Source: "its sequential write (980 PRO: 5,000 MB/s)", Doc: "the drive's write rate"},
	{Name: "kv_tiers.disk.latency_us", Type: schema.Int, Unit: "µs", Default: schema.I(sim.DefaultDiskLatencyUs), Min: 0, Max: maxDurationUs,
		Doc: "per read and after a write"},
	{Name: "kv_tiers.store", Type: schema.Bool, DefaultText: "true with a `kv_store`", Doc: "the pool's link to the deployment's kv_store"},
	{Name: "host_profile", Type: schema.String, Doc: "a host profile file: the per-step cost and output delay measured on this vLLM build and host"},
	{Name: "min_replicas", Type: schema.Int, Unit: "instances", Default: schema.I(1), Min: 0, Max: MaxInstances, Doc: "the autoscaler's lower bound (0: scale to zero)"},
	// Bounded like the instance count: a fleet never holds more than
	// MaxInstances at once (an oscillator at 100,000 once reached 3 GB in
	// 28 s); the deployment checks the pools' sum.
	{Name: "max_replicas", Type: schema.Int, Unit: "instances", DefaultText: "replicas; required with an autoscaler", Min: 1, Max: MaxInstances,
		Doc: "the autoscaler's upper bound"},
	{Name: "nodes.gpus_per_node", Type: schema.Int, Unit: "GPUs", Default: schema.I(DefaultGPUsPerNode), DefaultText: "8, or one instance's GPUs", Min: 1, Max: 1 << 16,
		Source: "an 8-GPU server: NVIDIA HGX/DGX H100 and A100, AWS p5.48xlarge, g6e.48xlarge", Doc: "a node's GPUs"},
	{Name: "nodes.max_nodes", Type: schema.Int, Unit: "nodes", Min: 0, Max: cluster.MaxScaledInstances, Doc: "nodes at most (0: no limit)"},
	{Name: "nodes.provision_s", Type: schema.List, Len: 2, Unit: "s", Default: schema.L(DefaultProvisionMinS, DefaultProvisionMaxS), Min: 0, Max: maxFleetS,
		Source: "a GPU node takes 2-8 min to be ready (BEE-30068); AKS reports ~10 min for an A100 node and its pod", Doc: "a new node's delay, uniform in [min, max]"},
	{Name: "nodes.idle_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultNodeIdleS), Min: 0, Max: maxFleetS,
		Source: "cluster-autoscaler --scale-down-unneeded-time (10 min)", Doc: "an empty node is released after this"},
	{Name: "nodes.price_per_gpu_hour", Type: schema.Float, Unit: "$/GPU-hour", DefaultText: "by hardware", Min: 0, Max: 1e6, Doc: "a GPU-hour's cost, billed from a node's provisioning to its release"},
	{Name: "startup.image_pull_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultImagePullS), Min: 0, Max: maxFleetS,
		Source: "a 10 GB inference image pulls in 7-10 min with overlayfs (tensorfuse.io snapshotter benchmarks): the low end", Doc: "once per node"},
	{Name: "startup.storage_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(DefaultStorageGBps), Min: 0.001, Max: 1e4,
		Source: "70B weights (~140 GB) load in 1-10 min (BEE-30068): 0.23-2.3 GB/s", Doc: "the weights' load rate"},
	{Name: "startup.compile_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultCompileS), Min: 0, Max: maxFleetS,
		Source: "torch.compile in vLLM's start-up on a cold cache (~39 s, route179.dev 2026-06-30)", Doc: "compilation at start-up (0: a warm compile cache)"},
	{Name: "startup.graph_capture_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultGraphCaptureS), Min: 0, Max: maxFleetS,
		Source: "capturing vLLM's 67 CUDA graphs \"can take more than 10 s\" (vllm-project/vllm#20098)", Doc: "CUDA graph capture at start-up"},
	{Name: "startup.warmup_penalty", Type: schema.Float, Default: schema.F(1), Min: 1, Max: 100, Doc: "> 1: a new instance's steps that much slower when first routed to (1: none)"},
	{Name: "startup.warmup_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultWarmupS), Min: 0, Max: maxFleetS, Doc: "the penalty falls linearly to 1 over this"},
	{Name: "drain.policy", Type: schema.String, Default: schema.S("wait"), Enum: []string{"wait", "immediate", "redirect"},
		Doc: "a scaled-down instance's requests: finish (wait), killed (immediate), waiting ones routed elsewhere (redirect)"},
	{Name: "drain.timeout_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultDrainTimeoutS), Min: 0, Max: maxFleetS,
		Source: "Kubernetes' terminationGracePeriodSeconds", Doc: "bounds wait and redirect (0: none)"},
}

// NetworkKeys are deployment.network's keys: the links that move KV from
// a prefill instance to its decode instance (network.go).
var NetworkKeys = []schema.Key{
	{Name: "nic_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(DefaultNICGBPerSec), MinOpen: true, Max: 1e5,
		Source: "400 Gb/s line rate (ConnectX-7, one per GPU on DGX/HGX H100)", Doc: "one NIC's line rate, each way"},
	{Name: "efficiency", Type: schema.Float, Default: schema.F(DefaultNetEfficiency), MinOpen: true, Max: 1,
		Source: "Mooncake transfer engine: 87 GB/s over 4×200 Gb/s RoCE (FAST 2025; its docs' performance page)", Doc: "the share of every link's rate a transfer reaches"},
	{Name: "latency_us", Type: schema.Int, Unit: "µs", Default: schema.I(DefaultNetLatencyUs), Min: 0, Max: MaxNetLatencyUs,
		Source: "an assumption, not a measurement (docs/disaggregation.md)", Doc: "a transfer's fixed cost after its last byte"},
	{Name: "abort_timeout_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultAbortTimeoutUs / 1e6), Min: 0, Max: MaxAbortTimeoutUs / 1e6,
		Source: "vLLM VLLM_NIXL_ABORT_REQUEST_TIMEOUT (vllm/envs.py)", Doc: "a prefill instance frees KV no decode instance pulled by then (0: never)"},
}

// KVStoreKeys are deployment.kv_store's keys: the KV store the pools
// share (tiers.go).
var KVStoreKeys = []schema.Key{
	{Name: "capacity_gb", Type: schema.Float, Unit: "GB", DefaultText: "required", MinOpen: true, Max: maxTierGB, Doc: "the store's size"},
	{Name: "high_watermark", Type: schema.Float, Default: schema.F(kvstore.DefaultHighWatermark), MinOpen: true, Max: 1,
		Source: "Mooncake Store", Doc: "usage share that triggers an eviction round"},
	{Name: "eviction_ratio", Type: schema.Float, Default: schema.F(kvstore.DefaultEvictionRatio), MinOpen: true, Max: 1,
		Source: "Mooncake Store", Doc: "share of the objects a round evicts"},
	{Name: "get_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(sim.DefaultStoreBytesPerSPerGPU / 1e9), MinOpen: true, Max: maxTierGBPerS,
		Source: "one 400 Gb/s RDMA NIC per GPU at the rate Mooncake's transfer engine measured", Doc: "an instance's link per GPU, reading"},
	{Name: "put_gb_per_s", Type: schema.Float, Unit: "GB/s", Default: schema.F(sim.DefaultStoreBytesPerSPerGPU / 1e9), MinOpen: true, Max: maxTierGBPerS,
		Source: "as get_gb_per_s", Doc: "an instance's link per GPU, writing"},
	{Name: "latency_us", Type: schema.Int, Unit: "µs", Default: schema.I(sim.DefaultStoreLatencyUs), Min: 0, Max: maxDurationUs,
		Source: "sim/tiers.go (docs/kv-tiers.md)", Doc: "a get's or put's fixed cost"},
	{Name: "sync_us", Type: schema.Int, Unit: "µs", Default: schema.I(cluster.DefaultKVStoreSyncUs), Min: 1, Max: maxDurationUs,
		Doc: "how often the instances' view of the store is brought up to date"},
}

// RouterKeys are deployment.router's keys: the router's latencies, how
// fresh the signals it reads are, and how long a request may wait for a
// ready instance.
var RouterKeys = func() []schema.Key {
	keys := []schema.Key{
		{Name: "admission_latency_us", Type: schema.Int, Unit: "µs", Min: 0, Max: maxDurationUs, Doc: "from admission to the routing decision"},
		{Name: "routing_latency_us", Type: schema.Int, Unit: "µs", Min: 0, Max: maxDurationUs, Doc: "from the routing decision to the request's arrival at the instance"},
	}
	for s := cluster.Signal(0); s < cluster.NumSignals; s++ {
		keys = append(keys, schema.Key{Name: "snapshot_refresh_us." + s.String(), Type: schema.Int, Unit: "µs", Min: 0, Max: maxDurationUs,
			Doc: "the signal's refresh interval (0: read at every decision)"})
	}
	return append(keys, schema.Key{Name: "capacity_wait_timeout_s", Type: schema.Float, Unit: "s", Default: schema.F(DefaultCapacityWaitTimeoutUs / 1e6), Min: 0, Max: maxDurationUs / 1e6,
		Source: "Knative's revision-timeout-seconds: its activator holds a request while a revision scales from zero", Doc: "how long a request waits at the router while no instance is ready (0: its own timeout only)"})
}()

// Key is the declaration named name in keys, or nil.
func Key(keys []schema.Key, name string) *schema.Key {
	for i := range keys {
		if keys[i].Name == name {
			return &keys[i]
		}
	}
	return nil
}

// Currency is what prices and costs are counted in: the currency of
// nodes.price_per_gpu_hour's declared unit ("$" of "$/GPU-hour").
func Currency() string {
	c, _, _ := strings.Cut(Key(PoolKeys, "nodes.price_per_gpu_hour").Unit, "/")
	return c
}

// FormatCost writes an amount of Currency to the cent: $0.83.
func FormatCost(x float64) string {
	return Currency() + strconv.FormatFloat(x, 'f', 2, 64)
}
