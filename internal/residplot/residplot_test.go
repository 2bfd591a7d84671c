package residplot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// encode runs Encode, decodes the PNG it wrote and returns it with the
// skipped count and the data area.
func encode(t *testing.T, p Plot) (image.Image, int, frame) {
	t.Helper()
	var buf bytes.Buffer
	skipped, err := Encode(&buf, p)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	var again bytes.Buffer
	skipped2, fr, err := render(&again, p, "png")
	require.NoError(t, err)
	require.Equal(t, skipped, skipped2)
	require.Equal(t, buf.Bytes(), again.Bytes())
	return img, skipped, fr
}

func sameColour(a, b color.Color) bool {
	return color.RGBAModel.Convert(a) == color.RGBAModel.Convert(b)
}

// countIn counts the pixels of colour c inside the data area.
func countIn(img image.Image, fr frame, c color.Color) int {
	n := 0
	for y := int(fr.y0); y <= int(fr.y1); y++ {
		for x := int(fr.x0); x <= int(fr.x1); x++ {
			if sameColour(img.At(x, y), c) {
				n++
			}
		}
	}
	return n
}

// dark reports whether c is a grey at least as dark as a reference line's
// antialiased edge (the grid's hairlines are lighter, the series coloured).
func dark(c color.Color) bool {
	r, g, b, _ := color.RGBAModel.Convert(c).RGBA()
	return r == g && g == b && r>>8 < 0xb4
}

// assertPoint checks that the pixel under (fx, fy) (image coordinates) has
// colour c: a point is a square of 3 × 3 pixels centred on that pixel.
func assertPoint(t *testing.T, img image.Image, fx, fy float64, c color.Color) {
	t.Helper()
	x, y := int(math.Floor(fx)), int(math.Floor(fy))
	assert.Truef(t, sameColour(img.At(x, y), c), "pixel (%d,%d) under (%.1f,%.1f) is %v, want %v", x, y, fx, fy, img.At(x, y), c)
}

// at maps data coordinates onto the data area of fr when the axes span
// [xlo, xhi] and [ylo, yhi] (transformed values).
func at(fr frame, xlo, xhi, ylo, yhi, x, y float64) (float64, float64) {
	return fr.x0 + (x-xlo)/(xhi-xlo)*(fr.x1-fr.x0), fr.y1 - (y-ylo)/(yhi-ylo)*(fr.y1-fr.y0)
}

var (
	blue   = seriesColours[0]
	orange = seriesColours[1]
)

func deterministicPlot() Plot {
	return Plot{
		Title: "Predicted vs actual → y", XLabel: "actual", YLabel: "predicted",
		Series:   []Series{randomSeries("train", 5000, 1), randomSeries("test", 3000, 2)},
		LogX:     true,
		LogY:     true,
		Diagonal: true, HLines: []float64{10}, MaxPoints: 2000,
	}
}

func TestEncodeDeterministic(t *testing.T) {
	for _, f := range Formats {
		t.Run(f, func(t *testing.T) {
			p := deterministicPlot()
			var a, b bytes.Buffer
			_, err := Write(&a, p, f)
			require.NoError(t, err)
			_, err = Write(&b, deterministicPlot(), f)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "two encodings of the same plot differ")

			p.Series[1].Y[0] *= 3 // a visible change must change the bytes
			var c bytes.Buffer
			_, err = Write(&c, p, f)
			require.NoError(t, err)
			assert.False(t, bytes.Equal(a.Bytes(), c.Bytes()))
		})
	}
}

