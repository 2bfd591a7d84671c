package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/cluster/windowplot"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
)

// clusterOpts are the flags of a cluster run (seed 001's names).
type clusterOpts struct {
	numInstances   int
	deployment     string
	admission      string
	bucketCapacity float64
	bucketRefill   float64
	admissionLatUs int64
	routing        string
	scorers        string
	routingLatUs   int64
	prefixIndexCap int
	refreshUs      int64
	traceLevel     string
	decisionTrace  string
	counterfactK   int
	fitness        string
	workers        int
	window         string
	windowOut      string
	windowPlot     string
}

// clusterFlags are the flags that make a run a cluster run when given.
var clusterFlags = []string{"num-instances", "deployment", "admission-policy", "token-bucket-capacity", "token-bucket-refill-rate",
	"admission-latency", "routing-policy", "routing-scorers", "routing-latency", "prefix-index-capacity",
	"snapshot-refresh-interval", "trace-level", "decision-trace", "counterfactual-k", "fitness-weights",
	"workload-spec", "scenario", "window", "window-out", "window-plot", "data-parallel-size"}

func addClusterFlags(f *pflag.FlagSet, o *clusterOpts) {
	f.IntVar(&o.numInstances, "num-instances", 1, "cluster: identical instances behind the router")
	f.StringVar(&o.deployment, "deployment", "", "cluster: deployment YAML with pools of instances and the cluster's policies (docs/cluster.md); instance and cluster flags given explicitly override it")
	f.StringVar(&o.admission, "admission-policy", admit.AlwaysAdmitName, "cluster: admission policy: always-admit, token-bucket, reject-all")
	f.Float64Var(&o.bucketCapacity, "token-bucket-capacity", deploy.DefaultAdmission.TokenBucketCapacity, "cluster: token bucket size, input tokens (each request costs its prompt tokens; starts full)")
	f.Float64Var(&o.bucketRefill, "token-bucket-refill-rate", deploy.DefaultAdmission.TokenBucketRefillRate, "cluster: token bucket refill, input tokens per second")
	f.Int64Var(&o.admissionLatUs, "admission-latency", 0, "cluster: µs from admission to the routing decision")
	f.StringVar(&o.routing, "routing-policy", route.RoundRobinName, "cluster: routing policy: round-robin, least-loaded, always-busiest, weighted, vllm-dp (vLLM's data-parallel balancer)")
	f.StringVar(&o.scorers, "routing-scorers", route.DefaultScorers, "cluster: weighted policy's scorers and weights (prefix-affinity, queue-depth, kv-utilization, load-balance); weights are normalized")
	f.Int64Var(&o.routingLatUs, "routing-latency", 0, "cluster: µs from the routing decision to the request's arrival at the instance")
	f.IntVar(&o.prefixIndexCap, "prefix-index-capacity", route.DefaultPrefixIndexCapacity, "cluster: router-side prefix index size per instance, KV blocks")
	f.Int64Var(&o.refreshUs, "snapshot-refresh-interval", 0, "cluster: µs between scrapes of the instance-reported signals (queue depth, batch size, KV utilization, free KV blocks, cache hit rate); 0 reads them at every decision")
	f.StringVar(&o.traceLevel, "trace-level", "none", "cluster: none, or decisions to write every admission and routing decision to --decision-trace")
	f.StringVar(&o.decisionTrace, "decision-trace", "", "cluster: JSON lines file for --trace-level decisions")
	f.IntVar(&o.counterfactK, "counterfactual-k", 3, "cluster: candidates (with scores, signals and regret) recorded per routing decision")
	f.IntVar(&o.workers, "workers", 0, "cluster: goroutines advancing instances between cluster events (0: one per CPU); the output is the same for any value")
	f.StringVar(&o.fitness, "fitness-weights", "", "cluster: print a fitness score, a weighted sum of normalized metrics: key:weight,... with keys throughput, tokens_per_sec, STAT_METRIC (STAT mean|p50|p90|p95|p99|max, METRIC ttft|itl|e2e|scheduling_delay)")
	f.StringVar(&o.window, "window", "", "cluster: cut the run into time windows [k·`D`, (k+1)·D) of simulated time, D a duration with a unit (10s, 500ms, 1m; whole µs), for --window-out and --window-plot (default: none; a single-instance run given a window flag runs as a 1-instance cluster)")
	f.StringVar(&o.windowOut, "window-out", "", "cluster: write one row per --window to `FILE`: .csv (with a header) or .jsonl (one JSON object a line); counts, rates per second, TTFT p50/p99 ms of the requests completed in the window, and queue depth, running batch, KV utilization and router in-flight at the window's end (docs/cluster.md)")
	f.StringVar(&o.windowPlot, "window-plot", "", "cluster: draw the --window rows to `FILE`, .png, .svg or .pdf: panels of request rates, TTFT p50/p99, queue depth and running batch, and KV utilization over time")
}

