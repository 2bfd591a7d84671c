package cluster

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/cluster/fleet"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// The fleet (Config.Scaling): the lifecycle of each pool's instances and
// nodes, the autoscalers, drains, billing and the requests held for want
// of a ready instance are the fleet core's (package fleet, whose doc
// states the rules). This file is the cluster's side of it: it hands the
// core its events (a request held, an instance idle, a request routed or
// finished), gathers a pool's signals from the engines when the core
// evaluates it, and carries out the core's actions on the engines and the
// router: start an engine, route a held request, drain (kill, or hand
// back to the router) an instance's requests, forget a terminated one.

// PoolScaling is one pool's bounds, autoscaler and lifecycle.
type PoolScaling = fleet.Pool

// Drain is a scale-down's treatment of a ready instance's requests.
type Drain = fleet.Drain

const (
	DrainWait      = fleet.DrainWait
	DrainImmediate = fleet.DrainImmediate
	DrainRedirect  = fleet.DrainRedirect
)

// ParseDrain reads a drain policy's name.
func ParseDrain(s string) (Drain, error) { return fleet.ParseDrain(s) }

// InstanceState is an instance's place in its lifecycle.
type InstanceState = fleet.State

const (
	StatePending    = fleet.StatePending
	StateLoading    = fleet.StateLoading
	StateWarming    = fleet.StateWarming
	StateReady      = fleet.StateReady
	StateDraining   = fleet.StateDraining
	StateTerminated = fleet.StateTerminated
)

// ScaleRecord is one scale action; Fleet and PoolFleet a run's fleet.
type (
	ScaleRecord = fleet.ScaleRecord
	Fleet       = fleet.Fleet
	PoolFleet   = fleet.PoolFleet
)

// Scaling configures the fleet.
type Scaling struct {
	// Pools are the pools in the order of Config.Instances' pools; every
	// instance's Pool names one, and a pool's initial instances are its
	// instances in Config.Instances.
	Pools []PoolScaling
	// NewInstance builds the engine configuration of a new instance of
	// pool p with global index i (whose random streams it takes); called
	// for every instance an autoscaler adds, never for the initial ones.
	NewInstance func(pool, index int) (sim.Config, error)
	// WaitTimeoutUs bounds how long an admitted request waits at the
	// router for a ready instance (0: only its own timeout bounds it).
	WaitTimeoutUs int64
	// RNG draws each pool's node provisioning delays, from the stream
	// "provision/<pool>".
	RNG sim.RNG
	// OscillationWindowUs: a scale action in the direction opposite to
	// the pool's previous one, within this window of it, is an oscillation
	// (0: 300 s, the HPA's scale-down stabilization window).
	OscillationWindowUs int64
}

// MaxScaledInstances bounds the instances a run with an autoscaler may
// create in all (initial ones included); their ids are zero-padded to its
// width, so that lexicographic order stays index order.
const MaxScaledInstances = 100_000

// ScaledInstanceID is the id of instance index in a run with an
// autoscaler.
func ScaledInstanceID(index int) string { return InstanceID(index, MaxScaledInstances) }

// scaler is the fleet core and what the cluster keeps beside it.
type scaler struct {
	*fleet.Core
	cfg *Scaling
	// slow is each instance's warm-up slow start (nil: none).
	slow []*sim.SlowStart
	// retire lists terminated instances whose engines still hold their
	// caches (sim.Engine.Retire frees them once their last event is past).
	retire []int
	// live lists the instances not terminated, ascending: the router's
	// view looks only at them (route.View.Live), so that a decision costs
	// O(live fleet), not O(every instance the run started).
	live             []int32
	killed, redirect int64 // requests killed and handed back by drains
	ready            []int // scratch
}

// newFleet sets up the fleet for the initial instances: every one ready
// at time 0 on nodes provisioned at time 0.
func (c *Sim) newFleet() error {
	s := c.cfg.Scaling
	byName := map[string]int{}
	for p, ps := range s.Pools {
		if _, dup := byName[ps.Name]; !dup {
			byName[ps.Name] = p
		}
		if ps.Policy != nil && s.NewInstance == nil {
			return fmt.Errorf("scaling: pool %s has an autoscaler but no NewInstance", ps.Name)
		}
	}
	initial := make([]int, len(c.cfg.Instances))
	for i, in := range c.cfg.Instances {
		p, ok := byName[in.Pool]
		if !ok {
			return fmt.Errorf("instance %s: pool %q has no scaling entry", in.ID, in.Pool)
		}
		initial[i] = p
	}
	core, err := fleet.New(fleet.Config{Pools: s.Pools, WaitTimeoutUs: s.WaitTimeoutUs, RNG: s.RNG, OscillationWindowUs: s.OscillationWindowUs,
		MaxInstances: MaxScaledInstances}, initial)
	if err != nil {
		return err
	}
	c.fl = &scaler{Core: core, cfg: s, slow: make([]*sim.SlowStart, len(initial))}
	if core.Scaled() {
		c.view.Routable = core.Routable()
		for i := range initial {
			c.fl.live = append(c.fl.live, int32(i))
		}
		c.view.Live = c.fl.live
	}
	return nil
}