// TestWriteFormats checks what each format holds: a PNG of the asked size
// with both series' colours, an SVG and a PDF with the texts, and no
// time-of-day in the PDF.
// TestDeterministicAcrossProcesses renders deterministicPlot in a child
// process (this test binary again) with another GOMAXPROCS and time zone,
// and compares its files with the ones rendered here.
func TestDeterministicAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("RESIDPLOT_CHILD_DIR"); dir != "" {
		for _, f := range Formats {
			var b bytes.Buffer
			_, err := Write(&b, deterministicPlot(), f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "plot."+f), b.Bytes(), 0o644))
		}
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeterministicAcrossProcesses$")
	cmd.Env = append(os.Environ(), "RESIDPLOT_CHILD_DIR="+dir, "GOMAXPROCS=1", "TZ=Asia/Kolkata")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, f := range Formats {
		var b bytes.Buffer
		_, err := Write(&b, deterministicPlot(), f)
		require.NoError(t, err)
		child, err := os.ReadFile(filepath.Join(dir, "plot."+f))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(b.Bytes(), child), "%s: the child process wrote other bytes", f)
	}
}

func TestWriteFormats(t *testing.T) {
	p := deterministicPlot()
	var b bytes.Buffer
	skipped, err := Write(&b, p, "png")
	require.NoError(t, err)
	assert.Zero(t, skipped)
	img, err := png.Decode(&b)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 800, 600), img.Bounds())
	var fr frame
	{
		var buf bytes.Buffer
		_, fr, err = render(&buf, p, "png")
		require.NoError(t, err)
	}
	assert.Greater(t, countIn(img, fr, blue), 200)
	assert.Greater(t, countIn(img, fr, orange), 200)

	b.Reset()
	_, err = Write(&b, p, "svg")
	require.NoError(t, err)
	svg := b.String()
	assert.True(t, strings.HasPrefix(svg, "<?xml") || strings.HasPrefix(svg, "<svg"), "%.40q", svg)
	assert.Contains(t, svg, "</svg>")
	for _, s := range []string{">Predicted vs actual → y<", ">actual<", ">predicted<", ">train (1 in 3 shown)<", ">test (1 in 2 shown)<", ">1<", ">10<", ">100<"} {
		assert.True(t, strings.Contains(svg, s), "the SVG has no %q", s)
	}

	b.Reset()
	_, err = Write(&b, p, "pdf")
	require.NoError(t, err)
	pdf := b.String()
	assert.True(t, strings.HasPrefix(pdf, "%PDF-"), "%.10q", pdf)
	// 800 × 600 pixels at 96 per inch are 600 × 450 points.
	for _, s := range []string{"/CreationDate (D:19700101000000)", "/ModDate (D:19700101000000)", "/MediaBox [0 0 600.00 450.00]"} {
		assert.True(t, strings.Contains(pdf, s), "the PDF has no %q", s)
	}

	b.Reset()
	_, err = Write(&b, p, "gif")
	require.ErrorContains(t, err, `image format "gif" is not one of png, svg, pdf`)
	assert.Zero(t, b.Len())
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
		img, _, fr := encode(t, Plot{Title: "t", XLabel: "x", YLabel: "y", Series: s, Width: tc.w, Height: tc.h})
		assert.Equal(t, image.Rect(0, 0, tc.wantW, tc.wantH), img.Bounds(), "Width %d Height %d", tc.w, tc.h)
		// The data area lies inside the image, clear of its left and bottom
		// edges (tick labels, axis labels).
		assert.Greater(t, fr.x0, 20.0)
		assert.Less(t, fr.x1, float64(tc.wantW))
		assert.Greater(t, fr.y0, 10.0)
		assert.Less(t, fr.y1, float64(tc.wantH)-20)
		assert.GreaterOrEqual(t, fr.x1-fr.x0, 32.0)
		assert.GreaterOrEqual(t, fr.y1-fr.y0, 32.0)
	}
}

