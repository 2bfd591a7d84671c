package steady

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// fleet feeds c k single-server FIFO queues: n Poisson arrivals at
// lambda per second, the i-th sent to queue route(i), exponential
// service of meanUs. It returns the clock at the end.
func fleet(c *Collector, r *rand.Rand, n, k int, lambda, meanUs float64, route func(i int) int) int64 {
	type ev struct {
		at     int64
		arrive bool
		q      int
		req    Request
	}
	var evs []ev
	free := make([]int64, k)
	t := int64(0)
	for i := range n {
		t += int64(r.ExpFloat64() / lambda * 1e6)
		q := route(i)
		start := max(free[q], t)
		done := start + int64(meanUs*r.ExpFloat64())
		free[q] = done
		evs = append(evs, ev{at: t, arrive: true, q: q}, ev{at: done, q: q, req: Request{At: done, TTFTUs: done - t, E2EUs: done - t, SchedUs: start - t, OutputTokens: 1}})
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if evs[a].at != evs[b].at {
			return evs[a].at < evs[b].at
		}
		return evs[a].arrive && !evs[b].arrive
	})
	for _, e := range evs {
		if e.arrive {
			c.Arrive(e.at)
			c.Route(e.at, e.q)
			continue
		}
		c.Served(&e.req)
		c.Depart(e.at, e.q)
	}
	return evs[len(evs)-1].at
}

// An unstable fleet's cause: imbalance when the router overloads some
// instances while others keep up, even those it never picks (idle);
// capacity when every instance is overloaded.
func TestUnstableCause(t *testing.T) {
	ids := []string{"instance_0", "instance_1", "instance_2"}
	for _, tc := range []struct {
		name  string
		route func(i int) int
		rate  float64 // per second, the fleet's; each server serves 100
		want  string
		keeps []bool
	}{
		{"one instance gets everything, two idle", func(int) int { return 0 }, 150, CauseImbalance, []bool{false, true, true}},
		{"one overloaded, two lightly loaded", func(i int) int {
			if i%10 < 8 {
				return 0
			}
			return 1 + i%2
		}, 150, CauseImbalance, []bool{false, true, true}},
		{"every instance overloaded", func(i int) int { return i % 3 }, 450, CauseCapacity, []bool{false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 9))
			c := NewCollector(Config{Stationary: true, PerInstance: true, InstanceIDs: ids})
			end := fleet(c, r, 60_000, 3, tc.rate, 10_000, tc.route)
			st := c.Report(end).Stability
			require.Equal(t, Unstable, st.Verdict, st.Why)
			require.Equal(t, tc.want, st.Cause)
			require.Len(t, st.Instances, 3)
			for i, in := range st.Instances {
				require.Equal(t, ids[i], in.ID)
				require.Equal(t, tc.keeps[i], in.KeepsUp, "%s: %+v", in.ID, in)
			}
		})
	}
}