// fleetNext is the time of the fleet's next event, if any.
func (c *Sim) fleetNext() (int64, bool) {
	if c.fl == nil {
		return 0, false
	}
	return c.fl.Next()
}

// fleetStep processes the fleet's next event, due now; it reports whether
// it was activity.
func (c *Sim) fleetStep() bool {
	acts, active := c.fl.Pop(c.now)
	c.apply(acts)
	return active
}

// apply carries out the fleet core's actions, in order.
func (c *Sim) apply(acts []fleet.Action) {
	for k := range acts {
		if c.err != nil {
			return
		}
		a := &acts[k]
		switch a.Kind {
		case fleet.ActStart:
			c.startInstance(a.Inst, a.Pool)
		case fleet.ActReady:
			if s := c.fl.slow[a.Inst]; s != nil {
				s.Start(c.now)
			}
			c.inst.touch(a.Inst) // the router sees it from now
		case fleet.ActRoute:
			c.cur = a.Spec
			c.route(&c.cur)
		case fleet.ActTimedOut:
			c.heldTimedOut(&a.Spec)
		case fleet.ActDrain:
			switch a.Drain {
			case DrainImmediate:
				c.killAll(a.Inst)
			case DrainRedirect:
				c.redirectAll(a.Inst)
			}
			c.maybeTerminate(a.Inst)
		case fleet.ActKill:
			c.killAll(a.Inst)
			c.maybeTerminate(a.Inst)
		case fleet.ActTerminated:
			c.terminated(a.Inst)
		case fleet.ActEvaluate:
			c.retireTerminated()
			c.evaluate(a.Pool)
		}
	}
}

// startInstance builds the engine of new instance i of pool p.
func (c *Sim) startInstance(i, p int) {
	ps := &c.fl.cfg.Pools[p]
	if i != len(c.eng) {
		c.fail("CL-6", "the fleet starts instance %d, the cluster has %d", i, len(c.eng))
		return
	}
	cfg, err := c.fl.cfg.NewInstance(p, i)
	if err != nil {
		c.err = fmt.Errorf("pool %s: instance %d: %w", ps.Name, i, err)
		return
	}
	var slow *sim.SlowStart
	if ps.WarmupFactor > 1 && ps.WarmupUs > 0 {
		slow = &sim.SlowStart{Inner: cfg.Latency, Factor: ps.WarmupFactor, DurationUs: ps.WarmupUs}
		cfg.Latency = slow
	}
	if err := c.addInstance(ScaledInstanceID(i), ps.Name, cfg); err != nil {
		c.err = err
		return
	}
	c.fl.slow = append(c.fl.slow, slow)
	c.view.Routable = c.fl.Routable()
	c.fl.live = append(c.fl.live, int32(i)) // the highest index yet
	c.view.Live = c.fl.live
}

// terminated forgets instance i, gone for good: the router's state of it,
// and its engine's caches once it is idle (retireTerminated).
func (c *Sim) terminated(i int) {
	c.fl.retire = append(c.fl.retire, i)
	if k, ok := slices.BinarySearch(c.fl.live, int32(i)); ok {
		c.fl.live = slices.Delete(c.fl.live, k, k+1)
		c.view.Live = c.fl.live
	}
	if c.pd != nil {
		c.pd.mask[i] = false // pdMask no longer looks at it
	}
	if c.precise != nil {
		c.kevBuf = c.eng[i].TakeKVBlockEvents(c.kevBuf[:0]) // none may reach the index after Forget
	}
	if fg, ok := c.router.(route.Forgetter); ok {
		fg.Forget(i)
	}
}

// retireTerminated frees the caches of the terminated instances whose
// engines have nothing left to do: memory follows the live fleet, not
// every instance the run ever started.
func (c *Sim) retireTerminated() {
	f := c.fl
	kept := f.retire[:0]
	for _, i := range f.retire {
		// Busy, or a prefill instance still holding KV that a decode
		// instance has yet to pull: retired later.
		if _, busy := c.eng[i].NextEventUs(); busy || !c.eng[i].CanRetire() {
			kept = append(kept, i)
			continue
		}
		if err := c.eng[i].Retire(); err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
			return
		}
		if err := c.foldOrKeep(i); err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
			return
		}
	}
	f.retire = kept
}

