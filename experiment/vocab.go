package experiment

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim/workload"
)

// Flag is one of blis run's flags: the experiment key it sets, so that
// the CLI is a mapping from flags to an experiment and this table is the
// one place that pairs them. Keys under deployment.pools[*] set every
// pool. A flag whose Key is empty is a macro SetFlag spells out.
type Flag struct {
	Name    string // without the dashes
	Key     string
	Type    string // bool, int, float or string: how the CLI parses it
	Default string // as the flag shows it
	Help    string
	// Cluster flags make a run a cluster run when given.
	Cluster bool
}

// Flags lists blis run's flags that describe an experiment, in help order.
var Flags = []Flag{
	// The instance (every pool).
	{Name: "model", Key: pool("model"), Type: "string", Default: keyDefault(pool("model")), Help: "shipped model name (listed at the end of the description) or path to a HuggingFace config.json"},
	{Name: "hardware", Key: pool("hardware"), Type: "string", Default: keyDefault(pool("hardware")), Help: "shipped hardware name (listed at the end of the description) or path to a hardware spec JSON"},
	{Name: "tp", Key: pool("tp"), Type: "int", Default: keyDefault(pool("tp")), Help: "tensor-parallel degree: GPUs per engine"},
	{Name: "max-num-seqs", Key: pool("vllm.max_num_seqs"), Type: "int", Default: keyDefault(pool("vllm.max_num_seqs")), Help: "vLLM --max-num-seqs: running requests at most"},
	{Name: "max-num-batched-tokens", Key: pool("vllm.max_batched_tokens"), Type: "int", Default: keyDefault(pool("vllm.max_batched_tokens")), Help: "vLLM --max-num-batched-tokens: token budget per step"},
	{Name: "long-prefill-token-threshold", Key: pool("vllm.long_prefill_token_threshold"), Type: "int", Default: keyDefault(pool("vllm.long_prefill_token_threshold")), Help: "vLLM --long-prefill-token-threshold: prefill tokens per request per step (0: no cap)"},
	{Name: "max-model-len", Key: pool("vllm.max_model_len"), Type: "int", Default: keyDefault(pool("vllm.max_model_len")), Help: "vLLM --max-model-len: the context a request's prompt + output tokens must fit, else it is rejected as vLLM rejects it (HTTP 400) and counted in rejected_too_long (0: the model config's max_position_embeddings or n_positions)"},
	{Name: "data-parallel-size", Type: "int", Default: "1", Cluster: true, Help: "vLLM --data-parallel-size: the server is this many engines behind vLLM's own load balancer (the vllm-dp routing policy, counts refreshed every 100 ms); runs as a cluster"},
	{Name: "enable-expert-parallel", Key: pool("enable_expert_parallel"), Type: "bool", Default: keyDefault(pool("enable_expert_parallel")), Help: "vLLM --enable-expert-parallel: a mixture-of-experts model's routed experts are sharded over the data-parallel × tensor-parallel ranks, with an all-gather and a reduce-scatter around every MoE layer"},
	{Name: "async-scheduling", Key: pool("vllm.async_scheduling"), Type: "bool", Default: keyDefault(pool("vllm.async_scheduling")), Help: "vLLM --async-scheduling: the engine core schedules one step ahead, so a request arriving while steps run joins one step later (false: vLLM --no-async-scheduling)"},
	{Name: "vllm-version", Key: pool("vllm.version"), Type: "string", Default: keyDefault(pool("vllm.version")), Help: "the vLLM release the deployment runs (0.19.0; empty: a current V1 engine): with --async-scheduling and --enforce-eager it sets the roofline's per-step cost"},
	{Name: "enforce-eager", Key: pool("vllm.enforce_eager"), Type: "bool", Default: keyDefault(pool("vllm.enforce_eager")), Help: "vLLM --enforce-eager: no CUDA graphs (its per-step cost is not priced: calibrate it, see --roofline-step-overhead-us)"},
	{Name: "host-profile", Key: pool("host_profile"), Type: "string", Default: keyDefault(pool("host_profile")), Help: "a host profile `FILE` (blis validate --calibrate --save-host-profile writes one): the per-step cost and output delay measured on this vLLM build and host, for the roofline"},
	{Name: "scheduler-reserve-full-isl", Key: pool("vllm.scheduler_reserve_full_isl"), Type: "bool", Default: keyDefault(pool("vllm.scheduler_reserve_full_isl")), Help: "vLLM --scheduler-reserve-full-isl: a waiting or preempted request is admitted only when the free KV blocks hold its whole sequence so far (less prefix-cache hits), not only its first chunk (false: vLLM --no-scheduler-reserve-full-isl)"},
	{Name: "output-delay-us", Key: pool("vllm.output_delay_us"), Type: "int", Default: keyDefault(pool("vllm.output_delay_us")), Help: "µs from the end of the step that produced a token to the client receiving it (output processing, detokenization, streaming); moves TTFT and E2E, not ITL; 0 to measure at the engine core's output"},
	{Name: "enable-chunked-prefill", Key: pool("vllm.chunked_prefill_enabled"), Type: "bool", Default: keyDefault(pool("vllm.chunked_prefill_enabled")), Help: "vLLM --enable-chunked-prefill"},
	{Name: "enable-prefix-caching", Key: pool("vllm.prefix_caching_enabled"), Type: "bool", Default: keyDefault(pool("vllm.prefix_caching_enabled")), Help: "vLLM --enable-prefix-caching"},
	{Name: "block-size", Key: pool("vllm.block_size_tokens"), Type: "int", Default: keyDefault(pool("vllm.block_size_tokens")), Help: "vLLM --block-size: tokens per KV block"},
	{Name: "kv-blocks-gpu", Key: pool("vllm.total_kv_blocks_gpu"), Type: "string", Default: keyDefault(pool("vllm.total_kv_blocks_gpu")), Help: "GPU KV blocks, or auto to derive them from device memory as vLLM does"},
	{Name: "gpu-memory-utilization", Key: pool("vllm.gpu_memory_utilization"), Type: "float", Default: keyDefault(pool("vllm.gpu_memory_utilization")), Help: "vLLM --gpu-memory-utilization: share of device memory vLLM may use, in (0, 1] (used when deriving --kv-blocks-gpu)"},
	{Name: "kv-blocks-cpu", Key: pool("vllm.total_kv_blocks_cpu"), Type: "int", Default: keyDefault(pool("vllm.total_kv_blocks_cpu")), Help: "CPU KV blocks for offload (0: no CPU tier)"},
	{Name: "kv-offload-threshold", Key: pool("vllm.offload_threshold"), Type: "float", Default: keyDefault(pool("vllm.offload_threshold")), Help: "GPU KV usage, a share in [0, 1], above which evicted blocks are stored to the CPU tier"},
	{Name: "scheduler", Key: "policies.scheduler.type", Type: "string", Default: templateDefault(policy.Scheduler), Help: "queue order: " + templateList(policy.Scheduler) + " (policies.scheduler; docs/policies.md)"},
	{Name: "priority", Key: "policies.priority.type", Type: "string", Default: templateDefault(policy.Priority), Help: "priority score: " + templateList(policy.Priority) + " (policies.priority; docs/policies.md)"},
	{Name: "priority-base", Key: "policies.priority.params.base", Type: "float", Default: paramDefault(policy.Priority, "constant", "base"), Help: "base priority score, added to every request's (finite; priority-fcfs serves higher scores first)"},
	{Name: "priority-age-weight", Key: "policies.priority.params.age_weight", Type: "float", Default: paramDefault(policy.Priority, "slo-based", "age_weight"), Help: "score per second of age (slo-based, inverted-slo)"},
	{Name: "latency", Key: pool("latency.model"), Type: "string", Default: keyDefault(pool("latency.model")), Help: "latency model: " + strings.Join(declOf(pool("latency.model")).Enum, ", ") + " (auto: physics with --coefficients or shipped coefficients fitted on this configuration, else roofline)"},
	{Name: "coefficients", Key: pool("latency.coefficients"), Type: "string", Default: keyDefault(pool("latency.coefficients")), Help: "coefficient YAML written by calibrate fit (physics model); the model, hardware, TP and vLLM settings no flag gives are its applies_to's. Any model, GPU, TP or settings may be given: outside the file's fitted_configs with a warning, another architecture family (dense, MoE) refused"},
	{Name: "alpha-coeffs", Key: pool("latency.blackbox.alpha"), Type: "string", Default: triple(deploy.DefaultBlackboxParams.Alpha), Help: "blackbox alpha0,alpha1,alpha2: queueing µs + µs per prompt token; µs per output token at departure"},
	{Name: "beta-coeffs", Key: pool("latency.blackbox.beta"), Type: "string", Default: triple(deploy.DefaultBlackboxParams.Beta), Help: "blackbox beta0,beta1,beta2: step µs + µs per prefill token + µs per decode token"},
	{Name: "roofline-compute-eff", Key: pool("latency.roofline.compute_eff"), Type: "float", Default: keyDefault(pool("latency.roofline.compute_eff")), Help: "roofline: share of the GPU's sustained GEMM rate reached (the hardware spec's gemm_tflops, else 0.75 of its peak); with the kernel model, the measured kernels' rates scale by it over 0.8"},
	{Name: "roofline-bandwidth-eff", Key: pool("latency.roofline.bandwidth_eff"), Type: "float", Default: keyDefault(pool("latency.roofline.bandwidth_eff")), Help: "roofline: share of peak HBM bandwidth reached; with the kernel model, the measured kernels' bandwidths scale by it over 0.8"},
	{Name: "roofline-kernels", Key: pool("latency.roofline.kernels"), Type: "bool", Default: keyDefault(pool("latency.roofline.kernels")), Help: "roofline: price each kernel by the measured kernel model (projection GEMMs by shape, elementwise kernels, attention; docs/physics-spec.md, \"Kernel times\"); false: the scalar compute and bandwidth bounds of before"},
	{Name: "roofline-step-overhead-us", Key: pool("latency.roofline.step_overhead_us"), Type: "string", Default: keyDefault(pool("latency.roofline.step_overhead_us")), Help: "roofline: the engine core's fixed cost per step beyond the GPU's kernels, µs, or auto: from the vLLM version, async scheduling and CUDA graphs (160 for vLLM V1 with both, 900 with --roofline-kernels=false; stderr says which and why)"},
	{Name: "latency-noise", Key: pool("latency.noise"), Type: "float", Default: keyDefault(pool("latency.noise")), Help: "log-normal sigma of multiplicative, mean-one step-time noise (dimensionless: 0.05 is about 5 % per step; 0: none)"},

	// The workload.
	{Name: "requests", Key: "workload.synthetic.requests", Type: "int", Default: keyDefault("workload.synthetic.requests"), Help: "number of requests"},
	{Name: "rate", Key: "workload.synthetic.rate", Type: "float", Default: keyDefault("workload.synthetic.rate"), Help: "mean arrival rate, requests per second"},
	{Name: "arrival", Key: "workload.synthetic.arrival", Type: "string", Default: keyDefault("workload.synthetic.arrival"), Help: "arrival process: poisson or gamma"},
	{Name: "gamma-cv", Key: "workload.synthetic.gamma_cv", Type: "float", Default: keyDefault("workload.synthetic.gamma_cv"), Help: "gamma arrivals: coefficient of variation of the gaps (1 = Poisson)"},
	{Name: "prompt-tokens", Key: "workload.synthetic.prompt_tokens", Type: "string", Default: defaultPrompt, Help: "prompt length distribution, a group's shared prefix included (const:N, uniform:A,B, normal:/lognormal:mean=M,cv=C[,min=,max=], exponential:mean=M); with --prefix-groups, a grouped sample no longer than --prefix-tokens is raised to it + 1, and a distribution that cannot exceed it is refused"},
	{Name: "output-tokens", Key: "workload.synthetic.output_tokens", Type: "string", Default: defaultOutput, Help: "output length distribution, same forms"},
	{Name: "prefix-groups", Key: "workload.synthetic.prefix_groups", Type: "int", Default: keyDefault("workload.synthetic.prefix_groups"), Help: "shared-prefix groups (system prompts); 0 for none"},
	{Name: "prefix-tokens", Key: "workload.synthetic.prefix_tokens", Type: "int", Default: keyDefault("workload.synthetic.prefix_tokens"), Help: "tokens of each group's shared prefix"},
	{Name: "prefix-fraction", Key: "workload.synthetic.prefix_fraction", Type: "float", Default: keyDefault("workload.synthetic.prefix_fraction"), Help: "share of requests that start with a group prefix, in [0, 1]"},
	{Name: "replay", Key: "workload.replay.path", Type: "string", Help: "replay arrivals and lengths from a trace: calibrate ingest's requests.parquet (or its directory), a CSV, or an imported trace (see --replay-format); overrides the synthetic workload"},
	{Name: "replay-format", Key: "workload.replay.format", Type: "string", Default: keyDefault("workload.replay.format"), Help: "format of the --replay file: " + strings.Join(workload.ReplayFormats(), ", ") + " (auto: Parquet by magic or extension, an imported trace by content, else CSV)"},
	{Name: "strict", Key: "workload.replay.strict", Type: "bool", Default: keyDefault("workload.replay.strict"), Help: "--replay: fail on the first unreadable row instead of skipping it (skips are counted in the output's replay report)"},
	{Name: "workload-spec", Key: "workload.spec_file", Type: "string", Cluster: true, Help: "workload spec YAML: tenants, SLO classes, arrival processes, load profile, sessions, closed loop (docs/workloads.md); runs as a cluster (1 instance by default) and reports SLO attainment per class and tenant"},
	{Name: "scenario", Key: "workload.scenario", Type: "string", Cluster: true, Help: "built-in workload spec: " + strings.Join(workload.Scenarios(), ", ") + " (docs/workloads.md); or built-in experiment (a deployment, a workload and policies, which flags and --set then change): " + strings.Join(Scenarios(), ", ") + " (docs/autoscaling.md, docs/disaggregation.md)"},

	// The run.
	{Name: "seed", Key: "run.seed", Type: "int", Default: keyDefault("run.seed"), Help: "random seed: the same seed and inputs give byte-identical output"},
	{Name: "horizon", Key: "run.horizon_s", Type: "float", Default: keyDefault("run.horizon_s"), Help: "stop after this many simulated seconds (0: serve every request)"},
	{Name: "warmup", Key: "run.warmup", Type: "string", Default: keyDefault("run.warmup"), Help: "the warm-up removed before the steady-state estimates: auto (found by the MSER-5 rule), none, or a `DURATION` of simulated time from the first arrival (30s, 2m; whole µs) (docs/statistics.md)"},
	{Name: "precision", Key: "run.precision", Type: "float", Default: keyDefault("run.precision"), Help: "size the run by its precision: keep arriving until --precision-metric's 95 % interval is within this share of its estimate (0.05: 5 %) and the run is stable, or it is unstable, or a cap is reached; --requests is then the least length (0: the workload's length; blis capacity: " + fmtFloat(CapacityPrecision) + " unless given, watching --target's metric)"},
	{Name: "precision-metric", Key: "run.precision_metric", Type: "string", Default: keyDefault("run.precision_metric"), Help: "the metric --precision watches, a column of blis sweep's table with an interval (ttft_p99_ms, e2e_mean_ms, requests_per_s, slo_attainment, ...)"},
	{Name: "max-requests", Key: "run.max_requests", Type: "int", Default: keyDefault("run.max_requests"), Help: "--precision: stop after this many arrivals"},
	{Name: "max-sim-time", Key: "run.max_sim_time", Type: "string", Default: keyDefault("run.max_sim_time"), Help: "--precision: stop after this much simulated time (a `DURATION`: 30m, 24h)"},
	{Name: "per-request", Key: "run.per_request", Type: "bool", Default: keyDefault("run.per_request"), Help: "include one record per finished request in the JSON"},
	{Name: "otlp-trace", Key: "run.outputs.otlp_trace", Type: "string", Help: "write the run as vLLM OTLP JSON lines to FILE"},
	{Name: "kv-events", Key: "run.outputs.kv_events", Type: "string", Help: "write KV offload events as the subscriber's JSON lines to FILE (needs --kv-blocks-cpu)"},
	{Name: "trace-journey-sample-rate", Key: "run.otlp.journey_sample_rate", Type: "float", Default: keyDefault("run.otlp.journey_sample_rate"), Help: "vLLM --journey-tracing-sample-rate: share of requests traced, in [0, 1]"},
	{Name: "trace-step-sample-rate", Key: "run.otlp.step_sample_rate", Type: "float", Default: keyDefault("run.otlp.step_sample_rate"), Help: "vLLM --step-tracing-sample-rate: share of steps traced, in [0, 1]"},
	{Name: "trace-rich-subsample-rate", Key: "run.otlp.rich_subsample_rate", Type: "float", Default: keyDefault("run.otlp.rich_subsample_rate"), Help: "vLLM --step-tracing-rich-subsample-rate: share of traced steps with per-request detail, in [0, 1]"},
	{Name: "trace-closure-interval", Key: "run.otlp.closure_interval", Type: "int", Default: keyDefault("run.otlp.closure_interval"), Help: "vLLM --step-tracing-closure-interval: steps between closures of the step span, in [10, 10000]"},
	{Name: "trace-max-events-per-span", Key: "run.otlp.max_events_per_span", Type: "int", Default: keyDefault("run.otlp.max_events_per_span"), Help: "the OpenTelemetry SDK's OTEL_SPAN_EVENT_COUNT_LIMIT: a span keeps its last this many events"},
	{Name: "trace-route", Key: "run.otlp.route", Type: "string", Default: keyDefault("run.otlp.route"), Help: "HTTP route the trace shows: /v1/completions or /v1/chat/completions"},

	// The cluster.
	{Name: "num-instances", Type: "int", Default: "1", Cluster: true, Help: "cluster: identical instances behind the router (deployment.pools[0].replicas)"},
	{Name: "admission-policy", Key: "policies.admission.type", Type: "string", Default: templateDefault(policy.Admission), Cluster: true, Help: "cluster: admission policy: " + templateList(policy.Admission) + " (policies.admission; docs/policies.md)"},
	{Name: "token-bucket-capacity", Key: "policies.admission.params.capacity", Type: "float", Default: paramDefault(policy.Admission, admit.TokenBucketName, "capacity"), Cluster: true, Help: "cluster: token bucket size, input tokens (each request costs its prompt tokens; starts full)"},
	{Name: "token-bucket-refill-rate", Key: "policies.admission.params.refill_rate", Type: "float", Default: paramDefault(policy.Admission, admit.TokenBucketName, "refill_rate"), Cluster: true, Help: "cluster: token bucket refill, input tokens per second"},
	{Name: "admission-latency", Key: "deployment.router.admission_latency_us", Type: "int", Default: keyDefault("deployment.router.admission_latency_us"), Cluster: true, Help: "cluster: µs from admission to the routing decision"},
	{Name: "routing-policy", Key: "policies.routing.type", Type: "string", Default: templateDefault(policy.Routing), Cluster: true, Help: "cluster: routing policy: " + templateList(policy.Routing) + " (policies.routing; docs/policies.md)"},
	{Name: "routing-scorers", Key: "policies.routing.params.scorers", Type: "string", Default: route.DefaultScorers, Cluster: true, Help: "cluster: weighted policy's scorers and weights (" + strings.Join(route.ScorerNames, ", ") + "); weights are normalized"},
	{Name: "routing-latency", Key: "deployment.router.routing_latency_us", Type: "int", Default: keyDefault("deployment.router.routing_latency_us"), Cluster: true, Help: "cluster: µs from the routing decision to the request's arrival at the instance"},
	{Name: "prefix-index-capacity", Key: "policies.routing.params.prefix_index_capacity", Type: "int", Default: paramDefault(policy.Routing, route.WeightedName, "prefix_index_capacity"), Cluster: true, Help: "cluster: router-side prefix index size per instance, KV blocks, 0: each instance's KV capacity (weighted, prefix-affinity)"},
	{Name: "autoscale", Key: "policies.autoscale.type", Type: "string", Default: templateDefault(policy.Autoscale), Cluster: true, Help: "cluster: autoscaler of every pool: " + templateList(policy.Autoscale) + " (policies.autoscale; docs/autoscaling.md); needs --max-replicas"},
	{Name: "disaggregation", Key: "policies.disaggregation.type", Type: "string", Default: templateDefault(policy.Disaggregation), Cluster: true, Help: "cluster: prefill/decode disaggregation decider: " + templateList(policy.Disaggregation) + " (policies.disaggregation; pools' roles and the network in the experiment file; docs/disaggregation.md)"},
	{Name: "autoscale-metric", Key: "policies.autoscale.params.metric", Type: "string", Default: paramDefault(policy.Autoscale, "hpa", "metric"), Cluster: true, Help: "cluster: hpa and target-utilization: " + paramEnum(policy.Autoscale, "hpa", "metric")},
	{Name: "autoscale-target", Key: "policies.autoscale.params.target", Type: "string", Cluster: true, Help: "cluster: hpa's target per replica in the metric's unit, kpa's concurrency per replica (default: the metric's, docs/policies.md)"},
	{Name: "autoscale-interval", Key: "policies.autoscale.params.interval_s", Type: "string", Cluster: true, Help: "cluster: seconds between the autoscaler's evaluations (default: the template's: " + intervals() + ")"},
	{Name: "min-replicas", Key: pool("min_replicas"), Type: "int", Default: keyDefault(pool("min_replicas")), Cluster: true, Help: "cluster: the autoscaler's lower bound per pool (0: scale to zero; requests wait at the router)"},
	{Name: "max-replicas", Key: pool("max_replicas"), Type: "string", Cluster: true, Help: "cluster: the autoscaler's upper bound per pool (required with --autoscale)"},
	{Name: "drain-policy", Key: pool("drain.policy"), Type: "string", Default: keyDefault(pool("drain.policy")), Cluster: true, Help: "cluster: a scaled-down instance's requests: wait (finish, up to the drain timeout), immediate (killed), redirect (waiting ones routed elsewhere)"},
	{Name: "price-per-gpu-hour", Key: pool("nodes.price_per_gpu_hour"), Type: "string", Cluster: true, Help: "cluster: cost of a GPU-hour (default: the hardware's on-demand price, docs/autoscaling.md)"},
	{Name: "snapshot-refresh-interval", Type: "int", Default: "0", Cluster: true, Help: "cluster: µs between scrapes of the instance-reported signals (queue depth, batch size, KV utilization, free KV blocks, cache hit rate); 0 reads them at every decision"},
	{Name: "trace-level", Key: "run.trace_level", Type: "string", Default: keyDefault("run.trace_level"), Cluster: true, Help: "cluster: none; decisions to write every admission, routing and scale decision to --decision-trace; detailed to add each instance's batch formations, preemptions and KV offload/reload records (docs/anomalies.md)"},
	{Name: "decision-trace", Key: "run.outputs.decision_trace", Type: "string", Cluster: true, Help: "cluster: JSON lines file for --trace-level decisions or detailed"},
	{Name: "counterfactual-k", Key: "run.counterfactual_k", Type: "int", Default: keyDefault("run.counterfactual_k"), Cluster: true, Help: "cluster: candidates (with scores, signals and regret) recorded per routing decision; with --counterfactual-sample, the alternatives simulated per sampled decision"},
	{Name: "counterfactual-sample", Key: "run.counterfactual_sample", Type: "string", Default: keyDefault("run.counterfactual_sample"), Cluster: true, Help: "cluster: routing decisions whose TTFT regret is found by counterfactual simulation (the request run on clones of the chosen instance and the top --counterfactual-k others up to its first token): a rate in (0, 1], or every:N for every N-th decision; 0 for none (docs/anomalies.md)"},
	{Name: "summarize-trace", Key: "run.outputs.summary", Type: "string", Cluster: true, Help: "cluster: write a Markdown summary of the run to `FILE` (outcome, anomalies with examples, worst decisions by TTFT regret, counterfactual findings, suggested focus), for a person or an LLM-driven policy search"},
	{Name: "summary-max-tokens", Key: "run.summary_max_tokens", Type: "int", Default: keyDefault("run.summary_max_tokens"), Cluster: true, Help: "cluster: the --summarize-trace budget, tokens counted by the rule of docs/anomalies.md (letters per 4, digits per 3, other marks 1 each)"},
	{Name: "fitness-weights", Key: "run.fitness_weights", Type: "string", Cluster: true, Help: "cluster: print a fitness score, a weighted sum of normalized metrics: key:weight,... with keys throughput, tokens_per_sec, STAT_METRIC (STAT mean|p50|p90|p95|p99|max, METRIC ttft|itl|e2e|scheduling_delay)"},
	{Name: "workers", Key: "run.workers", Type: "int", Default: keyDefault("run.workers"), Help: "cluster: goroutines advancing instances between cluster events (0: one per CPU); the output is the same for any value"},
	{Name: "window", Key: "run.window", Type: "string", Cluster: true, Help: "cluster: cut the run into time windows [k·`D`, (k+1)·D) of simulated time, D a duration with a unit (10s, 500ms, 1m; whole µs), for --window-out and --window-plot (default: none; a single-instance run given a window flag runs as a 1-instance cluster)"},
	{Name: "window-out", Key: "run.outputs.window_out", Type: "string", Cluster: true, Help: "cluster: write one row per --window to `FILE`: .csv (with a header) or .jsonl (one JSON object a line); counts, rates per second, TTFT p50/p99 ms of the requests completed in the window, and queue depth, running batch, KV utilization and router in-flight at the window's end (docs/cluster.md)"},
	{Name: "window-plot", Key: "run.outputs.window_plot", Type: "string", Cluster: true, Help: "cluster: draw the --window rows to `FILE`, .png, .svg or .pdf: panels of request rates, TTFT p50/p99, queue depth and running batch, and KV utilization over time"},
	{Name: "debug-invariants", Key: "run.debug_invariants", Type: "bool", Default: keyDefault("run.debug_invariants"), Help: "check every invariant in full after every step (slow)"},
}

