package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/physics"
)

type fitOpts struct {
	model, hardware string
	tp              int
	knobs           physics.VLLMKnobs
	configs         string
	output, report  string
	opt             fit.Options
	quiet           bool
	notes           string
	holdoutAfter    string
	// allowKV fits even when a trace's GPU KV blocks contradict the model
	// and hardware by more than KVCapacityFactor.
	allowKV bool
}

// KVCapacityFactor is how far (either way) the GPU KV blocks a trace
// reports (kv.blocks_total_gpu) may be from what the configuration's
// model, hardware, TP and --gpu-memory-utilization hold (vLLM's memory
// profile, physics.KVBudget) before calibrate fit refuses the trace as
// another configuration's (--allow-kv-mismatch overrides). vLLM's own
// activation profile and CUDA graphs move the real figure by well under
// this; another model or GPU moves it by more.
const KVCapacityFactor = 2.0

func addKnobFlags(f *pflag.FlagSet, k *physics.VLLMKnobs, kvHelp string) {
	f.Int64Var(&k.MaxNumSeqs, "max-num-seqs", k.MaxNumSeqs, "vLLM --max-num-seqs: running requests at most")
	f.Int64Var(&k.MaxBatchedTokens, "max-num-batched-tokens", k.MaxBatchedTokens, "vLLM --max-num-batched-tokens: token budget per step")
	f.Int64Var(&k.BlockSizeTokens, "block-size", k.BlockSizeTokens, "vLLM --block-size (tokens per KV block)")
	f.Float64Var(&k.GPUMemoryUtilization, "gpu-memory-utilization", k.GPUMemoryUtilization, "vLLM --gpu-memory-utilization: share of device memory vLLM may use, in (0, 1]")
	f.BoolVar(&k.ChunkedPrefillEnabled, "enable-chunked-prefill", k.ChunkedPrefillEnabled, "vLLM --enable-chunked-prefill")
	f.BoolVar(&k.PrefixCachingEnabled, "enable-prefix-caching", k.PrefixCachingEnabled, "vLLM --enable-prefix-caching")
	f.BoolVar(&k.CPUOffloading, "cpu-offloading", false, "KV cache offload to host memory")
	_ = f.MarkDeprecated("cpu-offloading", "offloading is on exactly when --kv-blocks-cpu > 0, as in blis run")
	f.Int64Var(&k.TotalKVBlocksGPU, "kv-blocks-gpu", 0, kvHelp)
	f.Int64Var(&k.TotalKVBlocksCPU, "kv-blocks-cpu", 0, "CPU KV blocks for offload to host memory (0: no CPU tier; > 0 turns KV offloading on, as in blis run)")
}

// knobFlagError names the flag of a vLLM setting the physics library
// refused ("--max-num-seqs: must be > 0, got 0" rather than the library's
// `vllm: field "max_num_seqs"`), with the vocabulary blis run uses
// (experiment.PoolFlag); other errors are returned unchanged.
func knobFlagError(err error) error {
	var fe *physics.FieldError
	if errors.As(err, &fe) && fe.Source == "vllm" {
		if f := experiment.PoolFlag("vllm." + fe.Field); f != "" {
			return fmt.Errorf("%s: %s", f, fe.Msg)
		}
	}
	return err
}

// applyOffloadRule sets k.CPUOffloading by blis run's rule: KV offloading
// is on exactly when --kv-blocks-cpu > 0. The deprecated --cpu-offloading
// is accepted when it agrees and refused by name when it does not.
func applyOffloadRule(flags *pflag.FlagSet, k *physics.VLLMKnobs) error {
	if k.TotalKVBlocksCPU < 0 {
		return fmt.Errorf("--kv-blocks-cpu must be >= 0 (0: no CPU tier), got %d", k.TotalKVBlocksCPU)
	}
	on := k.TotalKVBlocksCPU > 0
	if flags.Changed("cpu-offloading") && k.CPUOffloading != on {
		return fmt.Errorf("--cpu-offloading=%v disagrees with --kv-blocks-cpu %d: KV offloading is on exactly when --kv-blocks-cpu > 0 (--cpu-offloading is deprecated)",
			k.CPUOffloading, k.TotalKVBlocksCPU)
	}
	k.CPUOffloading = on
	return nil
}

