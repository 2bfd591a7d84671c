package cluster

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// The fleet (Config.Scaling): each pool's instances live through states
// pending (waiting for a GPU: a node being provisioned), loading (image
// pull and weights), warming (compilation and graph capture; not routed
// to), ready (routed to), draining (not routed to; finishing or handing
// back its work) and terminated. An autoscaler per pool (package
// autoscale) is evaluated every interval and recommends a size; the loop
// here clamps it to [Min, Max], actuates it and records it. Nodes hold
// GPUsPerNode GPUs each; a scale-up that finds no free GPUs provisions a
// node (a delay drawn uniformly from the pool's range, from its own
// random stream) unless MaxNodes is reached; an empty node is released
// after NodeIdleUs. Billing is per node: its GPUs are paid from the start
// of its provisioning to its release (a cloud bills a VM from launch,
// idle GPUs included), whatever its instances' states.
//
// A request admitted while no instance is ready waits at the router
// (held), in arrival order, and is routed when one becomes ready; it
// times out after Scaling.WaitTimeoutUs (or its client's own timeout). A
// held request makes a pool with no instance at all (scaled to zero)
// evaluate at once, and any pool at zero grow to one: scale from zero.
// Without a policy a pool keeps its size, and only the accounting runs
// (replica-seconds, GPU-hours, cost).

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

// PoolScaling is one pool's bounds, autoscaler and lifecycle.
type PoolScaling struct {
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
	// none.
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
	return 0, fmt.Errorf("drain policy %q is not one of wait, immediate, redirect", s)
}

// MaxScaledInstances bounds the instances a run with an autoscaler may
// create in all (initial ones included); their ids are zero-padded to its
// width, so that lexicographic order stays index order.
const MaxScaledInstances = 100_000

// ScaledInstanceID is the id of instance index in a run with an
// autoscaler.
func ScaledInstanceID(index int) string { return InstanceID(index, MaxScaledInstances) }

// InstanceState is an instance's place in its lifecycle.
type InstanceState uint8

const (
	StatePending InstanceState = iota
	StateLoading
	StateWarming
	StateReady
	StateDraining
	StateTerminated
	numStates
)

var stateNames = [numStates]string{"pending", "loading", "warming", "ready", "draining", "terminated"}

func (s InstanceState) String() string { return stateNames[s] }

// life is an instance's lifecycle.
type life struct {
	pool     int
	state    InstanceState
	since    int64
	node     int
	stateUs  [numStates]int64 // time spent in each state, up to since
	slow     *sim.SlowStart
	drainEnd int64 // a draining instance's timeout (0: none)
}

// fnode is a node of GPUs.
type fnode struct {
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
	cfg        PoolScaling
	rng        *rand.Rand
	size       int // instances counted by the autoscaler: not draining, not terminated
	nodes      []int
	lastDir    int
	lastDirAt  int64
	ticking    bool
	finished   int64 // requests of the pool that finished since the last evaluation
	met        int64
	inputs     float64 // prompt tokens of the requests routed to the pool
	outputs    float64 // output tokens of those completed
	nIn, nOut  int64
	res        PoolFleet
	peak       int
	lastChange int64 // for the mean replicas: time of the last size change
	sizeUs     float64
	readyUs    float64
}

// held is a request waiting at the router for a ready instance.
type held struct {
	spec     sim.RequestSpec
	since    int64
	deadline int64 // 0: none
	gone     bool
}

// Scaling events, in a heap of their own (they change the instance set,
// so parallel windows stop before them), processed after the cluster's
// other events of the same instant: instance transitions and node
// arrivals first, then drain timeouts, held-request timeouts and node
// releases, then evaluations.
const (
	sevLife        evKind = 1 // inst: its next lifecycle state is due
	sevNodeReady   evKind = 2 // slot: node provisioned
	sevDrainEnd    evKind = 3 // inst: a draining instance's timeout
	sevHeldTimeout evKind = 4 // id: a held request gives up
	sevNodeIdle    evKind = 5 // slot: an empty node's release is due
	sevTick        evKind = 6 // slot: evaluate the pool
)

