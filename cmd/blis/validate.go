package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/experiment"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
	"github.com/blis-sim/blis/validate"
)

// validateOpts are blis validate's own flags; the instance flags are
// blis run's (experiment.Flags).
type validateOpts struct {
	quiet     bool
	format    string
	meta      string
	strict    bool
	plot      string
	asJSON    bool
	calibrate bool
	saveHost  string
	counters  string
}

func newValidateCmd() *cobra.Command {
	var o validateOpts
	cmd := &cobra.Command{
		Use:   "validate RECORDS",
		Short: "Replay a real vLLM run and compare its measured latencies with the simulation",
		Long: `validate replays the requests of a measured vLLM run (their arrivals, prompt
and output lengths) through the simulator and compares each request's
simulated TTFT, mean inter-token latency (ITL, vLLM's TPOT) and E2E with
the measured ones. It prints a table of the mean, p50, p90 and p99 of each,
measured and simulated, their errors ((simulated − measured) / measured,
so a positive error is a simulation that is too slow), and the median
per-request error; --plot draws simulated against measured per request.

RECORDS is a per-request file in one of the formats users have:
  vllm-runs       requests.jsonl of testdata/vllm-runs (vLLM's own
                  per-request stats; measured at the engine core's output)
  vllm-bench      vllm bench serve --save-result --save-detailed JSON
                  (measured at the client)
  inference-perf  per_request_lifecycle_metrics.json (measured at the client)
(--format, detected by default). Every row is read or counted as skipped
with its reason; --strict fails on the first unreadable one instead.

The deployment comes from the instance flags (as for blis run). For a
vllm-runs file, the meta.json next to it (or --meta) supplies what the flags
do not set: the model, tensor and data parallelism, expert parallelism,
max_num_seqs, max_num_batched_tokens, the KV blocks vLLM allocated, the GPU
(from the device name CUDA reported) and async scheduling. A run measured
at the engine core is compared without the output delay
(--output-delay-us 0 unless given). Data parallelism runs the engines
behind vLLM's own load balancer (the vllm-dp routing policy).

With the run's engine counters (--counters, or the timeseries.csv next to
a vllm-runs file), it also compares the engine phase by phase: the step
time (running requests ÷ generated tokens per second) of the ticks with
only decode steps, by running requests per engine, and the step time and
token throughput of the ticks that prefill while requests wait, measured
against the simulation's own counters over windows of the same length.

--calibrate fits the simulator to the run before comparing: with the
roofline latency model, its step-time parameters (--roofline-compute-eff,
share of the GPU's sustained GEMM rate in (0.1, 1);
--roofline-bandwidth-eff, share of peak memory bandwidth in (0.3, 1);
--roofline-step-overhead-us, the engine core's fixed cost per step in
50 µs – 50 ms), and for records measured at the client the output delay
(--output-delay-us, 10 µs – 200 ms). The search is coordinate descent with
a golden-section search per parameter over its range (log scale), two
rounds of 16 simulations each, minimizing the sum of squared log ratios of
the simulated to the measured mean TTFT, ITL and E2E. It is deterministic.
It prints the parameters as flags in two groups: the efficiencies, for
runs of the same GPU, model and parallelism only (they absorb what is
specific to this deployment's kernels), and the per-step cost and output
delay, for any deployment on the same vLLM build and host.`,
		Example: `  blis validate testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl
  blis validate runs/qwen/requests.jsonl --hardware rtx-pro-6000 --plot qwen.png
  blis validate bench.json --format vllm-bench --model llama-2-7b --hardware h100-sxm --max-num-seqs 256`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, &o, args[0])
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.format, "format", "auto", "format of RECORDS: auto, vllm-runs, vllm-bench, inference-perf (auto: detected from the content)")
	f.StringVar(&o.meta, "meta", "", "vllm-runs meta.json describing the deployment (default: meta.json next to RECORDS, when there is one)")
	f.StringVar(&o.counters, "counters", "", "vLLM's per-tick engine counters of the run (a vllm-runs timeseries.csv: prompt and generated tokens per second, running and waiting requests) to compare phase by phase with the simulation's (default: timeseries.csv next to a vllm-runs RECORDS, when there is one)")
	f.BoolVar(&o.strict, "strict", false, "fail on the first unreadable row instead of skipping it (skips are counted in the report)")
	f.StringVar(&o.plot, "plot", "", "draw simulated against measured TTFT, ITL and E2E per request to `FILE` (.png, .svg or .pdf)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON instead of a table")
	f.BoolVar(&o.calibrate, "calibrate", false, "fit the simulator to this run first (the roofline's compute and bandwidth efficiency and per-step overhead, and the output delay for records measured at the client) by a deterministic search that runs the simulator inside the fit, print them as flags, then compare with them")
	f.StringVar(&o.saveHost, "save-host-profile", "", "with --calibrate, write what carries to any deployment on this vLLM build and host (the per-step cost, the output delay) to `FILE`, a host profile that --host-profile FILE applies to other runs")
	addExperimentFlags(f, validateFlag)
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr but warnings")
	return cmd
}

