package cluster

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/blis-sim/blis/sim"
)

// Instances interact only through the cluster: a request reaches one when
// it is routed, and what it reports is read at routing decisions, scrapes
// and time windows' ends. Between two cluster events that touch the
// instances (an arrival, a delayed routing decision, a scrape, a window's
// end, the horizon), each instance's events are its own, so Run lets
// several workers advance different instances up to the next such event
// (a window's end is a bound like the others: its sample reads every
// instance), then applies what they
// produced (completions) in exactly the order a single worker would have:
// by the time of the instance event that produced it, then instance index,
// then the engine's own order. The output is therefore the same for any
// number of workers (tested), and the workers are only used when nothing
// else would observe the interleaving: no instance has an observer (a
// trace writer shares one output) and the source does not react to
// completions (a closed loop can create an arrival inside the window).

// doneAt is a completion and when its instance event happened.
type doneAt struct {
	at   int64
	inst int
	ord  int
	d    sim.Completion
}

// worker advances a fixed share of the instances. Windows are short (a
// few engine steps each), shorter than it takes to wake a parked
// goroutine, so between windows a worker first spins on its window
// counter, yielding now and then, and parks only after a while without
// work (spinLimit), when the caller is busy elsewhere or the machine is
// oversubscribed.
type worker struct {
	c      *Sim
	insts  []int
	bound  int64
	seq    atomic.Int64 // windows handed to it
	fin    atomic.Int64 // windows it has finished
	stop   atomic.Bool
	parked atomic.Bool
	wake   chan struct{}
	out    []doneAt
	moved  []int32 // the instances the last window advanced
	// memo is the latency models' memo of the worker's instances: the
	// instances of two workers step at once, so they never share one.
	memo  *sim.LatencyMemo
	err   error
	errAt int // the instance that failed
}

// spinLimit is how many polls a worker waits for a window before parking.
const spinLimit = 1 << 14

func (w *worker) run() {
	var done int64
	for spins := 0; ; spins++ {
		if w.stop.Load() {
			return
		}
		if w.seq.Load() == done {
			switch {
			case spins >= spinLimit:
				w.parked.Store(true)
				if w.seq.Load() == done && !w.stop.Load() { // re-check after announcing
					<-w.wake
				}
				w.parked.Store(false)
				spins = 0
			case spins%256 == 255:
				runtime.Gosched()
			}
			continue
		}
		spins = 0
		w.window(w.bound)
		done++
		w.fin.Store(done)
	}
}