func newFitCmd() *cobra.Command {
	o := fitOpts{knobs: physics.DefaultVLLMKnobs(), opt: fit.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "fit TABLES_DIR... | fit --configs FILE",
		Short: "Fit physics-model coefficients to ingested traces and write a validation report",
		Long: `fit turns the tables that 'calibrate ingest' wrote into a coefficient file for
the simulator's physics latency mode, and writes a validation report.

Each TABLES_DIR is one trace of the configuration given by --model, --hardware,
--tp and the vLLM flags (the traces do not record them). --kv-blocks-gpu
defaults to the trace's kv.blocks_total_gpu. To fit several configurations
together (and get leave-one-config-out validation), list them in a YAML file:

  configs:
    - name: h100-tp1              # used in the report
      tables: [run1/tables]       # relative to this file
      model: llama-3.1-8b         # shipped name, or config.json path relative to this file
      hardware: h100-sxm          # shipped name, or spec JSON path relative to this file
      tp: 1
      vllm: {max_num_seqs: 256, max_batched_tokens: 8192}   # omitted keys: defaults

Relative tables, model and hardware paths are read from the YAML file's folder,
not the working directory; a model or hardware value that names no file there
is looked up among the shipped ones by its last path element.

The coefficient file's applies_to, the default configuration of calibrate
predict, is the first configuration; fitted_configs lists them all, and
predict and blis run warn about a configuration outside them. Beta (step time) is
trained on the difference of step.ts_start_ns between consecutive sampled steps,
never on step.duration_us; trace with a high --step-tracing-sample-rate, and
with rich snapshots when chunked prefill is on. The pipeline and every choice
it makes are in docs/fit.md.`,
		Example: `  calibrate ingest vllm-trace.jsonl -o tables/
  calibrate fit tables/ --model llama-3.1-8b --hardware h100-sxm -o coeffs.yaml
  calibrate fit --configs configs.yaml -o coeffs.yaml --report report/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyOffloadRule(cmd.Flags(), &o.knobs); err != nil {
				return err
			}
			return runFit(cmd, args, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "llama-3.1-8b", modelHelp())
	f.StringVar(&o.hardware, "hardware", "h100-sxm", hardwareHelp())
	f.IntVar(&o.tp, "tp", 1, tpHelp)
	addKnobFlags(f, &o.knobs, "GPU KV blocks; 0 takes the traces' kv.blocks_total_gpu")
	f.StringVar(&o.configs, "configs", "", "YAML file listing several configurations (instead of TABLES_DIR and the configuration flags)")
	f.StringVarP(&o.output, "output", "o", "coefficients.yaml", "coefficient file to write")
	f.StringVar(&o.report, "report", "", "directory for report.md, report.json and residual plots (default: the output's name + .report)")
	f.Float64SliceVar(&o.opt.Lambdas, "lambdas", o.opt.Lambdas, "ridge penalties to search")
	f.Float64SliceVar(&o.opt.Gammas, "gammas", o.opt.Gammas, "preemption EMA factors to search, each in (0,1]")
	f.IntVar(&o.opt.Folds, "folds", o.opt.Folds, "temporal cross-validation folds")
	f.Float64Var(&o.opt.Holdout, "holdout", o.opt.Holdout, "share of each trace's samples, at its end, that the fit keeps aside to score itself (its hold-out MAPE)")
	f.StringVar(&o.holdoutAfter, "holdout-after", "", "leave the traces' requests arriving after T, and the steps after T, out of the fit altogether, and record T in the file's provenance, for blis validate --from T on just those: T is a duration after the first arrival (600s, 10m), a share of the span of arrivals (80%), or an RFC 3339 time")
	f.Int64Var(&o.opt.WarmupSteps, "warmup-steps", o.opt.WarmupSteps, "leave out steps with id up to this (engine warm-up)")
	f.Float64Var(&o.opt.OutlierFactor, "outlier-factor", o.opt.OutlierFactor, "leave out steps slower than this × the median of their configuration's steps in the same power-of-two token bucket (buckets of fewer than 20 steps are not judged; 0: keep all; docs/fit.md)")
	f.Float64Var(&o.opt.PreemptHeavy, "preempt-heavy", o.opt.PreemptHeavy, "a step is preemption-heavy above this share of running requests preempted")
	f.Float64Var(&o.opt.PreemptWeight, "preempt-weight", o.opt.PreemptWeight, "sample weight of preemption-heavy steps and of requests queued behind them")
	f.StringVar(&o.opt.BetaTarget, "beta-target", o.opt.BetaTarget, "step-time source: auto, step_pairs or journey")
	f.StringVar(&o.opt.Spec, "feature-spec", o.opt.Spec, "beta feature spec: 3.0 (roofline terms, attention by phase with its KV read per query head; needs boost_clock_mhz in the hardware spec), 2.0 (the earlier roofline terms) or 1.0 (the first design's frozen 16); docs/physics-spec.md")
	f.StringVar(&o.opt.Objective, "objective", o.opt.Objective, "beta fit objective: relative (squared relative error, weights 1/t²) or absolute (squared seconds, dominated by long steps)")
	f.BoolVar(&o.opt.CompareObjectives, "compare-objectives", o.opt.CompareObjectives, "also fit beta under the other objective and report its hold-out errors beside the chosen one's (one more beta fit)")
	f.IntVar(&o.opt.MinPairs, "min-pairs", o.opt.MinPairs, "with --beta-target auto, add journey-reconstructed targets to a trace with fewer adjacent sampled steps")
	f.BoolVar(&o.opt.AlphaCorrection, "alpha-correction", o.opt.AlphaCorrection, "subtract the scheduler overhead from alpha targets before the fit (added back to base_bias)")
	f.StringVar(&o.notes, "notes", "", "free text added to the file's provenance notes (e.g. how the traces were made)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&o.allowKV, "allow-kv-mismatch", false, fmt.Sprintf("fit even when a trace's GPU KV blocks (kv.blocks_total_gpu) are more than %g× from what the model, hardware, TP and --gpu-memory-utilization hold (by default a sign of the wrong --model or --hardware: refused)", KVCapacityFactor))
	return cmd
}

// manifest is the --configs file.
type manifest struct {
	Configs []struct {
		Name     string         `yaml:"name"`
		Tables   []string       `yaml:"tables"`
		Model    string         `yaml:"model"`
		Hardware string         `yaml:"hardware"`
		TP       int            `yaml:"tp"`
		VLLM     map[string]any `yaml:"vllm"`
	} `yaml:"configs"`
}

// configSpec is one configuration before its traces are read.
type configSpec struct {
	name, model, hardware string
	tp                    int
	knobs                 physics.VLLMKnobs
	dirs                  []string
	fromFlags             bool // given by the command line's flags, not a --configs file
}

// fromDir resolves a relative path of the --configs file from the file's
// folder. A model or hardware value is a path or a shipped name
// (physics.LoadModel reads an existing file, else looks up the last path
// element among the shipped names), so it goes through here too: a file
// next to the YAML file is read, and a shipped name is still found, never a
// file relative to the working directory.
func fromDir(base, ref string) string {
	if filepath.IsAbs(ref) {
		return ref
	}
	return filepath.Join(base, ref)
}

// manifestError rewords yaml's errors about the --configs file: an
// unknown key names the keys there are instead of dumping a Go struct.
func manifestError(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	var msgs []string
	for _, e := range te.Errors {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			keys := "configs"
			if strings.Contains(m[3], "Tables") {
				keys = "name, tables, model, hardware, tp, vllm"
			}
			e = fmt.Sprintf("line %s: unknown key %q (the keys here are %s)", m[1], m[2], keys)
		}
		msgs = append(msgs, e)
	}
	return strings.Join(msgs, "; ")
}

var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (.*)$`)

func readManifest(path string) ([]configSpec, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("--configs: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m manifest
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("--configs %s: the file is empty; it needs a configs: list (see calibrate fit --help)", path)
		}
		return nil, fmt.Errorf("--configs %s: %s", path, manifestError(err))
	}
	if len(m.Configs) == 0 {
		return nil, fmt.Errorf("--configs %s: no configs listed", path)
	}
	base := filepath.Dir(path)
	var out []configSpec
	seen := map[string]bool{}
	for i, c := range m.Configs {
		where := fmt.Sprintf("--configs %s: configs[%d]", path, i)
		if c.Name == "" || c.Model == "" || c.Hardware == "" || len(c.Tables) == 0 {
			return nil, fmt.Errorf("%s: name, tables, model and hardware are required", where)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: duplicate name %q", where, c.Name)
		}
		seen[c.Name] = true
		if c.TP == 0 {
			c.TP = 1
		}
		k := physics.DefaultVLLMKnobs()
		k.TotalKVBlocksGPU = 0
		if c.VLLM != nil {
			// Through JSON so the keys are physics.VLLMKnobs' tags, strictly.
			js, err := json.Marshal(c.VLLM)
			if err != nil {
				return nil, fmt.Errorf("%s.vllm: %w", where, err)
			}
			d := json.NewDecoder(bytes.NewReader(js))
			d.DisallowUnknownFields()
			if err := d.Decode(&k); err != nil {
				return nil, fmt.Errorf("%s.vllm: %w", where, err)
			}
		}
		cs := configSpec{name: c.Name, model: fromDir(base, strings.TrimSpace(c.Model)), hardware: fromDir(base, strings.TrimSpace(c.Hardware)), tp: c.TP, knobs: k}
		for _, t := range c.Tables {
			cs.dirs = append(cs.dirs, fromDir(base, t))
		}
		out = append(out, cs)
	}
	return out, nil
}

