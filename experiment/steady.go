package experiment

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
	"github.com/blis-sim/blis/steady"
)

// The output analysis of a run (package steady, docs/statistics.md): its
// collector, configured from the experiment.

// Stationary reports whether e's workload is stationary by design, and
// why not: steady-state estimates, and a run sized by precision, apply
// only to such runs.
func (e *Experiment) Stationary() (bool, string) { return e.stationary() }

// Given reports whether an input gave key (a file, a flag or --set),
// rather than its default.
func (d *Draft) Given(key string) bool {
	if _, ok := d.flags[key]; ok {
		return true
	}
	if _, ok := d.sets[key]; ok {
		return true
	}
	_, placed := d.origin(key)
	return placed
}

// PrecisionStability is the precision metric that stops a run sized by
// precision on its verdict alone (stable or unstable), for a metric
// without an interval within a run.
const PrecisionStability = "stability"

func (e *Experiment) stationary() (bool, string) {
	w := &e.Workload
	switch w.Kind {
	case Replay:
		return false, "a replayed trace's arrivals follow the trace"
	case Requests:
		return false, "the requests were given with their arrival times"
	case Synthetic:
	default:
		s := w.Spec
		if len(s.Profile) > 0 {
			return false, "the workload spec's rate follows a load profile"
		}
		for _, a := range append([]workload.Arrival{s.Arrival}, arrivals(s)...) {
			switch a.Process {
			case workload.ProcessBursty:
				return false, "the workload spec's arrivals are bursty (the rate changes on a schedule)"
			case workload.ProcessDiurnal:
				return false, "the workload spec's arrivals are diurnal (the rate follows a cycle)"
			}
		}
	}
	if e.Policies.Autoscale.Type != "none" && e.Mode == ModeCluster {
		return false, fmt.Sprintf("the %s autoscaler changes the fleet while the run goes on", e.Policies.Autoscale.Type)
	}
	return true, ""
}

// arrivals are the tenants' own arrival processes.
func arrivals(s *workload.WorkloadSpec) []workload.Arrival {
	var out []workload.Arrival
	for _, t := range s.Tenants {
		out = append(out, t.Arrival)
	}
	return out
}

// collector is the run's output analysis; ids name the instances of a
// fixed fleet (nil: a single instance, or a fleet that changes).
func (r *runner) collector(ids []string) *steady.Collector {
	e := r.e
	cfg := steady.Config{}
	switch e.Run.Warmup {
	case "auto":
		cfg.Warmup = steady.WarmupAuto
	case "none":
		cfg.Warmup = steady.WarmupNone
	default:
		cfg.Warmup, cfg.WarmupUs = steady.WarmupFixed, e.Run.WarmupUs
	}
	cfg.Stationary, cfg.NotStationary = e.stationary()
	if len(ids) > 1 && cfg.Stationary {
		cfg.PerInstance, cfg.InstanceIDs = true, ids
	}
	if p := e.Run.Precision; p > 0 {
		rule := &steady.Rule{Rel: p, Metric: e.Run.PrecisionMetric, MaxArrivals: e.Run.MaxRequests, MaxTimeUs: e.Run.MaxSimTimeUs}
		if rule.Metric == PrecisionStability {
			rule.Metric = ""
		}
		switch w := &e.Workload; w.Kind {
		case Synthetic:
			rule.MinArrivals = int64(w.Synthetic.Requests)
		default:
			if w.Spec != nil {
				rule.MinArrivals = min(w.Spec.Requests, e.Run.MaxRequests)
			}
		}
		cfg.Rule = rule
	}
	r.col = steady.NewCollector(cfg)
	return r.col
}

// horizonUs is the run's horizon, µs: run.horizon_s, and for a run sized
// by precision its time cap (0: none).
func (e *Experiment) horizonUs() int64 {
	h := units.SecondsToUs(e.Run.HorizonS)
	if e.Run.Precision > 0 && (h == 0 || e.Run.MaxSimTimeUs < h) {
		h = e.Run.MaxSimTimeUs
	}
	return h
}

// sized is the workload of a run sized by precision: the synthetic
// workload's requests, or a spec's cap and duration, become the caps.
func (e *Experiment) sizedSynthetic() workload.Spec {
	s := e.Workload.Synthetic
	if e.Run.Precision > 0 {
		s.Requests = int(e.Run.MaxRequests)
	}
	return s
}

