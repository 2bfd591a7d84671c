package fit

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
)

// ToolVersion is written into the provenance of every coefficient file.
const ToolVersion = "0.1.0"

// Errors are prediction errors over a set of samples. Times are
// milliseconds; MAPE and MedianAPE are fractions over the samples with a
// positive target. A score over no sample is NaN (NoSamples; MAPE and
// MedianAPE when no target is positive), which the JSON writes as null
// beside a "note" (encoding/json cannot encode NaN, and 0 would read as a
// perfect score); Markdown and the CLIs print "no samples".
type Errors struct {
	N                  int64   `json:"samples"`
	MAPE               float64 `json:"mape"`
	MedianAPE          float64 `json:"median_ape"`
	RMSEms             float64 `json:"rmse_ms"`
	MAEms              float64 `json:"mae_ms"`
	MedianAEms         float64 `json:"median_abs_error_ms"`
	MaxAEms            float64 `json:"max_abs_error_ms"`
	MaxOverMedian      float64 `json:"max_over_median_abs_error"`
	TargetsNotPositive int64   `json:"targets_not_positive,omitempty"` // left out of MAPE
}

// NoSamples are the errors over no sample: N 0 and every score NaN.
func NoSamples() Errors {
	nan := math.NaN()
	return Errors{MAPE: nan, MedianAPE: nan, RMSEms: nan, MAEms: nan, MedianAEms: nan, MaxAEms: nan, MaxOverMedian: nan}
}

// Note is what the JSON says beside scores it writes as null ("" when
// none is).
func (e Errors) Note() string {
	switch {
	case e.N == 0:
		return NoteNoSamples
	case math.IsNaN(e.MAPE):
		return NoteNoPositiveTargets
	}
	return ""
}

// emptyNote is the note of a check on a score that is over every sample
// (not only those with a positive target).
func emptyNote(e Errors) string {
	if e.N == 0 {
		return NoteNoSamples
	}
	return ""
}

// The notes of Errors' JSON.
const (
	NoteNoSamples         = "no samples: every score is null"
	NoteNoPositiveTargets = "no positive target: mape and median_ape are null"
)

// score is a float64 that JSON writes as null when NaN (a score over no
// sample), else as encoding/json writes a float64.
type score float64

func (s score) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(s))
}

// errorsJSON is Errors as JSON writes it.
type errorsJSON struct {
	N                  int64  `json:"samples"`
	MAPE               score  `json:"mape"`
	MedianAPE          score  `json:"median_ape"`
	RMSEms             score  `json:"rmse_ms"`
	MAEms              score  `json:"mae_ms"`
	MedianAEms         score  `json:"median_abs_error_ms"`
	MaxAEms            score  `json:"max_abs_error_ms"`
	MaxOverMedian      score  `json:"max_over_median_abs_error"`
	TargetsNotPositive int64  `json:"targets_not_positive,omitempty"`
	Note               string `json:"note,omitempty"`
}

func (e Errors) jsonForm() errorsJSON {
	return errorsJSON{N: e.N, MAPE: score(e.MAPE), MedianAPE: score(e.MedianAPE), RMSEms: score(e.RMSEms), MAEms: score(e.MAEms),
		MedianAEms: score(e.MedianAEms), MaxAEms: score(e.MaxAEms), MaxOverMedian: score(e.MaxOverMedian),
		TargetsNotPositive: e.TargetsNotPositive, Note: e.Note()}
}

// MarshalJSON writes a score over no sample as null, with a note.
func (e Errors) MarshalJSON() ([]byte, error) {
	return json.Marshal(e.jsonForm())
}

// ConfigErrors are the errors on one configuration's data.
type ConfigErrors struct {
	Config string `json:"config"`
	Errors
	// Regimes: beta [prefill-dominated, decode-dominated]; alpha [queued,
	// unqueued].
	Regimes []Errors `json:"regimes,omitempty"`
}

// MarshalJSON is needed because the embedded Errors' would be promoted and
// write the errors alone.
func (c ConfigErrors) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Config string `json:"config"`
		errorsJSON
		Regimes []Errors `json:"regimes,omitempty"`
	}{c.Config, c.Errors.jsonForm(), c.Regimes})
}

// GridPoint is the CV score of one (γ, λ).
type GridPoint struct {
	Gamma  float64 `json:"gamma"`
	Lambda float64 `json:"lambda"`
	RMSEms float64 `json:"cv_rmse_ms"`
}

