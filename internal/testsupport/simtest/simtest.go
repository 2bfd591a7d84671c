// Package simtest drives several engines on one clock for tests that need a
// multi-instance run with a fixed request-to-instance assignment (traces
// of a cluster, fits over instances) and no router. Package cluster is the
// real driver; this one keeps its event order: the earliest next event
// first, the lowest index on ties, and an arrival injected before the
// instance's own events at the same microsecond.
package simtest

import "github.com/blis-sim/blis/sim"

// Interleave injects reqs[k] (sorted by arrival) into engines[k] at their
// arrival times and advances the engines until none has an event left. It
// does not call Finish. Request ids must be unique per engine.
func Interleave(engines []*sim.Engine, reqs [][]sim.RequestSpec) error {
	next := make([]int, len(engines))
	for {
		best, bestT := -1, int64(0)
		for k, e := range engines {
			at, ok := e.NextEventUs()
			for next[k] < len(reqs[k]) && (!ok || reqs[k][next[k]].ArrivalUs <= at) {
				r := reqs[k][next[k]]
				if err := e.Inject(r, r.ArrivalUs); err != nil {
					return err
				}
				next[k]++
				at, ok = e.NextEventUs()
			}
			if ok && (best < 0 || at < bestT) {
				best, bestT = k, at
			}
		}
		if best < 0 {
			return nil
		}
		if err := engines[best].Advance(); err != nil {
			return err
		}
	}
}
