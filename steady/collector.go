package steady

import "fmt"

// Collector gathers, while a run goes on, what the analysis needs: the
// bins of the number of requests in the system and of the arrivals,
// departures and tokens (Bins), and the per-request series of TTFT, E2E,
// scheduling delay, inter-token latency and SLO attainment (Series), all
// in bounded memory. The run's shell calls it (sim.Sim's loop, the
// cluster's): Arrive, Route and Depart for the number in the system,
// Served and Outcome for the series, and at the checkpoints Due asks
// for, Check, which applies the stopping rule. Calls must come in
// simulated-time order, but for Depart, which may name a later time.
type Collector struct {
	cfg  Config
	bins Bins
	// The per-request series.
	ttft, e2e, sched, itl *Series
	// attain[0] is every class with targets, attain[c] class c's (1..3).
	attain      [4]*Series
	arrivals    int64
	lastArrival int64
	// The stopping rule's state: the arrivals at the next checkpoint, the
	// checks made, and the stop once decided.
	nextCheck int64
	checks    int
	stop      *Stop
}

// Config is what a collector is told before the run.
type Config struct {
	// Warmup is how the warm-up is found: WarmupAuto (MSER), WarmupNone,
	// or WarmupFixed removing WarmupUs from the first arrival.
	Warmup   WarmupMode
	WarmupUs int64
	// Stationary is false for a workload that is not stationary by design
	// (a load profile, a replayed trace, an autoscaled fleet); NotStationary
	// then says why, and no steady-state estimate is made.
	Stationary    bool
	NotStationary string
	// PerInstance keeps each instance's number in the system (a fixed
	// fleet), for the cause of an unstable verdict; InstanceIDs name them.
	PerInstance bool
	InstanceIDs []string
	// Rule is the stopping rule (nil: the run ends with its workload).
	Rule *Rule
}

// WarmupMode is how the warm-up is removed.
type WarmupMode uint8

const (
	WarmupAuto WarmupMode = iota
	WarmupNone
	WarmupFixed
)

// NewCollector returns a collector for a run configured by cfg.
func NewCollector(cfg Config) *Collector {
	// Percentiles need a histogram per section; only steady-state
	// estimates read them.
	q := cfg.Stationary
	c := &Collector{cfg: cfg, ttft: NewSeries(q), e2e: NewSeries(q), sched: NewSeries(false), itl: NewSeries(false)}
	c.bins.perInst = cfg.PerInstance
	if cfg.PerInstance && len(cfg.InstanceIDs) > 0 {
		// Every instance from the start: one the router never picks is
		// an idle instance, evidence of an imbalance.
		c.bins.instance(len(cfg.InstanceIDs) - 1)
	}
	if r := cfg.Rule; r != nil {
		c.nextCheck = max(r.MinArrivals, minCheckArrivals)
	}
	return c
}

// Arrive counts a request that entered the system at t (admitted, in a
// cluster).
func (c *Collector) Arrive(t int64) {
	b := &c.bins
	if !b.started {
		b.start(t)
	}
	b.advance(t)
	b.level++
	b.cur.arrived++
	c.arrivals++
	c.lastArrival = t
}

// Route counts a request routed to instance i at t (a cluster's; a
// single instance needs none).
func (c *Collector) Route(t int64, i int) {
	b := &c.bins
	if !b.perInst || !b.started {
		return
	}
	b.advance(t)
	b.change(i, +1)
}

// Depart counts a request that leaves the system at t, from instance i
// (-1: none, or not tracked); t may lie after the clock.
func (c *Collector) Depart(t int64, i int) {
	if !c.bins.started {
		return
	}
	if !c.bins.perInst {
		i = -1
	}
	c.bins.pending.push(dep{at: t, inst: int32(i)})
}

// Request is a completed request's latencies, µs.
type Request struct {
	// At is when its completion was reported (the clock).
	At                     int64
	TTFTUs, E2EUs, SchedUs int64
	OutputTokens           int64
	ITLSumUs, ITLGaps      int64 // last token − first token, output tokens − 1
	Class                  int   // SLO class, 1..3, or 0 for none
	HasTarget, MetTarget   bool
}

