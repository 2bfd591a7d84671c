package fit

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/ridge"
)

// Options control the training pipeline. DefaultOptions gives the seed's
// values.
type Options struct {
	Lambdas []float64 // ridge penalties searched (see docs/fit.md for the scale)
	Gammas  []float64 // preemption EMA factors searched, each in (0, 1]
	Folds   int       // temporal CV folds, ≥ 2
	Holdout float64   // share of each trace, at its end, held out for validation, in [0, 0.9]
	// WarmupSteps: steps with id ≤ this are left out (ids count from
	// engine start).
	WarmupSteps int64
	// OutlierFactor > 0 turns the outlier rule on: beta samples slower
	// than this × the median of their configuration's steps in the same
	// token bucket, or faster than the hardware allows, are left out and
	// listed (betaBuilder.dropOutliers); 0 keeps them all.
	OutlierFactor float64
	// Steps whose preempted share of running requests exceeds
	// PreemptHeavy get weight PreemptWeight.
	PreemptHeavy, PreemptWeight float64
	// BetaTarget: "auto" (step pairs, plus journey reconstruction in a
	// trace with fewer than MinPairs adjacent sampled steps), SourcePairs
	// or SourceJourney.
	BetaTarget string
	MinPairs   int
	// AlphaCorrection subtracts the scheduler overhead (the median delay of
	// unqueued requests) from the alpha target before the fit, when at
	// least MinCorrectionSamples unqueued requests exist, and adds it back
	// to the base_bias coefficient after it.
	AlphaCorrection      bool
	MinCorrectionSamples int
	// Spec is the beta feature spec fitted (features.SpecV1 or SpecV2).
	Spec string
	// Objective is what the beta fit minimizes: coefficients.ObjectiveRelative
	// (ridge weights 1/t², so a 30 ms decode step counts as much as a 3 s
	// prefill) or ObjectiveAbsolute (squared seconds, dominated by long steps).
	Objective string
	// CompareObjectives also fits beta under the other objective and
	// reports its errors beside the chosen one's (VectorReport.OtherObjective).
	CompareObjectives bool
	// Progress, when set, receives one line per stage (for stderr).
	Progress func(format string, args ...any)
}

// DefaultOptions returns the seed's pipeline settings.
func DefaultOptions() Options {
	return Options{
		Lambdas: []float64{0.001, 0.01, 0.1, 1, 10, 100}, Gammas: []float64{0.1, 0.3, 0.5},
		Folds: 5, Holdout: 0.2, WarmupSteps: 10, OutlierFactor: 5,
		PreemptHeavy: 0.5, PreemptWeight: 0.5, BetaTarget: "auto", MinPairs: 1000,
		AlphaCorrection: true, MinCorrectionSamples: 10,
		Spec: features.DefaultSpec, Objective: coefficients.ObjectiveRelative, CompareObjectives: true,
	}
}

// PredictOptions are DefaultOptions for scoring a coefficient file
// against traces (Evaluate): every step with a measured cycle is scored,
// warm-up and outliers included, so the score cannot be flattered by what
// was left out.
func PredictOptions() Options {
	o := DefaultOptions()
	o.WarmupSteps, o.OutlierFactor = 0, 0
	return o
}

// Validate checks the options, naming the offending one.
func (o *Options) Validate() error {
	if len(o.Lambdas) == 0 {
		return errors.New("lambdas: empty grid")
	}
	for _, l := range o.Lambdas {
		if !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("lambdas: %v is not a finite number ≥ 0", l)
		}
	}
	if len(o.Gammas) == 0 {
		return errors.New("gammas: empty grid")
	}
	for _, g := range o.Gammas {
		if !(g > 0 && g <= 1) {
			return fmt.Errorf("gammas: %v is not in (0, 1]", g)
		}
	}
	switch {
	case o.Folds < 2 || o.Folds > 100:
		return fmt.Errorf("folds: %d is not in [2, 100]", o.Folds)
	case !(o.Holdout >= 0 && o.Holdout <= 0.9):
		return fmt.Errorf("holdout: %v is not in [0, 0.9]", o.Holdout)
	case o.WarmupSteps < 0:
		return fmt.Errorf("warmup-steps: %d is negative", o.WarmupSteps)
	case !(o.OutlierFactor == 0 || o.OutlierFactor > 1):
		return fmt.Errorf("outlier-factor: %v must be 0 (off) or > 1", o.OutlierFactor)
	case !(o.PreemptWeight >= 0 && o.PreemptWeight <= 1):
		return fmt.Errorf("preempt-weight: %v is not in [0, 1]", o.PreemptWeight)
	case !(o.PreemptHeavy >= 0):
		return fmt.Errorf("preempt-heavy: %v is negative", o.PreemptHeavy)
	case o.MinPairs < 0:
		return fmt.Errorf("min-pairs: %d is negative", o.MinPairs)
	case o.MinCorrectionSamples < 0:
		return fmt.Errorf("min-correction-samples: %d is negative", o.MinCorrectionSamples)
	}
	if _, err := features.BetaNamesOf(o.Spec); err != nil {
		return fmt.Errorf("feature-spec: %w", err)
	}
	if o.Objective != coefficients.ObjectiveRelative && o.Objective != coefficients.ObjectiveAbsolute {
		return fmt.Errorf("objective: %q is not %s or %s", o.Objective, coefficients.ObjectiveRelative, coefficients.ObjectiveAbsolute)
	}
	switch o.BetaTarget {
	case "auto", SourcePairs, SourceJourney:
	default:
		return fmt.Errorf("beta-target: %q is not auto, %s or %s", o.BetaTarget, SourcePairs, SourceJourney)
	}
	return nil
}

