package cluster

import (
	"math/rand/v2"
	"testing"
)

// TestInstHeapOrder drives the instance heap with random sets (earlier,
// later, equal times, removals, new instances) and requires its top to be
// the instance with the earliest time, the lowest index among equal ones,
// after every change, and its length the number of instances with an
// event.
func TestInstHeapOrder(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 1 + r.IntN(40)
		h := newInstHeap(n)
		at := make([]int64, n)
		has := make([]bool, n)
		for step := range 5000 {
			if r.IntN(50) == 0 {
				h.grow()
				at, has = append(at, 0), append(has, false)
				n++
			}
			i := r.IntN(n)
			ok := r.IntN(6) != 0
			v := int64(r.IntN(20)) // few values: many ties
			h.set(i, v, ok)
			at[i], has[i] = v, ok
			want, wantAt, count := -1, int64(0), 0
			for k := range n {
				if !has[k] {
					continue
				}
				count++
				if want < 0 || at[k] < wantAt {
					want, wantAt = k, at[k]
				}
			}
			if h.len() != count {
				t.Fatalf("seed %d step %d: heap holds %d, want %d", seed, step, h.len(), count)
			}
			if count == 0 {
				continue
			}
			if got, gotAt := h.top(); got != want || gotAt != wantAt {
				t.Fatalf("seed %d step %d: top is instance %d at %d, want %d at %d", seed, step, got, gotAt, want, wantAt)
			}
		}
	}
}
