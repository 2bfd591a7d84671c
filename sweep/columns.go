package sweep

import (
	"slices"
	"strconv"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/steady"
)

// Kind is a column's type: Int and Float are 64-bit, String UTF-8.
type Kind uint8

const (
	Int Kind = iota
	Float
	String
)

func (k Kind) String() string { return [...]string{"int", "float", "string"}[k] }

// Column is one column of the table. Metrics are empty (null in Parquet)
// when the run failed or its result lacks the value.
type Column struct {
	Name   string
	Kind   Kind
	Unit   string
	Metric bool
	Doc    string
}

// The fixed columns around the swept keys.
var (
	colPoint  = Column{Name: "point", Kind: Int, Doc: "the grid point, from 0 in grid order (the first key varies slowest)"}
	colSeed   = Column{Name: "seed", Kind: Int, Doc: "the run's seed: the point's run.seed + k for its k-th seed"}
	colStatus = Column{Name: "status", Kind: String, Doc: "ok, or error"}
	colError  = Column{Name: "error", Kind: String, Doc: "why the run failed; empty when ok"}
)

// metric is a column of the registry: declared says, from the resolved
// experiment before it runs, whether its result can have the value, so
// that the columns are a function of the sweep alone (every shard writes
// the same header); value reads it from the result.
type metric struct {
	Column
	declared func(e *experiment.Experiment) bool
	value    func(r *view) (string, bool)
	// aux marks the output analysis's columns beside the metrics (the
	// verdict, the warm-up, the intervals' ends): not a target or a
	// figure's metric.
	aux bool
}

// view is a run's result in the shape both modes share.
type view struct {
	c *cluster.Result
	i *sim.Result
	f *cluster.FitnessResult
	// s is the output analysis's report (its parts nil when absent).
	s *steady.Report
}

func newView(r *experiment.Result) *view {
	v := &view{c: r.Cluster, i: r.Instance, s: &steady.Report{}}
	if cr, ok := r.Report.(*experiment.ClusterReport); ok {
		v.f = cr.Fitness
	}
	switch {
	case r.Cluster != nil:
		v.s.Stability, v.s.SteadyState = r.Cluster.Stability, r.Cluster.SteadyState
	case r.Instance != nil:
		v.s.Stability, v.s.SteadyState = r.Instance.Stability, r.Instance.SteadyState
	}
	return v
}

// Formatting: integers in decimal, floats in the shortest decimal that
// reads back to the same float64, never with an exponent.
func fmtInt(n int64) string     { return strconv.FormatInt(n, 10) }
func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func always(*experiment.Experiment) bool { return true }

func isCluster(e *experiment.Experiment) bool { return e.Mode == experiment.ModeCluster }

// classes are the SLO classes a cluster run of e can report: a workload
// spec's tenants' classes that have targets; every class for a replayed
// trace or given requests (their rows may carry any); none for the
// synthetic workload, whose requests have no class.
func classes(e *experiment.Experiment) [4]bool {
	var out [4]bool
	if e.Mode != experiment.ModeCluster {
		return out
	}
	switch e.Workload.Kind {
	case experiment.Replay, experiment.Requests:
		for c := sim.SLORealtime; c <= sim.SLOBatch; c++ {
			out[c] = true
		}
	case experiment.SpecNode, experiment.SpecFile, experiment.Scenario:
		s := e.Workload.Spec
		for _, t := range s.Tenants {
			tg := s.SLO[t.SLOClass]
			if t.SLOClass != sim.SLONone && (tg.TTFTMs > 0 || tg.TPOTMs > 0 || tg.E2EMs > 0) {
				out[t.SLOClass] = true
			}
		}
	}
	return out
}

func anyClass(e *experiment.Experiment) bool {
	c := classes(e)
	return c[1] || c[2] || c[3]
}

func hasFairness(e *experiment.Experiment) bool {
	if e.Mode != experiment.ModeCluster {
		return false
	}
	switch e.Workload.Kind {
	case experiment.Synthetic:
		return false
	}
	return true
}

// fleet reads the fleet's size and cost, which every cluster run reports
// (a fixed fleet too).
func fleet(f func(*cluster.Fleet) (float64, bool)) func(*view) (float64, bool) {
	return func(v *view) (float64, bool) {
		if v.c == nil || v.c.Fleet == nil {
			return 0, false
		}
		return f(v.c.Fleet)
	}
}

