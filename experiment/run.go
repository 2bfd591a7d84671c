package experiment

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/windowplot"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
	"github.com/blis-sim/blis/steady"
	"sync/atomic"
)

// Result is a run's outcome: the report blis run prints, and what it
// says on stderr.
type Result struct {
	Mode Mode
	// Report is the JSON document: an *InstanceReport or a
	// *ClusterReport.
	Report any
	// Instance and Cluster are the metrics (one of them, by Mode).
	Instance *sim.Result
	Cluster  *cluster.Result
	// Partial is set when the context ended the run early: the metrics
	// are those of a horizon at that moment, and no output was written.
	Partial bool
	// Warnings are what a user must see even when told to be quiet
	// (requests dropped, refused or skipped, coefficients used outside
	// their fit, step times clamped); Notes are diagnostics.
	Warnings, Notes []string

	offered int64
	summary func(wall float64) string
}

// WriteJSON writes the report, indented as blis run prints it.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.Report)
}

// Summary is the run's summary line, with the wall time it took (which
// never enters the report).
func (r *Result) Summary(wallS float64) string { return r.summary(wallS) }

// Run simulates e and returns its result. Outputs the experiment names go
// to sinks (nil: files, written atomically). When ctx ends the run early,
// Run returns the metrics so far marked Partial, aborts the outputs, and
// returns ctx's error beside the result. Errors in values Resolve could
// not check (a model that does not fit its GPU, a tenant a policy names
// that the replayed trace lacks) name where the value came from.
func Run(ctx context.Context, e *Experiment, sinks Sinks) (*Result, error) {
	if sinks == nil {
		sinks = &FileSinks{}
	}
	if err := e.checkFiles(); err != nil {
		return nil, err
	}
	r := &runner{e: e, sinks: sinks, rng: sim.NewRNG(e.Run.Seed), res: &Result{Mode: e.Mode}, progress: progressFrom(ctx)}
	defer func() {
		if !r.committed {
			sinks.Abort()
		}
	}()
	var err error
	if e.Mode == ModeInstance {
		err = r.instance(ctx)
	} else {
		err = r.cluster(ctx)
	}
	if err != nil && !(r.res.Partial && errors.Is(err, ctx.Err())) {
		return nil, err
	}
	if r.res.Partial {
		return r.res, ctx.Err()
	}
	if err := sinks.Commit(); err != nil {
		return nil, err
	}
	r.committed = true
	return r.res, nil
}

type runner struct {
	e         *Experiment
	sinks     Sinks
	rng       sim.RNG
	res       *Result
	committed bool
	closers   []func() error // flush the outputs, in order
	// otlp attaches the OTLP trace writer to instance i's configuration
	// (nil without a trace): for the initial instances and those an
	// autoscaler adds.
	otlp func(i int, id string, pool int, c *sim.Config) error
	// summary is the run's Markdown summary's output (nil without one).
	summary  *bufio.Writer
	progress *Progress // WithProgress's, or nil
	// col is the run's output analysis (experiment/steady.go).
	col *steady.Collector
}

// Progress is how far a run is, readable while it runs (blis run's
// progress line): the requests the workload sent (Sent, of Total when the
// workload has a count, else 0) and the last one's arrival time.
type Progress struct {
	workload.Progress
	Total atomic.Int64
}

type progressKey struct{}

