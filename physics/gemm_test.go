package physics

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGEMMShapesReproducesTheTable: at every grid point the interpolated
// rate is the table's (XLA's sm_90 measurements, rounded only by ln/exp),
// and three of the table's figures are quoted in the H100 docs.
func TestGEMMShapesReproducesTheTable(t *testing.T) {
	g, err := LoadGEMMShapes("xla-sm90")
	require.NoError(t, err)
	data, err := builtinFS.ReadFile("data/gemm/xla-sm90.csv")
	require.NoError(t, err)
	rows := 0
	for _, line := range strings.Split(string(data), "\n") {
		var m, n, k, rate float64
		if _, err := fmtSscanf(line, &m, &n, &k, &rate); err != nil {
			continue
		}
		rows++
		require.InEpsilon(t, rate, g.Rate(m, n, k), 1e-12, "m=%v n=%v k=%v", m, n, k)
	}
	require.Equal(t, 125, rows, "5 × 5 × 5 shapes, 256 to 4,096 each")
	require.Equal(t, []float64{256, 512, 1024, 2048, 4096}, g.Grid(0))
	require.InDelta(t, 783.3, g.Rate(4096, 4096, 4096)/1e12, 0.05)
	require.InDelta(t, 412.0, g.Rate(256, 4096, 4096)/1e12, 0.05)
	require.InDelta(t, 644.1, g.Rate(512, 4096, 4096)/1e12, 0.05)
	require.Equal(t, 1.0, g.Share(4096, 4096, 4096))
}

func fmtSscanf(line string, v ...*float64) (int, error) {
	f := strings.Split(strings.TrimSpace(line), ",")
	if len(f) != len(v) {
		return 0, errBadLine
	}
	for i, s := range f {
		x, err := parseFloat(s)
		if err != nil {
			return i, err
		}
		*v[i] = x
	}
	return len(v), nil
}

// TestGEMMShapesInterpolatesInLogSpace: halfway between two grid points
// in log2 of one dimension the rate is the geometric mean of theirs;
// outside the grid the nearest edge holds; no interpolated rate leaves
// the range of its neighbours.
func TestGEMMShapesInterpolatesInLogSpace(t *testing.T) {
	g, err := LoadGEMMShapes("xla-sm90")
	require.NoError(t, err)
	lo, hi := g.Rate(512, 4096, 4096), g.Rate(1024, 4096, 4096)
	require.InEpsilon(t, math.Sqrt(lo*hi), g.Rate(512*math.Sqrt2, 4096, 4096), 1e-12)
	require.Equal(t, g.Rate(256, 1024, 2048), g.Rate(1, 1024, 2048), "fewer rows than the grid: the smallest M's rate")
	require.Equal(t, g.Rate(4096, 4096, 4096), g.Rate(16384, 28672, 8192), "larger than the grid: the largest shape's rate")
	for _, m := range []float64{300, 700, 1500, 3000} {
		r := g.Rate(m, 3000, 1500)
		require.True(t, r > 0 && !math.IsInf(r, 0))
		var lo, hi float64 = math.Inf(1), 0
		for _, mm := range []float64{256, 512, 1024, 2048, 4096} {
			for _, n := range []float64{2048, 4096} {
				for _, k := range []float64{1024, 2048} {
					lo, hi = math.Min(lo, g.Rate(mm, n, k)), math.Max(hi, g.Rate(mm, n, k))
				}
			}
		}
		require.True(t, r >= lo*(1-1e-12) && r <= hi*(1+1e-12), "m=%v: %v outside [%v, %v]", m, r, lo, hi)
	}
}

