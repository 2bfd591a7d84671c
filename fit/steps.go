package fit

import (
	"errors"
	"fmt"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/ridge"
)

// StepSample is one measured step: its composition and its time. It is
// how step times measured outside a trace (a profiler's table, a
// benchmark) enter the fit.
type StepSample struct {
	In      features.BetaInput
	Seconds float64
}

// StepConfig is the measured steps of one configuration.
type StepConfig struct {
	Name  string
	Phys  *physics.PhysicsConfig
	Steps []StepSample
}

// stepSamples is a design over StepSamples, in the given order.
type stepSamples struct {
	samples
	cfg  *physics.PhysicsConfig
	spec string
	in   []features.BetaInput
}

func (s *stepSamples) base() *samples { return &s.samples }

func (s *stepSamples) features(i, _ int, dst []float64) {
	x := features.Beta(s.spec, s.cfg, s.in[i])
	copy(dst, x[:])
}

func (s *stepSamples) featureSets(i int, xs [][]float64) {
	x := features.Beta(s.spec, s.cfg, s.in[i])
	for _, dst := range xs {
		copy(dst, x[:])
	}
}

func newStepSamples(c StepConfig, opt *Options) (*stepSamples, error) {
	if err := features.CheckSpec(c.Phys, opt.Spec); err != nil {
		return nil, fmt.Errorf("configuration %s: %w", c.Name, err)
	}
	d := &stepSamples{cfg: c.Phys, spec: opt.Spec}
	for i, st := range c.Steps {
		if !(st.Seconds > 0) {
			return nil, fmt.Errorf("configuration %s: step %d: time %v s is not > 0", c.Name, i, st.Seconds)
		}
		d.y = append(d.y, st.Seconds)
		d.w = append(d.w, 1)
		d.trace = append(d.trace, 0)
		reg := uint8(regime1)
		if st.In.PrefillTokens >= st.In.DecodeTokens {
			reg = regime0
		}
		d.regime = append(d.regime, reg)
		d.source = append(d.source, 0)
		d.in = append(d.in, st.In)
	}
	weighByObjective(&d.samples, opt.Objective)
	return d, nil
}

// FitSteps fits the beta vector of opt.Spec to measured steps of one or
// more configurations with opt.Objective, choosing λ by opt.Folds-fold CV
// (contiguous blocks in the given order; no hold-out). It returns the
// coefficients in the spec's order. Steps must have a time > 0.
func FitSteps(cfgs []StepConfig, opt Options) ([]float64, error) {
	opt.Holdout = 0
	opt.Gammas = []float64{1}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if len(cfgs) == 0 {
		return nil, errors.New("no configuration to fit")
	}
	names, _ := features.BetaNamesOf(opt.Spec)
	ds := make([]design, len(cfgs))
	cfgNames := make([]string, len(cfgs))
	for c, cfg := range cfgs {
		d, err := newStepSamples(cfg, &opt)
		if err != nil {
			return nil, err
		}
		d.assignParts(opt.Folds, 0)
		ds[c], cfgNames[c] = d, cfg.Name
	}
	unpen := make([]bool, len(names))
	if opt.Spec == features.SpecV1 {
		unpen[15] = true // b16 bias
	}
	vf, err := fitVector(ds, names, cfgNames, unpen, 0, &opt)
	if err != nil {
		return nil, err
	}
	return vf.coef, nil
}

// ScoreSteps predicts every step of cfg with the coefficients of spec and
// returns the errors (MAPE over all steps; no step is left out).
func ScoreSteps(cfg StepConfig, spec string, coef []float64) (Errors, error) {
	opt := DefaultOptions()
	opt.Spec, opt.Objective = spec, coefficients.ObjectiveAbsolute
	d, err := newStepSamples(cfg, &opt)
	if err != nil {
		return Errors{}, err
	}
	d.part = make([]uint8, d.len())
	f := &ridge.Fit{Coef: coef}
	e := evaluate(d, 0, 0, len(coef), func(uint8) *ridge.Fit { return f }, 0, false)
	return e.all.result(), nil
}