// validateReport is blis validate's JSON output.
type validateReport struct {
	Tool       string                  `json:"tool"`
	Version    int                     `json:"version"`
	Records    records.Report          `json:"records"`
	MeasuredAt string                  `json:"measured_at"`
	Meta       string                  `json:"meta,omitempty"`
	Deployment experiment.InstanceEcho `json:"deployment"`
	Engines    int                     `json:"engines"`
	// Lockstep sums the engines' data-parallel lockstep (a MoE model's
	// DP engines), absent without it.
	Lockstep   *sim.LockstepResult `json:"lockstep,omitempty"`
	Compare    validate.Report     `json:"compare"`
	Calibrated *calibration        `json:"calibrated,omitempty"`
	// Counters and Phases compare the engine counters, when the run has
	// them.
	Counters *records.Report  `json:"counters,omitempty"`
	Phases   []validate.Phase `json:"phases,omitempty"`
}

// calibration is what --calibrate found.
type calibration struct {
	Flags map[string]float64 `json:"flags"`
	// Pipeline names the flags that carry to any deployment on the same
	// vLLM build and host (the engine core's per-step cost, the output
	// delay); the others (the roofline's efficiencies) describe this
	// deployment's kernels and carry only to runs of the same GPU, model
	// and parallelism.
	Pipeline    []string `json:"pipeline_flags"`
	Loss        float64  `json:"loss"`
	StartLoss   float64  `json:"start_loss"`
	Simulations int      `json:"simulations"`
	WallS       float64  `json:"wall_s"`
}

// validateFlag keeps the experiment flags that describe the instance
// replaying the run, and the seed.
func validateFlag(f experiment.Flag) bool {
	switch f.Name {
	case "data-parallel-size", "scheduler", "priority", "priority-base", "priority-age-weight", "seed":
		return true
	}
	return strings.HasPrefix(f.Key, "deployment.pools[*].")
}