// runFit is calibrate fit: it checks the outputs, reads the configurations
// and their traces, fits them (fit.Run) and writes the coefficient file and
// the report together.
func runFit(cmd *cobra.Command, args []string, o *fitOpts) error {
	stderr := cmd.ErrOrStderr()
	if o.quiet {
		stderr = io.Discard
	}
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	o.opt.Progress = logf
	if err := o.opt.Validate(); err != nil {
		return errors.New("--" + err.Error())
	}
	dir := o.report
	if dir == "" {
		dir = strings.TrimSuffix(o.output, filepath.Ext(o.output)) + ".report"
	}
	if err := checkFitOutputs(o, nil, dir); err != nil { // before --configs is read
		return err
	}
	specs, err := fitSpecs(cmd, args, o)
	if err != nil {
		return err
	}
	if err := checkFitOutputs(o, specs, dir); err != nil { // with the tables and files --configs names
		return err
	}

	var cfgs []fit.Config
	for _, s := range specs {
		cfg, err := loadFitConfig(s, logf, cmd.ErrOrStderr(), o.allowKV)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, cfg)
	}
	var holdout *coefficients.Holdout
	if o.holdoutAfter != "" {
		if holdout, err = holdOut(cfgs, o.holdoutAfter); err != nil {
			return fmt.Errorf("--holdout-after %w", err)
		}
		logf("holding out the %d requests that arrived after %s, and %d steps", holdout.Requests, holdout.After, holdout.Steps)
	}
	res, err := fit.Run(cfgs, o.opt, fitCommand(args))
	if err != nil {
		return err
	}
	if holdout != nil {
		res.File.Provenance.Holdout = holdout
		res.File.Provenance.Notes += fmt.Sprintf("; requests arriving after %s (%d) and steps after it (%d) were held out: blis validate --from %s", holdout.After, holdout.Requests, holdout.Steps, holdout.After)
	}
	// What the report warns about (a trace naming another model) is said
	// on stderr too, even with --quiet.
	for _, c := range res.Report.Configs {
		for _, w := range c.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "calibrate: warning (%s): %s\n", c.Name, w)
		}
	}
	if o.notes != "" {
		res.File.Provenance.Notes += "; " + o.notes
	}
	if err := writeFitOutputs(o.output, dir, res); err != nil {
		return err
	}
	printFitSummary(cmd.OutOrStdout(), o.output, dir, res.Report)
	if holdout != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "held out: %d requests arriving after %s (and %d steps); validate on them with blis validate TABLES --coefficients %s --from %s\n",
			holdout.Requests, holdout.After, holdout.Steps, o.output, holdout.After)
	}
	logf("done")
	return nil
}