func intM(name, unit, doc string, declared func(*experiment.Experiment) bool, f func(*view) (int64, bool)) *metric {
	return &metric{Column: Column{Name: name, Kind: Int, Unit: unit, Metric: true, Doc: doc}, declared: declared,
		value: func(v *view) (string, bool) {
			n, ok := f(v)
			return fmtInt(n), ok
		}}
}

func stringM(name, doc string, declared func(*experiment.Experiment) bool, f func(*view) (string, bool)) *metric {
	return &metric{Column: Column{Name: name, Kind: String, Metric: true, Doc: doc}, declared: declared, value: f}
}

func floatM(name, unit, doc string, declared func(*experiment.Experiment) bool, f func(*view) (float64, bool)) *metric {
	return &metric{Column: Column{Name: name, Kind: Float, Unit: unit, Metric: true, Doc: doc}, declared: declared,
		value: func(v *view) (string, bool) {
			x, ok := f(v)
			return fmtFloat(x), ok
		}}
}

// both reads a value of either mode's result.
func both[T any](c func(*cluster.Result) T, i func(*sim.Result) T) func(*view) (T, bool) {
	return func(v *view) (T, bool) {
		if v.c != nil {
			return c(v.c), true
		}
		return i(v.i), true
	}
}

// dist reads a latency distribution's statistic, absent when it counts
// no request.
func dist(c func(*cluster.Result) sim.Distribution, i func(*sim.Result) sim.Distribution, stat func(sim.Distribution) float64) func(*view) (float64, bool) {
	return func(v *view) (float64, bool) {
		var d sim.Distribution
		if v.c != nil {
			d = c(v.c)
		} else {
			d = i(v.i)
		}
		return stat(d), d.Count > 0
	}
}

func mean(d sim.Distribution) float64 { return d.Mean }
func p50(d sim.Distribution) float64  { return d.P50 }
func p90(d sim.Distribution) float64  { return d.P90 }
func p99(d sim.Distribution) float64  { return d.P99 }

func ttftC(r *cluster.Result) sim.Distribution { return r.TTFT }
func ttftI(r *sim.Result) sim.Distribution     { return r.TTFT }
func itlC(r *cluster.Result) sim.Distribution  { return r.ITL }
func itlI(r *sim.Result) sim.Distribution      { return r.ITL }
func e2eC(r *cluster.Result) sim.Distribution  { return r.E2E }
func e2eI(r *sim.Result) sim.Distribution      { return r.E2E }
func schedC(r *cluster.Result) sim.Distribution {
	return r.SchedulingDelay
}
func schedI(r *sim.Result) sim.Distribution { return r.SchedulingDelay }

// class reads a value of one SLO class's result, absent when no request
// of the class arrived or it has no target.
func class[T any](c sim.SLOClass, f func(*cluster.ClassResult) (T, bool)) func(*view) (T, bool) {
	return func(v *view) (T, bool) {
		var zero T
		if v.c == nil {
			return zero, false
		}
		for i := range v.c.PerSLOClass {
			if cr := &v.c.PerSLOClass[i]; cr.Class == c.String() {
				return f(cr)
			}
		}
		return zero, false
	}
}

func declaredClass(c sim.SLOClass) func(*experiment.Experiment) bool {
	return func(e *experiment.Experiment) bool { return classes(e)[c] }
}

