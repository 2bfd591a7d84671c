package cluster

import (
	"fmt"

	"github.com/blis-sim/blis/cluster/anomaly"
	"github.com/blis-sim/blis/sim"
)

// analysis is what the cluster observes of a run besides its metrics:
// the anomaly counters (always; cluster/anomaly), the instances' records
// of the detailed decision trace (Config.TraceDetailed; detail.go) and
// the counterfactual TTFT regret of sampled routing decisions
// (Config.Counterfactual; counterfactual.go). Each instance's engine gets
// an observer made here; the cluster calls routed at every routing
// decision and completed at every request that leaves an instance.
type analysis struct {
	th  anomaly.Thresholds
	det []*anomaly.Detector // per instance, in index order
	// fleet holds the anomalies counted at the cluster: head-of-line
	// blocking and scale oscillations.
	fleet *anomaly.Report
	// hol holds the requests routed behind a line while another queue
	// was empty, until they leave (then they count if they waited at
	// least Thresholds.HOLMinWaitUs).
	hol map[int64]holCandidate
	cf  *counterfactuals // nil without Config.Counterfactual
}

type holCandidate struct {
	at         int64
	ahead      int64 // requests waiting at the chosen instance
	inst, idle int32
}

func newAnalysis(c *Sim) *analysis {
	a := &analysis{th: anomaly.DefaultThresholds(), hol: map[int64]holCandidate{}}
	if s := c.cfg.Scaling; s != nil && s.OscillationWindowUs > 0 {
		a.th.OscillationWindowUs = s.OscillationWindowUs
	}
	a.fleet = anomaly.NewReport(a.th)
	if c.cfg.Counterfactual != nil {
		a.cf = newCounterfactuals(c)
	}
	return a
}

// observer is the observer of instance index, named id: its anomaly
// detector, and around it user (the caller's own, the OTLP trace writer)
// and the detailed trace's recorder, in that order.
func (a *analysis) observer(c *Sim, index int, id string, user sim.Observer) sim.Observer {
	d := anomaly.NewDetector(id, index, a.th)
	a.det = append(a.det, d)
	obs := []sim.Observer{d}
	if user != nil {
		obs = append([]sim.Observer{user}, obs...)
	}
	if c.cfg.TraceDetailed && c.cfg.Decisions != nil {
		obs = append(obs, &detailRecorder{c: c, inst: id})
	}
	if len(obs) == 1 {
		return d
	}
	return tee(obs)
}

// routed is called at a routing decision, before the request is injected
// into instance i: head-of-line blocking's first half, and the
// counterfactual when the decision is sampled.
func (a *analysis) routed(c *Sim, i int, spec *sim.RequestSpec) {
	if ahead := c.eng[i].Waiting(); ahead > 0 {
		for _, j32 := range c.view.Indexes() {
			if j := int(j32); j != i && c.view.OK(j) && c.eng[j].Waiting() == 0 {
				a.hol[spec.ID] = holCandidate{at: c.now, ahead: ahead, inst: int32(i), idle: int32(j)}
				break
			}
		}
	}
	if a.cf != nil {
		a.cf.decide(c, i, spec)
	}
}

// completed is called for every request that leaves instance i: a
// request routed behind a line is head-of-line blocked if it waited at
// least the threshold for its first scheduling (or, never scheduled,
// until it gave up).
func (a *analysis) completed(c *Sim, d *sim.Completion) {
	h, ok := a.hol[d.ID]
	if !ok {
		return
	}
	delete(a.hol, d.ID)
	if d.Dropped || d.TooLong || (d.EnqueuedUs == 0 && d.TimedOut) {
		return
	}
	first := d.FirstScheduledUs
	if first == 0 {
		first = d.DepartedUs
	}
	if wait := first - d.EnqueuedUs; wait >= a.th.HOLMinWaitUs {
		a.fleet.HOLBlocking.Add(1, anomaly.Example{AtUs: h.at, Instance: c.ids[h.inst], Requests: []int64{d.ID},
			Detail: fmt.Sprintf("routed behind %d waiting requests while %s's queue was empty, it waited %.1f s to be scheduled",
				h.ahead, c.ids[h.idle], float64(wait)/1e6)}, int(h.inst))
	}
}

