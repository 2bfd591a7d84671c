package cluster

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/sim"
)

// Counts is the cluster's request accounting (CL-1): arrived = rejected +
// completed + dropped_unservable + awaiting_routing + in_transit +
// still_in_api + still_queued + still_running, at the end of every run.
type Counts struct {
	Arrived  int64 `json:"arrived"`
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	// RejectedBy counts rejections by reason, sorted by reason.
	RejectedBy        []ReasonCount `json:"rejected_by_reason,omitempty"`
	Routed            int64         `json:"routed"`
	Completed         int64         `json:"completed"`
	DroppedUnservable int64         `json:"dropped_unservable"`
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
	// PerSLOClass has one entry per class that any request carried, in
	// class order (realtime, interactive, batch).
	PerSLOClass []ClassResult `json:"per_slo_class,omitempty"`
	// Fairness is present when requests came from more than one tenant.
	Fairness   *Fairness        `json:"fairness,omitempty"`
	Instances  []InstanceResult `json:"instances"`
	PerRequest []RequestRecord  `json:"per_request,omitempty"`
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
	TTFT      sim.Distribution `json:"ttft_ms"`
	TPOT      sim.Distribution `json:"tpot_ms"`
	E2E       sim.Distribution `json:"e2e_ms"`
}

// Fairness is Jain's index over the tenants' output-token throughputs,
// (Σx)² / (n·Σx²), in [1/n, 1], every tenant that sent a request counted
// (the design digest's decision), 1 when no tenant got any throughput.
type Fairness struct {
	JainIndex float64        `json:"jain_index"`
	Tenants   []TenantResult `json:"tenants"`
}

