package sweep

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/steady"
)

// Target is an SLO target on a metric column: "realtime_slo_attainment
// >= 0.99", "ttft_p99_ms <= 500".
type Target struct {
	Metric string
	Op     string // ">=" or "<="
	Value  float64
}

func (t Target) String() string { return t.Metric + t.Op + fmtFloat(t.Value) }

// Met reports whether x meets the target.
func (t Target) Met(x float64) bool {
	if t.Op == "<=" {
		return x <= t.Value
	}
	return x >= t.Value
}

// ParseTarget reads METRIC>=X or METRIC<=X, METRIC a metric column.
func ParseTarget(s string) (Target, error) {
	for _, op := range []string{">=", "<="} {
		m, v, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		m = strings.TrimSpace(m)
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return Target{}, fmt.Errorf("target %q: %q is not a finite number", clip.String(s), clip.String(strings.TrimSpace(v)))
		}
		for _, c := range registry {
			if c.Name == m && !c.aux {
				return Target{Metric: m, Op: op, Value: x}, nil
			}
		}
		return Target{}, fmt.Errorf("target %q: no metric %q; use one of %s", clip.String(s), clip.String(m), strings.Join(metricNames(), ", "))
	}
	return Target{}, fmt.Errorf("target %q: want METRIC>=VALUE or METRIC<=VALUE (realtime_slo_attainment>=0.99)", clip.String(s))
}

// metricNames are the metrics a target or a figure may name: the
// registry's but the analysis's own columns (the verdict, the warm-up,
// the intervals' ends).
func metricNames() []string {
	var out []string
	for _, m := range registry {
		if !m.aux {
			out = append(out, m.Name)
		}
	}
	return out
}

// CapacitySpec is a capacity search: the value of Key, between Min and
// Max, at the edge of Target.
type CapacitySpec struct {
	Base     func() (*experiment.Draft, error)
	Key      string
	Min, Max float64
	// Find is "max", the highest value that meets the target (an arrival
	// rate, workload.rate_scale), or "min", the lowest (instances,
	// deployment.pools[0].replicas); "" chooses by the key's last part:
	// replicas min, rate and rate_scale max.
	Find   string
	Target Target
	Seeds  int
	// Resolution ends the search of a key that takes fractions when the
	// bracket is this narrow (0: a hundredth of Max − Min); a key that
	// takes whole numbers ends at brackets of 1.
	Resolution float64
	// RunPrecision sizes every run by its precision (run.precision) when
	// the base experiment does not say and its workload is stationary (0:
	// runs of the experiment's length); the runs then watch the target's
	// metric (run.precision_metric), or their verdict alone when it has no
	// interval within a run.
	RunPrecision float64
	Workers      int
	// OnEval, when set, sees each evaluation as it ends.
	OnEval func(Evaluation)
}

// DefaultRunPrecision is blis capacity's run.precision when the
// experiment gives none: each run goes on until the target's metric is
// known within 5 % (or the run is unstable), so that the answer does not
// hang on the workload's length.
const DefaultRunPrecision = experiment.CapacityPrecision

// Decisions of an evaluation.
const (
	DecideMeets    = "meets"
	DecideMisses   = "misses"
	DecideTooClose = "too close to call"
	DecideUnstable = "unstable"
	DecideNoCI     = "no interval"
)

// Evaluation is one value of the key, run with every seed. The target's
// metric is estimated over the seeds: the mean of their steady-state
// estimates with the pooled 95 % interval of their within-run intervals
// when every seed has one, else the replication interval over the seeds
// (steady.Replicate; none with one seed). Decision: unstable when a seed
// is unstable and the metric is a latency or an attainment (an unstable
// system misses every such target, whatever its short-run value); meets
// or misses when the whole interval does; too close to call when the
// target lies inside the interval (Meets then says which side the
// estimate is on); no interval (decided by the estimate) otherwise.
type Evaluation struct {
	Value float64 `json:"value"`
	Mean  float64 `json:"mean"`
	// Low and High are the interval of Mean (equal to it without one),
	// Interval how it was made: pooled, replications or none.
	Low      float64 `json:"ci_low"`
	High     float64 `json:"ci_high"`
	Interval string  `json:"interval"`
	// Stability is the worst verdict over the seeds: unstable, else
	// indeterminate, else stable.
	Stability string    `json:"stability"`
	Decision  string    `json:"decision"`
	Meets     bool      `json:"meets"`
	Why       string    `json:"why,omitempty"`
	Runs      []EvalRun `json:"runs"`
}

