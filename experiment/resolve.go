package experiment

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/cluster/windowplot"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
	"github.com/blis-sim/blis/summary"
)

// Resolve fills every default and checks every key; errors name where
// the value at fault came from.
func (d *Draft) Resolve() (*Experiment, error) {
	e := &Experiment{draft: d}
	f := &d.f
	if err := d.resolveDeployment(e); err != nil {
		return nil, err
	}
	if err := d.resolveWorkload(e); err != nil {
		return nil, err
	}
	if err := d.resolvePolicies(e); err != nil {
		return nil, err
	}
	if err := d.resolveRun(e); err != nil {
		return nil, err
	}
	if err := d.resolveMode(e); err != nil {
		return nil, err
	}
	_ = f
	if err := d.checkDataParallel(e); err != nil {
		return nil, err
	}
	if err := d.checkScaling(e); err != nil {
		return nil, err
	}
	if err := d.checkPrecision(e); err != nil {
		return nil, err
	}
	if err := d.checkDisaggregation(e); err != nil {
		return nil, err
	}
	return e, d.checkInstances(e)
}

// checkInstances builds each pool's first instance (its model and GPU,
// the KV cache, the latency model: milliseconds, no simulation), so that
// a setting the engine refuses is an error here, before any run.
func (d *Draft) checkInstances(e *Experiment) error {
	store := -1 // the first pool linked to the store
	var storeTiers sim.KVTiers
	var storeBlock int64
	for i, p := range e.Deployment.Pools {
		in, err := p.Instance.Build(sim.NewRNG(e.Run.Seed), 0)
		if err != nil {
			return d.placePool(i, err)
		}
		// The engine refuses a latency model whose step times are out of
		// the clock's range on this configuration; checked here, the
		// error names the pool's latency keys rather than an instance.
		if err := sim.CheckLatency(in.Config.Latency, &in.Config.Engine); err != nil {
			return d.errAt(err, d.latencyKey(i))
		}
		// Instances sharing a store hold one model's KV at one block
		// size (the cluster refuses others naming an instance).
		if t := in.Config.Engine.Tiers; e.Deployment.KVStore != nil && p.Instance.Tiers.Store != nil {
			if store < 0 {
				store, storeTiers, storeBlock = i, t, in.Config.Engine.BlockSizeTokens
			} else if bt := in.Config.Engine.BlockSizeTokens; bt != storeBlock || t.BlockBytes != storeTiers.BlockBytes {
				return d.errf("deployment.kv_store", "pools %s and %s share the store but their KV blocks differ (%d tokens of %d bytes, %d tokens of %d bytes): pools sharing a store must hold the same model's KV at the same block size",
					clip.String(e.Deployment.Pools[store].Name), clip.String(p.Name), storeBlock, storeTiers.BlockBytes, bt, t.BlockBytes)
			}
		}
		// A store that cannot hold one of a linked pool's blocks would
		// silently do nothing (a disk tier refuses the same).
		if ks, t := e.Deployment.KVStore, in.Config.Engine.Tiers; ks != nil && p.Instance.Tiers.Store != nil && units.GBToBytes(ks.CapacityGB) < t.BlockBytes {
			return d.errf("deployment.kv_store.capacity_gb", "%v GB holds no KV block of pool %s (%d bytes)", ks.CapacityGB, p.Name, t.BlockBytes)
		}
	}
	return nil
}

// latencyKey is the key to name when pool i's latency model is out of
// range: a coefficient a flag or --set gave (not the model's name or its
// noise), else the first given key of the section, else the section.
func (d *Draft) latencyKey(i int) string {
	prefix := fmt.Sprintf("deployment.pools[%d].latency", i)
	for _, m := range []map[string]string{d.flags, d.sets} {
		best := ""
		for k := range m {
			if strings.HasPrefix(k, prefix+".") && k != prefix+".model" && k != prefix+".noise" && (best == "" || k < best) {
				best = k
			}
		}
		if best != "" {
			return best
		}
	}
	return d.firstGiven(prefix)
}

