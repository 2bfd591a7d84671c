package cluster

import (
	"github.com/blis-sim/blis/sim"
	ss "github.com/blis-sim/blis/steady"
)

// The output analysis's hooks (Config.Analysis): the aggregator tells the
// collector of each request that leaves, and the result carries its
// report.

// analyzed tells the analysis of a request that left instance i,
// reported at at: its departure, and its latencies and SLO outcome.
func (a *aggregator) analyzed(i int, d *sim.Completion, at int64) {
	a.col.Depart(d.DepartedUs, i)
	if d.Dropped || d.TooLong || d.TimedOut || d.Killed {
		a.missed(d.SLOClass, at)
		return
	}
	r := ss.Request{At: at, TTFTUs: d.FirstTokenUs - d.ArrivalUs, E2EUs: d.DepartedUs - d.ArrivalUs,
		SchedUs: d.FirstScheduledUs - d.ArrivalUs, OutputTokens: d.OutputTokens}
	var tpot int64
	if d.OutputTokens > 1 {
		r.ITLSumUs, r.ITLGaps = d.FinishedUs-d.FirstTokenUs, d.OutputTokens-1
		tpot = r.ITLSumUs / r.ITLGaps
	}
	if t := a.slo[d.SLOClass]; d.SLOClass != sim.SLONone && t.set() {
		r.Class, r.HasTarget, r.MetTarget = int(d.SLOClass), true, t.meets(r.TTFTUs, tpot, r.E2EUs)
	}
	a.col.Served(&r)
}

// steadyReport adds the collector's report to res (the run ended at end).
func (c *Sim) steadyReport(res *Result, end int64) {
	if c.agg.col == nil {
		return
	}
	rep := c.agg.col.Report(end)
	if rep == nil {
		return
	}
	res.Stability, res.SteadyState = rep.Stability, rep.SteadyState
	if c.win != nil && rep.SteadyState != nil {
		for k := range c.win.rows {
			w := &c.win.rows[k]
			w.Warmup = w.EndUs <= rep.WarmupEndUs
		}
	}
}
