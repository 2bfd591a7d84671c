// Package loglin is the bucket arithmetic of the log-linear histograms
// (HdrHistogram's layout: Tene, "HdrHistogram: A High Dynamic Range
// Histogram", hdrhistogram.org): values below 2^bits are their own
// bucket, and each power of two above is split into 2^(bits-1) equal
// buckets, so a bucket is at most 2^-(bits-1) of its values wide and a
// quantile read from its midpoint is within half that of the value.
//
// The simulator's latency histograms (package sim, bits 10: within
// 0.1 %) and the output analysis's (package steady, bits 8: within
// 0.4 %) share it, with the nearest-rank quantile both read.
//
// Preconditions: v >= 0 and 2 <= bits <= 16; the functions do not check.
package loglin

import (
	"math"
	"math/bits"
)

// Index is the bucket of v >= 0.
func Index(v int64, b int) int {
	exact, sub := 1<<b, 1<<(b-1)
	if v < int64(exact) {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - b // keeps the leading b bits
	return exact + (shift-1)*sub + int(v>>shift) - sub
}

// Mid is the midpoint of bucket i's values.
func Mid(i int, b int) int64 {
	exact, sub := 1<<b, 1<<(b-1)
	if i < exact {
		return int64(i)
	}
	shift := (i-exact)/sub + 1
	lo := int64((i-exact)%sub+sub) << shift
	return lo + (int64(1)<<shift)/2
}

// NearestRank is the 1-based rank ceil(p·n) of the p-quantile among n
// values (Hyndman and Fan 1996, definition 1), within [1, n].
func NearestRank(p float64, n int64) int64 {
	k := int64(math.Ceil(p * float64(n)))
	return max(1, min(k, n))
}

// Quantile is the nearest-rank p-quantile of n > 0 values counted in
// counts, whose first entry is bucket lo: exact at the extremes (the
// values minV and maxV), else its bucket's midpoint clamped to them.
func Quantile(counts []int64, lo int, n, minV, maxV int64, p float64, b int) int64 {
	rank := NearestRank(p, n)
	switch rank {
	case 1:
		return minV
	case n:
		return maxV
	}
	var seen int64
	for i, c := range counts {
		if seen += c; seen >= rank {
			return max(minV, min(maxV, Mid(lo+i, b)))
		}
	}
	return maxV
}