func (d *Draft) resolveDeployment(e *Experiment) error {
	dp := d.f.Deployment
	if dp == nil {
		dp = &deploymentYAML{}
	}
	pools := dp.Pools
	if len(pools) == 0 {
		pools = []deploy.PoolYAML{{}}
	}
	total, totalMax := 0, 0
	for i := range pools {
		p, err := pools[i].Pool(i, "")
		if err != nil {
			return d.placePool(i, err)
		}
		for _, o := range e.Deployment.Pools {
			if o.Name == p.Name {
				return d.errf(fmt.Sprintf("deployment.pools[%d].name", i), "pool name %q is used twice", clip.String(p.Name))
			}
		}
		total += p.Replicas
		if total > deploy.MaxInstances {
			return d.errf(fmt.Sprintf("deployment.pools[%d].replicas", i), "the deployment has more than %d instances", deploy.MaxInstances)
		}
		if totalMax += p.Fleet.MaxReplicas; totalMax > deploy.MaxInstances {
			return d.errf(fmt.Sprintf("deployment.pools[%d].max_replicas", i), "the pools' max_replicas add up to %d, more than the %d instances a deployment may hold", totalMax, deploy.MaxInstances)
		}
		p.Instance.DP = max(1, p.Instance.DP)
		if v := pools[i].VLLM; v != nil && v.OffloadThreshold != nil && p.Instance.VLLM.TotalKVBlocksCPU == 0 {
			return d.errf(fmt.Sprintf("deployment.pools[%d].vllm.offload_threshold", i), "has no effect without a CPU KV tier (%s > 0)",
				d.name(fmt.Sprintf("deployment.pools[%d].vllm.total_kv_blocks_cpu", i)))
		}
		e.Deployment.Pools = append(e.Deployment.Pools, p)
	}
	if ky := dp.KVStore; ky != nil {
		ks, err := ky.Spec()
		if err != nil {
			var fe *deploy.FieldError
			if errors.As(err, &fe) {
				return d.errAt(fe.Err, "deployment."+fe.Fields[0])
			}
			return d.errAt(err, "deployment.kv_store")
		}
		e.Deployment.KVStore = ks
	}
	if err := e.Deployment.LinkStore(); err != nil {
		var pe *deploy.PoolError
		if errors.As(err, &pe) {
			return d.placePool(pe.Pool, pe.Err)
		}
		return err
	}
	if err := d.resolveNetwork(e, dp.Network); err != nil {
		return err
	}
	r := &e.Deployment.Router
	r.CapacityWaitTimeoutUs = deploy.DefaultCapacityWaitTimeoutUs
	if ry := dp.Router; ry != nil {
		// Every value is within its key's range (deploy.RouterKeys: every
		// duration bounded by sim.MaxDurationUs, so that the clock plus it
		// cannot overflow; a positive time at least 1 µs).
		if w := ry.CapacityWaitTimeoutS; w != nil {
			r.CapacityWaitTimeoutUs = units.SecondsToUs(*w)
		}
		set(&r.AdmissionLatencyUs, ry.AdmissionLatencyUs)
		set(&r.RoutingLatencyUs, ry.RoutingLatencyUs)
		if s := ry.SnapshotRefreshUs; s != nil {
			for i, v := range s.signals() {
				set(&r.Freshness[i], *v)
			}
		}
	}
	return nil
}

