package fit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
)

// minSamplesPerFold is the fewest training samples per fold (and per
// configuration) a vector needs to be fitted.
const minSamplesPerFold = 2

// Run builds the training samples of every configuration, fits beta, alpha
// and the overheads, validates them and returns the coefficient file (which
// applies to the first configuration) and the report. command is recorded
// in the provenance.
func Run(cfgs []Config, opt Options, command string) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if len(cfgs) == 0 {
		return nil, errors.New("no configuration to fit")
	}
	if err := checkDuplicates(cfgs); err != nil {
		return nil, err
	}
	rep := newReport(&opt, command)
	ts := &trainingSet{sources: map[string]int64{}}
	for _, cfg := range cfgs {
		if err := ts.addConfig(cfg, &opt, rep); err != nil {
			return nil, err
		}
	}
	rep.Beta.Skipped, rep.Alpha.Skipped = sortedCounts(ts.betaSkipped), sortedCounts(ts.alphaSkipped)
	rep.Beta.Sources = ts.sources
	rep.Overheads = sortedCounts(rep.Overheads)

	bf, err := ts.fitBeta(&opt, rep)
	if err != nil {
		return nil, err
	}
	alphaCoef, af, err := ts.fitAlpha(&opt, rep)
	if err != nil {
		return nil, err
	}

	rep.Arrival, rep.Departure = fitLowerEnvelope(ts.arrX, ts.arrY), fitLine(ts.depX, ts.depY)
	rep.Pass = rep.verdict()

	f := coefficientFile(cfgs, ts, &opt, rep, bf, af, alphaCoef, command)
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("the fitted coefficients are not a valid file: %w", err)
	}
	res := &Result{File: f, Report: rep, BetaHoldout: bf.holdout}
	if af != nil {
		res.AlphaHoldout = af.holdout
	}
	return res, nil
}

// newReport starts the report with the tool, the command and the options.
func newReport(opt *Options, command string) *Report {
	return &Report{Tool: "calibrate fit", Version: ToolVersion, Command: command, Options: ReportOptions{
		Lambdas: opt.Lambdas, Gammas: opt.Gammas, Folds: opt.Folds, Holdout: opt.Holdout, WarmupSteps: opt.WarmupSteps,
		OutlierFactor: opt.OutlierFactor, PreemptHeavy: opt.PreemptHeavy, PreemptWeight: opt.PreemptWeight,
		BetaTarget: opt.BetaTarget, MinPairs: opt.MinPairs, AlphaCorrection: opt.AlphaCorrection,
	}}
}

// trainingSet is what Run gathers from every configuration before fitting:
// per configuration (in input order) its beta and alpha samples, and pooled
// over all of them the left-out counts, beta target sources, alpha lags
// and overhead samples.
type trainingSet struct {
	betas, alphas []design
	betaOut       []*betaSamples // betas, typed
	baseW         [][]float64    // beta weights before the objective's, with CompareObjectives
	cfgNames      []string

	betaSkipped, alphaSkipped []Count
	arrX, arrY, depX, depY    []float64 // overhead samples (fitLowerEnvelope, fitLine)
	sources                   map[string]int64
	lags                      []float64
}

