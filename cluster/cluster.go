// Package cluster simulates N vLLM instances behind admission and a router
// on one shared clock (seed 001). It is, with the CLI, the only package
// that drives sim.Engine.
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
// Event order (seed 001, with seed 002's type priorities among cluster
// events): at equal times, arrivals, then routing decisions, then
// completions, all before instance events; among instances, the lowest
// index first; within an instance, the engine's own order. Signal
// freshness (INV-7): in-flight counts and the prefix index are router-local
// and always fresh; the instance-reported signals are read at each
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
	"context"
	"fmt"
	"io"
	"math"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
	ss "github.com/blis-sim/blis/steady"
)

// Instance is one instance of the cluster.
type Instance struct {
	// ID names the instance in results and traces; IDs are unique and
	// sort in index order (InstanceID zero-pads).
	ID     string
	Pool   string
	Config sim.Config
	// Lockstep names the data-parallel group the instance steps with
	// (cluster/lockstep.go); instances with the same non-empty name step
	// together. Empty: it steps alone.
	Lockstep string
}

// InstanceID is the ID of instance index among n: "instance_" and the
// index, zero-padded to n's width, so that lexicographic order is index
// order (seed 002, E.4).
func InstanceID(index, n int) string {
	w := len(fmt.Sprint(max(1, n-1)))
	return fmt.Sprintf("instance_%0*d", w, index)
}

// Config is a cluster: its instances and the policies in front of them.
type Config struct {
	Instances []Instance
	Admission admit.Policy // nil: always-admit
	Routing   route.Policy // nil: round-robin
	// AdmissionLatencyUs delays the routing decision after admission;
	// RoutingLatencyUs delays the request's arrival at the instance after
	// the routing decision.
	AdmissionLatencyUs, RoutingLatencyUs int64
	Freshness                            Freshness
	// RouterBlockSize is the block size, in tokens, at which the router
	// hashes prompts for its prefix index (0: instance 0's block size).
	RouterBlockSize int64
	// HorizonUs stops Run at this time (0: run until every request has
	// left).
	HorizonUs int64
	// Decisions, when not nil, receives the decision trace: one JSON line
	// per admission and routing decision, with the top CounterfactualK
	// candidates of each routing decision and its regret.
	Decisions       io.Writer
	CounterfactualK int
	// TraceDetailed adds each instance's batch formations, preemptions
	// and KV offload/reload records to the decision trace (detail.go);
	// it needs Decisions, and runs the instances on one goroutine.
	TraceDetailed bool
	// Counterfactual, when not nil, samples routing decisions and
	// reports their TTFT regret by counterfactual simulation
	// (counterfactual.go): in Result.Counterfactual, and in the decision
	// trace when there is one.
	Counterfactual *Counterfactual
	// RecordRequests keeps one record per request that left the cluster
	// (completed, rejected or dropped).
	RecordRequests bool
	// SLOTargets are each SLO class's targets (indexed by sim.SLOClass);
	// a class with targets reports its attainment and goodput.
	SLOTargets [4]SLOTarget
	// TenantNames names the tenants (a request's Tenant indexes it); with
	// names, the result reports every tenant's outcomes, latencies and
	// SLO attainment, even a tenant that sent nothing.
	TenantNames []string
	// Workers is how many goroutines Run may use to advance instances
	// between cluster events (0 or 1: the caller's only). The output is the
	// same for every value; see parallel.go for when they are used.
	Workers int
	// WindowUs > 0 cuts the run into time windows of this many µs,
	// aligned at time 0, and reports each one in Result.Windows: requests
	// that arrived and left in it, TTFT of those completed, and the state
	// sampled at its end (windows.go). 0: no windows.
	WindowUs int64
	// Scaling, when not nil, gives each pool bounds, an autoscaler, nodes
	// and an instance lifecycle, and reports the fleet's size and cost
	// (scaling.go). Nil: a fixed fleet, no cost.
	Scaling *Scaling
	// Disagg, when not nil, splits requests between prefill and decode
	// instances and moves their KV between them (pd.go).
	Disagg *Disagg
	// KVStore, when not nil, is a KV store the instances with a store
	// link share (kvstore.go).
	KVStore *KVStore
	// Analysis, when not nil, is told of every arrival, routing, departure
	// and completed request, stops the run where its stopping rule says
	// (at a checkpoint: a horizon), and its report is the result's
	// Stability and SteadyState (package steady; steady.go).
	Analysis *ss.Collector
}

