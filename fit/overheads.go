package fit

import (
	"math"
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
