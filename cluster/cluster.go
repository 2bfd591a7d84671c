// Package cluster simulates N vLLM instances behind admission and a router
// on one shared clock (docs/cluster.md). It is the only package that
// drives many sim.Engines at once (replay and experiment run it; sim's
// single-instance runs drive one).
//
// A request's path: it arrives from a Source; the admission policy
// (cluster/admit) admits or rejects it at once; after the admission latency
// the routing policy (cluster/route) picks an instance from a read-only
// View of the instances, the router's in-flight count for that instance
// rises, and after the routing latency the request reaches the instance's
// engine; when the engine reports it finished, it leaves at its departure
// time and the in-flight count falls (and an admission policy that is an
// admit.Observer learns of the departure). A rejected request is counted
// with its reason; an unservable one is counted as dropped; none
// disappears.
//
// Event order (docs/cluster.md, "Order of events at the same time"): at
// equal times, arrivals, then routing decisions, then completions, all
// before instance events; among instances, the lowest index first;
// within an instance, the engine's own order. Signal freshness (INV-7):
// in-flight counts and the prefix index are router-local and always fresh; the instance-reported signals are read at each
// decision or from the last periodic scrape (Freshness).
//
// Sim is itself a caller-driven state machine: Step processes the events
// of the next instant, RunUntil steps to a time, Run to the end or the
// horizon (RunContext also to a cancellation, with a partial result), and
// Finish checks the cluster invariants and aggregates the metrics by
// merging the instances' histograms; with Config.WindowUs it also reports
// the run in time windows (windows.go). Memory follows the number of
// requests in flight, not the number served, unless per-request records
// (or windows, one row each) are asked for. docs/cluster.md states the
// rules.
package cluster