// WithProgress makes Run report its progress to p (synthetic and workload
// spec runs; a replay reports none).
func WithProgress(ctx context.Context, p *Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

func progressFrom(ctx context.Context) *Progress {
	p, _ := ctx.Value(progressKey{}).(*Progress)
	return p
}

// label names key for errors: its flag, file line or key.
func (e *Experiment) label(key string) string {
	if e.draft == nil {
		return key
	}
	l, placed := e.draft.origin(key)
	if placed {
		_, k, _ := cutLast(l)
		return k
	}
	return l
}

func cutLast(l string) (string, string, bool) {
	for i := len(l) - 2; i >= 0; i-- {
		if l[i] == ':' && l[i+1] == ' ' {
			return l[:i], l[i+2:], true
		}
	}
	return "", l, false
}

func (e *Experiment) errAt(err error, keys ...string) error {
	if e.draft == nil {
		return fmt.Errorf("%v: %w", keys, err)
	}
	return e.draft.errAt(err, keys...)
}

// checkFiles refuses an output that is one of the run's inputs or
// another output (internal/atomicfile.Check), before anything is written.
func (e *Experiment) checkFiles() error { return e.CheckFiles() }

// CheckFiles is the run's check of its files (an output that is an input,
// another output, a folder, or in a folder it cannot write) with extra
// outputs the caller writes beside the run's own (blis run's profiles).
func (e *Experiment) CheckFiles(extra ...atomicfile.Named) error {
	var in []atomicfile.Named
	for i, p := range e.Deployment.Pools {
		s := p.Instance
		for _, k := range []struct{ key, path string }{{"model", s.Model}, {"hardware", s.Hardware}, {"latency.coefficients", s.Latency.Coefficients}} {
			in = append(in, atomicfile.Named{Label: e.label(fmt.Sprintf("deployment.pools[%d].%s", i, k.key)), Path: k.path})
		}
	}
	w := &e.Workload
	in = append(in, atomicfile.Named{Label: e.label("workload.spec_file"), Path: w.File})
	if e.draft != nil {
		in = append(in, atomicfile.Named{Label: "--deployment", Path: e.draft.legacy}, atomicfile.Named{Label: "--config", Path: e.draft.config})
	}
	if w.Kind == Replay {
		l := e.label("workload.replay.path")
		in = append(in, atomicfile.Named{Label: l, Path: w.Replay.Path})
		if fi, err := os.Stat(w.Replay.Path); err == nil && fi.IsDir() {
			in = append(in, atomicfile.DirInputs(l, w.Replay.Path)...)
		}
	}
	o := e.Run.Outputs
	var out []atomicfile.Named
	for _, k := range []struct{ key, path string }{
		{"run.outputs.otlp_trace", o.OTLPTrace}, {"run.outputs.kv_events", o.KVEvents}, {"run.outputs.decision_trace", o.DecisionTrace},
		{"run.outputs.window_out", o.WindowOut}, {"run.outputs.window_plot", o.WindowPlot}, {"run.outputs.summary", o.Summary},
	} {
		out = append(out, atomicfile.Named{Label: e.label(k.key), Path: k.path})
	}
	return atomicfile.Check(in, append(out, extra...))
}

// env is what the policies need to know of the experiment.
func (e *Experiment) env(n int) policy.Env {
	env := policy.Env{Instances: max(1, n), QueueDepthRefreshUs: e.Deployment.Router.Freshness[cluster.SigQueueDepth]}
	targets := workload.DefaultSLOTargets()
	if s := e.Workload.Spec; s != nil {
		env.Tenants = s.TenantIDs()
		targets = s.SLO
	}
	for c, t := range targets {
		env.TTFTUs[c], env.E2EUs[c] = msToUs(t.TTFTMs), msToUs(t.E2EMs)
	}
	return env
}

// deployment is e's deployment with the engines' policies built in.
func (r *runner) deployment(env policy.Env) (deploy.Deployment, error) {
	e := r.e
	sched, err := e.Policies.Scheduler.Scheduler()
	if err != nil {
		return deploy.Deployment{}, e.placeSection(policy.Scheduler, err)
	}
	prio, err := e.Policies.Priority.Priority(env)
	if err != nil {
		return deploy.Deployment{}, e.placeSection(policy.Priority, err)
	}
	d := e.Deployment
	d.Pools = append([]deploy.Pool(nil), d.Pools...)
	for i := range d.Pools {
		d.Pools[i].Instance.Policies = sim.Policies{Scheduler: sched, Priority: prio}
	}
	return d, nil
}

func (e *Experiment) placeSection(kind policy.Kind, err error) error {
	if e.draft == nil {
		return fmt.Errorf("policies.%s: %w", kind, err)
	}
	return e.draft.placeSection(kind, err)
}

func (e *Experiment) placeBuild(err error) error {
	var pe *deploy.PoolError
	if errors.As(err, &pe) {
		if e.draft == nil {
			return fmt.Errorf("deployment.pools[%d]: %w", pe.Pool, pe.Err)
		}
		return e.draft.placePool(pe.Pool, pe.Err)
	}
	return err
}

// notes adds what the model configs left out and were assumed, once each.
func (r *runner) notes(pools []*deploy.Instance, names []string) {
	seen := map[string]bool{}
	for i, in := range pools {
		for _, n := range in.Phys.Model.Notes {
			if !seen[n] {
				seen[n] = true
				r.res.Notes = append(r.res.Notes, "note: "+n)
			}
		}
		prefix := ""
		if len(pools) > 1 {
			prefix = "pool " + names[i] + ": "
		}
		if in.RooflineFallback {
			n := fmt.Sprintf("note: the latency model is the roofline: no shipped coefficients were fitted for %s on %s at TP %d (calibrate physics says which configurations have them; --coefficients FILE for the physics model, --latency roofline to choose it)",
				in.Phys.Model.Name, in.Phys.Hardware.Name, in.Phys.TP)
			if !seen[n] {
				seen[n] = true
				r.res.Notes = append(r.res.Notes, prefix+n)
			}
		}
		if c := in.StepCost; c != nil {
			// Which per-step cost the roofline takes, and why (StepCostOf).
			if n := "note: roofline " + c.Why; !seen[prefix+n] {
				seen[prefix+n] = true
				r.res.Notes = append(r.res.Notes, prefix+n)
			}
			for _, w := range c.Warnings {
				if !seen[prefix+w] {
					seen[prefix+w] = true
					r.res.Warnings = append(r.res.Warnings, prefix+w)
				}
			}
		}
		for _, w := range in.Warnings {
			r.res.Warnings = append(r.res.Warnings, prefix+w)
		}
	}
}

// replay reads the trace, noting the rows longer than maxModelLen (0:
// none).
func (r *runner) replay(maxModelLen int64) ([]sim.RequestSpec, *workload.ReplayReport, error) {
	src := r.e.Workload.Replay
	reqs, rep, err := workload.ReplayWith(src.Path, workload.ReplayOptions{Format: src.Format, Strict: src.Strict, MaxModelLen: maxModelLen})
	if err != nil {
		return nil, nil, r.e.errAt(err, "workload.replay.path")
	}
	if err := scaleArrivals(reqs, r.e.Workload.RateScale); err != nil {
		return nil, nil, r.e.errAt(err, "workload.rate_scale")
	}
	if len(reqs) == 0 {
		return nil, nil, r.e.errAt(fmt.Errorf("%s: no usable requests (%d rows)", src.Path, rep.Rows), "workload.replay.path")
	}
	return reqs, &rep, nil
}

// scaleArrivals divides the arrival times by scale (a rate × scale),
// rounded to the µs; order and ids stay.
func scaleArrivals(reqs []sim.RequestSpec, scale float64) error {
	if scale == 1 || scale == 0 {
		return nil
	}
	for i := range reqs {
		at := math.Round(float64(reqs[i].ArrivalUs) / scale)
		if !(at <= float64(sim.MaxTimeUs)) {
			return fmt.Errorf("%v puts request %d's arrival beyond the clock's range (%d µs)", scale, reqs[i].ID, int64(sim.MaxTimeUs))
		}
		reqs[i].ArrivalUs = int64(at)
	}
	return nil
}

// synthetic is the synthetic workload's stream.
func (r *runner) synthetic() (*workload.Stream, error) {
	g, err := workload.NewGenerator(r.e.sizedSynthetic(), r.rng.Stream(sim.StreamWorkload))
	if err != nil {
		return nil, r.e.syntheticErr(err)
	}
	s := workload.NewStream(g)
	if p := r.progress; p != nil {
		s.Watch(&p.Progress)
		p.Total.Store(int64(r.e.Workload.Synthetic.Requests))
	}
	return s, nil
}

func (e *Experiment) syntheticErr(err error) error {
	if e.draft == nil {
		return err
	}
	return e.draft.syntheticErr(err)
}

// create opens an output and buffers it; the buffer is flushed by finish.
func (r *runner) create(key, path string) (*bufio.Writer, error) {
	w, err := r.sinks.Create(key, path)
	if err != nil {
		return nil, err
	}
	b := bufio.NewWriterSize(w, 1<<20)
	return b, nil
}

// finish flushes the outputs in order.
func (r *runner) finish() error {
	for _, c := range r.closers {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// partial notes a run the context ended: err is ctx's error then.
func (r *runner) partial(err error, ctx context.Context) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		r.res.Partial = true
		return nil
	}
	return err
}

func (r *runner) instance(ctx context.Context) error {
	e, res := r.e, r.res
	d, err := r.deployment(e.env(1))
	if err != nil {
		return err
	}
	spec := d.Pools[0].Instance
	in, err := spec.Build(r.rng, 0)
	if err != nil {
		return e.placeBuild(&deploy.PoolError{Pool: 0, Err: err})
	}
	r.notes([]*deploy.Instance{in}, []string{d.Pools[0].Name})
	cfg := in.Config
	cfg.Options = sim.Options{HorizonUs: e.horizonUs(), Exhaustive: e.Run.DebugInvariants, RecordRequests: e.Run.PerRequest}
	var src sim.Source
	var gen *workload.Stream
	var rep *workload.ReplayReport
	switch e.Workload.Kind {
	case Requests:
		reqs := slices.Clone(e.Workload.Requests)
		if err := scaleArrivals(reqs, e.Workload.RateScale); err != nil {
			return e.errAt(err, "workload.rate_scale")
		}
		src, res.offered = sim.SliceSource(reqs), int64(len(reqs))
	case Replay:
		reqs, rp, err := r.replay(in.Config.Engine.MaxModelLen)
		if err != nil {
			return err
		}
		src, rep, res.offered = sim.SliceSource(reqs), rp, int64(len(reqs))
	default:
		if gen, err = r.synthetic(); err != nil {
			return err
		}
		src, res.offered = gen, int64(e.Workload.Synthetic.Requests)
	}
	o := e.Run.Outputs
	if o.KVEvents != "" && spec.VLLM.TotalKVBlocksCPU <= 0 {
		return e.errAt(errors.New("needs CPU KV blocks (vllm.total_kv_blocks_cpu > 0) and run.outputs.otlp_trace"), "run.outputs.kv_events")
	}
	config := e.echoInstanceRun(in)
	var tw *simtrace.Writer
	if o.OTLPTrace != "" {
		tb, err := r.create("run.outputs.otlp_trace", o.OTLPTrace)
		if err != nil {
			return err
		}
		var kvw io.Writer
		var kvb *bufio.Writer
		if o.KVEvents != "" {
			if kvb, err = r.create("run.outputs.kv_events", o.KVEvents); err != nil {
				return err
			}
			kvw = kvb
		}
		opt := e.Run.OTLP
		opt.Model = in.Phys.Model.Name
		if opt.RunID, err = e.traceRunID(config); err != nil {
			return err
		}
		if tw, err = simtrace.NewWriter(tb, kvw, opt, r.rng.Stream(sim.StreamTraceJourney), r.rng.Stream(sim.StreamTraceStep)); err != nil {
			return err
		}
		cfg.Observer = tw
		r.closers = append(r.closers, tw.Close, tb.Flush)
		if kvb != nil {
			r.closers = append(r.closers, kvb.Flush)
		}
	}
	s, err := sim.NewStream(cfg, src)
	if err != nil {
		return err
	}
	s.Analyze(r.collector(nil))
	m, err := s.RunContext(ctx)
	if err = r.partial(err, ctx); err != nil {
		return err
	}
	if gen != nil && gen.Err() != nil {
		return e.syntheticErr(gen.Err())
	}
	if err := r.finish(); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	res.Instance = m
	if e.Run.Precision > 0 {
		res.offered = m.Requests.Offered // what arrived before the stop
	}
	res.Report = &InstanceReport{Tool: "blis run", Version: 1, Partial: res.Partial, Config: config, Metrics: m, Workload: rep}
	r.instanceDiagnostics(m, rep, gen, tw)
	return nil
}

func (r *runner) cluster(ctx context.Context) error {
	e, res := r.e, r.res
	n := e.Deployment.NumInstances()
	env := e.env(n)
	d, err := r.deployment(env)
	if err != nil {
		return err
	}
	built, err := d.Build(r.rng)
	if err != nil {
		return e.placeBuild(err)
	}
	var names []string
	for _, p := range d.Pools {
		names = append(names, p.Name)
	}
	r.notes(built.Pools, names)
	cfg := built.Config
	cfg.HorizonUs = e.horizonUs()
	cfg.RecordRequests = e.Run.PerRequest
	cfg.CounterfactualK = e.Run.CounterfactualK
	if err := r.analysis(&cfg); err != nil {
		return err
	}
	cfg.Workers = e.Run.Workers
	cfg.WindowUs = e.Run.WindowUs
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	for i := range cfg.Instances {
		cfg.Instances[i].Config.Options.Exhaustive = e.Run.DebugInvariants
	}
	if cfg.Admission, err = e.Policies.Admission.Admission(env); err != nil {
		return e.placeSection(policy.Admission, err)
	}
	if cfg.Routing, err = e.Policies.Routing.Routing(env); err != nil {
		return e.placeSection(policy.Routing, err)
	}
	if e.Disaggregated() {
		if cfg.Disagg, err = disaggregation(e, &d, built, env); err != nil {
			return err
		}
	}
	// The workload, and the SLO targets requests with a class are scored
	// against: a spec's, or the published defaults.
	targets := workload.DefaultSLOTargets()
	var src cluster.Source
	var gen *workload.Stream
	var specSrc *workload.Source
	var rep *workload.ReplayReport
	switch w := &e.Workload; w.Kind {
	case Requests:
		reqs := slices.Clone(w.Requests)
		if err := scaleArrivals(reqs, w.RateScale); err != nil {
			return e.errAt(err, "workload.rate_scale")
		}
		src, res.offered = cluster.NewSliceSource(reqs), int64(len(reqs))
	case Replay:
		// A row is surely refused when it exceeds every pool's context.
		var maxLen int64
		for i, in := range built.Pools {
			m := in.Config.Engine.MaxModelLen
			if m == 0 || (i > 0 && maxLen == 0) {
				maxLen = 0 // a pool without a limit serves every row
				break
			}
			maxLen = max(maxLen, m)
		}
		reqs, rp, err := r.replay(maxLen)
		if err != nil {
			return err
		}
		src, rep, res.offered = cluster.NewSliceSource(reqs), rp, int64(len(reqs))
	case Synthetic:
		if gen, err = r.synthetic(); err != nil {
			return err
		}
		src, res.offered = gen, int64(w.Synthetic.Requests)
	default:
		specSrc = workload.NewSource(e.sizedSpec(), r.rng)
		src = specSrc
		if p := r.progress; p != nil {
			specSrc.Watch(&p.Progress)
			p.Total.Store(w.Spec.Requests)
		}
		cfg.TenantNames = w.Spec.TenantIDs()
		targets = w.Spec.SLO
	}
	for c, t := range targets {
		cfg.SLOTargets[c] = cluster.SLOTarget{TTFTUs: msToUs(t.TTFTMs), TPOTUs: msToUs(t.TPOTMs), E2EUs: msToUs(t.E2EMs)}
	}
	if err := r.scaling(&cfg, &d, built); err != nil {
		return err
	}
	config := e.echoCluster(built)
	if err := r.clusterOutputs(&cfg, built, config); err != nil {
		return err
	}
	var ids []string
	for _, in := range cfg.Instances {
		ids = append(ids, in.ID)
	}
	cfg.Analysis = r.collector(ids)
	cs, err := cluster.New(cfg, src)
	if err != nil {
		return err
	}
	m, err := cs.RunContext(ctx)
	if errors.Is(err, cluster.ErrTooManyWindows) {
		return e.errAt(err, "run.window")
	}
	if err = r.partial(err, ctx); err != nil {
		return err
	}
	if gen != nil && gen.Err() != nil {
		return e.syntheticErr(gen.Err())
	}
	if specSrc != nil && specSrc.Err() != nil {
		return e.errAt(specSrc.Err(), "workload."+string(e.Workload.Kind))
	}
	if err := r.finish(); err != nil {
		return err
	}
	if err := r.writeWindows(m.Windows); err != nil {
		return err
	}
	out := &ClusterReport{Tool: "blis run", Version: 1, Partial: res.Partial, Config: config, Workload: rep, Metrics: m}
	if specSrc != nil {
		out.Spec = &SpecReport{Source: e.Workload.Spec.Source, Tenants: specSrc.Stats()}
		res.offered = specSrc.Sent()
	}
	if e.Run.Precision > 0 {
		res.offered = m.Requests.Arrived // what arrived before the stop
	}
	if len(e.Run.Fitness) > 0 {
		fr := cluster.Fitness(m, e.Run.Fitness)
		out.Fitness = &fr
	}
	res.Cluster, res.Report = m, out
	r.clusterDiagnostics(m, rep, gen, len(cfg.Instances))
	return r.writeSummary(m)
}

// clusterOutputs opens the decision trace and the OTLP trace (every
// instance writes into it, with ids from the echoed configuration).
func (r *runner) clusterOutputs(cfg *cluster.Config, built *deploy.Built, config ClusterConfig) error {
	e, o := r.e, r.e.Run.Outputs
	if e.Run.TraceLevel != TraceNone {
		b, err := r.create("run.outputs.decision_trace", o.DecisionTrace)
		if err != nil {
			return err
		}
		cfg.Decisions = b
		r.closers = append(r.closers, flushAs(b, e.label("run.outputs.decision_trace")))
	}
	if o.Summary != "" { // created before the run, written after it (writeSummary)
		b, err := r.create("run.outputs.summary", o.Summary)
		if err != nil {
			return err
		}
		r.summary = b
	}
	if o.OTLPTrace == "" {
		return nil
	}
	tb, err := r.create("run.outputs.otlp_trace", o.OTLPTrace)
	if err != nil {
		return err
	}
	runID, err := e.traceRunID(config)
	if err != nil {
		return err
	}
	var writers []func() error
	r.otlp = func(i int, id string, pool int, c *sim.Config) error {
		opt := e.Run.OTLP
		opt.Model = built.Pools[pool].Phys.Model.Name
		opt.InstanceID = id
		opt.RunID = runID
		w, err := simtrace.NewWriter(tb, nil, opt,
			r.rng.Stream(sim.InstanceStream(sim.StreamTraceJourney, i)), r.rng.Stream(sim.InstanceStream(sim.StreamTraceStep, i)))
		if err != nil {
			return err
		}
		c.Observer = w
		writers = append(writers, w.Close)
		return nil
	}
	for i := range cfg.Instances {
		if err := r.otlp(i, cfg.Instances[i].ID, e.Deployment.PoolOf(i), &cfg.Instances[i].Config); err != nil {
			return err
		}
	}
	label := e.label("run.outputs.otlp_trace")
	// The trace writers close before the decision trace flushes, as they
	// always have; each names its output on failure.
	r.closers = append(append([]func() error{}, func() error {
		for _, c := range writers {
			if err := c(); err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
		}
		return nil
	}, flushAs(tb, label)), r.closers...)
	return nil
}

func flushAs(b *bufio.Writer, label string) func() error {
	return func() error {
		if err := b.Flush(); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		return nil
	}
}

// writeWindows writes the time windows to their outputs.
func (r *runner) writeWindows(rows []cluster.Window) error {
	e, o := r.e, r.e.Run.Outputs
	if o.WindowOut != "" {
		b, err := r.create("run.outputs.window_out", o.WindowOut)
		if err != nil {
			return err
		}
		write := cluster.WriteWindowsCSV
		if f, _ := extFormat(o.WindowOut, "csv", "jsonl"); f == "jsonl" {
			write = cluster.WriteWindowsJSONL
		}
		if err := write(b, rows); err != nil {
			return e.errAt(err, "run.outputs.window_out")
		}
		if err := flushAs(b, e.label("run.outputs.window_out"))(); err != nil {
			return err
		}
	}
	if o.WindowPlot != "" {
		b, err := r.create("run.outputs.window_plot", o.WindowPlot)
		if err != nil {
			return err
		}
		f, _ := extFormat(o.WindowPlot, windowplot.Formats...)
		if err := windowplot.Write(b, rows, f); err != nil {
			return e.errAt(err, "run.outputs.window_plot")
		}
		if err := flushAs(b, e.label("run.outputs.window_plot"))(); err != nil {
			return err
		}
	}
	return nil
}

// scaling sets up the fleet: every pool's nodes, start-up, drain and
// price, and its autoscaler when the bundle has one (the instances are
// then numbered for the autoscaler, cluster.ScaledInstanceID). A fixed
// fleet runs the same accounting (replica-hours, GPU-hours, cost).
func (r *runner) scaling(cfg *cluster.Config, d *deploy.Deployment, built *deploy.Built) error {
	e := r.e
	a, err := e.Policies.Autoscale.Autoscale()
	if err != nil {
		return e.placeSection(policy.Autoscale, err)
	}
	sc := &cluster.Scaling{WaitTimeoutUs: d.Router.CapacityWaitTimeoutUs, RNG: r.rng}
	for i := range d.Pools {
		p := &d.Pools[i]
		ps := p.Scaling(built.Pools[i])
		if a.New != nil {
			ps.Policy, ps.IntervalUs = a.New(), a.IntervalUs
			ps.Min, ps.Max = p.Fleet.MinReplicas, p.Fleet.MaxReplicas
		} else if p.Fleet.MaxGiven || p.Fleet.MinReplicas != min(1, p.Replicas) {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("note: pool %s: min_replicas and max_replicas have no effect without an autoscaler (policies.autoscale is none)", p.Name))
		}
		sc.Pools = append(sc.Pools, ps)
	}
	if a.New != nil {
		for i := range cfg.Instances {
			cfg.Instances[i].ID = cluster.ScaledInstanceID(i)
		}
	}
	exhaustive := e.Run.DebugInvariants
	templates := make([]*deploy.Instance, len(d.Pools)) // built once a pool
	sc.NewInstance = func(pool, index int) (sim.Config, error) {
		if templates[pool] == nil {
			t, err := d.Pools[pool].Instance.Template()
			if err != nil {
				return sim.Config{}, err
			}
			templates[pool] = t
		}
		c := templates[pool].At(r.rng, index).Config
		c.Options.Exhaustive = exhaustive
		if r.otlp != nil {
			if err := r.otlp(index, cluster.ScaledInstanceID(index), pool, &c); err != nil {
				return sim.Config{}, err
			}
		}
		return c, nil
	}
	cfg.Scaling = sc
	return nil
}

// disaggregation is the cluster's prefill/decode split: the decider and
// prefill router of the bundle's section, every pool's role and links.
func disaggregation(e *Experiment, d *deploy.Deployment, built *deploy.Built, env policy.Env) (*cluster.Disagg, error) {
	dz, err := e.Policies.Disaggregation.Disaggregation(env, e.Policies.Routing)
	if err != nil {
		return nil, e.placeSection(policy.Disaggregation, err)
	}
	pools, err := d.PDPools(built)
	if err != nil {
		return nil, e.placeBuild(err)
	}
	n := d.Network
	return &cluster.Disagg{Pools: pools, Decider: dz.Decider, Prefill: dz.Prefill, LatencyUs: n.LatencyUs, AbortTimeoutUs: n.AbortTimeoutUs}, nil
}