// backpressure counts a decode pull that waited at the head of decode
// instance i's queue for free KV blocks (P/D backpressure): the request
// had reached the instance waitUs before.
func (a *analysis) backpressure(c *Sim, i int, req, at, waitUs int64) {
	a.fleet.PDBackpressure.Add(1, anomaly.Example{AtUs: at, Instance: c.ids[i], Requests: []int64{req},
		Detail: fmt.Sprintf("the decode handoff of request %d waited %.1f ms in the decode queue, at its head for free KV blocks, before pulling its KV",
			req, float64(waitUs)/1e3)}, i)
}

// report is the run's anomalies: the instances' counters, the fleet's
// head-of-line blocking, and the scale oscillations the fleet counted
// (res.Fleet), with examples found again in its scale records.
func (a *analysis) report(c *Sim, res *Result) *anomaly.Report {
	r := anomaly.NewReport(a.th)
	for _, d := range a.det {
		if d != nil { // nil: folded (terminated.go)
			r.Merge(d.Report())
		}
	}
	if f := c.folds; f != nil && f.anomalies != nil {
		r.Merge(f.anomalies)
	}
	r.Merge(a.fleet)
	if c.cfg.Scaling == nil || !c.autoscaled() {
		r.ScaleOscillation.Note = "no autoscaler in this run: the fleet never scales"
	}
	if c.cfg.Disagg == nil {
		r.PDBackpressure.Note = "no prefill/decode disaggregation in this run: no decode pull to wait"
	}
	if f := res.Fleet; f != nil {
		osc := &r.ScaleOscillation
		for _, p := range f.Pools {
			osc.Count += p.Oscillations
		}
		type last struct {
			dir int
			at  int64
		}
		prev := map[string]last{}
		for _, s := range f.Records {
			dir := 1
			if s.To < s.From {
				dir = -1
			}
			if l, ok := prev[s.Pool]; ok && l.dir == -dir && s.AtUs-l.at < a.th.OscillationWindowUs {
				osc.Add(0, anomaly.Example{AtUs: s.AtUs, Pool: s.Pool, Detail: fmt.Sprintf("scaled %d -> %d %.0f s after scaling the other way (%s)",
					s.From, s.To, float64(s.AtUs-l.at)/1e6, s.Reason)}, 0)
			}
			prev[s.Pool] = last{dir, s.AtUs}
		}
	}
	return r
}

// tee is several observers, called in order.
type tee []sim.Observer

func (t tee) Arrived(spec *sim.RequestSpec) {
	for _, o := range t {
		o.Arrived(spec)
	}
}

func (t tee) Journey(ev *sim.JourneyEvent) {
	for _, o := range t {
		o.Journey(ev)
	}
}

func (t tee) Departed(req, atUs int64) {
	for _, o := range t {
		o.Departed(req, atUs)
	}
}

func (t tee) Dropped(req, atUs int64, reason string) {
	for _, o := range t {
		o.Dropped(req, atUs, reason)
	}
}

func (t tee) Aborted(req, atUs int64) {
	for _, o := range t {
		o.Aborted(req, atUs)
	}
}

func (t tee) Step(s *sim.StepSummary, snaps sim.SnapshotSource) {
	for _, o := range t {
		o.Step(s, snaps)
	}
}

func (t tee) KV(ev *sim.KVEvent) {
	for _, o := range t {
		o.KV(ev)
	}
}

// autoscaled says whether any pool has an autoscaler.
func (c *Sim) autoscaled() bool {
	for _, p := range c.cfg.Scaling.Pools {
		if p.Policy != nil {
			return true
		}
	}
	return false
}
