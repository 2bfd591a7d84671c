package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// refQueue is the waiting queue as it was before the heap: a slice kept
// sorted on insertion (keyed) or in enqueue order with preempted requests
// at the front (FCFS), O(n) per operation. The heap and the ring must
// order exactly as it does.
type refQueue struct {
	keyed bool
	items []int32
	keys  map[int32]float64
}

func (q *refQueue) push(reqs []request, i int32, key float64) {
	if !q.keyed {
		q.items = append(q.items, i)
		return
	}
	q.keys[i] = key
	r := &reqs[i]
	pos := slices.IndexFunc(q.items, func(o int32) bool {
		ok, ro := q.keys[o], &reqs[o]
		switch {
		case ok != key:
			return ok > key
		case ro.spec.ArrivalUs != r.spec.ArrivalUs:
			return ro.spec.ArrivalUs > r.spec.ArrivalUs
		}
		return ro.spec.ID > r.spec.ID
	})
	if pos < 0 {
		pos = len(q.items)
	}
	q.items = slices.Insert(q.items, pos, i)
}

func (q *refQueue) remove(i int32) {
	k := slices.Index(q.items, i)
	q.items = slices.Delete(q.items, k, k+1)
}

// TestQueueOrdersAsSortedList drives the queue and the reference with the
// same random operations (arrivals, admissions from the front,
// preemptions back into the queue, aborts anywhere, slots reused) and
// requires the same front and length after each. Keys are drawn from a
// few values (and arrivals from few times) so that ties are frequent.
func TestQueueOrdersAsSortedList(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, 7))
			q := queue{keyed: keyed}
			ref := refQueue{keyed: keyed, keys: map[int32]float64{}}
			var reqs []request
			var free, out []int32 // free slots; requests taken out of the queue, not yet gone
			var nextID int64
			keys := []float64{math.Inf(-1), -1, 0, math.Copysign(0, -1), 2.5, math.Inf(1)}
			ops := 2000 + r.IntN(4000)
			for range ops {
				switch op := r.IntN(10); {
				case op < 4: // a new request in a fresh or reused slot
					var i int32
					if n := len(free); n > 0 && r.IntN(2) == 0 {
						i = free[n-1]
						free = free[:n-1]
						reqs[i] = request{}
					} else {
						reqs = append(reqs, request{})
						i = int32(len(reqs) - 1)
					}
					nextID += 1 + int64(r.IntN(3))
					reqs[i].spec = RequestSpec{ID: nextID, ArrivalUs: int64(r.IntN(5))}
					reqs[i].state = stQueued
					key := keys[r.IntN(len(keys))]
					q.push(&reqs[i], i, key)
					ref.push(reqs, i, key)
				case op < 7: // admission
					if q.len() == 0 {
						continue
					}
					i := q.front(reqs)
					require.Equal(t, ref.items[0], i)
					q.popFront(reqs)
					ref.items = ref.items[1:]
					reqs[i].state = stRunning
					out = append(out, i)
				case op < 8: // a preemption (keyed: by key; FCFS: to the front)
					if len(out) == 0 {
						continue
					}
					k := r.IntN(len(out))
					i := out[k]
					out = slices.Delete(out, k, k+1)
					reqs[i].state = stQueued
					if keyed {
						key := ref.keys[i]
						q.push(&reqs[i], i, key)
						ref.push(reqs, i, key)
					} else {
						q.pushFront(&reqs[i], i)
						ref.items = slices.Insert(ref.items, 0, i)
					}
				case op < 9: // an abort while queued
					if len(ref.items) == 0 {
						continue
					}
					i := ref.items[r.IntN(len(ref.items))]
					require.True(t, q.remove(reqs, i))
					require.False(t, q.remove(reqs, i), "removed twice")
					ref.remove(i)
					reqs[i].state = stFree
					free = append(free, i)
				default: // a request leaves after running
					if len(out) == 0 {
						continue
					}
					k := r.IntN(len(out))
					i := out[k]
					out = slices.Delete(out, k, k+1)
					require.False(t, q.remove(reqs, i), "not queued")
					reqs[i].state = stFree
					free = append(free, i)
				}
				require.Equal(t, len(ref.items), q.len())
				if q.len() > 0 {
					require.Equal(t, ref.items[0], q.front(reqs))
				}
			}
			var held []int32
			q.each(reqs, func(i int32) { held = append(held, i) })
			require.ElementsMatch(t, ref.items, held)
			for _, want := range ref.items {
				require.Equal(t, want, q.front(reqs))
				q.popFront(reqs)
			}
			require.Zero(t, q.len())
		}
	}
}