func runValidate(cmd *cobra.Command, o *validateOpts, path string) error {
	// Ctrl-C or SIGTERM during the minutes of a calibration: no --plot
	// temporary is left and nothing is committed (status 130, 143).
	defer atomicfile.ExitOnSignal("blis", cmd.ErrOrStderr())()
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	flags := cmd.Flags()
	var plotFormat string
	if o.plot != "" {
		// Refused before the run, not after it.
		ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(o.plot), "."))
		if !slices.Contains(validate.Formats, ext) {
			return fmt.Errorf("--plot %s: the extension must be .%s", o.plot, strings.Join(validate.Formats, ", ."))
		}
		plotFormat = ext
	}
	if o.saveHost != "" && !o.calibrate {
		return errors.New("--save-host-profile needs --calibrate: the profile holds what the calibration finds")
	}
	var ins []atomicfile.Named
	for _, fl := range []string{"model", "hardware", "coefficients", "host-profile"} {
		ins = append(ins, atomicfile.Named{Label: "--" + fl, Path: flags.Lookup(fl).Value.String()})
	}
	ins = append(ins, atomicfile.Named{Label: "RECORDS", Path: path}, atomicfile.Named{Label: "--meta", Path: o.meta},
		atomicfile.Named{Label: "meta.json of RECORDS", Path: records.MetaPath(path)}, atomicfile.Named{Label: "--counters", Path: o.counters},
		atomicfile.Named{Label: "timeseries.csv of RECORDS", Path: records.CountersPath(path)})
	if err := atomicfile.Check(ins, []atomicfile.Named{{Label: "--plot", Path: o.plot}, {Label: "--save-host-profile", Path: o.saveHost}}); err != nil {
		return err
	}
	recs, rep, err := records.Read(path, o.format, records.Options{Strict: o.strict})
	if err != nil {
		return err
	}
	at := records.MeasuredAt(rep.Format)
	if at == "" {
		return fmt.Errorf("%s: %s records carry no measured latencies to compare with; use %s", path, rep.Format,
			strings.Join([]string{records.VLLMRuns, records.VLLMBench, records.InferencePerf}, ", "))
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(stderr, "blis: %s: skipped %d rows: %s (first at line %d)\n", path, s.Count, s.Reason, s.FirstLine)
	}
	d := experiment.NewDraft()
	var meta *records.RunMeta
	metaPath := o.meta
	if metaPath == "" && rep.Format == records.VLLMRuns {
		if _, err := os.Stat(records.MetaPath(path)); err == nil {
			metaPath = records.MetaPath(path)
		}
	}
	if metaPath != "" {
		if meta, err = records.ReadRunMeta(metaPath); err != nil {
			return fmt.Errorf("--meta: %w", err)
		}
		if err := applyMeta(d, flags, meta); err != nil {
			return err
		}
	}
	counters, err := readCounters(stderr, o, path, rep.Format)
	if err != nil {
		return err
	}
	if at == records.AtEngine && !flags.Changed("output-delay-us") {
		if err := d.SetFlagAs("output-delay-us", "0", "records measured at the engine core"); err != nil {
			return err
		}
	}
	if err := applyFlags(d, flags); err != nil {
		return err
	}
	e, err := d.Resolve()
	if err != nil {
		return err
	}
	reqs, _, err := records.ToRequests(recs)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var cal *calibration
	if o.calibrate {
		if cal, err = calibratePipeline(e, at, recs, reqs); err != nil {
			if errors.Is(err, validate.ErrNothingToCompare) {
				return fmt.Errorf("--calibrate: %s: %w", path, err)
			}
			return err
		}
		fmt.Fprintf(stderr, "blis: calibrated in %d simulations, %.1f s wall: loss %.4f -> %.4f\n", cal.Simulations, cal.WallS, cal.StartLoss, cal.Loss)
		if o.saveHost != "" {
			if err := saveHostProfile(o.saveHost, path, e, cal); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "blis: host profile written to %s (use it with --host-profile %s)\n", o.saveHost, o.saveHost)
		}
	}
	start := time.Now()
	res, desc, engines, run, err := simulateRecords(e, reqs, counters.tickUs)
	if errors.Is(err, cluster.ErrTooManyWindows) && counters.tickUs > 0 {
		// The windows are the counters' ticks, not a --window the user gave.
		return fmt.Errorf("%s %s: ticks %v s apart (the median spacing of column t, in seconds) are too short to compare the run over: the simulation would need more time windows than it keeps; is column t in seconds?",
			counters.label(), counters.path, float64(counters.tickUs)/1e6)
	}
	if err != nil {
		return err
	}
	for _, w := range run.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
	}
	for _, n := range run.Notes {
		fmt.Fprintln(stderr, "blis: "+n)
	}
	pairs := pairUp(recs, reqs, res)
	cmp := validate.Compare(pairs)
	var phases []validate.Phase
	if counters.tickUs > 0 {
		phases = validate.ComparePhases(counters.ticks, simulatedTicks(res.Windows), engines)
	}
	fmt.Fprintf(stderr, "blis: %d requests replayed on %d engine(s) in %.2f s wall\n", len(reqs), engines, time.Since(start).Seconds())
	if o.plot != "" {
		title := fmt.Sprintf("%s on %d × %s (TP %d)", desc.Model, engines, desc.Hardware, desc.TP)
		if err := writePlot(o.plot, plotFormat, pairs, title); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		vr := validateReport{Tool: "blis validate", Version: 1, Records: rep, MeasuredAt: at, Deployment: desc, Engines: engines, Compare: cmp, Calibrated: cal,
			Phases: phases, Lockstep: lockstepOf(res)}
		if phases != nil {
			vr.Counters = &counters.rep
		}
		if meta != nil {
			vr.Meta = meta.Path
		}
		return enc.Encode(vr)
	}
	fmt.Fprintf(out, "%s: %d requests (%d rows, %d skipped), measured at the %s\n", path, rep.Read, rep.Rows, rep.Rows-rep.Read, at)
	if cal != nil {
		fmt.Fprintf(out, "calibrated:")
		for _, k := range sortedKeys(cal.Flags) {
			fmt.Fprintf(out, " --%s %g", k, cal.Flags[k])
		}
		fmt.Fprintf(out, " (loss %.4f -> %.4f, %d simulations)\n", cal.StartLoss, cal.Loss, cal.Simulations)
		var dep, pipe []string
		for _, k := range sortedKeys(cal.Flags) {
			f := fmt.Sprintf("--%s %g", k, cal.Flags[k])
			if slices.Contains(cal.Pipeline, k) {
				pipe = append(pipe, f)
			} else {
				dep = append(dep, f)
			}
		}
		if len(dep) > 0 {
			fmt.Fprintf(out, "  for runs of this GPU, model and parallelism only: %s\n", strings.Join(dep, " "))
		}
		if len(pipe) > 0 {
			fmt.Fprintf(out, "  for any deployment on this vLLM build and host: %s\n", strings.Join(pipe, " "))
		}
	}
	fmt.Fprintf(out, "deployment: %s on %d × %s, TP %d, max_num_seqs %d, max_num_batched_tokens %d, %d KV blocks, async scheduling %v, output delay %d µs, latency model %s\n\n",
		desc.Model, engines, desc.Hardware, desc.TP, desc.VLLM.MaxNumSeqs, desc.VLLM.MaxBatchedTokens, desc.VLLM.TotalKVBlocksGPU, desc.Async, desc.OutputDelay, desc.Latency)
	if l := lockstepOf(res); l != nil {
		var busyMs float64
		for _, in := range res.Instances {
			busyMs += in.Metrics.BusyFraction * in.Metrics.DurationS * 1000
		}
		fmt.Fprintf(out, "data-parallel lockstep: the engines' steps waited %.1f ms for a slower engine (%.1f %% of their busy time); %d dummy batches\n\n",
			l.WaitMs, 100*l.WaitMs/max(busyMs, 1e-9), l.DummySteps)
	}
	if err := cmp.WriteTable(out); err != nil {
		return err
	}
	if phases == nil {
		return nil
	}
	fmt.Fprintf(out, "\nengine counters: %s, %d ticks of %g s measured, %d simulated; step = running requests / generated tokens per second, per engine\n",
		counters.path, len(counters.ticks), float64(counters.tickUs)/1e6, len(res.Windows))
	return validate.WritePhases(out, phases)
}