// EvalRun is one seed's run of an evaluation.
type EvalRun struct {
	Seed      int64    `json:"seed"`
	Metric    float64  `json:"metric"`
	Low       *float64 `json:"ci_low,omitempty"`
	High      *float64 `json:"ci_high,omitempty"`
	Stability string   `json:"stability"`
}

// CapacityResult is the search's answer: Answer meets the target and
// the other end of Bracket misses it (the bracket is [answer, next] for
// max, [previous, answer] for min), found with Runs simulations. AtAnswer
// and AtNext are the evaluations at the bracket's ends; TooClose says
// that one of them was too close to call at the runs' precision.
type CapacityResult struct {
	Key     string `json:"key"`
	Find    string `json:"find"`
	Target  string `json:"target"`
	Seeds   int    `json:"seeds"`
	Integer bool   `json:"integer"`
	// RunPrecision is the runs' run.precision (0: runs of the
	// experiment's length) and PrecisionMetric what they watched.
	RunPrecision    float64 `json:"run_precision"`
	PrecisionMetric string  `json:"precision_metric,omitempty"`
	// Answer is null when no value in [min, max] meets the target; Note
	// says why, or that the answer is an end of the range (widen it), or
	// that it is too close to call.
	Answer      *float64     `json:"answer"`
	Bracket     [2]float64   `json:"bracket"`
	AtAnswer    *Evaluation  `json:"at_answer,omitempty"`
	AtNext      *Evaluation  `json:"at_next,omitempty"`
	TooClose    bool         `json:"too_close_to_call,omitempty"`
	Note        string       `json:"note,omitempty"`
	Evaluations []Evaluation `json:"evaluations"`
	Runs        int          `json:"runs"`
}