// holdOut resolves --holdout-after over every trace of every
// configuration and removes what it holds out from each.
func holdOut(cfgs []fit.Config, spec string) (*coefficients.Holdout, error) {
	var all []*fit.Trace
	for _, c := range cfgs {
		all = append(all, c.Traces...)
	}
	return fit.HoldOutTraces(all, spec)
}

// fitSpecs are the configurations to fit: those of --configs, or one from
// the TABLES_DIR arguments and the configuration flags.
func fitSpecs(cmd *cobra.Command, args []string, o *fitOpts) ([]configSpec, error) {
	switch {
	case o.configs != "" && len(args) > 0:
		return nil, errors.New("give either TABLES_DIR arguments or --configs, not both")
	case o.configs != "":
		for _, name := range []string{"model", "hardware", "tp", "max-num-seqs", "max-num-batched-tokens", "block-size", "kv-blocks-gpu"} {
			if cmd.Flags().Changed(name) {
				return nil, fmt.Errorf("--%s: with --configs, each configuration's settings come from the file", name)
			}
		}
		return readManifest(o.configs)
	case len(args) == 0:
		return nil, errors.New("no TABLES_DIR given (the output directory of calibrate ingest), and no --configs")
	default:
		return []configSpec{{name: o.model, model: o.model, hardware: o.hardware, tp: o.tp, knobs: o.knobs, dirs: args, fromFlags: true}}, nil
	}
}