// addConfig builds the beta and alpha samples of one configuration from
// its traces, cleans and weighs them, assigns their folds and adds them to
// the set and the configuration's entry to the report. It fails when the
// configuration cannot give enough beta samples.
func (ts *trainingSet) addConfig(cfg Config, opt *Options, rep *Report) error {
	if err := features.CheckSpec(cfg.Phys, opt.Spec); err != nil {
		return fmt.Errorf("configuration %s: %w", cfg.Name, err)
	}
	info := ConfigInfo{Name: cfg.Name, Model: cfg.Phys.Model.Name, Hardware: cfg.Phys.Hardware.Name, TP: cfg.Phys.TP}
	bb, ab := newBetaBuilder(cfg.Phys, opt), newAlphaBuilder(cfg.Phys, opt)
	t := 0 // samples are grouped by engine: each engine of each trace is a time series
	for _, tr := range cfg.Traces {
		if err := ts.addTrace(&cfg, tr, opt, bb, ab, &info, rep, &t); err != nil {
			return err
		}
	}
	if err := checkBetaBuilder(&cfg, bb, &info); err != nil {
		return err
	}
	med, outliers := bb.dropOutliers(opt.OutlierFactor)
	info.BetaMedianMs, info.Outliers = finiteOr0(med*1e3), outliers
	if opt.CompareObjectives {
		ts.baseW = append(ts.baseW, slices.Clone(bb.out.w))
	}
	weighByObjective(&bb.out.samples, opt.Objective)
	bb.out.assignParts(opt.Folds, opt.Holdout)
	ab.out.assignParts(opt.Folds, opt.Holdout)
	for _, s := range bb.out.source {
		ts.sources[[]string{SourcePairs, SourceJourney}[s]]++
	}
	info.RichSamples = bb.rich
	ts.lags = append(ts.lags, ab.out.lag...)
	for _, c := range bb.skipped {
		addCount(&ts.betaSkipped, c.Reason, c.Count)
	}
	for _, c := range ab.skipped {
		addCount(&ts.alphaSkipped, c.Reason, c.Count)
	}
	if need := minSamplesPerFold * opt.Folds; trainCount(&bb.out.samples, opt.Folds) < need {
		return fmt.Errorf("configuration %s: %d usable beta samples (%s); %d-fold CV needs at least %d training samples per configuration",
			cfg.Name, bb.out.len(), describeCounts(bb.skipped), opt.Folds, need)
	}
	ts.betas, ts.betaOut = append(ts.betas, bb.out), append(ts.betaOut, bb.out)
	ts.alphas = append(ts.alphas, ab.out)
	ts.cfgNames = append(ts.cfgNames, cfg.Name)
	rep.Configs = append(rep.Configs, info)
	opt.progress("%s: %d beta samples, %d alpha samples", cfg.Name, bb.out.len(), ab.out.len())
	return nil
}

// addTrace cross-checks one trace of cfg against it and adds the samples of
// each of its engines to bb and ab, and their overhead samples to the set;
// *t is the next engine's time-series index. info gets the trace's inputs,
// warnings and dropped rows.
func (ts *trainingSet) addTrace(cfg *Config, tr *Trace, opt *Options, bb *betaBuilder, ab *alphaBuilder, info *ConfigInfo, rep *Report, t *int) error {
	warn, err := crossCheck(cfg, tr)
	if err != nil {
		return err
	}
	info.Warnings = append(info.Warnings, warn...)
	info.Traces = append(info.Traces, tr.Dir)
	info.Inputs = append(info.Inputs, tr.Inputs...)
	for _, d := range tr.Dropped {
		addCount(&info.Dropped, d.Reason, d.Count)
	}
	engines, err := tr.engines()
	if err != nil {
		return err
	}
	for _, eng := range engines {
		var dropped []Count
		x := newStepIndex(eng, opt.Gammas, &dropped)
		for _, d := range dropped {
			addCount(&info.Dropped, d.Reason, d.Count)
		}
		if len(x.steps) > 0 && x.steps[0].KVTotal != cfg.Phys.Knobs.TotalKVBlocksGPU {
			return fmt.Errorf("%s: steps report kv.blocks_total_gpu = %d but configuration %s has %d GPU KV blocks (set --kv-blocks-gpu to the trace's value)",
				eng.engineName(), x.steps[0].KVTotal, cfg.Name, cfg.Phys.Knobs.TotalKVBlocksGPU)
		}
		bb.add(*t, eng, x)
		ab.add(*t, eng, x)
		overheadSamples(eng, &ts.arrX, &ts.arrY, &ts.depX, &ts.depY, &rep.Overheads)
		*t++
	}
	return nil
}

