package steady

import "math"

// MSER is the marginal standard error rule (White 1997; MSER-5 when the
// values are means of 5 observations, White, Cobb and Spratt 2000,
// Spratt 1998): the truncation point d that minimizes
//
//	MSER(d) = Σ_{i≥d} (zᵢ − z̄_d)² / (n − d)²
//
// the squared standard error of the mean of what remains, which falls
// as an initial bias is removed and rises again once deleting only
// costs data. d is searched over the first half of the series, as the
// rule's authors advise (a truncation past it leaves too little); found
// is false when the minimum is that half's end, the statistic still
// falling there (the transient outlasts half the run: the run is too
// short, or the series never settles), or the series has fewer than
// mserMin values.
func MSER(z []float64) (d int, found bool) {
	n := len(z)
	if n < mserMin {
		return 0, false
	}
	// Shifted by the overall mean, so that the running sums do not lose
	// the variance to cancellation.
	m := mean(z)
	var s, ss float64
	best, bestD := math.Inf(1), 0
	stat := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		x := z[i] - m
		s += x
		ss += x * x
		k := float64(n - i)
		stat[i] = max(0, ss-s*s/k) / (k * k)
	}
	half := n / 2
	for i := 0; i <= half; i++ {
		if stat[i] < best {
			best, bestD = stat[i], i
		}
	}
	return bestD, bestD < half
}

const (
	// mserMin is the fewest values the rule is applied to.
	mserMin = 10
)