// fleet is the cluster's scaling state.
type fleet struct {
	cfg      *Scaling
	pools    []poolRun
	life     []life
	nodes    []fnode
	ev       eventHeap
	held     []held
	heldAt   int // first held entry not gone
	nHeld    int64
	heldN    int64 // requests that ever waited
	timedOut int64 // held requests that timed out
	routable []bool
	killed   int64
	redirect int64
	records  []ScaleRecord
	oscWin   int64
	start    int64 // when the accounting started (0)
	anyPol   bool
	// retire lists terminated instances whose engines still hold their
	// caches (sim.Engine.Retire frees them once their last event is past).
	retire []int
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

// maxScaleRecords bounds the records a result keeps (the decision trace
// has them all).
const maxScaleRecords = 100_000

// Fleet is a run's fleet: what it cost, how big it was, how it scaled.
type Fleet struct {
	Pools []PoolFleet `json:"pools"`
	// GPUHours are the nodes' GPUs × their billed time; Cost that times
	// each pool's price per GPU-hour.
	GPUHours float64 `json:"gpu_hours"`
	Cost     float64 `json:"cost"`
	// CostPerMillionTokens is Cost per million output tokens delivered
	// (null without any).
	CostPerMillionTokens *float64 `json:"cost_per_million_output_tokens"`
	// SLOAttainmentPerReplicaHour is the run's SLO attainment over its
	// ready replica-hours (null without SLO targets or replica-hours).
	SLOAttainmentPerReplicaHour *float64 `json:"slo_attainment_per_replica_hour"`
	// WaitedForCapacity counts the requests held at the router for want
	// of a ready instance; TimedOutWaiting those that gave up there.
	WaitedForCapacity int64 `json:"waited_for_capacity"`
	TimedOutWaiting   int64 `json:"timed_out_waiting"`
	// Killed counts the requests a scale-down ended, Redirected those it
	// handed back to the router.
	Killed     int64 `json:"killed_by_scale_down"`
	Redirected int64 `json:"redirected_by_scale_down"`
	// Records are the scale actions in time order (at most 100,000).
	Records []ScaleRecord `json:"scale_records,omitempty"`
}

// PoolFleet is one pool's fleet.
type PoolFleet struct {
	Name   string `json:"name"`
	Policy string `json:"policy"`
	Min    int    `json:"min"`
	Max    int    `json:"max"`
	// ReplicaSeconds is the time its instances spent in each state.
	ReplicaSeconds map[string]float64 `json:"replica_seconds"`
	// MeanReplicas is the time-average of its size (instances not
	// draining or terminated), MeanReady of its ready instances, Peak the
	// largest size.
	MeanReplicas float64 `json:"mean_replicas"`
	MeanReady    float64 `json:"mean_ready"`
	PeakReplicas int     `json:"peak_replicas"`
	Nodes        int     `json:"nodes_provisioned"`
	GPUHours     float64 `json:"gpu_hours"`
	Cost         float64 `json:"cost"`
	ScaleUps     int64   `json:"scale_ups"`
	ScaleDowns   int64   `json:"scale_downs"`
	// Oscillations counts scale actions that reversed the previous one's
	// direction within the oscillation window.
	Oscillations int64 `json:"oscillations"`
	// Created and Terminated count instances started by the autoscaler
	// and instances it ended.
	Created    int64 `json:"instances_created"`
	Terminated int64 `json:"instances_terminated"`
}

// newFleet sets up the fleet for the initial instances: every one ready
// at time 0 on nodes provisioned at time 0.
func (c *Sim) newFleet() error {
	s := c.cfg.Scaling
	f := &fleet{cfg: s, oscWin: s.OscillationWindowUs}
	if f.oscWin == 0 {
		f.oscWin = 300_000_000
	}
	byName := map[string]int{}
	for p, ps := range s.Pools {
		if _, dup := byName[ps.Name]; dup {
			return fmt.Errorf("scaling: pool %q listed twice", ps.Name)
		}
		byName[ps.Name] = p
		switch {
		case ps.GPUsPerReplica < 1 || ps.GPUsPerNode < ps.GPUsPerReplica:
			return fmt.Errorf("scaling: pool %s: %d GPUs per replica on nodes of %d", ps.Name, ps.GPUsPerReplica, ps.GPUsPerNode)
		case ps.Min < 0 || ps.Max < ps.Min:
			return fmt.Errorf("scaling: pool %s: bounds [%d, %d]", ps.Name, ps.Min, ps.Max)
		case ps.Policy != nil && ps.IntervalUs < 1:
			return fmt.Errorf("scaling: pool %s: evaluation interval %d µs", ps.Name, ps.IntervalUs)
		case ps.ProvisionMinUs < 0 || ps.ProvisionMaxUs < ps.ProvisionMinUs || ps.LoadUs < 0 || ps.WarmUs < 0 || ps.NodeIdleUs < 0 || ps.DrainTimeoutUs < 0:
			return fmt.Errorf("scaling: pool %s: a negative or inverted delay", ps.Name)
		case !(ps.PricePerGPUHour >= 0) || math.IsInf(ps.PricePerGPUHour, 0):
			return fmt.Errorf("scaling: pool %s: price %v", ps.Name, ps.PricePerGPUHour)
		}
		pr := poolRun{cfg: ps, rng: s.RNG.Stream("provision/" + ps.Name)}
		pr.res = PoolFleet{Name: ps.Name, Policy: "none", Min: ps.Min, Max: ps.Max, ReplicaSeconds: map[string]float64{}}
		if ps.Policy != nil {
			pr.res.Policy = ps.Policy.Name()
			f.anyPol = true
			if s.NewInstance == nil {
				return fmt.Errorf("scaling: pool %s has an autoscaler but no NewInstance", ps.Name)
			}
		}
		f.pools = append(f.pools, pr)
	}
	for i, in := range c.cfg.Instances {
		p, ok := byName[in.Pool]
		if !ok {
			return fmt.Errorf("instance %s: pool %q has no scaling entry", in.ID, in.Pool)
		}
		pr := &f.pools[p]
		l := life{pool: p, state: StateReady, node: c.place(f, p, 0, true)}
		if l.node < 0 {
			return fmt.Errorf("scaling: pool %s: instance %s finds no GPU: %d nodes of %d GPUs hold fewer instances of %d GPUs than the pool starts with", pr.cfg.Name, in.ID, pr.cfg.MaxNodes, pr.cfg.GPUsPerNode, pr.cfg.GPUsPerReplica)
		}
		f.life = append(f.life, l)
		pr.size++
		_ = i
	}
	for p := range f.pools {
		pr := &f.pools[p]
		if pr.size < pr.cfg.Min || pr.size > pr.cfg.Max {
			return fmt.Errorf("scaling: pool %s starts with %d instances, outside [%d, %d]", pr.cfg.Name, pr.size, pr.cfg.Min, pr.cfg.Max)
		}
		pr.peak = pr.size
		if pr.cfg.Policy != nil {
			f.ev.push(cevent{at: pr.cfg.IntervalUs, kind: sevTick, slot: int32(p)})
			pr.ticking = true
		}
	}
	f.routable = make([]bool, len(c.cfg.Instances))
	for i := range f.routable {
		f.routable[i] = true
	}
	c.fl = f
	if f.anyPol {
		c.view.Routable = f.routable
	}
	return nil
}

// place finds GPUs for one instance of pool p at now: a node with room
// (ready ones first, then those being provisioned, lowest index first),
// else a new node, provisioned at once when initial (time 0) or after the
// pool's delay; -1 when MaxNodes is reached.
func (c *Sim) place(f *fleet, p int, now int64, initial bool) int {
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
		f.nodes = append(f.nodes, fnode{pool: p, readyAt: now + delay, start: now, end: -1, emptySince: -1, imageAt: image})
		pr.nodes = append(pr.nodes, best)
		pr.res.Nodes++
		if delay > 0 {
			f.ev.push(cevent{at: now + delay, kind: sevNodeReady, slot: int32(best)})
		}
	}
	nd := &f.nodes[best]
	nd.used += need
	nd.emptySince = -1
	return best
}