// checkBetaBuilder warns when offloading is on without KV events and fails
// when chunked prefill leaves no prefill step featurizable.
func checkBetaBuilder(cfg *Config, bb *betaBuilder, info *ConfigInfo) error {
	if bb.noKV {
		info.Warnings = append(info.Warnings, "CPU offloading is on but a trace has no kv_events table: transfer features are 0 (ingest with --kv-events)")
	}
	if bb.chunkedPrefillSteps > 0 && bb.chunkedRich == 0 {
		return fmt.Errorf("configuration %s: chunked prefill is on and none of its %d prefill steps has complete REQUEST_SNAPSHOTs, so prefill attention (b2) cannot be computed; trace with --step-tracing-rich-subsample-rate > 0 (and a raised OTEL_SPAN_EVENT_COUNT_LIMIT), or pass --enable-chunked-prefill=false if the server ran without it",
			cfg.Name, bb.chunkedPrefillSteps)
	}
	return nil
}

// fitBeta fits the beta vector over every configuration, fills rep.Beta
// and, with CompareObjectives, fits it again under the other objective for
// the report.
func (ts *trainingSet) fitBeta(opt *Options, rep *Report) (*vectorFit, error) {
	betaNames, _ := features.BetaNamesOf(opt.Spec)
	opt.progress("fitting beta (feature spec %s, %d features, %s objective)", opt.Spec, len(betaNames), opt.Objective)
	betaUnpen := make([]bool, len(betaNames))
	if opt.Spec == features.SpecV1 {
		betaUnpen[15] = true // b16 bias
	}
	bf, err := fitVector(ts.betas, betaNames, ts.cfgNames, betaUnpen, 0, opt)
	if err != nil {
		return nil, fmt.Errorf("beta: %w", err)
	}
	mergeVector(&rep.Beta, bf)
	rep.Beta.Fitted = true
	if opt.CompareObjectives {
		if rep.Beta.OtherObjective, err = ts.otherObjective(opt, bf, betaNames, betaUnpen); err != nil {
			return nil, err
		}
	}
	rep.Beta.Coefficients = coefList(betaNames, bf.coef)
	rep.Beta.addChecks(true, bf.coef)
	return bf, nil
}

// otherObjective refits beta under the objective opt does not use, at bf's
// γ, reweighing the samples from their weights before the objective's.
func (ts *trainingSet) otherObjective(opt *Options, bf *vectorFit, betaNames []string, betaUnpen []bool) (*ObjectiveComparison, error) {
	other := coefficients.ObjectiveAbsolute
	if opt.Objective == coefficients.ObjectiveAbsolute {
		other = coefficients.ObjectiveRelative
	}
	opt.progress("fitting beta with the %s objective too, for comparison", other)
	o := *opt
	o.Objective, o.Gammas = other, []float64{opt.Gammas[bf.gamma]}
	for c, b := range ts.betaOut {
		b.w = ts.baseW[c]
		weighByObjective(&b.samples, other)
	}
	of, err := fitVector(ts.betas, betaNames, ts.cfgNames, betaUnpen, 0, &o)
	if err != nil {
		return nil, fmt.Errorf("beta, %s objective (for comparison): %w", other, err)
	}
	return &ObjectiveComparison{Objective: other, Lambda: of.lambda, CV: of.report.CV,
		Holdout: of.report.Holdout, LeaveOneOut: of.report.LeaveOneOut}, nil
}

// fitAlpha fits the alpha vector when every configuration has enough
// samples, applying the scheduler-overhead correction, and fills
// rep.Alpha and rep.Correction. It returns the coefficients to write (zeros
// when alpha is not fitted, base_bias with the correction added back) and
// the fit (nil when not fitted).
func (ts *trainingSet) fitAlpha(opt *Options, rep *Report) ([]float64, *vectorFit, error) {
	alphaCoef := make([]float64, features.NumAlpha)
	short := ts.alphaShortfall(opt)
	rep.Correction.MedianLagMs = finiteOr0(medianOf(ts.lags) * 1e3)
	if short != "" {
		rep.Alpha.NotFitted = short + "; alpha is written as zeros (the simulator does not use it)"
		opt.progress("alpha not fitted: %s", short)
		return alphaCoef, nil, nil
	}
	offset := ts.alphaCorrection(opt, rep)
	opt.progress("fitting alpha (%d features)", features.NumAlpha)
	alphaUnpen := make([]bool, features.NumAlpha)
	alphaUnpen[3] = true // a4 base_bias
	af, err := fitVector(ts.alphas, features.AlphaNames[:], ts.cfgNames, alphaUnpen, offset, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("alpha: %w", err)
	}
	copy(alphaCoef, af.coef)
	rep.Correction.BaseBiasFitted = alphaCoef[3]
	alphaCoef[3] += offset
	mergeVector(&rep.Alpha, af)
	rep.Alpha.Fitted = true
	rep.Alpha.Coefficients = coefList(features.AlphaNames[:], alphaCoef)
	rep.Alpha.addChecks(false, alphaCoef)
	return alphaCoef, af, nil
}

