package physics

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kernel model's arithmetic, by hand: a GEMM's time is its latency
// plus the smooth maximum of its stream and its FLOPs; zero work costs
// nothing; the time grows with every dimension; it stays finite (or +Inf)
// for absurd inputs instead of NaN.
func TestKernelArithmetic(t *testing.T) {
	h, err := LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := h.Kernels()
	require.InDelta(t, 3.35e12, k.BwPeak, 1)
	require.InDelta(t, 726.4e12, k.GEMMRate, 1)

	// One token through Llama-2-7B's QKV (4096 × 12288): weight-bound.
	mem := 2 * (12288*4096 + 4096 + 12288) / (GEMMBandwidthShare * k.BwPeak)
	cmp := 2 * 12288 * 4096 / (GEMMRateShare * k.GEMMRate)
	want := GEMMLatencyUs*1e-6 + math.Pow(math.Pow(mem, GEMMBlend)+math.Pow(cmp, GEMMBlend), 1/GEMMBlend)
	assert.InDelta(t, want, k.GEMMSeconds(1, 12288, 4096, 2), 1e-15)
	// Vidur measured 38 µs for it (testdata/vidur/compute/h100/meta-llama/Llama-2-7b-hf).
	assert.InDelta(t, 38e-6, k.GEMMSeconds(1, 12288, 4096, 2), 4e-6)

	assert.Zero(t, k.GEMMSeconds(0, 12288, 4096, 2))
	assert.Zero(t, k.ElementwiseSeconds(OpNorm, 0))
	assert.Zero(t, k.AttentionSeconds(0, 0, 0))
	prev := 0.0
	for _, m := range []float64{1, 8, 64, 256, 1024, 4096, 1 << 20} {
		g := k.GEMMSeconds(m, 4096, 4096, 2)
		assert.Greater(t, g, prev, "a GEMM of %g rows", m)
		prev = g
	}
	for _, x := range []float64{1e300, math.MaxFloat64, math.Inf(1)} {
		g := k.GEMMSeconds(x, x, x, 2)
		assert.False(t, math.IsNaN(g), "GEMM of %g", x)
		assert.False(t, math.IsNaN(k.ElementwiseSeconds(OpAct, x)))
		assert.False(t, math.IsNaN(k.AttentionSeconds(x, x, x)))
	}
	// Elementwise: latency plus bytes at the op's share.
	lat, share := ElementwiseConstants(OpRope)
	assert.InDelta(t, lat*1e-6+1e6/(share*k.BwPeak), k.ElementwiseSeconds(OpRope, 1e6), 1e-18)
}

// What each elementwise op of a layer moves on one tensor-parallel rank:
// the norm works on the whole hidden state whatever the TP degree; the
// rotary embedding and the activation on the rank's share.
func TestElementwiseBytesByTP(t *testing.T) {
	m, err := LoadModel("llama-2-70b")
	require.NoError(t, err)
	h, err := LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := DefaultVLLMKnobs()
	k.TotalKVBlocksGPU = 1 << 20
	c1, err := NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	c4, err := NewPhysicsConfig(m, h, 4, k)
	require.NoError(t, err)
	assert.Equal(t, 4*100*8192*2.0, c1.ElementwiseBytes(OpNorm, 100))
	assert.Equal(t, c1.ElementwiseBytes(OpNorm, 100), c4.ElementwiseBytes(OpNorm, 100), "norms are not sharded")
	assert.Equal(t, 3*100*28672*2.0, c1.ElementwiseBytes(OpAct, 100))
	assert.InDelta(t, c1.ElementwiseBytes(OpAct, 100)/4, c4.ElementwiseBytes(OpAct, 100), 1e-9)
	assert.Equal(t, 2*100*(8192+1024)*2.0, c1.ElementwiseBytes(OpRope, 100))
	assert.InDelta(t, c1.ElementwiseBytes(OpRope, 100)/4, c4.ElementwiseBytes(OpRope, 100), 1e-9)
	mix, err := LoadModel("mixtral-8x7b")
	require.NoError(t, err)
	cm, err := NewPhysicsConfig(mix, h, 2, k)
	require.NoError(t, err)
	assert.Zero(t, cm.ElementwiseBytes(OpAct, 100), "a MoE's activation runs inside its fused expert kernel")
}