import (
	"fmt"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// Sim is one cluster run. Create it with New.
type Sim struct {
	// groups are the data-parallel groups that step together, each its
	// instances in index order; groupOf maps an instance to its group, -1
	// for none (nil without groups). cluster/lockstep.go.
	groups  [][]int
	groupOf []int32
	cfg     Config
	src     Source
	active  int64 // the last instant with activity (not only stale timeouts)
	obs     CompletionObserver
	eng     []*sim.Engine
	ids     []string
	pools   []string // each instance's pool
	admit   admit.Policy
	// adObs is the admission policy when it observes departures, and
	// admitted then holds each admitted request until it leaves (by ID:
	// looked up, never iterated), so that Left gets its spec.
	adObs    admit.Observer
	admitted map[int64]sim.RequestSpec
	gone     sim.RequestSpec // the request being reported to adObs
	router   route.Policy
	needs    bool // the router reads prompt hashes
	bs       int64
	now      int64
	events   eventHeap
	// timeouts are the clients' deadlines (evTimeout), apart from events
	// because, unlike them, they act on instances: parallel windows stop
	// at the next one.
	timeouts eventHeap
	armed    map[int64]struct{} // requests whose timeout is pending, until they leave
	inst     *instHeap
	snap     *snapshots
	view     route.View
	req      route.Request
	hashBuf  []uint64
	dec      *decisionWriter

	inflight []int64
	pending  []sim.RequestSpec // admitted, awaiting the routing decision
	// cur is the request being decided: policies see it by pointer and
	// must not keep the pointer.
	cur      sim.RequestSpec
	pendFree []int32

	// routeAt holds the times of the pending delayed routing decisions,
	// in order (they all wait the same admission latency).
	routeAt   []int64
	routeHead int

	workers []*worker
	// memo is the latency models' memo the instances share while one
	// goroutine steps them (each worker has its own: sim.LatencyMemo).
	memo   sim.LatencyMemo
	merged []doneAt
	// windowEnd is the last parallel window's bound (0 before any): the
	// instances have processed every event before it, the cluster maybe not
	// yet the departures they reported before it (the only cluster events a
	// window can pass: it stops at every other kind).
	windowEnd int64

	win *windower // nil without time windows

	fl         *scaler               // nil without Config.Scaling
	folds      *folded               // terminated instances folded (terminated.go); nil without Config.Scaling
	pd         *pdState              // nil without Config.Disagg
	kvs        *storeState           // nil without Config.KVStore
	precise    []*route.PreciseIndex // the routers', fed by the instances' KV events
	kevBuf     []sim.KVBlockEvent
	idBuf      []int64        // scratch for drains
	redirected map[int64]bool // requests a drain re-routed (their routing latency counts twice)

	agg aggregator
	an  *analysis // anomalies, detailed trace, counterfactuals (analysis.go)
	// windows counts the parallel windows and waitSpins the caller's
	// waits for the workers since the last look (parallelPays).
	windows, waitSpins int64
	err                error
}

// New prepares a run. The instances' configurations are used as given,
// except that each engine keeps no per-request samples (the cluster
// aggregates histograms) and no per-request records (the cluster keeps its
// own when asked).
func New(cfg Config, src Source) (*Sim, error) {
	n := len(cfg.Instances)
	if n < 1 && (cfg.Scaling == nil || cfg.RouterBlockSize == 0) {
		return nil, fmt.Errorf("a cluster needs at least one instance, got %d (or, scaled from zero, a router block size)", n)
	}
	if src == nil {
		return nil, fmt.Errorf("no request source")
	}
	switch {
	case cfg.AdmissionLatencyUs < 0 || cfg.AdmissionLatencyUs > sim.MaxDurationUs:
		return nil, fmt.Errorf("admission latency must be within [0, %d] µs, got %d", sim.MaxDurationUs, cfg.AdmissionLatencyUs)
	case cfg.RoutingLatencyUs < 0 || cfg.RoutingLatencyUs > sim.MaxDurationUs:
		return nil, fmt.Errorf("routing latency must be within [0, %d] µs, got %d", sim.MaxDurationUs, cfg.RoutingLatencyUs)
	case cfg.HorizonUs < 0:
		return nil, fmt.Errorf("horizon must be >= 0 µs, got %d", cfg.HorizonUs)
	case cfg.CounterfactualK < 0:
		return nil, fmt.Errorf("counterfactual k must be >= 0, got %d", cfg.CounterfactualK)
	case cfg.RouterBlockSize < 0:
		return nil, fmt.Errorf("router block size must be >= 0 tokens, got %d", cfg.RouterBlockSize)
	case cfg.Workers < 0:
		return nil, fmt.Errorf("workers must be >= 0, got %d", cfg.Workers)
	case cfg.WindowUs < 0:
		return nil, fmt.Errorf("time window must be >= 0 µs, got %d", cfg.WindowUs)
	}
	if err := cfg.Freshness.Validate(); err != nil {
		return nil, err
	}
	if cfg.Counterfactual != nil {
		if err := cfg.Counterfactual.validate(); err != nil {
			return nil, err
		}
		if cfg.Disagg != nil {
			// A clone would serve the request whole on its decode
			// instance: not the run's path, so no regret of it.
			return nil, fmt.Errorf("counterfactual: not available with prefill/decode disaggregation (a clone would serve the request whole on its decode instance)")
		}
	}
	c := &Sim{cfg: cfg, src: src, admit: cfg.Admission, router: cfg.Routing, inst: newInstHeap(n)}
	c.an = newAnalysis(c)
	c.obs, _ = src.(CompletionObserver)
	if c.admit == nil {
		c.admit = admit.AlwaysAdmit{}
	}
	if o, ok := c.admit.(admit.Observer); ok {
		c.adObs, c.admitted = o, map[int64]sim.RequestSpec{}
	}
	if c.router == nil {
		c.router = &route.RoundRobin{}
	}
	c.needs = c.router.NeedsHashes()
	seen := make(map[string]bool, n)
	for i, in := range cfg.Instances {
		if in.ID == "" || seen[in.ID] {
			return nil, fmt.Errorf("instance %d: id %q is empty or not unique", i, in.ID)
		}
		if i > 0 && in.ID < cfg.Instances[i-1].ID {
			return nil, fmt.Errorf("instance %d: id %q sorts before instance %d's %q; ids must sort in index order", i, in.ID, i-1, cfg.Instances[i-1].ID)
		}
		seen[in.ID] = true
		ic := in.Config
		ic.Options.BoundedMemory = true
		ic.Options.RecordRequests = false
		ic.Options.HorizonUs = 0
		ic.Observer = c.an.observer(c, i, in.ID, ic.Observer)
		e, err := sim.NewEngine(ic)
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", in.ID, err)
		}
		e.ShareLatencyMemo(&c.memo)
		c.eng = append(c.eng, e)
		c.ids = append(c.ids, in.ID)
		c.pools = append(c.pools, in.Pool)
		if err := c.joinGroup(i, in.Lockstep); err != nil {
			return nil, err
		}
	}
	c.bs = cfg.RouterBlockSize
	if c.bs == 0 {
		c.bs = c.eng[0].BlockSize()
	}
	c.inflight = make([]int64, n)
	c.view.Resize(n)
	c.snap = newSnapshots(cfg.Freshness, n)
	c.snap.start(c.eng)
	c.agg.init(n, &c.cfg)
	for t := range cfg.TenantNames {
		c.agg.tenant(int32(t)).detail = &classAgg{}
	}
	if cfg.Decisions != nil {
		c.dec = newDecisionWriter(cfg.Decisions, cfg.CounterfactualK, n)
	}
	if cfg.WindowUs > 0 {
		c.win = newWindower(cfg.WindowUs)
	}
	if cfg.Scaling != nil {
		c.redirected = map[int64]bool{}
		c.folds = &folded{}
		if err := c.newFleet(); err != nil {
			return nil, err
		}
	}
	if cfg.Disagg != nil {
		if err := c.newPD(); err != nil {
			return nil, err
		}
	}
	if cfg.KVStore != nil {
		if err := c.newKVStore(); err != nil {
			return nil, err
		}
	} else {
		for i, in := range cfg.Instances {
			if in.Config.Engine.Tiers.Store != (sim.StoreLink{}) {
				return nil, fmt.Errorf("instance %s: it has a link to a KV store, and the cluster has none", c.ids[i])
			}
		}
	}
	for i := range c.eng {
		c.sizePrefixIndex(i)
	}
	if err := c.initPrecise(); err != nil {
		return nil, err
	}
	return c, nil
}

