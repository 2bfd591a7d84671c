package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// LineFit is a non-negative straight line y = Base + PerUnit·x fitted by
// least squares, in microseconds.
type LineFit struct {
	N       int64   `json:"samples"`
	BaseUs  float64 `json:"base_us"`
	PerUnit float64 `json:"per_token_us"`
	// Method: "ols", "ols, slope clamped to 0" (a negative slope would give
	// long prompts a shorter delay), "ols, base clamped to 0", or "none"
	// (no samples: both 0).
	Method   string  `json:"method"`
	MAEUs    float64 `json:"mae_us"`
	MedianUs float64 `json:"median_us"`
}

// fitLine fits y ≥ 0 on x by least squares, with both coefficients kept
// non-negative as the coefficient file requires.
func fitLine(xs, ys []float64) LineFit {
	n := float64(len(xs))
	if len(xs) == 0 {
		return LineFit{Method: "none"}
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, s2 float64
	for i := range xs {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
		s2 += xs[i] * xs[i]
	}
	f := LineFit{N: int64(len(xs)), Method: "ols"}
	if sxx > 0 {
		f.PerUnit = sxy / sxx
	}
	f.BaseUs = my - f.PerUnit*mx
	switch {
	case f.PerUnit < 0:
		f.PerUnit, f.BaseUs, f.Method = 0, my, "ols, slope clamped to 0"
	case f.BaseUs < 0:
		f.BaseUs, f.Method = 0, "ols, base clamped to 0"
		f.PerUnit = 0
		if s2 > 0 {
			var sxy0 float64
			for i := range xs {
				sxy0 += xs[i] * ys[i]
			}
			f.PerUnit = max(0, sxy0/s2)
		}
	}
	var ae []float64
	for i := range xs {
		ae = append(ae, math.Abs(ys[i]-(f.BaseUs+f.PerUnit*xs[i])))
	}
	var sum float64
	for _, a := range ae {
		sum += a
	}
	f.MAEUs = sum / n
	f.MedianUs = medianOf(ys)
	return f
}

// overheadSamples collects ARRIVED→QUEUED against prompt tokens and
// FINISHED→DEPARTED against output tokens, in microseconds.
func overheadSamples(tr *Trace, arrX, arrY, depX, depY *[]float64, skipped *[]Count) {
	for _, r := range tr.Requests {
		if d := (r.QueuedS - r.ArrivedS) * 1e6; r.Prompt > 0 && d >= 0 {
			*arrX = append(*arrX, float64(r.Prompt))
			*arrY = append(*arrY, d)
		} else if !math.IsNaN(d) {
			addCount(skipped, "arrival: QUEUED before ARRIVED or no prompt tokens", 1)
		}
		if d := (r.DepartedS - r.FinishedS) * 1e6; r.Output >= 0 && d >= 0 {
			*depX = append(*depX, float64(r.Output))
			*depY = append(*depY, d)
		} else if !math.IsNaN(d) {
			addCount(skipped, "departure: DEPARTED before FINISHED or no output tokens", 1)
		}
	}
}

// envelopeBins is the number of bins of fitLowerEnvelope.
const (
	envelopeBins = 10
)

// fitLowerEnvelope fits the arrival overhead, api.ARRIVED →
// journey.QUEUED. vLLM's engine core adds new requests to its scheduler
// only between steps (docs/simulator.md, "Request pipeline"), so that delay
// is the API-side processing plus a wait for the running step to end,
// anywhere in [0, step time) when the engine was busy and 0 when it was
// idle. A least-squares line through all samples would count half a step
// as processing, and the simulator, which waits for the step itself, would
// count it twice. The processing is the delay's lower envelope: the
// samples are cut into envelopeBins bins of equal count by prompt length,
// each bin gives its median prompt length and its smallest delay (the
// request that waited least), and fitLine fits those points. It
// overestimates the processing by the smallest wait of a bin, a small
// share of a step when the bins hold tens of requests.
func fitLowerEnvelope(xs, ys []float64) LineFit {
	n := len(xs)
	if n == 0 {
		return LineFit{Method: "none"}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	bins := min(envelopeBins, max(1, n/20))
	var bx, by []float64
	for b := 0; b < bins; b++ {
		lo, hi := b*n/bins, (b+1)*n/bins
		var px, py []float64
		for _, i := range idx[lo:hi] {
			px = append(px, xs[i])
			py = append(py, ys[i])
		}
		bx = append(bx, medianOf(px))
		by = append(by, slices.Min(py))
	}
	f := fitLine(bx, by)
	f.Method = fmt.Sprintf("lower envelope (minimum of %d prompt-length bins), %s", bins, f.Method)
	f.N = int64(n)
	// MAE and median describe the samples, not the bin points.
	var sum float64
	for i := range xs {
		sum += math.Abs(ys[i] - (f.BaseUs + f.PerUnit*xs[i]))
	}
	f.MAEUs = sum / float64(n)
	f.MedianUs = medianOf(ys)
	return f
}
