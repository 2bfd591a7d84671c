// Package coefficients reads and writes the versioned YAML file that holds
// the calibrated coefficients of the physics-normalized latency model
// (docs/physics-spec.md): the alpha vector of the arrival-to-schedule delay,
// the beta vector of the step time, the request overheads the simulator adds
// around them, what configuration they apply to and how they were made.
//
// # File format (schema_version 1)
//
// testdata/valid.yaml is a complete example. In outline:
//
//	# blis physics-model coefficients. The dot products are seconds.
//	schema_version: 1
//	feature_spec_version: "1.0"      # docs/physics-spec.md version of the features
//	applies_to:
//	  model: llama-3.1-8b            # physics.ModelSpec.Name
//	  hardware: h100-sxm             # physics.HardwareSpec.Name
//	  tp: 1
//	  vllm:                          # physics.VLLMKnobs, keyed by its JSON tags
//	    max_num_seqs: 256
//	    ...
//	fitted_configs:                  # optional: every configuration of the fit
//	  - name: h100-tp1               # the configuration's name in calibrate fit
//	    model: llama-3.1-8b
//	    hardware: h100-sxm
//	    tp: 1
//	    architecture: dense          # dense or moe (ArchDense, ArchMoE)
//	    max_num_seqs: 256            # the knobs that change feature values
//	    max_batched_tokens: 8192
//	    chunked_prefill_enabled: true
//	    cpu_offloading: false
//	    block_size_tokens: 16
//	    samples_beta: 5678           # usable samples of this configuration
//	    samples_alpha: 1234
//	gamma: 0.3                       # preemption EMA factor of features a9 and b12
//	alpha:                           # features.AlphaNames, all 11, in that order
//	  batch_saturation: 0.001
//	  ...
//	beta:                            # the spec's beta names (features.BetaNamesOf), in order
//	  prefill_linear_compute: 1.2
//	  ...
//	overheads:                       # microseconds, all >= 0
//	  arrival_base_us: 900.0         # api.ARRIVED -> journey.QUEUED
//	  arrival_per_prompt_token_us: 0.05
//	  departure_base_us: 300.0       # journey.FINISHED -> api.DEPARTED
//	  departure_per_output_token_us: 2.0
//	fit:                             # optional: how calibrate fit chose them
//	  lambda_alpha: 0.1
//	  ...
//	provenance:
//	  tool: calibrate
//	  tool_version: "0.1.0"
//	  command: calibrate fit tables/ -o coeffs.yaml
//	  inputs:                        # optional
//	    - path: tables/steps.parquet
//	      sha256: "<64 lowercase hex digits>"
//	      rows: 12345
//	  notes: free text               # optional
//
// The loader is strict: a misspelt key would otherwise leave a coefficient at
// zero and the simulator would run without complaint. Unknown, duplicate and
// missing keys are errors (only fitted_configs, fit, provenance.inputs and
// provenance.notes may be left out, and a fit block or a fitted_configs
// entry has all its keys), alpha and beta must
// list every feature in vector order, numbers must be finite, and strings,
// numbers and booleans must be what YAML resolves them to (a version such as
// 1.0 must be quoted, yes is not a boolean). Aliases are not supported. Every
// error starts with the file name and names the key path, and the line where
// one is known.
//
// Marshal writes the same layout deterministically. Floats are written in
// their shortest form that reads back bit for bit, always with a decimal point
// so that every YAML reader, including YAML 1.1 ones such as PyYAML, takes
// them as floats.
//
// A change that an older reader would misread bumps SchemaVersion; a reader
// refuses a file with a higher schema_version. (fitted_configs did not bump
// it: a reader from before it refuses the key as unknown rather than
// misreading the file, and files without it still load.)
//
// # What a file applies to
//
// applies_to is the default configuration: calibrate predict and blis run
// --coefficients take its model, hardware, TP and vLLM settings for those
// their flags do not give.
// fitted_configs lists every configuration the fit used (a file without it,
// older or hand-written, was fitted on applies_to alone: see FittedSpan).
// The features are physics-normalized, so the coefficients may predict any
// model, GPU, TP or settings; Check says how far a run is from what was
// fitted: warnings for what lies outside the fitted configurations, an
// error only for what the features cannot carry over (see Check).
package coefficients

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/physics"
)

// SchemaVersion is the schema_version this package reads and writes.
const SchemaVersion = 1

