package cluster

import (
	"io"
	"slices"
	"strconv"

	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// The decision trace (--trace-level decisions): one JSON object per line,
// in decision order. Field names are frozen by a golden file
// (testdata/decisions.golden.jsonl).
//
//	{"t_us":0,"type":"admission","request":3,"tenant":0,"policy":"token-bucket","admitted":false,"reason":"..."}
//	{"t_us":0,"type":"routing","request":3,"tenant":0,"policy":"weighted","chosen":"instance_1",
//	 "chosen_score":0.8,"best_score":0.8,"regret":0,"candidates":[{"instance":"instance_1","score":0.8,
//	 "queue_depth":0,"batch_size":2,"in_flight":2,"kv_utilization":0.1,"free_kv_blocks":900,
//	 "cache_hit_rate":0.3,"scorers":{"prefix-affinity":1,"queue-depth":1,"kv-utilization":0.9}}]}
//
// Candidates are the top k instances by the policy's score (route.Policy's
// Score; −effective load for the policies without a scoring rule of their
// own), highest first, lowest index first among equals; their signals are
// what the decision saw. Regret is the best score minus the chosen
// instance's score, never negative (docs/cluster.md): 0 whenever the policy
// chooses by its own score, as weighted does.
//
// Each line is one Write to the caller's writer, so that a caller can
// interleave the trace with its own records; callers writing to a file
// should buffer.
type decisionWriter struct {
	w      io.Writer
	k      int
	buf    []byte
	scores []float64
	order  []int
	err    error
}

func newDecisionWriter(w io.Writer, k, n int) *decisionWriter {
	return &decisionWriter{w: w, k: k, scores: make([]float64, n), order: make([]int, n)}
}

func (d *decisionWriter) write() {
	d.buf = append(d.buf, '\n')
	if d.err == nil {
		_, d.err = d.w.Write(d.buf)
	}
}

func (d *decisionWriter) flush() error { return d.err }

func appendHead(b []byte, t int64, kind string, spec *sim.RequestSpec, policy string) []byte {
	b = append(b, `{"t_us":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"type":"`...)
	b = append(b, kind...)
	b = append(b, `","request":`...)
	b = strconv.AppendInt(b, spec.ID, 10)
	b = append(b, `,"tenant":`...)
	b = strconv.AppendInt(b, int64(spec.Tenant), 10)
	b = append(b, `,"policy":`...)
	return strconv.AppendQuote(b, policy)
}

func appendFloat(b []byte, key string, v float64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func (d *decisionWriter) admission(t int64, spec *sim.RequestSpec, policy string, ok bool, reason string) {
	b := appendHead(d.buf[:0], t, "admission", spec, policy)
	b = append(b, `,"admitted":`...)
	b = strconv.AppendBool(b, ok)
	if !ok {
		b = append(b, `,"reason":`...)
		b = strconv.AppendQuote(b, reason)
	}
	d.buf = append(b, '}')
	d.write()
}

// scale writes a scale action: {"t_us":..,"type":"scale","pool":..,
// "policy":..,"from":..,"to":..,"reason":..,"ready":..,"kv_utilization":..,
// "queue_depth":..,"running":..,"in_flight":..,"waiting":..,
// "slo_attainment":..}.
func (d *decisionWriter) scale(r *ScaleRecord) {
	b := append(d.buf[:0], `{"t_us":`...)
	b = strconv.AppendInt(b, r.AtUs, 10)
	b = append(b, `,"type":"scale","pool":`...)
	b = strconv.AppendQuote(b, r.Pool)
	b = append(b, `,"policy":`...)
	b = strconv.AppendQuote(b, r.Policy)
	b = appendInt(b, "from", int64(r.From))
	b = appendInt(b, "to", int64(r.To))
	b = append(b, `,"reason":`...)
	b = strconv.AppendQuote(b, r.Reason)
	b = appendInt(b, "ready", int64(r.Ready))
	b = appendFloat(b, "kv_utilization", r.KVUtilization)
	b = appendFloat(b, "queue_depth", r.QueueDepth)
	b = appendFloat(b, "running", r.Running)
	b = appendFloat(b, "in_flight", r.InFlight)
	b = appendInt(b, "waiting", r.Waiting)
	b = appendFloat(b, "slo_attainment", r.SLOAttainment)
	d.buf = append(b, '}')
	d.write()
}

func (d *decisionWriter) routing(t int64, req *route.Request, p route.Policy, v *route.View, ids []string, chosen int) {
	n := v.Len()
	if cap(d.scores) < n { // instances added by an autoscaler
		d.scores, d.order = make([]float64, n), make([]int, n)
	}
	scores, order := d.scores[:n], d.order[:n]
	p.Score(req, v, scores)
	// Candidates are the instances that take requests.
	order = order[:0]
	for _, i := range v.Indexes() {
		if v.OK(int(i)) {
			order = append(order, int(i))
		}
	}
	n = len(order)
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return a - b
	})
	best := scores[order[0]]
	regret := max(0, best-scores[chosen])
	b := appendHead(d.buf[:0], t, "routing", req.Spec, p.Name())
	b = append(b, `,"chosen":`...)
	b = strconv.AppendQuote(b, ids[chosen])
	b = appendFloat(b, "chosen_score", scores[chosen])
	b = appendFloat(b, "best_score", best)
	b = appendFloat(b, "regret", regret)
	b = append(b, `,"candidates":[`...)
	w, _ := p.(*route.Weighted)
	for j, i := range order[:min(d.k, n)] {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"instance":`...)
		b = strconv.AppendQuote(b, ids[i])
		b = appendFloat(b, "score", scores[i])
		b = appendInt(b, "queue_depth", v.QueueDepth[i])
		b = appendInt(b, "batch_size", v.BatchSize[i])
		b = appendInt(b, "in_flight", v.InFlight[i])
		b = appendFloat(b, "kv_utilization", v.KVUtilization[i])
		b = appendInt(b, "free_kv_blocks", v.FreeKVBlocks[i])
		b = appendFloat(b, "cache_hit_rate", v.CacheHitRate[i])
		if w != nil {
			b = append(b, `,"scorers":{`...)
			scorers, _ := w.Scorers()
			for k, s := range scorers {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendQuote(b, s.Name())
				b = append(b, ':')
				b = strconv.AppendFloat(b, w.Raw(k)[i], 'g', -1, 64)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	d.buf = append(b, "]}"...)
	d.write()
}
