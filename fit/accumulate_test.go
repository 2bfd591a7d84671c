package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// tableDesign is a design over a fixed feature table: row i's features at
// γ index g are x[i] with column 0 replaced by g+1 times it.
type tableDesign struct {
	samples
	x [][]float64
}

func (d *tableDesign) base() *samples { return &d.samples }

func (d *tableDesign) features(i, g int, dst []float64) {
	copy(dst, d.x[i])
	dst[0] *= float64(g + 1)
}

func (d *tableDesign) featureSets(i int, xs [][]float64) {
	for g, x := range xs {
		d.features(i, g, x)
	}
}

// Chunked accumulation must give the statistics of one sequential pass over
// each configuration, up to summation order, and the same result twice.
func TestAccumulateChunksMatchOnePass(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const p, parts, gammas = 4, 3, 2
	var ds []design
	for _, n := range []int{0, 1, 37, 100} {
		d := &tableDesign{}
		for range n {
			d.x = append(d.x, []float64{r.Float64(), r.NormFloat64(), 1, r.Float64() * 10})
			d.y = append(d.y, r.NormFloat64())
			d.w = append(d.w, []float64{0.5, 1}[r.IntN(2)])
			d.part = append(d.part, uint8(r.IntN(parts)))
		}
		ds = append(ds, d)
	}
	one := accumulate(ds, p, parts, gammas) // every configuration is one chunk
	old := accumulateChunk
	t.Cleanup(func() { accumulateChunk = old })
	accumulateChunk = 8
	chunked := accumulate(ds, p, parts, gammas)
	require.Equal(t, chunked, accumulate(ds, p, parts, gammas), "chunked accumulation is not deterministic")
	for c := range ds {
		for k := range parts {
			for g := range gammas {
				a, b := one[c][k][g], chunked[c][k][g]
				require.Equal(t, a.N(), b.N(), "config %d part %d γ %d", c, k, g)
				near := func(x, y float64, what string) {
					require.LessOrEqual(t, math.Abs(x-y), 1e-12*max(1, math.Abs(x)), "%s: config %d part %d γ %d", what, c, k, g)
				}
				near(a.YTWY(), b.YTWY(), "y'Wy")
				for i := range p {
					near(a.XTWY(i), b.XTWY(i), "X'Wy")
					for j := i; j < p; j++ {
						near(a.XTWX(i, j), b.XTWX(i, j), "X'WX")
					}
				}
			}
		}
	}
	// γ index 1 doubles column 0, so its X'WX(0,0) is 4 times γ index 0's.
	require.InDelta(t, 4*one[3][0][0].XTWX(0, 0), one[3][0][1].XTWX(0, 0), 1e-9)
}