// registry is every metric column, in table order. A metric is a column
// of a sweep's table when its experiments declare it; a metric added
// later (the autoscaler's cost) is declared only by the experiments that
// have it, so the tables of every other sweep keep their bytes.
var registry = func() []*metric {
	m := []*metric{
		intM("arrived", "requests", "requests that arrived (a cluster's arrived; an instance's injected)", always,
			both(func(r *cluster.Result) int64 { return r.Requests.Arrived }, func(r *sim.Result) int64 { return r.Requests.Injected })),
		intM("completed", "requests", "requests completed", always,
			both(func(r *cluster.Result) int64 { return r.Requests.Completed }, func(r *sim.Result) int64 { return r.Requests.Completed })),
		intM("unserved", "requests", "requests that ended without completing: rejected by admission, dropped as unservable, rejected as too long, timed out", always,
			both(func(r *cluster.Result) int64 {
				c := r.Requests
				return c.Rejected + c.DroppedUnservable + c.RejectedTooLong + c.TimedOut
			}, func(r *sim.Result) int64 { c := r.Requests; return c.Dropped + c.RejectedTooLong + c.TimedOut })),
		floatM("duration_s", "s", "simulated time from the first arrival to the last completion", always,
			both(func(r *cluster.Result) float64 { return r.DurationS }, func(r *sim.Result) float64 { return r.DurationS })),
		floatM("requests_per_s", "1/s", "completed requests per second of duration", always,
			both(func(r *cluster.Result) float64 { return r.RequestsPerS }, func(r *sim.Result) float64 { return r.RequestsPerS })),
		floatM("output_tokens_per_s", "1/s", "output tokens per second of duration", always,
			both(func(r *cluster.Result) float64 { return r.OutputTokensPerS }, func(r *sim.Result) float64 { return r.OutputTokensPerS })),
		floatM("ttft_mean_ms", "ms", "time to first token, mean", always, dist(ttftC, ttftI, mean)),
		floatM("ttft_p50_ms", "ms", "time to first token, median", always, dist(ttftC, ttftI, p50)),
		floatM("ttft_p90_ms", "ms", "time to first token, 90th percentile", always, dist(ttftC, ttftI, p90)),
		floatM("ttft_p99_ms", "ms", "time to first token, 99th percentile", always, dist(ttftC, ttftI, p99)),
		floatM("itl_mean_ms", "ms", "inter-token latency, mean", always, dist(itlC, itlI, mean)),
		floatM("itl_p50_ms", "ms", "inter-token latency, median", always, dist(itlC, itlI, p50)),
		floatM("itl_p99_ms", "ms", "inter-token latency, 99th percentile", always, dist(itlC, itlI, p99)),
		floatM("e2e_mean_ms", "ms", "end-to-end latency, mean", always, dist(e2eC, e2eI, mean)),
		floatM("e2e_p50_ms", "ms", "end-to-end latency, median", always, dist(e2eC, e2eI, p50)),
		floatM("e2e_p99_ms", "ms", "end-to-end latency, 99th percentile", always, dist(e2eC, e2eI, p99)),
		floatM("scheduling_delay_p99_ms", "ms", "arrival to first scheduling, 99th percentile", always, dist(schedC, schedI, p99)),
		intM("preemptions", "", "preemptions (recompute)", always,
			both(func(r *cluster.Result) int64 { return r.Preemptions }, func(r *sim.Result) int64 { return r.Preemptions })),
		floatM("prefix_cache_hit_rate", "", "share of prompt tokens served from the prefix cache", always,
			both(func(r *cluster.Result) float64 { return r.PrefixCacheHitRate }, func(r *sim.Result) float64 { return r.PrefixCacheHitRate })),
		floatM("slo_attainment", "", "share of the requests of every class with targets that met all their class's targets (cluster.Attainment)", anyClass,
			func(v *view) (float64, bool) {
				if v.c == nil || v.c.SLO == nil {
					return 0, false
				}
				return v.c.SLO.Attainment, true
			}),
		floatM("goodput_rps", "1/s", "requests that met their targets, per second of duration", anyClass,
			func(v *view) (float64, bool) {
				if v.c == nil || v.c.SLO == nil {
					return 0, false
				}
				return v.c.SLO.GoodputRPS, true
			}),
	}
	for c := sim.SLORealtime; c <= sim.SLOBatch; c++ {
		n := c.String()
		m = append(m,
			floatM(n+"_slo_attainment", "", n+" requests' SLO attainment", declaredClass(c),
				class(c, func(r *cluster.ClassResult) (float64, bool) {
					if r.SLO == nil {
						return 0, false
					}
					return r.SLO.Attainment, true
				})),
			floatM(n+"_goodput_rps", "1/s", n+" requests that met their targets, per second", declaredClass(c),
				class(c, func(r *cluster.ClassResult) (float64, bool) {
					if r.SLO == nil {
						return 0, false
					}
					return r.SLO.GoodputRPS, true
				})),
			floatM(n+"_ttft_p99_ms", "ms", n+" requests' time to first token, 99th percentile", declaredClass(c),
				class(c, func(r *cluster.ClassResult) (float64, bool) { return r.TTFT.P99, r.TTFT.Count > 0 })),
			floatM(n+"_tpot_p99_ms", "ms", n+" requests' time per output token, 99th percentile", declaredClass(c),
				class(c, func(r *cluster.ClassResult) (float64, bool) { return r.TPOT.P99, r.TPOT.Count > 0 })),
		)
	}
	m = append(m,
		floatM("jain_index", "", "Jain's fairness index over the tenants' output-token throughputs", hasFairness,
			func(v *view) (float64, bool) {
				if v.c == nil || v.c.Fairness == nil {
					return 0, false
				}
				return v.c.Fairness.JainIndex, true
			}),
		floatM("mean_replicas", "instances", "the fleet's time-averaged size, summed over its pools (cluster.Fleet)", isCluster,
			fleet(func(f *cluster.Fleet) (float64, bool) {
				var n float64
				for _, p := range f.Pools {
					n += p.MeanReplicas
				}
				return n, true
			})),
		floatM("gpu_hours", "GPU·h", "the fleet's GPUs times their billed time", isCluster,
			fleet(func(f *cluster.Fleet) (float64, bool) { return f.GPUHours, true })),
		floatM("cost", "USD", "GPU-hours times each pool's price per GPU-hour (docs/autoscaling.md)", isCluster,
			fleet(func(f *cluster.Fleet) (float64, bool) { return f.Cost, true })),
		floatM("cost_per_million_output_tokens", "USD", "cost per million output tokens delivered", isCluster,
			fleet(func(f *cluster.Fleet) (float64, bool) {
				if f.CostPerMillionTokens == nil {
					return 0, false
				}
				return *f.CostPerMillionTokens, true
			})),
		floatM("fitness", "", "the fitness score of run.fitness_weights", func(e *experiment.Experiment) bool { return len(e.Run.Fitness) > 0 },
			func(v *view) (float64, bool) {
				if v.f == nil {
					return 0, false
				}
				return v.f.Score, true
			}),
	)
	return withIntervals(m)
}()