// FeatureSpecVersion is the docs/physics-spec.md version calibrate fit
// writes by default. A file is accepted when its feature_spec_version has
// the major version of a spec the features package implements (1, 2 or 3).
const FeatureSpecVersion = features.DefaultSpec

// SpecOf maps a file's feature_spec_version to the features spec it follows
// by its major version ("1.x" → features.SpecV1, "2.x" → features.SpecV2,
// "3.x" → features.SpecV3), or returns it unchanged when the major version
// is unknown.
func SpecOf(version string) string {
	switch major, _, _ := strings.Cut(version, "."); major {
	case "1":
		return features.SpecV1
	case "2":
		return features.SpecV2
	case "3":
		return features.SpecV3
	}
	return version
}

// Spec is the features spec of the file's beta vector.
func (f *File) Spec() string { return SpecOf(f.FeatureSpecVersion) }

// defaultSource names a File that did not come from a file, in errors.
const defaultSource = "coefficients"

// File is one coefficient file.
type File struct {
	SchemaVersion      int
	FeatureSpecVersion string
	AppliesTo          AppliesTo
	// FittedConfigs are the configurations the coefficients were fitted
	// on; nil for a file without the list (see FittedSpan).
	FittedConfigs []FittedConfig
	// Gamma is the preemption EMA factor used to compute features a9 and
	// b12; the simulator must use the same one.
	Gamma float64
	// Alpha and Beta are indexed like features.AlphaNames and BetaNames.
	Alpha     [features.NumAlpha]float64
	Beta      [features.NumBeta]float64
	Overheads Overheads
	// Fit is nil when the file has no fit block (a hand-written file).
	Fit        *Fit
	Provenance Provenance
}

// AppliesTo is the default configuration of the coefficients: the first one
// calibrate fit used.
type AppliesTo struct {
	Model    string // physics.ModelSpec.Name
	Hardware string // physics.HardwareSpec.Name
	TP       int
	VLLM     physics.VLLMKnobs
}

// Architecture families of a model, as far as the features tell them apart.
const (
	ArchDense = "dense" // one MLP per layer
	ArchMoE   = "moe"   // routed experts (physics.ModelSpec.IsMoE)
)

// Architecture is the family of m: ArchMoE or ArchDense.
func Architecture(m physics.ModelSpec) string {
	if m.IsMoE() {
		return ArchMoE
	}
	return ArchDense
}

// FittedConfig is one configuration the coefficients were fitted on, with
// the vLLM knobs that change feature values (the KV cache size, memory
// utilization and prefix caching do not enter the span).
type FittedConfig struct {
	Name         string // the configuration's name in calibrate fit
	Model        string // physics.ModelSpec.Name
	Hardware     string // physics.HardwareSpec.Name
	TP           int
	Architecture string // ArchDense or ArchMoE

	MaxNumSeqs            int64
	MaxBatchedTokens      int64
	ChunkedPrefillEnabled bool
	CPUOffloading         bool
	BlockSizeTokens       int64

	// Usable samples of this configuration (after cleaning, hold-out
	// included).
	SamplesBeta, SamplesAlpha int64
}

// NewFittedConfig describes a configuration of physics constants.
func NewFittedConfig(name string, pc *physics.PhysicsConfig, samplesBeta, samplesAlpha int64) FittedConfig {
	k := pc.Knobs
	return FittedConfig{
		Name: name, Model: pc.Model.Name, Hardware: pc.Hardware.Name, TP: pc.TP, Architecture: Architecture(pc.Model),
		MaxNumSeqs: k.MaxNumSeqs, MaxBatchedTokens: k.MaxBatchedTokens, ChunkedPrefillEnabled: k.ChunkedPrefillEnabled,
		CPUOffloading: k.CPUOffloading, BlockSizeTokens: k.BlockSizeTokens,
		SamplesBeta: samplesBeta, SamplesAlpha: samplesAlpha,
	}
}

// Overheads are the per-request latencies outside the engine, in
// microseconds.
// The simulator (sim.Physics, sim.Roofline) uses them through ArrivalUs and
// DepartureUs, the one statement of the two formulas.
type Overheads struct {
	ArrivalBaseUs             float64 // api.ARRIVED -> journey.QUEUED
	ArrivalPerPromptTokenUs   float64 // plus this per prompt token (tokenization)
	DepartureBaseUs           float64 // journey.FINISHED -> api.DEPARTED
	DeparturePerOutputTokenUs float64 // plus this per output token (detokenization)
}

