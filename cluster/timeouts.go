package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/sim"
)

// Clients' deadlines (RequestSpec.TimeoutUs): armed when a request is
// routed, dropped when it leaves, and applied at their time by aborting
// the request at its instance.

// arm registers spec's client timeout, if it has one, with instance i.
func (c *Sim) arm(spec *sim.RequestSpec, i int) {
	if spec.TimeoutUs > 0 && spec.TimeoutUs <= math.MaxInt64-spec.ArrivalUs {
		// A deadline already past when the request is routed (admission
		// latency) aborts it at once.
		c.timeouts.push(cevent{at: max(spec.ArrivalUs+spec.TimeoutUs, c.now), kind: evTimeout, inst: int32(i), id: spec.ID})
		if c.armed == nil {
			c.armed = map[int64]struct{}{}
		}
		c.armed[spec.ID] = struct{}{}
	}
}

// purgeTimeouts drops the deadlines of requests that have left, so that
// they never move the clock, stretch the run or open time windows.
func (c *Sim) purgeTimeouts() {
	for c.timeouts.len() > 0 {
		if _, ok := c.armed[c.timeouts.peek().id]; ok {
			return
		}
		c.timeouts.pop()
	}
}

// timeout aborts a request whose client gave up, unless it has already
// finished; the instance reports it at once or at the end of the step in
// flight (sim.Engine.Abort). It reports whether it aborted anything.
func (c *Sim) timeout(ev *cevent) bool {
	i := int(ev.inst)
	if c.pd != nil {
		if r, ok := c.pd.reqs[ev.id]; ok && r.injectedD < 0 {
			i = r.p // still prefilling: its client gives up there
		}
	}
	e := c.eng[i]
	ok, err := e.Abort(ev.id, c.now)
	if err != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
		return false
	}
	if !ok {
		return false
	}
	for k := range e.Completions() {
		c.complete(i, &e.Completions()[k], c.now)
	}
	at, more := e.NextEventUs()
	c.inst.set(i, at, more)
	return true
}
