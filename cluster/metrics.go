package cluster

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/cluster/anomaly"
	"github.com/blis-sim/blis/kvstore"
	"github.com/blis-sim/blis/sim"
	ss "github.com/blis-sim/blis/steady"
)

// Counts is the cluster's request accounting (CL-1): arrived = rejected +
// completed + dropped_unservable + rejected_too_long + timed_out +
// awaiting_routing + in_transit + still_in_api + still_queued +
// still_running, at the end of every run.
type Counts struct {
	Arrived  int64 `json:"arrived"`
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	// RejectedBy counts rejections by reason, sorted by reason.
	RejectedBy        []ReasonCount `json:"rejected_by_reason,omitempty"`
	Routed            int64         `json:"routed"`
	Completed         int64         `json:"completed"`
	DroppedUnservable int64         `json:"dropped_unservable"`
	// RejectedTooLong were refused by their instance as longer than its
	// model's context (sim.EngineConfig.MaxModelLen); omitted when 0.
	RejectedTooLong int64 `json:"rejected_too_long,omitempty"`
	// TimedOut were aborted because their client gave up (their
	// RequestSpec.TimeoutUs passed before they finished), or gave up
	// waiting at the router for a ready instance.
	TimedOut int64 `json:"timed_out,omitempty"`
	// Killed were ended by a scale-down (Fleet.Killed); Redirected were
	// handed back to the router by one and routed again (counted in Routed
	// each time); AwaitingCapacity wait at the router for a ready instance
	// at the horizon. All omitted when 0.
	Killed           int64 `json:"killed,omitempty"`
	Redirected       int64 `json:"redirected,omitempty"`
	AwaitingCapacity int64 `json:"awaiting_capacity,omitempty"`
	// AwaitingRouting were admitted but not yet routed (admission latency),
	// InTransit routed but not yet at their instance (routing latency), at
	// the horizon.
	AwaitingRouting int64 `json:"awaiting_routing"`
	InTransit       int64 `json:"in_transit"`
	StillInAPI      int64 `json:"still_in_api"`
	StillQueued     int64 `json:"still_queued"`
	StillRunning    int64 `json:"still_running"`
}

// ReasonCount is a number of rejections for one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Result is a cluster run's metrics. Latency distributions are merged from
// the instances' histograms (percentiles within 0.1 %; count, mean, min and
// max exact), in milliseconds.
type Result struct {
	Requests           Counts           `json:"requests"`
	TTFT               sim.Distribution `json:"ttft_ms"`
	ITL                sim.Distribution `json:"itl_ms"`
	E2E                sim.Distribution `json:"e2e_ms"`
	SchedulingDelay    sim.Distribution `json:"scheduling_delay_ms"`
	DurationS          float64          `json:"duration_s"`
	RequestsPerS       float64          `json:"requests_per_s"`
	OutputTokensPerS   float64          `json:"output_tokens_per_s"`
	OutputTokens       int64            `json:"output_tokens"`
	Preemptions        int64            `json:"preemptions"`
	PrefixCacheHitRate float64          `json:"prefix_cache_hit_rate"`
	// KVTiers is where the fleet's prompt tokens' KV came from, tier by
	// tier (GPU, CPU, disk, store), summed over the instances with tiers
	// beyond the GPU; absent when none has any.
	KVTiers *sim.KVTiersResult `json:"kv_tiers,omitempty"`
	// KVStore is what the fleet's shared KV store did (Config.KVStore).
	KVStore *kvstore.Stats `json:"kv_store,omitempty"`
	// PerSLOClass has one entry per class that any request carried, in
	// class order (realtime, interactive, batch).
	PerSLOClass []ClassResult `json:"per_slo_class,omitempty"`
	// SLO is the attainment over every class with targets.
	SLO *Attainment `json:"slo,omitempty"`
	// Fairness is present when requests came from more than one tenant,
	// or the tenants are named.
	Fairness  *Fairness        `json:"fairness,omitempty"`
	Instances []InstanceResult `json:"instances"`
	// TerminatedInstances sums, per pool, the instances an autoscaler
	// terminated beyond the MaxTerminatedEntries that keep an entry in
	// Instances (terminated.go); absent when none were.
	TerminatedInstances []TerminatedPool `json:"terminated_instances,omitempty"`
	// Fleet is the fleet's size, scaling and cost (Config.Scaling).
	Fleet *Fleet `json:"fleet,omitempty"`
	// Disaggregation is the run's prefill/decode split and KV transfers
	// (pd.go); absent without Config.Disagg.
	Disaggregation *PDResult `json:"disaggregation,omitempty"`
	// Anomalies are the run's anomaly counters (cluster/anomaly,
	// docs/anomalies.md).
	Anomalies *anomaly.Report `json:"anomalies"`
	// Stability is the output analysis's verdict on the run and
	// SteadyState its estimates after the warm-up, with their 95 %
	// intervals (Config.Analysis, package steady); absent without it.
	Stability   *ss.Stability   `json:"stability,omitempty"`
	SteadyState *ss.SteadyState `json:"steady_state,omitempty"`
	// Counterfactual is the TTFT regret of the sampled routing decisions
	// (Config.Counterfactual).
	Counterfactual *CounterfactualResult `json:"counterfactual,omitempty"`
	PerRequest     []RequestRecord       `json:"per_request,omitempty"`
	// Windows are the time windows (Config.WindowUs), in time order. They
	// are not part of the result's JSON, which keeps its size and shape;
	// WriteWindowsCSV and WriteWindowsJSONL write them.
	Windows []Window `json:"-"`
}

