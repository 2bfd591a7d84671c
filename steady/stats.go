package steady

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the two-sided level of every interval: 95 %.
const Confidence = 0.95

// Interval is an estimate with its 95 % confidence interval. A value
// without an interval has Low = High = Estimate and Batches 0, and Why
// says what it lacks (the JSON then omits the interval).
type Interval struct {
	Estimate float64 `json:"estimate"`
	Low      float64 `json:"ci_low"`
	High     float64 `json:"ci_high"`
	// Batches is the number of batch means (or of replications) the
	// interval rests on; Independent is false when even the fewest
	// batches failed the test of independence (their means correlate:
	// the interval is likely too narrow).
	Batches     int  `json:"batches"`
	Independent bool `json:"batches_independent"`
}

// HalfWidth is half the interval's width.
func (iv Interval) HalfWidth() float64 { return (iv.High - iv.Low) / 2 }

// Has reports whether the value has an interval.
func (iv Interval) Has() bool { return iv.Batches > 0 }

// Relative is the half-width relative to the estimate's magnitude (+Inf
// for an estimate of 0 with a positive width, 0 for an interval of no
// width).
func (iv Interval) Relative() float64 {
	h := iv.HalfWidth()
	if h == 0 {
		return 0
	}
	return h / math.Abs(iv.Estimate)
}

// Contains reports whether x lies in the interval.
func (iv Interval) Contains(x float64) bool { return iv.Low <= x && x <= iv.High }

// tQuantile is Student's t distribution's p-quantile with df degrees of
// freedom (df >= 1).
func tQuantile(p float64, df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(p)
}

// tTwoSided is the t quantile of a two-sided 95 % interval.
func tTwoSided(df int) float64 { return tQuantile(1-(1-Confidence)/2, df) }

// Replicate is the replication interval of independent estimates (Law &
// Kelton, §9.4.1): their mean ± t(n−1) · s/√n. Fewer than two estimates
// give no interval.
func Replicate(xs []float64) Interval {
	n := len(xs)
	if n == 0 {
		return Interval{}
	}
	m := mean(xs)
	if n < 2 {
		return Interval{Estimate: m, Low: m, High: m}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	h := tTwoSided(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	return Interval{Estimate: m, Low: m - h, High: m + h, Batches: n, Independent: true}
}

// Pool is the mean of independent estimates, each with its own 95 %
// interval, with the interval of the mean: half-width √(Σ hᵢ²) / n. The
// mean's variance is Σ seᵢ² / n²; adding the half-widths in quadrature
// uses each estimate's own t quantile, which is larger than the pooled
// one's would be, so the interval is conservative. All must have an
// interval.
func Pool(ivs []Interval) Interval {
	n := float64(len(ivs))
	if n == 0 {
		return Interval{}
	}
	var sum, h2 float64
	indep := true
	batches := 0
	for _, iv := range ivs {
		sum += iv.Estimate
		h2 += iv.HalfWidth() * iv.HalfWidth()
		indep = indep && iv.Independent
		batches += iv.Batches
	}
	m, h := sum/n, math.Sqrt(h2)/n
	return Interval{Estimate: m, Low: m - h, High: m + h, Batches: batches, Independent: indep}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Batch means. The batches must be long enough for their means to be
// about independent; the test is von Neumann's ratio on successive
// means (von Neumann 1941; the lag-1 test of Fishman's LBATCH, Fishman
// and Yarberry 1997; Law & Kelton §9.5.3): C = 1 − Σ(xⱼ − xⱼ₊₁)² / (2
// Σ(xⱼ − x̄)²) is about normal with mean 0 and variance (k−2)/(k²−1)
// for k independent normal means, and large when they correlate
// positively. Starting from maxBatches batches the procedure halves
// their number (doubling their length) until the test accepts, down to
// minBatches (Schmeiser 1982: 10 to 30 batches).
const (
	maxBatches = 40
	minBatches = 10
	// independenceAlpha is the test's one-sided level (LBATCH's 0.10).
	independenceAlpha = 0.10
)

// independent is von Neumann's test of k means: true when their lag-1
// correlation is not significantly positive.
func independent(x []float64) bool {
	k := len(x)
	if k < 3 {
		return false
	}
	m := mean(x)
	var num, den float64
	for j := range x {
		den += (x[j] - m) * (x[j] - m)
		if j+1 < k {
			d := x[j] - x[j+1]
			num += d * d
		}
	}
	if den == 0 {
		return true // constant means: nothing correlates
	}
	c := 1 - num/(2*den)
	sd := math.Sqrt(float64(k-2) / float64(k*k-1))
	return c <= distuv.UnitNormal.Quantile(1-independenceAlpha)*sd
}

// batchRatio is the batch-means interval of Σnum / Σden over cells (a
// plain mean when each den counts its cell's observations; a ratio
// estimator, Law & Kelton §9.5's ratio of two means, otherwise): the
// cells are grouped into k batches of g consecutive cells, the first n −
// k·g cells dropped (those nearest the warm-up), and the interval is
// r ± t(k−1) · s_e / (√k · D̄) with eⱼ = Nⱼ − r_b·Dⱼ the batches' residuals
// around their own ratio r_b, r the ratio over every cell.
// It reports no interval with fewer than minBatches cells, or when the
// denominator is 0.
func batchRatio(num, den []float64) Interval {
	n := len(num)
	var totN, totD float64
	for i := range num {
		totN += num[i]
		totD += den[i]
	}
	if totD == 0 {
		return Interval{}
	}
	r := totN / totD
	out := Interval{Estimate: r, Low: r, High: r}
	if n < minBatches {
		return out
	}
	var bn, bd, x []float64
	for k := min(n, maxBatches); k >= minBatches; k /= 2 {
		g := n / k
		skip := n - k*g
		bn, bd, x = bn[:0], bd[:0], x[:0]
		var sn, sd float64
		for j := range k {
			var a, b float64
			for i := skip + j*g; i < skip+(j+1)*g; i++ {
				a += num[i]
				b += den[i]
			}
			bn, bd = append(bn, a), append(bd, b)
			sn += a
			sd += b
			if b > 0 {
				x = append(x, a/b)
			} else {
				x = append(x, r)
			}
		}
		if sd == 0 {
			return out
		}
		ok := independent(x)
		if !ok && k/2 >= minBatches {
			continue
		}
		est := sn / sd
		var se2 float64
		for j := range k {
			e := bn[j] - est*bd[j]
			se2 += e * e
		}
		dbar := sd / float64(k)
		h := tTwoSided(k-1) * math.Sqrt(se2/float64(k-1)/float64(k)) / dbar
		// Centred on the estimate over every cell: the cells dropped to make
		// equal batches are data too.
		return Interval{Estimate: r, Low: r - h, High: r + h, Batches: k, Independent: ok}
	}
	return out
}