// TestCoordinateMapping places points at the corners of the data range and
// one asymmetric point, and checks they land where the 5% padding puts them.
func TestCoordinateMapping(t *testing.T) {
	p := Plot{
		Title: "corners", XLabel: "x", YLabel: "y",
		Series: []Series{{Name: "c", X: []float64{0, 10, 0, 10, 2.5}, Y: []float64{0, 0, 100, 100, 75}}},
	}
	img, skipped, fr := encode(t, p)
	assert.Zero(t, skipped)
	for i, x := range p.Series[0].X {
		fx, fy := at(fr, -0.5, 10.5, -5, 105, x, p.Series[0].Y[i])
		assertPoint(t, img, fx, fy, blue)
	}
	// Nothing else is drawn in the series colour: five crisp 3 × 3 squares.
	assert.Equal(t, 5*9, countIn(img, fr, blue))
	// Not where there is no point.
	fx, fy := at(fr, -0.5, 10.5, -5, 105, 5, 50)
	assert.False(t, sameColour(img.At(int(fx), int(fy)), blue))
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
			img, _, fr := encode(t, p)
			assertPoint(t, img, (fr.x0+fr.x1)/2, (fr.y0+fr.y1)/2, blue)
			assert.Equal(t, 9, countIn(img, fr, blue), "two points on one pixel draw one square")
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
		{308, 308, true, 307, 308},                    // 1e309 would be +Inf
		{-323, 308, true, -323, 308},                  // the data's own ends stay
		{-300, 300, true, -307, 308},                  // padding stops at 1e-307 and 1e308
		{-1.7e308, 1.7e308, false, -1.7e308, 1.7e308}, // padding would overflow
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
			img, skipped, fr := encode(t, p)
			assert.Equal(t, tc.wantSkip, skipped)
			if tc.logX && tc.logY {
				assertPoint(t, img, (fr.x0+fr.x1)/2, (fr.y0+fr.y1)/2, blue)
				assert.Equal(t, 3*9, countIn(img, fr, blue))
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
			_, skipped, _ := encode(t, p)
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
			img, skipped, fr := encode(t, tc.p)
			assert.Equal(t, tc.wantSkip, skipped)
			assert.Zero(t, countIn(img, fr, blue))
			// "no data" is written in black in the middle of the data area,
			// and nothing else is drawn in it.
			mid := frame{x0: (fr.x0+fr.x1)/2 - 40, x1: (fr.x0+fr.x1)/2 + 40, y0: (fr.y0+fr.y1)/2 - 10, y1: (fr.y0+fr.y1)/2 + 10}
			assert.Positive(t, countIn(img, mid, color.Black))
			assert.Equal(t, countIn(img, mid, color.Black), countIn(img, fr, color.Black))
			var b bytes.Buffer
			_, err := Write(&b, tc.p, "svg")
			require.NoError(t, err)
			assert.True(t, strings.Contains(b.String(), ">no data<"), "the SVG has no \"no data\"")
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
	img, _, fr := encode(t, p)
	for i, want := range []bool{true, false, false} {
		fx, fy := at(fr, -0.5, 10.5, -5, 105, p.Series[0].X[i], p.Series[0].Y[i])
		assert.Equal(t, want, sameColour(img.At(int(fx), int(fy)), blue), "point %d", i)
	}
	assert.Equal(t, 9, countIn(img, fr, blue))

	p.MaxPoints = 0
	img, _, fr2 := encode(t, p)
	assert.Equal(t, fr, fr2)
	for i := range p.Series[0].X {
		fx, fy := at(fr, -0.5, 10.5, -5, 105, p.Series[0].X[i], p.Series[0].Y[i])
		assertPoint(t, img, fx, fy, blue)
	}
	assert.Equal(t, 3*9, countIn(img, fr, blue))
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
			img, _, fr := encode(t, p)
			tr := func(v float64) float64 { return v }
			if tc.logX {
				tr = math.Log10
			}
			xlo, xhi := tr(tc.x[0]), tr(tc.x[1])
			dx, dy := 0.05*(xhi-xlo), 0.05*(tc.y[1]-tc.y[0])
			pt := func(x, y float64) (int, int) {
				fx, fy := at(fr, xlo-dx, xhi+dx, tc.y[0]-dy, tc.y[1]+dy, tr(x), y)
				return int(fx), int(fy)
			}
			// darkNear reports whether the column x has a dark grey pixel
			// within a pixel of row y.
			darkNear := func(x, y int) bool {
				return dark(img.At(x, y-1)) || dark(img.At(x, y)) || dark(img.At(x, y+1))
			}
			// The horizontal line crosses the data area, and ends at its
			// edges.
			_, yh := pt(0, tc.hline)
			for _, x := range []float64{fr.x0 + 2, (fr.x0 + fr.x1) / 2, fr.x1 - 2} {
				assert.True(t, darkNear(int(x), yh), "horizontal line missing at (%d,%d)", int(x), yh)
			}
			assert.False(t, darkNear(int(fr.x0)-3, yh), "horizontal line left of the data area")
			assert.False(t, darkNear(int(fr.x1)+3, yh), "horizontal line right of the data area")
			// y = x passes through (xProbe, xProbe).
			xm, ym := pt(tc.xProbe, tc.xProbe)
			assert.True(t, darkNear(xm, ym), "diagonal missing near (%d,%d)", xm, ym)
			// Only the horizontal line is drawn across the middle column.
			rows := 0
			for y := int(fr.y0) + 1; y < int(fr.y1); y++ {
				if dark(img.At(int((fr.x0+fr.x1)/2), y)) {
					rows++
				}
			}
			assert.LessOrEqual(t, rows, 2+4, "1e6 and NaN lines are not drawn; y = x crosses once")
		})
	}
}

