package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// TestRooflineGEMMShapes: with a GEMM table by shape, each projection of a
// layer runs at its shape's share of the sustained rate. Llama-3.1-8B on
// an H100 with XLA's sm_90 table: a 512-token prefill step's linear layers
// cost Σ FLOPs / share over QKV (N 6,144, K 4,096), O (4,096 × 4,096),
// gate and up (28,672 × 4,096) and down (4,096 × 14,336), the LM head at
// one row; a table of one rate everywhere changes nothing; a decode step
// whose weight read bounds it is unchanged.
func TestRooflineGEMMShapes(t *testing.T) {
	cfg := llamaH100(t)
	plain := DefaultRoofline(cfg)
	plain.Kernels = false // a GEMM table by shape refines the scalar bounds
	plain.StepOverheadUs, plain.PerRequestOverheadUs = 0, 0
	g, err := physics.LoadGEMMShapes("xla-sm90")
	require.NoError(t, err)
	shaped := *plain
	shaped.gemm = newGEMMCost(cfg, g)

	var pre Batch
	pre.Beta.AddPrefill(0, 512)
	m := cfg.Model
	hd, q, kv, I := float64(m.HiddenSize), cfg.QDim, cfg.KVDim, float64(m.IntermediateSize)
	require.Equal(t, [4]float64{4096, 4096, 1024, 14336}, [4]float64{hd, q, kv, I})
	layer := 2*hd*(q+2*kv)/g.Share(512, q+2*kv, hd) + 2*q*hd/g.Share(512, hd, q) +
		2*hd*2*I/g.Share(512, 2*I, hd) + 2*I*hd/g.Share(512, hd, I)
	head := cfg.FlopsLMHead / g.Share(1, float64(m.VocabSize), hd)
	fc := cfg.Hardware.SustainedTFlops() * 1e12 * plain.ComputeEfficiency
	linPlain := (512*(cfg.FlopsLinearPerToken-cfg.FlopsLMHead) + cfg.FlopsLMHead) / fc
	linShaped := (512*float64(m.NumLayers)*layer + head) / fc
	require.Greater(t, linShaped, 1.2*linPlain, "a 512-row GEMM is well below the 4,096³ rate")
	require.InDelta(t, linShaped-linPlain, shaped.StepSeconds(&pre)-plain.StepSeconds(&pre), 1e-12)

	flat, err := physics.ParseGEMMShapes([]byte("m,n,k,flops_per_s\n256,256,256,7e14\n4096,256,256,7e14\n"), "flat")
	require.NoError(t, err)
	same := *plain
	same.gemm = newGEMMCost(cfg, flat)
	require.InEpsilon(t, plain.StepSeconds(&pre), same.StepSeconds(&pre), 1e-12)

	var dec Batch
	for range 8 {
		dec.Beta.AddDecode(1000, 63)
	}
	require.Equal(t, plain.StepSeconds(&dec), shaped.StepSeconds(&dec), "8 rows: the weight read bounds the step either way")

	// Between the table's rows, linear in M.
	c := shaped.gemm.layers
	require.InDelta(t, (c.at(512)+c.at(1024))/2, c.at(768), 1e-6*c.at(768))
	require.Equal(t, c.at(256), c.at(1))
	require.Equal(t, c.at(4096), c.at(100000))
}
