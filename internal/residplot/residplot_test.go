package residplot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomSeries returns n points with a fixed seed.
func randomSeries(name string, n int, seed uint64) Series {
	r := rand.New(rand.NewPCG(seed, 1))
	s := Series{Name: name, X: make([]float64, n), Y: make([]float64, n)}
	for i := range s.X {
		s.X[i] = math.Exp(r.NormFloat64() + 3)
		s.Y[i] = s.X[i] * (1 + 0.2*r.NormFloat64())
	}
	return s
}

// encode runs Encode and decodes the PNG it wrote.
func encode(t *testing.T, p Plot) (image.Image, int) {
	t.Helper()
	var buf bytes.Buffer
	skipped, err := Encode(&buf, p)
	require.NoError(t, err)
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	return img, skipped
}

// frameOf returns the layout render uses for p.
func frameOf(t *testing.T, p Plot) layout {
	t.Helper()
	_, lay, _, err := render(p)
	require.NoError(t, err)
	return lay
}

func sameColour(a, b color.Color) bool {
	return color.RGBAModel.Convert(a) == color.RGBAModel.Convert(b)
}

// countIn counts the pixels of colour c strictly inside the frame.
func countIn(img image.Image, lay layout, c color.Color) int {
	n := 0
	for y := lay.y0 + 1; y < lay.y1; y++ {
		for x := lay.x0 + 1; x < lay.x1; x++ {
			if sameColour(img.At(x, y), c) {
				n++
			}
		}
	}
	return n
}

// assertSquare checks the 3×3 point centred at (fx, fy) (pixel coordinates,
// rounded) has colour c.
func assertSquare(t *testing.T, img image.Image, fx, fy float64, c color.Color) {
	t.Helper()
	cx, cy := int(math.Round(fx)), int(math.Round(fy))
	for y := cy - 1; y <= cy+1; y++ {
		for x := cx - 1; x <= cx+1; x++ {
			assert.Truef(t, sameColour(img.At(x, y), c), "pixel (%d,%d) near (%.1f,%.1f) is %v, want %v", x, y, fx, fy, img.At(x, y), c)
		}
	}
}

var (
	blue  = palette[cSeries]
	black = color.RGBA{0, 0, 0, 0xff}
	grey  = color.RGBA{0x80, 0x80, 0x80, 0xff}
)

func TestEncodeDeterministic(t *testing.T) {
	p := Plot{
		Title: "Predicted vs actual", XLabel: "actual", YLabel: "predicted",
		Series:   []Series{randomSeries("train", 5000, 1), randomSeries("test", 3000, 2)},
		LogX:     true,
		LogY:     true,
		Diagonal: true, HLines: []float64{10}, MaxPoints: 2000,
	}
	var a, b bytes.Buffer
	_, err := Encode(&a, p)
	require.NoError(t, err)
	_, err = Encode(&b, p)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "two encodings of the same plot differ")

	p.Series[1].Y[0] *= 3 // a visible change must change the bytes
	var c bytes.Buffer
	_, err = Encode(&c, p)
	require.NoError(t, err)
	assert.False(t, bytes.Equal(a.Bytes(), c.Bytes()))
}

func TestEncodeSize(t *testing.T) {
	s := []Series{{Name: "s", X: []float64{1, 2, 3}, Y: []float64{3, 1, 2}}}
	for _, tc := range []struct {
		w, h, wantW, wantH int
	}{
		{0, 0, 800, 600},
		{200, 150, 200, 150},
		{1024, 300, 1024, 300},
		{0, 400, 800, 400},
		{333, 0, 333, 600},
	} {
		img, _ := encode(t, Plot{Title: "t", XLabel: "x", YLabel: "y", Series: s, Width: tc.w, Height: tc.h})
		assert.Equal(t, image.Rect(0, 0, tc.wantW, tc.wantH), img.Bounds(), "Width %d Height %d", tc.w, tc.h)
	}
}

