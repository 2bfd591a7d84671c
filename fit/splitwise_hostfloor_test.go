package fit_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/fit"
)

// Where the splitwise evaluation's remaining error is, and one mechanism
// that explains most of it (docs/physics-spec.md, "Spec 3.0", what limits
// the transfer). The profile's engine (2023, eager PyTorch) launches every
// kernel from the host: the GPU runs them as they come, so a step takes
// the longer of the host's launch time and the GPU's work, not their sum.
// Spec 3.0 adds the two (its per-step constant, layer_latency, plus the
// GPU terms), which is right for a GPU-bound step and wrong for a
// host-bound one; the decode steps at TP 4 and 8 are host-bound (flat at
// ~28–32 ms on H100 and ~42–46 ms on A100 from batch 1 to 8, TP 4 or 8), so a
// fit on the others over-predicts the GPU share there.
//
// The test writes testdata/splitwise/host-floor.md (-update rewrites it):
// the spec 3.0 fit's leave-one-config-out bias by phase and size band,
// and the same protocol with the step priced as
//
//	max(host, gpu), host = (a + b·[prefill step]) × layer_latency,
//	gpu = c1·linear_compute_bound + c2·linear_memory_bound +
//	      c3·prefill_attention + c4·attention_read + c5·tp_comm_bandwidth +
//	      c6·layer_latency
//
// (spec 3.0's features; the ring-hop latency tp_comm_latency left out),
// fitted with the relative objective by alternating least squares: each
// step is assigned to the larger of the two pieces and each piece refitted
// on its steps, 50 rounds from each of 13 starting host floors, keeping
// the fit with the least training error. It is measured here, not a
// feature spec: the physics latency model and the Python twin price a
// step as one dot product.
func TestSplitwiseHostFloor(t *testing.T) {
	// The six Llama2-70B configurations checked in; with SplitwiseSim's
	// whole profile in testdata/splitwise/, the others (other models, the
	// power-capped H100) are predicted by fits on the six and logged.
	var cfgs, others []*swConfig
	for _, c := range splitwiseConfigs(t) {
		if c.model == "llama2-70b" && (c.hw == "a100-80gb" || c.hw == "h100-80gb") {
			cfgs = append(cfgs, c)
		} else {
			others = append(others, c)
		}
	}
	require.Len(t, cfgs, 6)
	all := func(int) bool { return true }
	type step struct {
		in  features.BetaInput
		f   [features.NumBetaV3]float64
		pre bool
		y   float64
		cfg int
	}
	var steps []step
	for ci, c := range cfgs {
		ss, _ := c.steps(all)
		for _, s := range ss {
			steps = append(steps, step{s.In, features.BetaFeaturesV3(c.phys, s.In), s.In.PrefillTokens > 0, s.Seconds, ci})
		}
	}
	hostCols := func(s step) []float64 {
		p := 0.0
		if s.pre {
			p = 1
		}
		return []float64{s.f[6], p * s.f[6]}
	}
	gpuCols := func(s step) []float64 { return []float64{s.f[0], s.f[1], s.f[2], s.f[3], s.f[4], s.f[6]} }
	type model struct{ host, gpu []float64 }
	dot := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	pred := func(m model, s step) (float64, bool) {
		h, g := dot(m.host, hostCols(s)), dot(m.gpu, gpuCols(s))
		return math.Max(h, g), h > g
	}
	fitFrom := func(tr []step, floor float64) model {
		var gx [][]float64
		var gy []float64
		for _, s := range tr {
			gx, gy = append(gx, gpuCols(s)), append(gy, s.y)
		}
		lin, ok := relativeLS(gx, gy)
		require.True(t, ok)
		if floor < 0 {
			floor = -floor * lin[5]
		}
		m := model{host: []float64{floor, 0}, gpu: append(slices.Clone(lin[:5]), 0)}
		for range 50 {
			var hx, gx [][]float64
			var hy, gy []float64
			for _, s := range tr {
				if _, host := pred(m, s); host {
					hx, hy = append(hx, hostCols(s)), append(hy, s.y)
				} else {
					gx, gy = append(gx, gpuCols(s)), append(gy, s.y)
				}
			}
			next := m
			// A piece whose steps do not determine it (too few, or all of
			// one phase) keeps its coefficients.
			if c, ok := relativeLS(hx, hy); ok {
				next.host = c
			}
			if c, ok := relativeLS(gx, gy); ok {
				next.gpu = c
			}
			m = next
		}
		return m
	}
	// fitTwo keeps, of the fits from 13 starting host floors, the one
	// with the least training error: 0.8 to 3 times the linear fit's
	// per-step constant, and the 5th to 50th percentiles of the decode
	// steps' time over layer_latency (alone, the percentile starts end in
	// fits of higher training error).
	fitTwo := func(tr []step) model {
		var best model
		bestLoss := math.Inf(1)
		var starts []float64
		for _, k := range []float64{0.8, 1, 1.2, 1.5, 2, 2.5, 3} {
			starts = append(starts, -k) // k × the linear fit's constant
		}
		var r []float64
		for _, s := range tr {
			if !s.pre {
				r = append(r, s.y/s.f[6])
			}
		}
		slices.Sort(r)
		for _, q := range []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5} {
			starts = append(starts, r[int(q*float64(len(r)-1))])
		}
		for _, st := range starts {
			m := fitFrom(tr, st)
			var loss float64
			for _, s := range tr {
				p, _ := pred(m, s)
				loss += (p - s.y) * (p - s.y) / (s.y * s.y)
			}
			if loss < bestLoss {
				best, bestLoss = m, loss
			}
		}
		return best
	}
	mape := func(m model, ss []step) (e float64, hostBound int) {
		for _, s := range ss {
			p, h := pred(m, s)
			e += math.Abs(p-s.y) / s.y
			if h {
				hostBound++
			}
		}
		return e / float64(len(ss)), hostBound
	}
	where := func(keep func(step) bool) (out []step) {
		for _, s := range steps {
			if keep(s) {
				out = append(out, s)
			}
		}
		return out
	}
	bands := []struct {
		name string
		in   func(s step) bool
	}{
		{"decode, batch 1–8", func(s step) bool { return !s.pre && s.in.NumDecodeReqs <= 8 }},
		{"decode, batch 16–64", func(s step) bool { return !s.pre && s.in.NumDecodeReqs >= 16 }},
		{"prefill, 128–256 tokens", func(s step) bool { return s.pre && s.in.PrefillTokens <= 256 }},
		{"prefill, 512–2,048", func(s step) bool { return s.pre && s.in.PrefillTokens >= 512 && s.in.PrefillTokens <= 2048 }},
		{"prefill, 4,096–32,768", func(s step) bool { return s.pre && s.in.PrefillTokens >= 4096 }},
	}

	var b bytes.Buffer
	b.WriteString("<!-- generated by: go test ./fit -run TestSplitwiseHostFloor -update -->\n")
	b.WriteString("Spec 3.0 (relative objective), each configuration predicted by a fit on the other five: mean signed error (+ is slower than measured) by phase and size.\n\n")
	b.WriteString("| configuration left out |")
	for _, bd := range bands {
		b.WriteString(" " + bd.name + " |")
	}
	b.WriteString(" MAPE |\n|---|---|---|---|---|---|---|\n")
	opt := fit.DefaultOptions()
	var linLOCO []float64
	for ci, c := range cfgs {
		var train []fit.StepConfig
		for _, o := range cfgs {
			if o != c {
				ss, _ := o.steps(all)
				train = append(train, fit.StepConfig{Name: o.name, Phys: o.phys, Steps: ss})
			}
		}
		coef, err := fit.FitSteps(train, opt)
		require.NoError(t, err)
		test := where(func(s step) bool { return s.cfg == ci })
		var abs float64
		for _, s := range test {
			x := features.Beta(opt.Spec, c.phys, s.in)
			abs += math.Abs(dot(coef, x[:len(coef)])-s.y) / s.y
		}
		linLOCO = append(linLOCO, abs/float64(len(test)))
		fmt.Fprintf(&b, "| %s |", c.name)
		for _, bd := range bands {
			var sum float64
			var n int
			for _, s := range test {
				if bd.in(s) {
					x := features.Beta(opt.Spec, c.phys, s.in)
					sum += (dot(coef, x[:len(coef)]) - s.y) / s.y
					n++
				}
			}
			fmt.Fprintf(&b, " %+.1f %% |", 100*sum/float64(n))
		}
		fmt.Fprintf(&b, " %.1f %% |\n", 100*linLOCO[ci])
	}
	// The evaluation's own figures for the same protocol.
	ref := evaluateSplitwise(t, cfgs, features.SpecV3, coefficients.ObjectiveRelative)
	require.InDeltaSlice(t, ref.loco, linLOCO, 1e-9, "the same protocol as TestSplitwiseEvaluation")

	b.WriteString("\nThe step as max(host, GPU), same protocol (the alternating fit of least training error from 13 starting host floors); host-bound: the left-out configuration's steps it prices by its host piece; host floor: a and a + b in ms on that configuration's GPU:\n\n")
	b.WriteString("| configuration left out | MAPE, spec 3.0 | MAPE, max(host, GPU) | host-bound steps | host floor, decode | host floor, prefill |\n|---|---|---|---|---|---|\n")
	var twoLOCO, floors []float64
	for ci, c := range cfgs {
		m := fitTwo(where(func(s step) bool { return s.cfg != ci }))
		test := where(func(s step) bool { return s.cfg == ci })
		e, hb := mape(m, test)
		twoLOCO = append(twoLOCO, e)
		ll := test[0].f[6]
		floors = append(floors, m.host[0])
		fmt.Fprintf(&b, "| %s | %.1f %% | %.1f %% | %d of %d | %.1f | %.1f |\n", c.name, 100*linLOCO[ci], 100*e, hb, len(test), 1e3*m.host[0]*ll, 1e3*(m.host[0]+m.host[1])*ll)
	}
	hw := func(name string) []step { return where(func(s step) bool { return cfgs[s.cfg].hw == name }) }
	cross := func(from, to string) float64 {
		e, _ := mape(fitTwo(hw(from)), hw(to))
		return e
	}
	aToH, hToA := cross("a100-80gb", "h100-80gb"), cross("h100-80gb", "a100-80gb")
	fmt.Fprintf(&b, "| **median** | **%.1f %%** | **%.1f %%** | | | |\n", 100*median(linLOCO), 100*median(twoLOCO))
	fmt.Fprintf(&b, "| worst | %.1f %% | %.1f %% | | | |\n", 100*slices.Max(linLOCO), 100*slices.Max(twoLOCO))
	fmt.Fprintf(&b, "| A100 → H100 | %.1f %% | %.1f %% | | | |\n", 100*ref.aToH, 100*aToH)
	fmt.Fprintf(&b, "| H100 → A100 | %.1f %% | %.1f %% | | | |\n", 100*ref.hToA, 100*hToA)
	t.Log("\n" + b.String())
	if len(others) > 0 {
		var train []fit.StepConfig
		for _, c := range cfgs {
			ss, _ := c.steps(all)
			train = append(train, fit.StepConfig{Name: c.name, Phys: c.phys, Steps: ss})
		}
		coef, err := fit.FitSteps(train, opt)
		require.NoError(t, err)
		m := fitTwo(steps)
		for _, c := range others {
			ss, _ := c.steps(all)
			var el, e2 float64
			for _, st := range ss {
				x := features.BetaFeaturesV3(c.phys, st.In)
				el += math.Abs(dot(coef, x[:len(coef)])-st.Seconds) / st.Seconds
				p, _ := pred(m, step{st.In, x, st.In.PrefillTokens > 0, st.Seconds, -1})
				e2 += math.Abs(p-st.Seconds) / st.Seconds
			}
			t.Logf("%s predicted by a fit on the six Llama2-70B configurations: MAPE %.1f %% (spec 3.0), %.1f %% (max(host, GPU))",
				c.name, 100*el/float64(len(ss)), 100*e2/float64(len(ss)))
		}
	}

	path := splitwiseDir + "host-floor.md"
	if *updateEval {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "stale %s: go test ./fit -run TestSplitwiseHostFloor -update", path)

	// What the measurement says, checked: the max predicts the worst
	// configuration and both GPU transfers better than the sum, and its
	// median no worse; the host floor it finds is one property of the
	// engine, the same whichever configuration is left out (within 5 %).
	require.Less(t, slices.Max(twoLOCO), slices.Max(linLOCO))
	require.LessOrEqual(t, median(twoLOCO), median(linLOCO))
	require.Less(t, aToH, ref.aToH)
	require.Less(t, hToA, ref.hToA)
	require.InDelta(t, 1, slices.Max(floors)/slices.Min(floors), 0.05, "host floor coefficient across folds: %v", floors)
}

// relativeLS solves min Σ ((x·c − y) / y)² by QR; false when the rows
// do not determine c (fewer than twice as many rows as columns, or a
// singular design).
func relativeLS(xs [][]float64, ys []float64) ([]float64, bool) {
	if len(xs) == 0 || len(xs) < 2*len(xs[0]) {
		return nil, false
	}
	n, p := len(xs), len(xs[0])
	a := mat.NewDense(n, p, nil)
	b := mat.NewVecDense(n, nil)
	for i := range xs {
		for j := range p {
			a.Set(i, j, xs[i][j]/ys[i])
		}
		b.SetVec(i, 1)
	}
	var qr mat.QR
	qr.Factorize(a)
	var c mat.VecDense
	if err := qr.SolveVecTo(&c, false, b); err != nil {
		return nil, false
	}
	return slices.Clone(c.RawVector().Data), true
}