func (e *Experiment) sizedSpec() *workload.WorkloadSpec {
	s := e.Workload.Spec
	if e.Run.Precision == 0 {
		return s
	}
	c := *s
	c.Requests, c.DurationUs = e.Run.MaxRequests, 0
	return &c
}

// stability says on stderr what the verdict means: a warning when the
// run is unstable (it replaces a heuristic on the served share and the
// queueing delay), a note when it is too short to tell. what names the
// servers ("the instance", "the 4 instances").
func (r *runner) stability(st *steady.Stability, what string) {
	if st == nil || r.res.Partial {
		return
	}
	if s := st.Stop; s != nil {
		r.note("the run stopped at %.1f s of simulated time and %d arrivals: %s", s.AtS, s.Arrivals, stopWhy(s))
	}
	switch st.Verdict {
	case steady.Unstable:
		over := fmt.Sprintf("from %.4g s to %.4g s after the first arrival", st.FromS, st.ToS)
		if st.NotStationary != "" {
			over += " (" + st.NotStationary + ": no steady state is expected)"
		}
		msg := fmt.Sprintf("unstable: requests arrived at %.1f per second but %s served %.1f per second (%.0f %%); the number in the system grew by %.3g per second (95 %% interval %.3g to %.3g) %s, so the latencies grow with the run's length rather than describing the deployment at this load",
			st.OfferedPerS, what, st.ServedPerS, 100*st.ServedPerS/max(st.OfferedPerS, 1e-300), st.Growth.Estimate, st.Growth.Low, st.Growth.High, over)
		if st.Cause == steady.CauseImbalance {
			var grow, calm []string
			for _, in := range st.Instances {
				switch {
				case in.Verdict == steady.Unstable:
					grow = append(grow, in.ID)
				case in.KeepsUp && in.MeanInSystem == 0:
					calm = append(calm, in.ID+" (idle)")
				case in.KeepsUp:
					calm = append(calm, fmt.Sprintf("%s (%.1f in it on average)", in.ID, in.MeanInSystem))
				}
			}
			msg += fmt.Sprintf("; likely cause: routing imbalance, not capacity: the backlog grows on %s while %s keep up: the router sends %s more than %s serve; try another routing policy before adding instances",
				listOf(grow, 4), listOf(calm, 4), them(len(grow)), they(len(grow)))
		} else {
			msg += "; likely cause: capacity: lower the rate or add instances"
		}
		r.warn("%s", msg)
	case steady.Indeterminate:
		r.note("stability: indeterminate: %s (metrics.stability)", st.Why)
	}
}

func stopWhy(s *steady.Stop) string {
	switch s.Reason {
	case steady.StopPrecision:
		return fmt.Sprintf("%s's 95 %% interval is within %.3g %% of its estimate and the run is stable", s.Metric, 100*s.Achieved)
	case steady.StopStable:
		return "it is stable"
	case steady.StopUnstable:
		return "it is unstable"
	case steady.StopMaxRequests:
		return fmt.Sprintf("the cap on arrivals (run.max_requests, --max-requests) before %s reached %g %%", s.Metric, 100*s.Rel)
	case steady.StopMaxSimTime:
		return fmt.Sprintf("the cap on simulated time (run.max_sim_time, --max-sim-time, or run.horizon_s) before %s reached %g %%", s.Metric, 100*s.Rel)
	}
	return "the workload ended"
}

// listOf is at most n of names, and how many more.
// them and they are the pronouns for n instances.
func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func they(n int) string {
	if n == 1 {
		return "it can"
	}
	return "they can"
}