func (d *Draft) resolveWorkload(e *Experiment) error {
	w := &e.Workload
	wy := d.f.Workload
	if wy == nil {
		wy = &workloadYAML{}
	}
	// Ordered so that a message names a spec last ("--rate cannot be
	// combined with --scenario").
	var given []string
	if wy.Synthetic != nil {
		given = append(given, "workload.synthetic")
	}
	if wy.Replay != nil {
		given = append(given, "workload.replay")
	}
	if wy.Spec.Kind != 0 {
		given = append(given, "workload.spec")
	}
	if wy.SpecFile != nil {
		given = append(given, "workload.spec_file")
	}
	if wy.Scenario != nil {
		given = append(given, "workload.scenario")
	}
	w.RateScale = deref(wy.RateScale, 1)
	if len(given) > 1 {
		a, b := d.given(given[0]), d.given(given[1])
		return &Error{Msg: fmt.Sprintf("%s cannot be combined with %s: an experiment has one workload (synthetic, spec, spec_file, scenario or replay)", a, b),
			Keys: given, Err: errors.New("more than one workload")}
	}
	switch {
	case wy.Spec.Kind != 0:
		node := wy.Spec
		w.Kind, w.Node = SpecNode, &node
		src := d.config
		if src == "" {
			src = "experiment"
		}
		s, err := workload.ParseSpecNode(&node, src, "workload.spec")
		if err != nil {
			return err
		}
		// The report names the key, not the file: the same experiment
		// from a file, a built-in or flags reports the same.
		s.Source = "workload.spec"
		w.Spec = s.Scaled(w.RateScale)
	case wy.SpecFile != nil:
		w.Kind, w.File = SpecFile, *wy.SpecFile
		s, err := workload.LoadSpec(w.File)
		if err != nil {
			return d.errAt(err, "workload.spec_file")
		}
		w.Spec = s.Scaled(w.RateScale)
	case wy.Scenario != nil:
		w.Kind, w.Scenario = Scenario, *wy.Scenario
		if IsScenario(w.Scenario) {
			return d.errf("workload.scenario", "%s is a built-in experiment (a deployment and policies too), not a workload: run it with blis run --scenario %s, or start a file from blis run --scenario %s --print-config", w.Scenario, w.Scenario, w.Scenario)
		}
		if !slices.Contains(workload.Scenarios(), w.Scenario) {
			// Name every name --scenario takes: the built-in experiments too.
			return d.errf("workload.scenario", "no scenario %q; the workload scenarios are %s, and --scenario also takes the built-in experiments %s",
				clip.String(w.Scenario), strings.Join(workload.Scenarios(), ", "), strings.Join(Scenarios(), ", "))
		}
		s, err := workload.Scenario(w.Scenario)
		if err != nil {
			return d.errAt(err, "workload.scenario")
		}
		w.Spec = s.Scaled(w.RateScale)
	case wy.Replay != nil:
		w.Kind = Replay
		r := wy.Replay
		if r.Path == nil || *r.Path == "" {
			return d.errf("workload.replay.path", "give the trace to replay")
		}
		w.Replay = ReplaySource{Path: *r.Path, Format: deref(r.Format, workload.FormatAuto), Strict: deref(r.Strict, false)}
		if !slices.Contains(workload.ReplayFormats(), w.Replay.Format) {
			return d.errf("workload.replay.format", "%q is not a format; use one of %s", clip.String(w.Replay.Format), strings.Join(workload.ReplayFormats(), ", "))
		}
	default:
		return d.resolveSynthetic(w, wy.Synthetic)
	}
	return nil
}

func (d *Draft) resolveSynthetic(w *Workload, y *syntheticYAML) error {
	if y == nil {
		y = &syntheticYAML{}
	}
	w.Kind = Synthetic
	s := &w.Synthetic
	s.Requests = deref(y.Requests, 1000)
	w.Rate = deref(y.Rate, 8)
	s.Rate = w.Rate * w.RateScale
	s.Arrival = deref(y.Arrival, workload.ArrivalPoisson)
	s.GammaCV = deref(y.GammaCV, 2)
	s.PrefixGroups = deref(y.PrefixGroups, 8)
	s.PrefixTokens = deref(y.PrefixTokens, 512)
	s.PrefixFraction = deref(y.PrefixFraction, 0.5)
	w.PromptDist = deref(y.PromptTokens, defaultPrompt)
	w.OutputDist = deref(y.OutputTokens, defaultOutput)
	var err error
	if s.Prompt, err = workload.ParseDist(w.PromptDist); err != nil {
		return d.errAt(err, "workload.synthetic.prompt_tokens")
	}
	if s.Output, err = workload.ParseDist(w.OutputDist); err != nil {
		return d.errAt(err, "workload.synthetic.output_tokens")
	}
	if err := s.Validate(); err != nil {
		return d.syntheticErr(err)
	}
	// Keys that have no effect with the others' values.
	switch {
	case y.GammaCV != nil && s.Arrival != workload.ArrivalGamma:
		return d.errf("workload.synthetic.gamma_cv", "has no effect with %s arrivals (it shapes gamma ones)", s.Arrival)
	case s.PrefixGroups == 0 && y.PrefixTokens != nil:
		return d.errf("workload.synthetic.prefix_tokens", "has no effect with %s 0", d.name("workload.synthetic.prefix_groups"))
	case s.PrefixGroups == 0 && y.PrefixFraction != nil:
		return d.errf("workload.synthetic.prefix_fraction", "has no effect with %s 0", d.name("workload.synthetic.prefix_groups"))
	}
	return nil
}