// lockstepOf sums the engines' lockstep results, nil when none stepped in
// lockstep.
func lockstepOf(res *cluster.Result) *sim.LockstepResult {
	var sum *sim.LockstepResult
	for _, in := range res.Instances {
		if l := in.Metrics.Lockstep; l != nil {
			if sum == nil {
				sum = &sim.LockstepResult{}
			}
			sum.WaitMs += l.WaitMs
			sum.DummySteps += l.DummySteps
		}
	}
	return sum
}

// applyMeta sets what a vllm-runs meta.json says on the draft, with its
// flags' meaning, for every setting whose flag the user did not give
// (applyFlags then applies those).
func applyMeta(d *experiment.Draft, flags *pflag.FlagSet, m *records.RunMeta) error {
	set := func(flag, value string) error {
		if flags.Changed(flag) {
			return nil
		}
		return d.SetFlagAs(flag, value, m.Path)
	}
	if err := set("model", m.Model); err != nil {
		return err
	}
	if !flags.Changed("hardware") {
		if m.Device == "" {
			return fmt.Errorf("%s records no GPU: give --hardware (shipped: %s)", m.Path, strings.Join(physics.BuiltinHardware(), ", "))
		}
		h, ok := physics.HardwareForDevice(m.Device)
		if !ok {
			return fmt.Errorf("%s: GPU %q is not a shipped hardware spec: give --hardware (a shipped name or a spec JSON)", m.Path, m.Device)
		}
		if err := set("hardware", h.Name); err != nil {
			return err
		}
	}
	vals := []struct {
		flag, value string
		given       bool
	}{
		{"tp", fmt.Sprint(m.TP), true},
		{"data-parallel-size", fmt.Sprint(max(1, m.DP)), true},
		{"enable-expert-parallel", fmt.Sprint(m.ExpertParallel), true},
		{"max-num-seqs", fmt.Sprint(m.MaxNumSeqs), m.MaxNumSeqs > 0},
		{"max-num-batched-tokens", fmt.Sprint(m.MaxBatchedTokens), m.MaxBatchedTokens > 0},
		{"kv-blocks-gpu", fmt.Sprint(m.KVBlocksGPU), m.KVBlocksGPU > 0},
		{"block-size", fmt.Sprint(m.BlockSize), m.BlockSize > 0},
		{"gpu-memory-utilization", fmt.Sprint(m.GPUMemoryUtilization), m.GPUMemoryUtilization > 0},
		{"enable-prefix-caching", fmtBool(m.PrefixCaching), m.PrefixCaching != nil},
		{"enable-chunked-prefill", fmtBool(m.ChunkedPrefill), m.ChunkedPrefill != nil},
		{"async-scheduling", fmtBool(m.AsyncScheduling), m.AsyncScheduling != nil},
		{"enforce-eager", fmtBool(m.EnforceEager), m.EnforceEager != nil},
		{"vllm-version", m.VLLMVersion, m.VLLMVersion != ""},
		{"scheduler-reserve-full-isl", fmtBool(m.ReserveFullISL), m.ReserveFullISL != nil},
	}
	for _, v := range vals {
		if !v.given {
			continue
		}
		if err := set(v.flag, v.value); err != nil {
			return err
		}
	}
	return nil
}