func listOf(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// The output analysis's defaults: each declared once, for the flags, the
// resolver and the docs.
const (
	// DefaultWarmup finds the warm-up by MSER.
	DefaultWarmup = "auto"
	// DefaultPrecisionMetric is the metric a run sized by precision
	// watches when none is named.
	DefaultPrecisionMetric = "ttft_p99_ms"
	// DefaultMaxRequests and DefaultMaxSimTime cap a run sized by
	// precision: a million arrivals, a simulated day.
	DefaultMaxRequests = 1_000_000
	DefaultMaxSimTime  = "24h"
	// MinPrecision is the finest precision asked for: below it no run
	// ends but at its caps.
	MinPrecision = 1e-4
	// CapacityPrecision is blis capacity's run.precision when the
	// experiment gives none (sweep.DefaultRunPrecision).
	CapacityPrecision = 0.05
)

// resolveSteady reads run.warmup, run.precision and its metric and caps.
func (d *Draft) resolveSteady(r *RunOptions, ry *runYAML) error {
	r.Warmup = deref(ry.Warmup, DefaultWarmup)
	switch r.Warmup {
	case "auto", "none":
	default:
		us, err := parseDurationUs(r.Warmup)
		if err != nil {
			return d.errf("run.warmup", "auto, none or a duration (30s, 2m; whole µs): %v", err)
		}
		r.WarmupUs = us
	}
	r.Precision = deref(ry.Precision, 0)
	switch p := r.Precision; {
	case math.IsNaN(p) || math.IsInf(p, 0) || p < 0:
		return d.errf("run.precision", "must be a relative half-width in [%g, 1] (0.05: the 95 %% interval within 5 %% of the estimate), or 0 for a run of the workload's length; got %v", MinPrecision, p)
	case p > 1:
		return d.errf("run.precision", "%v is a half-width above the estimate itself; give a share in [%g, 1] (0.05 for 5 %%)", p, MinPrecision)
	case p > 0 && p < MinPrecision:
		return d.errf("run.precision", "%v is finer than %g: no run would reach it before its caps", p, MinPrecision)
	}
	r.PrecisionMetric = deref(ry.PrecisionMetric, DefaultPrecisionMetric)
	r.MaxRequests = deref(ry.MaxRequests, int64(DefaultMaxRequests))
	r.MaxSimTime = deref(ry.MaxSimTime, DefaultMaxSimTime)
	if r.Precision == 0 {
		for _, k := range []struct {
			given bool
			key   string
		}{{ry.PrecisionMetric != nil, "run.precision_metric"}, {ry.MaxRequests != nil, "run.max_requests"}, {ry.MaxSimTime != nil, "run.max_sim_time"}} {
			if k.given {
				return d.errf(k.key, "has no effect without %s (a run sized by its precision)", d.name("run.precision"))
			}
		}
		return nil
	}
	if r.PrecisionMetric != PrecisionStability && !slices.Contains(steady.MetricNames, r.PrecisionMetric) {
		return d.errf("run.precision_metric", "%q has no interval within a run; use one of %s, or %s (the verdict alone)", clip.String(r.PrecisionMetric), strings.Join(steady.MetricNames, ", "), PrecisionStability)
	}
	us, err := parseDurationUs(r.MaxSimTime)
	if err != nil {
		return d.errf("run.max_sim_time", "a duration (30m, 24h; whole µs): %v", err)
	}
	if us == 0 {
		return d.errf("run.max_sim_time", "must be > 0")
	}
	r.MaxSimTimeUs = us
	return nil
}

// durationShape is a duration time.ParseDuration refuses only for its
// size (99999999999h overflows int64 nanoseconds): "is not a duration"
// said the wrong thing.
var durationShape = regexp.MustCompile(`^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)$`)

// parseDurationUs reads a duration with a unit, in whole µs, at least 0
// and within the clock's range.
func parseDurationUs(s string) (int64, error) {
	dur, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil && durationShape.MatchString(strings.TrimSpace(s)):
		return 0, fmt.Errorf("%s is beyond the clock's %d µs", clip.String(s), int64(sim.MaxTimeUs))
	case err != nil:
		return 0, fmt.Errorf("%q is not a duration", clip.String(s))
	case dur < 0:
		return 0, fmt.Errorf("%s is negative", s)
	case dur%time.Microsecond != 0:
		return 0, fmt.Errorf("%s is not a whole number of microseconds", s)
	case dur.Microseconds() > sim.MaxTimeUs:
		return 0, fmt.Errorf("%s is beyond the clock's %d µs", s, int64(sim.MaxTimeUs))
	}
	return dur.Microseconds(), nil
}

// checkPrecision refuses precision on a workload that is not stationary
// by design, and a synthetic workload longer than its cap.
func (d *Draft) checkPrecision(e *Experiment) error {
	r := &e.Run
	if r.Precision == 0 {
		return nil
	}
	if ok, why := e.stationary(); !ok {
		return d.errf("run.precision", "sizes a run of a stationary workload, and %s: give the run's length instead", why)
	}
	if w := &e.Workload; w.Kind == Synthetic && int64(w.Synthetic.Requests) > r.MaxRequests {
		return d.errf("workload.synthetic.requests", "%d is more than %s %d: with %s, the requests are the run's least length",
			w.Synthetic.Requests, d.name("run.max_requests"), r.MaxRequests, d.name("run.precision"))
	}
	return nil
}
