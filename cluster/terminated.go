package cluster

import (
	"github.com/blis-sim/blis/cluster/anomaly"
	"github.com/blis-sim/blis/sim"
)

// Terminated instances (an autoscaled fleet). Each keeps its engine, its
// report entry and its anomaly detector until it is retired (its caches
// freed; scaling.go), and the first MaxTerminatedEntries retired keep their
// entries in Result.Instances. Beyond that cap, a retired instance is
// folded: its counters and latency histograms are added to its pool's
// TerminatedPool and to the cluster's totals, its anomaly counts to the
// cluster's, and its engine is dropped (the index keeps a shared empty
// engine in its place), so that memory and the report follow the live
// fleet, not every instance an autoscaler ever started (an oscillator
// once started 27,684 instances: 1 GB and a 48 MB report).

// MaxTerminatedEntries is how many terminated instances keep an entry of
// their own in Result.Instances; the rest are summed per pool in
// Result.TerminatedInstances.
const MaxTerminatedEntries = 256

// TerminatedPool is the instances of a pool that terminated beyond
// MaxTerminatedEntries, summed: how many, the requests the router sent
// them, and their counts and work.
type TerminatedPool struct {
	Pool      string `json:"pool"`
	Instances int64  `json:"instances"`
	Routed    int64  `json:"routed"`
	// Requests are the instances' request counts, added up.
	Requests     sim.Counts `json:"requests"`
	PromptTokens int64      `json:"prompt_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	Steps        int64      `json:"steps"`
	Preemptions  int64      `json:"preemptions"`
	BusyS        float64    `json:"busy_s"`
}

// totals are what the cluster's result adds up over the instances: their
// latency histograms, KV tiers, prompt and output tokens, preemptions,
// end and request counts.
type totals struct {
	hist    [4]sim.Histogram // TTFT, ITL, E2E, scheduling delay
	kvTiers *sim.KVTiersResult
	// prompt and cached are the prefix cache hit rate's terms; output the
	// output tokens delivered.
	prompt, cached, output, preemptions, end int64
	counts                                   sim.Counts
}

// add adds an instance's result. A disaggregated request's prompt counts
// once (its prefill's), and its tokens once (its decode's: the prefill's
// token is produced again there).
func (t *totals) add(r *sim.Result) {
	if r.KVTiers != nil {
		if t.kvTiers == nil {
			t.kvTiers = &sim.KVTiersResult{}
		}
		t.kvTiers.Add(r.KVTiers)
		t.kvTiers.PromptTokens -= r.RemotePromptTokens
	}
	for k, h := range [4]*sim.Histogram{r.Hist.TTFT, r.Hist.ITL, r.Hist.E2E, r.Hist.Sched} {
		t.hist[k].Merge(h)
	}
	t.prompt += r.PromptTokens - r.RemotePromptTokens
	t.cached += r.CachedPromptTokens
	t.output += r.OutputTokens - r.Requests.HandedOff
	t.preemptions += r.Preemptions
	t.end = max(t.end, r.EndUs)
	t.counts.Add(&r.Requests)
}

// merge adds o's totals.
func (t *totals) merge(o *totals) {
	if o.kvTiers != nil {
		if t.kvTiers == nil {
			t.kvTiers = &sim.KVTiersResult{}
		}
		t.kvTiers.Add(o.kvTiers)
	}
	for k := range t.hist {
		t.hist[k].Merge(&o.hist[k])
	}
	t.prompt += o.prompt
	t.cached += o.cached
	t.output += o.output
	t.preemptions += o.preemptions
	t.end = max(t.end, o.end)
	t.counts.Add(&o.counts)
}

// folded is what the folded instances leave: their totals, which Finish
// adds to the live instances', and per pool their sums.
type folded struct {
	totals
	entries int    // terminated instances keeping their entry
	is      []bool // by instance
	pools   map[string]*foldedPool
	order   []string // pools in the order they first folded an instance
	// promptCtr and genCtr are the engines' token counters (sim.Status),
	// which the time windows sum over the instances.
	promptCtr, genCtr int64
	anomalies         *anomaly.Report
	tomb              *sim.Engine // the shared empty engine of a folded index
}

type foldedPool struct {
	TerminatedPool
	role    Role // under disaggregation
	busySum float64
	remote  int64 // prompt tokens pulled (P/D)
}

// foldOrKeep is called when terminated instance i's engine has retired:
// it keeps its entry while fewer than MaxTerminatedEntries do, else it is
// folded.
func (c *Sim) foldOrKeep(i int) error {
	f := c.folds
	if f.entries < MaxTerminatedEntries {
		f.entries++
		return nil
	}
	r, err := c.eng[i].Finish()
	if err != nil {
		return err
	}
	if f.tomb == nil {
		f.tomb = sim.Empty()
	}
	if rc := r.Requests; rc.Offered != c.agg.routedTo[i] {
		c.fail("CL-1", "instance %s received %d requests; the router sent it %d", c.ids[i], rc.Offered, c.agg.routedTo[i])
	}
	p := f.pools[c.pools[i]]
	if p == nil {
		p = &foldedPool{TerminatedPool: TerminatedPool{Pool: c.pools[i]}}
		if c.pd != nil {
			p.role = c.pd.cfg.Pools[c.pd.pool[i]].Role
		}
		if f.pools == nil {
			f.pools = map[string]*foldedPool{}
		}
		f.pools[c.pools[i]] = p
		f.order = append(f.order, c.pools[i])
	}
	p.Instances++
	p.Routed += c.agg.routedTo[i]
	p.Requests.Add(&r.Requests)
	p.PromptTokens += r.PromptTokens
	p.OutputTokens += r.OutputTokens
	p.Steps += r.Steps
	p.Preemptions += r.Preemptions
	p.BusyS += float64(r.BusyUs) * 1e-6
	p.busySum += r.BusyFraction
	p.remote += r.RemotePromptTokens
	f.add(r)
	st := c.eng[i].Status()
	f.promptCtr += st.PromptTokens
	f.genCtr += st.GenerationTokens
	if d := c.an.det[i]; d != nil {
		if f.anomalies == nil {
			f.anomalies = anomaly.NewReport(c.an.th)
		}
		f.anomalies.Merge(d.Report())
		c.an.det[i] = nil
	}
	for len(f.is) <= i {
		f.is = append(f.is, false)
	}
	f.is[i] = true
	c.eng[i] = f.tomb
	c.fl.slow[i] = nil
	return nil
}

// isFolded says whether instance i was folded.
func (f *folded) isFolded(i int) bool { return f != nil && i < len(f.is) && f.is[i] }