// TenantResult is one tenant's share.
type TenantResult struct {
	Tenant           int32   `json:"tenant"`
	Arrived          int64   `json:"arrived"`
	Completed        int64   `json:"completed"`
	OutputTokens     int64   `json:"output_tokens"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
}

// InstanceResult is one instance's own metrics.
type InstanceResult struct {
	ID      string      `json:"id"`
	Pool    string      `json:"pool,omitempty"`
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
}

// maxTenants bounds tenant indices: they index a slice.
const maxTenants = 1 << 20

type classAgg struct {
	arrived, rejected, completed, dropped int64
	ttft, tpot, e2e                       sim.Histogram
}

type tenantAgg struct {
	arrived, completed, outputTokens int64
}

type aggregator struct {
	arrivedN, admitted, rejectedN, awaiting int64
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
}

func (a *aggregator) init(n int, keep bool) {
	a.routedTo = make([]int64, n)
	a.keep = keep
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
	a.tenant(spec.Tenant).arrived++
	a.classSeen[spec.SLOClass] = true
	a.classes[spec.SLOClass].arrived++
}

func (a *aggregator) rejected(spec *sim.RequestSpec, reason string, now int64) {
	a.rejectedN++
	a.classes[spec.SLOClass].rejected++
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

func (a *aggregator) left(i int, id string, d *sim.Completion) {
	cl := &a.classes[d.SLOClass]
	if d.Dropped {
		cl.dropped++
	} else {
		cl.completed++
		cl.ttft.Add(d.FirstTokenUs - d.ArrivalUs)
		cl.e2e.Add(d.DepartedUs - d.ArrivalUs)
		if d.OutputTokens > 1 {
			cl.tpot.Add((d.FinishedUs - d.FirstTokenUs) / (d.OutputTokens - 1))
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
		if d.Dropped {
			r.Outcome, r.Reason = Dropped.String(), d.Reason
		} else {
			r.SchedulingDelay, r.TTFT, r.E2E = d.FirstScheduledUs-d.ArrivalUs, d.FirstTokenUs-d.ArrivalUs, d.DepartedUs-d.ArrivalUs
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
	var ttft, itl, e2e, sched sim.Histogram
	var prompt, cached int64
	end := c.now
	cnt := &res.Requests
	for i, e := range c.eng {
		r, err := e.Finish()
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", c.ids[i], err)
		}
		res.Instances = append(res.Instances, InstanceResult{ID: c.ids[i], Pool: c.cfg.Instances[i].Pool, Routed: a.routedTo[i], Metrics: r})
		ttft.Merge(r.Hist.TTFT)
		itl.Merge(r.Hist.ITL)
		e2e.Merge(r.Hist.E2E)
		sched.Merge(r.Hist.Sched)
		prompt += r.PromptTokens
		cached += r.CachedPromptTokens
		res.OutputTokens += r.OutputTokens
		res.Preemptions += r.Preemptions
		end = max(end, r.EndUs)
		rc := r.Requests
		cnt.Completed += rc.Completed
		cnt.DroppedUnservable += rc.Dropped
		cnt.InTransit += rc.Offered - rc.Injected
		cnt.StillInAPI += rc.StillArrival
		cnt.StillQueued += rc.StillQueued
		cnt.StillRunning += rc.StillRunning
		if rc.Offered != a.routedTo[i] {
			c.fail("CL-1", "instance %s received %d requests; the router sent it %d", c.ids[i], rc.Offered, a.routedTo[i])
		}
	}
	cnt.Arrived, cnt.Admitted, cnt.Rejected, cnt.AwaitingRouting = a.arrivedN, a.admitted, a.rejectedN, a.awaiting
	for _, n := range a.routedTo {
		cnt.Routed += n
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
			Completed: g.completed, Dropped: g.dropped, TTFT: g.ttft.Summarize(), TPOT: g.tpot.Summarize(), E2E: g.e2e.Summarize()})
	}
	res.Fairness = fairness(a.tenants, dur)
	res.PerRequest = a.records
	if c.win != nil {
		res.Windows = c.win.rows
	}
	return res, nil
}

// checkConservation is CL-1 and, once no event is left, CL-2's return of
// every in-flight count to zero.
func (c *Sim) checkConservation(cnt *Counts) {
	in := cnt.AwaitingRouting + cnt.InTransit + cnt.StillInAPI + cnt.StillQueued + cnt.StillRunning
	if got := cnt.Rejected + cnt.Completed + cnt.DroppedUnservable + in; got != cnt.Arrived {
		c.fail("CL-1", "arrived %d ≠ rejected %d + completed %d + dropped %d + in the system %d", cnt.Arrived, cnt.Rejected, cnt.Completed, cnt.DroppedUnservable, in)
	}
	if cnt.Admitted+cnt.Rejected != cnt.Arrived || cnt.Routed+cnt.AwaitingRouting != cnt.Admitted {
		c.fail("CL-1", "arrived %d, admitted %d, rejected %d, routed %d, awaiting routing %d do not add up", cnt.Arrived, cnt.Admitted, cnt.Rejected, cnt.Routed, cnt.AwaitingRouting)
	}
	var inflight int64
	for _, n := range c.inflight {
		inflight += n
	}
	if _, more := c.NextEventUs(); !more {
		if inflight != 0 || in != 0 {
			c.fail("CL-2", "no event is left but %d requests are in flight at the router and %d in the system", inflight, in)
		}
	}
}

func fairness(tenants []tenantAgg, dur float64) *Fairness {
	var f Fairness
	var sum, sq float64
	for t, g := range tenants {
		if g.arrived == 0 {
			continue
		}
		var x float64
		if dur > 0 {
			x = float64(g.outputTokens) / dur
		}
		f.Tenants = append(f.Tenants, TenantResult{Tenant: int32(t), Arrived: g.arrived, Completed: g.completed, OutputTokens: g.outputTokens, OutputTokensPerS: x})
		sum += x
		sq += x * x
	}
	if len(f.Tenants) < 2 {
		return nil
	}
	f.JainIndex = 1
	if sq > 0 {
		f.JainIndex = sum * sum / (float64(len(f.Tenants)) * sq)
	}
	return &f
}