func fmtBool(b *bool) string {
	if b == nil {
		return ""
	}
	return fmt.Sprint(*b)
}

// simulateRecords runs the requests on the experiment's deployment: one
// engine, or data-parallel engines behind vLLM's balancer, as a cluster
// that keeps every request's record; windowUs > 0 also cuts the run into
// windows of that length.
func simulateRecords(e *experiment.Experiment, reqs []sim.RequestSpec, windowUs int64) (*cluster.Result, experiment.InstanceEcho, int, *experiment.Result, error) {
	x := *e
	x.Mode = experiment.ModeCluster
	x.Workload = experiment.Workload{Kind: experiment.Requests, Requests: reqs}
	x.Run.PerRequest = true
	x.Run.WindowUs = windowUs
	res, err := experiment.Run(context.Background(), &x, &experiment.MemSinks{})
	if err != nil {
		return nil, experiment.InstanceEcho{}, 0, nil, err
	}
	rep := res.Report.(*experiment.ClusterReport)
	return res.Cluster, rep.Config.Pools[0].InstanceEcho, rep.Config.Instances, res, nil
}

// pairUp matches each record (sorted by arrival, as reqs[i] was made from
// recs[i]) with its simulated request.
func pairUp(recs []records.Record, reqs []sim.RequestSpec, res *cluster.Result) []validate.Pair {
	byID := make(map[int64]*cluster.RequestRecord, len(res.PerRequest))
	for i := range res.PerRequest {
		byID[res.PerRequest[i].ID] = &res.PerRequest[i]
	}
	pairs := make([]validate.Pair, len(recs))
	for i := range recs {
		r := &recs[i]
		p := validate.Pair{ID: reqs[i].ID, Line: r.Line, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			MeasTTFT: r.TTFTUs, MeasITL: r.MeanITLUs, MeasE2E: r.E2EUs, SimTTFT: -1, SimITL: -1, SimE2E: -1}
		if s, ok := byID[reqs[i].ID]; ok && s.Outcome == cluster.Completed.String() {
			p.SimTTFT = s.TTFT
			p.SimE2E = s.LastTokenUs - s.ArrivalUs
			if s.OutputTokens > 1 {
				p.SimITL = (s.LastTokenUs - s.ArrivalUs - s.TTFT) / (s.OutputTokens - 1)
			}
		}
		pairs[i] = p
	}
	return pairs
}