// FlagGroup is a section of blis run --help: the flags from First (in
// Flags order) to the next group's First, less those outputFlags moves to
// the outputs group.
type FlagGroup struct {
	Title, First string
}

// FlagGroups are blis run --help's sections, in order. A flag added to
// Flags falls in the section it is listed in.
var FlagGroups = []FlagGroup{
	{"Engine (every instance: model, GPU, vLLM settings, scheduling)", "model"},
	{"Latency model", "latency"},
	{"Workload", "requests"},
	{"Run and outputs", "seed"},
	{"Cluster (any of these makes the run a cluster run)", "num-instances"},
}

// outputFlags are listed among the cluster's flags but are outputs.
var outputFlags = map[string]bool{"trace-level": true, "decision-trace": true, "counterfactual-k": true, "counterfactual-sample": true,
	"summarize-trace": true, "summary-max-tokens": true, "fitness-weights": true, "window": true, "window-out": true, "window-plot": true}

// GroupOf is the title of the --help section of flag name ("" for a flag
// not in Flags).
func GroupOf(name string) string {
	if outputFlags[name] {
		return "Run and outputs"
	}
	g := ""
	for _, f := range Flags {
		for _, fg := range FlagGroups {
			if fg.First == f.Name {
				g = fg.Title
			}
		}
		if f.Name == name {
			return g
		}
	}
	return ""
}

