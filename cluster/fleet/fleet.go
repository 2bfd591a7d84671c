// Package fleet is the fleet's lifecycle as a caller-driven core, in the
// manner of sim.Engine and kvxfer: the instances and nodes of each pool,
// their states, node provisioning and billing, the autoscalers'
// evaluations, drains, and the requests held at the router for want of a
// ready instance. It has no clock, no loop and no engine of its own: the
// caller (the cluster) asks when its next event is (Next), lets it process
// that one event (Pop), tells it what happened outside (Hold, Idle,
// Routed, Finished), hands it a pool's signals when it asks for an
// evaluation (Evaluate), and carries out the Actions each call returns,
// in order: start an instance's engine, route a request, drain, kill or
// forget an instance.
//
// An instance lives through the states pending (waiting for a GPU: a node
// being provisioned), loading (image pull and weights), warming
// (compilation and graph capture; not routed to), ready (routed to),
// draining (not routed to; finishing or handing back its work) and
// terminated. An autoscaler per pool (package autoscale) is evaluated every
// interval and recommends a size; the core clamps it to [Min, Max],
// actuates it and records it. Nodes hold GPUsPerNode GPUs each; a
// scale-up that finds no free GPUs provisions a node (a delay drawn
// uniformly from the pool's range, from its own random stream) unless
// MaxNodes is reached; an empty node is released after NodeIdleUs.
// Billing is per node: its GPUs are paid from the start of its
// provisioning to its release (a cloud bills a VM from launch, idle GPUs
// included), whatever its instances' states.
//
// A request admitted while no instance is ready waits (Hold), in arrival
// order, and is handed back to be routed (ActRoute) when one becomes
// ready; it times out after Config.WaitTimeoutUs (or its client's own
// timeout: ActTimedOut). A held request makes a pool with no instance at
// all (scaled to zero) evaluate at once, and any pool at zero grow to one:
// scale from zero. Without a policy a pool keeps its size, and only the
// accounting runs (replica-seconds, GPU-hours, cost).
//
// Events at the same instant are processed in kind order: instance
// transitions and node arrivals first, then drain timeouts, held-request
// timeouts and node releases, then evaluations; the caller processes them
// after its own events of that instant (they change the instance set). The
// core is deterministic: its only randomness is each pool's provisioning
// stream, "provision/<pool>". It is not safe for concurrent use.
package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/eventq"
	"github.com/blis-sim/blis/sim"
)

// Pool is one pool's bounds, autoscaler and lifecycle.
type Pool struct {
	Name     string
	Min, Max int
	// Policy recommends the pool's size every IntervalUs (nil: a fixed
	// pool).
	Policy     autoscale.Policy
	IntervalUs int64
	// GPUsPerReplica is one instance's GPUs (TP × ...); a node has
	// GPUsPerNode (>= GPUsPerReplica); at most MaxNodes nodes (0: no
	// limit). A new node is ready after a delay uniform in
	// [ProvisionMinUs, ProvisionMaxUs]; an empty node is released after
	// NodeIdleUs.
	GPUsPerReplica, GPUsPerNode, MaxNodes int
	ProvisionMinUs, ProvisionMaxUs        int64
	NodeIdleUs                            int64
	// ImagePullUs is the image pull that the first instance loading on a
	// node waits for (later ones find the image there; initial nodes
	// have it). LoadUs is an instance's loading time after that (its
	// weights), WarmUs its warm-up (compilation, CUDA graph capture)
	// before it is routed to.
	ImagePullUs, LoadUs, WarmUs int64
	// Drain is what a scaled-down ready instance does with its requests;
	// DrainTimeoutUs bounds the wait of DrainWait and DrainRedirect (0:
	// none).
	Drain          Drain
	DrainTimeoutUs int64
	// PricePerGPUHour is the cost of a GPU for an hour, any currency.
	PricePerGPUHour float64
	// WarmupFactor > 1 slows a new instance's steps by that factor when it
	// becomes ready, falling to 1 over WarmupUs (sim.SlowStart); 0 or 1:
	// none. The caller applies it to the engines it builds.
	WarmupFactor float64
	WarmupUs     int64
}