// addInstance appends an instance the autoscaler created: its engine, its
// router state, its place in the heap, the windows and a worker.
func (c *Sim) addInstance(id, pool string, cfg sim.Config) error {
	if n := len(c.ids); n > 0 && id <= c.ids[n-1] {
		return fmt.Errorf("instance %s: id sorts before %s", id, c.ids[n-1])
	}
	cfg.Options.BoundedMemory = true
	cfg.Options.RecordRequests = false
	cfg.Options.HorizonUs = 0
	cfg.Observer = c.an.observer(c, len(c.eng), id, cfg.Observer)
	e, err := sim.NewEngine(cfg)
	if err != nil {
		return fmt.Errorf("instance %s: %w", id, err)
	}
	i := len(c.eng)
	c.eng = append(c.eng, e)
	if c.groupOf != nil {
		c.groupOf = append(c.groupOf, -1) // an autoscaled instance steps alone
	}
	c.ids = append(c.ids, id)
	c.pools = append(c.pools, pool)
	c.sizePrefixIndex(i)
	c.inflight = append(c.inflight, 0)
	c.view.Resize(len(c.eng))
	c.snap.grow(e)
	c.agg.routedTo = append(c.agg.routedTo, 0)
	c.inst.grow()
	e.ShareLatencyMemo(&c.memo)
	if n := len(c.workers); n > 0 {
		w := c.workers[i%n]
		w.insts = append(w.insts, i)
		e.ShareLatencyMemo(w.memo)
	}
	if err := c.attachStore(i, &cfg); err != nil {
		return err
	}
	if err := c.watchPrecise(i); err != nil {
		return err
	}
	if c.pd != nil {
		return c.pdInstance(i)
	}
	return nil
}

// Now is the cluster's clock.
func (c *Sim) Now() int64 { return c.now }

// NumInstances is the number of instances.
func (c *Sim) NumInstances() int { return len(c.eng) }

// InstanceStatus is instance i's live status, and InFlight the router's
// count of requests routed to it and not yet departed.
func (c *Sim) InstanceStatus(i int) sim.Status { return c.eng[i].Status() }
func (c *Sim) InFlight(i int) int64            { return c.inflight[i] }

// RouterView is the view a routing decision would see now: the
// instance-reported signals as fresh as the scrape settings make them,
// and the router's in-flight counts. The slices are the caller's.
func (c *Sim) RouterView() route.View {
	var v route.View
	v.Resize(len(c.eng))
	c.snap.fill(&v, c.eng, c.inflight, c.now)
	return v
}