// The synthetic workload's default length distributions.
const (
	defaultPrompt = "lognormal:mean=1024,cv=0.6,max=16384"
	defaultOutput = "lognormal:mean=256,cv=0.8,max=4096"
)

func pool(key string) string { return "deployment.pools[*]." + key }

// LookupFlag is the flag called name.
func LookupFlag(name string) (*Flag, bool) {
	for i := range Flags {
		if Flags[i].Name == name {
			return &Flags[i], true
		}
	}
	return nil, false
}

// flagOf is the flag that sets key (pools' keys at any index), or "".
func flagOf(key string) string {
	k := key
	if rest, ok := strings.CutPrefix(key, "deployment.pools["); ok {
		if _, after, ok := strings.Cut(rest, "]."); ok {
			k = pool(after)
		}
	}
	for _, f := range Flags {
		if f.Key == k {
			return "--" + f.Name
		}
	}
	switch {
	case k == "deployment.pools[*].replicas" || k == "deployment.pools[0].replicas" || strings.HasPrefix(key, "deployment.pools[0].replicas"):
		return "--num-instances"
	case strings.HasPrefix(k, "deployment.router.snapshot_refresh_us"):
		return "--snapshot-refresh-interval"
	case strings.HasPrefix(k, "deployment.pools[*].latency.roofline"):
		return "--roofline-compute-eff, --roofline-bandwidth-eff, --roofline-step-overhead-us"
	case strings.HasPrefix(k, "deployment.pools[*].latency.blackbox"):
		return "--alpha-coeffs, --beta-coeffs"
	case strings.HasPrefix(k, "deployment.pools[*].data_parallel_size"):
		return "--data-parallel-size"
	case strings.HasPrefix(k, "policies.routing.params.scorers"):
		return "--routing-scorers"
	case strings.HasPrefix(k, "run.fitness_weights"):
		return "--fitness-weights"
	}
	return ""
}

