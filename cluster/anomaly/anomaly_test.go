package anomaly

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// ev is one engine event, as a test script writes it.
type ev struct {
	kind  string // queued, scheduled, resumed, preempted, aborted, reload
	at    int64
	id    int64
	class sim.SLOClass
	enq   int64 // scheduled: the request's enqueue time
	n     int64 // reload: blocks thrashing
}

func feed(d *Detector, evs []ev) {
	for _, e := range evs {
		j := sim.JourneyEvent{Req: e.id, AtUs: e.at, Class: e.class, EnqueuedUs: e.enq}
		switch e.kind {
		case "queued":
			j.Kind, j.EnqueuedUs = sim.JourneyQueued, e.at
			d.Journey(&j)
		case "scheduled", "resumed":
			j.Kind, j.Resume = sim.JourneyScheduled, e.kind == "resumed"
			d.Journey(&j)
		case "preempted":
			j.Kind = sim.JourneyPreempted
			d.Journey(&j)
		case "aborted":
			d.Aborted(e.id, e.at)
		case "reload":
			d.KV(&sim.KVEvent{Kind: sim.KVLoad, AtUs: e.at, Req: e.id, Blocks: 2 * e.n, Thrashing: e.n})
		}
	}
}

const (
	rt = sim.SLORealtime
	in = sim.SLOInteractive
	no = sim.SLONone
	ba = sim.SLOBatch
)

func TestPriorityInversions(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []ev
		want int64
		ex   []int64 // the first example's requests
	}{
		{"fcfs order: none", []ev{{"queued", 1, 1, ba, 0, 0}, {"queued", 2, 2, rt, 0, 0}, {"scheduled", 5, 1, ba, 1, 0}, {"scheduled", 5, 2, rt, 2, 0}}, 0, nil},
		{"a batch request overtakes an older realtime one", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, ba, 0, 0}, {"scheduled", 5, 2, ba, 2, 0}, {"scheduled", 6, 1, rt, 1, 0}}, 1, []int64{2, 1}},
		{"no class is above batch", []ev{{"queued", 1, 1, no, 0, 0}, {"queued", 2, 2, ba, 0, 0}, {"scheduled", 5, 2, ba, 2, 0}}, 1, []int64{2, 1}},
		{"interactive and no class are equal", []ev{{"queued", 1, 1, in, 0, 0}, {"queued", 2, 2, no, 0, 0}, {"scheduled", 5, 2, no, 2, 0}}, 0, nil},
		{"queued at the same time: not before", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 1, 2, ba, 0, 0}, {"scheduled", 5, 2, ba, 1, 0}}, 0, nil},
		{"the realtime one was already scheduled", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, ba, 0, 0}, {"scheduled", 3, 1, rt, 1, 0}, {"scheduled", 5, 2, ba, 2, 0}}, 0, nil},
		{"the realtime one timed out", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, ba, 0, 0}, {"aborted", 3, 1, rt, 0, 0}, {"scheduled", 5, 2, ba, 2, 0}}, 0, nil},
		{"resumptions are not first schedulings", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, ba, 0, 0}, {"resumed", 5, 2, ba, 2, 0}}, 0, nil},
		{"one count per scheduling, the oldest bypassed named", []ev{{"queued", 1, 1, in, 0, 0}, {"queued", 2, 2, rt, 0, 0}, {"queued", 3, 3, ba, 0, 0},
			{"scheduled", 5, 3, ba, 3, 0}}, 1, []int64{3, 1}},
		{"out of queue order within a level (sjf)", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, rt, 0, 0}, {"queued", 3, 3, ba, 0, 0},
			{"scheduled", 4, 2, rt, 2, 0}, {"scheduled", 5, 1, rt, 1, 0}, {"scheduled", 6, 3, ba, 3, 0}}, 0, nil},
		{"the front left out of order, the next still waits", []ev{{"queued", 1, 1, rt, 0, 0}, {"queued", 2, 2, rt, 0, 0}, {"queued", 3, 3, ba, 0, 0},
			{"scheduled", 4, 2, rt, 2, 0}, {"scheduled", 6, 3, ba, 3, 0}}, 1, []int64{3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDetector("i0", 0, DefaultThresholds())
			feed(d, tc.evs)
			c := d.Report().PriorityInversion
			require.Equal(t, tc.want, c.Count)
			if tc.ex != nil {
				require.Equal(t, tc.ex, c.Examples[0].Requests)
			}
		})
	}
}