// ClassResult is one SLO class's requests and latencies. TPOT is a
// request's time per output token after the first: (finish − first token)
// / (output tokens − 1), for requests of more than one output token.
type ClassResult struct {
	Class     string           `json:"slo_class"`
	Arrived   int64            `json:"arrived"`
	Rejected  int64            `json:"rejected"`
	Completed int64            `json:"completed"`
	Dropped   int64            `json:"dropped_unservable"`
	TooLong   int64            `json:"rejected_too_long,omitempty"`
	TimedOut  int64            `json:"timed_out,omitempty"`
	TTFT      sim.Distribution `json:"ttft_ms"`
	TPOT      sim.Distribution `json:"tpot_ms"`
	E2E       sim.Distribution `json:"e2e_ms"`
	// SLO is the class's attainment, when the run has targets for it.
	SLO *Attainment `json:"slo,omitempty"`
}

// SLOTarget is an SLO class's targets in µs; 0 means no target on that
// metric. A class with no target at all reports no attainment.
type SLOTarget struct {
	TTFTUs, TPOTUs, E2EUs int64
}

func (t SLOTarget) set() bool { return t.TTFTUs > 0 || t.TPOTUs > 0 || t.E2EUs > 0 }

// meets reports whether a completed request met every target of its
// class (the design digest's joint attainment).
func (t SLOTarget) meets(ttft, tpot, e2e int64) bool {
	return (t.TTFTUs == 0 || ttft <= t.TTFTUs) && (t.TPOTUs == 0 || tpot <= t.TPOTUs) && (t.E2EUs == 0 || e2e <= t.E2EUs)
}

// Attainment is the share of requests that met all their class's
// targets. Its denominator, Finished, is every request that reached an
// end: completed, rejected, dropped, rejected as too long or timed out;
// all but the first are misses. Requests still in the system at the horizon are not counted
// (Counts says how many there are). Goodput is Met per second of the
// run's span.
type Attainment struct {
	TTFTMs     float64 `json:"ttft_target_ms,omitempty"`
	TPOTMs     float64 `json:"tpot_target_ms,omitempty"`
	E2EMs      float64 `json:"e2e_target_ms,omitempty"`
	Finished   int64   `json:"finished"`
	Met        int64   `json:"met"`
	Attainment float64 `json:"attainment"`
	GoodputRPS float64 `json:"goodput_rps"`
}

