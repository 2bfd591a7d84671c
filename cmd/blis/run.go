package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim/workload"
)

// runFlags are blis run's flags that are not experiment keys.
type runFlags struct {
	config, policies, deployment string
	sets                         []string
	printConfig, printSpec       bool
	quiet                        bool
	cpuProfile, memProfile       string
}

func newRunCmd() *cobra.Command {
	var o runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Simulate vLLM instances serving a workload, alone or as a cluster",
		Long: `run simulates an experiment: a deployment, a workload, a policy bundle
and run options (docs/experiment.md). The flags below map onto the
experiment's keys; --config FILE reads an experiment file, over which
flags given explicitly win (flag > --policy-config > --config or
--deployment > default). --print-config writes the experiment resolved,
every default filled in: read back with --config, it runs identically.

By default it simulates one vLLM instance (model, GPU, TP degree and vLLM
settings) serving a synthetic workload or a replayed trace, and prints
latency and throughput metrics as JSON on stdout.

With --num-instances N, --deployment FILE or any cluster flag (admission,
routing, snapshot freshness, decision trace, fitness, time windows) it
simulates a cluster (of one instance, if no other number is given): the
instances behind an admission policy and a router on one clock, and
prints the aggregated metrics with each instance's own. The instance
flags apply to every pool. See docs/cluster.md; the policies' templates
and parameters are in docs/policies.md.

--workload-spec FILE or --scenario NAME replaces the synthetic workload
flags with a mix of tenants (SLO classes, arrival processes and load
profiles, multi-turn sessions, agents, closed-loop clients, timeouts), sent
while the run goes on. Such runs go through the cluster path and report SLO
attainment and goodput per class and per tenant. See docs/workloads.md.

Latency models (--latency):
  physics   step time from the physics features and fitted coefficients
            (--coefficients FILE, written by calibrate fit)
  roofline  analytical: compute or bandwidth bound forward pass, TP
            all-reduce, per-step overheads (no coefficients needed)
  blackbox  beta0 + beta1*prefill tokens + beta2*decode tokens (µs), with
            --alpha-coeffs / --beta-coeffs
The default is physics when --coefficients is given or a shipped coefficient
file applies (Llama-3.1-8B on one H100 with vLLM's default settings; see
coefficients/shipped/), else roofline. --latency-noise adds mean-one
log-normal noise to every step.

--replay FILE replays a trace instead: calibrate ingest's requests table, a
CSV, or a trace users already have (--replay-format; detected by default);
see docs/simulator.md. A CSV has a header row naming its columns:
  arrival_us      arrival time, µs (used as is)             required
  prompt_tokens   prompt length, tokens (a prefix included)  required
  output_tokens   output length, tokens                      required
  prefix_group    shared-prefix group id (0: none)           optional
  prefix_tokens   tokens of the group's shared prefix        optional
  priority        integer priority                           optional
  tenant_id, slo_class (realtime|interactive|batch), session_id: names, optional

--otlp-trace writes the run as vLLM's journey and step tracing would
(read it back with calibrate ingest); --kv-events writes the KV events
subscriber's JSON lines when --kv-blocks-cpu is set.

Ctrl-C ends a run cleanly: the report printed is marked "partial": true
and no output file is written.

` + shippedNames(),
		Example: `  blis run
  blis run --scenario multi-turn-chat
  blis run --config experiment.yaml --set run.seed=7
  blis run --num-instances 4 --routing-policy weighted --print-config > experiment.yaml
  blis run --config experiment.yaml --policy-config candidate.yaml
  blis run --workload-spec my-agents.yaml --num-instances 2 --routing-policy weighted
  blis run --deployment examples/deploy.yaml --trace-level decisions --decision-trace decisions.jsonl
  blis run --num-instances 4 --rate 40 --requests 5000 --window 5s --window-out windows.csv --window-plot windows.png
  blis run --coefficients coeffs.yaml --replay tables/requests.parquet   # tables: calibrate ingest's output
  blis run --latency-noise 0.05 --otlp-trace run.jsonl --trace-step-sample-rate 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, &o) },
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.config, "config", "", "experiment file (YAML, version: 1; docs/experiment.md); flags given explicitly override its keys")
	f.StringVar(&o.policies, "policy-config", "", "policy bundle file (admission, priority, routing, scheduler, autoscale sections; docs/policies.md); its sections replace the experiment's")
	f.StringVar(&o.deployment, "deployment", "", "cluster: deployment file with pools of instances and the cluster's admission and routing (docs/cluster.md); instance and cluster flags given explicitly override it")
	f.StringArrayVar(&o.sets, "set", nil, "set an experiment key, KEY=VALUE (deployment.pools[0].replicas=4, policies.routing.params.scorers={queue-depth: 1}); repeatable, applied after the flags")
	addExperimentFlags(f, func(experiment.Flag) bool { return true })
	f.BoolVar(&o.printConfig, "print-config", false, "print the experiment resolved, every default filled in, as an experiment file, and exit")
	f.BoolVar(&o.printSpec, "print-spec", false, "print the --scenario (or --workload-spec) file and exit, to start a spec of your own from it")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr but warnings")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (pprof format: go tool pprof FILE), also when Ctrl-C ends the run")
	f.StringVar(&o.memProfile, "memprofile", "", "write a heap profile at the run's end to FILE (pprof format: go tool pprof FILE; -sample_index=alloc_space for every allocation)")
	cmd.SetUsageFunc(groupedUsage)
	return cmd
}

// groupedUsage prints blis run's usage with its flags in the sections of
// experiment.FlagGroups (the files, --set and printing first).
func groupedUsage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	sets := map[string]*pflag.FlagSet{}
	const general = "Experiment files and printing"
	order := []string{general}
	for _, g := range experiment.FlagGroups {
		order = append(order, g.Title)
	}
	c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
		g := experiment.GroupOf(fl.Name)
		if g == "" {
			g = general
		}
		if sets[g] == nil {
			sets[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
			sets[g].SortFlags = false
		}
		sets[g].AddFlag(fl)
	})
	for _, g := range order {
		if s := sets[g]; s != nil {
			fmt.Fprintf(w, "\n%s:\n%s", g, s.FlagUsages())
		}
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(w, "\nGlobal Flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	return nil
}

// addExperimentFlags defines the experiment's flags that keep selects.
func addExperimentFlags(f *pflag.FlagSet, keep func(experiment.Flag) bool) {
	for _, fl := range experiment.Flags {
		if !keep(fl) {
			continue
		}
		help := fl.Help
		switch fl.Name {
		case "replay-format":
			help = "format of the --replay file: " + strings.Join(workload.ReplayFormats(), ", ") + " (auto: Parquet by magic or extension, an imported trace by content, else CSV)"
		case "scenario":
			help = "built-in workload spec: " + strings.Join(workload.Scenarios(), ", ") + " (docs/workloads.md); or built-in experiment (a deployment, a workload and policies, which flags and --set then change): " + strings.Join(experiment.Scenarios(), ", ") + " (docs/autoscaling.md, docs/disaggregation.md)"
		}
		switch fl.Type {
		case "bool":
			f.Bool(fl.Name, fl.Default == "true", help)
		case "int":
			var n int64
			fmt.Sscan(fl.Default, &n)
			f.Int64(fl.Name, n, help)
		case "float":
			var x float64
			fmt.Sscan(fl.Default, &x)
			f.Float64(fl.Name, x, help)
		default:
			f.String(fl.Name, fl.Default, help)
		}
	}
}

// draft gathers the experiment: the files, then every flag given
// explicitly, then --set.
func draft(flags *pflag.FlagSet, o *runFlags) (*experiment.Draft, error) {
	d := experiment.NewDraft()
	var err error
	if sc, _ := flags.GetString("scenario"); flags.Changed("scenario") && experiment.IsScenario(sc) {
		if o.config != "" || o.deployment != "" {
			return nil, fmt.Errorf("--scenario %s is a built-in experiment: combine it with flags and --set, not with --config or --deployment (blis run --scenario %s --print-config writes it as a file to start from)", sc, sc)
		}
		if d, err = experiment.LoadScenario(sc); err != nil {
			return nil, fmt.Errorf("--scenario: %w", err)
		}
	}
	if o.config != "" {
		if d, err = experiment.Load(o.config); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
	}
	if o.deployment != "" {
		if err := d.LoadDeployment(o.deployment); err != nil {
			return nil, fmt.Errorf("--deployment: %w", err)
		}
	}
	if o.policies != "" {
		if err := d.LoadPolicies(o.policies); err != nil {
			return nil, fmt.Errorf("--policy-config: %w", err)
		}
	}
	if err := applyFlags(d, flags); err != nil {
		return nil, err
	}
	for _, s := range o.sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE", s)
		}
		if err := d.Set(strings.TrimSpace(k), v, "--set "+strings.TrimSpace(k)); err != nil {
			return nil, fmt.Errorf("--set: %w", err)
		}
	}
	return d, nil
}

// applyFlags maps every experiment flag the user gave onto the draft; a
// cluster flag also makes the run a cluster run.
func applyFlags(d *experiment.Draft, flags *pflag.FlagSet) error {
	if flags.Changed("replay-format") || flags.Changed("strict") {
		if !flags.Changed("replay") {
			return errors.New("--replay-format and --strict apply to --replay FILE")
		}
	}
	cluster := ""
	for _, fl := range experiment.Flags {
		f := flags.Lookup(fl.Name)
		if f == nil || !f.Changed || (fl.Name == "scenario" && experiment.IsScenario(f.Value.String())) {
			continue // a built-in experiment is the draft's base (draft)
		}
		if err := d.SetFlag(fl.Name, f.Value.String()); err != nil {
			return err
		}
		if fl.Cluster && cluster == "" {
			cluster = "--" + fl.Name
		}
	}
	if flags.Changed("deployment") {
		cluster = "--deployment"
	}
	if cluster != "" {
		return d.Set("deployment.mode", string(experiment.ModeCluster), cluster)
	}
	return nil
}

// errInterrupted is a run Ctrl-C ended: its report was printed, partial.
var errInterrupted = errors.New("interrupted: the report printed is partial and no output file was written")

func runRun(cmd *cobra.Command, o *runFlags) error {
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	d, err := draft(cmd.Flags(), o)
	if err != nil {
		return err
	}
	if o.printSpec {
		return printSpec(cmd.OutOrStdout(), d)
	}
	e, err := d.Resolve()
	if err != nil {
		return err
	}
	if o.printConfig {
		if o.cpuProfile != "" || o.memProfile != "" {
			return errors.New("--cpuprofile and --memprofile profile a run; --print-config runs nothing")
		}
		data, err := e.Marshal()
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(data)
		return err
	}
	if err := e.CheckFiles(profileTargets(o)...); err != nil {
		return err
	}
	prof, err := startProfiles(o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProgress := func() {}
	if !o.quiet && isTerminal(cmd.ErrOrStderr()) {
		// Long runs (a million requests on 16 instances take tens of
		// seconds) say how far they are, on the terminal only.
		p := &experiment.Progress{}
		ctx = experiment.WithProgress(ctx, p)
		stopProgress = showProgress(cmd.ErrOrStderr(), p, 2*time.Second, time.Second)
	}
	start := time.Now()
	res, err := experiment.Run(ctx, e, &experiment.FileSinks{Label: func(key string) string { return outputFlag(key) }})
	stopProgress()
	if res == nil {
		prof.abort()
		return err
	}
	if perr := prof.commit(); perr != nil {
		return perr
	}
	wall := time.Since(start)
	if werr := res.WriteJSON(cmd.OutOrStdout()); werr != nil {
		return werr
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "blis: "+n)
	}
	fmt.Fprintln(stderr, "blis: "+res.Summary(wall.Seconds()))
	if res.Partial {
		return errInterrupted
	}
	return err
}

// outputFlag is the flag of an output key, for errors about the file.
func outputFlag(key string) string {
	for _, f := range experiment.Flags {
		if f.Key == key {
			return "--" + f.Name
		}
	}
	return key
}

// printSpec writes the workload spec the draft names: a scenario's file,
// a spec file, or a spec written in the experiment.
func printSpec(out io.Writer, d *experiment.Draft) error {
	e, err := d.Resolve()
	if err != nil {
		return err
	}
	w := e.Workload
	var data []byte
	switch w.Kind {
	case experiment.Scenario:
		data, err = workload.ScenarioText(w.Scenario)
	case experiment.SpecFile:
		data, err = os.ReadFile(w.File)
	case experiment.SpecNode:
		data, err = yaml.Marshal(w.Node)
	default:
		return errors.New("--print-spec needs --scenario NAME or --workload-spec FILE")
	}
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

// shippedNames lists the model and hardware names --model and --hardware
// accept besides file paths.
func shippedNames() string {
	return "Shipped models (--model): " + strings.Join(physics.BuiltinModels(), ", ") +
		"\nShipped hardware (--hardware): " + strings.Join(physics.BuiltinHardware(), ", ")
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// showProgress rewrites one line on w every `every` after `delay`: the
// requests sent (of the total when known) and the simulated time reached.
// stop erases the line, if one was written, and returns once the loop
// has ended.
func showProgress(w io.Writer, p *experiment.Progress, delay, every time.Duration) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(ended)
		wrote := false
		defer func() {
			if wrote {
				fmt.Fprint(w, "\r\033[K")
			}
		}()
		timer := time.NewTimer(delay)
		defer timer.Stop()
		for {
			select {
			case <-done:
				return
			case <-timer.C:
			}
			sent, total := p.Sent.Load(), p.Total.Load()
			of := ""
			if total > 0 {
				of = fmt.Sprintf(" of %d (%.0f %%)", total, 100*float64(sent)/float64(total))
			}
			fmt.Fprintf(w, "\r\033[Kblis: %d%s requests sent, %.1f s simulated, %.0f s wall", sent, of, float64(p.LastArrivalUs.Load())/1e6, time.Since(start).Seconds())
			wrote = true
			timer.Reset(every)
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
