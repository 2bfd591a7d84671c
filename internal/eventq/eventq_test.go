package eventq

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPopsInOrder: random pushes, pops and removes against a sorted
// reference: events pop by (time, kind, push order), whatever the
// interleaving, with many ties.
func TestPopsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q Queue[int]
	var ref []Event[int]
	byOrder := func(a, b Event[int]) int {
		if a.Before(&b) {
			return -1
		}
		if b.Before(&a) {
			return 1
		}
		return 0
	}
	id := 0
	for step := 0; step < 20_000; step++ {
		switch k := r.IntN(10); {
		case k < 5:
			at, kind := int64(r.IntN(50)), uint8(r.IntN(3))
			q.Push(at, kind, id)
			ref = append(ref, Event[int]{At: at, Kind: kind, Seq: uint64(id + 1), P: id})
			id++
		case k < 9 && len(ref) > 0:
			slices.SortFunc(ref, byOrder)
			got := q.Pop()
			if got != ref[0] {
				t.Fatalf("step %d: popped %+v, want %+v", step, got, ref[0])
			}
			ref = ref[1:]
		case len(ref) > 0:
			victim := ref[r.IntN(len(ref))].P
			if !q.Remove(func(e *Event[int]) bool { return e.P == victim }) {
				t.Fatalf("step %d: %d not removed", step, victim)
			}
			ref = slices.DeleteFunc(ref, func(e Event[int]) bool { return e.P == victim })
		}
		if q.Len() != len(ref) {
			t.Fatalf("step %d: %d queued, want %d", step, q.Len(), len(ref))
		}
	}
	if q.Remove(func(e *Event[int]) bool { return e.P == -1 }) {
		t.Fatal("removed an event never pushed")
	}
}