// TestCoordinateMapping places points at the corners of the data range and
// one asymmetric point, and checks they land where the 5% padding puts them.
func TestCoordinateMapping(t *testing.T) {
	p := Plot{
		Title: "corners", XLabel: "x", YLabel: "y",
		Series: []Series{{Name: "c", X: []float64{0, 10, 0, 10, 2.5}, Y: []float64{0, 0, 100, 100, 75}}},
	}
	img, skipped := encode(t, p)
	assert.Zero(t, skipped)
	lay := frameOf(t, p)
	assert.True(t, sameColour(img.At(lay.x0, lay.y0), black), "frame corner not black")
	assert.True(t, sameColour(img.At(lay.x1, lay.y1), black), "frame corner not black")

	w, h := float64(lay.x1-lay.x0), float64(lay.y1-lay.y0)
	px := func(x float64) float64 { return float64(lay.x0) + (0.05+x/10)/1.1*w }
	py := func(y float64) float64 { return float64(lay.y1) - (0.05+y/100)/1.1*h }
	for i, x := range p.Series[0].X {
		fx, fy := px(x), py(p.Series[0].Y[i])
		assertSquare(t, img, fx, fy, blue)
		// Inside the frame, and for the corners within 6% of the frame edges.
		assert.Greater(t, fx, float64(lay.x0))
		assert.Less(t, fx, float64(lay.x1))
		assert.Greater(t, fy, float64(lay.y0))
		assert.Less(t, fy, float64(lay.y1))
	}
	assert.Less(t, px(0)-float64(lay.x0), 0.06*w)
	assert.Less(t, float64(lay.y1)-py(0), 0.06*h)
	// Nothing else is drawn in the series colour inside the frame.
	assert.Equal(t, 5*9, countIn(img, lay, blue))
}

func TestConstantDataIsCentred(t *testing.T) {
	for _, tc := range []struct {
		name       string
		x, y       float64
		logX, logY bool
	}{
		{"linear", 5, -3, false, false},
		{"log", 100, 0.01, true, true},
		{"zero", 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Plot{Series: []Series{{X: []float64{tc.x, tc.x}, Y: []float64{tc.y, tc.y}}}, LogX: tc.logX, LogY: tc.logY}
			img, _ := encode(t, p)
			lay := frameOf(t, p)
			assertSquare(t, img, float64(lay.x0+lay.x1)/2, float64(lay.y0+lay.y1)/2, blue)
		})
	}
}

func TestPadRange(t *testing.T) {
	for _, tc := range []struct {
		lo, hi         float64
		log            bool
		wantLo, wantHi float64
	}{
		{0, 10, false, -0.5, 10.5},
		{-3, -3, false, -4, -2},
		{0, 0, false, -1, 1},
		{2, 2, true, 1, 3}, // log10 values: 100 widens to [10, 1000]
		{1e300, 1e300, false, 0.9e300, 1.1e300},
	} {
		lo, hi := padRange(tc.lo, tc.hi, tc.log)
		assert.InDelta(t, tc.wantLo, lo, 1e-9*math.Max(1, math.Abs(tc.wantLo)), "[%g, %g]", tc.lo, tc.hi)
		assert.InDelta(t, tc.wantHi, hi, 1e-9*math.Max(1, math.Abs(tc.wantHi)), "[%g, %g]", tc.lo, tc.hi)
	}
}

func TestLogAxesSkipNonPositive(t *testing.T) {
	for _, tc := range []struct {
		name       string
		logX, logY bool
		wantSkip   int
	}{
		{"linear", false, false, 0},
		{"logX", true, false, 2},
		{"logY", false, true, 1},
		{"both", true, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// x = 1, 10, 100 span two decades; 10 lies in the middle on a log axis.
			p := Plot{
				Series: []Series{{X: []float64{1, 10, 100, 0, -5, 50}, Y: []float64{1, 10, 100, 7, 8, -1}}},
				LogX:   tc.logX, LogY: tc.logY,
			}
			img, skipped := encode(t, p)
			assert.Equal(t, tc.wantSkip, skipped)
			if tc.logX && tc.logY {
				lay := frameOf(t, p)
				assertSquare(t, img, float64(lay.x0+lay.x1)/2, float64(lay.y0+lay.y1)/2, blue)
				assert.Equal(t, 3*9, countIn(img, lay, blue))
			}
		})
	}
}