func TestDiagonal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ax, ay axis
		lo, hi float64
		n      int
	}{
		{"linear", axis{lo: -1, hi: 10}, axis{lo: 2, hi: 20}, 2, 10, 2},
		{"log", axis{log: true, lo: -1, hi: 3}, axis{log: true, lo: 0, hi: 4}, 1, 1000, 2},
		{"log x", axis{log: true, lo: 0, hi: 3}, axis{lo: -100, hi: 500}, 1, 500, 256},
		{"log y", axis{lo: -100, hi: 500}, axis{log: true, lo: 0, hi: 3}, 1, 500, 256},
		{"apart", axis{lo: 0, hi: 1}, axis{lo: 2, hi: 3}, 0, 0, 0},
		{"log y above a negative x range", axis{lo: -10, hi: -1}, axis{log: true, lo: 0, hi: 1}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts := diagonal(&tc.ax, &tc.ay)
			require.Len(t, pts, tc.n)
			if tc.n == 0 {
				return
			}
			assert.InDelta(t, tc.lo, pts[0].X, 1e-9*tc.hi)
			assert.InDelta(t, tc.hi, pts[len(pts)-1].X, 1e-9*tc.hi)
			for i, p := range pts {
				assert.Equal(t, p.X, p.Y)
				if i > 0 {
					assert.Greater(t, p.X, pts[i-1].X)
				}
			}
		})
	}
}

// TestExtremeRanges draws spans at the ends of float64 in every format:
// no error, no hang (a span of a few ulps once looped for ever choosing
// ticks).
func TestExtremeRanges(t *testing.T) {
	for i, p := range []Plot{
		{Series: []Series{{X: []float64{-1e308, 1e308}, Y: []float64{-1e308, 1e308}}}, Diagonal: true, HLines: []float64{0, math.Inf(1)}},
		{Series: []Series{{X: []float64{5e-324, 1e308}, Y: []float64{5e-324, 1e308}}}, LogX: true, LogY: true, Diagonal: true, HLines: []float64{1}},
		{Series: []Series{{X: []float64{1e308, 1e308}, Y: []float64{-1e308, -1e308}}}, Diagonal: true},
		{Series: []Series{{X: []float64{1, 1 + 1e-15}, Y: []float64{1, 1 + 1e-15}}}, Diagonal: true},
		{Series: []Series{{X: []float64{1e15, 1e15 + 0.25}, Y: []float64{-1, 1}}}, LogX: true},
		{Series: []Series{{X: []float64{-5, -1}, Y: []float64{1, 10}}}, LogY: true, Diagonal: true},
	} {
		for _, f := range Formats {
			var b bytes.Buffer
			_, err := Write(&b, p, f)
			assert.NoError(t, err, "plot %d, %s", i, f)
			assert.Positive(t, b.Len(), "plot %d, %s", i, f)
		}
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
