package cluster

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/kvxfer"
	"github.com/blis-sim/blis/sim"
)

// Prefill/decode disaggregation (Config.Disagg; docs/disaggregation.md).
// The router first picks a request's decode instance among the instances
// that decode (role decode or both), as llm-d's scheduler runs its decode
// profile first. The decider (cluster/disagg) then looks at what that
// instance caches: a request served whole goes there as usual; a
// disaggregated one goes first to a prefill instance the prefill router
// picks (role prefill or both), as a prefill handoff (sim.HandoffPrefill:
// one token, its KV kept). When the prefill instance's response departs,
// the request reaches its decode instance as a decode handoff
// (sim.HandoffDecode); when that instance's scheduler admits it, it takes
// its blocks and reports a pull, and the KV moves over the network
// (package kvxfer: the prefill instance's egress and the decode
// instance's ingress, NVLink within a node, RDMA NICs between nodes).
// When the last byte and the latency are through, the decode instance has
// the KV and the prefill instance frees its copy. A prefill instance whose
// KV is not pulled within the abort timeout frees it then (vLLM's
// VLLM_NIXL_ABORT_REQUEST_TIMEOUT).
//
// The router's in-flight count of the decode instance holds the request
// from the decision to its departure; the prefill instance's from the
// decision to its response. Each request is counted once in the
// cluster's routed, completed and output tokens (the prefill's token is
// the decode's first again), and its prompt once in the prefill
// throughput (the decode side's pulled tokens are not counted again).

// Role is an instance's part under disaggregation.
type Role uint8

const (
	RoleBoth    Role = iota // prefills and decodes
	RolePrefill             // only prefills for others
	RoleDecode              // only decodes (prefilled elsewhere, or locally when the decider says so)
)

var roleNames = [...]string{"both", "prefill", "decode"}

func (r Role) String() string { return roleNames[r] }

// MarshalText writes r's name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("role %q is not one of both, prefill, decode", clip.String(s))
}

// Disagg configures disaggregation.
type Disagg struct {
	// Pools gives every pool's role and transfer physics, by name; every
	// instance's Pool must be one of them.
	Pools []PDPool
	// Decider decides each request's split (nil: always).
	Decider disagg.Decider
	// Prefill routes among the instances that prefill (the decode side is
	// Config.Routing); nil: least-loaded.
	Prefill route.Policy
	// LatencyUs is a transfer's fixed latency after its last byte;
	// AbortTimeoutUs frees a prefill's kept KV that no decode instance
	// pulled by then (0: never).
	LatencyUs, AbortTimeoutUs int64
}

// PDPool is a pool's role and the physics of the transfers it takes part
// in: the KV bytes of one token (all layers, all ranks), and an instance's
// bandwidth, each direction, to other nodes (its RDMA NICs) and within its
// node (NVLink), in bytes per second.
type PDPool struct {
	Name             string  `json:"pool"`
	Role             Role    `json:"role"`
	KVBytesPerToken  float64 `json:"kv_bytes_per_token"`
	NetBytesPerSec   float64 `json:"net_bytes_per_s"`
	LocalBytesPerSec float64 `json:"local_bytes_per_s"`
}

// PDResult is a run's disaggregation.
type PDResult struct {
	// Disaggregated requests were prefilled elsewhere; Local ones were
	// served whole on their decode instance, by the decider's choice.
	Disaggregated int64 `json:"disaggregated"`
	Local         int64 `json:"served_local"`
	// Transfers moved Bytes in all; TransferMs is their durations, from
	// the pull's start to the KV's arrival. MaxConcurrent is the most
	// transfers in progress at once.
	Transfers     int64            `json:"transfers"`
	Bytes         float64          `json:"bytes_moved"`
	TransferMs    sim.Distribution `json:"transfer_ms"`
	MaxConcurrent int              `json:"max_concurrent_transfers"`
	// PullsWaited counts the decode handoffs that waited in their decode
	// instance's queue for KV blocks before pulling (backpressure); the
	// pulls' waits are in PullWaitMs.
	PullsWaited int64            `json:"pulls_waited_for_blocks"`
	PullWaitMs  sim.Distribution `json:"pull_wait_ms"`
	// AbortTimeouts counts prefill KV freed by the abort timeout, unpulled.
	AbortTimeouts int64 `json:"kv_abort_timeouts"`
	// KVLost counts the decode instances' pulls that found their copy
	// freed by then: the decode instance computed the prompt itself, as
	// vLLM's default kv_load_failure_policy (recompute) does; omitted when
	// 0.
	KVLost int64 `json:"kv_lost_recomputed,omitempty"`
	// TransfersClamped counts the transfers whose flow would have lasted
	// longer than sim.MaxDurationUs (a link of almost no bandwidth) and
	// ended then (kvxfer); omitted when 0.
	TransfersClamped int64 `json:"transfers_clamped,omitempty"`
	// Roles is each role's instances and work, in role order (both,
	// prefill, decode), the roles the deployment has.
	Roles []PDRole `json:"roles"`
}