func TestNonFiniteSkipped(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name     string
		x, y     []float64
		wantSkip int
	}{
		{"none", []float64{1, 2}, []float64{1, 2}, 0},
		{"nan x", []float64{nan, 2, 3}, []float64{1, 2, 3}, 1},
		{"inf y", []float64{1, 2, 3}, []float64{1, -inf, 3}, 1},
		{"both in one point counts once", []float64{nan, 2, 3}, []float64{inf, 2, 3}, 1},
		{"several", []float64{nan, inf, -inf, 4}, []float64{1, 2, 3, nan}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Plot{Series: []Series{{X: tc.x, Y: tc.y}}}
			_, skipped := encode(t, p)
			assert.Equal(t, tc.wantSkip, skipped)
		})
	}
}

func TestNoData(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        Plot
		wantSkip int
	}{
		{"no series", Plot{Title: "empty"}, 0},
		{"empty series", Plot{Series: []Series{{Name: "a"}}}, 0},
		{"all NaN", Plot{Series: []Series{{X: []float64{math.NaN(), 1}, Y: []float64{1, math.NaN()}}}}, 2},
		{"all off log axis", Plot{LogY: true, Series: []Series{{X: []float64{1, 2}, Y: []float64{0, -1}}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, skipped := encode(t, tc.p)
			assert.Equal(t, tc.wantSkip, skipped)
			lay := frameOf(t, tc.p)
			assert.True(t, sameColour(img.At(lay.x0, lay.y0), black), "frame missing")
			assert.Zero(t, countIn(img, lay, blue))
			// "no data" is written in black in the middle of the frame.
			assert.Positive(t, countIn(img, lay, black))
		})
	}
}

func TestThin(t *testing.T) {
	for _, tc := range []struct {
		n, max, wantK, wantShown int
	}{
		{0, 10, 1, 0},
		{10, 10, 1, 10},
		{11, 10, 2, 6},
		{100000, 100000, 1, 100000},
		{100001, 100000, 2, 50001},
		{250000, 100000, 3, 83334},
		{1000, 1, 1000, 1},
	} {
		k, shown := thin(tc.n, tc.max)
		assert.Equal(t, tc.wantK, k, "n=%d max=%d", tc.n, tc.max)
		assert.Equal(t, tc.wantShown, shown, "n=%d max=%d", tc.n, tc.max)
		assert.LessOrEqual(t, shown, tc.max, "n=%d max=%d", tc.n, tc.max)
	}
}

// TestThinningDraws checks that thinning drops every point but each k-th
// from the picture while the axis range still covers all points.
func TestThinningDraws(t *testing.T) {
	p := Plot{Series: []Series{{X: []float64{0, 5, 10}, Y: []float64{0, 50, 100}}}, MaxPoints: 1}
	img, _ := encode(t, p)
	lay := frameOf(t, p)
	assertSquare(t, img, float64(lay.x0)+0.05/1.1*float64(lay.x1-lay.x0), float64(lay.y1)-0.05/1.1*float64(lay.y1-lay.y0), blue)
	assert.Equal(t, 9, countIn(img, lay, blue))

	p.MaxPoints = 0
	img, _ = encode(t, p)
	assert.Equal(t, 3*9, countIn(img, lay, blue))
}

func TestReferenceLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		x, y   []float64 // first two points span the data range
		logX   bool
		hline  float64 // drawn; must lie inside the y range
		xProbe float64 // y = xProbe lies inside the y range
	}{
		{"inside", []float64{0, 10}, []float64{-10, 20}, false, 0, 5},
		{"leaves through the top", []float64{0, 100}, []float64{0, 10}, false, 5, 5},
		{"curve on log x", []float64{1, 1000}, []float64{-100, 500}, true, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Plot{
				Series:   []Series{{X: tc.x, Y: tc.y}},
				Diagonal: true, LogX: tc.logX,
				HLines: []float64{tc.hline, 1e6, math.NaN()}, // 1e6 is off the chart, NaN ignored
			}
			img, _ := encode(t, p)
			lay := frameOf(t, p)
			// Every grey pixel lies strictly inside the frame.
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if sameColour(img.At(x, y), grey) {
						require.Truef(t, x > lay.x0 && x < lay.x1 && y > lay.y0 && y < lay.y1, "grey pixel (%d,%d) outside the frame", x, y)
					}
				}
			}
			tr := func(v float64) float64 { return v }
			if tc.logX {
				tr = math.Log10
			}
			px := func(x float64) float64 {
				return float64(lay.x0) + (0.05+(tr(x)-tr(tc.x[0]))/(tr(tc.x[1])-tr(tc.x[0])))/1.1*float64(lay.x1-lay.x0)
			}
			py := func(y float64) int {
				return int(math.Round(float64(lay.y1) - (0.05+(y-tc.y[0])/(tc.y[1]-tc.y[0]))/1.1*float64(lay.y1-lay.y0)))
			}
			// The horizontal line crosses the middle of the frame.
			assert.True(t, sameColour(img.At((lay.x0+lay.x1)/2, py(tc.hline)), grey), "horizontal line missing")
			// y = x passes through (xProbe, xProbe).
			xm, ym := int(math.Round(px(tc.xProbe))), py(tc.xProbe)
			found := false
			for y := ym - 1; y <= ym+1; y++ {
				found = found || sameColour(img.At(xm, y), grey)
			}
			assert.True(t, found, "diagonal missing near (%d,%d)", xm, ym)
		})
	}
}

