package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/sweep"
)

type sweepFlags struct {
	runFlags
	grid, out, points, plot, plotMetric, plotX, shard, emit string
	image, jobName, claim                                   string
	seeds, workers, shards, parallelism                     int
	resume                                                  bool
	rows                                                    []string
}

func newSweepCmd() *cobra.Command {
	var o sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run an experiment over a grid of keys and seeds: one table, one figure",
		Long:  help("sweep"),
		Example: `  blis sweep --scenario mixed-slo --routing-policy least-loaded \
      --set deployment.pools[0].replicas=1,2,3 --set workload.rate_scale=0.5,1,2 --seeds 3 \
      --out table.csv --plot attainment.png
  blis sweep --config exp.yaml --grid grid.yaml --out table.parquet --resume
  blis sweep --config exp.yaml --grid grid.yaml --shard 3/8 --out shard-3.csv
  blis sweep --config exp.yaml --grid grid.yaml --emit k8s-indexed-job --shards 8 \
      --image registry/blis:v1 > job.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSweep(cmd, &o) },
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.config, "config", "", "the base experiment file (docs/experiment.md)")
	f.StringVar(&o.policies, "policy-config", "", "policy bundle file; its sections replace the experiment's")
	f.StringVar(&o.deployment, "deployment", "", "cluster: deployment file (docs/cluster.md)")
	f.StringArrayVar(&o.sets, "set", nil, "KEY=V1,V2,... sweeps KEY over the values (a YAML flow list without brackets: quote a value holding a comma); KEY=VALUE sets it at every point; repeatable")
	f.StringVar(&o.grid, "grid", "", "grid file: version: 1, seeds: K, grid: {KEY: [values], ...} (docs/sweeps.md)")
	f.IntVar(&o.seeds, "seeds", 0, "seeds per point (default: the grid file's, else 1)")
	f.IntVar(&o.workers, "workers", 0, "runs at once, one core each (0: one per CPU); the table is the same for any value")
	f.StringVar(&o.out, "out", "", "the table: .csv or .parquet (default: CSV on stdout); with --shard, {shard} stands for the shard's index")
	f.BoolVar(&o.resume, "resume", false, "keep the rows --out already holds (an interrupted sweep) and run only the others")
	f.StringArrayVar(&o.rows, "rows", nil, "a table of this sweep's rows (shards, an earlier run): their runs are not run again; repeatable")
	f.StringVar(&o.points, "points", "", "also write one row per point, .csv or .parquet: each metric's mean over the point's seeds with its 95 % interval over them, and the worst verdict (docs/sweeps.md)")
	f.StringVar(&o.plot, "plot", "", "draw a metric against a swept key, one line per series, to .png, .svg or .pdf")
	f.StringVar(&o.plotMetric, "plot-metric", "", "the figure's metric column (default slo_attainment when reported, else ttft_p99_ms)")
	f.StringVar(&o.plotX, "plot-x", "", "the figure's swept key (default the first numeric one)")
	f.StringVar(&o.shard, "shard", "", "run only shard I/N of the runs (I from 0; or an environment variable holding I, JOB_COMPLETION_INDEX/N)")
	f.StringVar(&o.emit, "emit", "", "print instead of running: plan (the sweep's size and columns, JSON) or k8s-indexed-job (a Kubernetes manifest running the shards)")
	f.IntVar(&o.shards, "shards", 0, "k8s-indexed-job: the shards (pods)")
	f.IntVar(&o.parallelism, "parallelism", 0, "k8s-indexed-job: pods at once (0: every shard)")
	f.StringVar(&o.image, "image", "", "k8s-indexed-job: an image with blis on its PATH")
	f.StringVar(&o.jobName, "job-name", "blis-sweep", "k8s-indexed-job: the Job's name")
	f.StringVar(&o.claim, "claim", "blis-sweep-results", "k8s-indexed-job: the volume claim the shards' tables are written to (/out)")
	experiment.AddFlags(f, sweepFlag)
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress or diagnostics on stderr but warnings")
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		return experiment.Usage(c.OutOrStderr(), c.UseLine(), c.Example, c.LocalFlags(),
			experiment.Section{Title: "The sweep: its grid, seeds and table", Flags: []string{"set", "grid", "seeds", "workers", "out", "resume", "rows", "points", "plot", "plot-metric", "plot-x", "quiet"}},
			experiment.Section{Title: "Shards and Kubernetes", Flags: []string{"shard", "emit", "shards", "parallelism", "image", "job-name", "claim"}})
	})
	return cmd
}

// sweepFlag keeps blis run's experiment flags that a sweep takes: not
// outputs (every run would write the same file), and --workers is the
// sweep's (run.workers is 1 in a sweep unless set).
func sweepFlag(f experiment.Flag) bool {
	return f.Name != "workers" && f.Name != "trace-level" && f.Name != "counterfactual-k" &&
		!strings.HasPrefix(f.Key, "run.outputs.") && !strings.HasPrefix(f.Key, "run.otlp.")
}

// exitError ends blis with a status of its own.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// sweepSpec builds the sweep the flags describe: the base is the files
// and flags; the grid file and --set, applied over it at every point, are
// the grid (a list is swept, one value set).
func sweepSpec(cmd *cobra.Command, o *sweepFlags) (sweep.Spec, error) {
	g, err := sweep.GridOf(o.grid, o.sets)
	if err != nil {
		return sweep.Spec{}, err
	}
	base := o.inputs(cmd.Flags(), sweepOwn)
	base.Sets = nil // the grid's
	seeds := max(g.Seeds, 1)
	if cmd.Flags().Changed("seeds") {
		seeds = o.seeds
	}
	return sweep.Spec{Base: base.Draft, Grid: g, Seeds: seeds, Workers: o.workers}, nil
}

// sweepOwn are a sweep's (and capacity search's) own flags that blis
// run's flags would read as experiment keys: --workers is the runs at
// once, not run.workers.
var sweepOwn = map[string]bool{"workers": true}

func runSweep(cmd *cobra.Command, o *sweepFlags) error {
	fl := cmd.Flags()
	if err := (sweep.Flags{Emit: o.emit, Workers: o.workers, Seeds: o.seeds, Parallelism: o.parallelism, Given: fl.Changed}).Check(); err != nil {
		return err
	}
	spec, err := sweepSpec(cmd, o)
	if err != nil {
		return err
	}
	if o.emit != "" {
		plan, err := sweep.NewPlan(spec)
		if err != nil {
			return err
		}
		if o.emit == "plan" {
			return plan.WritePlan(cmd.OutOrStdout())
		}
		return emitJob(cmd, o)
	}
	shard, shards := 0, 1
	out := o.out
	if o.shard != "" {
		if shard, shards, err = sweep.ParseShard(o.shard, nil); err != nil {
			return err
		}
		out = strings.ReplaceAll(out, "{shard}", strconv.Itoa(shard))
	}
	outs := sweep.Outputs{Out: out, Plot: o.plot, Points: o.points, Sharded: o.shard != "", Resume: o.resume, Inputs: []atomicfile.Named{{Label: "--config", Path: o.config},
		{Label: "--grid", Path: o.grid}, {Label: "--policy-config", Path: o.policies}, {Label: "--deployment", Path: o.deployment}}}
	for _, r := range o.rows {
		outs.Inputs = append(outs.Inputs, atomicfile.Named{Label: "--rows", Path: r})
	}
	opened, err := outs.Open() // before the plan resolves a point
	if err != nil {
		return err
	}
	defer opened.Unlock()
	format := opened.Format
	plan, err := sweep.NewPlan(spec)
	if err != nil {
		return err
	}
	fig := plan.DefaultFigure()
	if o.plotMetric != "" {
		fig.Metric = o.plotMetric
	}
	if o.plotX != "" {
		fig.X = o.plotX
	}
	if err := plan.CheckFigure(fig); o.plot != "" && err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	var done []sweep.Row
	for _, path := range outs.Resumed(o.rows) {
		rows, err := plan.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--rows: %w", err)
		}
		done = append(done, rows...)
	}
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	f, _ := stderr.(*os.File)
	bar := sweep.NewBar(stderr, f != nil && sweep.IsTerminal(f), "blis sweep")
	write := func(rows []sweep.Row) error {
		var b bytes.Buffer
		if err := plan.Write(&b, rows, format); err != nil {
			return err
		}
		if out == "" {
			_, err := cmd.OutOrStdout().Write(b.Bytes())
			return err
		}
		return atomicfile.WriteFile(out, "--out", b.Bytes())
	}
	opt := sweep.Options{Workers: o.workers, Done: done, Progress: func(r *sweep.Row, done, failed, total int) {
		if r.Status != sweep.StatusOK {
			bar.Note(fmt.Sprintf("blis sweep: run %d (point %d, seed %d) failed: %s", r.Run, plan.Point(r.Run), plan.Seed(r.Run), r.Error))
		}
		bar.Update(done, failed, total)
	}}
	if out != "" && !opened.Stream { // a pipe gets the table once
		opt.Checkpoint, opt.CheckpointEvery = write, 5*time.Second
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := plan.Execute(ctx, shard, shards, opt)
	if errors.Is(err, context.Canceled) && res != nil {
		msg := fmt.Sprintf("interrupted after %d of %d runs", len(res.Rows), sweep.ShardRuns(plan.Runs, shard, shards))
		if out != "" {
			msg += fmt.Sprintf("; they are in %s: run again with --resume to finish", out)
		}
		return &exitError{130, msg}
	}
	if err != nil {
		return err
	}
	if err := write(res.Rows); err != nil {
		return err
	}
	if err := plan.WritePointsFile(o.points, res.Rows); err != nil {
		return err
	}
	if o.plot != "" {
		var b bytes.Buffer
		if err := plan.Plot(&b, res.Rows, fig, opened.PlotFormat); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		if err := atomicfile.WriteFile(o.plot, "--plot", b.Bytes()); err != nil {
			return err
		}
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s (%d runs)\n", w.Text, w.Runs)
	}
	fmt.Fprintf(stderr, "blis sweep: %d runs (%d run now, %d from earlier rows), %d failed, %.1f s wall\n",
		len(res.Rows), res.Ran, len(res.Rows)-res.Ran, res.Failed, time.Since(start).Seconds())
	if res.Failed > 0 {
		return &exitError{100 + min(res.Failed, 99), fmt.Sprintf("%d of %d runs failed (the table's error column says why)", res.Failed, len(res.Rows))}
	}
	return nil
}

// emitJob writes the Indexed Job running this sweep's shards: the
// arguments given, input files carried in its ConfigMap by base name.
func emitJob(cmd *cobra.Command, o *sweepFlags) error {
	if o.shards < 1 {
		return errors.New("--emit k8s-indexed-job needs --shards N")
	}
	job := sweep.K8sJob{Name: o.jobName, Image: o.image, Shards: o.shards, Parallelism: o.parallelism, Claim: o.claim}
	skip := map[string]bool{"emit": true, "shards": true, "parallelism": true, "image": true, "job-name": true, "claim": true,
		"out": true, "shard": true, "workers": true, "resume": true, "rows": true, "points": true, "plot": true, "plot-metric": true, "plot-x": true, "quiet": true}
	files := map[string]bool{"config": true, "grid": true, "policy-config": true, "deployment": true}
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch {
		case err != nil || skip[f.Name]:
		case files[f.Name]:
			err = job.AddFile(f.Name, f.Value.String())
		case f.Value.Type() == "stringArray":
			vals, _ := cmd.Flags().GetStringArray(f.Name)
			for _, v := range vals {
				job.AddArgs("--"+f.Name, v)
			}
		default:
			job.AddArgs("--" + f.Name + "=" + f.Value.String())
		}
	})
	if err != nil {
		return err
	}
	data, err := job.Manifest()
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(data)
	return err
}
