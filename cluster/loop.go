package cluster

import (
	"context"
	"fmt"

	"github.com/blis-sim/blis/sim"
)

// NextEventUs is the time of the next event of any kind, or false when
// none is left.
func (c *Sim) NextEventUs() (int64, bool) {
	c.purgeTimeouts()
	t, ok := c.src.Peek()
	for _, h := range [2]*eventHeap{&c.events, &c.timeouts} {
		if h.len() > 0 {
			if at := h.peek().at; !ok || at < t {
				t, ok = at, true
			}
		}
	}
	if c.inst.len() > 0 {
		if _, at := c.inst.top(); !ok || at < t {
			t, ok = at, true
		}
	}
	if at, has := c.pdTransferNext(); has && (!ok || at < t) {
		t, ok = at, true
	}
	// The fleet's events (evaluations, lifecycles, node releases) and the
	// abort timeouts of prefill copies matter only while there is work:
	// once every request is gone and none is to come, the run is over,
	// whatever the autoscalers would still do, and a copy no decode
	// instance will pull no longer holds it up. (A request can wait with
	// no event of its own: for blocks a copy's timeout frees; or for
	// ever, behind copies nothing frees: pdDeadlocked.)
	work := ok || (c.fl != nil && c.fl.Waiting() > 0) || (c.anyInFlight() && !c.pdDeadlocked())
	if at, has := c.fleetNext(); has && work && (!ok || at < t) {
		t, ok = at, true
	}
	if at, has := c.pdTimerNext(); has && work && (!ok || at < t) {
		t, ok = at, true
	}
	return t, ok
}

// fail records an invariant violation; the run stops with it.
func (c *Sim) fail(inv, format string, args ...any) {
	if c.err == nil {
		c.err = &sim.InvariantError{Invariant: inv, AtUs: c.now, Detail: fmt.Sprintf(format, args...)}
	}
}

// Step processes every event of the next instant, in the cluster's order.
func (c *Sim) Step() error {
	if c.err != nil {
		return c.err
	}
	t, ok := c.NextEventUs()
	if !ok {
		return nil
	}
	if t < c.now {
		c.fail("CL-4", "cluster clock would go back from %d to %d µs", c.now, t)
		return c.err
	}
	if t > sim.MaxTimeUs {
		// Every time an event is scheduled at is bounded (durations by
		// sim.MaxDurationUs, arrivals by MaxTimeUs): one past the clock's
		// range is a conversion that wrapped or saturated.
		c.fail("CL-4", "cluster clock would pass its range: %d µs > %d µs (2^61)", t, int64(sim.MaxTimeUs))
		return c.err
	}
	c.kvSync(t)
	if c.snap.advance(t, c.eng) {
		c.inst.touchAll() // the published signals changed
	}
	if w := c.win; w != nil {
		switch {
		case !w.started:
			w.start(t)
		case t >= w.end:
			c.closeWindows(t)
		}
	}
	c.now = t
	// An instant with nothing but timeouts of requests that had already
	// left is not activity: it must not stretch the run's span.
	active := false
	defer func() {
		if active {
			c.active = t
		}
	}()
	for c.err == nil {
		if at, ok := c.src.Peek(); ok && at <= t {
			c.cur = c.src.Next()
			if c.cur.ArrivalUs < t {
				c.err = fmt.Errorf("request %d: the source gave arrival %d µs, before the cluster's clock %d µs", c.cur.ID, c.cur.ArrivalUs, t)
				break
			}
			c.arrive(&c.cur)
			active = true
			continue
		}
		// Cluster events in kind order: routing, timeouts, completions.
		evAt := c.events.len() > 0 && c.events.peek().at == t
		if evAt && c.events.peek().kind < evTimeout {
			ev := c.events.pop()
			c.handle(&ev)
			active = true
			continue
		}
		if c.timeouts.len() > 0 && c.timeouts.peek().at == t {
			ev := c.timeouts.pop()
			active = c.timeout(&ev) || active
			continue
		}
		if evAt {
			ev := c.events.pop()
			c.handle(&ev)
			active = true
			continue
		}
		if at, ok := c.pdNext(); ok && at == t {
			active = c.pdHandle() || active
			continue
		}
		if at, ok := c.fleetNext(); ok && at == t {
			active = c.fleetStep() || active
			continue
		}
		if c.inst.len() > 0 {
			if i, at := c.inst.top(); at == t {
				c.advance(i)
				active = true
				continue
			}
		}
		break
	}
	return c.err
}