// SolveInfo describes the final solve.
type SolveInfo struct {
	Method  string   `json:"method"`
	Cond    float64  `json:"condition"`
	Rank    int      `json:"rank"`
	Dropped []string `json:"dropped_all_zero_features,omitempty"`
}

// NamedValue is one coefficient, in vector order.
type NamedValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Check is one acceptance or plausibility check. A Value over no sample
// is NaN, written as null (the check fails, with a note).
type Check struct {
	Config    string  `json:"config"`
	Check     string  `json:"check"`
	Value     float64 `json:"value"`
	Threshold string  `json:"threshold"`
	Pass      bool    `json:"pass"`
	Note      string  `json:"note,omitempty"`
}

// MarshalJSON writes a NaN Value as null.
func (c Check) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Config    string `json:"config"`
		Check     string `json:"check"`
		Value     score  `json:"value"`
		Threshold string `json:"threshold"`
		Pass      bool   `json:"pass"`
		Note      string `json:"note,omitempty"`
	}{c.Config, c.Check, score(c.Value), c.Threshold, c.Pass, c.Note})
}

// VectorReport is the fit of one vector (alpha or beta).
type VectorReport struct {
	Fitted       bool             `json:"fitted"`
	NotFitted    string           `json:"not_fitted_reason,omitempty"`
	Samples      int64            `json:"samples"`
	Sources      map[string]int64 `json:"target_sources,omitempty"`
	Skipped      []Count          `json:"skipped"`
	Gamma        float64          `json:"gamma"`
	Lambda       float64          `json:"lambda"`
	Grid         []GridPoint      `json:"cv_grid"`
	CV           Errors           `json:"cv"`
	Holdout      []ConfigErrors   `json:"holdout"`
	LeaveOneOut  []ConfigErrors   `json:"leave_one_config_out,omitempty"`
	Solve        SolveInfo        `json:"solve"`
	Coefficients []NamedValue     `json:"coefficients"`
	Checks       []Check          `json:"checks"`
	// OtherObjective is beta fitted under the objective not chosen, when
	// Options.CompareObjectives.
	OtherObjective *ObjectiveComparison `json:"other_objective,omitempty"`
}

// ObjectiveComparison is the beta fit under the objective not chosen, with
// its own λ from the same CV grid (at the chosen γ), scored on the same
// splits: what the choice of objective changed.
type ObjectiveComparison struct {
	Objective   string         `json:"objective"`
	Lambda      float64        `json:"lambda"`
	CV          Errors         `json:"cv"`
	Holdout     []ConfigErrors `json:"holdout"`
	LeaveOneOut []ConfigErrors `json:"leave_one_config_out,omitempty"`
}

// ConfigInfo describes one configuration of the fit.
type ConfigInfo struct {
	Name     string      `json:"name"`
	Model    string      `json:"model"`
	Hardware string      `json:"hardware"`
	TP       int         `json:"tp"`
	Traces   []string    `json:"traces"`
	Inputs   []InputFile `json:"inputs"`
	Dropped  []Count     `json:"rows_dropped_on_read,omitempty"`
	// BetaMedianMs is the median cycle time of the beta samples, before
	// the outlier rule.
	BetaMedianMs float64 `json:"beta_median_cycle_ms"`
	// Outliers lists every step the outlier rule left out.
	Outliers    OutlierSummary `json:"beta_outliers"`
	RichSamples int64          `json:"beta_samples_with_snapshots"`
	Warnings    []string       `json:"warnings,omitempty"`
}

// AlphaCorrection records the scheduler-overhead correction.
type AlphaCorrection struct {
	Applied    bool    `json:"applied"`
	OverheadMs float64 `json:"scheduler_overhead_ms"`
	Samples    int     `json:"unqueued_samples"`
	Note       string  `json:"note"`
	// BaseBiasFitted is base_bias as fitted on the corrected target,
	// before the overhead is added back.
	BaseBiasFitted float64 `json:"base_bias_fitted"`
	// MedianLagMs is the median time from the reference step's start to
	// QUEUED: how stale the step state the features see is.
	MedianLagMs float64 `json:"median_reference_lag_ms"`
}

// Report is the validation report of calibrate fit.
type Report struct {
	Tool       string          `json:"tool"`
	Version    string          `json:"tool_version"`
	Command    string          `json:"command"`
	Options    ReportOptions   `json:"options"`
	Configs    []ConfigInfo    `json:"configs"`
	Beta       VectorReport    `json:"beta"`
	Alpha      VectorReport    `json:"alpha"`
	Correction AlphaCorrection `json:"alpha_correction"`
	Arrival    LineFit         `json:"overhead_arrival"`
	Departure  LineFit         `json:"overhead_departure"`
	Overheads  []Count         `json:"overhead_samples_skipped,omitempty"`
	Pass       bool            `json:"acceptance_pass"`
}