// Source supplies the requests. Arrival times must not decrease and never
// lie before the cluster's clock; request IDs must be unique.
type Source interface {
	// Peek is the next request's arrival time, or false when there is none
	// for now (a closed-loop source may have more after a completion).
	Peek() (int64, bool)
	// Next returns that request and moves on.
	Next() sim.RequestSpec
}

// Outcome is how a request left the cluster (sim.Outcome, so that a
// workload source outside this package can observe it).
type Outcome = sim.Outcome

const (
	Completed = sim.Completed
	Rejected  = sim.Rejected
	Dropped   = sim.Dropped // unservable at its instance
	TimedOut  = sim.TimedOut
	TooLong   = sim.TooLong // refused by its instance: longer than the model's context
	Killed    = sim.Killed  // ended by a scale-down
)

// CompletionObserver is implemented by a Source that needs to know when
// its requests leave (a closed-loop workload sends its next request a
// think time after the previous one completes): RequestDone is called at
// the request's departure, or at its rejection.
type CompletionObserver interface {
	RequestDone(id int64, atUs int64, out Outcome)
}

// SliceSource is a Source over a slice sorted by arrival.
type SliceSource struct {
	reqs []sim.RequestSpec
	next int
}

// NewSliceSource returns a source over reqs (not copied).
func NewSliceSource(reqs []sim.RequestSpec) *SliceSource { return &SliceSource{reqs: reqs} }

func (s *SliceSource) Peek() (int64, bool) {
	if s.next >= len(s.reqs) {
		return 0, false
	}
	return s.reqs[s.next].ArrivalUs, true
}

func (s *SliceSource) Next() sim.RequestSpec {
	s.next++
	return s.reqs[s.next-1]
}

// Remaining is the number of requests not yet taken.
func (s *SliceSource) Remaining() int { return len(s.reqs) - s.next }

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
	merged  []doneAt
	// windowEnd is the last parallel window's bound (0 before any): the
	// instances have processed every event before it, the cluster maybe not
	// yet the departures they reported before it (the only cluster events a
	// window can pass: it stops at every other kind).
	windowEnd int64

	win *windower // nil without time windows

	fl         *fleet                // nil without Config.Scaling
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
	if n := len(c.workers); n > 0 {
		w := c.workers[i%n]
		w.insts = append(w.insts, i)
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
	// no event of its own: for blocks a copy's timeout frees.)
	work := ok || (c.fl != nil && c.fl.nHeld > 0) || c.anyInFlight()
	if at, has := c.fl.next(); has && work && (!ok || at < t) {
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
	c.kvSync(t)
	c.snap.advance(t, c.eng)
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
		if at, ok := c.fl.next(); ok && at == t {
			ev := c.fl.ev.pop()
			c.handleScaling(&ev)
			active = active || ev.kind == sevHeldTimeout
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
		if c.fl != nil {
			c.maybeTerminate(int(ev.inst))
		}
	case evDone:
		c.inflight[ev.inst]--
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
	if f := c.fl; f != nil && f.anyPol && !anyTrue(f.routable) {
		c.hold(spec)
		return
	}
	c.snap.fill(&c.view, c.eng, c.inflight, c.now)
	c.checkFreshness()
	if c.pd != nil && !c.pdMask(c.pd.canD) {
		c.pdUnmask()
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
	if c.fl != nil && (d.InjectedUs > want || c.redirected[d.ID]) {
		want = d.InjectedUs
		delete(c.redirected, d.ID)
	}
	if d.InjectedUs != want {
		c.fail("CL-3", "request %d reached instance %s at %d µs; arrival %d + admission %d + routing %d = %d",
			d.ID, c.ids[i], d.InjectedUs, d.ArrivalUs, c.cfg.AdmissionLatencyUs, c.cfg.RoutingLatencyUs, want)
	}
	// A request that timed out before its queueing has no enqueue time.
	if (d.EnqueuedUs < d.InjectedUs && !(d.TimedOut && d.EnqueuedUs == 0)) || d.DepartedUs < at {
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

// anyInFlight says whether a request routed to an instance has not left.
func (c *Sim) anyInFlight() bool {
	for _, n := range c.inflight {
		if n != 0 {
			return true
		}
	}
	return false
}

func anyTrue(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}