// evaluate gathers pool p's signals, the fleet core's and its ready
// instances' (means over them), and lets the core actuate its autoscaler.
func (c *Sim) evaluate(p int) {
	f := c.fl
	s := f.Signals(p, c.now)
	var kv, q, run, inf, used float64
	f.ready = f.ReadyIn(p, f.ready[:0])
	for _, i := range f.ready {
		st := c.eng[i].Status()
		s.Ready++
		kv += st.KVUtilization
		q += float64(st.QueueDepth)
		run += float64(st.BatchSize)
		inf += float64(c.inflight[i])
		bs := float64(c.eng[i].BlockSize())
		used += float64(st.TotalKVBlocks-st.FreeKVBlocks) * bs
		s.KVTokensPerReplica = float64(st.TotalKVBlocks) * bs
		k := c.eng[i].Knobs()
		s.MaxBatchedTokens, s.MaxNumSeqs = float64(k.MaxBatchedTokens), float64(k.MaxNumSeqs)
	}
	if s.Ready > 0 {
		n := float64(s.Ready)
		s.KVUtilization, s.QueueDepth, s.Running, s.InFlight = kv/n, q/n, run/n, inf/n
	}
	s.KVTokensUsed = used
	s.QueuedTokens = (q + float64(s.Waiting)) * s.MeanInput
	acts, rec, err := f.Evaluate(p, &s, c.now)
	c.apply(acts)
	if rec != nil && c.dec != nil {
		c.dec.scale(rec)
	}
	if err != nil && c.err == nil {
		c.err = err
	}
}

// killAll kills every request instance i holds.
func (c *Sim) killAll(i int) {
	e := c.eng[i]
	c.idBuf = e.Held(c.idBuf[:0])
	for _, id := range c.idBuf {
		ok, err := e.Kill(id, c.now)
		if err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
			return
		}
		if ok {
			c.fl.killed++
			for k := range e.Completions() {
				c.complete(i, &e.Completions()[k], c.now)
			}
		}
	}
	at, more := e.NextEventUs()
	c.inst.set(i, at, more)
}

// redirectAll hands instance i's requests that have not started back to
// the router.
func (c *Sim) redirectAll(i int) {
	e := c.eng[i]
	c.idBuf = e.Held(c.idBuf[:0])
	ids := append([]int64(nil), c.idBuf...)
	for _, id := range ids {
		spec, ok, err := e.Redirect(id, c.now)
		if err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
			return
		}
		if !ok {
			continue
		}
		c.fl.redirect++
		c.inflight[i]--
		c.inst.touch(i)
		if c.armed != nil {
			delete(c.armed, id) // its deadline is re-armed where it goes
		}
		if c.pd != nil {
			spec = c.pdRedirected(spec)
		}
		c.redirected[id] = true
		c.cur = spec
		c.route(&c.cur)
	}
	at, more := e.NextEventUs()
	c.inst.set(i, at, more)
}

// maybeTerminate tells the fleet core when a draining instance holds no
// request: it terminates.
func (c *Sim) maybeTerminate(i int) {
	if c.fl.State(i) == StateDraining && c.inflight[i] == 0 {
		c.apply(c.fl.Idle(i, c.now))
	}
}

// heldTimedOut ends a request that gave up waiting at the router.
func (c *Sim) heldTimedOut(spec *sim.RequestSpec) {
	c.agg.timedOutHeld(spec, c.now)
	if w := c.win; w != nil {
		w.cur.TimedOut++
	}
	if c.adObs != nil {
		c.leftAdmission(spec.ID)
	}
	if c.obs != nil {
		c.obs.RequestDone(spec.ID, c.now, TimedOut)
	}
}

// poolFinished counts a request of instance i's pool that finished, met
// or not.
func (c *Sim) poolFinished(i int, d *sim.Completion) {
	if c.fl == nil {
		return
	}
	if d.Dropped || d.TooLong || d.TimedOut || d.Killed {
		c.fl.Finished(i, false, false, 0)
		return
	}
	ttft, e2e := d.FirstTokenUs-d.ArrivalUs, d.DepartedUs-d.ArrivalUs
	var tpot int64
	if d.OutputTokens > 1 {
		tpot = (d.FinishedUs - d.FirstTokenUs) / (d.OutputTokens - 1)
	}
	c.fl.Finished(i, true, c.cfg.SLOTargets[d.SLOClass].meets(ttft, tpot, e2e), d.OutputTokens)
}

// poolRouted counts a request routed to instance i's pool.
func (c *Sim) poolRouted(i int, spec *sim.RequestSpec) {
	if c.fl != nil {
		c.fl.Routed(i, spec.PromptTokens)
	}
}

// fleetResult closes the accounting at end and reports the fleet.
func (c *Sim) fleetResult(end int64, res *Result) *Fleet {
	o := fleet.Outcome{OutputTokens: res.OutputTokens, Killed: c.fl.killed, Redirected: c.fl.redirect}
	if res.SLO != nil {
		o.SLOAttainment = &res.SLO.Attainment
	}
	return c.fl.Result(end, o)
}