// TestInversionsMatchTheDefinition drives detectors with random event
// streams (several classes, queue orders that jump, aborts) and counts
// inversions again by the definition, pair by pair.
func TestInversionsMatchTheDefinition(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		type req struct {
			id, enq int64
			class   sim.SLOClass
		}
		var waiting []*req
		var evs []ev
		var want int64
		now, next := int64(0), int64(0)
		for step := 0; step < 300; step++ {
			now += int64(r.IntN(3))
			switch op := r.IntN(10); {
			case op < 4 || len(waiting) == 0:
				q := &req{id: next, enq: now, class: sim.SLOClass(r.IntN(4))}
				next++
				waiting = append(waiting, q)
				evs = append(evs, ev{"queued", now, q.id, q.class, 0, 0})
			case op < 9:
				k := 0 // mostly the front, sometimes any
				if r.IntN(3) == 0 {
					k = r.IntN(len(waiting))
				}
				q := waiting[k]
				waiting = append(waiting[:k], waiting[k+1:]...)
				for _, h := range waiting {
					if Level(h.class) > Level(q.class) && h.enq < q.enq {
						want++
						break
					}
				}
				evs = append(evs, ev{"scheduled", now, q.id, q.class, q.enq, 0})
			default:
				k := r.IntN(len(waiting))
				q := waiting[k]
				waiting = append(waiting[:k], waiting[k+1:]...)
				evs = append(evs, ev{"aborted", now, q.id, q.class, 0, 0})
			}
		}
		d := NewDetector("i0", 0, DefaultThresholds())
		feed(d, evs)
		require.Equal(t, want, d.Report().PriorityInversion.Count, "seed %d", seed)
	}
}

func TestPreemptionStorms(t *testing.T) {
	th := DefaultThresholds()
	th.StormPreemptions, th.StormWindowUs = 3, 100
	burst := func(at int64, n int, gap int64) []ev {
		var out []ev
		for k := range n {
			out = append(out, ev{kind: "preempted", at: at + int64(k)*gap, id: at + int64(k)})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		evs  []ev
		want int64
	}{
		{"fewer than K", burst(0, 2, 1), 0},
		{"K within the window", burst(0, 3, 10), 1},
		{"K spread over exactly the window", burst(0, 3, 50), 0},
		{"a long storm counts once", burst(0, 20, 10), 1},
		{"two bursts", append(burst(0, 4, 10), burst(1000, 5, 10)...), 2},
		{"a steady trickle", burst(0, 50, 60), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDetector("i0", 0, th)
			feed(d, tc.evs)
			require.Equal(t, tc.want, d.Report().PreemptionStorm.Count)
			if tc.want > 0 {
				ex := d.Report().PreemptionStorm.Examples[0]
				require.Equal(t, tc.evs[0].at, ex.AtUs, "a storm is dated by its first preemption")
				require.Equal(t, tc.evs[0].id, ex.Requests[0])
			}
		})
	}
}

func TestKVThrashingAndExamples(t *testing.T) {
	d := NewDetector("instance_1", 1, DefaultThresholds())
	var evs []ev
	for k := int64(10); k > 0; k-- {
		evs = append(evs, ev{kind: "reload", at: 100 * k, id: k, n: k})
	}
	feed(d, evs)
	c := d.Report().KVThrashing
	require.Equal(t, int64(55), c.Count, "blocks")
	require.Len(t, c.Examples, MaxExamples)
	for k, ex := range c.Examples {
		require.Equal(t, int64(100*(k+1)), ex.AtUs, "the earliest examples, in time order")
		require.Equal(t, "instance_1", ex.Instance)
	}
}

// TestMergeKeepsTheFirstExamples: merged reports keep the first examples
// by (time, instance index), whatever the order of merging.
func TestMergeKeepsTheFirstExamples(t *testing.T) {
	th := DefaultThresholds()
	var parts []*Report
	for i := range 4 {
		r := NewReport(th)
		for k := range 3 {
			r.HOLBlocking.Add(1, Example{AtUs: int64(10*k + 5 - i), Detail: fmt.Sprint(i)}, i)
		}
		r.HOLBlocking.Add(1, Example{AtUs: 1, Detail: fmt.Sprint(i)}, i) // equal times: instance order
		parts = append(parts, r)
	}
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}} {
		m := NewReport(th)
		for _, i := range order {
			m.Merge(parts[i])
		}
		require.Equal(t, int64(16), m.HOLBlocking.Count)
		var got []string
		for _, ex := range m.HOLBlocking.Examples {
			got = append(got, fmt.Sprintf("%d/%s", ex.AtUs, ex.Detail))
		}
		require.Equal(t, []string{"1/0", "1/1", "1/2"}, got)
	}
	require.Len(t, NewReport(th).Counters(), 6)
	require.Equal(t, "pulls", NewReport(th).PDBackpressure.Unit)
}