// Fairness is Jain's index over the tenants' output-token throughputs,
// (Σx)² / (n·Σx²), in [1/n, 1], every tenant that sent a request counted
// (the design digest's decision), one that got nothing included; a named
// tenant that sent nothing is listed (its detail) but not counted. 1 when
// no counted tenant got any throughput (all equal), or none sent.
type Fairness struct {
	JainIndex float64        `json:"jain_index"`
	Tenants   []TenantResult `json:"tenants"`
}

// TenantResult is one tenant's share.
type TenantResult struct {
	Tenant           int32   `json:"tenant"`
	Name             string  `json:"name,omitempty"`
	Arrived          int64   `json:"arrived"`
	Completed        int64   `json:"completed"`
	OutputTokens     int64   `json:"output_tokens"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// With named tenants (a workload spec), each tenant's outcomes,
	// latencies and SLO attainment.
	Detail *TenantDetail `json:"detail,omitempty"`
}

// TenantDetail is one tenant's outcomes and latency distributions (ms).
type TenantDetail struct {
	SLOClass string           `json:"slo_class,omitempty"`
	Rejected int64            `json:"rejected"`
	Dropped  int64            `json:"dropped_unservable"`
	TooLong  int64            `json:"rejected_too_long,omitempty"`
	TimedOut int64            `json:"timed_out"`
	TTFT     sim.Distribution `json:"ttft_ms"`
	TPOT     sim.Distribution `json:"tpot_ms"`
	E2E      sim.Distribution `json:"e2e_ms"`
	SLO      *Attainment      `json:"slo,omitempty"`
}

// InstanceResult is one instance's own metrics.
type InstanceResult struct {
	ID   string `json:"id"`
	Pool string `json:"pool,omitempty"`
	// Role is its part under disaggregation (absent without it).
	Role    string      `json:"role,omitempty"`
	Routed  int64       `json:"routed"`
	Metrics *sim.Result `json:"metrics"`
}

// RequestRecord is one request that left the cluster (µs). Latency fields
// are zero for a rejected or dropped request.
type RequestRecord struct {
	ID              int64  `json:"id"`
	Outcome         string `json:"outcome"`
	Reason          string `json:"reason,omitempty"`
	Instance        string `json:"instance,omitempty"`
	Tenant          int32  `json:"tenant"`
	SLOClass        string `json:"slo_class,omitempty"`
	ArrivalUs       int64  `json:"arrival_us"`
	PromptTokens    int64  `json:"prompt_tokens"`
	OutputTokens    int64  `json:"output_tokens"`
	CachedTokens    int64  `json:"cached_tokens"`
	Preemptions     int64  `json:"preemptions"`
	SchedulingDelay int64  `json:"scheduling_delay_us"`
	TTFT            int64  `json:"ttft_us"`
	E2E             int64  `json:"e2e_us"`
	DepartedUs      int64  `json:"departed_us"`
	// LastTokenUs is when the client received the last token (0 unless
	// completed).
	LastTokenUs int64 `json:"last_token_us,omitempty"`
}

// maxTenants bounds tenant indices: they index a slice.
const maxTenants = 1 << 20

type classAgg struct {
	arrived, rejected, completed, dropped, timedOut int64
	killed                                          int64
	tooLong, met                                    int64
	ttft, tpot, e2e                                 sim.Histogram
}

func (g *classAgg) finished() int64 {
	return g.completed + g.rejected + g.dropped + g.tooLong + g.timedOut + g.killed
}

type tenantAgg struct {
	arrived, completed, outputTokens int64
	class                            sim.SLOClass
	// Per-tenant distributions, kept only with named tenants.
	detail *classAgg
}

type aggregator struct {
	arrivedN, admitted, rejectedN, awaiting int64
	timedOutRouter                          int64 // gave up held at the router
	reasons                                 []ReasonCount
	routedTo                                []int64
	classes                                 [4]classAgg
	classSeen                               [4]bool
	tenants                                 []tenantAgg
	first                                   int64
	hasFirst                                bool
	keep                                    bool
	records                                 []RequestRecord
	tenantErr                               error
	slo                                     [4]SLOTarget
	detail                                  bool
	// col is the output analysis (Config.Analysis), or nil.
	col *ss.Collector
}

func (a *aggregator) init(n int, cfg *Config) {
	a.col = cfg.Analysis
	a.routedTo = make([]int64, n)
	a.keep = cfg.RecordRequests
	a.slo = cfg.SLOTargets
	a.detail = len(cfg.TenantNames) > 0
}

func (a *aggregator) tenant(t int32) *tenantAgg {
	if int(t) >= len(a.tenants) {
		a.tenants = append(a.tenants, make([]tenantAgg, int(t)+1-len(a.tenants))...)
	}
	return &a.tenants[t]
}

func (a *aggregator) arrived(spec *sim.RequestSpec, now int64) {
	a.arrivedN++
	if !a.hasFirst {
		a.first, a.hasFirst = now, true
	}
	if spec.Tenant >= maxTenants {
		if a.tenantErr == nil {
			a.tenantErr = fmt.Errorf("request %d: tenant %d is beyond the %d tenants a run supports", spec.ID, spec.Tenant, maxTenants)
		}
		return
	}
	t := a.tenant(spec.Tenant)
	t.arrived++
	t.class = spec.SLOClass
	if a.detail && t.detail == nil {
		t.detail = &classAgg{}
	}
	a.classSeen[spec.SLOClass] = true
	a.classes[spec.SLOClass].arrived++
}

func (a *aggregator) rejected(spec *sim.RequestSpec, reason string, now int64) {
	a.missed(spec.SLOClass, now)
	a.rejectedN++
	a.classes[spec.SLOClass].rejected++
	if d := a.tenantDetail(spec.Tenant); d != nil {
		d.rejected++
	}
	found := false
	for i := range a.reasons {
		if a.reasons[i].Reason == reason {
			a.reasons[i].Count++
			found = true
			break
		}
	}
	if !found {
		a.reasons = append(a.reasons, ReasonCount{Reason: reason, Count: 1})
	}
	if a.keep {
		a.records = append(a.records, RequestRecord{ID: spec.ID, Outcome: Rejected.String(), Reason: reason, Tenant: spec.Tenant,
			SLOClass: spec.SLOClass.String(), ArrivalUs: spec.ArrivalUs, PromptTokens: spec.PromptTokens, DepartedUs: now})
	}
}

func (a *aggregator) routed(i int) { a.routedTo[i]++ }

// timedOutHeld counts a request that gave up waiting at the router for a
// ready instance: a timed-out request that reached no instance.
func (a *aggregator) timedOutHeld(spec *sim.RequestSpec, now int64) {
	if a.col != nil {
		a.col.Depart(now, -1)
		a.missed(spec.SLOClass, now)
	}
	a.timedOutRouter++
	a.classes[spec.SLOClass].timedOut++
	if d := a.tenantDetail(spec.Tenant); d != nil {
		d.timedOut++
	}
	if a.keep {
		a.records = append(a.records, RequestRecord{ID: spec.ID, Outcome: TimedOut.String(), Reason: "waited for a ready instance", Tenant: spec.Tenant,
			SLOClass: spec.SLOClass.String(), ArrivalUs: spec.ArrivalUs, PromptTokens: spec.PromptTokens, DepartedUs: now})
	}
}

func (a *aggregator) tenantDetail(t int32) *classAgg {
	if int(t) < len(a.tenants) {
		return a.tenants[t].detail
	}
	return nil
}

// missed tells the analysis of a request of class c that ended at now
// without completing: a miss of its targets, if it has any.
func (a *aggregator) missed(c sim.SLOClass, now int64) {
	if a.col != nil && c != sim.SLONone && a.slo[c].set() {
		a.col.Outcome(int(c), false, now)
	}
}

// left counts a request that left instance i (id), reported at at.
func (a *aggregator) left(i int, id string, d *sim.Completion, at int64) {
	cl := &a.classes[d.SLOClass]
	td := a.tenantDetail(d.Tenant)
	if a.col != nil {
		a.analyzed(i, d, at)
	}
	switch {
	case d.Dropped:
		cl.dropped++
		if td != nil {
			td.dropped++
		}
	case d.TooLong:
		cl.tooLong++
		if td != nil {
			td.tooLong++
		}
	case d.TimedOut:
		cl.timedOut++
		if td != nil {
			td.timedOut++
		}
	case d.Killed:
		cl.killed++
		if td != nil {
			td.killed++
		}
	default:
		ttft, e2e := d.FirstTokenUs-d.ArrivalUs, d.DepartedUs-d.ArrivalUs
		var tpot int64
		if d.OutputTokens > 1 {
			tpot = (d.FinishedUs - d.FirstTokenUs) / (d.OutputTokens - 1)
		}
		met := a.slo[d.SLOClass].meets(ttft, tpot, e2e)
		for _, g := range []*classAgg{cl, td} {
			if g == nil {
				continue
			}
			g.completed++
			g.ttft.Add(ttft)
			g.e2e.Add(e2e)
			if d.OutputTokens > 1 {
				g.tpot.Add(tpot)
			}
			if met {
				g.met++
			}
		}
		if int(d.Tenant) < len(a.tenants) {
			t := &a.tenants[d.Tenant]
			t.completed++
			t.outputTokens += d.OutputTokens
		}
	}
	if a.keep {
		r := RequestRecord{ID: d.ID, Outcome: Completed.String(), Instance: id, Tenant: d.Tenant, SLOClass: d.SLOClass.String(),
			ArrivalUs: d.ArrivalUs, PromptTokens: d.PromptTokens, OutputTokens: d.OutputTokens, CachedTokens: d.CachedTokens,
			Preemptions: d.Preemptions, DepartedUs: d.DepartedUs}
		switch {
		case d.Dropped:
			r.Outcome, r.Reason = Dropped.String(), d.Reason
		case d.TooLong:
			r.Outcome, r.Reason = TooLong.String(), d.Reason
		case d.TimedOut:
			r.Outcome = TimedOut.String()
		case d.Killed:
			r.Outcome = Killed.String()
		default:
			r.SchedulingDelay, r.TTFT, r.E2E = d.FirstScheduledUs-d.ArrivalUs, d.FirstTokenUs-d.ArrivalUs, d.DepartedUs-d.ArrivalUs
			r.LastTokenUs = d.FinishedUs
		}
		a.records = append(a.records, r)
	}
}

// Finish ends the run: each engine's end-of-run checks, the cluster
// invariants (CL-1 conservation, CL-2 in-flight), and the merged metrics.
func (c *Sim) Finish() (*Result, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.agg.tenantErr != nil {
		return nil, c.agg.tenantErr
	}
	if c.dec != nil {
		if err := c.dec.flush(); err != nil {
			return nil, fmt.Errorf("decision trace: %w", err)
		}
	}
	if c.win != nil {
		// Before the engines finish: the last window samples their state.
		if c.finishWindows(); c.err != nil {
			return nil, c.err
		}
	}
	a := &c.agg
	res := &Result{}
	tot := totals{end: c.active}
	cnt := &res.Requests
	for i, e := range c.eng {
		if c.folds.isFolded(i) {
			continue
		}
		r, err := e.Finish()
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", c.ids[i], err)
		}
		ir := InstanceResult{ID: c.ids[i], Pool: c.pools[i], Routed: a.routedTo[i], Metrics: r}
		if c.pd != nil {
			ir.Role = c.pd.cfg.Pools[c.pd.pool[i]].Role.String()
		}
		res.Instances = append(res.Instances, ir)
		tot.add(r)
		if r.Requests.Offered != a.routedTo[i] {
			c.fail("CL-1", "instance %s received %d requests; the router sent it %d", c.ids[i], r.Requests.Offered, a.routedTo[i])
		}
	}
	if f := c.folds; f != nil {
		tot.merge(&f.totals)
		for _, p := range f.order {
			res.TerminatedInstances = append(res.TerminatedInstances, f.pools[p].TerminatedPool)
		}
	}
	ttft, itl, e2e, sched := &tot.hist[0], &tot.hist[1], &tot.hist[2], &tot.hist[3]
	prompt, cached, end := tot.prompt, tot.cached, tot.end
	res.KVTiers, res.OutputTokens, res.Preemptions = tot.kvTiers, tot.output, tot.preemptions
	rc := &tot.counts
	cnt.Completed, cnt.DroppedUnservable, cnt.RejectedTooLong, cnt.TimedOut = rc.Completed, rc.Dropped, rc.RejectedTooLong, rc.TimedOut
	cnt.Killed, cnt.Redirected, cnt.InTransit = rc.Killed, rc.Redirected, rc.Offered-rc.Injected
	cnt.StillInAPI, cnt.StillQueued, cnt.StillRunning = rc.StillArrival, rc.StillQueued, rc.StillRunning
	cnt.Arrived, cnt.Admitted, cnt.Rejected, cnt.AwaitingRouting = a.arrivedN, a.admitted, a.rejectedN, a.awaiting
	cnt.TimedOut += a.timedOutRouter
	if c.fl != nil {
		cnt.AwaitingCapacity = c.fl.Waiting()
	}
	for _, n := range a.routedTo {
		cnt.Routed += n
	}
	if c.pd != nil {
		cnt.Routed -= c.pd.handoffs // a disaggregated request was routed once, sent twice
	}
	cnt.RejectedBy = slices.Clone(a.reasons)
	slices.SortFunc(cnt.RejectedBy, func(x, y ReasonCount) int {
		switch {
		case x.Reason < y.Reason:
			return -1
		case x.Reason > y.Reason:
			return 1
		}
		return 0
	})
	c.checkConservation(cnt)
	if c.err != nil {
		return nil, c.err
	}
	res.TTFT, res.ITL, res.E2E, res.SchedulingDelay = ttft.Summarize(), itl.Summarize(), e2e.Summarize(), sched.Summarize()
	if res.KVTiers != nil {
		res.KVTiers.Rates()
	}
	res.KVStore = c.kvStoreStats()
	if prompt > 0 {
		res.PrefixCacheHitRate = float64(cached) / float64(prompt)
	}
	var dur float64
	if a.hasFirst {
		dur = float64(end-a.first) * 1e-6
	}
	if dur > 0 {
		res.DurationS = dur
		res.RequestsPerS = float64(cnt.Completed) / dur
		res.OutputTokensPerS = float64(res.OutputTokens) / dur
	}
	for cl := range a.classes {
		if cl == int(sim.SLONone) || !a.classSeen[cl] {
			continue
		}
		g := &a.classes[cl]
		res.PerSLOClass = append(res.PerSLOClass, ClassResult{Class: sim.SLOClass(cl).String(), Arrived: g.arrived, Rejected: g.rejected,
			Completed: g.completed, Dropped: g.dropped, TooLong: g.tooLong, TimedOut: g.timedOut, TTFT: g.ttft.Summarize(), TPOT: g.tpot.Summarize(),
			E2E: g.e2e.Summarize(), SLO: attainment(a.slo[cl], g, dur)})
	}
	var all classAgg
	var anyTarget bool
	for cl := range a.classes {
		if g := &a.classes[cl]; a.slo[cl].set() && a.classSeen[cl] {
			anyTarget = true
			all.completed += g.completed
			all.rejected += g.rejected
			all.dropped += g.dropped
			all.tooLong += g.tooLong
			all.timedOut += g.timedOut
			all.met += g.met
		}
	}
	if anyTarget {
		res.SLO = attainment(SLOTarget{TTFTUs: 1}, &all, dur)
		res.SLO.TTFTMs = 0 // the classes' targets differ; each class lists its own
	}
	res.Fairness = fairness(a.tenants, dur, c.cfg.TenantNames, &a.slo)
	res.PerRequest = a.records
	if c.win != nil {
		res.Windows = c.win.rows
	}
	if c.fl != nil {
		res.Fleet = c.fleetResult(end, res)
	}
	if c.pd != nil {
		c.pdRoles(res)
	}
	res.Disaggregation = c.pdResult()
	c.steadyReport(res, max(c.now, end))
	res.Anomalies = c.an.report(c, res)
	if cf := c.an.cf; cf != nil {
		res.Counterfactual = cf.result()
	}
	return res, nil
}

// checkConservation is CL-1 and, once no event is left, CL-2's return of
// every in-flight count to zero.
func (c *Sim) checkConservation(cnt *Counts) {
	in := cnt.AwaitingRouting + cnt.AwaitingCapacity + cnt.InTransit + cnt.StillInAPI + cnt.StillQueued + cnt.StillRunning
	if got := cnt.Rejected + cnt.Completed + cnt.DroppedUnservable + cnt.RejectedTooLong + cnt.TimedOut + cnt.Killed + in; got != cnt.Arrived {
		c.fail("CL-1", "arrived %d ≠ rejected %d + completed %d + dropped %d + rejected too long %d + timed out %d + killed %d + in the system %d",
			cnt.Arrived, cnt.Rejected, cnt.Completed, cnt.DroppedUnservable, cnt.RejectedTooLong, cnt.TimedOut, cnt.Killed, in)
	}
	if cnt.Admitted+cnt.Rejected != cnt.Arrived || cnt.Routed-cnt.Redirected+cnt.AwaitingRouting+cnt.AwaitingCapacity+c.agg.timedOutRouter != cnt.Admitted {
		c.fail("CL-1", "arrived %d, admitted %d, rejected %d, routed %d (%d redirected), awaiting routing %d, awaiting capacity %d, timed out waiting %d do not add up",
			cnt.Arrived, cnt.Admitted, cnt.Rejected, cnt.Routed, cnt.Redirected, cnt.AwaitingRouting, cnt.AwaitingCapacity, c.agg.timedOutRouter)
	}
	var inflight int64
	for _, n := range c.inflight {
		inflight += n
	}
	if _, more := c.NextEventUs(); !more {
		if (inflight != 0 || in != 0) && !c.pdDeadlocked() {
			c.fail("CL-2", "no event is left but %d requests are in flight at the router and %d in the system", inflight, in)
		}
	}
}

// attainment is a group's SLO attainment under target, nil without one.
func attainment(target SLOTarget, g *classAgg, dur float64) *Attainment {
	if !target.set() {
		return nil
	}
	at := &Attainment{TTFTMs: float64(target.TTFTUs) / 1e3, TPOTMs: float64(target.TPOTUs) / 1e3, E2EMs: float64(target.E2EUs) / 1e3,
		Finished: g.finished(), Met: g.met}
	if at.Finished > 0 {
		at.Attainment = float64(at.Met) / float64(at.Finished)
	}
	if dur > 0 {
		at.GoodputRPS = float64(at.Met) / dur
	}
	return at
}

func fairness(tenants []tenantAgg, dur float64, names []string, slo *[4]SLOTarget) *Fairness {
	var f Fairness
	var sum, sq float64
	n := 0 // tenants that sent a request
	for t, g := range tenants {
		if g.arrived == 0 && g.detail == nil {
			continue
		}
		var x float64
		if dur > 0 {
			x = float64(g.outputTokens) / dur
		}
		tr := TenantResult{Tenant: int32(t), Arrived: g.arrived, Completed: g.completed, OutputTokens: g.outputTokens, OutputTokensPerS: x}
		if t < len(names) {
			tr.Name = names[t]
		}
		if d := g.detail; d != nil {
			tr.Detail = &TenantDetail{SLOClass: g.class.String(), Rejected: d.rejected, Dropped: d.dropped, TooLong: d.tooLong, TimedOut: d.timedOut,
				TTFT: d.ttft.Summarize(), TPOT: d.tpot.Summarize(), E2E: d.e2e.Summarize(), SLO: attainment(slo[g.class], d, dur)}
		}
		f.Tenants = append(f.Tenants, tr)
		if g.arrived == 0 {
			continue // listed for its detail, not counted
		}
		n++
		sum += x
		sq += x * x
	}
	if len(f.Tenants) < 2 && names == nil {
		return nil
	}
	f.JainIndex = 1
	if sq > 0 {
		f.JainIndex = sum * sum / (float64(n) * sq)
	}
	return &f
}
