package sim

import "math/bits"

// arrayPool recycles the per-request arrays (block tables, hash chains,
// holder records) of requests that have left, by power-of-two capacity,
// so that an engine in steady state allocates none: the arrays follow the
// requests in flight, whatever slot a request lands in and however its
// length compares with the slot's last request's.
type arrayPool[T any] struct {
	free [64][][]T // free[k]: arrays of capacity 2^k, length 0
}

// grow returns s with room for n more elements: s itself if it has it,
// else a pooled (or new) array of the next power-of-two capacity holding
// s's elements, s going back to the pool.
func (p *arrayPool[T]) grow(s []T, n int64) []T {
	need := int64(len(s)) + n
	if need <= int64(cap(s)) {
		return s
	}
	k := bits.Len64(uint64(need - 1))
	var t []T
	if st := p.free[k]; len(st) > 0 {
		t = st[len(st)-1]
		st[len(st)-1] = nil
		p.free[k] = st[:len(st)-1]
	} else {
		t = make([]T, 0, 1<<k)
	}
	t = append(t, s...)
	p.put(s)
	return t
}

// put gives s back to the pool (arrays it did not hand out are dropped).
func (p *arrayPool[T]) put(s []T) {
	if c := cap(s); c > 0 && c&(c-1) == 0 {
		k := bits.TrailingZeros(uint(c))
		p.free[k] = append(p.free[k], s[:0])
	}
}
