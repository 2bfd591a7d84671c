package lru

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderMatchesASlice: random allocations, touches, unlinks and frees
// keep the list's order equal to a reference slice's (front first), and
// freed nodes are reused.
func TestOrderMatchesASlice(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	l := New[int]()
	var ref []int32 // front first
	walk := func() []int32 {
		var got []int32
		for n := l.Front(); n >= 0; n = l.Next(n) {
			got = append(got, n)
		}
		return got
	}
	for step := 0; step < 5000; step++ {
		switch k := r.IntN(4); {
		case k == 0 || len(ref) == 0:
			n := l.Alloc(step)
			l.PushFront(n)
			ref = slices.Insert(ref, 0, n)
			if *l.At(n) != step {
				t.Fatalf("value %d, want %d", *l.At(n), step)
			}
		case k == 1:
			n := ref[r.IntN(len(ref))]
			l.MoveToFront(n)
			ref = slices.Insert(slices.DeleteFunc(ref, func(x int32) bool { return x == n }), 0, n)
		default:
			n := l.Back()
			if k == 3 {
				n = ref[r.IntN(len(ref))]
			}
			l.Unlink(n)
			l.Free(n)
			ref = slices.DeleteFunc(ref, func(x int32) bool { return x == n })
		}
		if got := walk(); !slices.Equal(got, ref) {
			t.Fatalf("step %d: order %v, want %v", step, got, ref)
		}
		var back []int32
		for n := l.Back(); n >= 0; n = l.Prev(n) {
			back = slices.Insert(back, 0, n)
		}
		if !slices.Equal(back, ref) {
			t.Fatalf("step %d: backwards %v, want %v", step, back, ref)
		}
		if len(ref) > 0 && l.Back() != ref[len(ref)-1] {
			t.Fatalf("step %d: back %d, want %d", step, l.Back(), ref[len(ref)-1])
		}
	}
	if len(l.nodes) > 2*len(ref)+1000 {
		t.Fatalf("%d nodes for %d live: freed nodes not reused", len(l.nodes), len(ref))
	}
}