// signal hands w its next window.
func (w *worker) signal() {
	w.seq.Add(1)
	if w.parked.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// window advances each of the worker's instances through its events
// before bound.
func (w *worker) window(bound int64) {
	w.out, w.moved = w.out[:0], w.moved[:0]
	for _, i := range w.insts {
		e := w.c.eng[i]
		for k := 0; ; k++ {
			at, ok := e.NextEventUs()
			if !ok || at >= bound {
				break
			}
			if k == 0 {
				w.moved = append(w.moved, int32(i))
			}
			if err := e.Advance(); err != nil {
				if w.err == nil {
					w.err, w.errAt = err, i
				}
				return
			}
			for k, d := range e.Completions() {
				w.out = append(w.out, doneAt{at: at, inst: i, ord: k, d: d})
			}
		}
	}
}

// parallelOK says whether workers may advance instances concurrently.
func (c *Sim) parallelOK() bool {
	// Disaggregation couples the instances through handoffs (a prefill's
	// response reaches its decode instance one output delay after its step)
	// and pulls (a transfer may end one transfer latency after the decode
	// instance's step starts it): windows bounded by those hold about one
	// instance event each (measured: 1.1 events per window on P/D 8:8,
	// against 17 colocated), so those runs advance on one goroutine.
	if c.cfg.Workers < 2 || len(c.eng) < 2 || c.reacts() || runtime.GOMAXPROCS(0) < 2 || (c.cfg.TraceDetailed && c.dec != nil) || c.cfg.Disagg != nil || len(c.groups) > 0 {
		return false
	}
	for _, in := range c.cfg.Instances {
		if in.Config.Observer != nil {
			return false
		}
	}
	return true
}

// reacts says whether the source may create a request when one departs
// (a closed loop), which a window running past the departure would miss.
func (c *Sim) reacts() bool {
	if c.obs == nil {
		return false
	}
	o, ok := c.obs.(OpenLoopSource)
	return !ok || !o.OpenLoop()
}

// startWorkers starts Workers−1 goroutines; the caller's goroutine is the
// last worker. Instances are dealt out round-robin, so that each worker
// gets a mix of the pools.
func (c *Sim) startWorkers() {
	n := min(c.cfg.Workers, len(c.eng), runtime.GOMAXPROCS(0))
	for k := 0; k < n; k++ {
		w := &worker{c: c, wake: make(chan struct{}, 1), memo: &c.memo}
		if k < n-1 {
			w.memo = new(sim.LatencyMemo) // the caller's goroutine keeps the cluster's
		}
		for i := k; i < len(c.eng); i += n {
			w.insts = append(w.insts, i)
			c.eng[i].ShareLatencyMemo(w.memo)
		}
		if k < n-1 {
			go w.run()
		}
		c.workers = append(c.workers, w)
	}
}

func (c *Sim) stopWorkers() {
	for _, w := range c.workers {
		w.stop.Store(true)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	c.workers = nil
}

// bound is the time before which the instances' events are their own: the
// next arrival, delayed routing decision, timeout or scrape, the open time
// window's end (its state is sampled there), or past the horizon.
func (c *Sim) bound() int64 {
	b := int64(1<<63 - 1)
	if at, ok := c.src.Peek(); ok {
		b = at
	}
	if len(c.routeAt) > c.routeHead {
		b = min(b, c.routeAt[c.routeHead])
	}
	if c.purgeTimeouts(); c.timeouts.len() > 0 {
		b = min(b, c.timeouts.peek().at)
	}
	for g := range c.snap.groups {
		b = min(b, c.snap.groups[g].next)
	}
	if c.win != nil {
		b = min(b, c.win.end)
	}
	if at, ok := c.fleetNext(); ok {
		b = min(b, at)
	}
	if c.cfg.HorizonUs > 0 {
		b = min(b, c.cfg.HorizonUs+1)
	}
	if c.kvs != nil {
		b = min(b, c.kvs.next) // the store changes there
	}
	return b
}

// Workers pay only when each gets a core: on a machine busy with other
// work, the one the caller waits for is descheduled for whole time
// slices while the caller spins (measured: 2 workers took 0.72x one
// worker's wall time on an idle 2-core machine, 3.8x with other jobs on
// it). Every fallbackWindows windows the caller looks at how long it
// waited; past maxWaitSpins per window on average, the run goes on with
// one goroutine. The output is the same either way.
const (
	fallbackWindows = 1024
	maxWaitSpins    = 1 << 14
)

// parallelPays reports, every fallbackWindows windows, whether the
// workers still pay; false stops them.
func (c *Sim) parallelPays() bool {
	if c.windows++; c.windows%fallbackWindows != 0 {
		return true
	}
	spins := c.waitSpins
	c.waitSpins = 0
	if spins <= fallbackWindows*maxWaitSpins {
		return true
	}
	c.stopWorkers()
	return false
}

// parallelWindow advances every instance through its events before bound
// on the workers, then applies their completions in sequential order.
func (c *Sim) parallelWindow(bound int64) error {
	last := len(c.workers) - 1
	for _, w := range c.workers[:last] {
		w.bound = bound
		w.signal() // publishes bound
	}
	c.workers[last].window(bound)
	for _, w := range c.workers[:last] {
		spins := 0
		for ; w.fin.Load() != w.seq.Load(); spins++ {
			if spins%256 == 255 {
				runtime.Gosched()
			}
		}
		c.waitSpins += int64(spins)
	}
	var failed *worker
	for _, w := range c.workers {
		if w.err != nil && (failed == nil || w.errAt < failed.errAt) {
			failed = w
		}
	}
	if failed != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[failed.errAt], failed.err)
		return c.err
	}
	c.merged = c.merged[:0]
	for _, w := range c.workers {
		c.merged = append(c.merged, w.out...)
	}
	slices.SortFunc(c.merged, func(a, b doneAt) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		if c := cmp.Compare(a.inst, b.inst); c != 0 {
			return c
		}
		return cmp.Compare(a.ord, b.ord)
	})
	for k := range c.merged {
		m := &c.merged[k]
		c.complete(m.inst, &m.d, m.at)
	}
	// Only the instances a worker advanced have a new next event (all of
	// them once cost O(N) per window, about one per arrival).
	for _, w := range c.workers {
		for _, i := range w.moved {
			at, ok := c.eng[i].NextEventUs()
			c.inst.set(int(i), at, ok)
		}
	}
	return c.err
}