// calibratePipeline fits the pipeline's parameters to the records and sets
// them on spec (validate.Search; --calibrate's help says how).
func calibratePipeline(e *experiment.Experiment, at string, recs []records.Record, reqs []sim.RequestSpec) (*calibration, error) {
	spec := &e.Deployment.Pools[0].Instance
	type knob struct {
		param    validate.Param
		flag     string
		get      func() float64
		set      func(*deploy.InstanceSpec, float64)
		pipeline bool // carries to other deployments (calibration.Pipeline)
	}
	var knobs []knob
	// The step-time parameters are the roofline's; probe which model the
	// spec chooses.
	in, err := spec.Build(sim.NewRNG(e.Run.Seed), 0)
	if err != nil {
		_, _, _, _, err := simulateRecords(e, reqs[:0], 0) // the error, placed
		return nil, err
	}
	var withRoofline *deploy.RooflineParams // the roofline parameters to start from, nil without the roofline
	if in.LatencyName == "roofline" {
		rp := deploy.DefaultRooflineParams
		if spec.Latency.Roofline != nil {
			rp = *spec.Latency.Roofline
		}
		// The roofline's own parameters, the GPU's and engine's: compute
		// and bandwidth efficiency first, so that the per-step overhead
		// takes what they leave rather than absorbing a step-time error
		// that scales with the batch.
		knobs = append(knobs,
			knob{validate.Param{Name: "compute efficiency", Lo: 0.1, Hi: 1, Log: true}, "roofline-compute-eff",
				func() float64 { return rp.ComputeEff },
				func(s *deploy.InstanceSpec, v float64) { s.Latency.Roofline.ComputeEff = v }, false},
			knob{validate.Param{Name: "bandwidth efficiency", Lo: 0.3, Hi: 1, Log: true}, "roofline-bandwidth-eff",
				func() float64 { return rp.BandwidthEff },
				func(s *deploy.InstanceSpec, v float64) { s.Latency.Roofline.BandwidthEff = v }, false},
			knob{validate.Param{Name: "step overhead", Lo: 50, Hi: 50000, Log: true}, "roofline-step-overhead-us",
				func() float64 { return in.StepCost.FixedUs }, // what the deployment implies unless given
				func(s *deploy.InstanceSpec, v float64) {
					s.Latency.Roofline.StepOverheadUs, s.Latency.Roofline.StepOverheadSet = v, true
				}, true})
		withRoofline = &rp
	}
	if at == records.AtClient {
		knobs = append(knobs, knob{validate.Param{Name: "output delay", Lo: 10, Hi: 200000, Log: true}, "output-delay-us",
			func() float64 { return float64(max(spec.OutputDelayUs, 10)) },
			func(s *deploy.InstanceSpec, v float64) { s.OutputDelayUs = int64(v) }, true})
	}
	if len(knobs) == 0 {
		return nil, errors.New("--calibrate: nothing to calibrate: the step-time parameters need the roofline latency model, and records measured at the engine core have no output delay")
	}
	search := validate.Search{Rounds: 2, Evals: 16}
	start := make([]float64, len(knobs))
	for i, k := range knobs {
		search.Params = append(search.Params, k.param)
		start[i] = min(max(k.get(), k.param.Lo), k.param.Hi)
	}
	// apply sets the parameters, rounded as their flags print them, on a
	// copy of spec (with its own roofline parameters).
	apply := func(x []float64) deploy.InstanceSpec {
		s := *spec
		if withRoofline != nil {
			p := *withRoofline
			s.Latency.Roofline = &p
		}
		for i, k := range knobs {
			k.set(&s, roundFlag(k.param, x[i]))
		}
		return s
	}
	t0 := time.Now()
	res, err := search.Run(start, func(x []float64) (float64, error) {
		x2 := *e
		x2.Deployment.Pools = []deploy.Pool{e.Deployment.Pools[0]}
		x2.Deployment.Pools[0].Replicas = e.Deployment.Pools[0].Replicas
		x2.Deployment.Pools[0].Instance = apply(x)
		r, _, _, _, err := simulateRecords(&x2, reqs, 0)
		if err != nil {
			return 0, err
		}
		return validate.Objective(validate.Compare(pairUp(recs, reqs, r))), nil
	})
	if err != nil {
		return nil, err
	}
	best := apply(res.Best)
	pools := append([]deploy.Pool(nil), e.Deployment.Pools...)
	pools[0].Instance = best
	e.Deployment.Pools = pools
	cal := &calibration{Flags: map[string]float64{}, Loss: res.Loss, StartLoss: res.StartLoss, Simulations: res.Evaluation,
		WallS: time.Since(t0).Seconds()}
	for i, k := range knobs {
		cal.Flags[k.flag] = roundFlag(k.param, res.Best[i])
		if k.pipeline {
			cal.Pipeline = append(cal.Pipeline, k.flag)
		}
	}
	return cal, nil
}

