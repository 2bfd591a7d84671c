package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/sweep"
)

type capacityFlags struct {
	runFlags
	key, find, target    string
	min, max, resolution float64
	seeds, workers       int
}

func newCapacityCmd() *cobra.Command {
	var o capacityFlags
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Find the highest arrival rate, or the fewest instances, that meets an SLO target",
		Long:  help("capacity"),
		Example: `  blis capacity --scenario mixed-slo --routing-policy least-loaded \
      --search deployment.pools[0].replicas --min 1 --max 4 --target realtime_slo_attainment>=0.98
  blis capacity --config exp.yaml --search workload.rate_scale --min 0.25 --max 4 \
      --target interactive_slo_attainment>=0.99`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCapacity(cmd, &o) },
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.config, "config", "", "the base experiment file (docs/experiment.md)")
	f.StringVar(&o.policies, "policy-config", "", "policy bundle file; its sections replace the experiment's")
	f.StringVar(&o.deployment, "deployment", "", "cluster: deployment file (docs/cluster.md)")
	f.StringArrayVar(&o.sets, "set", nil, "set an experiment key, KEY=VALUE; repeatable")
	f.StringVar(&o.key, "search", "", "the experiment key searched (workload.rate_scale, deployment.pools[0].replicas)")
	f.Float64Var(&o.min, "min", 0, "the low end of the range searched")
	f.Float64Var(&o.max, "max", 0, "the high end")
	f.StringVar(&o.find, "find", "", "max: the highest value that meets the target; min: the lowest (default: min for replicas, max for rate and rate_scale)")
	f.StringVar(&o.target, "target", "", "METRIC>=X or METRIC<=X, METRIC a column of blis sweep's table (realtime_slo_attainment>=0.99)")
	f.IntVar(&o.seeds, "seeds", 3, "seeds per value; the metric's mean over them decides")
	f.Float64Var(&o.resolution, "resolution", 0, "stop when the bracket is this narrow (0: a hundredth of the range; whole-number keys stop at 1)")
	f.IntVar(&o.workers, "workers", 0, "runs at once (0: one per CPU); the answer is the same for any value")
	experiment.AddFlags(f, sweepFlag)
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr")
	for _, name := range []string{"search", "target", "min", "max"} {
		_ = cmd.MarkFlagRequired(name)
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		return experiment.Usage(c.OutOrStderr(), c.UseLine(), c.Example, c.LocalFlags(),
			experiment.Section{Title: "The search", Flags: []string{"search", "min", "max", "target", "find", "seeds", "resolution", "workers", "quiet"}})
	})
	return cmd
}

func runCapacity(cmd *cobra.Command, o *capacityFlags) error {
	target, err := sweep.ParseTarget(o.target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := sweep.Capacity(ctx, sweep.CapacitySpec{
		Base: o.inputs(cmd.Flags(), sweepOwn).Draft,
		Key:  o.key, Min: o.min, Max: o.max, Find: o.find, Target: target, Seeds: o.seeds, Resolution: o.resolution, RunPrecision: sweep.DefaultRunPrecision, Workers: o.workers,
		OnEval: func(ev sweep.Evaluation) { fmt.Fprintln(stderr, "blis capacity: "+ev.Line(o.key, target)) },
	})
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{130, "interrupted"}
		}
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return err
	}
	if res.Answer == nil {
		return &exitError{2, res.Note}
	}
	if res.Note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "blis capacity: "+res.Note)
	}
	for _, l := range res.Lines(target) {
		fmt.Fprintln(stderr, "blis capacity: "+l)
	}
	return nil
}