// ReportOptions are the options that shaped the fit.
type ReportOptions struct {
	Lambdas         []float64 `json:"lambda_grid"`
	Gammas          []float64 `json:"gamma_grid"`
	Folds           int       `json:"folds"`
	Holdout         float64   `json:"holdout"`
	WarmupSteps     int64     `json:"warmup_steps"`
	OutlierFactor   float64   `json:"outlier_factor"`
	PreemptHeavy    float64   `json:"preempt_heavy_share"`
	PreemptWeight   float64   `json:"preempt_heavy_weight"`
	BetaTarget      string    `json:"beta_target"`
	MinPairs        int       `json:"min_pairs"`
	AlphaCorrection bool      `json:"alpha_correction"`
}

// checks adds the v1 acceptance checks (docs/physics-spec.md section 9).
func (v *VectorReport) addChecks(isBeta bool, coef []float64) {
	within, loco, maxMed := 0.25, 0.40, 5.0
	if isBeta {
		within, loco, maxMed = 0.15, 0.25, 3.0
	}
	for _, h := range v.Holdout {
		v.Checks = append(v.Checks,
			Check{Config: h.Config, Check: "within-config hold-out MAPE", Value: h.MAPE, Threshold: fmt.Sprintf("< %g", within), Pass: h.N > 0 && h.MAPE < within, Note: h.Note()},
			Check{Config: h.Config, Check: "max abs error / median abs error (hold-out)", Value: h.MaxOverMedian, Threshold: fmt.Sprintf("< %g", maxMed), Pass: h.N > 0 && h.MaxOverMedian < maxMed, Note: emptyNote(h.Errors)})
	}
	for _, l := range v.LeaveOneOut {
		v.Checks = append(v.Checks, Check{Config: l.Config, Check: "leave-one-config-out MAPE", Value: l.MAPE, Threshold: fmt.Sprintf("< %g", loco), Pass: l.N > 0 && l.MAPE < loco, Note: l.Note()})
	}
	sign := func(name string, idx int, strict bool) {
		c := Check{Config: "all", Check: "sign of " + name, Value: coef[idx]}
		if strict {
			c.Threshold, c.Pass = "> 0", coef[idx] > 0
		} else {
			c.Threshold, c.Pass = ">= 0", coef[idx] >= 0
		}
		v.Checks = append(v.Checks, c)
	}
	switch {
	case isBeta && len(coef) == features.NumBetaV2:
		sign(features.BetaV2Names[0], 0, false) // linear layers, compute-bound (0 when no step is)
		sign(features.BetaV2Names[1], 1, false) // linear layers, weight-bound
	case isBeta:
		sign(features.BetaNames[0], 0, true)   // b1 prefill compute
		sign(features.BetaNames[2], 2, true)   // b3 decode weights
		sign(features.BetaNames[10], 10, true) // b11 fixed overhead
		sign(features.BetaNames[15], 15, false)
	default:
		sign(features.AlphaNames[2], 2, false) // a3 admission compute
		sign(features.AlphaNames[3], 3, false) // a4 base bias
		sign(features.AlphaNames[4], 4, false) // a5 queue drain
	}
}

func (v *VectorReport) pass() bool {
	for _, c := range v.Checks {
		if !c.Pass {
			return false
		}
	}
	return v.Fitted
}

// verdict is the acceptance verdict: beta's checks. The simulator takes its
// step times from beta; alpha's MAPE is dominated by requests that wait a
// fraction of a step, whatever the fit (docs/physics-spec.md §9), so its
// checks are reported, not judged.
func (r *Report) verdict() bool { return r.Beta.pass() }

// Result is the outcome of Run.
type Result struct {
	File   *coefficients.File
	Report *Report
	// BetaHoldout and AlphaHoldout are the hold-out predictions, for plots.
	BetaHoldout, AlphaHoldout []Point
}

func finiteOr0(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

func sortedCounts(cs []Count) []Count {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b Count) int {
		if a.Reason < b.Reason {
			return -1
		}
		if a.Reason > b.Reason {
			return 1
		}
		return 0
	})
	if out == nil {
		out = []Count{}
	}
	return out
}