// PoolFlag is blis run's flag for an instance key ("vllm.max_num_seqs"),
// or "" when there is none: the vocabulary other commands share.
func PoolFlag(key string) string { return flagOf(pool(key)) }

// SetFlag applies flag name (without dashes), given on the command line
// with the value text, to the draft: it sets the flag's key, or for a
// macro the keys it stands for. Errors name the flag.
func (d *Draft) SetFlag(name, text string) error { return d.SetFlagAs(name, text, "--"+name) }

// SetFlagAs is SetFlag for a value that came from elsewhere with the
// flag's meaning (a run's meta.json, say): origin names it in errors.
func (d *Draft) SetFlagAs(name, text, origin string) error {
	f, ok := LookupFlag(name)
	if !ok {
		return fmt.Errorf("--%s is not a flag of an experiment", name)
	}
	flag := origin
	switch name {
	case "num-instances":
		if d.legacy != "" {
			return fmt.Errorf("--num-instances cannot be combined with --deployment: set each pool's replicas in the file")
		}
		if dp := d.f.Deployment; dp != nil && len(dp.Pools) > 1 {
			return fmt.Errorf("--num-instances cannot be combined with a deployment of %d pools (%s): set each pool's replicas", len(dp.Pools), d.config)
		}
		for k, f := range d.flags {
			if strings.HasSuffix(k, ".data_parallel_size") && f == "--data-parallel-size" {
				return fmt.Errorf("--data-parallel-size cannot be combined with --num-instances: a data-parallel server is --data-parallel-size instances behind vLLM's own load balancer")
			}
		}
		return d.setFlag(flag, "deployment.pools[*].replicas", text)
	case "data-parallel-size":
		return d.setDataParallel(flag, text)
	case "snapshot-refresh-interval":
		for s := cluster.Signal(0); s < cluster.NumSignals; s++ {
			if err := d.setFlag(flag, "deployment.router.snapshot_refresh_us."+s.String(), text); err != nil {
				return err
			}
		}
		return nil
	case "alpha-coeffs", "beta-coeffs":
		v, err := parseTriple(text, flag)
		if err != nil {
			return err
		}
		return d.setFlag(flag, f.Key, v)
	case "routing-scorers", "fitness-weights":
		// Only the form is read here: the names and weights are checked
		// by the key's declaration, as a file's are.
		m, err := weightMap(text)
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		return d.setFlag(flag, f.Key, m)
	case "latency":
		if text == "" {
			text = "auto"
		}
		d.replaceLatency(text)
	}
	if kind, ok := strings.CutPrefix(f.Key, "policies."); ok && strings.HasSuffix(kind, ".type") {
		d.replaceSection(strings.TrimSuffix(kind, ".type"), text)
	}
	return d.setFlag(flag, f.Key, text)
}