// Drain is a scale-down's treatment of a ready instance's requests.
type Drain uint8

const (
	// DrainWait lets every request finish (or DrainTimeoutUs pass: the rest
	// are killed).
	DrainWait Drain = iota
	// DrainImmediate kills every request at once (outcome killed).
	DrainImmediate
	// DrainRedirect hands the requests that have not started back to the
	// router, which routes them elsewhere; running ones finish, as with
	// DrainWait.
	DrainRedirect
)

var drainNames = []string{"wait", "immediate", "redirect"}

func (d Drain) String() string { return drainNames[d] }

// ParseDrain reads a drain policy's name.
func ParseDrain(s string) (Drain, error) {
	for i, n := range drainNames {
		if n == s {
			return Drain(i), nil
		}
	}
	return 0, fmt.Errorf("drain policy %q is not one of wait, immediate, redirect", clip.String(s))
}

// State is an instance's place in its lifecycle.
type State uint8

const (
	StatePending State = iota
	StateLoading
	StateWarming
	StateReady
	StateDraining
	StateTerminated
	numStates
)

var stateNames = [numStates]string{"pending", "loading", "warming", "ready", "draining", "terminated"}

func (s State) String() string { return stateNames[s] }

// Config is the fleet.
type Config struct {
	Pools []Pool
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
	// MaxInstances bounds the instances the fleet may have started in all,
	// initial ones included (0: no bound): a scale-up beyond it is an
	// error.
	MaxInstances int
}

// ActionKind is what the caller must do.
type ActionKind uint8

const (
	// ActStart: instance Inst (the next index) of pool Pool exists from
	// now; build its engine. It is pending, or loading.
	ActStart ActionKind = iota
	// ActReady: instance Inst takes requests from now (its slow start
	// starts).
	ActReady
	// ActRoute: route Spec, which waited at the router until now.
	ActRoute
	// ActTimedOut: Spec gave up waiting at the router for a ready
	// instance: it left, timed out, reaching no instance.
	ActTimedOut
	// ActDrain: instance Inst drains under Drain: kill its requests
	// (immediate), hand back those not started (redirect) or nothing
	// (wait); then call Idle once it holds no request, now or later.
	ActDrain
	// ActKill: instance Inst's drain timed out: kill its requests, then
	// call Idle once it holds none.
	ActKill
	// ActTerminated: instance Inst is gone for good: forget it.
	ActTerminated
	// ActEvaluate: pool Pool's autoscaler is due: gather its signals
	// (Signals, then the ready instances' own) and call Evaluate.
	ActEvaluate
)

// Action is one thing for the caller to do.
type Action struct {
	Kind  ActionKind
	Inst  int
	Pool  int
	Drain Drain
	Spec  sim.RequestSpec
}