// syntheticErr places a workload.Spec error, which names the field by
// its flag spelling ("rate must be > 0").
func (d *Draft) syntheticErr(err error) error {
	if errors.Is(err, workload.ErrArrivalOverflow) {
		return d.errAt(err, "workload.synthetic.rate", "workload.synthetic.requests")
	}
	msg := err.Error()
	for _, f := range []string{"requests", "rate", "arrival", "gamma-cv", "prompt-tokens", "output-tokens", "prefix-groups", "prefix-tokens", "prefix-fraction"} {
		field := strings.ReplaceAll(f, "-", "_")
		for _, name := range []string{f, field} {
			if rest, ok := strings.CutPrefix(msg, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ":")) {
				return d.errAt(errors.New(strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " ")), "workload.synthetic."+field)
			}
		}
	}
	return d.errAt(err, "workload.synthetic")
}

func (d *Draft) resolvePolicies(e *Experiment) error {
	e.Policies = policy.DefaultBundle()
	p := d.f.Policies
	if p == nil {
		return nil
	}
	for i, r := range p.Raws() {
		if r == nil {
			continue
		}
		kind := policy.Kinds[i]
		raw := *r
		if raw.Type == "" {
			// Parameters alone (a flag's): the section's default template.
			raw.Type = policy.Names(kind)[0]
		}
		s, err := policy.ParseSection(kind, raw)
		if err != nil {
			return d.placeSection(kind, err)
		}
		*e.Policies.Section(kind) = s
	}
	return nil
}

func (d *Draft) resolveRun(e *Experiment) error {
	ry := d.f.Run
	if ry == nil {
		ry = &runYAML{}
	}
	r := &e.Run
	r.Seed = deref(ry.Seed, 42)
	r.HorizonS = deref(ry.HorizonS, 0) // within sim.MaxTimeUs and at least 1 µs when > 0 (its key)
	r.PerRequest = deref(ry.PerRequest, false)
	r.DebugInvariants = deref(ry.DebugInvariants, false)
	r.Workers = deref(ry.Workers, 0)
	r.TraceLevel = TraceLevel(deref(ry.TraceLevel, string(TraceNone)))
	r.CounterfactualK = deref(ry.CounterfactualK, 3)
	if err := d.resolveAnalysis(r, ry); err != nil {
		return err
	}
	if err := d.resolveSteady(r, ry); err != nil {
		return err
	}
	if n := &ry.FitnessWeights; n.Kind != 0 {
		text, err := weightsText(n)
		if err != nil {
			return d.errAt(err, "run.fitness_weights")
		}
		if r.Fitness, err = cluster.ParseFitnessWeights(text); err != nil {
			return d.errAt(err, "run.fitness_weights")
		}
	}
	out := ry.Outputs
	if out == nil {
		out = &outputsYAML{}
	}
	r.Outputs = Outputs{OTLPTrace: deref(out.OTLPTrace, ""), KVEvents: deref(out.KVEvents, ""), DecisionTrace: deref(out.DecisionTrace, ""),
		WindowOut: deref(out.WindowOut, ""), WindowPlot: deref(out.WindowPlot, ""), Summary: deref(out.Summary, "")}
	if err := d.resolveWindow(r); err != nil {
		return err
	}
	switch {
	case r.TraceLevel != TraceNone && r.Outputs.DecisionTrace == "":
		return d.errf("run.trace_level", "%s needs %s FILE", r.TraceLevel, d.name("run.outputs.decision_trace"))
	case r.TraceLevel == TraceNone && r.Outputs.DecisionTrace != "":
		return d.errf("run.outputs.decision_trace", "needs %s decisions or detailed", d.name("run.trace_level"))
	case ry.CounterfactualK != nil && r.TraceLevel == TraceNone && r.CounterfactualSample == "":
		return d.errf("run.counterfactual_k", "has no effect without %s decisions or detailed (it sizes the decision trace's candidate lists) or %s (the alternatives simulated)",
			d.name("run.trace_level"), d.name("run.counterfactual_sample"))
	case r.CounterfactualSample != "" && r.CounterfactualK < 1:
		return d.errf("run.counterfactual_k", "must be >= 1 with %s: it is the number of alternatives simulated", d.name("run.counterfactual_sample"))
	case ry.SummaryMaxTokens != nil && r.Outputs.Summary == "":
		return d.errf("run.summary_max_tokens", "has no effect without %s FILE", d.name("run.outputs.summary"))
	case r.Outputs.KVEvents != "" && r.Outputs.OTLPTrace == "":
		return d.errf("run.outputs.kv_events", "needs %s (and CPU KV blocks)", d.name("run.outputs.otlp_trace"))
	}
	return d.resolveOTLP(r, ry.OTLP)
}