// replaceSection drops the parameters a file gave a policy section when a
// flag (or --set) names another template: they were the old template's,
// and a flag replaces the section as a policy file does. Parameters a
// flag gave stay, for the new template to take or refuse.
func (d *Draft) replaceSection(kind, typ string) {
	p := d.f.Policies
	if p == nil || !slices.Contains(policy.Kinds, policy.Kind(kind)) {
		return
	}
	r := *p.Ptr(policy.Kind(kind))
	if r == nil || r.Type == typ || r.Params.Kind != yaml.MappingNode {
		return
	}
	var keep []*yaml.Node
	for i := 0; i+1 < len(r.Params.Content); i += 2 {
		key := "policies." + kind + ".params." + r.Params.Content[i].Value
		if _, ok := d.flags[key]; ok {
			keep = append(keep, r.Params.Content[i], r.Params.Content[i+1])
		} else if _, ok := d.sets[key]; ok {
			keep = append(keep, r.Params.Content[i], r.Params.Content[i+1])
		}
	}
	r.Params.Content = keep
}

// replaceLatency drops the parameters a file gave another latency model
// when --latency names a model: the same rule as replaceSection.
func (d *Draft) replaceLatency(model string) {
	dp := d.f.Deployment
	if dp == nil {
		return
	}
	for i := range dp.Pools {
		l := dp.Pools[i].Latency
		if l == nil {
			continue
		}
		at := fmt.Sprintf("deployment.pools[%d].latency.", i)
		if model != "roofline" && l.Roofline != nil && !d.givenByFlag(at+"roofline") {
			l.Roofline = nil
		}
		if model != "blackbox" && l.Blackbox != nil && !d.givenByFlag(at+"blackbox") {
			l.Blackbox = nil
		}
	}
}