// ArrivalUs is the api.ARRIVED -> journey.QUEUED delay of a prompt, µs.
func (o Overheads) ArrivalUs(promptTokens int64) float64 {
	return o.ArrivalBaseUs + o.ArrivalPerPromptTokenUs*float64(promptTokens)
}

// DepartureUs is the journey.FINISHED -> api.DEPARTED delay of a
// response, µs.
func (o Overheads) DepartureUs(outputTokens int64) float64 {
	return o.DepartureBaseUs + o.DeparturePerOutputTokenUs*float64(outputTokens)
}

// Validate checks that every overhead is finite and >= 0; the error names
// the key under overheads.
func (o Overheads) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"arrival_base_us", o.ArrivalBaseUs}, {"arrival_per_prompt_token_us", o.ArrivalPerPromptTokenUs},
		{"departure_base_us", o.DepartureBaseUs}, {"departure_per_output_token_us", o.DeparturePerOutputTokenUs},
	} {
		if !(f.v >= 0) || f.v > MaxMagnitude {
			return fmt.Errorf("overhead %s must be within [0, %g], got %v", f.name, MaxMagnitude, f.v)
		}
	}
	return nil
}

// Fit records how calibrate fit chose the coefficients.
type Fit struct {
	LambdaAlpha, LambdaBeta float64   // ridge penalties chosen
	Folds                   int       // cross-validation folds
	LambdaGrid, GammaGrid   []float64 // the values searched
	AlphaCVMAPE, BetaCVMAPE float64   // cross-validated MAPE, as fractions
	BetaTarget              string    // where the step-time target came from
	// Objective is what the beta fit minimized: ObjectiveRelative or
	// ObjectiveAbsolute; "" in files written before it was recorded
	// (absolute).
	Objective    string
	SamplesAlpha int64
	SamplesBeta  int64
}

// Beta fit objectives (Fit.Objective).
const (
	// ObjectiveRelative minimizes Σ((pred − t)/t)²: ridge weights 1/t².
	ObjectiveRelative = "relative"
	// ObjectiveAbsolute minimizes Σ(pred − t)².
	ObjectiveAbsolute = "absolute"
)

// Provenance says which tool wrote the file and how to reproduce it.
type Provenance struct {
	Tool        string
	ToolVersion string
	Command     string
	Inputs      []Input // nil when there are none
	Notes       string
	// Holdout is nil unless the fit held out the end of its traces
	// (calibrate fit --holdout-after).
	Holdout *Holdout
}

// Holdout records what a fit left out of its traces so that a validation
// can use exactly that: every request that arrived after After, and every
// step that started after it. HeldOut is the rule, declared once for the
// fit and the validation.
type Holdout struct {
	// After is the instant, wall-clock, in RFC 3339 with nanoseconds in
	// UTC; AfterUnixNs the same instant in Unix nanoseconds.
	After       string
	AfterUnixNs int64
	Requests    int64 // requests held out
	Steps       int64 // sampled steps held out
}

// NewHoldout is the record of a split at afterUnixNs.
func NewHoldout(afterUnixNs, requests, steps int64) *Holdout {
	return &Holdout{After: FormatInstant(afterUnixNs), AfterUnixNs: afterUnixNs, Requests: requests, Steps: steps}
}

// FormatInstant writes Unix nanoseconds as RFC 3339 in UTC with every
// nanosecond digit needed.
func FormatInstant(unixNs int64) string {
	return time.Unix(0, unixNs).UTC().Format(time.RFC3339Nano)
}

// HeldOut says whether a request is held out: it is placed at its
// arrival at the API server (wall-clock Unix ns), or at its QUEUED event
// when it has no arrival (a request without its API span), and held out
// when that is after the split. A request with neither (-1) is not.
func (h *Holdout) HeldOut(arrivedWallNs, queuedWallNs int64) bool {
	at := arrivedWallNs
	if at < 0 {
		at = queuedWallNs
	}
	return at >= 0 && at > h.AfterUnixNs
}

// Input is one file the coefficients were fitted from.
type Input struct {
	Path   string
	SHA256 string // 64 lowercase hex digits
	Rows   int64
}

