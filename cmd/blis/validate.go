package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/plotcanvas"
	"github.com/blis-sim/blis/internal/plural"
	"github.com/blis-sim/blis/replay"
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
	from      string
}

func newValidateCmd() *cobra.Command {
	var o validateOpts
	cmd := &cobra.Command{
		Use:   "validate RECORDS|TABLES",
		Short: "Replay a real vLLM run and compare its measured latencies with the simulation",
		Long:  help("validate"),
		Example: `  blis validate testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl
  blis validate runs/qwen/requests.jsonl --hardware rtx-pro-6000 --plot qwen.png
  blis validate bench.json --format vllm-bench --model llama-2-7b --hardware h100-sxm \
      --max-num-seqs 256
  blis validate tables/ --coefficients coeffs.yaml --from holdout   # the fit's held-out requests`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, &o, args[0])
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.format, "format", "auto", "format of RECORDS: auto, vllm-runs, vllm-bench, inference-perf, "+replay.TablesFormat+" (auto: detected from the content; a directory or Parquet file is calibrate ingest's tables)")
	f.StringVar(&o.from, "from", "", "TABLES: compare only the requests that arrived after `T`, the split calibrate fit --holdout-after recorded (RFC 3339, or holdout to read it from --coefficients); all are replayed")
	f.StringVar(&o.meta, "meta", "", "vllm-runs meta.json describing the deployment (default: meta.json next to RECORDS, when there is one)")
	f.StringVar(&o.counters, "counters", "", "vLLM's per-tick engine counters of the run (a vllm-runs timeseries.csv: prompt and generated tokens per second, running and waiting requests) to compare phase by phase with the simulation's (default: timeseries.csv next to a vllm-runs RECORDS, when there is one)")
	f.BoolVar(&o.strict, "strict", false, "fail on the first unreadable row instead of skipping it (skips are counted in the report)")
	f.StringVar(&o.plot, "plot", "", "draw simulated against measured TTFT, ITL and E2E per request to `FILE` (.png, .svg or .pdf)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON instead of a table")
	f.BoolVar(&o.calibrate, "calibrate", false, "fit the simulator to this run first (the roofline's compute and bandwidth efficiency and per-step overhead, and the output delay for records measured at the client) by a deterministic search that runs the simulator inside the fit, print them as flags, then compare with them")
	f.StringVar(&o.saveHost, "save-host-profile", "", "with --calibrate, write what carries to any deployment on this vLLM build and host (the per-step cost, the output delay) to `FILE`, a host profile that --host-profile FILE applies to other runs")
	experiment.AddFlags(f, validateFlag)
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no diagnostics on stderr but warnings")
	return cmd
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
	if o.plot != "" { // refused before the run, not after it
		var err error
		if plotFormat, err = plotcanvas.FormatOf("--plot", o.plot); err != nil {
			return err
		}
	}
	if o.saveHost != "" && !o.calibrate {
		return errors.New("--save-host-profile needs --calibrate: the profile holds what the calibration finds")
	}
	ro := replay.ReadOptions{Format: o.format, Meta: o.meta, Counters: o.counters, Strict: o.strict, From: o.from, Coefficients: flags.Lookup("coefficients").Value.String()}
	ins := ro.Inputs(path)
	for _, fl := range []string{"model", "hardware", "coefficients", "host-profile"} {
		ins = append(ins, atomicfile.Named{Label: "--" + fl, Path: flags.Lookup(fl).Value.String()})
	}
	if err := atomicfile.Check(ins, []atomicfile.Named{{Label: "--plot", Path: o.plot}, {Label: "--save-host-profile", Path: o.saveHost}}); err != nil {
		return err
	}
	m, err := replay.Read(path, ro)
	if err != nil {
		return err
	}
	for _, s := range m.Skips() {
		fmt.Fprintln(stderr, "blis: "+s)
	}
	d, err := experiment.Inputs{Flags: experiment.GivenFlags(flags, nil)}.Draft()
	if err != nil {
		return err
	}
	r, err := replay.Run(cmd.Context(), m, d, replay.Options{Calibrate: o.calibrate})
	if err != nil {
		return err
	}
	if cal := r.Calibrated; cal != nil {
		fmt.Fprintf(stderr, "blis: calibrated in %d simulations, %.1f s wall: loss %.4f -> %.4f\n", cal.Simulations, cal.WallS, cal.StartLoss, cal.Loss)
		if o.saveHost != "" {
			data, err := r.HostProfile()
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(o.saveHost, "--save-host-profile", data); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "blis: host profile written to %s (use it with --host-profile %s)\n", o.saveHost, o.saveHost)
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(stderr, "blis: "+n)
	}
	fmt.Fprintf(stderr, "blis: %s replayed on %s in %.2f s wall\n", plural.Of(len(m.Records), "request"), plural.Of(r.Engines, "engine"), r.ReplayWallS)
	if o.plot != "" {
		if err := writePlot(o.plot, plotFormat, r); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(out)
}

// writePlot draws the comparison to path through a temporary file renamed
// over it only when the figure is complete.
func writePlot(path, format string, r *replay.Report) error {
	f, err := atomicfile.Create(path, "--plot")
	if err != nil {
		return err
	}
	defer f.Abort()
	b := bufio.NewWriterSize(f, 1<<16)
	if err := r.WritePlot(b, format); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return f.Commit()
}