// roundFlag rounds a calibrated value as its flag is set: shares to three
// decimals, microseconds to whole ones.
func roundFlag(p validate.Param, v float64) float64 {
	if p.Hi <= 1 {
		return math.Round(v*1000) / 1000
	}
	return math.Round(v)
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writePlot draws the comparison to path through a temporary file renamed
// over it only when the figure is complete.
func writePlot(path, format string, pairs []validate.Pair, title string) error {
	f, err := atomicfile.Create(path, "--plot")
	if err != nil {
		return err
	}
	defer f.Abort()
	b := bufio.NewWriterSize(f, 1<<16)
	if err := validate.WritePlot(b, pairs, title, format); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return f.Commit()
}

// runCounters are a run's per-tick engine counters (--counters); tickUs is
// 0 when there are none.
type runCounters struct {
	path   string
	rep    records.Report
	ticks  []validate.CounterSecond
	tickUs int64
	given  bool // named by --counters, not found next to RECORDS
}

// readCounters reads --counters, or the timeseries.csv next to a vllm-runs
// RECORDS when there is one, and finds the tick length: the median spacing
// of the ticks, rounded to the µs.
// label names where the counters came from: the flag, or the file found
// next to RECORDS (the user gave no flag).
func (c runCounters) label() string {
	if c.given {
		return "--counters"
	}
	return "engine counters"
}

func readCounters(stderr io.Writer, o *validateOpts, path, format string) (runCounters, error) {
	c := runCounters{path: o.counters}
	if c.path == "" && format == records.VLLMRuns {
		if _, err := os.Stat(records.CountersPath(path)); err == nil {
			c.path = records.CountersPath(path)
		}
	}
	if c.path == "" {
		return c, nil
	}
	c.given = o.counters != ""
	rows, rep, err := records.ReadCounters(c.path, records.Options{Strict: o.strict})
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.label(), err)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(stderr, "blis: %s: skipped %d rows: %s (first at line %d)\n", c.path, s.Count, s.Reason, s.FirstLine)
	}
	if len(rows) < 2 {
		return c, fmt.Errorf("%s %s: %d usable row; the tick length needs two", c.label(), c.path, len(rows))
	}
	gaps := make([]float64, len(rows)-1)
	for i := range gaps {
		gaps[i] = rows[i+1].T - rows[i].T
	}
	slices.Sort(gaps)
	tick := gaps[(len(gaps)-1)/2]
	c.tickUs = int64(math.Round(tick * 1e6))
	if c.tickUs <= 0 || c.tickUs > sim.MaxDurationUs {
		return c, fmt.Errorf("%s %s: ticks %v s apart (the median spacing of column t) is not a usable window", c.label(), c.path, tick)
	}
	c.rep = rep
	c.ticks = make([]validate.CounterSecond, len(rows))
	for i, r := range rows {
		c.ticks[i] = validate.CounterSecond{PromptPerS: r.PromptPerS, GenerationPerS: r.GenerationPerS, Running: r.Running, Waiting: r.Waiting}
	}
	return c, nil
}

// simulatedTicks are the simulation's windows as engine counters.
func simulatedTicks(ws []cluster.Window) []validate.CounterSecond {
	out := make([]validate.CounterSecond, len(ws))
	for i, w := range ws {
		d := float64(w.EndUs-w.StartUs) / 1e6
		out[i] = validate.CounterSecond{PromptPerS: float64(w.PromptTokens) / d, GenerationPerS: float64(w.GenerationTokens) / d,
			Running: w.Running, Waiting: w.QueueDepth}
	}
	return out
}

// saveHostProfile writes what the calibration found that carries to other
// deployments on the same vLLM build and host (deploy.HostProfile).
func saveHostProfile(out, records string, e *experiment.Experiment, cal *calibration) error {
	us, ok := cal.Flags["roofline-step-overhead-us"]
	if !ok {
		return fmt.Errorf("--save-host-profile: the calibration fitted no per-step cost (it needs the roofline latency model; this run uses another: --latency roofline)")
	}
	spec := e.Deployment.Pools[0].Instance
	h := &deploy.HostProfile{StepOverheadUs: us, CalibratedOn: deploy.HostRun{Records: records, Model: spec.Model, Hardware: spec.Hardware,
		VLLMVersion: spec.VLLMVersion, AsyncScheduling: spec.AsyncScheduling, EnforceEager: spec.EnforceEager}}
	if d, ok := cal.Flags["output-delay-us"]; ok {
		od := int64(d)
		h.OutputDelayUs = &od
	}
	data, err := h.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(out, "--save-host-profile", data)
}
