package sweep

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/clip"
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
			if c.Name == m {
				return Target{Metric: m, Op: op, Value: x}, nil
			}
		}
		return Target{}, fmt.Errorf("target %q: no metric %q; use one of %s", clip.String(s), clip.String(m), strings.Join(metricNames(), ", "))
	}
	return Target{}, fmt.Errorf("target %q: want METRIC>=VALUE or METRIC<=VALUE (realtime_slo_attainment>=0.99)", clip.String(s))
}

func metricNames() []string {
	var out []string
	for _, m := range registry {
		out = append(out, m.Name)
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
	// Precision ends the search of a key that takes fractions when the
	// bracket is this narrow (0: a hundredth of Max − Min); a key that
	// takes whole numbers ends at brackets of 1.
	Precision float64
	Workers   int
	// OnEval, when set, sees each evaluation as it ends.
	OnEval func(Evaluation)
}

// Evaluation is one value of the key, run with every seed: the mean of
// the target's metric over the seeds decides.
type Evaluation struct {
	Value float64   `json:"value"`
	Mean  float64   `json:"mean"`
	Meets bool      `json:"meets"`
	Runs  []EvalRun `json:"runs"`
}

// EvalRun is one seed's run of an evaluation.
type EvalRun struct {
	Seed   int64   `json:"seed"`
	Metric float64 `json:"metric"`
}

// CapacityResult is the search's answer: Answer meets the target and
// the other end of Bracket misses it (the bracket is [answer, next] for
// max, [previous, answer] for min), found with Runs simulations.
type CapacityResult struct {
	Key     string `json:"key"`
	Find    string `json:"find"`
	Target  string `json:"target"`
	Seeds   int    `json:"seeds"`
	Integer bool   `json:"integer"`
	// Answer is null when no value in [min, max] meets the target; Note
	// says why, or that the answer is an end of the range (widen it).
	Answer      *float64     `json:"answer"`
	Bracket     [2]float64   `json:"bracket"`
	Note        string       `json:"note,omitempty"`
	Evaluations []Evaluation `json:"evaluations"`
	Runs        int          `json:"runs"`
}

// Capacity searches by bisection, assuming the metric is monotonic in
// the key over [Min, Max]: it evaluates both ends, then the middle of the
// bracket until it is narrow enough. The same spec gives the same
// evaluations in the same order on any machine.
func Capacity(ctx context.Context, s CapacitySpec) (*CapacityResult, error) {
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
		return nil, fmt.Errorf("find %q: max or min", clip.String(s.Find))
	}
	if !(s.Min < s.Max) || math.IsInf(s.Min, 0) || math.IsInf(s.Max, 0) {
		return nil, fmt.Errorf("the range [%v, %v] is empty: min must be below max", s.Min, s.Max)
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
	} else if s.Precision <= 0 {
		s.Precision = (s.Max - s.Min) / 100
	}
	text := func(x float64) string {
		if res.Integer {
			return strconv.FormatInt(int64(x), 10)
		}
		return fmtFloat(x)
	}
	eval := func(xs ...float64) ([]Evaluation, error) {
		var vals []string
		for _, x := range xs {
			vals = append(vals, text(x))
		}
		p, err := NewPlan(Spec{Base: s.Base, Grid: Grid{Axes: []Axis{{Key: s.Key, Values: vals}}}, Seeds: s.Seeds, Workers: s.Workers})
		if err != nil {
			return nil, err
		}
		m, err := p.MetricIndex(s.Target.Metric)
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
			ev := Evaluation{Value: x}
			var sum float64
			for k := range s.Seeds {
				row := r.Rows[i*s.Seeds+k]
				if row.Status != StatusOK {
					return nil, fmt.Errorf("%s = %s, seed %d: %s", s.Key, vals[i], p.Seed(row.Run), row.Error)
				}
				if row.Cells[m] == "" {
					return nil, fmt.Errorf("%s = %s, seed %d: the run reports no %s (no request of its class finished?)", s.Key, vals[i], p.Seed(row.Run), s.Target.Metric)
				}
				y, _ := strconv.ParseFloat(row.Cells[m], 64)
				sum += y
				ev.Runs = append(ev.Runs, EvalRun{Seed: p.Seed(row.Run), Metric: y})
			}
			ev.Mean = sum / float64(s.Seeds)
			ev.Meets = s.Target.Met(ev.Mean)
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
		res.Note = fmt.Sprintf("%s = %s misses the target (%s %s): no value in [%s, %s] meets it", s.Key, text(good.Value), s.Target.Metric, fmtFloat(good.Mean), text(s.Min), text(s.Max))
		return res, nil
	case bad.Meets:
		a := bad.Value
		res.Answer, res.Bracket = &a, [2]float64{a, a}
		res.Note = fmt.Sprintf("%s = %s, the end of the range, meets the target too: widen the range to find the edge", s.Key, text(a))
		return res, nil
	}
	g, b := good.Value, bad.Value
	for {
		gap := math.Abs(b - g)
		if (res.Integer && gap <= 1) || (!res.Integer && gap <= s.Precision) {
			break
		}
		mid := (g + b) / 2
		if res.Integer {
			mid = math.Floor(mid)
		}
		evs, err := eval(mid)
		if err != nil {
			return nil, err
		}
		if evs[0].Meets {
			g = mid
		} else {
			b = mid
		}
	}
	res.Answer = &g
	res.Bracket = [2]float64{min(g, b), max(g, b)}
	return res, nil
}