// scalingNext is the time of the next scaling event, if any.
func (f *fleet) next() (int64, bool) {
	if f == nil || f.ev.len() == 0 {
		return 0, false
	}
	return f.ev.peek().at, true
}

// handleScaling processes one scaling event at the cluster's clock.
func (c *Sim) handleScaling(ev *cevent) {
	f := c.fl
	switch ev.kind {
	case sevLife:
		c.advanceLife(int(ev.inst))
	case sevNodeReady:
		nd := &f.nodes[ev.slot]
		for i := range f.life {
			if l := &f.life[i]; l.node == int(ev.slot) && l.state == StatePending {
				c.setState(i, StateLoading)
			}
		}
		if nd.used == 0 {
			c.nodeEmpty(int(ev.slot))
		}
	case sevDrainEnd:
		i := int(ev.inst)
		if l := &f.life[i]; l.state == StateDraining && l.drainEnd == c.now {
			c.killAll(i)
			c.maybeTerminate(i)
		}
	case sevHeldTimeout:
		c.heldTimeout(ev.id)
	case sevNodeIdle:
		nd := &f.nodes[ev.slot]
		if nd.end < 0 && nd.used == 0 && nd.emptySince >= 0 && c.now-nd.emptySince >= f.pools[nd.pool].cfg.NodeIdleUs {
			nd.end = c.now
		}
	case sevTick:
		p := int(ev.slot)
		c.retireTerminated()
		c.evaluate(p)
		if pr := &f.pools[p]; ev.id == 0 { // a periodic tick (not an event trigger) schedules the next
			f.ev.push(cevent{at: c.now + pr.cfg.IntervalUs, kind: sevTick, slot: int32(p)})
		}
	}
}

