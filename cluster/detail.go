package cluster

import (
	"strconv"

	"github.com/blis-sim/blis/sim"
)

// The detailed decision trace (--trace-level detailed) adds, beside the
// admission, routing, scale and counterfactual records, what each
// instance did, as it did it (frozen by testdata/detailed.golden.jsonl):
//
//	{"t_us":..,"type":"batch","instance":"instance_0","step":12,"duration_us":14210,"running":9,"waiting":3,
//	 "prefill_reqs":2,"decode_reqs":7,"scheduled_tokens":2055,"prefill_tokens":2048,"decode_tokens":7,
//	 "preempted":0,"finished":1,"kv_free_blocks":812,"kv_utilization":0.71}
//	{"t_us":..,"type":"preemption","instance":"instance_0","request":31,"step":12,"preemptions":1,
//	 "prefill_done":1024,"decode_done":17}
//	{"t_us":..,"type":"kv_transfer","instance":"instance_0","transfer":"offload","from_tier":"gpu","to_tier":"cpu","step":12,"blocks":40}
//	{"t_us":..,"type":"kv_transfer","instance":"instance_0","transfer":"reload","from_tier":"cpu","to_tier":"gpu","step":12,
//	 "blocks":16,"request":44,"thrashing":0}
//	{"t_us":..,"type":"kv_eviction","instance":"instance_0","tier":"cpu","step":12,"blocks":8}
//
// A batch record is one engine step (vLLM's step.BATCH_SUMMARY: the batch
// as scheduled at its start, t_us, lasting duration_us); a preemption is a
// request evicted by recompute while that step was scheduled, with its
// preemption count and progress; kv_transfer records are the blocks
// stored to the CPU tier under memory pressure (offload, copied during
// the next step) and read back for a request's prefix (reload; thrashing
// counts those stored less than sim.KVThrashWindowUs before); kv_eviction
// the CPU tier dropping blocks to make room. Records are written as the
// engines produce them, in the cluster's event order, so the file streams
// with memory bounded by the work in flight; the workers advance
// instances one at a time while it is written (parallel.go), so the file
// is the same for any worker count.

// detailRecorder writes one instance's records to the decision trace.
type detailRecorder struct {
	c    *Sim
	inst string
}

func (r *detailRecorder) head(t int64, kind string) []byte {
	b := append(r.c.dec.buf[:0], `{"t_us":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"type":"`...)
	b = append(b, kind...)
	b = append(b, `","instance":`...)
	return strconv.AppendQuote(b, r.inst)
}

func (r *detailRecorder) done(b []byte) {
	r.c.dec.buf = append(b, '}')
	r.c.dec.write()
}

func (r *detailRecorder) Arrived(*sim.RequestSpec)                      {}
func (r *detailRecorder) Departed(int64, int64)                         {}
func (r *detailRecorder) Dropped(int64, int64, string)                  {}
func (r *detailRecorder) Aborted(int64, int64)                          {}
func (r *detailRecorder) Step(s *sim.StepSummary, _ sim.SnapshotSource) { r.batch(s) }

func (r *detailRecorder) Journey(ev *sim.JourneyEvent) {
	if ev.Kind != sim.JourneyPreempted {
		return
	}
	b := r.head(ev.AtUs, "preemption")
	b = appendInt(b, "request", ev.Req)
	b = appendInt(b, "step", ev.Step)
	b = appendInt(b, "preemptions", ev.NumPreemptions)
	b = appendInt(b, "prefill_done", ev.PrefillDone)
	b = appendInt(b, "decode_done", ev.DecodeDone)
	r.done(b)
}

func (r *detailRecorder) batch(s *sim.StepSummary) {
	b := r.head(s.StartUs, "batch")
	b = appendInt(b, "step", s.ID)
	b = appendInt(b, "duration_us", s.CycleUs)
	b = appendInt(b, "running", s.Running)
	b = appendInt(b, "waiting", s.Waiting)
	b = appendInt(b, "prefill_reqs", s.NumPrefill)
	b = appendInt(b, "decode_reqs", s.NumDecode)
	b = appendInt(b, "scheduled_tokens", s.Scheduled)
	b = appendInt(b, "prefill_tokens", s.PrefillTok)
	b = appendInt(b, "decode_tokens", s.DecodeTok)
	b = appendInt(b, "preempted", s.NumPreempted)
	b = appendInt(b, "finished", s.NumFinished)
	b = appendInt(b, "kv_free_blocks", s.KVFree)
	b = appendFloat(b, "kv_utilization", s.KVUsage)
	r.done(b)
}

func (r *detailRecorder) KV(ev *sim.KVEvent) {
	var b []byte
	switch ev.Kind {
	case sim.KVStore:
		b = r.head(ev.AtUs, "kv_transfer")
		b = append(b, `,"transfer":"offload","from_tier":"gpu","to_tier":"cpu"`...)
	case sim.KVLoad:
		b = r.head(ev.AtUs, "kv_transfer")
		b = append(b, `,"transfer":"reload","from_tier":"cpu","to_tier":"gpu"`...)
	default:
		b = r.head(ev.AtUs, "kv_eviction")
		b = append(b, `,"tier":"cpu"`...)
	}
	b = appendInt(b, "step", ev.Step)
	b = appendInt(b, "blocks", ev.Blocks)
	if ev.Kind == sim.KVLoad {
		b = appendInt(b, "request", ev.Req)
		b = appendInt(b, "thrashing", ev.Thrashing)
	}
	r.done(b)
}