// Capacity searches by bisection, assuming the metric is monotonic in
// the key over [Min, Max]: it checks that both ends run, evaluates them,
// then the middle of the bracket until it is narrow enough. The same spec
// gives the same evaluations in the same order on any machine.
func Capacity(ctx context.Context, s CapacitySpec) (*CapacityResult, error) {
	// The search's own flags first, each named: nothing has run yet.
	if s.Workers < 0 {
		return nil, fmt.Errorf("--workers %d: the runs at once, 0 for one per CPU", s.Workers)
	}
	if err := seedsKey.Check(float64(s.Seeds)); err != nil {
		return nil, fmt.Errorf("--seeds: %w", err)
	}
	if _, declared := experiment.WholeNumber(s.Key); !declared {
		// An unknown key is named as one, before --find is asked for.
		d, err := s.Base()
		if err != nil {
			return nil, err
		}
		if err := d.Set(s.Key, fmtFloat(s.Min), ""); err != nil {
			return nil, fmt.Errorf("--search %s: %w", clip.String(s.Key), err)
		}
	}
	if s.Find == "" {
		last := s.Key[strings.LastIndexAny(s.Key, ".]")+1:]
		switch last {
		case "replicas":
			s.Find = "min"
		case "rate", "rate_scale":
			s.Find = "max"
		default:
			return nil, fmt.Errorf("say whether to find the highest (max) or the lowest (min) value of %s that meets the target", s.Key)
		}
	}
	if s.Find != "max" && s.Find != "min" {
		return nil, fmt.Errorf("--find %q: max or min", clip.String(s.Find))
	}
	for _, x := range []struct {
		name string
		v    float64
	}{{"min", s.Min}, {"max", s.Max}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) {
			return nil, fmt.Errorf("--%s %v: give a finite number", x.name, x.v)
		}
	}
	if !(s.Min < s.Max) {
		return nil, fmt.Errorf("the range [%v, %v] is empty: --min must be below --max", s.Min, s.Max)
	}
	if math.IsNaN(s.Resolution) || math.IsInf(s.Resolution, 0) || s.Resolution < 0 {
		return nil, fmt.Errorf("--resolution %v: give a bracket width >= 0 (0: a hundredth of the range)", s.Resolution)
	}
	if math.IsNaN(s.RunPrecision) || s.RunPrecision < 0 {
		return nil, fmt.Errorf("run precision %v: give a share >= 0", s.RunPrecision)
	}
	d, err := s.Base()
	if err != nil {
		return nil, err
	}
	res := &CapacityResult{Key: s.Key, Find: s.Find, Target: s.Target.String(), Seeds: s.Seeds}
	if whole, ok := experiment.WholeNumber(s.Key); ok {
		res.Integer = whole
	} else {
		res.Integer = d.Set(s.Key, "0.5", "") != nil
	}
	if res.Integer {
		if s.Min != math.Trunc(s.Min) || s.Max != math.Trunc(s.Max) {
			return nil, fmt.Errorf("%s takes whole numbers: give a whole --min and --max", s.Key)
		}
		// A float beyond ±2^53 is not a whole number exactly, and one
		// beyond ±2^63 wrapped when converted (--max 1e300 was run as
		// -9223372036854775808).
		for _, x := range []struct {
			flag string
			v    float64
		}{{"--min", s.Min}, {"--max", s.Max}} {
			if math.Abs(x.v) > 1<<53 {
				return nil, fmt.Errorf("%s %g: %s takes whole numbers, and the search reads them exactly up to ±2^53 (9007199254740992)", x.flag, x.v, s.Key)
			}
		}
	} else if s.Resolution == 0 {
		s.Resolution = (s.Max - s.Min) / 100
		if s.Resolution == 0 || s.Min+s.Resolution == s.Min {
			return nil, fmt.Errorf("the range [%v, %v] is too narrow to bisect", s.Min, s.Max)
		}
	}
	text := func(x float64) string {
		if res.Integer {
			return strconv.FormatInt(int64(x), 10)
		}
		return shortFloat(x)
	}
	base, err := s.sized(res)
	if err != nil {
		return nil, err
	}
	// Both ends must run before any does: a value its key cannot take
	// (a billion replicas) is named now, not after the other end ran.
	if err := s.checkRange(base, text); err != nil {
		return nil, err
	}
	eval := func(xs ...float64) ([]Evaluation, error) {
		var vals []string
		for _, x := range xs {
			vals = append(vals, text(x))
		}
		p, err := NewPlan(Spec{Base: base, Grid: Grid{Axes: []Axis{{Key: s.Key, Values: vals}}}, Seeds: s.Seeds, Workers: s.Workers})
		if err != nil {
			return nil, err
		}
		cols, err := s.columns(p)
		if err != nil {
			return nil, err
		}
		r, err := p.Execute(ctx, 0, 1, Options{Workers: s.Workers})
		if err != nil {
			return nil, err
		}
		res.Runs += r.Ran
		out := make([]Evaluation, len(xs))
		for i, x := range xs {
			rows := r.Rows[i*s.Seeds : (i+1)*s.Seeds]
			ev, err := s.evaluate(p, x, vals[i], rows, cols)
			if err != nil {
				return nil, err
			}
			out[i] = ev
			res.Evaluations = append(res.Evaluations, ev)
			if s.OnEval != nil {
				s.OnEval(ev)
			}
		}
		return out, nil
	}
	ends, err := eval(s.Min, s.Max)
	if err != nil {
		return nil, err
	}
	lo, hi := ends[0], ends[1]
	// good is the end that meets the target when the bracket is right:
	// the low end for max, the high end for min.
	good, bad := lo, hi
	if s.Find == "min" {
		good, bad = hi, lo
	}
	switch {
	case !good.Meets:
		res.Bracket = [2]float64{s.Min, s.Max}
		res.AtNext = &good
		res.Note = fmt.Sprintf("%s = %s misses the target (%s): no value in [%s, %s] meets it", s.Key, text(good.Value), describe(s.Target, &good), text(s.Min), text(s.Max))
		return res, nil
	case bad.Meets:
		a := bad.Value
		res.Answer, res.Bracket, res.AtAnswer = &a, [2]float64{a, a}, &bad
		res.Note = fmt.Sprintf("%s = %s, the end of the range, meets the target too: widen the range to find the edge", s.Key, text(a))
		res.closeCall(s.Key, text)
		return res, nil
	}
	g, b := good, bad
	for {
		gap := math.Abs(b.Value - g.Value)
		if (res.Integer && gap <= 1) || (!res.Integer && gap <= s.Resolution) {
			break
		}
		mid := (g.Value + b.Value) / 2
		if res.Integer {
			mid = math.Floor(mid)
		}
		evs, err := eval(mid)
		if err != nil {
			return nil, err
		}
		if evs[0].Meets {
			g = evs[0]
		} else {
			b = evs[0]
		}
	}
	a := g.Value
	res.Answer, res.AtAnswer, res.AtNext = &a, &g, &b
	res.Bracket = [2]float64{min(g.Value, b.Value), max(g.Value, b.Value)}
	res.closeCall(s.Key, text)
	return res, nil
}