// weightsText is a fitness weights mapping as "key:weight,...".
func weightsText(n *yaml.Node) (string, error) {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return "", fmt.Errorf("must be a mapping of metric: weight")
	}
	var parts []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		parts = append(parts, n.Content[i].Value+":"+n.Content[i+1].Value)
	}
	return strings.Join(parts, ","), nil
}

func (d *Draft) resolveWindow(r *RunOptions) error {
	wy := d.f.Run
	if wy == nil || wy.Window == nil || *wy.Window == "" {
		switch {
		case r.Outputs.WindowOut != "":
			return d.errf("run.outputs.window_out", "needs %s D, the length of a window (10s, 500ms)", d.name("run.window"))
		case r.Outputs.WindowPlot != "":
			return d.errf("run.outputs.window_plot", "needs %s D, the length of a window (10s, 500ms)", d.name("run.window"))
		}
		return nil
	}
	r.Window = *wy.Window
	dur, err := time.ParseDuration(r.Window)
	switch {
	case err != nil && durationShape.MatchString(strings.TrimSpace(r.Window)):
		return d.errf("run.window", "%s is beyond the clock's %d µs", clip.String(r.Window), int64(sim.MaxTimeUs))
	case err != nil:
		return d.errf("run.window", "%q is not a duration; give a number and a unit, such as 10s, 500ms or 1m", clip.String(r.Window))
	case dur <= 0:
		return d.errf("run.window", "must be > 0, got %s", r.Window)
	case dur%time.Microsecond != 0:
		return d.errf("run.window", "%s is not a whole number of microseconds", r.Window)
	case r.Outputs.WindowOut == "" && r.Outputs.WindowPlot == "":
		return d.errf("run.window", "needs %s FILE (.csv or .jsonl) or %s FILE (.png, .svg or .pdf) to write the windows to", d.name("run.outputs.window_out"), d.name("run.outputs.window_plot"))
	}
	r.WindowUs = dur.Microseconds()
	if p := r.Outputs.WindowOut; p != "" {
		if _, err := extFormat(p, "csv", "jsonl"); err != nil {
			return d.errAt(err, "run.outputs.window_out")
		}
	}
	if p := r.Outputs.WindowPlot; p != "" {
		if _, err := extFormat(p, windowplot.Formats...); err != nil {
			return d.errAt(err, "run.outputs.window_plot")
		}
	}
	return nil
}