// setState moves instance i to state s now, accounting the time spent.
func (c *Sim) setState(i int, s InstanceState) {
	f := c.fl
	l := &f.life[i]
	l.stateUs[l.state] += c.now - l.since
	old := l.state
	l.state, l.since = s, c.now
	pr := &f.pools[l.pool]
	if old == StateReady && s != StateReady {
		pr.readyUs += 0 // accounted by integrate
	}
	f.routable[i] = s == StateReady
	switch s {
	case StateLoading:
		at := c.now
		if l.node >= 0 {
			nd := &f.nodes[l.node]
			if nd.imageAt < 0 { // the first instance here pulls the image, for all
				nd.imageAt = c.now + pr.cfg.ImagePullUs
			}
			at = max(at, nd.imageAt)
		}
		f.ev.push(cevent{at: at + pr.cfg.LoadUs, kind: sevLife, inst: int32(i)})
	case StateWarming:
		f.ev.push(cevent{at: c.now + pr.cfg.WarmUs, kind: sevLife, inst: int32(i)})
	case StateReady:
		if l.slow != nil {
			l.slow.Start(c.now)
		}
		c.flushHeld()
	case StateTerminated:
		pr.res.Terminated++
		f.retire = append(f.retire, i)
		if c.precise != nil {
			c.kevBuf = c.eng[i].TakeKVBlockEvents(c.kevBuf[:0]) // none may reach the index after Forget
		}
		if fg, ok := c.router.(route.Forgetter); ok {
			fg.Forget(i)
		}
		if l.node >= 0 {
			nd := &f.nodes[l.node]
			nd.used -= pr.cfg.GPUsPerReplica
			if nd.used == 0 && nd.readyAt <= c.now {
				c.nodeEmpty(l.node)
			}
		}
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
	}
	f.retire = kept
}

// advanceLife moves instance i from loading to warming, or warming to
// ready, when its time has come.
func (c *Sim) advanceLife(i int) {
	switch c.fl.life[i].state {
	case StateLoading:
		c.setState(i, StateWarming)
	case StateWarming:
		c.setState(i, StateReady)
	}
}

func (c *Sim) nodeEmpty(n int) {
	f := c.fl
	nd := &f.nodes[n]
	nd.emptySince = c.now
	f.ev.push(cevent{at: c.now + f.pools[nd.pool].cfg.NodeIdleUs, kind: sevNodeIdle, slot: int32(n)})
}