func (c *Sim) arrive(spec *sim.RequestSpec) {
	if err := spec.Validate(); err != nil {
		c.err = err
		return
	}
	c.agg.arrived(spec, c.now)
	ok, reason := c.admit.Admit(spec, c.now)
	if c.dec != nil {
		c.dec.admission(c.now, spec, c.admit.Name(), ok, reason)
	}
	if w := c.win; w != nil {
		w.cur.Arrived++
		if ok {
			w.cur.Admitted++
		} else {
			w.cur.Rejected++
		}
	}
	if !ok {
		c.agg.rejected(spec, reason, c.now)
		if c.obs != nil {
			c.obs.RequestDone(spec.ID, c.now, Rejected)
		}
		return
	}
	c.agg.admitted++
	if c.agg.col != nil {
		c.agg.col.Arrive(c.now)
	}
	if c.adObs != nil {
		c.admitted[spec.ID] = *spec
	}
	if c.cfg.AdmissionLatencyUs == 0 {
		c.route(spec)
		return
	}
	var slot int32
	if n := len(c.pendFree); n > 0 {
		slot = c.pendFree[n-1]
		c.pendFree = c.pendFree[:n-1]
		c.pending[slot] = *spec
	} else {
		c.pending = append(c.pending, *spec)
		slot = int32(len(c.pending) - 1)
	}
	c.agg.awaiting++
	at := c.now + c.cfg.AdmissionLatencyUs
	c.events.push(cevent{at: at, kind: evRoute, slot: slot})
	if c.routeHead > 0 && c.routeHead*2 >= len(c.routeAt) {
		c.routeAt = c.routeAt[:copy(c.routeAt, c.routeAt[c.routeHead:])]
		c.routeHead = 0
	}
	c.routeAt = append(c.routeAt, at)
}

func (c *Sim) handle(ev *cevent) {
	switch ev.kind {
	case evRoute:
		c.routeHead++
		c.cur = c.pending[ev.slot]
		c.pendFree = append(c.pendFree, ev.slot)
		c.agg.awaiting--
		c.route(&c.cur)
	case evHandoff:
		c.inflight[ev.inst]--
		c.inst.touch(int(ev.inst))
		if c.fl != nil {
			c.maybeTerminate(int(ev.inst))
		}
	case evDone:
		c.inflight[ev.inst]--
		c.inst.touch(int(ev.inst))
		if c.inflight[ev.inst] < 0 {
			c.fail("CL-2", "instance %s: in-flight count went negative at request %d", c.ids[ev.inst], ev.id)
		}
		if c.fl != nil {
			c.maybeTerminate(int(ev.inst))
		}
		if c.win != nil {
			c.win.left(ev)
		}
		if c.adObs != nil {
			c.leftAdmission(ev.id)
		}
		if c.obs != nil {
			c.obs.RequestDone(ev.id, c.now, ev.out)
		}
	}
}

// leftAdmission tells the admission policy that admitted request id left,
// at its departure (now). Every admitted request's way out, completed,
// dropped, refused as too long or timed out, is a completion of its
// instance and then this departure event, handled in the cluster's event
// order on the caller's goroutine (with workers too), so Left is called
// once per request, in the same order for any number of workers.
func (c *Sim) leftAdmission(id int64) {
	spec, ok := c.admitted[id]
	if !ok {
		c.fail("CL-1", "request %d left the cluster but was never admitted, or left twice", id)
		return
	}
	delete(c.admitted, id)
	c.gone = spec // a field: a pointer to a local would escape at every call
	c.adObs.Left(&c.gone, c.now)
}

func (c *Sim) route(spec *sim.RequestSpec) {
	if f := c.fl; f != nil && f.Scaled() && !f.AnyReady() {
		c.fl.Hold(spec, c.now)
		return
	}
	c.fillView()
	c.checkFreshness()
	if c.pd != nil && !c.pdMask(c.pd.canD) {
		c.pdUnmask()
		if f := c.fl; f != nil && f.Scaled() {
			// Every instance that decodes is starting, draining or gone
			// (scaled to zero): the request waits, as for any capacity.
			c.fl.Hold(spec, c.now)
			return
		}
		c.err = fmt.Errorf("request %d: no instance decodes (every pool's role is prefill)", spec.ID)
		return
	}
	c.req.Spec = spec
	c.req.Hashes, c.req.Blocks = nil, 0
	if c.needs {
		full := spec.PromptTokens / c.bs
		c.hashBuf = sim.AppendBlockHashes(c.hashBuf[:0], spec, c.bs, min(full, sim.SharedBlocks(spec, c.bs)))
		c.req.Hashes, c.req.Blocks = c.hashBuf, int(full)
	}
	if c.precise != nil {
		c.feedPrecise()
	}
	i := c.router.Route(&c.req, &c.view)
	if i < 0 || i >= len(c.eng) || !c.view.OK(i) {
		c.err = fmt.Errorf("routing policy %s chose instance %d of %d, or one that takes no request", c.router.Name(), i, len(c.eng))
		if c.pd != nil {
			c.pdUnmask()
		}
		return
	}
	c.poolRouted(i, spec)
	if c.dec != nil {
		c.dec.routing(c.now, &c.req, c.router, &c.view, c.ids, i)
	}
	c.an.routed(c, i, spec)
	c.router.Routed(&c.req, i)
	c.inflight[i]++
	c.inst.touch(i)
	if c.agg.col != nil {
		c.agg.col.Route(c.now, i)
	}
	if c.pd != nil {
		c.pdUnmask()
		if c.pdSplit(spec, i) {
			return // prefilled elsewhere first (pd.go)
		}
	}
	c.agg.routed(i)
	e := c.eng[i]
	if err := e.Inject(*spec, c.now+c.cfg.RoutingLatencyUs); err != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
		return
	}
	c.arm(spec, i)
	at, ok := e.NextEventUs()
	c.inst.set(i, at, ok)
}