// PDRole is one role's share of the run: its instances (every one the
// run had), the prompt tokens they computed (pulled ones not counted) and
// the output tokens they produced per second of the run (a prefill
// instance's one token per request included), and their mean busy
// fraction (the share of its life an instance spent in steps).
type PDRole struct {
	Role             Role    `json:"role"`
	Instances        int     `json:"instances"`
	PromptTokensPerS float64 `json:"prompt_tokens_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	BusyFraction     float64 `json:"busy_fraction"`
}

// pdReq is a disaggregated request on its way.
type pdReq struct {
	spec      sim.RequestSpec // the client's
	p, d      int
	injectedD int64 // when it reached its decode instance (-1 before)
	pullAt    int64 // its transfer's start (-1 before)
	bytes     float64
	released  bool // the prefill's KV is freed
	gone      bool // it left (completed, timed out) or was given up
}

type pdState struct {
	cfg      *Disagg
	pool     []int // by instance: its Disagg pool
	byName   map[string]int
	canP     []bool // by instance: its role prefills / decodes
	canD     []bool
	mask     []bool
	saved    []bool
	net      *kvxfer.Network
	ports    [][4]kvxfer.Port // by instance: net out, net in, local out, local in
	reqs     map[int64]*pdReq // looked up by id, never iterated
	timers   eventHeap        // abort timeouts (id)
	hashes   []uint64
	res      PDResult
	xferH    sim.Histogram
	waitH    sim.Histogram
	handoffs int64 // requests sent to a decode instance after their prefill (routedTo counts them twice)
	kept     int64 // prefill copies handed off and not yet released
	roles    []PDRole
}

func (c *Sim) newPD() error {
	cfg := c.cfg.Disagg
	pd := &pdState{cfg: cfg, byName: map[string]int{}, reqs: map[int64]*pdReq{}}
	net, err := kvxfer.New(cfg.LatencyUs)
	if err != nil {
		return err
	}
	pd.net = net
	if cfg.LatencyUs < 0 || cfg.AbortTimeoutUs < 0 {
		return fmt.Errorf("disaggregation: latency and abort timeout must be >= 0 µs")
	}
	if pd.cfg.Decider == nil {
		pd.cfg.Decider = disagg.Always{}
	}
	if pd.cfg.Prefill == nil {
		pd.cfg.Prefill = route.LeastLoaded{}
	}
	for k, p := range cfg.Pools {
		if _, dup := pd.byName[p.Name]; dup {
			return fmt.Errorf("disaggregation: pool %q listed twice", p.Name)
		}
		if !(p.KVBytesPerToken > 0) || !(p.NetBytesPerSec > 0) || !(p.LocalBytesPerSec > 0) {
			return fmt.Errorf("disaggregation: pool %q: KV bytes per token and bandwidths must be > 0", p.Name)
		}
		pd.byName[p.Name] = k
	}
	c.pd = pd
	for i := range c.eng {
		if err := c.pdInstance(i); err != nil {
			return err
		}
	}
	// Some instance must decode, now or once an autoscaler starts one:
	// otherwise every request would wait for capacity that never comes.
	if !slices.Contains(pd.canD, true) {
		grows := false
		if s := c.cfg.Scaling; s != nil {
			for _, ps := range s.Pools {
				if k, ok := pd.byName[ps.Name]; ok && cfg.Pools[k].Role != RolePrefill && ps.Policy != nil && ps.Max > 0 {
					grows = true
				}
			}
		}
		if !grows {
			return fmt.Errorf("disaggregation: no instance decodes, and no autoscaler can start one: every pool's role is prefill, or the pools that decode have no instance")
		}
	}
	return nil
}

// pdInstance sets instance i's role and ports (at New and when the
// autoscaler adds one).
func (c *Sim) pdInstance(i int) error {
	pd := c.pd
	k, ok := pd.byName[c.pools[i]]
	if !ok {
		return fmt.Errorf("disaggregation: instance %s's pool %q has no role", c.ids[i], c.pools[i])
	}
	p := &pd.cfg.Pools[k]
	var ports [4]kvxfer.Port
	for j, bw := range [4]float64{p.NetBytesPerSec, p.NetBytesPerSec, p.LocalBytesPerSec, p.LocalBytesPerSec} {
		port, err := pd.net.AddPort(bw)
		if err != nil {
			return err
		}
		ports[j] = port
	}
	pd.pool = append(pd.pool, k)
	pd.ports = append(pd.ports, ports)
	pd.canP = append(pd.canP, p.Role != RoleDecode)
	pd.canD = append(pd.canD, p.Role != RolePrefill)
	pd.mask = append(pd.mask, false)
	return nil
}

// pdMask restricts the view to the instances that can play a role (and
// that the fleet routes to), until pdUnmask.
func (c *Sim) pdMask(can []bool) bool {
	pd := c.pd
	pd.saved = c.view.Routable
	any := false
	for _, j := range c.view.Indexes() { // the others are terminated: false
		i := int(j)
		pd.mask[i] = can[i] && c.view.OK(i)
		any = any || pd.mask[i]
	}
	c.view.Routable = pd.mask
	return any
}

func (c *Sim) pdUnmask() { c.view.Routable = c.pd.saved }

// pdSplit is the decision for a request whose decode instance d the
// router chose: true when it is disaggregated (its prefill sent to a
// prefill instance), false when d serves it whole.
func (c *Sim) pdSplit(spec *sim.RequestSpec, d int) bool {
	pd := c.pd
	var cached int64
	if shared := sim.SharedBlocks(spec, c.bs); shared > 0 {
		pd.hashes = sim.AppendBlockHashes(pd.hashes[:0], spec, c.bs, shared)
		cached = min(spec.PromptTokens, c.eng[d].CachedPrefixBlocks(pd.hashes)*c.eng[d].BlockSize())
	}
	nonCached := spec.PromptTokens - cached
	split := pd.cfg.Decider.Disaggregate(spec.PromptTokens, nonCached)
	p := -1
	if split {
		if c.pdMask(pd.canP) {
			p = pd.cfg.Prefill.Route(&c.req, &c.view)
		}
		// Unmasked whether or not an instance could prefill (a mask left
		// in place once hid every instance from the next decision).
		c.pdUnmask()
		if p >= len(c.eng) || (p >= 0 && !c.view.OK(p)) {
			c.err = fmt.Errorf("prefill routing policy %s chose instance %d of %d, or one that takes no prefill", pd.cfg.Prefill.Name(), p, len(c.eng))
			return true
		}
	}
	if c.dec != nil {
		c.dec.disaggregation(c.now, spec, pd.cfg.Decider.Name(), c.ids[d], p, c.ids, nonCached)
	}
	if p < 0 || p == d {
		pd.res.Local++
		return false
	}
	pd.res.Disaggregated++
	pd.cfg.Prefill.Routed(&c.req, p)
	c.poolRouted(p, spec)
	c.inflight[p]++
	c.inst.touch(p)
	c.agg.routed(p)
	sub := *spec
	sub.OutputTokens, sub.Handoff, sub.TimeoutUs = 1, sim.HandoffPrefill, 0
	if err := c.eng[p].Inject(sub, c.now+c.cfg.RoutingLatencyUs); err != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[p], err)
		return true
	}
	pd.reqs[spec.ID] = &pdReq{spec: *spec, p: p, d: d, injectedD: -1, pullAt: -1}
	c.arm(spec, d)
	at, ok := c.eng[p].NextEventUs()
	c.inst.set(p, at, ok)
	return true
}

// pdCompleted handles a completion of a disaggregated request; true when
// it is not the request's end (its prefill handed off), false when the
// cluster counts it as usual (its decode instance's completion, or its
// prefill's when its client gave up there).
func (c *Sim) pdCompleted(i int, d *sim.Completion) bool {
	pd := c.pd
	r, ok := pd.reqs[d.ID]
	if !ok {
		return false
	}
	if d.HandedOff {
		// The prefill's response departs: the prefill instance's in-flight
		// count drops then, and the request reaches its decode instance.
		c.events.push(cevent{at: d.DepartedUs, kind: evHandoff, inst: int32(i), id: d.ID})
		dec := r.spec
		dec.Handoff = sim.HandoffDecode
		c.agg.routed(r.d)
		pd.handoffs++
		pd.kept++
		if err := c.eng[r.d].Inject(dec, d.DepartedUs); err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[r.d], err)
			return true
		}
		r.injectedD = d.DepartedUs
		if t := pd.cfg.AbortTimeoutUs; t > 0 {
			pd.timers.push(cevent{at: satAdd(d.DepartedUs, t), id: d.ID})
		}
		at, ok := c.eng[r.d].NextEventUs()
		c.inst.set(r.d, at, ok)
		return true
	}
	if i == r.p && r.injectedD < 0 {
		// Its client gave up (or a drain killed it) during its prefill: it
		// ends here, and never reaches its decode instance, whose in-flight
		// count drops now.
		c.inflight[r.d]--
		c.inst.touch(r.d)
	}
	r.gone = true
	if !r.released && r.pullAt < 0 && r.injectedD >= 0 {
		switch {
		case d.TimedOut && d.EnqueuedUs > 0:
			// Its client gave up after its decode part reached the decode
			// instance's engine core (queued: a decode handoff is queued
			// after its prefill's response, never at 0), before its pull:
			// vLLM's NIXL connector (request_finished with
			// do_remote_prefill still set) sends the prefill instance an
			// empty read's notification, which frees the copy; the
			// notification's latency, the transfer's fixed one, is not
			// modelled. A part refused or aborted in the decode
			// instance's API stage never reached the connector, and one
			// killed by a drain goes with its instance: their copies wait
			// for the abort timeout.
			c.pdRelease(r, false)
		case pd.cfg.AbortTimeoutUs == 0:
			// Its decode side ended before pulling, and no abort timeout
			// will ever free the prefill's copy: it is freed now.
			c.pdRelease(r, true)
		}
	}
	if r.released || r.injectedD < 0 {
		delete(pd.reqs, d.ID)
	}
	return false
}

// pdRedirected is the client's request of spec, a part of a
// disaggregated request that a draining instance handed back before it
// started (its prefill, or its decode before the pull): the split is given
// up (the decode instance's in-flight count for a prefill handed back; the
// prefill's kept KV for a decode), and the request goes back to the router
// whole, to be split again or not, as a client's retry would.
func (c *Sim) pdRedirected(spec sim.RequestSpec) sim.RequestSpec {
	r, ok := c.pd.reqs[spec.ID]
	if !ok || spec.Handoff == sim.HandoffNone {
		return spec
	}
	if spec.Handoff == sim.HandoffPrefill {
		c.inflight[r.d]--
		c.inst.touch(r.d)
	} else {
		c.pdRelease(r, false)
	}
	delete(c.pd.reqs, spec.ID)
	return r.spec
}

// pdInjected is when disaggregated request id reached instance i, for the
// causality check (CL-3), and whether it is one.
func (c *Sim) pdInjected(i int, id int64) (int64, bool) {
	if c.pd == nil {
		return 0, false
	}
	r, ok := c.pd.reqs[id]
	if !ok || i != r.d || r.injectedD < 0 {
		return 0, false
	}
	return r.injectedD, true
}

// pdPulls starts the transfers of the pulls instance i's last Advance
// started.
func (c *Sim) pdPulls(i int) {
	for _, pull := range c.eng[i].Pulls() {
		c.pdPull(i, pull, c.now)
		if c.err != nil {
			return
		}
	}
}

// pdPull starts the transfer of a pull instance i started at time at.
func (c *Sim) pdPull(i int, pull sim.Pull, at int64) {
	pd := c.pd
	r, ok := pd.reqs[pull.ID]
	if !ok || r.d != i {
		c.fail("PD-1", "instance %s pulls request %d, which no prefill instance handed it", c.ids[i], pull.ID)
		return
	}
	if r.released {
		// Its copy expired before the pull: the decode instance's load
		// fails, and it computes the prompt itself (sim.Engine.KVLost).
		pd.res.KVLost++
		if err := c.eng[i].KVLost(pull.ID, at); err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[i], err)
		}
		return
	}
	p := &pd.cfg.Pools[pd.pool[r.p]]
	bytes := float64(pull.Tokens) * p.KVBytesPerToken
	out, in := pd.ports[r.p][0], pd.ports[i][1]
	if c.sameNode(r.p, i) {
		out, in = pd.ports[r.p][2], pd.ports[i][3]
	}
	if err := pd.net.Start(at, pull.ID, bytes, out, in); err != nil {
		c.err = err
		return
	}
	r.pullAt, r.bytes = at, bytes
	pd.res.Transfers++
	pd.res.Bytes += bytes
	pd.res.MaxConcurrent = max(pd.res.MaxConcurrent, pd.net.Active())
	if wait := at - r.injectedD; wait > 0 {
		pd.waitH.Add(wait)
	}
	if pull.Waited {
		pd.res.PullsWaited++
		c.an.backpressure(c, i, pull.ID, at, at-r.injectedD)
	}
}

// sameNode says whether instances a and b share a node (NVLink between
// them): only the fleet places instances on nodes.
func (c *Sim) sameNode(a, b int) bool {
	return c.fl != nil && c.fl.SameNode(a, b)
}

// pdNext is the time of the next transfer's end or abort timeout.
func (c *Sim) pdNext() (int64, bool) {
	t, ok := c.pdTransferNext()
	if at, has := c.pdTimerNext(); has && (!ok || at < t) {
		t, ok = at, true
	}
	return t, ok
}

// pdTransferNext is the time of the next transfer's end.
func (c *Sim) pdTransferNext() (int64, bool) {
	if c.pd == nil {
		return 0, false
	}
	return c.pd.net.Next()
}

// pdTimerNext is the time of the next abort timeout of a prefill copy
// not yet pulled. A timer whose KV was pulled or freed is dropped, not
// waited for: it would hold the run's end (and its billed time) up to the
// abort timeout after the last handoff.
func (c *Sim) pdTimerNext() (int64, bool) {
	if c.pd == nil {
		return 0, false
	}
	for c.pd.timers.len() > 0 {
		if c.pdTimerLive(c.pd.timers.peek()) {
			return c.pd.timers.peek().at, true
		}
		c.pd.timers.pop()
	}
	return 0, false
}

// pdTimerLive says whether abort timer ev still guards an unpulled copy:
// the copy of its request's current split, handed off at the timer's time
// less the abort timeout. (A request whose decode part was handed back
// and split again has a new copy, and its old timer is not the new one's.)
func (c *Sim) pdTimerLive(ev cevent) bool {
	r, live := c.pd.reqs[ev.id]
	return live && !r.released && r.pullAt < 0 && r.injectedD >= 0 && satAdd(r.injectedD, c.pd.cfg.AbortTimeoutUs) == ev.at
}

// pdDeadlocked says whether the requests in flight can no longer move
// once no event of their own is left (no arrival, engine event, transfer
// or client timeout): prefill copies are kept that no abort timeout will
// free (Disagg.AbortTimeoutUs 0: never), and no drain timeout is to come
// that could kill the requests waiting behind them. It happens on
// instances that both prefill and decode: each instance's queue waits
// for blocks its copies hold, which wait for the pulls of requests queued
// behind other instances' copies. vLLM, whose abort timeout always
// expires (VLLM_NIXL_ABORT_REQUEST_TIMEOUT), would free them at last; a
// run with copies kept forever ends there, its requests counted in the
// system, instead of letting its autoscalers evaluate forever.
func (c *Sim) pdDeadlocked() bool {
	if c.pd == nil || c.pd.kept == 0 {
		return false
	}
	if _, has := c.pdTimerNext(); has {
		return false
	}
	return c.fl == nil || c.fl.DrainsPending() == 0
}

// pdHandle processes the transfers that end at now, then the abort
// timeouts due. It reports whether a transfer ended: a copy freed at its
// abort timeout is no activity (sim.Engine.ExpireKV).
func (c *Sim) pdHandle() bool {
	pd := c.pd
	done, err := pd.net.Complete(c.now)
	if err != nil {
		c.err = err
		return false
	}
	for _, id := range done {
		r := pd.reqs[id]
		pd.xferH.Add(c.now - r.pullAt)
		if c.dec != nil && c.cfg.TraceDetailed {
			c.dec.transfer(c.now, &r.spec, c.ids[r.p], c.ids[r.d], r.pullAt, r.bytes)
		}
		if !r.gone {
			if err := c.eng[r.d].KVArrived(id, c.now); err != nil {
				c.err = fmt.Errorf("instance %s: %w", c.ids[r.d], err)
				return false
			}
			at, ok := c.eng[r.d].NextEventUs()
			c.inst.set(r.d, at, ok)
		}
		c.pdRelease(r, false)
	}
	for pd.timers.len() > 0 && pd.timers.peek().at <= c.now {
		ev := pd.timers.pop()
		if c.pdTimerLive(ev) {
			pd.res.AbortTimeouts++
			c.pdRelease(pd.reqs[ev.id], true)
		}
	}
	return len(done) > 0
}

// pdRelease frees r's kept KV on its prefill instance: pulled, or expired
// unpulled at its abort timeout.
func (c *Sim) pdRelease(r *pdReq, expired bool) {
	if r.released {
		return
	}
	r.released = true
	c.pd.kept--
	release := c.eng[r.p].ReleaseKV
	if expired {
		release = c.eng[r.p].ExpireKV
	}
	if err := release(r.spec.ID, c.now); err != nil {
		c.err = fmt.Errorf("instance %s: %w", c.ids[r.p], err)
		return
	}
	at, ok := c.eng[r.p].NextEventUs()
	c.inst.set(r.p, at, ok)
	if r.gone {
		delete(c.pd.reqs, r.spec.ID)
	}
}

// pdResult is the run's disaggregation, nil without it.
func (c *Sim) pdResult() *PDResult {
	if c.pd == nil {
		return nil
	}
	out := c.pd.res
	out.TransfersClamped = c.pd.net.Clamped()
	out.TransferMs = c.pd.xferH.Summarize()
	out.PullWaitMs = c.pd.waitH.Summarize()
	out.Roles = c.pd.roles
	return &out
}

// pdRoles sums the instances' results by role into pd.roles (Finish,
// before pdResult).
func (c *Sim) pdRoles(res *Result) {
	pd := c.pd
	var roles [3]PDRole
	var prompt, output [3]int64
	for _, ir := range res.Instances {
		k := pd.cfg.Pools[pd.byName[ir.Pool]].Role
		r := &roles[k]
		r.Instances++
		r.BusyFraction += ir.Metrics.BusyFraction
		prompt[k] += ir.Metrics.PromptTokens - ir.Metrics.RemotePromptTokens
		output[k] += ir.Metrics.OutputTokens
	}
	if f := c.folds; f != nil {
		for _, name := range f.order {
			p := f.pools[name]
			r := &roles[p.role]
			r.Instances += int(p.Instances)
			r.BusyFraction += p.busySum
			prompt[p.role] += p.PromptTokens - p.remote
			output[p.role] += p.OutputTokens
		}
	}
	pd.roles = pd.roles[:0]
	for k := range roles {
		r := roles[k]
		if r.Instances == 0 {
			continue
		}
		r.Role = Role(k)
		r.BusyFraction /= float64(r.Instances)
		if res.DurationS > 0 {
			r.PromptTokensPerS = float64(prompt[k]) / res.DurationS
			r.OutputTokensPerS = float64(output[k]) / res.DurationS
		}
		pd.roles = append(pd.roles, r)
	}
}

// disaggregation writes a disaggregation decision: the decode instance
// the router chose, the prompt tokens it does not cache, and the prefill
// instance (none when served whole).
func (d *decisionWriter) disaggregation(t int64, spec *sim.RequestSpec, decider, decode string, prefill int, ids []string, nonCached int64) {
	b := appendHead(d.buf[:0], t, "disaggregation", spec, decider)
	b = append(b, `,"decode":`...)
	b = strconv.AppendQuote(b, decode)
	b = append(b, `,"prefill":`...)
	if prefill >= 0 {
		b = strconv.AppendQuote(b, ids[prefill])
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, spec.PromptTokens, 10)
	b = append(b, `,"non_cached_tokens":`...)
	b = strconv.AppendInt(b, nonCached, 10)
	b = append(b, '}')
	d.buf = b
	d.write()
}

// transfer writes a KV transfer that ended at t.
func (d *decisionWriter) transfer(t int64, spec *sim.RequestSpec, from, to string, start int64, bytes float64) {
	b := appendHead(d.buf[:0], t, "transfer", spec, "kv")
	b = append(b, `,"from":`...)
	b = strconv.AppendQuote(b, from)
	b = append(b, `,"to":`...)
	b = strconv.AppendQuote(b, to)
	b = append(b, `,"start_us":`...)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, t-start, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendFloat(b, bytes, 'f', -1, 64)
	b = append(b, '}')
	d.buf = b
	d.write()
}