// Load reads and parses the coefficient file at path.
func Load(path string) (*File, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// keyError is an error about one key of a coefficient file.
type keyError struct {
	source string
	line   int // 0 when unknown
	path   string
	msg    string
	err    error // the underlying error, if any
}

func (e *keyError) Error() string {
	var b strings.Builder
	b.WriteString(e.source)
	if e.line > 0 {
		fmt.Fprintf(&b, ": line %d", e.line)
	}
	fmt.Fprintf(&b, ": %s: %s", e.path, e.msg)
	return b.String()
}

func (e *keyError) Unwrap() error { return e.err }

// Validate checks the values of f: the schema and feature spec versions, what
// it applies to, and the ranges of the coefficients, overheads, fit and
// provenance. Parse runs it, and Marshal refuses a File that fails it.
func (f *File) Validate() error { return f.validate(defaultSource, nil) }

// checker keeps the first failed check; lines maps key paths to the lines
// Parse found them on.
type checker struct {
	source string
	lines  map[string]int
	err    error
}

func (c *checker) check(ok bool, path, format string, args ...any) {
	if !ok && c.err == nil {
		c.err = &keyError{source: c.source, line: c.lines[path], path: path, msg: fmt.Sprintf(format, args...)}
	}
}

func (c *checker) finite(path string, v float64) {
	c.check(!math.IsNaN(v) && !math.IsInf(v, 0), path, "must be a finite number, got %v", v)
}

func (c *checker) nonNegative(path string, v float64) {
	c.finite(path, v)
	c.check(v >= 0, path, "must be >= 0, got %v", v)
}

// MaxMagnitude bounds every coefficient and overhead a file may hold. Beta
// and alpha coefficients multiply features in seconds at a hardware
// ceiling, so fitted values are of order 0.1–10, and overheads are µs; a
// magnitude of 1e9 is beyond anything physical, and bounding it here keeps
// every product the simulator forms far from overflow (the simulator also
// checks the step times a file gives on the configuration it runs).
const MaxMagnitude = 1e9

// coefficient checks a finite value within ±MaxMagnitude.
func (c *checker) coefficient(path string, v float64) {
	c.finite(path, v)
	c.check(math.Abs(v) <= MaxMagnitude, path, "magnitude %v is beyond %g, which no fit of physical data gives", v, MaxMagnitude)
}

func (c *checker) fraction(path string, v float64) {
	c.finite(path, v)
	c.check(v > 0 && v <= 1, path, "must be in (0, 1], got %v", v)
}

// text checks a string field; Marshal needs valid UTF-8.
func (c *checker) text(path, s string, required bool) {
	c.check(utf8.ValidString(s), path, "is not valid UTF-8")
	c.check(!required || strings.TrimSpace(s) != "", path, "must not be empty")
}

func (f *File) validate(source string, lines map[string]int) error {
	c := &checker{source: source, lines: lines}
	c.check(f.SchemaVersion <= SchemaVersion, "schema_version", "written by a newer tool (schema_version %d, this tool reads %d)", f.SchemaVersion, SchemaVersion)
	c.check(f.SchemaVersion == SchemaVersion, "schema_version", "must be %d, got %d", SchemaVersion, f.SchemaVersion)
	c.text("feature_spec_version", f.FeatureSpecVersion, true)
	major, _, _ := strings.Cut(f.FeatureSpecVersion, ".")
	_, specErr := features.BetaNamesOf(f.Spec())
	c.check(specErr == nil, "feature_spec_version", "%q has major version %q; this tool computes the features of specs %s", f.FeatureSpecVersion, major, strings.Join(features.Specs, ", "))

	a := &f.AppliesTo
	c.text("applies_to.model", a.Model, true)
	c.text("applies_to.hardware", a.Hardware, true)
	c.check(a.TP >= 1, "applies_to.tp", "must be >= 1, got %d", a.TP)
	if err := a.VLLM.Validate(); err != nil && c.err == nil {
		// Re-key physics' error by the file's key path.
		path, msg := "applies_to.vllm", err.Error()
		var fe *physics.FieldError
		if errors.As(err, &fe) {
			path, msg = path+"."+fe.Field, fe.Msg
		}
		c.err = &keyError{source: source, line: lines[path], path: path, msg: msg, err: err}
	}

	for i, fc := range f.FittedConfigs {
		path := fmt.Sprintf("fitted_configs[%d].", i)
		c.text(path+"name", fc.Name, true)
		c.text(path+"model", fc.Model, true)
		c.text(path+"hardware", fc.Hardware, true)
		c.check(fc.TP >= 1, path+"tp", "must be >= 1, got %d", fc.TP)
		c.check(fc.Architecture == ArchDense || fc.Architecture == ArchMoE, path+"architecture", "must be %s or %s, got %.40q", ArchDense, ArchMoE, fc.Architecture)
		c.check(fc.MaxNumSeqs > 0, path+"max_num_seqs", "must be > 0, got %d", fc.MaxNumSeqs)
		c.check(fc.MaxBatchedTokens > 0, path+"max_batched_tokens", "must be > 0, got %d", fc.MaxBatchedTokens)
		c.check(fc.BlockSizeTokens > 0, path+"block_size_tokens", "must be > 0, got %d", fc.BlockSizeTokens)
		c.check(fc.SamplesBeta >= 0, path+"samples_beta", "must be >= 0, got %d", fc.SamplesBeta)
		c.check(fc.SamplesAlpha >= 0, path+"samples_alpha", "must be >= 0, got %d", fc.SamplesAlpha)
	}

	c.fraction("gamma", f.Gamma)
	for i, v := range f.Alpha {
		c.coefficient("alpha."+features.AlphaNames[i], v)
	}
	names := features.BetaNames[:]
	if specErr == nil {
		names, _ = features.BetaNamesOf(f.Spec())
	}
	for i, v := range f.Beta {
		if i < len(names) {
			c.coefficient("beta."+names[i], v)
		} else {
			c.check(v == 0, "beta", "feature spec %s has %d beta features; coefficient %d must be 0, got %v", f.Spec(), len(names), i+1, v)
		}
	}

	for _, o := range []struct {
		key string
		v   float64
	}{
		{"arrival_base_us", f.Overheads.ArrivalBaseUs}, {"arrival_per_prompt_token_us", f.Overheads.ArrivalPerPromptTokenUs},
		{"departure_base_us", f.Overheads.DepartureBaseUs}, {"departure_per_output_token_us", f.Overheads.DeparturePerOutputTokenUs},
	} {
		c.nonNegative("overheads."+o.key, o.v)
		c.coefficient("overheads."+o.key, o.v)
	}

	if fit := f.Fit; fit != nil {
		c.nonNegative("fit.lambda_alpha", fit.LambdaAlpha)
		c.nonNegative("fit.lambda_beta", fit.LambdaBeta)
		c.check(fit.Folds >= 0, "fit.folds", "must be >= 0, got %d", fit.Folds)
		for i, v := range fit.LambdaGrid {
			c.nonNegative(fmt.Sprintf("fit.lambda_grid[%d]", i), v)
		}
		for i, v := range fit.GammaGrid {
			c.fraction(fmt.Sprintf("fit.gamma_grid[%d]", i), v)
		}
		c.nonNegative("fit.alpha_cv_mape", fit.AlphaCVMAPE)
		c.nonNegative("fit.beta_cv_mape", fit.BetaCVMAPE)
		c.text("fit.beta_target", fit.BetaTarget, false)
		c.check(fit.Objective == "" || fit.Objective == ObjectiveRelative || fit.Objective == ObjectiveAbsolute,
			"fit.objective", "must be %s or %s, got %q", ObjectiveRelative, ObjectiveAbsolute, clip.String(fit.Objective))
		c.check(fit.SamplesAlpha >= 0, "fit.samples_alpha", "must be >= 0, got %d", fit.SamplesAlpha)
		c.check(fit.SamplesBeta >= 0, "fit.samples_beta", "must be >= 0, got %d", fit.SamplesBeta)
	}

	p := &f.Provenance
	c.text("provenance.tool", p.Tool, true)
	c.text("provenance.tool_version", p.ToolVersion, true)
	c.text("provenance.command", p.Command, true)
	for i, in := range p.Inputs {
		path := fmt.Sprintf("provenance.inputs[%d].", i)
		c.text(path+"path", in.Path, true)
		c.check(isSHA256(in.SHA256), path+"sha256", "must be 64 lowercase hex digits, got %.80q", in.SHA256)
		c.check(in.Rows >= 0, path+"rows", "must be >= 0, got %d", in.Rows)
	}
	c.text("provenance.notes", p.Notes, false)
	if h := p.Holdout; h != nil {
		c.check(h.AfterUnixNs > 0, "provenance.holdout.after_unix_ns", "must be > 0, got %d", h.AfterUnixNs)
		c.check(h.After == FormatInstant(h.AfterUnixNs), "provenance.holdout.after", "must be after_unix_ns in RFC 3339 (%s), got %q", FormatInstant(h.AfterUnixNs), h.After)
		c.check(h.Requests >= 0, "provenance.holdout.requests", "must be >= 0, got %d", h.Requests)
		c.check(h.Steps >= 0, "provenance.holdout.steps", "must be >= 0, got %d", h.Steps)
	}
	return c.err
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