// closeCall notes an answer whose bracket's ends were too close to call.
func (r *CapacityResult) closeCall(key string, text func(float64) string) {
	var close []string
	for _, ev := range []*Evaluation{r.AtAnswer, r.AtNext} {
		if ev != nil && ev.Decision == DecideTooClose {
			close = append(close, text(ev.Value))
		}
	}
	if len(close) == 0 {
		return
	}
	r.TooClose = true
	n := fmt.Sprintf("too close to call at this precision: the target lies inside the interval at %s = %s; run the runs longer (--precision), or with more seeds", key, strings.Join(close, " and "))
	if r.Note != "" {
		n = r.Note + "; " + n
	}
	r.Note = n
}

// sized is the base experiment with its runs sized by precision: the
// capacity default (RunPrecision) when the experiment gives none and its
// workload is stationary, watching the target's metric.
func (s *CapacitySpec) sized(res *CapacityResult) (func() (*experiment.Draft, error), error) {
	d, err := s.Base()
	if err != nil {
		return nil, err
	}
	var sets [][2]string
	if s.RunPrecision > 0 && !d.Given("run.precision") {
		sets = append(sets, [2]string{"run.precision", fmtFloat(s.RunPrecision)})
	}
	apply := func(d *experiment.Draft, sets [][2]string) error {
		for _, kv := range sets {
			if err := d.Set(kv[0], kv[1], "blis capacity (runs sized by precision: --precision)"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := apply(d, sets); err != nil {
		return nil, err
	}
	e, err := d.Resolve()
	if err != nil && len(sets) > 0 {
		// The default may not apply: a workload that is not stationary by
		// design runs its length. An error of the experiment's own, or of a
		// stationary one sized by precision (--requests above
		// --max-requests), is reported as such.
		d2, err2 := s.Base()
		if err2 != nil {
			return nil, err2
		}
		e2, err2 := d2.Resolve()
		if err2 != nil {
			return nil, err // as the runs would see it: sized by precision
		}
		if ok, _ := e2.Stationary(); ok {
			return nil, err
		}
		d, e, err, sets = d2, e2, nil, nil
	}
	if err != nil {
		return nil, err
	}
	res.RunPrecision = e.Run.Precision
	if e.Run.Precision > 0 {
		res.PrecisionMetric = e.Run.PrecisionMetric
		if !d.Given("run.precision_metric") {
			res.PrecisionMetric = experiment.PrecisionStability
			if slices.Contains(steady.MetricNames, s.Target.Metric) {
				res.PrecisionMetric = s.Target.Metric
			}
			sets = append(sets, [2]string{"run.precision_metric", res.PrecisionMetric})
		}
	}
	return func() (*experiment.Draft, error) {
		d, err := s.Base()
		if err != nil {
			return nil, err
		}
		return d, apply(d, sets)
	}, nil
}

// checkRange resolves both ends of the range before anything runs.
func (s *CapacitySpec) checkRange(base func() (*experiment.Draft, error), text func(float64) string) error {
	for _, x := range []struct {
		flag string
		v    float64
	}{{"--min", s.Min}, {"--max", s.Max}} {
		d, err := base()
		if err != nil {
			return err
		}
		if err := d.Set(s.Key, text(x.v), "blis capacity "+x.flag); err != nil {
			return fmt.Errorf("%s %s: %s cannot take it: %w", x.flag, text(x.v), s.Key, err)
		}
		if _, err := d.Resolve(); err != nil {
			return fmt.Errorf("%s %s: %s = %s does not run: %w", x.flag, text(x.v), s.Key, text(x.v), err)
		}
	}
	return nil
}

// capCols are the table columns an evaluation reads: the target's
// metric, its interval's ends (-1: none) and the verdict.
type capCols struct{ metric, low, high, stability int }

func (s *CapacitySpec) columns(p *Plan) (capCols, error) {
	c := capCols{low: -1, high: -1, stability: -1}
	var err error
	if c.metric, err = p.MetricIndex(s.Target.Metric); err != nil {
		return c, err
	}
	for j, m := range p.metrics {
		switch m.Name {
		case s.Target.Metric + "_ci_low":
			c.low = j
		case s.Target.Metric + "_ci_high":
			c.high = j
		case "stability":
			c.stability = j
		}
	}
	return c, nil
}

// evaluate judges one value from its seeds' rows.
func (s *CapacitySpec) evaluate(p *Plan, x float64, val string, rows []Row, c capCols) (Evaluation, error) {
	ev := Evaluation{Value: x, Stability: steady.Stable}
	var xs []float64
	var ivs []steady.Interval
	var unstable *steady.Stability
	for _, row := range rows {
		if row.Status != StatusOK {
			return ev, fmt.Errorf("%s = %s, seed %d: %s", s.Key, val, p.Seed(row.Run), row.Error)
		}
		if row.Cells[c.metric] == "" {
			return ev, fmt.Errorf("%s = %s, seed %d: the run reports no %s (no request of its class finished?)", s.Key, val, p.Seed(row.Run), s.Target.Metric)
		}
		y, _ := strconv.ParseFloat(row.Cells[c.metric], 64)
		xs = append(xs, y)
		er := EvalRun{Seed: p.Seed(row.Run), Metric: y}
		if c.stability >= 0 {
			er.Stability = row.Cells[c.stability]
		}
		switch er.Stability {
		case steady.Unstable:
			ev.Stability = steady.Unstable
			if unstable == nil {
				unstable = row.stability
			}
		case steady.Indeterminate:
			if ev.Stability == steady.Stable {
				ev.Stability = steady.Indeterminate
			}
		}
		if c.low >= 0 && row.Cells[c.low] != "" && row.Cells[c.high] != "" {
			l, _ := strconv.ParseFloat(row.Cells[c.low], 64)
			h, _ := strconv.ParseFloat(row.Cells[c.high], 64)
			er.Low, er.High = &l, &h
			ivs = append(ivs, steady.Interval{Estimate: y, Low: l, High: h, Batches: 1, Independent: true})
		}
		ev.Runs = append(ev.Runs, er)
	}
	var iv steady.Interval
	switch {
	case len(ivs) == len(rows):
		iv, ev.Interval = steady.Pool(ivs), "pooled"
	case len(xs) >= 2:
		iv, ev.Interval = steady.Replicate(xs), "replications"
	default:
		iv, ev.Interval = steady.Replicate(xs), "none"
	}
	ev.Mean, ev.Low, ev.High = iv.Estimate, iv.Low, iv.High
	t := s.Target
	switch {
	case ev.Stability == steady.Unstable && latencyLike(t.Metric):
		ev.Decision, ev.Meets = DecideUnstable, false
		ev.Why = "unstable: an unstable system misses every latency and attainment target, whatever its short-run value"
		if unstable != nil {
			ev.Why = "unstable: " + unstable.Why
			if unstable.Cause != "" {
				ev.Why += " (likely cause: " + unstable.Cause + ")"
			}
			ev.Why += "; it misses every latency and attainment target, whatever its short-run value"
		}
	case !iv.Has():
		ev.Decision, ev.Meets = DecideNoCI, t.Met(ev.Mean)
	case t.Met(ev.Low) && t.Met(ev.High):
		ev.Decision, ev.Meets = DecideMeets, true
	case !t.Met(ev.Low) && !t.Met(ev.High):
		ev.Decision, ev.Meets = DecideMisses, false
	default:
		ev.Decision, ev.Meets = DecideTooClose, t.Met(ev.Mean)
	}
	if ev.Decision != DecideUnstable && ev.Stability == steady.Indeterminate {
		ev.Why = "a seed's stability is indeterminate (its run reached a cap before it could tell): the estimate may not be its steady state"
	}
	return ev, nil
}

// latencyLike reports whether a metric is a latency, an attainment or a
// goodput: what an unstable system fails whatever its value.
func latencyLike(m string) bool {
	return strings.HasSuffix(m, "_ms") || strings.Contains(m, "attainment") || strings.Contains(m, "goodput")
}

// describe is an evaluation's metric in words.
func describe(t Target, ev *Evaluation) string {
	if ev.Decision == DecideUnstable {
		return ev.Why
	}
	if ev.Low != ev.High {
		return fmt.Sprintf("%s %s, 95 %% interval %s to %s", t.Metric, fmtFloat(round4(ev.Mean)), fmtFloat(round4(ev.Low)), fmtFloat(round4(ev.High)))
	}
	return fmt.Sprintf("%s %s", t.Metric, fmtFloat(round4(ev.Mean)))
}

// round4 keeps 4 significant digits, for messages.
func round4(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// Line is an evaluation on one line, as blis capacity prints it.
func (ev *Evaluation) Line(key string, t Target) string {
	return fmt.Sprintf("%s = %s: %s (%d seeds; %s): %s %s", key, fmtFloat(ev.Value), describe(t, ev), len(ev.Runs), ev.Stability, ev.Decision, t)
}

// Lines are the answer in words: the value and its bracket, the metric
// at the answer, and why the next value fails.
func (r *CapacityResult) Lines(t Target) []string {
	if r.Answer == nil {
		return nil
	}
	out := []string{fmt.Sprintf("%s = %s (bracket [%s, %s]), %d runs", r.Key, fmtFloat(*r.Answer), fmtFloat(r.Bracket[0]), fmtFloat(r.Bracket[1]), r.Runs)}
	if ev := r.AtAnswer; ev != nil {
		out = append(out, fmt.Sprintf("at %s: %s", fmtFloat(ev.Value), describe(t, ev)))
	}
	if ev := r.AtNext; ev != nil {
		why := describe(t, ev)
		if ev.Decision != DecideUnstable {
			why += ": " + ev.Decision + " " + t.String()
		}
		out = append(out, fmt.Sprintf("%s fails: %s", fmtFloat(ev.Value), why))
	}
	return out
}

// shortFloat writes x as fmtFloat does in its usual range, and with an
// exponent beyond it: --min 1e-300 is not written with 300 zeros.
func shortFloat(x float64) string {
	if a := math.Abs(x); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmtFloat(x)
}
