package fit

import (
	"fmt"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/ridge"
)

// Evaluation scores a coefficient file on every sample of one
// configuration's traces (no split: the traces are held-out data).
type Evaluation struct {
	Beta        Errors           `json:"beta"`
	BetaRegimes []Errors         `json:"beta_regimes"` // prefill-dominated, decode-dominated
	BetaSkipped []Count          `json:"beta_skipped"`
	Sources     map[string]int64 `json:"beta_target_sources"`
	// Outliers are the steps the outlier rule left out (none unless
	// opt.OutlierFactor > 0).
	Outliers  OutlierSummary `json:"beta_outliers"`
	Alpha     Errors         `json:"alpha"`
	AlphaSkip []Count        `json:"alpha_skipped"`
	// Points are the beta predictions, in step order (engine by engine in a
	// trace of several), when asked for.
	Points []Point `json:"-"`
}

// Evaluate predicts the step times (beta) and QUEUED→SCHEDULED delays
// (alpha) of cfg's traces with f, with f's γ, cleaned as opt says:
// PredictOptions scores every step with a measured cycle, DefaultOptions
// cleans as Run does (warm-up, outliers).
func Evaluate(cfg Config, f *coefficients.File, opt Options, keepPoints bool) (*Evaluation, error) {
	opt.Gammas = []float64{f.Gamma}
	opt.Spec = f.Spec()
	if err := features.CheckSpec(cfg.Phys, opt.Spec); err != nil {
		return nil, err
	}
	opt.Folds, opt.Holdout = 2, 0
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	bb, ab := newBetaBuilder(cfg.Phys, &opt), newAlphaBuilder(cfg.Phys, &opt)
	t := 0
	for _, tr := range cfg.Traces {
		engines, err := tr.engines()
		if err != nil {
			return nil, err
		}
		for _, eng := range engines {
			var dropped []Count
			x := newStepIndex(eng, opt.Gammas, &dropped)
			bb.add(t, eng, x)
			ab.add(t, eng, x)
			t++
		}
	}
	if bb.chunkedPrefillSteps > 0 && bb.chunkedRich == 0 {
		return nil, fmt.Errorf("chunked prefill is on and none of the %d prefill steps has complete REQUEST_SNAPSHOTs: prefill attention cannot be computed", bb.chunkedPrefillSteps)
	}
	_, outliers := bb.dropOutliers(opt.OutlierFactor)
	bb.out.part = make([]uint8, bb.out.len())
	ab.out.part = make([]uint8, ab.out.len())
	model := func(coef []float64) *ridge.Fit {
		return &ridge.Fit{Coef: coef}
	}
	beta, alpha := model(f.Beta[:]), model(f.Alpha[:])
	ev := &Evaluation{Sources: map[string]int64{}, BetaSkipped: sortedCounts(bb.skipped), AlphaSkip: sortedCounts(ab.skipped), Outliers: outliers}
	e := evaluate(bb.out, 0, 0, features.NumBeta, func(uint8) *ridge.Fit { return beta }, 0, keepPoints)
	ev.Beta, ev.BetaRegimes, ev.Points = e.all.result(), []Errors{e.regimes[0].result(), e.regimes[1].result()}, e.points
	for _, s := range bb.out.source {
		ev.Sources[[]string{SourcePairs, SourceJourney}[s]]++
	}
	ea := evaluate(ab.out, 0, 0, features.NumAlpha, func(uint8) *ridge.Fit { return alpha }, 0, false)
	ev.Alpha = ea.all.result()
	return ev, nil
}