// Config is one configuration (model, hardware, TP, vLLM knobs) and the
// traces recorded on it.
type Config struct {
	Name   string
	Phys   *physics.PhysicsConfig
	Traces []*Trace
}

// design is one vector's samples of one configuration.
type design interface {
	base() *samples
	features(i, g int, dst []float64)
	// featureSets fills xs[g] with sample i's features at every γ index g.
	featureSets(i int, xs [][]float64)
}

func (b *betaSamples) base() *samples { return &b.samples }

// weighByObjective turns the sample weights into those of the objective:
// under ObjectiveRelative each weight is divided by its target squared, so
// the weighted squared error is the squared relative error. Targets are > 0.
func weighByObjective(s *samples, objective string) {
	if objective != coefficients.ObjectiveRelative {
		return
	}
	for i, y := range s.y {
		s.w[i] /= y * y
	}
}
func (a *alphaSamples) base() *samples { return &a.samples }

// vectorFit is the outcome of fitting one vector.
type vectorFit struct {
	coef    []float64
	gamma   int // index into Options.Gammas
	lambda  float64
	report  VectorReport
	holdout []Point // hold-out predictions, for the residual plots
}

// Point is one prediction against its target, seconds.
type Point struct {
	Config    int
	Predicted float64
	Actual    float64
}

// parallel runs fn(0..n-1) on at most GOMAXPROCS goroutines and waits.
// Each call must write only its own outputs.
func parallel(n int, fn func(k int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(k)
		}()
	}
	wg.Wait()
}

// progress reports one stage when Progress is set.
func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// accumulateChunk is the number of samples one accumulation task covers.
// Chunks are fixed (not tied to GOMAXPROCS) so that the summation order, and
// with it every digit of the result, is the same on every machine; a
// configuration with fewer samples is one chunk, summed in sample order.
var accumulateChunk = 1 << 20 // a variable only so that a test can make chunks small

// accumulate builds the sufficient statistics of every configuration ×
// part × γ. Each task computes the features of one chunk of samples once
// for all γ; the chunks' statistics are then merged in chunk order.
func accumulate(ds []design, p, parts, gammas int) [][][]*ridge.Stats {
	type task struct{ c, lo, hi int }
	var tasks []task
	for c, d := range ds {
		n := d.base().len()
		for lo := 0; lo < n || lo == 0; lo += accumulateChunk {
			tasks = append(tasks, task{c, lo, min(n, lo+accumulateChunk)})
		}
	}
	out := make([][][]*ridge.Stats, len(tasks)) // task × part × γ
	parallel(len(tasks), func(k int) {
		tk := tasks[k]
		st := make([][]*ridge.Stats, parts)
		for part := range st {
			st[part] = make([]*ridge.Stats, gammas)
			for g := range st[part] {
				st[part][g] = ridge.NewStats(p)
			}
		}
		xs := make([][]float64, gammas)
		for g := range xs {
			xs[g] = make([]float64, p)
		}
		d := ds[tk.c]
		s := d.base()
		for i := tk.lo; i < tk.hi; i++ {
			d.featureSets(i, xs)
			for g, x := range xs {
				st[s.part[i]][g].Add(x, s.y[i], s.w[i])
			}
		}
		out[k] = st
	})
	st := make([][][]*ridge.Stats, len(ds))
	for k, tk := range tasks {
		if st[tk.c] == nil {
			st[tk.c] = out[k]
			continue
		}
		for part := range parts {
			for g := range gammas {
				if err := st[tk.c][part][g].AddStats(out[k][part][g]); err != nil {
					panic(err) // same p everywhere
				}
			}
		}
	}
	return st
}