// clusterMode reports whether the flags ask for a cluster run.
func clusterMode(flags *pflag.FlagSet) bool {
	for _, f := range clusterFlags {
		if flags.Changed(f) {
			return true
		}
	}
	return false
}

// clusterDeployment is the deployment the flags describe: a file with the
// explicitly given flags over it, or --num-instances copies of the
// instance the flags describe.
func clusterDeployment(flags *pflag.FlagSet, o *runOpts) (*deploy.Deployment, error) {
	c := &o.cl
	var d *deploy.Deployment
	if c.deployment != "" {
		if flags.Changed("num-instances") {
			return nil, errors.New("--num-instances cannot be combined with --deployment: set each pool's replicas in the file")
		}
		var err error
		if d, err = deploy.LoadDeployment(c.deployment); err != nil {
			return nil, fmt.Errorf("--deployment: %w", err)
		}
		for i := range d.Pools {
			if err := applyInstanceFlags(flags, o, &d.Pools[i].Instance, false); err != nil {
				return nil, err
			}
		}
	} else {
		spec, err := instanceSpec(flags, o)
		if err != nil {
			return nil, err
		}
		if spec.DP > 1 {
			// One vLLM server of spec.DP engines behind its own balancer.
			if flags.Changed("num-instances") {
				return nil, errors.New("--data-parallel-size cannot be combined with --num-instances: a data-parallel server is --data-parallel-size instances behind vLLM's own load balancer")
			}
			d, err = deploy.Server(spec)
		} else {
			d, err = deploy.Uniform(spec, c.numInstances)
		}
		if err != nil {
			return nil, deploy.FlagError(err)
		}
	}
	a, r := &d.Admission, &d.Routing
	if flags.Changed("admission-policy") {
		a.Policy = c.admission
	}
	if flags.Changed("token-bucket-capacity") {
		a.TokenBucketCapacity = c.bucketCapacity
	}
	if flags.Changed("token-bucket-refill-rate") {
		a.TokenBucketRefillRate = c.bucketRefill
	}
	if flags.Changed("admission-latency") {
		a.LatencyUs = c.admissionLatUs
	}
	if flags.Changed("routing-policy") {
		r.Policy = c.routing
	}
	if flags.Changed("routing-scorers") {
		r.Scorers = c.scorers
	}
	if flags.Changed("routing-latency") {
		r.LatencyUs = c.routingLatUs
	}
	if flags.Changed("prefix-index-capacity") {
		r.PrefixIndexCapacity = c.prefixIndexCap
	}
	if flags.Changed("snapshot-refresh-interval") {
		if c.refreshUs < 0 {
			return nil, fmt.Errorf("--snapshot-refresh-interval must be >= 0 µs, got %d", c.refreshUs)
		}
		d.Freshness = cluster.Uniform(c.refreshUs)
	}
	// The flags' values are checked here so that errors name the flag.
	if err := a.Validate(); err != nil {
		return nil, deploy.FlagError(err)
	}
	if err := r.Validate(d.NumInstances()); err != nil {
		return nil, deploy.FlagError(err)
	}
	return d, nil
}