// alphaShortfall names the first configuration with too few alpha training
// samples to fit, or is "" when every configuration has enough.
func (ts *trainingSet) alphaShortfall(opt *Options) string {
	for c, d := range ts.alphas {
		if n := trainCount(d.base(), opt.Folds); n < minSamplesPerFold*opt.Folds {
			return fmt.Sprintf("configuration %s has %d usable alpha samples (%s)", ts.cfgNames[c], d.base().len(), describeCounts(ts.alphaSkipped))
		}
	}
	return ""
}

// alphaCorrection applies the scheduler-overhead correction when it is on
// and enough unqueued requests exist: it subtracts their median delay from
// every alpha target and returns it (0 when not applied). rep.Correction
// says what was done.
func (ts *trainingSet) alphaCorrection(opt *Options, rep *Report) float64 {
	if !opt.AlphaCorrection {
		rep.Correction.Note = "off (--alpha-correction=false): base_bias includes the scheduler overhead"
		return 0
	}
	var ys []float64
	for _, d := range ts.alphas {
		s := d.base()
		for i := range s.len() {
			if s.regime[i] == regime1 {
				ys = append(ys, s.y[i])
			}
		}
	}
	rep.Correction.Samples = len(ys)
	if len(ys) < opt.MinCorrectionSamples {
		rep.Correction.Note = fmt.Sprintf("not applied: %d unqueued requests, fewer than %d; base_bias includes the scheduler overhead", len(ys), opt.MinCorrectionSamples)
		return 0
	}
	offset := medianOf(ys)
	rep.Correction.Applied = true
	rep.Correction.OverheadMs = offset * 1e3
	rep.Correction.Note = "the median QUEUED→SCHEDULED delay of unqueued requests was subtracted from every target before the fit and added back to base_bias after it; not clamped at 0, which would bias the mean"
	for _, d := range ts.alphas {
		s := d.base()
		for i := range s.y {
			s.y[i] -= offset
		}
	}
	return offset
}