// sum adds the statistics selected by use(config, part) at γ index g.
func sum(st [][][]*ridge.Stats, p, g int, use func(c, k int) bool) *ridge.Stats {
	out := ridge.NewStats(p)
	for c := range st {
		for k := range st[c] {
			if use(c, k) {
				if err := out.AddStats(st[c][k][g]); err != nil {
					panic(err) // same p everywhere
				}
			}
		}
	}
	return out
}

// errorsOf scores predictions; offset is added to both sides (the alpha
// correction), so that errors are those of the uncorrected delay.
type scorer struct {
	ape, ae []float64
	se      float64
	n       int64
	nonPos  int64
}

func (s *scorer) add(pred, y float64) {
	e := math.Abs(pred - y)
	s.n++
	s.ae = append(s.ae, e)
	s.se += e * e
	if y > 0 {
		s.ape = append(s.ape, e/y)
	} else {
		s.nonPos++
	}
}

// result summarizes the errors. A score over no sample is NaN, never 0 (a
// perfect score): every score when there is no sample, MAPE and median APE
// when no target is positive. Errors' JSON writes NaN as null with a note.
func (s *scorer) result() Errors {
	if s.n == 0 {
		return NoSamples()
	}
	r := Errors{MAPE: math.NaN(), MedianAPE: math.NaN()}
	r.N = s.n
	r.TargetsNotPositive = s.nonPos
	r.RMSEms = math.Sqrt(s.se/float64(s.n)) * 1e3
	var sa float64
	for _, e := range s.ae {
		sa += e
	}
	r.MAEms = sa / float64(s.n) * 1e3
	med := medianOf(s.ae)
	r.MedianAEms = med * 1e3
	r.MaxAEms = slices.Max(s.ae) * 1e3
	if med > 0 {
		r.MaxOverMedian = r.MaxAEms / r.MedianAEms
	}
	if len(s.ape) > 0 {
		var sp float64
		for _, e := range s.ape {
			sp += e
		}
		r.MAPE = sp / float64(len(s.ape))
		r.MedianAPE = medianOf(s.ape)
	}
	return r
}

// evalChunks is the fixed number of pieces an evaluation pass is cut into,
// whatever the core count, so that sums merge in the same order everywhere.
const evalChunks = 8

func (s *scorer) merge(o *scorer) {
	s.ape = append(s.ape, o.ape...)
	s.ae = append(s.ae, o.ae...)
	s.se += o.se
	s.n += o.n
	s.nonPos += o.nonPos
}

// evaluation is the outcome of predicting a set of samples.
type evaluation struct {
	all     scorer
	regimes [2]scorer
	points  []Point
}

// evaluate predicts every sample i of configuration c for which pick
// returns a model, in parallel over fixed chunks; offset is added to both
// prediction and target (the alpha correction).
func evaluate(d design, c, g, p int, pick func(part uint8) *ridge.Fit, offset float64, keepPoints bool) evaluation {
	s := d.base()
	n := s.len()
	outs := make([]evaluation, evalChunks)
	parallel(evalChunks, func(k int) {
		lo, hi := n*k/evalChunks, n*(k+1)/evalChunks
		e := &outs[k]
		e.all.ae, e.all.ape = make([]float64, 0, hi-lo), make([]float64, 0, hi-lo)
		x := make([]float64, p)
		for i := lo; i < hi; i++ {
			f := pick(s.part[i])
			if f == nil {
				continue
			}
			d.features(i, g, x)
			pred, y := f.Predict(x)+offset, s.y[i]+offset
			e.all.add(pred, y)
			e.regimes[s.regime[i]].add(pred, y)
			if keepPoints {
				e.points = append(e.points, Point{Config: c, Predicted: pred, Actual: y})
			}
		}
	})
	var out evaluation
	out.all = mergeScorers(outs, func(e *evaluation) *scorer { return &e.all })
	out.regimes[0] = mergeScorers(outs, func(e *evaluation) *scorer { return &e.regimes[0] })
	out.regimes[1] = mergeScorers(outs, func(e *evaluation) *scorer { return &e.regimes[1] })
	for k := range outs {
		out.points = append(out.points, outs[k].points...)
	}
	return out
}

// mergeScorers merges one scorer of each evaluation in order, sizing the
// result once: repeated appends of 10M errors cost more than the scoring.
func mergeScorers(es []evaluation, of func(*evaluation) *scorer) scorer {
	var na, np int
	for k := range es {
		na, np = na+len(of(&es[k]).ae), np+len(of(&es[k]).ape)
	}
	out := scorer{ae: make([]float64, 0, na), ape: make([]float64, 0, np)}
	for k := range es {
		out.merge(of(&es[k]))
	}
	return out
}