// Served records a completed request.
func (c *Collector) Served(r *Request) {
	if !c.bins.started {
		return
	}
	c.bins.advance(r.At)
	c.bins.cur.tokens += r.OutputTokens
	c.ttft.Add(r.TTFTUs, r.At)
	c.e2e.Add(r.E2EUs, r.At)
	c.sched.Add(r.SchedUs, r.At)
	if r.ITLGaps > 0 {
		c.itl.AddRatio(float64(r.ITLSumUs), float64(r.ITLGaps), r.At)
	}
	if r.HasTarget {
		c.Outcome(r.Class, r.MetTarget, r.At)
	}
}

// Outcome records a request of SLO class class (1..3) with targets that
// finished at t, meeting them or not (a rejected, dropped or timed-out
// one misses).
func (c *Collector) Outcome(class int, met bool, t int64) {
	if class < 1 || class > 3 {
		return
	}
	var v int64
	if met {
		v = 1
	}
	for _, k := range [2]int{0, class} {
		if c.attain[k] == nil {
			c.attain[k] = NewSeries(false)
		}
		c.attain[k].Add(v, t)
	}
}

// Sized reports whether the run is sized by its stopping rule.
func (c *Collector) Sized() bool { return c.cfg.Rule != nil }

// Arrivals is the requests that entered the system so far.
func (c *Collector) Arrivals() int64 { return c.arrivals }

// Due reports whether the stopping rule wants a look: the arrivals have
// reached the next checkpoint.
func (c *Collector) Due() bool {
	return c.cfg.Rule != nil && c.stop == nil && c.nextCheck > 0 && c.arrivals >= c.nextCheck
}

// Check applies the stopping rule at now, a checkpoint: every event
// before now has been processed and none after. It reports whether the
// run stops here.
func (c *Collector) Check(now int64) bool {
	r := c.cfg.Rule
	c.checks++
	c.nextCheck = c.arrivals + max(minCheckStep, c.arrivals/checkGrowth)
	rep := c.analyze(now, now)
	st := rep.Stability
	if st.Verdict == Unstable {
		c.stop = &Stop{Reason: StopUnstable}
	} else if st.Verdict == Stable {
		iv, ok := rep.Metric(r.Metric)
		switch {
		case r.Metric == "":
			c.stop = &Stop{Reason: StopStable}
		case ok && iv.Has() && iv.Relative() <= r.Rel:
			c.stop = &Stop{Reason: StopPrecision, Achieved: iv.Relative()}
		}
	}
	if c.stop == nil {
		return false
	}
	c.stop.AtS = float64(now-c.bins.t0) / 1e6
	c.stop.Arrivals = c.arrivals
	c.stop.Checks = c.checks
	c.stop.Metric, c.stop.Rel = r.Metric, r.Rel
	return true
}

// The checkpoints: the first at the rule's MinArrivals (at least
// minCheckArrivals), then every 1/checkGrowth more arrivals, at least
// minCheckStep.
const (
	minCheckArrivals = 1000
	minCheckStep     = 500
	checkGrowth      = 16
)

// Report analyzes the run as it ended at end (the clock): up to its last
// arrival, or to the checkpoint where the stopping rule stopped it.
func (c *Collector) Report(end int64) *Report {
	if !c.bins.started {
		return nil
	}
	until := c.lastArrival
	if c.stop != nil {
		until = end
	}
	rep := c.analyze(end, until)
	if rep.Stability != nil && c.cfg.Rule != nil {
		s := c.stop
		if s == nil {
			r := c.cfg.Rule
			s = &Stop{Reason: StopWorkloadEnded, AtS: float64(until-c.bins.t0) / 1e6, Arrivals: c.arrivals, Checks: c.checks,
				Metric: r.Metric, Rel: r.Rel}
			switch {
			case r.MaxArrivals > 0 && c.arrivals >= r.MaxArrivals:
				s.Reason = StopMaxRequests
			case r.MaxTimeUs > 0:
				// A run sized by precision has no end but its caps.
				s.Reason = StopMaxSimTime
			}
		}
		rep.Stability.Stop = s
	}
	return rep
}

func (c *Collector) String() string {
	return fmt.Sprintf("steady.Collector{arrivals %d}", c.arrivals)
}