// loadFitConfig reads the traces of one configuration and builds its
// physics configuration; GPU KV blocks not given are the first trace's
// kv.blocks_total_gpu. The model's notes go to stderr (shown even with
// --quiet), progress to logf.
func loadFitConfig(s configSpec, logf func(format string, a ...any), stderr io.Writer, allowKV bool) (fit.Config, error) {
	var traces []*fit.Trace
	for _, d := range s.dirs {
		logf("reading %s", d)
		tr, err := fit.LoadTrace(d)
		if err != nil {
			return fit.Config{}, err
		}
		logf("  %d steps, %d snapshots, %d requests, %d journey SCHEDULED, %d KV events", len(tr.Steps), len(tr.Snapshots), len(tr.Requests), len(tr.Scheduled), len(tr.KV))
		if len(tr.Instances) > 1 {
			logf("  %d engines (instances %s), each fitted as a trace of its own", len(tr.Instances), strings.Join(tr.Instances, ", "))
		}
		traces = append(traces, tr)
	}
	k := s.knobs
	var traceKV int64 // what the first trace with steps reports
	for _, tr := range traces {
		if len(tr.Steps) > 0 {
			traceKV = tr.Steps[0].KVTotal
			break
		}
	}
	if k.TotalKVBlocksGPU == 0 {
		k.TotalKVBlocksGPU = traceKV
	}
	m, err := physics.LoadModel(s.model)
	if err != nil {
		return fit.Config{}, fmt.Errorf("%s: model: %w", s.name, err)
	}
	printNotes(stderr, m.Notes) // warnings, shown even with --quiet
	h, err := physics.LoadHardware(s.hardware)
	if err != nil {
		return fit.Config{}, fmt.Errorf("%s: hardware: %w", s.name, err)
	}
	pc, err := physics.NewPhysicsConfig(m, h, s.tp, k)
	if err != nil {
		if s.fromFlags {
			err = knobFlagError(err)
		}
		return fit.Config{}, fmt.Errorf("%s: %w", s.name, err)
	}
	if traceKV > 0 && !allowKV {
		if err := checkKVCapacity(s, m, h, traceKV); err != nil {
			return fit.Config{}, err
		}
	}
	return fit.Config{Name: s.name, Phys: pc, Traces: traces}, nil
}

// fitCommand is the command line recorded in the provenance.
func fitCommand(args []string) string {
	if len(os.Args) < 2 {
		return "calibrate fit " + strings.Join(args, " ")
	}
	return "calibrate " + strings.Join(os.Args[1:], " ")
}

// writeFitOutputs writes the coefficient file to output and the report to
// dir. They replace earlier ones together, and only when every one of them
// is complete.
func writeFitOutputs(output, dir string, res *fit.Result) error {
	data, err := res.File.Marshal()
	if err != nil {
		return err
	}
	var outs atomicfile.Group
	defer outs.Abort()
	if err := outs.WriteFile(output, "-o", data); err != nil {
		return err
	}
	if err := writeReport(&outs, dir, res); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return outs.Commit()
}

// printFitSummary prints what was written, the hold-out MAPE of each
// configuration (beta beside the other objective's, when fitted) and the
// acceptance verdict.
func printFitSummary(w io.Writer, output, dir string, r *fit.Report) {
	fmt.Fprintf(w, "wrote %s and %s/report.md\n", output, dir)
	for i, h := range r.Beta.Holdout {
		other := ""
		if oo := r.Beta.OtherObjective; oo != nil && i < len(oo.Holdout) {
			other = fmt.Sprintf(" (%s objective: %s)", oo.Objective, mapeText(oo.Holdout[i].MAPE))
		}
		fmt.Fprintf(w, "beta  %s: hold-out MAPE %s over %d steps%s\n", h.Config, mapeText(h.MAPE), h.N, other)
	}
	for _, h := range r.Alpha.Holdout {
		fmt.Fprintf(w, "alpha %s: hold-out MAPE %s over %d requests\n", h.Config, mapeText(h.MAPE), h.N)
	}
	verdict := "pass"
	if !r.Pass {
		verdict = "FAIL (see the report's checks)"
	}
	fmt.Fprintf(w, "acceptance: %s\n", verdict)
}