func runCluster(cmd *cobra.Command, o *runOpts, stderr io.Writer) error {
	r := &clusterRun{o: o, rng: sim.NewRNG(o.seed)}
	if err := r.checkFlags(cmd.Flags()); err != nil {
		return err
	}
	if err := r.build(cmd.Flags(), stderr, cmd.ErrOrStderr()); err != nil {
		return err
	}
	defer r.outs.Abort()
	if err := r.openOutputs(); err != nil {
		return err
	}
	if err := r.workload(cmd.Flags()); err != nil {
		return err
	}
	// The configuration the output echoes, which names the trace's ids.
	config := describeCluster(o, r.d, r.built)
	if r.spec != nil {
		config.Workload = r.spec.String()
	}
	config.WindowUs = r.win.us
	if err := r.attachTrace(config); err != nil {
		return err
	}

	start := time.Now()
	cs, err := cluster.New(r.cfg, r.src)
	if err != nil {
		return err
	}
	res, err := cs.Run()
	if errors.Is(err, cluster.ErrTooManyWindows) {
		return fmt.Errorf("--window %s: %w", o.cl.window, err)
	}
	if err != nil {
		return err
	}
	if r.gen != nil && r.gen.Err() != nil {
		return flagError(r.gen.Err())
	}
	wall := time.Since(start)
	if err := r.finishOutputs(res); err != nil {
		return err
	}
	out := clusterReport{Tool: "blis run", Version: 1, Config: config, Workload: r.replay, Metrics: res}
	if r.specSrc != nil {
		out.Spec = &specReport{Source: r.spec.Source, Tenants: r.specSrc.Stats()}
		r.offered = int(r.specSrc.Sent())
	}
	if r.weights != nil {
		fr := cluster.Fitness(res, r.weights)
		out.Fitness = &fr
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	r.printDiagnostics(stderr, cmd.ErrOrStderr(), res, wall)
	return nil
}

// clusterRun is a cluster run of blis run in the making: the checked
// flags, the built deployment, the outputs (written to temporary files and
// renamed when the run succeeds) and the workload source.
type clusterRun struct {
	o       *runOpts
	rng     sim.RNG
	d       *deploy.Deployment
	built   *deploy.Built
	cfg     cluster.Config
	win     windowFlags
	weights []cluster.FitnessWeight

	outs                  atomicfile.Group
	traceFile             *atomicfile.File
	windowOut, windowPlot *atomicfile.File
	traceBuf, decisionBuf *bufio.Writer
	writers               []*simtrace.Writer

	src     cluster.Source
	gen     *workload.Stream // the synthetic workload, or nil
	replay  *workload.ReplayReport
	spec    *workload.WorkloadSpec
	specSrc *workload.Source
	offered int
}

// checkFlags checks the cluster flags that need no deployment, before
// anything is built or written.
func (r *clusterRun) checkFlags(flags *pflag.FlagSet) error {
	o, c := r.o, &r.o.cl
	if err := checkReplayFlags(flags, o); err != nil {
		return err
	}
	switch c.traceLevel {
	case "none":
		if c.decisionTrace != "" {
			return errors.New("--decision-trace needs --trace-level decisions")
		}
	case "decisions":
		if c.decisionTrace == "" {
			return errors.New("--trace-level decisions needs --decision-trace FILE")
		}
	default:
		return fmt.Errorf("--trace-level %q is not a level; use none or decisions", c.traceLevel)
	}
	if c.counterfactK < 0 {
		return fmt.Errorf("--counterfactual-k must be >= 0, got %d", c.counterfactK)
	}
	if c.workers < 0 {
		return fmt.Errorf("--workers must be >= 0, got %d", c.workers)
	}
	var err error
	if r.win, err = parseWindowFlags(c); err != nil {
		return err
	}
	if c.fitness != "" {
		if r.weights, err = cluster.ParseFitnessWeights(c.fitness); err != nil {
			return fmt.Errorf("--fitness-weights: %w", err)
		}
	}
	if err := checkHorizon(o.horizonS); err != nil {
		return err
	}
	if o.kvEventsFile != "" {
		return errors.New("--kv-events is not supported for a cluster run yet; use --otlp-trace")
	}
	return checkTraceOptions(o)
}

// build resolves the deployment (file and flags), builds its pools, prints
// their notes and warnings, and fills the cluster configuration from the
// run flags.
func (r *clusterRun) build(flags *pflag.FlagSet, stderr, warn io.Writer) error {
	o, c := r.o, &r.o.cl
	var err error
	if r.d, err = clusterDeployment(flags, o); err != nil {
		return err
	}
	if r.built, err = r.d.Build(r.rng); err != nil {
		if c.deployment != "" {
			return fmt.Errorf("--deployment: %w", err)
		}
		return deploy.FlagError(err)
	}
	for i, in := range r.built.Pools {
		printModelNotes(stderr, in.Phys.Model)
		prefix := ""
		if len(r.built.Pools) > 1 {
			prefix = "pool " + r.d.Pools[i].Name + ": "
		}
		printWarnings(warn, prefix, in.Warnings)
	}
	cfg := &r.cfg
	*cfg = r.built.Config
	cfg.HorizonUs = int64(math.Round(o.horizonS * 1e6))
	cfg.RecordRequests = o.perRequest
	cfg.CounterfactualK = c.counterfactK
	cfg.Workers = c.workers
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	cfg.WindowUs = r.win.us
	for i := range cfg.Instances {
		cfg.Instances[i].Config.Options.Exhaustive = o.debugInv
	}
	return nil
}

// openOutputs creates every output file before the run, so that an
// unwritable path fails at once; they are written during or after it.
func (r *clusterRun) openOutputs() error {
	o, c := r.o, &r.o.cl
	var err error
	if o.traceFile != "" {
		if r.traceFile, err = r.outs.Create(o.traceFile, "--otlp-trace"); err != nil {
			return err
		}
	}
	if c.traceLevel == "decisions" {
		df, err := r.outs.Create(c.decisionTrace, "--decision-trace")
		if err != nil {
			return err
		}
		r.decisionBuf = bufio.NewWriterSize(df, 1<<20)
		r.cfg.Decisions = r.decisionBuf
	}
	if c.windowOut != "" {
		if r.windowOut, err = r.outs.Create(c.windowOut, "--window-out"); err != nil {
			return err
		}
	}
	if c.windowPlot != "" {
		if r.windowPlot, err = r.outs.Create(c.windowPlot, "--window-plot"); err != nil {
			return err
		}
	}
	return nil
}

// workload sets the request source: a workload spec, a replayed file, or
// the synthetic workload of the flags, and the SLO targets requests with
// a class are scored against.
func (r *clusterRun) workload(flags *pflag.FlagSet) error {
	o := r.o
	var err error
	if r.spec, err = loadSpec(flags, o); err != nil {
		return err
	}
	// Requests that carry an SLO class (a spec's, or a replayed trace's
	// slo_class column) are scored against the spec's targets or the
	// published defaults.
	targets := workload.DefaultSLOTargets()
	if r.spec != nil {
		r.specSrc = workload.NewSource(r.spec, r.rng)
		r.src = r.specSrc
		r.cfg.TenantNames = r.spec.TenantIDs()
		targets = r.spec.SLO
	}
	for cl, t := range targets {
		r.cfg.SLOTargets[cl] = cluster.SLOTarget{TTFTUs: msToUs(t.TTFTMs), TPOTUs: msToUs(t.TPOTMs), E2EUs: msToUs(t.E2EMs)}
	}
	switch {
	case r.spec != nil:
	case o.replay != "":
		// A row is surely refused when it exceeds every pool's context.
		var maxLen int64
		for i, in := range r.built.Pools {
			m := in.Config.Engine.MaxModelLen
			if m == 0 || (i > 0 && maxLen == 0) {
				maxLen = 0 // a pool without a limit serves every row
				break
			}
			maxLen = max(maxLen, m)
		}
		reqs, rep, err := loadReplay(o, maxLen)
		if err != nil {
			return err
		}
		r.src, r.replay, r.offered = cluster.NewSliceSource(reqs), rep, len(reqs)
	default:
		if err := parseWorkload(o); err != nil {
			return err
		}
		g, err := workload.NewGenerator(o.workload, r.rng.Stream(sim.StreamWorkload))
		if err != nil {
			return flagError(err)
		}
		r.gen = workload.NewStream(g)
		r.src, r.offered = r.gen, o.workload.Requests
	}
	return nil
}

// attachTrace gives every instance a trace writer into --otlp-trace, with
// ids derived from the echoed configuration.
func (r *clusterRun) attachTrace(config clusterConfig) error {
	if r.traceFile == nil {
		return nil
	}
	o := r.o
	r.traceBuf = bufio.NewWriterSize(r.traceFile, 1<<20)
	runID, err := traceRunID(config, o)
	if err != nil {
		return err
	}
	for i := range r.cfg.Instances {
		opt := o.traceOpt
		opt.Model = r.built.Pools[poolIndex(r.d, i)].Phys.Model.Name
		opt.InstanceID = r.cfg.Instances[i].ID
		opt.RunID = runID
		w, err := simtrace.NewWriter(r.traceBuf, nil, opt,
			r.rng.Stream(sim.InstanceStream(sim.StreamTraceJourney, i)), r.rng.Stream(sim.InstanceStream(sim.StreamTraceStep, i)))
		if err != nil {
			return err
		}
		r.cfg.Instances[i].Config.Observer = w
		r.writers = append(r.writers, w)
	}
	return nil
}

// finishOutputs closes the trace writers, flushes the buffered outputs,
// writes the windows and renames every output into place.
func (r *clusterRun) finishOutputs(res *cluster.Result) error {
	for _, w := range r.writers {
		if err := w.Close(); err != nil {
			return fmt.Errorf("--otlp-trace: %w", err)
		}
	}
	if r.traceBuf != nil {
		if err := r.traceBuf.Flush(); err != nil {
			return fmt.Errorf("--otlp-trace: %w", err)
		}
	}
	if r.decisionBuf != nil {
		if err := r.decisionBuf.Flush(); err != nil {
			return fmt.Errorf("--decision-trace: %w", err)
		}
	}
	if err := writeWindows(r.win, r.windowOut, r.windowPlot, res.Windows); err != nil {
		return err
	}
	return r.outs.Commit()
}

// printDiagnostics prints the run's warnings (to warn, even under -q) and
// its summary lines (to stderr).
func (r *clusterRun) printDiagnostics(stderr, warn io.Writer, res *cluster.Result, wall time.Duration) {
	for _, in := range res.Instances {
		printWarnings(warn, "", clampWarnings("instance "+in.ID+": ", in.Metrics.StepTimesClamped))
		printDropped(warn, "instance "+in.ID+": ", in.Metrics.Requests.Dropped, in.Metrics.Requests.Offered, in.Metrics.FirstDropped)
	}
	rq := res.Requests
	var first *sim.TooLongRequest
	for _, in := range res.Instances {
		if f := in.Metrics.FirstTooLong; f != nil && (first == nil || f.ID < first.ID) {
			first = f
		}
	}
	printSkipped(warn, r.replay)
	printTooLong(warn, rq.RejectedTooLong, first, r.replay)
	printRaised(stderr, r.gen, r.o.workload.PrefixTokens)
	fmt.Fprintf(stderr, "blis: %d instances, %d of %d requests arrived (%d completed, %d rejected, %d dropped), %.1f s simulated in %.2f s wall (%.1f µs per request)\n",
		len(r.cfg.Instances), rq.Arrived, r.offered, rq.Completed, rq.Rejected, rq.DroppedUnservable, res.DurationS, wall.Seconds(),
		float64(wall.Microseconds())/float64(max(1, rq.Arrived)))
	if r.win.us > 0 {
		fmt.Fprintf(stderr, "blis: %d time windows of %s\n", len(res.Windows), time.Duration(r.win.us)*time.Microsecond)
	}
}

// windowFlags are --window and its outputs, checked.
type windowFlags struct {
	us        int64  // the window, µs (0: none)
	outFormat string // csv or jsonl
	plotFmt   string // png, svg or pdf
}

// parseWindowFlags checks --window, --window-out and --window-plot before
// the run: the duration, the files' extensions, and that each needs the
// other.
func parseWindowFlags(c *clusterOpts) (windowFlags, error) {
	var w windowFlags
	if c.window == "" {
		switch {
		case c.windowOut != "":
			return w, errors.New("--window-out needs --window D, the length of a window (10s, 500ms)")
		case c.windowPlot != "":
			return w, errors.New("--window-plot needs --window D, the length of a window (10s, 500ms)")
		}
		return w, nil
	}
	d, err := time.ParseDuration(c.window)
	switch {
	case err != nil:
		return w, fmt.Errorf("--window %q is not a duration; give a number and a unit, such as 10s, 500ms or 1m", c.window)
	case d <= 0:
		return w, fmt.Errorf("--window must be > 0, got %s", c.window)
	case d%time.Microsecond != 0:
		return w, fmt.Errorf("--window %s is not a whole number of microseconds", c.window)
	case c.windowOut == "" && c.windowPlot == "":
		return w, errors.New("--window needs --window-out FILE (.csv or .jsonl) or --window-plot FILE (.png, .svg or .pdf) to write the windows to")
	}
	w.us = d.Microseconds()
	if c.windowOut != "" {
		if w.outFormat, err = extFormat(c.windowOut, "--window-out", "csv", "jsonl"); err != nil {
			return w, err
		}
	}
	if c.windowPlot != "" {
		if w.plotFmt, err = extFormat(c.windowPlot, "--window-plot", windowplot.Formats...); err != nil {
			return w, err
		}
	}
	return w, nil
}

// extFormat is path's extension, lower case and without the dot, when it
// is one of formats.
func extFormat(path, flag string, formats ...string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if slices.Contains(formats, ext) {
		return ext, nil
	}
	list := "." + formats[len(formats)-1]
	if n := len(formats); n > 1 {
		list = "." + strings.Join(formats[:n-1], ", .") + " or " + list
	}
	return "", fmt.Errorf("%s %s: the extension must be %s", flag, path, list)
}

// writeWindows writes the rows to the open window files (nil: not asked).
func writeWindows(w windowFlags, out, plot *atomicfile.File, rows []cluster.Window) error {
	if out != nil {
		write := cluster.WriteWindowsCSV
		if w.outFormat == "jsonl" {
			write = cluster.WriteWindowsJSONL
		}
		if err := write(out, rows); err != nil {
			return fmt.Errorf("--window-out: %w", err)
		}
	}
	if plot != nil {
		b := bufio.NewWriterSize(plot, 1<<16)
		if err := windowplot.Write(b, rows, w.plotFmt); err != nil {
			return fmt.Errorf("--window-plot: %w", err)
		}
		if err := b.Flush(); err != nil {
			return fmt.Errorf("--window-plot: %w", err)
		}
	}
	return nil
}

// poolIndex is the pool of instance i.
func poolIndex(d *deploy.Deployment, i int) int {
	for p, pool := range d.Pools {
		if i < pool.Replicas {
			return p
		}
		i -= pool.Replicas
	}
	return len(d.Pools) - 1
}

// clusterReport is the JSON a cluster run prints.
type clusterReport struct {
	Tool     string                 `json:"tool"`
	Version  int                    `json:"version"`
	Config   clusterConfig          `json:"config"`
	Workload *workload.ReplayReport `json:"replay,omitempty"`
	Spec     *specReport            `json:"workload_spec,omitempty"`
	Metrics  *cluster.Result        `json:"metrics"`
	Fitness  *cluster.FitnessResult `json:"fitness,omitempty"`
}

// specReport is what a workload spec's tenants sent.
type specReport struct {
	Source  string                 `json:"source"`
	Tenants []workload.TenantStats `json:"tenants"`
}

func msToUs(ms float64) int64 { return int64(math.Round(ms * 1e3)) }

// specWorkloadFlags are the flags a workload spec replaces.
var specWorkloadFlags = []string{"requests", "rate", "arrival", "gamma-cv", "prompt-tokens", "output-tokens",
	"prefix-groups", "prefix-tokens", "prefix-fraction", "replay", "replay-format", "strict"}

// loadSpec is the run's workload spec (--workload-spec or --scenario), or
// nil when the run has none.
func loadSpec(flags *pflag.FlagSet, o *runOpts) (*workload.WorkloadSpec, error) {
	if o.specFile == "" && o.scenario == "" {
		return nil, nil
	}
	if o.specFile != "" && o.scenario != "" {
		return nil, errors.New("give --workload-spec or --scenario, not both")
	}
	for _, f := range specWorkloadFlags {
		if flags.Changed(f) {
			flag := "--workload-spec"
			if o.scenario != "" {
				flag = "--scenario"
			}
			return nil, fmt.Errorf("--%s cannot be combined with %s: the spec describes the workload (print it with --print-spec and edit it)", f, flag)
		}
	}
	if o.scenario != "" {
		s, err := workload.Scenario(o.scenario)
		if err != nil {
			return nil, fmt.Errorf("--scenario: %w", err)
		}
		return s, nil
	}
	s, err := workload.LoadSpec(o.specFile)
	if err != nil {
		return nil, fmt.Errorf("--workload-spec: %w", err)
	}
	return s, nil
}

// printSpec writes the --scenario or --workload-spec file to stdout.
func printSpec(cmd *cobra.Command, o *runOpts) error {
	var data []byte
	var err error
	switch {
	case o.scenario != "" && o.specFile != "":
		return errors.New("give --workload-spec or --scenario, not both")
	case o.scenario != "":
		if data, err = workload.ScenarioText(o.scenario); err != nil {
			return fmt.Errorf("--scenario: %w", err)
		}
	case o.specFile != "":
		if _, err := workload.LoadSpec(o.specFile); err != nil {
			return fmt.Errorf("--workload-spec: %w", err)
		}
		if data, err = os.ReadFile(o.specFile); err != nil {
			return err
		}
	default:
		return errors.New("--print-spec needs --scenario NAME or --workload-spec FILE")
	}
	_, err = cmd.OutOrStdout().Write(data)
	return err
}

type clusterConfig struct {
	Instances     int              `json:"instances"`
	Deployment    string           `json:"deployment,omitempty"`
	Pools         []poolConfig     `json:"pools"`
	Admission     admissionConfig  `json:"admission"`
	Routing       routingConfig    `json:"routing"`
	Observability map[string]int64 `json:"observability_refresh_us"`
	Workload      string           `json:"workload"`
	Seed          int64            `json:"seed"`
	HorizonS      float64          `json:"horizon_s"`
	// WindowUs is --window (absent without it, so that a run's JSON does
	// not change).
	WindowUs int64 `json:"window_us,omitempty"`
}

type poolConfig struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	instanceConfig
}