// withIntervals adds the output analysis's columns to the registry: the
// run's stability verdict and warm-up first, and after each metric the
// analysis estimates (steady.MetricNames) its 95 % interval; such a
// metric's value is then the steady-state estimate when the run has one
// (a stationary workload, a warm-up end found), else the whole run's.
func withIntervals(m []*metric) []*metric {
	aux := func(m *metric) *metric { m.aux = true; return m }
	out := []*metric{
		aux(stringM("stability", "the run's stability verdict: stable, unstable or indeterminate (metrics.stability; docs/statistics.md)", always,
			func(v *view) (string, bool) {
				if st := v.s.Stability; st != nil {
					return st.Verdict, true
				}
				return "", false
			})),
		aux(floatM("warmup_s", "s", "simulated seconds removed as warm-up before the steady-state estimates; empty when the run has none (unstable, too short, or not stationary by design)", always,
			func(v *view) (float64, bool) {
				if ss := v.s.SteadyState; ss != nil {
					return ss.Warmup.RemovedS, true
				}
				return 0, false
			})),
	}
	for _, x := range m {
		if !slices.Contains(steady.MetricNames, x.Name) {
			out = append(out, x)
			continue
		}
		name, whole := x.Name, x.value
		x.value = func(v *view) (string, bool) {
			if iv, ok := v.s.Metric(name); ok {
				return fmtFloat(iv.Estimate), true
			}
			return whole(v)
		}
		x.Doc += "; the steady-state estimate after the warm-up when the run has one, else the whole run's"
		end := func(low bool) func(v *view) (float64, bool) {
			return func(v *view) (float64, bool) {
				iv, ok := v.s.Metric(name)
				if low {
					return iv.Low, ok && iv.Has()
				}
				return iv.High, ok && iv.Has()
			}
		}
		out = append(out, x,
			aux(floatM(name+"_ci_low", x.Unit, "the low end of "+name+"'s 95 % interval within the run (batch means; percentiles by sectioning); empty without one", x.declared, end(true))),
			aux(floatM(name+"_ci_high", x.Unit, "the high end of "+name+"'s 95 % interval", x.declared, end(false))))
	}
	return out
}

// Metrics are the metric columns in table order, for documentation and
// for naming a metric (blis capacity's target, the figure's y axis).
func Metrics() []Column {
	out := make([]Column, len(registry))
	for i, m := range registry {
		out[i] = m.Column
	}
	return out
}
