package steady

import "math"

// Series is one per-request metric in the order the requests finished,
// in bounded memory: at most maxCells cells, each the sum of m
// consecutive observations (a numerator and a denominator: the value and
// 1, or for a ratio such as the inter-token latency a request's summed
// gaps and their count) with the times of its first and last
// observation. When the cells are full, neighbours merge in pairs and m
// doubles, so the cells always hold the whole run in 256 to 512 equal
// parts (Fishman's and Yarberry's batch doubling, 1997). A quantile
// series also keeps a histogram per section of cellsPerSection cells,
// merged in pairs with them, for the sectioning intervals of
// percentiles.
type Series struct {
	m     int64 // observations per cell
	cells []cell
	open  cell
	quant bool
	// hists are the closed sections' histograms, open the open section's,
	// free the reset ones kept for reuse.
	hists []*Hist
	sect  *Hist
	free  []*Hist
}

type cell struct {
	num, den    float64
	n           int64
	first, last int64 // µs
}

const (
	// maxCells bounds a series; mserBase is the observations per cell
	// until they fill (MSER-5).
	maxCells = 512
	mserBase = 5
	// cellsPerSection is the cells per section of a quantile series: at
	// most 64 histograms.
	cellsPerSection = 8
)

// NewSeries returns an empty series; quantiles keeps the histograms
// that percentiles need.
func NewSeries(quantiles bool) *Series {
	s := &Series{m: mserBase, quant: quantiles, cells: make([]cell, 0, maxCells)}
	if quantiles {
		s.sect = &Hist{}
	}
	return s
}

// Add records one observation v at time t (µs, not decreasing).
func (s *Series) Add(v int64, t int64) { s.add(float64(v), 1, v, t) }

// AddRatio records one observation of a ratio: num over den (den >= 0).
func (s *Series) AddRatio(num, den float64, t int64) { s.add(num, den, 0, t) }

func (s *Series) add(num, den float64, hv, t int64) {
	o := &s.open
	if o.n == 0 {
		o.first = t
	}
	o.num += num
	o.den += den
	o.n++
	o.last = t
	if s.quant {
		s.sect.Add(hv)
	}
	if o.n == s.m {
		s.close()
	}
}

func (s *Series) close() {
	s.cells = append(s.cells, s.open)
	s.open = cell{}
	if s.quant && len(s.cells)%cellsPerSection == 0 {
		s.hists = append(s.hists, s.sect)
		s.sect = s.newHist()
	}
	if len(s.cells) < maxCells {
		return
	}
	for i := range maxCells / 2 {
		a, b := s.cells[2*i], s.cells[2*i+1]
		s.cells[i] = cell{num: a.num + b.num, den: a.den + b.den, n: a.n + b.n, first: a.first, last: b.last}
	}
	s.cells = s.cells[:maxCells/2]
	s.m *= 2
	if s.quant {
		for i := range len(s.hists) / 2 {
			a, b := s.hists[2*i], s.hists[2*i+1]
			a.Merge(b)
			b.Reset()
			s.free = append(s.free, b)
			s.hists[i] = a
		}
		s.hists = s.hists[:len(s.hists)/2]
	}
}

func (s *Series) newHist() *Hist {
	if n := len(s.free); n > 0 {
		h := s.free[n-1]
		s.free = s.free[:n-1]
		return h
	}
	return &Hist{}
}

// Count is the observations recorded.
func (s *Series) Count() int64 {
	return int64(len(s.cells))*s.m + s.open.n
}

// window is the closed cells whose observations lie in [from, to]: from
// the first that starts at or after from, up to the last that ends at or
// before to.
func (s *Series) window(from, to int64) (lo, hi int) {
	lo = len(s.cells)
	for i, c := range s.cells {
		if c.first >= from {
			lo = i
			break
		}
	}
	hi = lo
	for hi < len(s.cells) && s.cells[hi].last <= to {
		hi++
	}
	return lo, hi
}

// means are the cells' means, for MSER.
func (s *Series) means(lo, hi int) []float64 {
	out := make([]float64, 0, hi-lo)
	for _, c := range s.cells[lo:hi] {
		if c.den > 0 {
			out = append(out, c.num/c.den)
		} else {
			out = append(out, 0)
		}
	}
	return out
}

// mean is the batch-means interval of the series' mean (or ratio) over
// the cells in [lo, hi).
func (s *Series) mean(lo, hi int) Interval {
	num, den := make([]float64, 0, hi-lo), make([]float64, 0, hi-lo)
	for _, c := range s.cells[lo:hi] {
		num, den = append(num, c.num), append(den, c.den)
	}
	return batchRatio(num, den)
}

// quantile is the sectioning interval of the p-quantile over the
// sections wholly in the cells [lo, hi): the p-quantile of their pooled
// histogram, with the t interval of the p-quantiles of k batches of
// sections (the batch-quantile method, Seila 1982, with the overall
// estimator at the centre, the sectioning of Asmussen and Glynn 2007,
// §III.5a), k halved from at most maxBatches until the batches' quantiles
// pass the test of independence, each batch holding at least
// 5/(1−p) observations (five beyond its quantile on average). No
// interval with fewer than minBatches such batches; ok false without
// sections.
func (s *Series) quantile(p float64, lo, hi int) (iv Interval, ok bool) {
	if !s.quant {
		return Interval{}, false
	}
	first := (lo + cellsPerSection - 1) / cellsPerSection
	last := hi / cellsPerSection // sections [first, last)
	if last > len(s.hists) {
		last = len(s.hists)
	}
	n := last - first
	if n <= 0 {
		return Interval{}, false
	}
	var all Hist
	for _, h := range s.hists[first:last] {
		all.Merge(h)
	}
	if all.n == 0 {
		return Interval{}, false
	}
	est := float64(all.Quantile(p))
	out := Interval{Estimate: est, Low: est, High: est}
	need := int64(5/(1-p) + 0.5)
	var b Hist
	var q []float64
	for k := min(n, maxBatches); k >= minBatches; k /= 2 {
		g := n / k
		if all.n/int64(k) < need {
			continue
		}
		skip := n - k*g
		q = q[:0]
		small := false
		for j := range k {
			b.Reset()
			for _, h := range s.hists[first+skip+j*g : first+skip+(j+1)*g] {
				b.Merge(h)
			}
			if b.n < need {
				small = true
				break
			}
			q = append(q, float64(b.Quantile(p)))
		}
		if small {
			continue
		}
		indep := independent(q)
		if !indep && k/2 >= minBatches {
			continue
		}
		m := mean(q)
		var ss float64
		for _, x := range q {
			ss += (x - m) * (x - m)
		}
		h := tTwoSided(k-1) * math.Sqrt(ss/float64(k-1)/float64(k))
		return Interval{Estimate: est, Low: est - h, High: est + h, Batches: k, Independent: indep}, true
	}
	return out, true
}