// extFormat is path's extension, lower case and without the dot, when it
// is one of formats.
func extFormat(path string, formats ...string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if slices.Contains(formats, ext) {
		return ext, nil
	}
	list := "." + formats[len(formats)-1]
	if n := len(formats); n > 1 {
		list = "." + strings.Join(formats[:n-1], ", .") + " or " + list
	}
	return "", fmt.Errorf("%s: the extension must be %s", path, list)
}

func (d *Draft) resolveOTLP(r *RunOptions, y *otlpYAML) error {
	def := simtrace.DefaultOptions()
	if y == nil {
		y = &otlpYAML{}
	}
	if r.Outputs.OTLPTrace == "" {
		if *y != (otlpYAML{}) {
			return d.errf(d.firstGiven("run.otlp"), "has no effect without %s FILE", d.name("run.outputs.otlp_trace"))
		}
		return nil
	}
	o := &r.OTLP
	o.JourneySampleRate = deref(y.JourneySampleRate, def.JourneySampleRate)
	o.StepSampleRate = deref(y.StepSampleRate, def.StepSampleRate)
	o.RichSubsampleRate = deref(y.RichSubsampleRate, def.RichSubsampleRate)
	o.ClosureInterval = deref(y.ClosureInterval, def.ClosureInterval)
	o.MaxEventsPerSpan = deref(y.MaxEventsPerSpan, def.MaxEventsPerSpan)
	o.Route = deref(y.Route, def.Route)
	// Each option is within its key's range (closure_interval 0, which
	// the library reads as its default, among the refused).
	return nil
}

// clusterKeys are the keys that have an effect only in a cluster: given,
// they make the mode cluster (unless the file says instance, an error).
func (d *Draft) clusterKeys() []string {
	var keys []string
	f := &d.f
	if dp := f.Deployment; dp != nil {
		if dp.Router != nil {
			keys = append(keys, "deployment.router")
		}
		if dp.Network != nil {
			keys = append(keys, "deployment.network")
		}
		if dp.KVStore != nil {
			keys = append(keys, "deployment.kv_store")
		}
		if len(dp.Pools) > 1 {
			keys = append(keys, "deployment.pools[1]")
		}
		for i, p := range dp.Pools {
			at := fmt.Sprintf("deployment.pools[%d].", i)
			if p.Replicas != nil && *p.Replicas != 1 {
				keys = append(keys, at+"replicas")
			}
			for _, k := range []struct {
				given bool
				key   string
			}{{p.MinReplicas != nil, "min_replicas"}, {p.MaxReplicas != nil, "max_replicas"}, {p.Nodes != nil, "nodes"}, {p.Startup != nil, "startup"}, {p.FleetYAML.Drain != nil, "drain"},
				{p.Role != nil && *p.Role != deploy.RoleBoth, "role"}} {
				if k.given {
					keys = append(keys, at+k.key)
				}
			}
		}
	}
	if p := f.Policies; p != nil {
		for _, k := range []policy.Kind{policy.Admission, policy.Routing, policy.Autoscale, policy.Disaggregation} {
			if *p.Ptr(k) != nil {
				keys = append(keys, "policies."+string(k))
			}
		}
	}
	if w := f.Workload; w != nil {
		switch {
		case w.Spec.Kind != 0:
			keys = append(keys, "workload.spec")
		case w.SpecFile != nil:
			keys = append(keys, "workload.spec_file")
		case w.Scenario != nil:
			keys = append(keys, "workload.scenario")
		}
	}
	if r := f.Run; r != nil {
		for _, k := range []struct {
			given bool
			key   string
		}{
			{r.TraceLevel != nil && *r.TraceLevel != string(TraceNone), "run.trace_level"},
			{r.CounterfactualK != nil, "run.counterfactual_k"},
			{r.CounterfactualSample != nil && *r.CounterfactualSample != "" && *r.CounterfactualSample != "0", "run.counterfactual_sample"},
			{r.SummaryMaxTokens != nil, "run.summary_max_tokens"},
			{r.Outputs != nil && r.Outputs.Summary != nil && *r.Outputs.Summary != "", "run.outputs.summary"},
			{r.FitnessWeights.Kind != 0, "run.fitness_weights"},
			{r.Window != nil && *r.Window != "", "run.window"},
			{r.Outputs != nil && r.Outputs.DecisionTrace != nil && *r.Outputs.DecisionTrace != "", "run.outputs.decision_trace"},
			{r.Outputs != nil && r.Outputs.WindowOut != nil && *r.Outputs.WindowOut != "", "run.outputs.window_out"},
			{r.Outputs != nil && r.Outputs.WindowPlot != nil && *r.Outputs.WindowPlot != "", "run.outputs.window_plot"},
		} {
			if k.given {
				keys = append(keys, k.key)
			}
		}
	}
	return keys
}

