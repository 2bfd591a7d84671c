package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/physics"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/columns"
)

type predictOpts struct {
	coeffs, batches, tables, perStep string
	model, hardware                  string
	tp                               int
	knobs                            physics.VLLMKnobs // the knob flags given; the others are the file's
	clean                            fit.Options       // --warmup-steps, --outlier-factor (fit.PredictOptions)
}

func newPredictCmd() *cobra.Command {
	o := predictOpts{clean: fit.PredictOptions()}
	cmd := &cobra.Command{
		Use:   "predict --coefficients FILE (--batches CSV | --tables DIR)",
		Short: "Predict step times and queue delays from a coefficient file",
		Long: `predict applies a coefficient file to data.

--batches CSV: one batch composition per row, columns named like the JSON keys
of the feature inputs (docs/physics-spec.md section 7): prefill_tokens,
decode_tokens, scheduled_tokens, num_prefill_reqs, num_decode_reqs,
running_depth, sum_prefill_attn_work, decode_context_tokens,
sum_decode_kv_blocks, preemption_ema, transfer_blocks,
cpu_resident_read_blocks, and for the queue delay waiting_depth,
kv_usage_ratio, prompt_tokens, prefix_hit_ratio, kv_free_bytes. Missing
columns are 0, except scheduled_tokens (default: prefill + decode tokens),
num_decode_reqs (default: decode_tokens) and kv_free_bytes (default: the free
share of the GPU KV cache). A row no engine step can have (scheduled tokens
other than prefill + decode, prefill tokens without a prefill request, a
ratio above 1) is an error naming the line; rows whose predicted step time is
negative are counted in a warning on stderr. Prints CSV
with step_time_ms, and queue_delay_ms when a prompt_tokens column is given.

--tables DIR: the output of calibrate ingest for a trace of the configuration
predicted; prints JSON with the errors of the predicted step times and
QUEUED→SCHEDULED delays against the trace. Every step with a measured cycle
is scored (those without one, such as the last step or a step after which
the engine went idle, are counted by reason under beta_skipped); give
--warmup-steps and --outlier-factor as calibrate fit's defaults (10 and 5)
to clean the trace as the fit does, and beta_outliers lists what the rule
removed. This is how to check a fit against held-out traces.

The configuration is the file's applies_to (its default configuration), with
whatever --model, --hardware, --tp and vLLM flags change. The features are
physics-normalized, so any model, GPU, TP or settings may be predicted: one
outside the configurations the file was fitted on (its fitted_configs) gets a
warning on stderr that names what differs and lists them; a model of another
architecture family (MoE with coefficients fitted on dense models only, or the
reverse) is refused. GPU KV blocks: --kv-blocks-gpu, else with --tables the
trace's kv.blocks_total_gpu, else applies_to's, or derived from device memory
when the model, hardware, TP, block size or --gpu-memory-utilization differ
from it.`,
		Example: `  calibrate predict --coefficients coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml \
      --batches batches.csv
  calibrate predict --coefficients coeffs.yaml --tables heldout/tables
  calibrate predict --coefficients coeffs.yaml --tp 2 --hardware a100-80gb --batches batches.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPredict(cmd, &o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.coeffs, "coefficients", "", "coefficient file (required)")
	f.StringVar(&o.batches, "batches", "", "CSV of batch compositions")
	f.StringVar(&o.tables, "tables", "", "calibrate ingest output directory")
	f.StringVar(&o.perStep, "per-step", "", "with --tables: also write step_id-free CSV of actual and predicted step times (ms) here")
	f.StringVar(&o.model, "model", "", "shipped model name (calibrate physics --list) or config.json (default: the file's applies_to.model)")
	f.StringVar(&o.hardware, "hardware", "", "shipped hardware name (calibrate physics --list) or spec JSON (default: the file's applies_to.hardware)")
	f.IntVar(&o.tp, "tp", 0, "tensor-parallel degree: GPUs per engine (default: the file's applies_to.tp)")
	f.Int64Var(&o.clean.WarmupSteps, "warmup-steps", o.clean.WarmupSteps, "with --tables: leave out steps with id up to this (calibrate fit's default: 10)")
	f.Float64Var(&o.clean.OutlierFactor, "outlier-factor", o.clean.OutlierFactor, "with --tables: apply calibrate fit's outlier rule with this factor (0: score every step; calibrate fit's default: 5)")
	addKnobFlags(f, &o.knobs, "GPU KV blocks (default: see above)")
	for _, name := range knobFlags {
		fl := f.Lookup(name) // its default is the zero value, which help does not show
		if !strings.Contains(fl.Usage, "default") {
			fl.Usage += " (default: the file's applies_to)"
		}
	}
	return cmd
}

// knobFlags are addKnobFlags' flags.
var knobFlags = []string{"max-num-seqs", "max-num-batched-tokens", "block-size", "gpu-memory-utilization", "enable-chunked-prefill",
	"enable-prefix-caching", "cpu-offloading", "kv-blocks-gpu", "kv-blocks-cpu"}

// loadEither loads a shipped name or path with load, retrying the name in
// lower case (applies_to records names as the specs spell them, e.g.
// "H100-SXM"); the first error is the one reported.
func loadEither[T any](load func(string) (T, error), name string) (T, error) {
	v, err := load(name)
	if err != nil {
		if v2, err2 := load(strings.ToLower(name)); err2 == nil {
			return v2, nil
		}
	}
	return v, err
}

// runPredict is calibrate predict: it resolves the configuration from the
// coefficient file's applies_to and the flags, then predicts --batches or
// scores the file on --tables.
func runPredict(cmd *cobra.Command, o *predictOpts) error {
	if err := checkPredictFlags(cmd, o); err != nil {
		return err
	}
	cf, err := coefficients.Load(o.coeffs)
	if err != nil {
		return fmt.Errorf("--coefficients: %w", err)
	}
	pc, tr, err := predictConfig(cmd, o, cf)
	if err != nil {
		return err
	}
	warnings, err := cf.Check(pc)
	if err != nil {
		return fmt.Errorf("--coefficients %s: %w", o.coeffs, err)
	}
	for _, msg := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", o.coeffs, msg)
	}
	if o.batches != "" {
		return predictBatches(cmd.OutOrStdout(), cmd.ErrOrStderr(), o.batches, pc, cf)
	}
	return scoreTables(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, pc, cf, tr)
}

// checkPredictFlags refuses flags that do not go together and an output
// (--per-step) that is an input.
func checkPredictFlags(cmd *cobra.Command, o *predictOpts) error {
	if o.coeffs == "" {
		return errors.New("--coefficients is required")
	}
	if (o.batches == "") == (o.tables == "") {
		return errors.New("give exactly one of --batches and --tables")
	}
	for _, name := range []string{"warmup-steps", "outlier-factor", "per-step"} {
		if o.tables == "" && cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies only with --tables", name)
		}
	}
	ins := []atomicfile.Named{{Label: "--coefficients", Path: o.coeffs}, {Label: "--model", Path: o.model}, {Label: "--hardware", Path: o.hardware}}
	if o.tables != "" {
		ins = append(ins, atomicfile.DirInputs("--tables", o.tables)...)
	}
	return atomicfile.Check(ins, []atomicfile.Named{{Label: "--per-step", Path: o.perStep}})
}

// predictConfig is the configuration predicted: cf's applies_to with what
// --model, --hardware, --tp and the vLLM flags change, the GPU KV blocks
// resolved as the help says. With --tables it also returns the trace.
func predictConfig(cmd *cobra.Command, o *predictOpts, cf *coefficients.File) (*physics.PhysicsConfig, *fit.Trace, error) {
	a := cf.AppliesTo
	model, hw, tp := a.Model, a.Hardware, a.TP
	if o.model != "" {
		model = o.model
	}
	if o.hardware != "" {
		hw = o.hardware
	}
	flags := cmd.Flags()
	if flags.Changed("tp") {
		if o.tp < 1 {
			return nil, nil, fmt.Errorf("--tp must be >= 1, got %d", o.tp)
		}
		tp = o.tp
	}
	m, err := loadEither(physics.LoadModel, model)
	if err != nil {
		return nil, nil, fmt.Errorf("--model: %w", err)
	}
	h, err := loadEither(physics.LoadHardware, hw)
	if err != nil {
		return nil, nil, fmt.Errorf("--hardware: %w", err)
	}
	given := o.knobs
	if err := applyOffloadRule(flags, &given); err != nil {
		return nil, nil, err
	}
	k := givenKnobs(flags, a.VLLM, given)
	printNotes(cmd.ErrOrStderr(), m.Notes)
	var tr *fit.Trace
	if o.tables != "" {
		if tr, err = fit.LoadTrace(o.tables); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case flags.Changed("kv-blocks-gpu"):
		k.TotalKVBlocksGPU = o.knobs.TotalKVBlocksGPU
	case tr != nil && len(tr.Steps) > 0:
		k.TotalKVBlocksGPU = tr.Steps[0].KVTotal
	case !strings.EqualFold(m.Name, a.Model) || !strings.EqualFold(h.Name, a.Hardware) || tp != a.TP ||
		k.BlockSizeTokens != a.VLLM.BlockSizeTokens || flags.Changed("gpu-memory-utilization"):
		k.TotalKVBlocksGPU = 0 // applies_to's count is another configuration's: derive it
	}
	pc, err := physics.NewPhysicsConfig(m, h, tp, k)
	if err != nil {
		return nil, nil, fmt.Errorf("%s on %d × %s: %w", m.Name, tp, h.Name, knobFlagError(err))
	}
	return pc, tr, nil
}

// givenKnobs is k with the vLLM flags given on the command line taken from
// given (CPU offloading is on exactly when --kv-blocks-cpu > 0). The GPU KV
// blocks are left to predictConfig.
func givenKnobs(flags *pflag.FlagSet, k, given physics.VLLMKnobs) physics.VLLMKnobs {
	for _, c := range []struct {
		flag string
		set  func()
	}{
		{"max-num-seqs", func() { k.MaxNumSeqs = given.MaxNumSeqs }},
		{"max-num-batched-tokens", func() { k.MaxBatchedTokens = given.MaxBatchedTokens }},
		{"block-size", func() { k.BlockSizeTokens = given.BlockSizeTokens }},
		{"gpu-memory-utilization", func() { k.GPUMemoryUtilization = given.GPUMemoryUtilization }},
		{"enable-chunked-prefill", func() { k.ChunkedPrefillEnabled = given.ChunkedPrefillEnabled }},
		{"enable-prefix-caching", func() { k.PrefixCachingEnabled = given.PrefixCachingEnabled }},
		{"kv-blocks-cpu", func() { k.TotalKVBlocksCPU, k.CPUOffloading = given.TotalKVBlocksCPU, given.TotalKVBlocksCPU > 0 }},
	} {
		if flags.Changed(c.flag) {
			c.set()
		}
	}
	return k
}

// scoreTables scores cf on the trace tr of --tables and prints the errors
// as JSON, warning on stderr about a vector with no sample scored; with
// --per-step it also writes each step's actual and predicted time.
func scoreTables(w, stderr io.Writer, o *predictOpts, pc *physics.PhysicsConfig, cf *coefficients.File, tr *fit.Trace) error {
	ev, err := fit.Evaluate(fit.Config{Name: o.tables, Phys: pc, Traces: []*fit.Trace{tr}}, cf, o.clean, o.perStep != "")
	if err != nil {
		return fmt.Errorf("%s: %w", o.tables, err)
	}
	for _, v := range []struct {
		what string
		n    int64
	}{{"step (beta)", ev.Beta.N}, {"request (alpha)", ev.Alpha.N}} {
		if v.n == 0 {
			fmt.Fprintf(stderr, "warning: %s: no %s scored: its errors are null (no samples), not 0\n", o.tables, v.what)
		}
	}
	if o.perStep != "" {
		var b strings.Builder
		b.WriteString("actual_ms,predicted_ms\n")
		for _, p := range ev.Points {
			fmt.Fprintf(&b, "%s,%s\n", strconv.FormatFloat(p.Actual*1e3, 'g', -1, 64), strconv.FormatFloat(p.Predicted*1e3, 'g', -1, 64))
		}
		if err := atomicfile.WriteFile(o.perStep, "--per-step", []byte(b.String())); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(ev)
}

// jsonFields maps the JSON keys of a struct's fields to their index.
func jsonFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		out[strings.Split(t.Field(i).Tag.Get("json"), ",")[0]] = i
	}
	return out
}

// predictBatches prints, as CSV, the step time (and with a prompt_tokens
// column the queue delay) that cf predicts for each batch composition of
// the --batches CSV at path, and warns on stderr about negative step times.
func predictBatches(w, stderr io.Writer, path string, pc *physics.PhysicsConfig, cf *coefficients.File) error {
	negative, firstNegative := 0, 0
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--batches: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.TrimLeadingSpace = true
	bc, err := readBatchHeader(r, path)
	if err != nil {
		return err
	}
	out := csv.NewWriter(w)
	cols := append([]string{"row"}, "step_time_ms")
	if bc.hasPrompt {
		cols = append(cols, "queue_delay_ms")
	}
	if err := out.Write(cols); err != nil {
		return err
	}
	for row := 1; ; row++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("--batches %s: %w", path, err)
		}
		b, a, err := bc.parseRow(rec, row, path)
		if err != nil {
			return err
		}
		step, line := bc.predict(row, &b, &a, pc, cf)
		if step < 0 {
			if negative == 0 {
				firstNegative = row
			}
			negative++
		}
		if err := out.Write(line); err != nil {
			return err
		}
	}
	out.Flush()
	if negative > 0 {
		fmt.Fprintf(stderr, "warning: --batches %s: %d rows predict a negative step time (first: row %d): the coefficients extrapolate below zero there\n", path, negative, firstNegative)
	}
	return out.Error()
}

// batchColumns is what the header of a --batches CSV says.
type batchColumns struct {
	header        []string
	betaF, alphaF map[string]int // JSON key → field index in BetaInput, AlphaInput
	// Which of the columns with a default (or, for prompt_tokens, that
	// ask for the queue delay) were given.
	hasPrompt, hasSched, hasFree, hasNumDecode bool
}

// readBatchHeader reads the header of a --batches CSV, refusing a column
// that names no feature input.
func readBatchHeader(r *csv.Reader, path string) (*batchColumns, error) {
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("--batches %s: header: %w", path, err)
	}
	columns.TrimBOM(header)
	if err := columns.Duplicate(header, nil); err != nil {
		return nil, fmt.Errorf("--batches %s: line 1: %w", path, err)
	}
	bc := &batchColumns{header: header,
		betaF: jsonFields(reflect.TypeOf(features.BetaInput{})), alphaF: jsonFields(reflect.TypeOf(features.AlphaInput{}))}
	for j, name := range header {
		_, inB := bc.betaF[name]
		_, inA := bc.alphaF[name]
		if !inB && !inA {
			return nil, fmt.Errorf("--batches %s: line 1, column %d: unknown column %q", path, j+1, clip.String(name))
		}
		bc.hasPrompt = bc.hasPrompt || name == "prompt_tokens"
		bc.hasSched = bc.hasSched || name == "scheduled_tokens"
		bc.hasNumDecode = bc.hasNumDecode || name == "num_decode_reqs"
		bc.hasFree = bc.hasFree || name == "kv_free_bytes"
	}
	return bc, nil
}

// parseRow reads data row row (line row+1) into the feature inputs, fills
// scheduled_tokens and num_decode_reqs when their columns are missing, and
// refuses a cell that is not a number ≥ 0 (an integer for an integer field)
// and a composition no engine step can have (checkBatchRow).
func (bc *batchColumns) parseRow(rec []string, row int, path string) (b features.BetaInput, a features.AlphaInput, err error) {
	header := bc.header
	bv, av := reflect.ValueOf(&b).Elem(), reflect.ValueOf(&a).Elem()
	for j, cell := range rec {
		v, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
		if err != nil || v < 0 || v != v {
			return b, a, fmt.Errorf("--batches %s: line %d, column %d (%s): %q is not a number >= 0", path, row+1, j+1, clip.String(header[j]), clip.String(cell))
		}
		for _, s := range []struct {
			v  reflect.Value
			fs map[string]int
		}{{bv, bc.betaF}, {av, bc.alphaF}} {
			if i, ok := s.fs[header[j]]; ok {
				fv := s.v.Field(i)
				if fv.Kind() == reflect.Int64 {
					if v != float64(int64(v)) {
						return b, a, fmt.Errorf("--batches %s: line %d, column %d (%s): %q is not an integer", path, row+1, j+1, clip.String(header[j]), clip.String(cell))
					}
					fv.SetInt(int64(v))
				} else {
					fv.SetFloat(v)
				}
			}
		}
	}
	if !bc.hasSched {
		b.ScheduledTokens = b.PrefillTokens + b.DecodeTokens
	}
	if !bc.hasNumDecode {
		b.NumDecodeReqs = b.DecodeTokens
	}
	if err := checkBatchRow(&b, &a); err != nil {
		return b, a, fmt.Errorf("--batches %s: line %d: %w", path, row+1, err)
	}
	return b, a, nil
}

// predict is row's predicted step time in seconds and its output line:
// the row number, the step time and, with a prompt_tokens column, the
// queue delay (kv_free_bytes defaulting to the free share of the GPU KV
// cache), both in ms.
func (bc *batchColumns) predict(row int, b *features.BetaInput, a *features.AlphaInput, pc *physics.PhysicsConfig, cf *coefficients.File) (float64, []string) {
	bx := features.Beta(cf.Spec(), pc, *b) // the file's spec: v2 files have 9 features
	var step float64
	for j, c := range cf.Beta {
		step += c * bx[j]
	}
	line := []string{strconv.Itoa(row), strconv.FormatFloat(step*1e3, 'f', 4, 64)}
	if bc.hasPrompt {
		if !bc.hasFree {
			a.KVFreeBytes = (1 - min(1, a.KVUsageRatio)) * pc.GPUKVCapacityBytes
		}
		ax := features.AlphaFeatures(pc, *a)
		var q float64
		for j, c := range cf.Alpha {
			q += c * ax[j]
		}
		line = append(line, strconv.FormatFloat(q*1e3, 'f', 4, 64))
	}
	return step, line
}

// checkBatchRow refuses a batch composition that no engine step can have.
func checkBatchRow(b *features.BetaInput, a *features.AlphaInput) error {
	switch {
	case b.ScheduledTokens != b.PrefillTokens+b.DecodeTokens:
		return fmt.Errorf("scheduled_tokens %d is not prefill_tokens %d + decode_tokens %d", b.ScheduledTokens, b.PrefillTokens, b.DecodeTokens)
	case b.PrefillTokens > 0 && b.NumPrefillReqs == 0:
		return fmt.Errorf("prefill_tokens %d with num_prefill_reqs 0", b.PrefillTokens)
	case b.NumPrefillReqs > b.PrefillTokens:
		return fmt.Errorf("num_prefill_reqs %d is more than prefill_tokens %d (a prefill request schedules at least one token)", b.NumPrefillReqs, b.PrefillTokens)
	case b.NumDecodeReqs != b.DecodeTokens:
		return fmt.Errorf("num_decode_reqs %d is not decode_tokens %d (a decode request schedules one token)", b.NumDecodeReqs, b.DecodeTokens)
	case a.KVUsageRatio > 1:
		return fmt.Errorf("kv_usage_ratio %v is more than 1", a.KVUsageRatio)
	case a.PrefixHitRatio > 1:
		return fmt.Errorf("prefix_hit_ratio %v is more than 1", a.PrefixHitRatio)
	}
	return nil
}
