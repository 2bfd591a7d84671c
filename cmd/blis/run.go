package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/profiling"
	"github.com/blis-sim/blis/sweep"
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
		Long:  help("run") + experiment.ShippedNames(),
		Example: `  blis run
  blis run --scenario multi-turn-chat
  blis run --config experiment.yaml --set run.seed=7
  blis run --num-instances 4 --routing-policy weighted --print-config > experiment.yaml
  blis run --config experiment.yaml --policy-config candidate.yaml
  blis run --workload-spec my-agents.yaml --num-instances 2 --routing-policy weighted
  blis run --deployment examples/deploy.yaml --trace-level decisions \
      --decision-trace decisions.jsonl
  blis run --num-instances 4 --rate 40 --requests 5000 --window 5s \
      --window-out windows.csv --window-plot windows.png
  blis run --coefficients coeffs.yaml --replay tables/requests.parquet   # calibrate ingest's tables
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
	experiment.AddFlags(f, func(experiment.Flag) bool { return true })
	f.BoolVar(&o.printConfig, "print-config", false, "print the experiment resolved, every default filled in, as an experiment file, and exit")
	f.BoolVar(&o.printSpec, "print-spec", false, "print the --scenario (or --workload-spec) file and exit, to start a spec of your own from it")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr but warnings")
	profiling.AddFlags(f, &o.cpuProfile, &o.memProfile)
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		return experiment.Usage(c.OutOrStderr(), c.UseLine(), c.Example, c.LocalFlags())
	})
	return cmd
}

// inputs are the experiment's inputs as the command line gives them.
func (o *runFlags) inputs(fs *pflag.FlagSet, skip map[string]bool) experiment.Inputs {
	return experiment.Inputs{Config: o.config, Deployment: o.deployment, Policies: o.policies, Flags: experiment.GivenFlags(fs, skip), Sets: o.sets}
}

// errInterrupted is a run Ctrl-C ended: its report was printed, partial.
var errInterrupted = errors.New("interrupted: the report printed is partial and no output file was written")

func runRun(cmd *cobra.Command, o *runFlags) error {
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	d, err := o.inputs(cmd.Flags(), nil).Draft()
	if err != nil {
		return err
	}
	e, err := d.Resolve()
	if err != nil {
		return err
	}
	if o.printSpec {
		data, err := e.SpecText()
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(data)
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
	prof, err := profiling.Start(o.cpuProfile, o.memProfile, e.CheckFiles)
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
	res, err := experiment.Run(ctx, e, &experiment.FileSinks{Label: experiment.FlagOf})
	stopProgress()
	if perr := prof.Finish(res != nil); res == nil || perr != nil {
		return cmp.Or(perr, err)
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
		return prof.Interrupted(errInterrupted)
	}
	return err
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

// isTerminal reports whether w is a terminal (sweep.IsTerminal).
func isTerminal(w io.Writer) bool { f, ok := w.(*os.File); return ok && sweep.IsTerminal(f) }