// resolveMode takes the mode given, else cluster when any key that only
// a cluster has is given, else instance; and refuses what has no effect
// in it.
func (d *Draft) resolveMode(e *Experiment) error {
	keys := d.clusterKeys()
	var given string
	if dp := d.f.Deployment; dp != nil && dp.Mode != nil {
		given = *dp.Mode
	}
	switch Mode(given) {
	case "":
		e.Mode = ModeInstance
		if len(keys) > 0 {
			e.Mode = ModeCluster
		}
	case ModeInstance:
		e.Mode = ModeInstance
		if len(keys) > 0 {
			return d.errf(keys[0], "is for cluster runs; deployment.mode is instance (one engine, no router)")
		}
	case ModeCluster:
		e.Mode = ModeCluster
	default:
		return d.errf("deployment.mode", "%q is not a mode; use instance or cluster", clip.String(given))
	}
	r := &e.Run
	if e.Mode == ModeInstance {
		if ry := d.f.Run; ry != nil && ry.Workers != nil {
			return d.errf("run.workers", "is for cluster runs (this experiment runs one instance)")
		}
		return nil
	}
	if r.Outputs.KVEvents != "" {
		return d.errf("run.outputs.kv_events", "is not supported for a cluster run yet; use run.outputs.otlp_trace")
	}
	return nil
}

// checkDataParallel: a pool with data_parallel_size N > 1 is one vLLM
// server of N engines behind vLLM's own balancer, so it is the only pool,
// has N replicas and routing vllm-dp (what --data-parallel-size N sets);
// N is also the expert-parallel group of a mixture-of-experts model.
func (d *Draft) checkDataParallel(e *Experiment) error {
	for i, p := range e.Deployment.Pools {
		n := p.Instance.DP
		if n <= 1 {
			continue
		}
		key := fmt.Sprintf("deployment.pools[%d].data_parallel_size", i)
		switch {
		case len(e.Deployment.Pools) > 1:
			return d.errf(key, "a data-parallel server is one pool; this deployment has %d", len(e.Deployment.Pools))
		case p.Replicas != n:
			return d.errAt(fmt.Errorf("a data-parallel server of %d engines is %d replicas, got %d (--data-parallel-size cannot be combined with --num-instances)", n, n, p.Replicas),
				key, fmt.Sprintf("deployment.pools[%d].replicas", i))
		case e.Policies.Routing.Type != route.VLLMDPName:
			return d.errAt(fmt.Errorf("a data-parallel server routes with vLLM's own balancer, vllm-dp, got %s", e.Policies.Routing.Type), key, "policies.routing.type")
		}
	}
	return nil
}

// checkScaling: an autoscaler needs each pool's upper bound and cannot
// resize a data-parallel server; a pool of 0 replicas needs an autoscaler
// to ever serve.
func (d *Draft) checkScaling(e *Experiment) error {
	auto := e.Policies.Autoscale.Type != "none"
	for i, p := range e.Deployment.Pools {
		at := fmt.Sprintf("deployment.pools[%d].", i)
		switch {
		case auto && p.Instance.DP > 1:
			return d.errAt(fmt.Errorf("a data-parallel server of %d engines cannot be autoscaled (vLLM fixes --data-parallel-size at start)", p.Instance.DP),
				at+"data_parallel_size", "policies.autoscale.type")
		case auto && !p.Fleet.MaxGiven:
			return d.errf(at+"max_replicas", "give the pool's upper bound: autoscale %s needs one, as a HorizontalPodAutoscaler needs maxReplicas", e.Policies.Autoscale.Type)
		case !auto && p.Replicas == 0:
			return d.errf(at+"replicas", "is 0: a pool scaled to zero needs an autoscaler (policies.autoscale) to ever serve")
		}
	}
	return nil
}