// ScaleRecord is one scale action.
type ScaleRecord struct {
	AtUs   int64  `json:"t_us"`
	Pool   string `json:"pool"`
	Policy string `json:"policy"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Reason string `json:"reason"`
	// The signals the policy read.
	KVUtilization float64 `json:"kv_utilization"`
	QueueDepth    float64 `json:"queue_depth"`
	Running       float64 `json:"running"`
	InFlight      float64 `json:"in_flight"`
	Waiting       int64   `json:"waiting"`
	SLOAttainment float64 `json:"slo_attainment"`
	Ready         int     `json:"ready"`
}

// MaxScaleRecords bounds the records a result keeps (the decision trace
// has them all).
const MaxScaleRecords = 100_000

// life is an instance's lifecycle.
type life struct {
	pool     int
	state    State
	since    int64
	node     int
	stateUs  [numStates]int64 // time spent in each state, up to since
	drainEnd int64            // a draining instance's timeout (0: none)
}

// node is a node of GPUs.
type node struct {
	pool       int
	used       int   // GPUs in use
	readyAt    int64 // provisioning ends
	start      int64 // billing starts
	end        int64 // released (billing ends); -1 while held
	emptySince int64 // -1 while used
	imageAt    int64 // the image is on the node from then (-1: not pulled yet)
}

// poolRun is a pool's running state.
type poolRun struct {
	cfg       Pool
	rng       *rand.Rand
	size      int // instances counted by the autoscaler: not draining, not terminated
	nodes     []int
	lastDir   int
	lastDirAt int64
	finished  int64 // requests of the pool that finished since the last evaluation
	met       int64
	inputs    float64 // prompt tokens of the requests routed to the pool
	outputs   float64 // output tokens of those completed
	nIn, nOut int64
	res       PoolFleet
	peak      int
	zeroTick  bool  // an evaluation for held requests is pending (Hold)
	live      []int // its instances not terminated, in index order
}

// held is a request waiting at the router for a ready instance.
type held struct {
	spec     sim.RequestSpec
	deadline int64 // 0: none
	gone     bool
}

// Event kinds, in their order at an instant.
const (
	evLife        uint8 = 1 // inst: its next lifecycle state is due
	evNodeReady   uint8 = 2 // slot: node provisioned
	evDrainEnd    uint8 = 3 // inst: a draining instance's timeout
	evHeldTimeout uint8 = 4 // id: a held request gives up
	evNodeIdle    uint8 = 5 // slot: an empty node's release is due
	evTick        uint8 = 6 // slot: evaluate the pool; id 1: at once, not periodic
)

type payload struct {
	id         int64
	inst, slot int32
}

// Core is the fleet. Create it with New.
type Core struct {
	cfg      Config
	pools    []poolRun
	life     []life
	nodes    []node
	ev       eventq.Queue[payload]
	held     []held
	heldAt   int   // first held entry not gone
	nHeld    int64 // held now
	heldN    int64 // requests that ever waited
	timedOut int64 // held requests that timed out
	routable []bool
	nReady   int
	drains   int // drain timeouts pending (evDrainEnd)
	byState  [numStates]int64
	records  []ScaleRecord
	oscWin   int64
	anyPol   bool
	acts     []Action // the actions of the call in progress
	// lastChange is the time of the last change of an instance's state
	// or a node's release: Result's accounting reaches it.
	lastChange int64
}

// New is the fleet at time 0: initial[i] is initial instance i's pool
// (an index into cfg.Pools); every one is ready, on nodes provisioned at
// time 0 that have the image.
func New(cfg Config, initial []int) (*Core, error) {
	f := &Core{cfg: cfg, oscWin: cfg.OscillationWindowUs}
	if f.oscWin == 0 {
		f.oscWin = 300_000_000
	}
	names := map[string]bool{}
	for _, ps := range cfg.Pools {
		if names[ps.Name] {
			return nil, fmt.Errorf("scaling: pool %q listed twice", ps.Name)
		}
		names[ps.Name] = true
		switch {
		case ps.GPUsPerReplica < 1 || ps.GPUsPerNode < ps.GPUsPerReplica:
			return nil, fmt.Errorf("scaling: pool %s: %d GPUs per replica on nodes of %d", ps.Name, ps.GPUsPerReplica, ps.GPUsPerNode)
		case ps.Min < 0 || ps.Max < ps.Min:
			return nil, fmt.Errorf("scaling: pool %s: bounds [%d, %d]", ps.Name, ps.Min, ps.Max)
		case ps.Policy != nil && ps.IntervalUs < 1:
			return nil, fmt.Errorf("scaling: pool %s: evaluation interval %d µs", ps.Name, ps.IntervalUs)
		case ps.ProvisionMinUs < 0 || ps.ProvisionMaxUs < ps.ProvisionMinUs || ps.LoadUs < 0 || ps.WarmUs < 0 || ps.NodeIdleUs < 0 || ps.DrainTimeoutUs < 0:
			return nil, fmt.Errorf("scaling: pool %s: a negative or inverted delay", ps.Name)
		case !(ps.PricePerGPUHour >= 0) || math.IsInf(ps.PricePerGPUHour, 0):
			return nil, fmt.Errorf("scaling: pool %s: price %v", ps.Name, ps.PricePerGPUHour)
		}
		pr := poolRun{cfg: ps, rng: cfg.RNG.Stream("provision/" + ps.Name)}
		pr.res = PoolFleet{Name: ps.Name, Policy: "none", Min: ps.Min, Max: ps.Max, ReplicaSeconds: map[string]float64{}}
		if ps.Policy != nil {
			pr.res.Policy = ps.Policy.Name()
			f.anyPol = true
		}
		f.pools = append(f.pools, pr)
	}
	if len(initial) == 0 {
		grows := false
		for _, ps := range cfg.Pools {
			grows = grows || (ps.Policy != nil && ps.Max > 0)
		}
		if !grows {
			return nil, fmt.Errorf("scaling: no instance, and no autoscaler that can start one")
		}
	}
	if m := cfg.MaxInstances; m > 0 && len(initial) > m {
		return nil, fmt.Errorf("scaling: %d initial instances, more than the %d a run may start", len(initial), m)
	}
	for i, p := range initial {
		if p < 0 || p >= len(f.pools) {
			return nil, fmt.Errorf("scaling: instance %d: no pool %d", i, p)
		}
		pr := &f.pools[p]
		n := f.place(p, 0, true)
		if n < 0 {
			return nil, fmt.Errorf("scaling: pool %s: initial instance %d finds no GPU: %d nodes of %d GPUs hold fewer instances of %d GPUs than the pool starts with",
				pr.cfg.Name, i, pr.cfg.MaxNodes, pr.cfg.GPUsPerNode, pr.cfg.GPUsPerReplica)
		}
		f.life = append(f.life, life{pool: p, state: StateReady, node: n})
		pr.live = append(pr.live, i)
		f.routable = append(f.routable, true)
		f.byState[StateReady]++
		f.nReady++
		pr.size++
	}
	for p := range f.pools {
		pr := &f.pools[p]
		if pr.size < pr.cfg.Min || pr.size > pr.cfg.Max {
			return nil, fmt.Errorf("scaling: pool %s starts with %d instances, outside [%d, %d]", pr.cfg.Name, pr.size, pr.cfg.Min, pr.cfg.Max)
		}
		pr.peak = pr.size
		if pr.cfg.Policy != nil {
			f.ev.Push(pr.cfg.IntervalUs, evTick, payload{slot: int32(p)})
		}
	}
	return f, nil
}

// Scaled says whether any pool has an autoscaler: only then can an
// instance be unroutable (starting, draining, terminated).
func (f *Core) Scaled() bool { return f.anyPol }

// Routable says, by instance, which take requests (ready ones); the slice
// is the core's, kept up to date.
func (f *Core) Routable() []bool { return f.routable }

// AnyReady says whether some instance takes requests.
func (f *Core) AnyReady() bool { return f.nReady > 0 }

// NumInstances is the number of instances ever started, initial ones
// included: the next one's index.
func (f *Core) NumInstances() int { return len(f.life) }

// State is instance i's state.
func (f *Core) State(i int) State { return f.life[i].state }

// PoolOf is instance i's pool.
func (f *Core) PoolOf(i int) int { return f.life[i].pool }

// SameNode says whether instances a and b share a node.
func (f *Core) SameNode(a, b int) bool {
	return a < len(f.life) && b < len(f.life) && f.life[a].node >= 0 && f.life[a].node == f.life[b].node
}

// Waiting is the number of requests held now.
func (f *Core) Waiting() int64 { return f.nHeld }

// DrainsPending is the number of drain timeouts still to come: each may
// kill the requests its instance still holds.
func (f *Core) DrainsPending() int { return f.drains }

// Next is the time of the next event, and false when there is none.
func (f *Core) Next() (int64, bool) {
	if f == nil || f.ev.Len() == 0 {
		return 0, false
	}
	return f.ev.Peek().At, true
}

// Pop processes the next event, which must be at now (Next), and returns
// what the caller must do, and whether the event was activity (a request
// gave up: the run's span reaches it). Each call that returns actions returns a slice of its own, so
// that the caller may call again while it carries them out).
func (f *Core) Pop(now int64) (acts []Action, active bool) {
	f.acts = nil
	ev := f.ev.Pop()
	switch ev.Kind {
	case evLife:
		i := int(ev.P.inst)
		switch f.life[i].state {
		case StateLoading:
			f.setState(i, StateWarming, now)
		case StateWarming:
			f.setState(i, StateReady, now)
		}
	case evNodeReady:
		n := int(ev.P.slot)
		for _, i := range f.pools[f.nodes[n].pool].live {
			if l := &f.life[i]; l.node == n && l.state == StatePending {
				f.setState(i, StateLoading, now)
			}
		}
		if f.nodes[n].used == 0 {
			f.nodeEmpty(n, now)
		}
	case evDrainEnd:
		f.drains--
		i := int(ev.P.inst)
		if l := &f.life[i]; l.state == StateDraining && l.drainEnd == now {
			f.acts = append(f.acts, Action{Kind: ActKill, Inst: i})
		}
	case evHeldTimeout:
		f.heldTimeout(ev.P.id, now)
		active = true
	case evNodeIdle:
		nd := &f.nodes[ev.P.slot]
		if nd.end < 0 && nd.used == 0 && nd.emptySince >= 0 && now-nd.emptySince >= f.pools[nd.pool].cfg.NodeIdleUs {
			nd.end = now
			f.lastChange = max(f.lastChange, now)
		}
	case evTick:
		p := int(ev.P.slot)
		f.acts = append(f.acts, Action{Kind: ActEvaluate, Pool: p})
		if ev.P.id == 1 {
			f.pools[p].zeroTick = false
		}
		if ev.P.id == 0 { // a periodic tick (not a held request's) schedules the next
			f.ev.Push(now+f.pools[p].cfg.IntervalUs, evTick, payload{slot: int32(p)})
		}
	}
	return f.take(), active
}

// take hands the call's actions to the caller.
func (f *Core) take() []Action {
	acts := f.acts
	f.acts = nil
	return acts
}

// setState moves instance i to state s at now, accounting the time spent.
func (f *Core) setState(i int, s State, now int64) {
	l := &f.life[i]
	f.lastChange = max(f.lastChange, now)
	l.stateUs[l.state] += now - l.since
	f.byState[l.state]--
	f.byState[s]++
	if l.state == StateReady {
		f.nReady--
	}
	l.state, l.since = s, now
	pr := &f.pools[l.pool]
	f.routable[i] = s == StateReady
	switch s {
	case StateLoading:
		at := now
		if l.node >= 0 {
			nd := &f.nodes[l.node]
			if nd.imageAt < 0 { // the first instance here pulls the image, for all
				nd.imageAt = now + pr.cfg.ImagePullUs
			}
			at = max(at, nd.imageAt)
		}
		f.ev.Push(at+pr.cfg.LoadUs, evLife, payload{inst: int32(i)})
	case StateWarming:
		f.ev.Push(now+pr.cfg.WarmUs, evLife, payload{inst: int32(i)})
	case StateReady:
		f.nReady++
		f.acts = append(f.acts, Action{Kind: ActReady, Inst: i})
		f.flushHeld()
	case StateTerminated:
		pr.res.Terminated++
		if k := slices.Index(pr.live, i); k >= 0 {
			pr.live = slices.Delete(pr.live, k, k+1)
		}
		f.acts = append(f.acts, Action{Kind: ActTerminated, Inst: i})
		if l.node >= 0 {
			nd := &f.nodes[l.node]
			nd.used -= pr.cfg.GPUsPerReplica
			if nd.used == 0 && nd.readyAt <= now {
				f.nodeEmpty(l.node, now)
			}
		}
	}
}

func (f *Core) nodeEmpty(n int, now int64) {
	nd := &f.nodes[n]
	nd.emptySince = now
	f.ev.Push(now+f.pools[nd.pool].cfg.NodeIdleUs, evNodeIdle, payload{slot: int32(n)})
}

// place finds GPUs for one instance of pool p at now: a node with room
// (ready ones first, then those being provisioned, lowest index first),
// else a new node, provisioned at once when initial (time 0) or after the
// pool's delay; -1 when MaxNodes is reached.
func (f *Core) place(p int, now int64, initial bool) int {
	pr := &f.pools[p]
	need := pr.cfg.GPUsPerReplica
	best := -1
	for _, n := range pr.nodes {
		nd := &f.nodes[n]
		if nd.end >= 0 || nd.pool != p || nd.used+need > pr.cfg.GPUsPerNode {
			continue
		}
		if best < 0 || (nd.readyAt <= now && f.nodes[best].readyAt > now) {
			best = n
		}
	}
	if best < 0 {
		if pr.cfg.MaxNodes > 0 && pr.res.Nodes >= pr.cfg.MaxNodes {
			return -1
		}
		delay := int64(0)
		if !initial {
			lo, hi := pr.cfg.ProvisionMinUs, pr.cfg.ProvisionMaxUs
			delay = lo
			if hi > lo {
				delay = lo + pr.rng.Int64N(hi-lo+1)
			}
		}
		best = len(f.nodes)
		image := int64(-1)
		if initial {
			image = 0
		}
		f.nodes = append(f.nodes, node{pool: p, readyAt: now + delay, start: now, end: -1, emptySince: -1, imageAt: image})
		pr.nodes = append(pr.nodes, best)
		pr.res.Nodes++
		if delay > 0 {
			f.ev.Push(now+delay, evNodeReady, payload{slot: int32(best)})
		}
	}
	nd := &f.nodes[best]
	nd.used += need
	nd.emptySince = -1
	return best
}

// Signals is pool p's part of its autoscaler's signals at now: its size,
// bounds, the requests held, its requests' mean lengths and SLO
// attainment since the last evaluation. The caller adds the ready
// instances' own (ReadyIn) and the held requests' tokens.
func (f *Core) Signals(p int, now int64) autoscale.Signals {
	pr := &f.pools[p]
	s := autoscale.Signals{NowUs: now, Replicas: pr.size, Min: pr.cfg.Min, Max: pr.cfg.Max, Waiting: f.nHeld}
	if pr.nIn > 0 {
		s.MeanInput = pr.inputs / float64(pr.nIn)
	}
	if pr.nOut > 0 {
		s.MeanOutput = pr.outputs / float64(pr.nOut)
	}
	if pr.finished > 0 {
		s.SLOAttainment, s.SLOFinished = float64(pr.met)/float64(pr.finished), pr.finished
	}
	return s
}

// ReadyIn appends to dst pool p's ready instances, in index order.
func (f *Core) ReadyIn(p int, dst []int) []int {
	for _, i := range f.pools[p].live {
		if f.life[i].state == StateReady {
			dst = append(dst, i)
		}
	}
	return dst
}

// Evaluate asks pool p's policy for its size with the signals s (Signals
// and the caller's part) and actuates the answer at now. It returns the
// caller's actions (instances to start, to terminate, to drain), the
// scale record when the size changed, and an *sim.InvariantError (CL-6)
// or a bound's error.
func (f *Core) Evaluate(p int, s *autoscale.Signals, now int64) ([]Action, *ScaleRecord, error) {
	f.acts = nil
	pr := &f.pools[p]
	pol := pr.cfg.Policy
	if pol == nil {
		return nil, nil, nil
	}
	d := pol.Evaluate(s)
	pr.finished, pr.met = 0, 0
	want := d.Desired
	if f.nHeld > 0 && pr.size == 0 && want < 1 {
		want, d.Reason = 1, fmt.Sprintf("%d requests wait at the router: scale from zero", f.nHeld)
	}
	want = max(pr.cfg.Min, min(want, pr.cfg.Max))
	from := pr.size
	if want == from {
		return nil, nil, nil
	}
	if want > from {
		if err := f.scaleUp(p, want-from, now); err != nil {
			return f.take(), nil, err
		}
	} else {
		f.scaleDown(p, from-want, now)
	}
	to := pr.size
	if to == from {
		return f.take(), nil, nil
	}
	pol.Applied(now, from, to)
	dir := 1
	if to < from {
		dir = -1
		pr.res.ScaleDowns++
	} else {
		pr.res.ScaleUps++
	}
	if pr.lastDir == -dir && now-pr.lastDirAt < f.oscWin {
		pr.res.Oscillations++
	}
	pr.lastDir, pr.lastDirAt = dir, now
	r := ScaleRecord{AtUs: now, Pool: pr.cfg.Name, Policy: pol.Name(), From: from, To: to, Reason: d.Reason, KVUtilization: s.KVUtilization,
		QueueDepth: s.QueueDepth, Running: s.Running, InFlight: s.InFlight, Waiting: s.Waiting, SLOAttainment: s.SLOAttainment, Ready: s.Ready}
	if len(f.records) < MaxScaleRecords {
		f.records = append(f.records, r)
	}
	if !(pr.size >= pr.cfg.Min && pr.size <= pr.cfg.Max) {
		return f.take(), &r, &sim.InvariantError{Invariant: "CL-6", AtUs: now, Detail: fmt.Sprintf("pool %s has %d replicas, outside [%d, %d]", pr.cfg.Name, pr.size, pr.cfg.Min, pr.cfg.Max)}
	}
	return f.take(), &r, nil
}

// scaleUp adds up to k instances to pool p: each on a GPU found or
// provisioned, pending until its node is ready, then loading.
func (f *Core) scaleUp(p, k int, now int64) error {
	pr := &f.pools[p]
	for range k {
		i := len(f.life)
		if m := f.cfg.MaxInstances; m > 0 && i >= m {
			return fmt.Errorf("pool %s: the autoscaler created more than %d instances in all; lengthen its evaluation interval or stabilization", pr.cfg.Name, m)
		}
		n := f.place(p, now, false)
		if n < 0 {
			return nil // max_nodes reached: the scale-up stops here
		}
		f.life = append(f.life, life{pool: p, state: StatePending, since: now, node: n})
		f.lastChange = max(f.lastChange, now)
		pr.live = append(pr.live, i)
		f.routable = append(f.routable, false)
		f.byState[StatePending]++
		pr.size++
		pr.res.Created++
		pr.peak = max(pr.peak, pr.size)
		f.acts = append(f.acts, Action{Kind: ActStart, Inst: i, Pool: p})
		if f.nodes[n].readyAt <= now {
			f.setState(i, StateLoading, now)
		}
	}
	return nil
}

// scaleDown removes k instances from pool p: those not yet ready first,
// the newest first, then ready ones, the newest first, which drain.
func (f *Core) scaleDown(p, k int, now int64) {
	pr := &f.pools[p]
	for _, ready := range []bool{false, true} {
		// From the newest; a terminated instance leaves live, so the walk
		// goes by a snapshot of it.
		for _, i := range slices.Backward(slices.Clone(pr.live)) {
			if k == 0 {
				break
			}
			l := &f.life[i]
			starting := l.state == StatePending || l.state == StateLoading || l.state == StateWarming
			if (ready && l.state != StateReady) || (!ready && !starting) {
				continue
			}
			k--
			pr.size--
			if !ready {
				f.setState(i, StateTerminated, now)
				continue
			}
			f.setState(i, StateDraining, now)
			if pr.cfg.DrainTimeoutUs > 0 && pr.cfg.Drain != DrainImmediate {
				l.drainEnd = now + pr.cfg.DrainTimeoutUs
				f.ev.Push(l.drainEnd, evDrainEnd, payload{inst: int32(i)})
				f.drains++
			}
			f.acts = append(f.acts, Action{Kind: ActDrain, Inst: i, Drain: pr.cfg.Drain})
		}
	}
}

// Idle tells the core that instance i holds no request at now: a draining
// instance terminates (ActTerminated).
func (f *Core) Idle(i int, now int64) []Action {
	f.acts = nil
	if f.life[i].state == StateDraining {
		f.setState(i, StateTerminated, now)
	}
	return f.take()
}

// Hold keeps an admitted request at the router until an instance is ready
// (ActRoute) or it gives up (ActTimedOut, at Config.WaitTimeoutUs or its
// own timeout, whichever comes first). A pool with no instance at all
// evaluates at once: scale from zero.
func (f *Core) Hold(spec *sim.RequestSpec, now int64) {
	h := held{spec: *spec}
	if t := f.cfg.WaitTimeoutUs; t > 0 {
		h.deadline = now + t
	}
	if spec.TimeoutUs > 0 && spec.TimeoutUs <= math.MaxInt64-spec.ArrivalUs {
		if d := max(spec.ArrivalUs+spec.TimeoutUs, now); h.deadline == 0 || d < h.deadline {
			h.deadline = d
		}
	}
	f.held = append(f.held, h)
	f.nHeld++
	f.heldN++
	if h.deadline > 0 {
		f.ev.Push(h.deadline, evHeldTimeout, payload{id: spec.ID})
	}
	for p := range f.pools {
		if pr := &f.pools[p]; pr.size == 0 && pr.cfg.Policy != nil && pr.cfg.Max > 0 && !pr.zeroTick {
			// One evaluation for the requests held at an instant, not one
			// each: a second at the same instant would scale the instance
			// the first started down again.
			pr.zeroTick = true
			f.ev.Push(now, evTick, payload{slot: int32(p), id: 1})
		}
	}
}

// flushHeld hands the held requests back, in order, now that an instance
// is ready.
func (f *Core) flushHeld() {
	for f.heldAt < len(f.held) {
		h := &f.held[f.heldAt]
		f.heldAt++
		if h.gone {
			continue
		}
		h.gone = true
		f.nHeld--
		f.acts = append(f.acts, Action{Kind: ActRoute, Spec: h.spec})
	}
	f.held, f.heldAt = f.held[:0], 0
}

// heldTimeout ends a held request whose deadline has come.
func (f *Core) heldTimeout(id int64, now int64) {
	for k := f.heldAt; k < len(f.held); k++ {
		h := &f.held[k]
		if h.gone || h.spec.ID != id || h.deadline != now {
			continue
		}
		h.gone = true
		f.nHeld--
		f.timedOut++
		f.acts = append(f.acts, Action{Kind: ActTimedOut, Spec: h.spec})
		return
	}
}

// Routed counts a request of promptTokens routed to instance i's pool.
func (f *Core) Routed(i int, promptTokens int64) {
	pr := &f.pools[f.life[i].pool]
	pr.inputs += float64(promptTokens)
	pr.nIn++
}

// Finished counts a request of instance i's pool that left: served
// (completed) with outputTokens and met its SLO or not, or not served
// (dropped, refused, timed out, killed: a miss).
func (f *Core) Finished(i int, served, met bool, outputTokens int64) {
	pr := &f.pools[f.life[i].pool]
	pr.finished++
	if !served {
		return
	}
	pr.outputs += float64(outputTokens)
	pr.nOut++
	if met {
		pr.met++
	}
}

// Sample is the fleet's instances by state now: ready, starting (pending,
// loading or warming) and draining.
func (f *Core) Sample() (ready, starting, draining int64) {
	b := &f.byState
	return b[StateReady], b[StatePending] + b[StateLoading] + b[StateWarming], b[StateDraining]
}