// signals gathers pool p's signals.
func (c *Sim) signals(p int) autoscale.Signals {
	f := c.fl
	pr := &f.pools[p]
	s := autoscale.Signals{NowUs: c.now, Replicas: pr.size, Min: pr.cfg.Min, Max: pr.cfg.Max, Waiting: f.nHeld}
	var kv, q, run, inf, used float64
	for i := range f.life {
		l := &f.life[i]
		if l.pool != p || l.state != StateReady {
			continue
		}
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
	if pr.nIn > 0 {
		s.MeanInput = pr.inputs / float64(pr.nIn)
	}
	if pr.nOut > 0 {
		s.MeanOutput = pr.outputs / float64(pr.nOut)
	}
	s.QueuedTokens = (q + float64(f.nHeld)) * s.MeanInput
	if pr.finished > 0 {
		s.SLOAttainment, s.SLOFinished = float64(pr.met)/float64(pr.finished), pr.finished
	}
	return s
}

// evaluate asks pool p's policy for its size and actuates the answer.
func (c *Sim) evaluate(p int) {
	f := c.fl
	pr := &f.pools[p]
	pol := pr.cfg.Policy
	if pol == nil {
		return
	}
	s := c.signals(p)
	d := pol.Evaluate(&s)
	pr.finished, pr.met = 0, 0
	want := d.Desired
	if f.nHeld > 0 && pr.size == 0 && want < 1 {
		want, d.Reason = 1, fmt.Sprintf("%d requests wait at the router: scale from zero", f.nHeld)
	}
	want = max(pr.cfg.Min, min(want, pr.cfg.Max))
	from := pr.size
	if want == from {
		return
	}
	if want > from {
		c.scaleUp(p, want-from)
	} else {
		c.scaleDown(p, from-want)
	}
	to := pr.size
	if to == from {
		return
	}
	pol.Applied(c.now, from, to)
	dir := 1
	if to < from {
		dir = -1
		pr.res.ScaleDowns++
	} else {
		pr.res.ScaleUps++
	}
	if pr.lastDir == -dir && c.now-pr.lastDirAt < f.oscWin {
		pr.res.Oscillations++
	}
	pr.lastDir, pr.lastDirAt = dir, c.now
	r := ScaleRecord{AtUs: c.now, Pool: pr.cfg.Name, Policy: pol.Name(), From: from, To: to, Reason: d.Reason, KVUtilization: s.KVUtilization,
		QueueDepth: s.QueueDepth, Running: s.Running, InFlight: s.InFlight, Waiting: s.Waiting, SLOAttainment: s.SLOAttainment, Ready: s.Ready}
	if len(f.records) < maxScaleRecords {
		f.records = append(f.records, r)
	}
	if c.dec != nil {
		c.dec.scale(&r)
	}
	if c.cfg.Decisions != nil && c.dec == nil {
		_ = 0
	}
	if !(pr.size >= pr.cfg.Min && pr.size <= pr.cfg.Max) {
		c.fail("CL-6", "pool %s has %d replicas, outside [%d, %d]", pr.cfg.Name, pr.size, pr.cfg.Min, pr.cfg.Max)
	}
}

// scaleUp adds up to k instances to pool p: each on a GPU found or
// provisioned, pending until its node is ready, then loading.
func (c *Sim) scaleUp(p, k int) {
	f := c.fl
	pr := &f.pools[p]
	for range k {
		i := len(c.eng)
		if i >= MaxScaledInstances {
			c.err = fmt.Errorf("pool %s: the autoscaler created more than %d instances in all; lengthen its evaluation interval or stabilization", pr.cfg.Name, MaxScaledInstances)
			return
		}
		node := c.place(f, p, c.now, false)
		if node < 0 {
			return // max_nodes reached: the scale-up stops here
		}
		cfg, err := f.cfg.NewInstance(p, i)
		if err != nil {
			c.err = fmt.Errorf("pool %s: instance %d: %w", pr.cfg.Name, i, err)
			return
		}
		l := life{pool: p, state: StatePending, since: c.now, node: node}
		if pr.cfg.WarmupFactor > 1 && pr.cfg.WarmupUs > 0 {
			l.slow = &sim.SlowStart{Inner: cfg.Latency, Factor: pr.cfg.WarmupFactor, DurationUs: pr.cfg.WarmupUs}
			cfg.Latency = l.slow
		}
		if err := c.addInstance(ScaledInstanceID(i), pr.cfg.Name, cfg); err != nil {
			c.err = err
			return
		}
		f.life = append(f.life, l)
		f.routable = append(f.routable, false)
		c.view.Routable = f.routable
		pr.size++
		pr.res.Created++
		pr.peak = max(pr.peak, pr.size)
		if f.nodes[node].readyAt <= c.now {
			c.setState(i, StateLoading)
		}
	}
}

// scaleDown removes k instances from pool p: those not yet ready first,
// the newest first, then ready ones, the newest first, which drain.
func (c *Sim) scaleDown(p, k int) {
	f := c.fl
	pr := &f.pools[p]
	for _, pass := range []func(InstanceState) bool{
		func(s InstanceState) bool { return s == StatePending || s == StateLoading || s == StateWarming },
		func(s InstanceState) bool { return s == StateReady },
	} {
		for i := len(f.life) - 1; i >= 0 && k > 0; i-- {
			l := &f.life[i]
			if l.pool != p || !pass(l.state) {
				continue
			}
			k--
			pr.size--
			if l.state != StateReady {
				c.setState(i, StateTerminated)
				continue
			}
			c.setState(i, StateDraining)
			c.drain(i)
		}
	}
}

// drain starts instance i's drain under its pool's policy.
func (c *Sim) drain(i int) {
	f := c.fl
	l := &f.life[i]
	pc := &f.pools[l.pool].cfg
	switch pc.Drain {
	case DrainImmediate:
		c.killAll(i)
	case DrainRedirect:
		c.redirectAll(i)
	}
	if pc.DrainTimeoutUs > 0 && pc.Drain != DrainImmediate {
		l.drainEnd = c.now + pc.DrainTimeoutUs
		f.ev.push(cevent{at: l.drainEnd, kind: sevDrainEnd, inst: int32(i)})
	}
	c.maybeTerminate(i)
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
		if c.armed != nil {
			delete(c.armed, id) // its deadline is re-armed where it goes
		}
		c.redirected[id] = true
		c.cur = spec
		c.route(&c.cur)
	}
	at, more := e.NextEventUs()
	c.inst.set(i, at, more)
}