// TestParseGEMMShapesErrorsNameTheLine: a malformed table is an error
// naming its source and line, or the grid it fails to make.
func TestParseGEMMShapesErrorsNameTheLine(t *testing.T) {
	const head = "# c\nm,n,k,flops_per_s\n"
	for _, tc := range []struct{ in, want string }{
		{"", "no rows"},
		{"m,n,k,rate\n1,1,1,1\n", "t.csv:1: the header must be m,n,k,flops_per_s"},
		{head + "256,256,256\n", "t.csv:3: want 4 fields"},
		{head + "256,256,0,5\n", "t.csv:3: k must be a positive integer up to 2^30"},
		{head + "256,256,256.5,5\n", "t.csv:3: k must be a positive integer"},
		{head + "256,256,256,NaN\n", "t.csv:3: flops_per_s must be a positive finite number"},
		{head + "256,256,256,+Inf\n", "flops_per_s must be a positive finite number"},
		{head + "256,256,256,5\n512,256,256,6\n256,512,256,7\n", "3 rows do not make a full grid of 2 M × 2 N × 1 K values"},
		{head + "256,256,256,5\n256,256,256,6\n512,256,256,7\n512,256,256,8\n", "4 rows do not make a full grid"},
		{head + "256,256,256,5\n512,256,256,6\n512,256,256,7\n", "3 rows do not make a full grid"},
	} {
		_, err := ParseGEMMShapes([]byte(tc.in), "t.csv")
		require.ErrorContains(t, err, tc.want, "%q", tc.in)
	}
	g, err := ParseGEMMShapes([]byte(head+"256,256,256,5e12\n"), "one.csv")
	require.NoError(t, err, "a single shape is a grid")
	require.InEpsilon(t, 5e12, g.Rate(1, 1, 1), 1e-12)
	_, err = LoadGEMMShapes("xla-sm80")
	require.ErrorContains(t, err, `no shipped GEMM table "xla-sm80" (the shipped ones are xla-sm90)`)
}

// TestHardwareGEMMShapesKey: a spec names a shipped table or none.
func TestHardwareGEMMShapesKey(t *testing.T) {
	base := `{"TFlopsPeak":989.4,"BwPeakTBs":3.35,"pcie_bandwidth_gb_s":64%s}`
	h, err := ParseHardwareSpec([]byte(strings.Replace(base, "%s", `,"gemm_shapes":"xla-sm90"`, 1)), "gpu.json")
	require.NoError(t, err)
	require.NotNil(t, h.GEMMShapes())
	_, err = ParseHardwareSpec([]byte(strings.Replace(base, "%s", `,"gemm_shapes":"cublas"`, 1)), "gpu.json")
	require.ErrorContains(t, err, `gpu.json: field "gemm_shapes": must name a shipped GEMM table (xla-sm90) or be absent, got "cublas"`)
	h, err = ParseHardwareSpec([]byte(strings.Replace(base, "%s", "", 1)), "gpu.json")
	require.NoError(t, err)
	require.Nil(t, h.GEMMShapes())
	for _, name := range BuiltinHardware() {
		hw, err := LoadHardware(name)
		require.NoError(t, err)
		require.Empty(t, hw.GEMMShapesTable, "%s: no shipped spec takes a shape table by default (docs/simulator.md, GEMM efficiency by shape)", name)
	}
}

// FuzzParseGEMMShapes: the parser never panics, and what it accepts
// interpolates to a positive finite rate everywhere.
func FuzzParseGEMMShapes(f *testing.F) {
	data, _ := builtinFS.ReadFile("data/gemm/xla-sm90.csv")
	f.Add(data)
	f.Add([]byte("m,n,k,flops_per_s\n256,256,256,5e12\n"))
	f.Add([]byte("m,n,k,flops_per_s\n256,256,256,5e12\n512,256,256,6e12\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGEMMShapes(data, "fuzz")
		if err != nil {
			return
		}
		for _, x := range []float64{0, 1, 300, 1e5, math.Inf(1)} {
			if r := g.Rate(x, x/2+1, x*3); !(r > 0) || math.IsInf(r, 0) {
				t.Fatalf("rate %v at %v", r, x)
			}
		}
	})
}

var errBadLine = errorString("not a data line")

type errorString string

func (e errorString) Error() string { return string(e) }

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(s), 64) }