// fitVector runs the CV grid, the validations and the final fit of one
// vector over every configuration.
func fitVector(ds []design, names []string, cfgNames []string, unpen []bool, offset float64, opt *Options) (*vectorFit, error) {
	p, K := len(names), opt.Folds
	parts := K + 1
	st := accumulate(ds, p, parts, len(opt.Gammas))
	vf := &vectorFit{}
	rep := &vf.report

	// Cross-validation over (λ, γ): folds pooled over configurations, so
	// each fold has every configuration's data of that time block.
	bestG, bestL, bestMSE := -1, -1, math.Inf(1)
	for g := range opt.Gammas {
		folds := make([]*ridge.Stats, K)
		for k := range K {
			folds[k] = sum(st, p, g, func(_, kk int) bool { return kk == k })
		}
		cv, err := ridge.CrossValidate(folds, opt.Lambdas, unpen)
		if err != nil {
			return nil, fmt.Errorf("cross-validation at γ=%v: %w", opt.Gammas[g], err)
		}
		for l, mse := range cv.MSE {
			rep.Grid = append(rep.Grid, GridPoint{Gamma: opt.Gammas[g], Lambda: opt.Lambdas[l], RMSEms: math.Sqrt(mse) * 1e3})
			better := mse < bestMSE*(1-1e-12)
			tie := !better && mse <= bestMSE*(1+1e-12) && opt.Lambdas[l] > opt.Lambdas[bestL]
			if bestG < 0 || better || (tie && g == bestG) {
				bestG, bestL, bestMSE = g, l, mse
			}
		}
	}
	vf.gamma, vf.lambda = bestG, opt.Lambdas[bestL]
	rep.Gamma, rep.Lambda = opt.Gammas[bestG], vf.lambda
	opt.progress("  CV over %d λ × %d γ: best λ=%g γ=%g (CV RMSE %.4g ms)", len(opt.Lambdas), len(opt.Gammas), vf.lambda, rep.Gamma, math.Sqrt(bestMSE)*1e3)
	solve := func(s *ridge.Stats) (*ridge.Fit, error) {
		return ridge.Solve(s, ridge.Options{Lambda: vf.lambda, Unpenalized: unpen})
	}
	// CV MAPE at the chosen point: each training sample predicted by the
	// model that did not see its fold.
	train := sum(st, p, bestG, func(_, k int) bool { return k < K })
	models := make([]*ridge.Fit, K+1)
	for k := range K {
		s := train.Clone()
		if err := s.Sub(sum(st, p, bestG, func(_, kk int) bool { return kk == k })); err != nil {
			return nil, err
		}
		f, err := solve(s)
		if err != nil {
			return nil, fmt.Errorf("fit without fold %d: %w", k+1, err)
		}
		models[k] = f
	}
	cvs := make([]evaluation, len(ds))
	for c, d := range ds {
		cvs[c] = evaluate(d, c, bestG, p, func(part uint8) *ridge.Fit { return models[part] }, offset, false)
	}
	all := mergeScorers(cvs, func(e *evaluation) *scorer { return &e.all })
	rep.CV = all.result()

	// Within-configuration temporal hold-out.
	if opt.Holdout > 0 {
		f, err := solve(train)
		if err != nil {
			return nil, fmt.Errorf("fit on the training part: %w", err)
		}
		only := func(part uint8) *ridge.Fit {
			if int(part) == K {
				return f
			}
			return nil
		}
		for c, d := range ds {
			e := evaluate(d, c, bestG, p, only, offset, true)
			vf.holdout = append(vf.holdout, e.points...)
			rep.Holdout = append(rep.Holdout, ConfigErrors{Config: cfgNames[c], Errors: e.all.result(),
				Regimes: []Errors{e.regimes[0].result(), e.regimes[1].result()}})
		}
	}

	// Leave one configuration out.
	if len(ds) >= 2 {
		for c, d := range ds {
			f, err := solve(sum(st, p, bestG, func(cc, _ int) bool { return cc != c }))
			if err != nil {
				return nil, fmt.Errorf("fit without configuration %s: %w", cfgNames[c], err)
			}
			e := evaluate(d, c, bestG, p, func(uint8) *ridge.Fit { return f }, offset, false)
			rep.LeaveOneOut = append(rep.LeaveOneOut, ConfigErrors{Config: cfgNames[c], Errors: e.all.result()})
		}
	}

	// The coefficients shipped: every sample.
	whole := sum(st, p, bestG, func(_, _ int) bool { return true })
	f, err := solve(whole)
	if err != nil {
		return nil, fmt.Errorf("final fit: %w", err)
	}
	vf.coef = f.Coef
	rep.Solve = SolveInfo{Method: f.Method, Cond: f.Cond, Rank: f.Rank}
	for j, d := range f.Dropped {
		if d {
			rep.Solve.Dropped = append(rep.Solve.Dropped, names[j])
		}
	}
	rep.Samples = whole.N()
	return vf, nil
}