// maybeTerminate ends a draining instance that holds no request.
func (c *Sim) maybeTerminate(i int) {
	if l := &c.fl.life[i]; l.state == StateDraining && c.inflight[i] == 0 {
		c.setState(i, StateTerminated)
	}
}

// hold keeps an admitted request at the router until an instance is ready.
func (c *Sim) hold(spec *sim.RequestSpec) {
	f := c.fl
	h := held{spec: *spec, since: c.now}
	if t := f.cfg.WaitTimeoutUs; t > 0 {
		h.deadline = c.now + t
	}
	if spec.TimeoutUs > 0 && spec.TimeoutUs <= math.MaxInt64-spec.ArrivalUs {
		if d := max(spec.ArrivalUs+spec.TimeoutUs, c.now); h.deadline == 0 || d < h.deadline {
			h.deadline = d
		}
	}
	f.held = append(f.held, h)
	f.nHeld++
	f.heldN++
	if h.deadline > 0 {
		f.ev.push(cevent{at: h.deadline, kind: sevHeldTimeout, id: spec.ID})
	}
	// Scale from zero: a pool with no instance at all evaluates now.
	for p := range f.pools {
		if pr := &f.pools[p]; pr.size == 0 && pr.cfg.Policy != nil && pr.cfg.Max > 0 {
			f.ev.push(cevent{at: c.now, kind: sevTick, slot: int32(p), id: 1})
		}
	}
}

// flushHeld routes the held requests, in order, now that an instance is
// ready.
func (c *Sim) flushHeld() {
	f := c.fl
	for f.heldAt < len(f.held) {
		h := &f.held[f.heldAt]
		f.heldAt++
		if h.gone {
			continue
		}
		h.gone = true
		f.nHeld--
		c.cur = h.spec
		c.route(&c.cur)
	}
	f.held, f.heldAt = f.held[:0], 0
}

// heldTimeout ends a held request whose deadline has come.
func (c *Sim) heldTimeout(id int64) {
	f := c.fl
	for k := f.heldAt; k < len(f.held); k++ {
		h := &f.held[k]
		if h.gone || h.spec.ID != id || h.deadline != c.now {
			continue
		}
		h.gone = true
		f.nHeld--
		f.timedOut++
		c.agg.timedOutHeld(&h.spec, c.now)
		if w := c.win; w != nil {
			w.cur.TimedOut++
		}
		if c.adObs != nil {
			c.leftAdmission(id)
		}
		if c.obs != nil {
			c.obs.RequestDone(id, c.now, TimedOut)
		}
		return
	}
}