// RunUntil processes every event at or before t.
func (c *Sim) RunUntil(t int64) error {
	for {
		at, ok := c.NextEventUs()
		if !ok || at > t {
			return c.err
		}
		if err := c.Step(); err != nil {
			return err
		}
	}
}

// Run processes events until none is left or the next one lies beyond the
// horizon, then finishes the run. With Workers > 1 it advances instances
// concurrently between cluster events (parallel.go), with the same result.
// It is RunContext(context.Background()).
func (c *Sim) Run() (*Result, error) { return c.RunContext(context.Background()) }

// ctxCheckEvery is how many loop iterations (instants or parallel windows)
// RunContext runs between two looks at its context.
const ctxCheckEvery = 1024

// RunContext is Run, stopped early when ctx is done. It looks at ctx
// before the first instant, then about every ctxCheckEvery instants and
// before every parallel window (so it stops within about 1024 instants or
// one window of the cancellation, and a context done before it starts
// stops it before any event is processed), always at a point where every
// event before the next one has been processed and none at or after it:
// never inside an instant, nor with a parallel window's departures
// pending. A stopped run finishes (Finish) exactly as a run with a horizon
// just before that next event would: requests in the system are counted
// as awaiting routing, in transit, in the API, queued or running, the
// departures after the stop are reported to no one (source, admission
// policy), and the requests the source still holds were never offered. It
// returns that result and ctx.Err(), both non-nil. Any other error returns
// a nil result, as Run does. The workers are stopped before it returns. A
// context that is never done (context.Background) costs nothing and gives
// Run's result.
func (c *Sim) RunContext(ctx context.Context) (*Result, error) {
	parallel := c.parallelOK()
	if parallel {
		c.startWorkers()
		defer c.stopWorkers()
	}
	done := ctx.Done() // nil for context.Background: never cancelled
	var stopped error
	var checkAt uint // the iteration of the next look at ctx
	for iter := uint(0); ; iter++ {
		at, ok := c.NextEventUs()
		if !ok || (c.cfg.HorizonUs > 0 && at > c.cfg.HorizonUs) {
			break
		}
		// Steps go through instants in time order, so once at reaches the
		// last window's end, every event before at has been processed and
		// none after: a stop here is a horizon just before at. (Before a
		// window this always holds: the loop never opens a window while
		// the previous one's departures are pending, as its bounding event
		// is still ahead.)
		settled := at >= c.windowEnd
		// A checkpoint of the output analysis's stopping rule (Config.Analysis),
		// where a stop is a horizon just before at, as a cancellation's.
		if col := c.agg.col; col != nil && settled && col.Due() && col.Check(at) {
			break
		}
		if done != nil && settled && iter >= checkAt {
			checkAt = iter + ctxCheckEvery
			if stopped = ctx.Err(); stopped != nil {
				break
			}
		}
		if parallel && c.inst.len() > 0 {
			if _, next := c.inst.top(); next >= at {
				if b := c.bound(); next < b {
					if done != nil && settled {
						if stopped = ctx.Err(); stopped != nil {
							break
						}
					}
					// (A sync point at or before at makes b <= at: Step
					// syncs first.)
					if err := c.parallelWindow(b); err != nil {
						return nil, err
					}
					c.windowEnd = b
					parallel = c.parallelPays()
					continue
				}
			}
		}
		if err := c.Step(); err != nil {
			return nil, err
		}
	}
	res, err := c.Finish()
	if err != nil {
		return nil, err
	}
	return res, stopped
}