// givenByFlag reports whether a flag or --set gave key or a key under it.
func (d *Draft) givenByFlag(key string) bool {
	for _, m := range []map[string]string{d.flags, d.sets} {
		for k := range m {
			if k == key || strings.HasPrefix(k, key+".") {
				return true
			}
		}
	}
	return false
}

// setDataParallel spells out --data-parallel-size N: one vLLM server of N
// engines behind vLLM's own balancer (N replicas routed by vllm-dp, its
// counts published every 100 ms), the engines' expert-parallel group N.
func (d *Draft) setDataParallel(flag, text string) error {
	// The pool key's declaration reads the number and holds its range.
	const key = "deployment.pools[*].data_parallel_size"
	v, err := declOf(key).Parse(text, "")
	if err != nil {
		var ke *schema.Error
		if errors.As(err, &ke) {
			err = ke.Cause()
		}
		return fmt.Errorf("%s: %w", flag, err)
	}
	if dp := d.f.Deployment; dp != nil && len(dp.Pools) > 1 {
		return fmt.Errorf("%s cannot be combined with a deployment of %d pools: a data-parallel server is one pool", flag, len(dp.Pools))
	}
	n := strconv.FormatInt(v.I, 10)
	if v.I == 1 {
		return d.setFlag(flag, key, n)
	}
	for _, kv := range [][2]string{
		{"deployment.pools[*].replicas", n},
		{key, n},
		{"policies.routing.type", route.VLLMDPName},
	} {
		if err := d.setFlag(flag, kv[0], kv[1]); err != nil {
			return err
		}
	}
	for s := cluster.Signal(0); s < cluster.NumSignals; s++ {
		if err := d.setFlag(flag, "deployment.router.snapshot_refresh_us."+s.String(), strconv.Itoa(deploy.VLLMDPPublishUs)); err != nil {
			return err
		}
	}
	return nil
}