// poolFinished counts a request of pool p that finished, met or not.
func (c *Sim) poolFinished(i int, d *sim.Completion) {
	if c.fl == nil {
		return
	}
	pr := &c.fl.pools[c.fl.life[i].pool]
	pr.finished++
	if d.Dropped || d.TooLong || d.TimedOut || d.Killed {
		return
	}
	pr.outputs += float64(d.OutputTokens)
	pr.nOut++
	ttft, e2e := d.FirstTokenUs-d.ArrivalUs, d.DepartedUs-d.ArrivalUs
	var tpot int64
	if d.OutputTokens > 1 {
		tpot = (d.FinishedUs - d.FirstTokenUs) / (d.OutputTokens - 1)
	}
	if c.cfg.SLOTargets[d.SLOClass].meets(ttft, tpot, e2e) {
		pr.met++
	}
}

// poolRouted counts a request routed to instance i's pool.
func (c *Sim) poolRouted(i int, spec *sim.RequestSpec) {
	if c.fl == nil {
		return
	}
	pr := &c.fl.pools[c.fl.life[i].pool]
	pr.inputs += float64(spec.PromptTokens)
	pr.nIn++
}

// fleetResult closes the accounting at end and reports the fleet.
func (c *Sim) fleetResult(end int64, res *Result) *Fleet {
	f := c.fl
	out := &Fleet{WaitedForCapacity: f.heldN, TimedOutWaiting: f.timedOut, Killed: f.killed, Redirected: f.redirect, Records: f.records}
	dur := float64(end) * 1e-6
	var readyHours float64
	for p := range f.pools {
		pr := &f.pools[p]
		r := &pr.res
		var sizeUs, readyUs float64
		for i := range f.life {
			l := &f.life[i]
			if l.pool != p {
				continue
			}
			spent := l.stateUs
			if l.state != StateTerminated && end > l.since {
				spent[l.state] += end - l.since
			}
			for s := StatePending; s < StateTerminated; s++ {
				if spent[s] > 0 {
					r.ReplicaSeconds[s.String()] += float64(spent[s]) * 1e-6
				}
			}
			sizeUs += float64(spent[StatePending] + spent[StateLoading] + spent[StateWarming] + spent[StateReady])
			readyUs += float64(spent[StateReady])
		}
		if dur > 0 {
			r.MeanReplicas = sizeUs * 1e-6 / dur
			r.MeanReady = readyUs * 1e-6 / dur
		}
		readyHours += readyUs * 1e-6 / 3600
		r.PeakReplicas = pr.peak
		for _, n := range pr.nodes {
			nd := &f.nodes[n]
			stop := nd.end
			if stop < 0 || stop > end {
				stop = end
			}
			if stop > nd.start {
				r.GPUHours += float64(pr.cfg.GPUsPerNode) * float64(stop-nd.start) * 1e-6 / 3600
			}
		}
		r.Cost = r.GPUHours * pr.cfg.PricePerGPUHour
		out.GPUHours += r.GPUHours
		out.Cost += r.Cost
		out.Pools = append(out.Pools, *r)
	}
	if res.OutputTokens > 0 {
		v := out.Cost / (float64(res.OutputTokens) / 1e6)
		out.CostPerMillionTokens = &v
	}
	if res.SLO != nil && readyHours > 0 {
		v := res.SLO.Attainment / readyHours
		out.SLOAttainmentPerReplicaHour = &v
	}
	return out
}

// fleetSample is the fleet's instances by state, for a time window's end.
func (c *Sim) fleetSample() (ready, starting, draining int64) {
	for i := range c.fl.life {
		switch c.fl.life[i].state {
		case StateReady:
			ready++
		case StatePending, StateLoading, StateWarming:
			starting++
		case StateDraining:
			draining++
		}
	}
	return
}

// fleetBilled is the GPU-hours and cost the nodes billed up to at (no
// later than the cluster's clock: a node's release is known by then).
func (c *Sim) fleetBilled(at int64) (gpuHours, cost float64) {
	f := c.fl
	for p := range f.pools {
		pr := &f.pools[p]
		for _, n := range pr.nodes {
			nd := &f.nodes[n]
			stop := nd.end
			if stop < 0 || stop > at {
				stop = at
			}
			if stop > nd.start {
				h := float64(pr.cfg.GPUsPerNode) * float64(stop-nd.start) * 1e-6 / 3600
				gpuHours += h
				cost += h * pr.cfg.PricePerGPUHour
			}
		}
	}
	return
}