// coefficientFile assembles the coefficient file from the fits: applies_to
// is the first configuration, fitted_configs lists them all, and the
// provenance names every input. With an alpha fit whose γ differs from
// beta's it adds a note to rep.Alpha.Checks. The file is not validated.
func coefficientFile(cfgs []Config, ts *trainingSet, opt *Options, rep *Report, bf, af *vectorFit, alphaCoef []float64, command string) *coefficients.File {
	first := cfgs[0].Phys
	f := &coefficients.File{
		SchemaVersion: coefficients.SchemaVersion, FeatureSpecVersion: opt.Spec,
		AppliesTo: coefficients.AppliesTo{Model: first.Model.Name, Hardware: first.Hardware.Name, TP: first.TP, VLLM: first.Knobs},
		Gamma:     opt.Gammas[bf.gamma],
		Overheads: coefficients.Overheads{
			ArrivalBaseUs: rep.Arrival.BaseUs, ArrivalPerPromptTokenUs: rep.Arrival.PerUnit,
			DepartureBaseUs: rep.Departure.BaseUs, DeparturePerOutputTokenUs: rep.Departure.PerUnit,
		},
		Fit: &coefficients.Fit{
			LambdaBeta: bf.lambda, Folds: opt.Folds, LambdaGrid: opt.Lambdas, GammaGrid: opt.Gammas,
			BetaCVMAPE: bf.report.CV.MAPE, BetaTarget: describeSources(ts.sources),
			SamplesBeta: bf.report.Samples, Objective: opt.Objective,
		},
		Provenance: coefficients.Provenance{Tool: "calibrate", ToolVersion: ToolVersion, Command: command},
	}
	copy(f.Beta[:], bf.coef)
	copy(f.Alpha[:], alphaCoef)
	if af != nil {
		f.Fit.LambdaAlpha, f.Fit.AlphaCVMAPE, f.Fit.SamplesAlpha = af.lambda, af.report.CV.MAPE, af.report.Samples
		if af.gamma != bf.gamma {
			// One γ serves both vectors in the file: beta's, which the
			// simulator uses.
			rep.Alpha.Checks = append(rep.Alpha.Checks, Check{Config: "all", Check: "alpha's best γ equals beta's", Value: opt.Gammas[af.gamma],
				Threshold: fmt.Sprint(opt.Gammas[bf.gamma]), Pass: true, Note: "the file records beta's γ; alpha's a9 was fitted with its own"})
		}
	}
	addProvenance(f, cfgs, rep)
	// Every configuration, for the span Check compares runs with.
	for c, cfg := range cfgs {
		f.FittedConfigs = append(f.FittedConfigs, coefficients.NewFittedConfig(cfg.Name, cfg.Phys, int64(ts.betas[c].base().len()), int64(ts.alphas[c].base().len())))
	}
	return f
}

// addProvenance lists every input table in f's provenance and writes its
// notes: the configurations fitted, why alpha was not, and any CV MAPE
// written as 0 for want of a positive target.
func addProvenance(f *coefficients.File, cfgs []Config, rep *Report) {
	var notes []string
	for _, c := range rep.Configs {
		for _, in := range c.Inputs {
			f.Provenance.Inputs = append(f.Provenance.Inputs, coefficients.Input{Path: in.Path, SHA256: in.SHA256, Rows: in.Rows})
		}
		notes = append(notes, fmt.Sprintf("%s (%s on %d × %s)", c.Name, c.Model, c.TP, c.Hardware))
	}
	f.Provenance.Notes = "fitted on " + strings.Join(notes, ", ")
	if len(cfgs) > 1 {
		f.Provenance.Notes += "; applies_to is the first configuration"
	}
	if !rep.Alpha.Fitted {
		f.Provenance.Notes += "; alpha not fitted: " + rep.Alpha.NotFitted
	}
	// A CV MAPE over no positive target is NaN (null in the report); the
	// file's field is a number, so it holds 0 and the notes say why.
	for _, m := range []struct {
		name string
		v    *float64
	}{{"beta_cv_mape", &f.Fit.BetaCVMAPE}, {"alpha_cv_mape", &f.Fit.AlphaCVMAPE}} {
		if math.IsNaN(*m.v) {
			*m.v = 0
			f.Provenance.Notes += "; " + m.name + " is 0 for want of a positive CV target: not a score"
		}
	}
}

func trainCount(s *samples, folds int) int {
	n := 0
	for _, p := range s.part {
		if int(p) < folds {
			n++
		}
	}
	return n
}

func describeCounts(cs []Count) string {
	if len(cs) == 0 {
		return "none skipped"
	}
	var parts []string
	for _, c := range sortedCounts(cs) {
		parts = append(parts, fmt.Sprintf("%d %s", c.Count, c.Reason))
	}
	return "skipped: " + strings.Join(parts, "; ")
}

func describeSources(src map[string]int64) string {
	var parts []string
	for _, k := range []string{SourcePairs, SourceJourney} {
		if src[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s (%d)", k, src[k]))
		}
	}
	return strings.Join(parts, " + ")
}

func coefList(names []string, coef []float64) []NamedValue {
	out := make([]NamedValue, len(names))
	for i, n := range names {
		out[i] = NamedValue{n, coef[i]}
	}
	return out
}

func mergeVector(dst *VectorReport, vf *vectorFit) {
	r := vf.report
	r.Skipped, r.Sources = dst.Skipped, dst.Sources
	*dst = r
}