type admissionConfig struct {
	Policy         string  `json:"policy"`
	BucketCapacity float64 `json:"token_bucket_capacity,omitempty"`
	BucketRefill   float64 `json:"token_bucket_refill_rate,omitempty"`
	LatencyUs      int64   `json:"latency_us"`
}

type routingConfig struct {
	Policy              string `json:"policy"`
	Scorers             string `json:"scorers,omitempty"`
	LatencyUs           int64  `json:"latency_us"`
	PrefixIndexCapacity int    `json:"prefix_index_capacity,omitempty"`
}

func describeCluster(o *runOpts, d *deploy.Deployment, b *deploy.Built) clusterConfig {
	cc := clusterConfig{Instances: d.NumInstances(), Deployment: o.cl.deployment, Workload: describeWorkload(o), Seed: o.seed, HorizonS: o.horizonS,
		Observability: map[string]int64{}}
	for i, p := range d.Pools {
		cc.Pools = append(cc.Pools, poolConfig{Name: p.Name, Replicas: p.Replicas, instanceConfig: describeInstance(&p.Instance, b.Pools[i])})
	}
	a := d.Admission
	cc.Admission = admissionConfig{Policy: a.Policy, LatencyUs: a.LatencyUs}
	if a.Policy == admit.TokenBucketName {
		cc.Admission.BucketCapacity, cc.Admission.BucketRefill = a.TokenBucketCapacity, a.TokenBucketRefillRate
	}
	r := d.Routing
	cc.Routing = routingConfig{Policy: r.Policy, LatencyUs: r.LatencyUs}
	if r.Policy == route.WeightedName {
		ws, _ := route.ParseScorers(r.Scorers)
		cc.Routing.Scorers = route.FormatScorers(ws)
		for _, w := range ws {
			if w.Name == route.PrefixAffinity {
				cc.Routing.PrefixIndexCapacity = r.PrefixIndexCapacity
			}
		}
	}
	for s := cluster.Signal(0); s < cluster.NumSignals; s++ {
		cc.Observability[s.String()] = d.Freshness[s]
	}
	return cc
}