// parseTriple reads "a,b,c" (finite numbers >= 0) as a YAML list.
func parseTriple(s, flag string) (string, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return "", fmt.Errorf("%s wants three comma-separated numbers, got %q", flag, clip.String(s))
	}
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || x != x || x < 0 || x > 1e308 {
			return "", fmt.Errorf("%s: %q is not a finite number >= 0", flag, clip.String(p))
		}
		parts[i] = fmtFloat(x)
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

// weightMap is "key:weight,..." as a YAML flow mapping, in order. Only
// the form is read here (a name, a number); the key's declaration checks
// the names and the weights. A weight must be a number as Go reads one,
// so that no YAML in it ("1}", "*a", "[1") becomes part of the mapping.
func weightMap(s string) (string, error) {
	var parts []string
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return "", fmt.Errorf("%q: want name:weight", clip.String(p))
		}
		if _, err := strconv.ParseFloat(v, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("%s: want a number, got %q", clip.String(k), clip.String(v))
		}
		parts = append(parts, strconv.Quote(k)+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}", nil
}

// setParam sets a parameter in a params mapping (creating it), from text
// read as YAML.
func setParam(n *yaml.Node, name, text string) {
	_ = setNode(n, []seg{{name: name, index: noIndex}}, text, "params", func(string) {})
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// templateDefault is kind's default template.
func templateDefault(kind policy.Kind) string { return policy.Names(kind)[0] }

// templateList lists kind's templates, as help enumerates them.
func templateList(kind policy.Kind) string { return strings.Join(policy.Names(kind), ", ") }

// paramKey is template name's parameter param of kind.
func paramKey(kind policy.Kind, name, param string) *policy.Param {
	t, err := policy.Lookup(kind, name)
	if err != nil {
		panic(err)
	}
	for i := range t.Params {
		if t.Params[i].Name == param {
			return &t.Params[i]
		}
	}
	panic("experiment: " + name + " has no parameter " + param)
}

// paramDefault is a policy parameter's default, as its flag shows it.
func paramDefault(kind policy.Kind, name, param string) string {
	return paramKey(kind, name, param).DefaultString()
}

// paramEnum lists a string parameter's values.
func paramEnum(kind policy.Kind, name, param string) string {
	return strings.Join(paramKey(kind, name, param).Enum, ", ")
}

// intervals lists the autoscale templates' default evaluation intervals.
func intervals() string {
	var parts []string
	for _, t := range policy.Templates(policy.Autoscale) {
		for _, p := range t.Params {
			if p.Name == "interval_s" {
				parts = append(parts, t.Name+" "+p.DefaultString())
			}
		}
	}
	return strings.Join(parts, ", ")
}

// triple is three numbers as --alpha-coeffs takes them.
func triple(v [3]float64) string { return fmtFloat(v[0]) + "," + fmtFloat(v[1]) + "," + fmtFloat(v[2]) }