func (c *Sim) advance(i int) {
	if c.groupOf != nil && c.groupOf[i] >= 0 {
		c.advanceGroup(c.groups[c.groupOf[i]])
		return
	}
	e := c.eng[i]
	if err := e.Advance(); err != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
		return
	}
	for k := range e.Completions() {
		c.complete(i, &e.Completions()[k], c.now)
	}
	if c.pd != nil {
		c.pdPulls(i)
	}
	at, ok := e.NextEventUs()
	c.inst.set(i, at, ok)
}

// complete records a request that left instance i at an event at time at
// and schedules the router's in-flight decrement at its departure.
func (c *Sim) complete(i int, d *sim.Completion, at int64) {
	// Causality across the pipeline: the instance received the request
	// exactly the admission and routing latencies after it arrived (later
	// when it waited for a ready instance, or a drain re-routed it, or
	// after its prefill elsewhere).
	want := d.ArrivalUs + c.cfg.AdmissionLatencyUs + c.cfg.RoutingLatencyUs
	if at, ok := c.pdInjected(i, d.ID); ok {
		want = at
	}
	if c.pd != nil && c.pdCompleted(i, d) {
		return // a prefill handed off: the request goes on
	}
	if c.fl != nil && (d.InjectedUs > want || (len(c.redirected) > 0 && c.redirected[d.ID])) {
		want = d.InjectedUs
		delete(c.redirected, d.ID)
	}
	if d.InjectedUs != want {
		c.fail("CL-3", "request %d reached instance %s at %d µs; arrival %d + admission %d + routing %d = %d",
			d.ID, c.ids[i], d.InjectedUs, d.ArrivalUs, c.cfg.AdmissionLatencyUs, c.cfg.RoutingLatencyUs, want)
	}
	// A request that timed out or was killed (a drain) before its queueing
	// (in the API stage, or still in transit to its instance) has no
	// enqueue time.
	if (d.EnqueuedUs < d.InjectedUs && !((d.TimedOut || d.Killed) && d.EnqueuedUs == 0)) || d.DepartedUs < at {
		c.fail("CL-3", "request %d: injected %d, enqueued %d, departs %d, reported at %d", d.ID, d.InjectedUs, d.EnqueuedUs, d.DepartedUs, at)
	}
	out := Completed
	switch {
	case d.Dropped:
		out = Dropped
	case d.TooLong:
		out = TooLong
	case d.TimedOut:
		out = TimedOut
	case d.Killed:
		out = Killed
	}
	c.poolFinished(i, d)
	c.an.completed(c, d)
	c.agg.left(i, c.ids[i], d, at)
	if c.armed != nil {
		delete(c.armed, d.ID)
	}
	c.events.push(cevent{at: d.DepartedUs, kind: evDone, inst: int32(i), id: d.ID, out: out,
		ttftUs: d.FirstTokenUs - d.ArrivalUs, tokens: d.OutputTokens})
}

// checkFreshness is INV-7 for periodic signals: the value a decision reads
// was scraped within the last interval.
func (c *Sim) checkFreshness() {
	for s, d := range c.snap.fresh {
		if d > 0 {
			if age := c.snap.age(Signal(s), c.now); age < 0 || age >= d {
				c.fail("INV-7", "%s read at %d µs is %d µs old; its refresh interval is %d µs", Signal(s), c.now, age, d)
			}
		}
	}
}

// fillView brings the router's view up to date: the instances that
// changed since the last decision (instHeap.touch), which alone can read
// differently (a routing decision on 128 instances once read every
// instance's status).
func (c *Sim) fillView() {
	c.view.NowUs = c.now
	h := c.inst
	for _, i := range h.touched {
		h.dirty[i] = false
		c.snap.fillOne(&c.view, c.eng[i], c.inflight, int(i))
	}
	h.touched = h.touched[:0]
}

// anyInFlight says whether a request routed to an instance has not left.
func (c *Sim) anyInFlight() bool {
	for _, n := range c.inflight {
		if n != 0 {
			return true
		}
	}
	return false
}
