package sim

import "github.com/blis-sim/blis/physics"

// GEMM efficiency by shape (docs/simulator.md, "GEMM efficiency by
// shape"). On a card with a GEMM table (physics.GEMMShapes) the roofline
// runs each of a layer's projections at the share of the sustained GEMM
// rate its shape reaches: M is the step's tokens (the LM head's, its
// sampled requests), N and K the projection's output and input features
// on one tensor-parallel rank. The routed experts of a mixture-of-experts
// layer (grouped kernels, not in the table) stay at the sustained rate.

// gemmCost is the linear layers' FLOPs per token, each GEMM's divided by
// its shape's share, at the table's M values; between them it is
// interpolated linearly in M, and held at the ends.
type gemmCost struct {
	layers, head gemmCurve
}

type gemmCurve struct {
	m     []int64   // the table's M values, ascending
	flops []float64 // effective FLOPs per token at each
}

// newGEMMCost resolves the curves of table g for c's model and TP; nil
// when g is nil.
func newGEMMCost(c *physics.PhysicsConfig, g *physics.GEMMShapes) *gemmCost {
	if g == nil {
		return nil
	}
	m := c.Model
	tp := float64(c.TP)
	hd, inter := float64(m.HiddenSize), float64(m.IntermediateSize)
	up := float64(m.NMLPProj-1) * inter
	type gemm struct{ n, k, flops float64 } // flops per token, all ranks
	layer := []gemm{
		{(c.QDim + 2*c.KVDim) / tp, hd, 2 * hd * (c.QDim + 2*c.KVDim)}, // QKV
		{hd, c.QDim / tp, 2 * c.QDim * hd},                             // O
	}
	var atRate float64 // FLOPs per layer that stay at the sustained rate
	if m.IsMoE() {
		atRate = c.FlopsMLP
	} else {
		layer = append(layer, gemm{up / tp, hd, 2 * hd * up}, gemm{hd, inter / tp, 2 * inter * hd}) // up (gate and up fused), down
	}
	head := gemm{float64(m.VocabSize) / tp, hd, c.FlopsLMHead}
	L := float64(m.NumLayers)
	out := &gemmCost{}
	for _, mv := range g.Grid(0) {
		M := int64(mv)
		var f float64
		for _, x := range layer {
			f += x.flops / g.Share(mv, x.n, x.k)
		}
		out.layers.m = append(out.layers.m, M)
		out.layers.flops = append(out.layers.flops, L*(f+atRate))
		out.head.m = append(out.head.m, M)
		out.head.flops = append(out.head.flops, head.flops/g.Share(mv, head.n, head.k))
	}
	return out
}

// at is the curve at M tokens.
func (c *gemmCurve) at(M int64) float64 {
	n := len(c.m)
	switch {
	case M <= c.m[0]:
		return c.flops[0]
	case M >= c.m[n-1]:
		return c.flops[n-1]
	}
	i := 0
	for c.m[i+1] <= M {
		i++
	}
	f := float64(M-c.m[i]) / float64(c.m[i+1]-c.m[i])
	return c.flops[i] + (c.flops[i+1]-c.flops[i])*f
}