func TestErrors(t *testing.T) {
	ok := []Series{{Name: "a", X: []float64{1}, Y: []float64{1}}}
	var crowd []Series
	for range 8 {
		crowd = append(crowd, Series{Name: "a rather long series name", X: []float64{1}, Y: []float64{1}})
	}
	for _, tc := range []struct {
		name string
		p    Plot
		want string
	}{
		{"narrow", Plot{Width: 199, Series: ok}, "Width"},
		{"negative width", Plot{Width: -1, Series: ok}, "Width"},
		{"short", Plot{Height: 149, Series: ok}, "Height"},
		{"huge", Plot{Height: 1 << 20, Series: ok}, "Height"},
		{"length mismatch", Plot{Series: append(ok, Series{Name: "resid", X: []float64{1, 2}, Y: []float64{1}})}, `Series[1] "resid"`},
		{"negative MaxPoints", Plot{MaxPoints: -1, Series: ok}, "MaxPoints"},
		{"legend leaves no room", Plot{Width: 200, Height: 150, Title: "t", XLabel: "x", Series: crowd}, "no room"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := Encode(&buf, tc.p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, buf.Len(), "nothing is written on error")
		})
	}
}

func TestTicks(t *testing.T) {
	always := func([]float64, []string) bool { return true }
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{-0.0031, 0.0042, []string{"-0.003", "-0.002", "-0.001", "0", "0.001", "0.002", "0.003", "0.004"}},
		{1, 61000, []string{"1e+04", "2e+04", "3e+04", "4e+04", "5e+04", "6e+04"}},
		{0.25, 0.95, []string{"0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}},
		{1e-6, 5e-6, []string{"1e-06", "2e-06", "3e-06", "4e-06", "5e-06"}},
	} {
		ticks, labels := linearTicks(tc.lo, tc.hi, always)
		assert.Equal(t, tc.want, labels, "[%g, %g]", tc.lo, tc.hi)
		assert.Len(t, ticks, len(labels))
	}
	// Tick counts stay near 5–8 across spans.
	for _, span := range []float64{1, 1.3, 1.7, 2.2, 3, 4.1, 6.5, 7.9, 9.9} {
		for _, scale := range []float64{1e-5, 1, 1e5} {
			ticks, _ := linearTicks(0, span*scale, always)
			assert.True(t, len(ticks) >= 4 && len(ticks) <= 8, "span %g: %d ticks", span*scale, len(ticks))
		}
	}
	// Log axes get powers of ten.
	a := &axis{log: true, lo: -3.2, hi: 4.1}
	ticks, labels := chooseTicks(a, always)
	assert.Equal(t, []float64{1e-3, 1e-2, 1e-1, 1, 10, 100, 1000, 1e4}, ticks)
	assert.Equal(t, "1e-03", labels[0])
	a = &axis{log: true, lo: -0.1, hi: 12.1}
	ticks, _ = chooseTicks(a, always)
	assert.Equal(t, []float64{1, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12}, ticks)
}

func BenchmarkEncode(b *testing.B) {
	p := Plot{
		Title: "Predicted vs actual", XLabel: "actual (µs)", YLabel: "predicted (µs)",
		Series:   []Series{randomSeries("train", 100000, 1), randomSeries("holdout", 100000, 2)},
		Diagonal: true, HLines: []float64{0},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}