// mapeText is a MAPE as a percentage, or "none (no samples)" for a MAPE
// over no sample (NaN): never 0 %, a perfect score.
func mapeText(x float64) string {
	if math.IsNaN(x) {
		return "none (no samples)"
	}
	return fmt.Sprintf("%.2f%%", x*100)
}

// reportFiles are the files of the report directory (the plots only when
// their vector has hold-out points).
var reportFiles = []string{"report.md", "report.json", "beta_predicted_vs_actual.png", "beta_residuals.png",
	"alpha_predicted_vs_actual.png", "alpha_residuals.png"}

// checkFitOutputs refuses, before the fit, an output (-o, the report's
// files) that is an input (a table or the manifest of a TABLES_DIR,
// --configs, a model or hardware file) or another output.
func checkFitOutputs(o *fitOpts, specs []configSpec, reportDir string) error {
	ins := []atomicfile.Named{{Label: "--configs", Path: o.configs}}
	for _, s := range specs {
		ins = append(ins, atomicfile.Named{Label: "model of " + s.name, Path: s.model}, atomicfile.Named{Label: "hardware of " + s.name, Path: s.hardware})
		for _, d := range s.dirs {
			ins = append(ins, atomicfile.DirInputs("TABLES_DIR "+d, d)...)
		}
	}
	outs := []atomicfile.Named{{Label: "-o", Path: o.output}}
	for _, f := range reportFiles {
		outs = append(outs, atomicfile.Named{Label: "--report", Path: filepath.Join(reportDir, f), MadeDir: true})
	}
	return atomicfile.Check(ins, outs)
}

// writeReport adds the report's files to outs.
func writeReport(outs *atomicfile.Group, dir string, res *fit.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots, err := writePlots(outs, dir, res)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(res.Report, "", "  ")
	if err != nil {
		return err
	}
	if err := outs.WriteFile(filepath.Join(dir, "report.json"), "--report", append(js, '\n')); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := res.Report.WriteMarkdown(&md, plots); err != nil {
		return err
	}
	return outs.WriteFile(filepath.Join(dir, "report.md"), "--report", md.Bytes())
}

// checkKVCapacity refuses a trace whose GPU KV blocks are more than
// KVCapacityFactor from what the configuration holds: the trace proves its
// model and GPU (a Llama-3.1-8B trace fitted as gpt2 reports a quarter of
// gpt2's blocks on the same GPU), whatever the model name says.
func checkKVCapacity(s configSpec, m physics.ModelSpec, h physics.HardwareSpec, traceKV int64) error {
	k := s.knobs
	k.TotalKVBlocksGPU = 0 // sized from memory, as vLLM does
	pc, err := physics.NewPhysicsConfig(m, h, s.tp, k)
	implied := int64(0)
	if err == nil {
		implied = pc.Knobs.TotalKVBlocksGPU
	}
	what := fmt.Sprintf("model %s on %s at TP %d with gpu_memory_utilization %g", m.Name, h.Name, s.tp, k.GPUMemoryUtilization)
	if implied <= 0 {
		return fmt.Errorf("configuration %s: the traces report %d GPU KV blocks (kv.blocks_total_gpu), but %s holds none (%v): give the server's --model, --hardware, --tp and --gpu-memory-utilization, or --allow-kv-mismatch to fit anyway",
			s.name, traceKV, what, err)
	}
	if r := float64(traceKV) / float64(implied); r > KVCapacityFactor || r < 1/KVCapacityFactor {
		return fmt.Errorf("configuration %s: the traces report %d GPU KV blocks (kv.blocks_total_gpu), but %s holds %d (%.2f× the traces' figure): more than %g× apart, so the traces are another configuration's; give the server's --model, --hardware, --tp and --gpu-memory-utilization, or --allow-kv-mismatch to fit anyway",
			s.name, traceKV, what, implied, 1/r, KVCapacityFactor)
	}
	return nil
}
