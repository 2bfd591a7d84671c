package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
)

// runOpts are the flags of blis run.
type runOpts struct {
	model, hardware string
	tp              int
	knobs           physics.VLLMKnobs
	longPrefill     int64
	maxModelLen     int64
	asyncSched      bool
	reserveFullISL  bool
	dataParallel    int
	expertParallel  bool
	outputDelayUs   int64
	kvBlocksGPU     string
	offloadThresh   float64

	scheduler, priority string
	prioBase, prioAge   float64

	latency      string
	coeffs       string
	alphaBB      string
	betaBB       string
	computeEff   float64
	bandwidthEff float64
	stepOverhead float64
	noise        float64
	workload     workload.Spec
	promptDist   string
	outputDist   string
	replay       string
	specFile     string
	scenario     string
	printSpec    bool
	replayOpt    workload.ReplayOptions
	seed         int64
	horizonS     float64
	perRequest   bool
	debugInv     bool
	quiet        bool
	traceFile    string
	kvEventsFile string
	traceOpt     simtrace.Options

	cl clusterOpts
}

func newRunCmd() *cobra.Command {
	o := runOpts{knobs: physics.DefaultVLLMKnobs()}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Simulate vLLM instances serving a workload, alone or as a cluster",
		Long: `run simulates one vLLM instance (model, GPU, TP degree and vLLM settings)
serving a synthetic workload or a replayed trace, and prints latency and
throughput metrics as JSON on stdout.

With --num-instances N, --deployment FILE or any cluster flag (admission,
routing, snapshot freshness, decision trace, fitness, time windows) it
simulates a cluster (of one instance, if no other number is given):
the instances behind an admission policy and a router on one clock, and
prints the aggregated metrics with each instance's own. The workload
(--rate, --requests, --replay) is what arrives at the cluster's front; the
instance flags apply to every instance (and override a deployment file's
pools). See docs/cluster.md.

--workload-spec FILE or --scenario NAME replaces the synthetic workload
flags with a mix of tenants (SLO classes, arrival processes and load
profiles, multi-turn sessions, agents, closed-loop clients, timeouts), sent
while the run goes on: a session's next turn leaves a think time after the
previous one completes. Such runs go through the cluster path (one instance
unless told otherwise) and report SLO attainment and goodput per class and
per tenant. See docs/workloads.md.

Latency models (--latency):
  physics   step time from the 16 physics features and fitted coefficients
            (--coefficients FILE, written by calibrate fit); the file must be
            for the same model, hardware and TP
  roofline  analytical: compute or bandwidth bound forward pass, TP
            all-reduce, per-step overheads (no coefficients needed)
  blackbox  beta0 + beta1*prefill tokens + beta2*decode tokens (µs), with
            --alpha-coeffs / --beta-coeffs
The default is physics when --coefficients is given or a shipped coefficient
file applies (Llama-3.1-8B on one H100 with vLLM's default settings; see
coefficients/shipped/), else roofline.
--latency-noise adds mean-one log-normal noise to every step: a ground truth
no linear model fits exactly, for testing calibration.

--replay FILE replays a trace instead: calibrate ingest's requests table, a
CSV, or a trace users already have (--replay-format azure, mooncake,
vllm-bench, inference-perf, vllm-runs; detected by default); see
docs/simulator.md. A CSV has a header row naming its columns:
  arrival_us      arrival time, µs (used as is)             required
  prompt_tokens   prompt length, tokens (a prefix included)  required
  output_tokens   output length, tokens                      required
  prefix_group    shared-prefix group id (0: none)           optional
  prefix_tokens   tokens of the group's shared prefix        optional
  priority        integer priority                           optional
  tenant_id, slo_class (realtime|interactive|batch), session_id: names, optional
Empty optional cells are 0 or none; lines starting with # are comments.
` + "\n" + shippedNames() + `

--otlp-trace writes the run as vLLM's journey and step tracing would, in
OTLP JSON lines (read it back with calibrate ingest); --kv-events writes the
KV events subscriber's JSON lines when --kv-blocks-cpu is set.`,
		Example: `  blis run
  blis run --scenario multi-turn-chat
  blis run --scenario agentic --print-spec > my-agents.yaml
  blis run --workload-spec my-agents.yaml --num-instances 2 --routing-policy weighted
  blis run --num-instances 4 --routing-policy weighted --rate 30 --requests 5000
  blis run --deployment deploy.yaml --trace-level decisions --decision-trace decisions.jsonl
  blis run --num-instances 4 --rate 40 --requests 5000 --window 5s --window-out windows.csv --window-plot windows.png
  blis run --rate 30 --requests 5000 --prompt-tokens lognormal:mean=2000,cv=0.8
  blis run --coefficients coeffs.yaml --replay tables/requests.parquet
  blis run --latency-noise 0.05 --otlp-trace run.jsonl --trace-step-sample-rate 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	addInstanceFlags(f, &o)

	f.IntVar(&o.workload.Requests, "requests", 1000, "number of requests")
	f.Float64Var(&o.workload.Rate, "rate", 8, "mean arrival rate, requests per second")
	f.StringVar(&o.workload.Arrival, "arrival", "poisson", "arrival process: poisson or gamma")
	f.Float64Var(&o.workload.GammaCV, "gamma-cv", 2, "gamma arrivals: coefficient of variation of the gaps (1 = Poisson)")
	f.StringVar(&o.promptDist, "prompt-tokens", "lognormal:mean=1024,cv=0.6,max=16384", "prompt length distribution, a group's shared prefix included (const:N, uniform:A,B, normal:/lognormal:mean=M,cv=C[,min=,max=], exponential:mean=M); with --prefix-groups, a grouped sample no longer than --prefix-tokens is raised to it + 1, and a distribution that cannot exceed it is refused")
	f.StringVar(&o.outputDist, "output-tokens", "lognormal:mean=256,cv=0.8,max=4096", "output length distribution, same forms")
	f.IntVar(&o.workload.PrefixGroups, "prefix-groups", 8, "shared-prefix groups (system prompts); 0 for none")
	f.Int64Var(&o.workload.PrefixTokens, "prefix-tokens", 512, "tokens of each group's shared prefix")
	f.Float64Var(&o.workload.PrefixFraction, "prefix-fraction", 0.5, "share of requests that start with a group prefix, in [0, 1]")
	f.StringVar(&o.replay, "replay", "", "replay arrivals and lengths from a trace: calibrate ingest's requests.parquet (or its directory), a CSV, or an imported trace (see --replay-format); overrides the synthetic workload")
	f.StringVar(&o.replayOpt.Format, "replay-format", workload.FormatAuto, "format of the --replay file: "+strings.Join(workload.ReplayFormats(), ", ")+" (auto: Parquet by magic or extension, an imported trace by content, else CSV)")
	f.BoolVar(&o.replayOpt.Strict, "strict", false, "--replay: fail on the first unreadable row instead of skipping it (skips are counted in the output's replay report)")
	f.StringVar(&o.specFile, "workload-spec", "", "workload spec YAML: tenants, SLO classes, arrival processes, load profile, sessions, closed loop (docs/workloads.md); runs as a cluster (1 instance by default) and reports SLO attainment per class and tenant")
	f.StringVar(&o.scenario, "scenario", "", "built-in workload spec: "+strings.Join(workload.Scenarios(), ", ")+" (docs/workloads.md)")
	f.BoolVar(&o.printSpec, "print-spec", false, "print the --scenario (or --workload-spec) file and exit, to start a spec of your own from it")
	f.Int64Var(&o.seed, "seed", 42, "random seed: the same seed and inputs give byte-identical output")
	f.Float64Var(&o.horizonS, "horizon", 0, "stop after this many simulated seconds (0: serve every request)")
	f.BoolVar(&o.perRequest, "per-request", false, "include one record per finished request in the JSON")

	f.StringVar(&o.traceFile, "otlp-trace", "", "write the run as vLLM OTLP JSON lines to FILE")
	f.StringVar(&o.kvEventsFile, "kv-events", "", "write KV offload events as the subscriber's JSON lines to FILE (needs --kv-blocks-cpu)")
	f.Float64Var(&o.traceOpt.JourneySampleRate, "trace-journey-sample-rate", 1.0, "vLLM --journey-tracing-sample-rate: share of requests traced, in [0, 1]")
	f.Float64Var(&o.traceOpt.StepSampleRate, "trace-step-sample-rate", 0.01, "vLLM --step-tracing-sample-rate: share of steps traced, in [0, 1]")
	f.Float64Var(&o.traceOpt.RichSubsampleRate, "trace-rich-subsample-rate", 0.001, "vLLM --step-tracing-rich-subsample-rate: share of traced steps with per-request detail, in [0, 1]")
	f.Int64Var(&o.traceOpt.ClosureInterval, "trace-closure-interval", 100, "vLLM --step-tracing-closure-interval: steps between closures of the step span, in [10, 10000]")
	f.IntVar(&o.traceOpt.MaxEventsPerSpan, "trace-max-events-per-span", 128, "the OpenTelemetry SDK's OTEL_SPAN_EVENT_COUNT_LIMIT: a span keeps its last this many events")
	f.StringVar(&o.traceOpt.Route, "trace-route", "/v1/completions", "HTTP route the trace shows: /v1/completions or /v1/chat/completions")

	addClusterFlags(f, &o.cl)

	f.BoolVar(&o.debugInv, "debug-invariants", false, "check every invariant in full after every step (slow)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr but warnings")
	return cmd
}

// printWarnings writes warnings about the instance (a coefficient file used
// outside the configurations it was fitted on) to stderr, one a line,
// prefixed "warning: " and prefix. --quiet does not silence them.
func printWarnings(stderr io.Writer, prefix string, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s%s\n", prefix, w)
	}
}

// clampWarnings describes the step times the engine clamped (prefix names
// the instance in a cluster).
func clampWarnings(prefix string, c *sim.Clamped) []string {
	var out []string
	if c == nil {
		return nil
	}
	if c.ToOneUs > 0 {
		out = append(out, fmt.Sprintf("%s%d steps had a latency-model time below 1 µs and were clamped to 1 µs (step_times_clamped): the model extrapolates below zero on small steps", prefix, c.ToOneUs))
	}
	if c.ToMaxDuration > 0 {
		out = append(out, fmt.Sprintf("%s%d steps had a latency-model time above %d µs (2^40) and were clamped to it (step_times_clamped)", prefix, c.ToMaxDuration, sim.MaxDurationUs))
	}
	return out
}

// printTooLong reports the requests refused as longer than the model's
// context, naming the first by its file and line when a replayed file
// holds it. It is a warning (--quiet does not silence it): the workload
// asked for what the deployment cannot serve.
func printTooLong(stderr io.Writer, n int64, first *sim.TooLongRequest, rep *workload.ReplayReport) {
	if n == 0 || first == nil {
		return
	}
	what := fmt.Sprintf("the first, request %d, has %d + %d > %d tokens", first.ID, first.PromptTokens, first.OutputTokens, first.MaxModelLen)
	if rep != nil && rep.TooLong > 0 {
		what = "the first in the --replay file: " + rep.TooLongAt
	}
	fmt.Fprintf(stderr, "warning: %d requests rejected as vLLM rejects them (HTTP 400): prompt + output tokens exceed the model's context, max_model_len; "+
		"%s (counted in requests.rejected_too_long; see --max-model-len)\n", n, what)
}

// printSkipped warns about the --replay rows skipped as unreadable, by
// reason with the first line or row (they are also in the output's replay
// report): the simulated workload is not the whole file (--quiet does not
// silence it; --strict fails instead).
func printSkipped(stderr io.Writer, rep *workload.ReplayReport) {
	if rep == nil || len(rep.Skipped) == 0 {
		return
	}
	fmt.Fprintf(stderr, "warning: --replay %s (replay.skipped in the output; --strict fails on the first)\n", rep)
}

// printDropped warns about requests dropped as unservable, naming the
// first and why: a cache too small for a request is a configuration
// error the summary line's count alone hides (--quiet does not silence
// it). prefix names the instance in a cluster.
func printDropped(stderr io.Writer, prefix string, dropped, offered int64, first *sim.DroppedRequest) {
	if dropped == 0 || first == nil {
		return
	}
	hint := "give the instance more KV blocks (--kv-blocks-gpu, --gpu-memory-utilization) or send shorter requests"
	if !first.NoKV {
		hint = "raise --max-num-batched-tokens or turn chunked prefill on (--enable-chunked-prefill)"
	}
	fmt.Fprintf(stderr, "warning: %s%d of %d requests dropped as unservable (requests.dropped_unservable): the first, request %d, %s; %s\n",
		prefix, dropped, offered, first.ID, first.Reason, hint)
}

// printRaised says how many prompts of a prefix group were raised above
// the prefix (docs/workloads.md: the prompt length includes the prefix,
// and a sample no longer than it is raised to prefix + 1), so that a run
// whose echoed distribution they do not follow says so.
func printRaised(stderr io.Writer, gen *workload.Stream, prefix int64) {
	if gen == nil {
		return
	}
	if raised, grouped := gen.Raised(); raised > 0 {
		fmt.Fprintf(stderr, "blis: %d of the %d prompts of a prefix group were sampled at most --prefix-tokens %d long and raised to %d tokens (the prompt length includes the prefix; docs/workloads.md)\n",
			raised, grouped, prefix, prefix+1)
	}
}

// resolved is everything a run needs, built and checked before it starts.
type resolved struct {
	spec   deploy.InstanceSpec
	in     *deploy.Instance
	cfg    *physics.PhysicsConfig
	simCfg sim.Config
	// src is the workload: a replayed file's requests, or the synthetic
	// workload's stream (gen), generated as the run goes.
	src     sim.Source
	gen     *workload.Stream
	offered int64
	replay  *workload.ReplayReport
}

func runRun(cmd *cobra.Command, o *runOpts) error {
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	if o.printSpec {
		return printSpec(cmd, o)
	}
	if err := checkOutputs(o); err != nil {
		return err
	}
	if clusterMode(cmd.Flags()) {
		return runCluster(cmd, o, stderr)
	}
	if cmd.Flags().Changed("workers") {
		return errors.New("--workers is for cluster runs (--num-instances, --deployment or a cluster flag); a single instance runs on one goroutine")
	}
	r, err := resolve(cmd.Flags(), o)
	if err != nil {
		return err
	}
	printModelNotes(stderr, r.cfg.Model)
	printWarnings(cmd.ErrOrStderr(), "", r.in.Warnings)
	rng := sim.NewRNG(o.seed)

	// Outputs are written to temporary files renamed over their paths only
	// when the run succeeds.
	var outs atomicfile.Group
	defer outs.Abort()
	tw, closers, err := openTrace(o, r, rng, &outs)
	if err != nil {
		return err
	}

	start := time.Now()
	s, err := sim.NewStream(r.simCfg, r.src)
	if err != nil {
		return err
	}
	res, err := s.Run()
	if err != nil {
		return err
	}
	if r.gen != nil && r.gen.Err() != nil {
		return flagError(r.gen.Err())
	}
	wall := time.Since(start)
	for _, c := range closers {
		if err := c(); err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
	}
	if err := outs.Commit(); err != nil {
		return err
	}
	out := report{
		Tool:     "blis run",
		Version:  1,
		Config:   describe(o, r),
		Metrics:  res,
		Workload: r.replay,
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	printRunDiagnostics(stderr, cmd.ErrOrStderr(), o, r, res, tw, wall)
	return nil
}

// openTrace creates --otlp-trace (and --kv-events) in outs and attaches a
// trace writer to the instance; closers flush them, in order, after the
// run. Without --otlp-trace it does nothing.
func openTrace(o *runOpts, r *resolved, rng sim.RNG, outs *atomicfile.Group) (*simtrace.Writer, []func() error, error) {
	if o.traceFile == "" {
		return nil, nil, nil
	}
	var closers []func() error
	tf, err := outs.Create(o.traceFile, "--otlp-trace")
	if err != nil {
		return nil, nil, err
	}
	var kvw io.Writer
	if o.kvEventsFile != "" {
		kf, err := outs.Create(o.kvEventsFile, "--kv-events")
		if err != nil {
			return nil, nil, err
		}
		kvb := bufio.NewWriterSize(kf, 1<<20)
		kvw = kvb
		closers = append(closers, kvb.Flush)
	}
	tb := bufio.NewWriterSize(tf, 1<<20)
	o.traceOpt.Model = r.cfg.Model.Name
	if o.traceOpt.RunID, err = traceRunID(describe(o, r), o); err != nil {
		return nil, nil, err
	}
	tw, err := simtrace.NewWriter(tb, kvw, o.traceOpt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
	if err != nil {
		return nil, nil, err
	}
	r.simCfg.Observer = tw
	return tw, append([]func() error{tw.Close, tb.Flush}, closers...), nil
}

// printRunDiagnostics prints a single-instance run's warnings (to warn,
// even under -q) and summary lines (to stderr).
func printRunDiagnostics(stderr, warn io.Writer, o *runOpts, r *resolved, res *sim.Result, tw *simtrace.Writer, wall time.Duration) {
	printSkipped(warn, r.replay)
	printTooLong(warn, res.Requests.RejectedTooLong, res.FirstTooLong, r.replay)
	printDropped(warn, "", res.Requests.Dropped, r.offered, res.FirstDropped)
	printRaised(stderr, r.gen, o.workload.PrefixTokens)
	fmt.Fprintf(stderr, "blis: %d requests (%d completed, %d dropped), %d steps, %.1f s simulated in %.2f s wall (%.1f µs per request)\n",
		r.offered, res.Requests.Completed, res.Requests.Dropped, res.Steps, res.DurationS, wall.Seconds(),
		float64(wall.Microseconds())/float64(max(1, r.offered)))
	printWarnings(warn, "", clampWarnings("", res.StepTimesClamped))
	if tw != nil {
		st := tw.Stats()
		fmt.Fprintf(stderr, "blis: trace %s: %d spans, %d events (%d dropped by the %d-event limit), %d sampled steps (%d rich)\n",
			o.traceFile, st.Spans, st.Events, st.DroppedEvents, o.traceOpt.MaxEventsPerSpan, st.SampledSteps, st.RichSteps)
	}
}

// traceOptionFlags pairs simtrace.Options fields with the flags that set
// them, so that the library's *simtrace.OptionError names the flag.
var traceOptionFlags = map[string]string{
	"JourneySampleRate": "--trace-journey-sample-rate",
	"StepSampleRate":    "--trace-step-sample-rate",
	"RichSubsampleRate": "--trace-rich-subsample-rate",
	"ClosureInterval":   "--trace-closure-interval",
	"MaxEventsPerSpan":  "--trace-max-events-per-span",
	"Route":             "--trace-route",
}

// checkTraceOptions checks the trace flags when a trace is written, single
// instance or cluster, naming the flag.
func checkTraceOptions(o *runOpts) error {
	if o.traceFile == "" {
		return nil
	}
	// The library reads a zero as "the default"; given on the command
	// line, 0 is outside vLLM's range like any other value.
	if o.traceOpt.ClosureInterval == 0 {
		return errors.New("--trace-closure-interval: must be in [10, 10000] steps, got 0")
	}
	if o.traceOpt.MaxEventsPerSpan == 0 {
		return errors.New("--trace-max-events-per-span: must be > 0, got 0")
	}
	err := o.traceOpt.Validate()
	var oe *simtrace.OptionError
	if errors.As(err, &oe) {
		if f, ok := traceOptionFlags[oe.Field]; ok {
			return fmt.Errorf("%s: %s", f, oe.Msg)
		}
	}
	return err
}

// shippedNames lists the model and hardware names --model and --hardware
// accept besides file paths.
func shippedNames() string {
	return "Shipped models (--model): " + strings.Join(physics.BuiltinModels(), ", ") +
		"\nShipped hardware (--hardware): " + strings.Join(physics.BuiltinHardware(), ", ")
}

// instanceInputs are the files the instance flags read (those that name
// files: --model and --hardware may be shipped names instead).
func instanceInputs(o *runOpts) []atomicfile.Named {
	return []atomicfile.Named{{Label: "--model", Path: o.model}, {Label: "--hardware", Path: o.hardware}, {Label: "--coefficients", Path: o.coeffs}}
}

// checkOutputs refuses, before the run, an output of blis run that is one
// of its inputs or another of its outputs (internal/atomicfile.Check).
func checkOutputs(o *runOpts) error {
	in := append(instanceInputs(o),
		atomicfile.Named{Label: "--workload-spec", Path: o.specFile},
		atomicfile.Named{Label: "--deployment", Path: o.cl.deployment})
	if o.replay != "" {
		in = append(in, atomicfile.Named{Label: "--replay", Path: o.replay})
		if fi, err := os.Stat(o.replay); err == nil && fi.IsDir() {
			in = append(in, atomicfile.DirInputs("--replay", o.replay)...)
		}
	}
	return atomicfile.Check(in, []atomicfile.Named{
		{Label: "--otlp-trace", Path: o.traceFile}, {Label: "--kv-events", Path: o.kvEventsFile},
		{Label: "--decision-trace", Path: o.cl.decisionTrace},
		{Label: "--window-out", Path: o.cl.windowOut}, {Label: "--window-plot", Path: o.cl.windowPlot},
	})
}

// addInstanceFlags defines the flags that describe one instance (model,
// GPU, parallelism, vLLM settings, request pipeline, latency model);
// blis run and blis validate share them.
func addInstanceFlags(f *pflag.FlagSet, o *runOpts) {
	f.StringVar(&o.model, "model", "llama-3.1-8b", "shipped model name (listed at the end of the description) or path to a HuggingFace config.json")
	f.StringVar(&o.hardware, "hardware", "h100-sxm", "shipped hardware name (listed at the end of the description) or path to a hardware spec JSON")
	f.IntVar(&o.tp, "tp", 1, "tensor-parallel degree: GPUs per engine")
	f.Int64Var(&o.knobs.MaxNumSeqs, "max-num-seqs", o.knobs.MaxNumSeqs, "vLLM --max-num-seqs: running requests at most")
	f.Int64Var(&o.knobs.MaxBatchedTokens, "max-num-batched-tokens", o.knobs.MaxBatchedTokens, "vLLM --max-num-batched-tokens: token budget per step")
	f.Int64Var(&o.longPrefill, "long-prefill-token-threshold", 0, "vLLM --long-prefill-token-threshold: prefill tokens per request per step (0: no cap)")
	f.Int64Var(&o.maxModelLen, "max-model-len", 0, "vLLM --max-model-len: the context a request's prompt + output tokens must fit, else it is rejected as vLLM rejects it (HTTP 400) and counted in rejected_too_long (0: the model config's max_position_embeddings or n_positions)")
	f.IntVar(&o.dataParallel, "data-parallel-size", 1, "vLLM --data-parallel-size: the server is this many engines behind vLLM's own load balancer (the vllm-dp routing policy, counts refreshed every 100 ms); runs as a cluster")
	f.BoolVar(&o.expertParallel, "enable-expert-parallel", false, "vLLM --enable-expert-parallel: a mixture-of-experts model's routed experts are sharded over the data-parallel × tensor-parallel ranks, with an all-gather and a reduce-scatter around every MoE layer")
	f.BoolVar(&o.asyncSched, "async-scheduling", true, "vLLM --async-scheduling: the engine core schedules one step ahead, so a request arriving while steps run joins one step later (false: vLLM --no-async-scheduling)")
	f.BoolVar(&o.reserveFullISL, "scheduler-reserve-full-isl", true, "vLLM --scheduler-reserve-full-isl: a waiting or preempted request is admitted only when the free KV blocks hold its whole sequence so far (less prefix-cache hits), not only its first chunk (false: vLLM --no-scheduler-reserve-full-isl)")
	f.Int64Var(&o.outputDelayUs, "output-delay-us", sim.DefaultOutputDelayUs, "µs from the end of the step that produced a token to the client receiving it (output processing, detokenization, streaming); moves TTFT and E2E, not ITL; 0 to measure at the engine core's output")
	f.BoolVar(&o.knobs.ChunkedPrefillEnabled, "enable-chunked-prefill", o.knobs.ChunkedPrefillEnabled, "vLLM --enable-chunked-prefill")
	f.BoolVar(&o.knobs.PrefixCachingEnabled, "enable-prefix-caching", o.knobs.PrefixCachingEnabled, "vLLM --enable-prefix-caching")
	f.Int64Var(&o.knobs.BlockSizeTokens, "block-size", o.knobs.BlockSizeTokens, "vLLM --block-size: tokens per KV block")
	f.StringVar(&o.kvBlocksGPU, "kv-blocks-gpu", "auto", "GPU KV blocks, or auto to derive them from device memory as vLLM does")
	f.Float64Var(&o.knobs.GPUMemoryUtilization, "gpu-memory-utilization", o.knobs.GPUMemoryUtilization, "vLLM --gpu-memory-utilization: share of device memory vLLM may use, in (0, 1] (used when deriving --kv-blocks-gpu)")
	f.Int64Var(&o.knobs.TotalKVBlocksCPU, "kv-blocks-cpu", 0, "CPU KV blocks for offload (0: no CPU tier)")
	f.Float64Var(&o.offloadThresh, "kv-offload-threshold", 0.9, "GPU KV usage, a share in [0, 1], above which evicted blocks are stored to the CPU tier")

	f.StringVar(&o.scheduler, "scheduler", "fcfs", "queue order: fcfs, priority-fcfs, sjf, reverse-priority")
	f.StringVar(&o.priority, "priority", "constant", "priority score: constant, slo-based, inverted-slo")
	f.Float64Var(&o.prioBase, "priority-base", 0, "base priority score, added to every request's (finite; priority-fcfs serves higher scores first)")
	f.Float64Var(&o.prioAge, "priority-age-weight", 1, "score per second of age (slo-based, inverted-slo)")

	f.StringVar(&o.latency, "latency", "", "latency model: physics, roofline, blackbox (default: physics with --coefficients or shipped coefficients fitted on this configuration, else roofline)")
	f.StringVar(&o.coeffs, "coefficients", "", "coefficient YAML written by calibrate fit (physics model); the model, hardware, TP and vLLM settings no flag gives are its applies_to's. Any model, GPU, TP or settings may be given: outside the file's fitted_configs with a warning, another architecture family (dense, MoE) refused")
	f.StringVar(&o.alphaBB, "alpha-coeffs", "1200,0.08,1.5", "blackbox alpha0,alpha1,alpha2: queueing µs + µs per prompt token; µs per output token at departure")
	f.StringVar(&o.betaBB, "beta-coeffs", "6000,0.2,30", "blackbox beta0,beta1,beta2: step µs + µs per prefill token + µs per decode token")
	f.Float64Var(&o.computeEff, "roofline-compute-eff", deploy.DefaultRooflineParams.ComputeEff, "roofline: share of the GPU's sustained GEMM rate reached (the hardware spec's gemm_tflops, else 0.75 of its peak)")
	f.Float64Var(&o.bandwidthEff, "roofline-bandwidth-eff", 0.8, "roofline: share of peak HBM bandwidth reached")
	f.Float64Var(&o.stepOverhead, "roofline-step-overhead-us", 900, "roofline: fixed CPU and launch cost per step, µs")
	f.Float64Var(&o.noise, "latency-noise", 0, "log-normal sigma of multiplicative, mean-one step-time noise (dimensionless: 0.05 is about 5 % per step; 0: none)")
}

// resolve turns flags into a validated configuration; every error names
// the flag or file at fault.
func resolve(flags *pflag.FlagSet, o *runOpts) (*resolved, error) {
	if err := checkReplayFlags(flags, o); err != nil {
		return nil, err
	}
	spec, err := instanceSpec(flags, o)
	if err != nil {
		return nil, err
	}
	if o.kvEventsFile != "" && (spec.VLLM.TotalKVBlocksCPU <= 0 || o.traceFile == "") {
		return nil, errors.New("--kv-events needs --kv-blocks-cpu > 0 and --otlp-trace")
	}
	if err := checkHorizon(o.horizonS); err != nil {
		return nil, err
	}
	if err := checkTraceOptions(o); err != nil {
		return nil, err
	}
	in, err := spec.Build(sim.NewRNG(o.seed), 0)
	if err != nil {
		return nil, deploy.FlagError(err)
	}
	r := &resolved{spec: spec, in: in, cfg: in.Phys, simCfg: in.Config}
	r.simCfg.Options = sim.Options{HorizonUs: int64(math.Round(o.horizonS * 1e6)), Exhaustive: o.debugInv, RecordRequests: o.perRequest}
	if o.replay != "" {
		reqs, rep, err := loadReplay(o, in.Config.Engine.MaxModelLen)
		if err != nil {
			return nil, err
		}
		r.src, r.offered, r.replay = sim.SliceSource(reqs), int64(len(reqs)), rep
		return r, nil
	}
	if err := parseWorkload(o); err != nil {
		return nil, err
	}
	g, err := workload.NewGenerator(o.workload, sim.NewRNG(o.seed).Stream(sim.StreamWorkload))
	if err != nil {
		return nil, flagError(err)
	}
	// Streamed: the requests are generated as the run reaches them.
	r.gen = workload.NewStream(g)
	r.src, r.offered = r.gen, int64(o.workload.Requests)
	return r, nil
}

// checkHorizon refuses a --horizon the clock cannot reach (sim.MaxTimeUs):
// beyond it, seconds × 1e6 overflowed int64 into a negative horizon,
// refused as "field horizon: must be >= 0, got -9223372036854775808 µs"
// (found by FuzzRunCommand).
func checkHorizon(s float64) error {
	const maxS = float64(sim.MaxTimeUs / 1_000_000)
	if !(s >= 0 && s <= maxS) {
		return fmt.Errorf("--horizon must be a number of seconds in [0, %d], got %v", int64(maxS), s)
	}
	return nil
}

// loadReplay reads --replay with --replay-format and --strict, noting the
// rows longer than maxModelLen (0: none); single and cluster runs share it.
func loadReplay(o *runOpts, maxModelLen int64) ([]sim.RequestSpec, *workload.ReplayReport, error) {
	opt := o.replayOpt
	opt.MaxModelLen = maxModelLen
	reqs, rep, err := workload.ReplayWith(o.replay, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("--replay: %w", err)
	}
	if len(reqs) == 0 {
		return nil, nil, fmt.Errorf("--replay %s: no usable requests (%d rows)", o.replay, rep.Rows)
	}
	return reqs, &rep, nil
}

// checkReplayFlags rejects --replay-format and --strict without --replay.
func checkReplayFlags(flags *pflag.FlagSet, o *runOpts) error {
	if o.replay == "" && (flags.Changed("replay-format") || flags.Changed("strict")) {
		return errors.New("--replay-format and --strict apply to --replay FILE")
	}
	return nil
}

// parseWorkload reads the synthetic workload's distribution flags and
// validates the workload.
func parseWorkload(o *runOpts) error {
	var err error
	if o.workload.Prompt, err = workload.ParseDist(o.promptDist); err != nil {
		return fmt.Errorf("--prompt-tokens: %w", err)
	}
	if o.workload.Output, err = workload.ParseDist(o.outputDist); err != nil {
		return fmt.Errorf("--output-tokens: %w", err)
	}
	if err := o.workload.Validate(); err != nil {
		return flagError(err)
	}
	return nil
}

// instanceSpec is the instance the flags describe. Only flags the user set
// override a base (defaults, or a deployment file's pool: see
// applyInstanceFlags).
func instanceSpec(flags *pflag.FlagSet, o *runOpts) (deploy.InstanceSpec, error) {
	spec := deploy.DefaultInstanceSpec()
	if err := applyInstanceFlags(flags, o, &spec, true); err != nil {
		return spec, err
	}
	return spec, coefficientDefaults(flags, &spec)
}

// coefficientDefaults takes what no flag set of the model, hardware, TP and
// vLLM settings from the --coefficients file's applies_to, its default
// configuration, so that a file fitted on another configuration runs on
// that one unless told otherwise. The GPU KV blocks are applies_to's only
// when the model, hardware, TP, block size and memory utilization all are
// (else derived: applies_to's count is another configuration's).
func coefficientDefaults(flags *pflag.FlagSet, spec *deploy.InstanceSpec) error {
	if spec.Latency.Coefficients == "" {
		return nil
	}
	cf, err := coefficients.Load(spec.Latency.Coefficients)
	if err != nil {
		return fmt.Errorf("--coefficients: %w", err)
	}
	a, k := cf.AppliesTo, &spec.VLLM
	given := flags.Changed
	if !given("model") {
		if _, err := physics.LoadModel(a.Model); err != nil {
			return fmt.Errorf("--coefficients %s: its applies_to.model %q is neither a shipped model nor a file; give --model", spec.Latency.Coefficients, a.Model)
		}
		spec.Model = a.Model
	}
	if !given("hardware") {
		if _, err := physics.LoadHardware(a.Hardware); err != nil {
			return fmt.Errorf("--coefficients %s: its applies_to.hardware %q is neither shipped hardware nor a file; give --hardware", spec.Latency.Coefficients, a.Hardware)
		}
		spec.Hardware = a.Hardware
	}
	if !given("tp") {
		spec.TP = a.TP
	}
	for _, d := range []struct {
		flag string
		set  func()
	}{
		{"max-num-seqs", func() { k.MaxNumSeqs = a.VLLM.MaxNumSeqs }},
		{"max-num-batched-tokens", func() { k.MaxBatchedTokens = a.VLLM.MaxBatchedTokens }},
		{"enable-chunked-prefill", func() { k.ChunkedPrefillEnabled = a.VLLM.ChunkedPrefillEnabled }},
		{"enable-prefix-caching", func() { k.PrefixCachingEnabled = a.VLLM.PrefixCachingEnabled }},
		{"block-size", func() { k.BlockSizeTokens = a.VLLM.BlockSizeTokens }},
		{"gpu-memory-utilization", func() { k.GPUMemoryUtilization = a.VLLM.GPUMemoryUtilization }},
		{"kv-blocks-cpu", func() { k.TotalKVBlocksCPU = a.VLLM.TotalKVBlocksCPU }},
	} {
		if !given(d.flag) {
			d.set()
		}
	}
	if !given("kv-blocks-gpu") && !given("model") && !given("hardware") && !given("tp") && !given("block-size") && !given("gpu-memory-utilization") {
		k.TotalKVBlocksGPU = a.VLLM.TotalKVBlocksGPU
	}
	return nil
}

// applyInstanceFlags sets spec's fields from the instance flags: every one
// when all is true, else only those the user set (a flag beats the
// deployment file, which beats the default).
func applyInstanceFlags(flags *pflag.FlagSet, o *runOpts, spec *deploy.InstanceSpec, all bool) error {
	set := func(name string) bool { return all || flags.Changed(name) }
	if set("model") {
		spec.Model = o.model
	}
	if set("hardware") {
		spec.Hardware = o.hardware
	}
	if set("tp") {
		spec.TP = o.tp
	}
	if err := applyVLLMFlags(set, o, spec); err != nil {
		return err
	}
	if set("scheduler") {
		spec.Scheduler = o.scheduler
	}
	if set("priority") {
		spec.Priority = o.priority
	}
	if set("priority-base") {
		spec.PriorityBase = o.prioBase
	}
	if set("priority-age-weight") {
		spec.PriorityAgeWeight = o.prioAge
	}
	return applyLatencyFlags(flags, set, o, &spec.Latency)
}

// applyLatencyFlags is applyInstanceFlags for the latency model's flags.
func applyLatencyFlags(flags *pflag.FlagSet, set func(string) bool, o *runOpts, l *deploy.LatencySpec) error {
	if set("latency") {
		l.Model = o.latency
	}
	if set("coefficients") {
		l.Coefficients = o.coeffs
	}
	if set("latency-noise") {
		l.Noise = o.noise
	}
	// The models' parameters: only when a flag of theirs is given, so that
	// giving one to another model is an error rather than ignored.
	if flags.Changed("roofline-compute-eff") || flags.Changed("roofline-bandwidth-eff") || flags.Changed("roofline-step-overhead-us") {
		p := deploy.DefaultRooflineParams
		if l.Roofline != nil {
			p = *l.Roofline
		}
		if flags.Changed("roofline-compute-eff") {
			p.ComputeEff = o.computeEff
		}
		if flags.Changed("roofline-bandwidth-eff") {
			p.BandwidthEff = o.bandwidthEff
		}
		if flags.Changed("roofline-step-overhead-us") {
			p.StepOverheadUs = o.stepOverhead
		}
		l.Roofline = &p
	}
	bbAlpha, bbBeta := flags.Changed("alpha-coeffs"), flags.Changed("beta-coeffs")
	if bbAlpha || bbBeta || (l.Model == "blackbox" && l.Blackbox == nil) {
		p := deploy.DefaultBlackboxParams
		if l.Blackbox != nil {
			p = *l.Blackbox
		}
		var err error
		if bbAlpha || l.Blackbox == nil {
			if p.Alpha, err = parseTriple(o.alphaBB, "--alpha-coeffs"); err != nil {
				return err
			}
		}
		if bbBeta || l.Blackbox == nil {
			if p.Beta, err = parseTriple(o.betaBB, "--beta-coeffs"); err != nil {
				return err
			}
		}
		l.Blackbox = &p
	}
	return nil
}

// applyVLLMFlags is applyInstanceFlags for vLLM's engine settings, the
// parallelism and the request pipeline.
func applyVLLMFlags(set func(string) bool, o *runOpts, spec *deploy.InstanceSpec) error {
	k := &spec.VLLM
	if set("max-num-seqs") {
		k.MaxNumSeqs = o.knobs.MaxNumSeqs
	}
	if set("max-num-batched-tokens") {
		k.MaxBatchedTokens = o.knobs.MaxBatchedTokens
	}
	if set("enable-chunked-prefill") {
		k.ChunkedPrefillEnabled = o.knobs.ChunkedPrefillEnabled
	}
	if set("enable-prefix-caching") {
		k.PrefixCachingEnabled = o.knobs.PrefixCachingEnabled
	}
	if set("block-size") {
		k.BlockSizeTokens = o.knobs.BlockSizeTokens
	}
	if set("gpu-memory-utilization") {
		k.GPUMemoryUtilization = o.knobs.GPUMemoryUtilization
	}
	if set("kv-blocks-gpu") {
		k.TotalKVBlocksGPU = 0 // derive
		if o.kvBlocksGPU != "auto" {
			n, err := strconv.ParseInt(o.kvBlocksGPU, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("--kv-blocks-gpu must be a block count > 0 or auto, got %q", o.kvBlocksGPU)
			}
			k.TotalKVBlocksGPU = n
		}
	}
	if set("kv-blocks-cpu") {
		if o.knobs.TotalKVBlocksCPU < 0 {
			return fmt.Errorf("--kv-blocks-cpu must be >= 0, got %d", o.knobs.TotalKVBlocksCPU)
		}
		k.TotalKVBlocksCPU = o.knobs.TotalKVBlocksCPU
	}
	if set("kv-offload-threshold") {
		spec.OffloadThreshold = o.offloadThresh
	}
	if set("long-prefill-token-threshold") {
		spec.LongPrefillThreshold = o.longPrefill
	}
	if set("max-model-len") {
		spec.MaxModelLen = o.maxModelLen
	}
	if set("data-parallel-size") {
		if o.dataParallel < 1 {
			return fmt.Errorf("--data-parallel-size must be >= 1, got %d", o.dataParallel)
		}
		spec.DP = o.dataParallel
	}
	if set("enable-expert-parallel") {
		spec.ExpertParallel = o.expertParallel
	}
	if set("async-scheduling") {
		spec.AsyncScheduling = o.asyncSched
	}
	if set("scheduler-reserve-full-isl") {
		spec.ReserveFullSequence = o.reserveFullISL
	}
	if set("output-delay-us") {
		spec.OutputDelayUs = o.outputDelayUs
	}
	return nil
}

func parseTriple(s, flag string) ([3]float64, error) {
	var v [3]float64
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return v, fmt.Errorf("%s wants three comma-separated numbers, got %q", flag, s)
	}
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return v, fmt.Errorf("%s: %q is not a finite number >= 0", flag, p)
		}
		v[i] = x
	}
	return v, nil
}

// report is the JSON a run prints.
type report struct {
	Tool     string                 `json:"tool"`
	Version  int                    `json:"version"`
	Config   runConfig              `json:"config"`
	Workload *workload.ReplayReport `json:"replay,omitempty"`
	Metrics  *sim.Result            `json:"metrics"`
}

type runConfig struct {
	instanceConfig
	Workload string  `json:"workload"`
	Seed     int64   `json:"seed"`
	HorizonS float64 `json:"horizon_s"`
}

// instanceConfig is an instance as the output echoes it.
type instanceConfig struct {
	Model        string            `json:"model"`
	Hardware     string            `json:"hardware"`
	TP           int               `json:"tp"`
	VLLM         physics.VLLMKnobs `json:"vllm"`
	LongPrefill  int64             `json:"long_prefill_token_threshold"`
	MaxModelLen  int64             `json:"max_model_len,omitempty"` // when given: the model's otherwise
	Async        bool              `json:"async_scheduling"`
	ReserveFull  bool              `json:"scheduler_reserve_full_isl"`
	OutputDelay  int64             `json:"output_delay_us"`
	Scheduler    string            `json:"scheduler"`
	Priority     string            `json:"priority"`
	Latency      string            `json:"latency"`
	Coefficients string            `json:"coefficients,omitempty"`
	Noise        float64           `json:"latency_noise"`
}

func describeInstance(spec *deploy.InstanceSpec, in *deploy.Instance) instanceConfig {
	return instanceConfig{
		Model: in.Phys.Model.Name, Hardware: in.Phys.Hardware.Name, TP: in.Phys.TP, VLLM: in.Phys.Knobs,
		LongPrefill: spec.LongPrefillThreshold, MaxModelLen: spec.MaxModelLen, Async: spec.AsyncScheduling, ReserveFull: spec.ReserveFullSequence, OutputDelay: spec.OutputDelayUs, Scheduler: spec.Scheduler, Priority: spec.Priority,
		Latency: in.Config.Latency.Name(), Coefficients: in.CoefficientsSource, Noise: spec.Latency.Noise,
	}
}

// describeWorkload is the workload in one line.
func describeWorkload(o *runOpts) string {
	if o.replay != "" {
		return "replay " + o.replay
	}
	w := o.workload
	wl := fmt.Sprintf("%d requests, %s arrivals at %g/s, prompt %s, output %s", w.Requests, w.Arrival, w.Rate, w.Prompt, w.Output)
	if w.Arrival == workload.ArrivalGamma {
		wl += fmt.Sprintf(" (gamma cv %g)", w.GammaCV)
	}
	if w.PrefixGroups > 0 {
		wl += fmt.Sprintf(", %g share %d-token prefixes of %d groups", w.PrefixFraction, w.PrefixTokens, w.PrefixGroups)
	}
	return wl
}

func describe(o *runOpts, r *resolved) runConfig {
	return runConfig{instanceConfig: describeInstance(&r.spec, r.in), Workload: describeWorkload(o), Seed: o.seed, HorizonS: o.horizonS}
}

// flagError prefixes a workload error with "--" when it starts with the
// field's flag name, so that "rate must be > 0" reads "--rate must be > 0".
func flagError(err error) error {
	if errors.Is(err, workload.ErrArrivalOverflow) {
		return fmt.Errorf("--rate, --requests: %w", err)
	}
	msg := err.Error()
	for _, f := range []string{"requests", "rate", "arrival", "gamma-cv", "prefix-groups", "prefix-tokens", "prefix-fraction"} {
		field := strings.ReplaceAll(f, "-", "_")
		for _, name := range []string{f, field} {
			if strings.HasPrefix(msg, name+" ") || strings.HasPrefix(msg, name+":") {
				return fmt.Errorf("--%s%s", f, msg[len(name):])
			}
		}
	}
	return err
}
