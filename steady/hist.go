package steady

import "github.com/blis-sim/blis/internal/loglin"

// Hist counts non-negative integers (µs) exactly below 256 and in 128
// buckets per power of two above, so that a bucket is at most 1/128 of
// its values wide and a quantile read from a bucket's midpoint is within
// 0.4 % of the value. It keeps only the buckets from the lowest to the
// highest used: latencies between 10 ms and 2 s cost about 1,000
// counters.
type Hist struct {
	lo       int // the bucket index of counts[0]
	counts   []int64
	n        int64
	min, max int64
}

// histBits sets the layout (package loglin): values below 256 are their
// own bucket, 128 buckets per power of two above.
const histBits = 8

// Add counts v (negative values count as 0).
func (h *Hist) Add(v int64) {
	v = max(v, 0)
	i := loglin.Index(v, histBits)
	switch {
	case len(h.counts) == 0:
		h.lo = i
		h.counts = append(h.counts[:0], 0)
	case i < h.lo:
		grow := h.lo - i
		h.counts = append(h.counts, make([]int64, grow)...)
		copy(h.counts[grow:], h.counts)
		clear(h.counts[:grow])
		h.lo = i
	case i-h.lo >= len(h.counts):
		h.counts = append(h.counts, make([]int64, i-h.lo+1-len(h.counts))...)
	}
	h.counts[i-h.lo]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
}

// Merge adds o's values to h.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.n == 0 {
		return
	}
	if h.n == 0 {
		h.lo = o.lo
		h.counts = append(h.counts[:0], o.counts...)
		h.n, h.min, h.max = o.n, o.min, o.max
		return
	}
	lo, hi := min(h.lo, o.lo), max(h.lo+len(h.counts), o.lo+len(o.counts))
	if lo < h.lo || hi > h.lo+len(h.counts) {
		c := make([]int64, hi-lo)
		copy(c[h.lo-lo:], h.counts)
		h.counts, h.lo = c, lo
	}
	for i, c := range o.counts {
		h.counts[o.lo+i-h.lo] += c
	}
	h.n += o.n
	h.min, h.max = min(h.min, o.min), max(h.max, o.max)
}

// Reset empties h and keeps its memory.
func (h *Hist) Reset() {
	h.counts = h.counts[:0]
	h.n, h.min, h.max, h.lo = 0, 0, 0, 0
}

// Count is the number of values added.
func (h *Hist) Count() int64 { return h.n }

// Quantile is the nearest-rank p-quantile, the ceil(p·n)-th smallest
// value: exact at the extremes, else its bucket's midpoint clamped to
// them; 0 when empty.
func (h *Hist) Quantile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	return loglin.Quantile(h.counts, h.lo, h.n, h.min, h.max, p, histBits)
}