// resolveAnalysis reads the counterfactual sampling and the summary's
// budget.
func (d *Draft) resolveAnalysis(r *RunOptions, ry *runYAML) error {
	sample := deref(ry.CounterfactualSample, "")
	if _, on, err := cluster.ParseSample(sample); err != nil {
		return d.errAt(err, "run.counterfactual_sample")
	} else if on {
		r.CounterfactualSample = strings.TrimSpace(sample)
	}
	r.SummaryMaxTokens = deref(ry.SummaryMaxTokens, summary.DefaultMaxTokens)
	return nil
}

// resolveNetwork reads deployment.network over its defaults.
func (d *Draft) resolveNetwork(e *Experiment, ny *networkYAML) error {
	n := deploy.DefaultNetwork()
	if ny != nil {
		if ny.NICGBPerSec != nil {
			n.NICBytesPerSec = *ny.NICGBPerSec * 1e9
		}
		if ny.Efficiency != nil {
			n.Efficiency = *ny.Efficiency
		}
		if ny.LatencyUs != nil {
			n.LatencyUs = *ny.LatencyUs
		}
		if t := ny.AbortTimeoutS; t != nil {
			n.AbortTimeoutUs = units.SecondsToUs(*t)
		}
	}
	// Every value is within its key's range (deploy.NetworkKeys).
	e.Deployment.Network = n
	return nil
}

// checkDisaggregation: prefill and decode pools need a decider that
// splits requests, a decider that splits needs an instance to prefill
// and one to decode, and the network has an effect only then.
func (d *Draft) checkDisaggregation(e *Experiment) error {
	dec := e.Policies.Disaggregation.Type
	var prefill, decode int
	split := -1
	for i, p := range e.Deployment.Pools {
		if p.Role != deploy.RoleDecode {
			prefill += max(p.Replicas, p.Fleet.MaxReplicas)
		}
		if p.Role != deploy.RolePrefill {
			decode += max(p.Replicas, p.Fleet.MaxReplicas)
		}
		if p.Role != deploy.RoleBoth && split < 0 {
			split = i
		}
	}
	role := func(i int) string { return fmt.Sprintf("deployment.pools[%d].role", i) }
	switch {
	case dec == disagg.NeverName && split >= 0:
		return d.errAt(fmt.Errorf("a %s pool needs a disaggregation decider (always or prefix-threshold), got never", e.Deployment.Pools[split].Role), role(split), "policies.disaggregation.type")
	case dec == disagg.NeverName && d.f.Deployment != nil && d.f.Deployment.Network != nil:
		return d.errAt(fmt.Errorf("has no effect without disaggregation (policies.disaggregation is never)"), "deployment.network")
	case dec != disagg.NeverName && e.Run.CounterfactualSample != "" && e.Run.CounterfactualSample != "0":
		return d.errAt(fmt.Errorf("counterfactual simulation is not available with prefill/decode disaggregation (a clone would serve the request whole on its decode instance)"),
			"run.counterfactual_sample", "policies.disaggregation.type")
	case dec != disagg.NeverName && e.Mode != ModeCluster:
		return d.errf("policies.disaggregation.type", "%s needs a cluster: a prefill instance and a decode instance", dec)
	case dec != disagg.NeverName && decode == 0:
		return d.errf("policies.disaggregation.type", "%s: no pool decodes (every role is prefill); give a pool role decode or both", dec)
	case dec != disagg.NeverName && prefill == 0:
		return d.errf("policies.disaggregation.type", "%s: no pool prefills (every role is decode); give a pool role prefill or both", dec)
	}
	return nil
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}
