// Package residplot draws the residual and predicted-versus-actual scatter
// plots that `calibrate fit` writes into its validation report.
//
// A Plot holds one or more Series of points; Encode draws them as a PNG,
// Write as a PNG, SVG or PDF, with gonum.org/v1/plot: each point a square of
// 3 × 3 pixels in its series' colour, axes with tick labels and a grid, a
// title, axis labels, a legend between the title and the chart, optional
// grey reference lines (y = x and horizontal lines) and optional log10
// axes.
//
// Output is deterministic: the same Plot always gives a byte-identical file
// (see package internal/plotcanvas), which keeps generated reports stable
// under version control.
package residplot

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/blis-sim/blis/internal/plotcanvas"
)

// Series is one set of points drawn in one colour.
type Series struct {
	Name string    // legend entry; empty means "series N"
	X, Y []float64 // same length; non-finite points are skipped and counted in the skipped count that Encode returns
}

// Plot describes one chart. Each axis spans the drawable points of all series
// (thinned-out points included) with 5% padding, or ±1 (×/÷10 on a log axis)
// when all values are equal.
type Plot struct {
	Title, XLabel, YLabel string    // texts above the chart, below the x axis and (rotated) left of the y axis; empty ones are left out
	Series                []Series  // drawn in order, so later series cover earlier ones
	Width, Height         int       // PNG pixels (96 per inch; SVG and PDF have the same size in points, 3/4 of a pixel each); 0 means 800 (Width) or 600 (Height); at least 200×150, at most 16384 each
	LogX, LogY            bool      // log10 axes; points with a non-positive coordinate on a log axis are skipped
	Diagonal              bool      // draw the y = x line (for predicted-vs-actual)
	HLines                []float64 // horizontal reference lines (e.g. 0 for residuals); they do not widen the axis range, and ones outside it are not drawn
	MaxPoints             int       // per series; 0 means 100000. Larger series are thinned deterministically (every k-th point, k = ceil(n/MaxPoints)); the legend says "(1 in k shown)".
}

// Formats are the formats Write draws, named like a file's extension.
var Formats = plotcanvas.Formats

const (
	defaultWidth, defaultHeight = 800, 600
	minWidth, minHeight         = 200, 150
	maxSide                     = 16384
	defaultMaxPoints            = 100000
)

// seriesColours are the series' colours in turn: blue, orange, green, red,
// purple, brown.
var seriesColours = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
}

func seriesColour(i int) color.Color { return seriesColours[i%len(seriesColours)] }

var (
	// referenceStyle draws y = x and the horizontal lines.
	referenceStyle = draw.LineStyle{Color: color.Gray{0x80}, Width: vg.Points(1)}
	// minData is the smallest width and height of the data area.
	minData = plotcanvas.Pixels(32)
	// margin is the blank border around the figure.
	margin = plotcanvas.Pixels(8)
)

// Encode draws p and writes it as PNG to w. It returns the number of points
// skipped as non-finite or off a log axis (non-positive coordinate). A plot
// without any drawable point is not an error: it is drawn as empty axes
// saying "no data".
func Encode(w io.Writer, p Plot) (skipped int, err error) {
	return Write(w, p, "png")
}

// Write is Encode in format, one of Formats ("png", "svg", "pdf"). Nothing
// is written to w on error.
func Write(w io.Writer, p Plot, format string) (skipped int, err error) {
	var b bytes.Buffer
	skipped, _, err = render(&b, p, format)
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return skipped, fmt.Errorf("residplot: writing %s: %w", format, err)
	}
	return skipped, nil
}

// axis is one direction's scale: lo and hi are in transformed space (log10
// of the value on a log axis).
type axis struct {
	log    bool
	lo, hi float64
}

func (a *axis) tr(v float64) float64 {
	if a.log {
		return math.Log10(v)
	}
	return v
}

func (a *axis) untr(v float64) float64 {
	if a.log {
		return math.Pow(10, v)
	}
	return v
}

// drawable reports whether v can be placed on the axis.
func (a *axis) drawable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

// set gives the plot axis pa a's range, scale and ticks.
func (a *axis) set(pa *plot.Axis) {
	pa.Min, pa.Max = a.untr(a.lo), a.untr(a.hi)
	if a.log {
		pa.Scale = plot.LogScale{}
	}
}

// check validates p and fills in its defaults.
func check(p *Plot) error {
	if p.Width == 0 {
		p.Width = defaultWidth
	}
	if p.Height == 0 {
		p.Height = defaultHeight
	}
	switch {
	case p.Width < minWidth || p.Width > maxSide:
		return fmt.Errorf("residplot: Width %d out of range [%d, %d]", p.Width, minWidth, maxSide)
	case p.Height < minHeight || p.Height > maxSide:
		return fmt.Errorf("residplot: Height %d out of range [%d, %d]", p.Height, minHeight, maxSide)
	case p.MaxPoints < 0:
		return fmt.Errorf("residplot: MaxPoints %d is negative", p.MaxPoints)
	}
	if p.MaxPoints == 0 {
		p.MaxPoints = defaultMaxPoints
	}
	for i, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("residplot: Series[%d] %q: X has %d values but Y has %d", i, s.Name, len(s.X), len(s.Y))
		}
	}
	return nil
}

// frame is the data area in PNG pixels, y down from the image's top: the
// axes' ranges map onto [x0, x1] and, upwards, [y1, y0].
type frame struct{ x0, y0, x1, y1 float64 }

// render draws p in format to out and returns the skipped count and the
// data area.
func render(out io.Writer, p Plot, format string) (int, frame, error) {
	if err := check(&p); err != nil {
		return 0, frame{}, err
	}
	c, err := plotcanvas.New(format, plotcanvas.Pixels(p.Width), plotcanvas.Pixels(p.Height))
	if err != nil {
		return 0, frame{}, fmt.Errorf("residplot: %w", err)
	}
	pl, legend, ax, ay, skipped, err := build(p)
	if err != nil {
		return 0, frame{}, err
	}
	hasData := ax != nil
	dc := draw.Crop(draw.New(c), margin, -margin, margin, -margin)
	if p.Title != "" {
		sty := pl.Title.TextStyle
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
		dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y}, p.Title)
		dc.Max.Y -= sty.Height(p.Title) + plotcanvas.Pixels(8)
	}
	legendArea := dc
	dc.Max.Y -= legend.draw(legendArea, false)
	if dc.Size().X < minData || dc.Size().Y < minData {
		return 0, frame{}, noRoom(p)
	}
	// The ticks depend on the data area's size, which depends on the
	// y tick labels' width: the second pass settles it.
	da := dc
	for range 2 {
		if hasData {
			pl.X.Tick.Marker = &ticker{a: ax, length: da.Size().X, sty: pl.X.Tick.Label}
			pl.Y.Tick.Marker = &ticker{a: ay, length: da.Size().Y, sty: pl.Y.Tick.Label, vertical: true}
		}
		da = pl.DataCanvas(dc)
	}
	if da.Size().X < minData || da.Size().Y < minData || da.Min.Y < dc.Min.Y || da.Max.Y > dc.Max.Y {
		return 0, frame{}, noRoom(p)
	}
	legend.draw(legendArea, true)
	pl.Draw(dc)
	if !hasData {
		sty := pl.X.Label.TextStyle
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		da.FillText(sty, da.Center(), "no data")
	}
	if _, err := c.WriteTo(out); err != nil {
		return 0, frame{}, fmt.Errorf("residplot: encoding %s: %w", format, err)
	}
	px := func(l vg.Length) float64 { return l.Points() / vg.Inch.Points() * plotcanvas.DPI }
	h := float64(p.Height)
	return skipped, frame{x0: px(da.Min.X), x1: px(da.Max.X), y0: h - px(da.Max.Y), y1: h - px(da.Min.Y)}, nil
}

func noRoom(p Plot) error {
	return fmt.Errorf("residplot: %d×%d image leaves no room for the plot beside its labels and legend", p.Width, p.Height)
}

// build makes the chart of p (checked), without its title and ticks, and
// its legend; it returns the axes' scales, nil when no point is drawable.
func build(p Plot) (pl *plot.Plot, lg legend, xAxis, yAxis *axis, skipped int, err error) {
	ax, ay := axis{log: p.LogX}, axis{log: p.LogY}
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for i, x := range s.X {
			y := s.Y[i]
			if !ax.drawable(x) || !ay.drawable(y) {
				skipped++
				continue
			}
			tx, ty := ax.tr(x), ay.tr(y)
			xlo, xhi = math.Min(xlo, tx), math.Max(xhi, tx)
			ylo, yhi = math.Min(ylo, ty), math.Max(yhi, ty)
		}
	}
	hasData := xlo <= xhi

	pl = plot.New()
	pl.X.Label.Text, pl.Y.Label.Text = p.XLabel, p.YLabel
	lg = newLegend()
	if hasData {
		pl.Add(plotter.NewGrid())
	}
	for si, s := range p.Series {
		k, _ := thin(len(s.X), p.MaxPoints)
		var pts plotter.XYs
		for i := 0; i < len(s.X); i += k {
			if x, y := s.X[i], s.Y[i]; ax.drawable(x) && ay.drawable(y) {
				pts = append(pts, plotter.XY{X: x, Y: y})
			}
		}
		if len(pts) > 0 {
			pl.Add(&points{xys: pts, colour: seriesColour(si)})
		}
		name := s.Name
		if name == "" {
			name = "series " + strconv.Itoa(si+1)
		}
		if k > 1 {
			name += fmt.Sprintf(" (1 in %d shown)", k)
		}
		lg.add(name, swatch{seriesColour(si)})
	}
	if !hasData {
		pl.X.Min, pl.X.Max, pl.Y.Min, pl.Y.Max = 0, 1, 0, 1
		pl.X.Tick.Marker, pl.Y.Tick.Marker = plot.ConstantTicks{}, plot.ConstantTicks{}
		return pl, lg, nil, nil, skipped, nil
	}
	ax.lo, ax.hi = padRange(xlo, xhi, ax.log)
	ay.lo, ay.hi = padRange(ylo, yhi, ay.log)

	for _, v := range p.HLines {
		if ay.drawable(v) && ay.tr(v) >= ay.lo && ay.tr(v) <= ay.hi {
			if err := addLine(pl, plotter.XYs{{X: ax.untr(ax.lo), Y: v}, {X: ax.untr(ax.hi), Y: v}}); err != nil {
				return nil, lg, nil, nil, 0, err
			}
		}
	}
	if p.Diagonal {
		if pts := diagonal(&ax, &ay); len(pts) > 0 {
			if err := addLine(pl, pts); err != nil {
				return nil, lg, nil, nil, 0, err
			}
		}
	}
	ax.set(&pl.X) // after Add, which widens the range to the data
	ay.set(&pl.Y)
	return pl, lg, &ax, &ay, skipped, nil
}

func addLine(pl *plot.Plot, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("residplot: reference line: %w", err)
	}
	l.LineStyle = referenceStyle
	pl.Add(l)
	return nil
}

// diagonal returns the visible part of y = x: since the line rises, the x
// (= y) values that lie in both axes' ranges. It is a straight segment when
// both axes have the same scale and a curve, sampled evenly along x, when
// exactly one is logarithmic.
func diagonal(ax, ay *axis) plotter.XYs {
	lo := math.Max(ax.untr(ax.lo), ay.untr(ay.lo))
	hi := math.Min(ax.untr(ax.hi), ay.untr(ay.hi))
	if !(lo < hi) || !ax.drawable(lo) || !ay.drawable(lo) {
		return nil // also when lo ≤ 0 on a log axis
	}
	n := 2
	if ax.log != ay.log {
		n = 256
	}
	tlo, thi := ax.tr(lo), ax.tr(hi)
	pts := make(plotter.XYs, n)
	for i := range pts {
		v := ax.untr(tlo + (thi-tlo)*float64(i)/float64(n-1))
		if i == 0 {
			v = lo
		} else if i == n-1 {
			v = hi
		}
		pts[i] = plotter.XY{X: v, Y: v}
	}
	return pts
}

// thin returns the stride k = ceil(n/maxPoints) (at least 1) used to thin a
// series of n points, and the number of points shown, ceil(n/k).
// maxPoints must be positive.
func thin(n, maxPoints int) (k, shown int) {
	k = max(1, (n+maxPoints-1)/maxPoints)
	return k, (n + k - 1) / k
}

// ticker is a plot.Ticker that chooses an axis's ticks by chooseTicks,
// such that their labels (in sty) do not overlap along the data area's
// length.
type ticker struct {
	a        *axis
	length   vg.Length
	sty      text.Style
	vertical bool
}

func (tk *ticker) Ticks(float64, float64) []plot.Tick {
	vals, labels := chooseTicks(tk.a, tk.fits)
	t := make([]plot.Tick, len(vals))
	for i, v := range vals {
		t[i] = plot.Tick{Value: v, Label: labels[i]}
	}
	return t
}

// fits reports whether labels l at ticks t leave 10 pixels between
// neighbours along a horizontal axis, 3 pixels along a vertical one.
func (tk *ticker) fits(t []float64, l []string) bool {
	a := tk.a
	for i := 1; i < len(t); i++ {
		gap := vg.Length((a.tr(t[i]) - a.tr(t[i-1])) / (a.hi - a.lo) * tk.length.Points())
		need := (tk.sty.Width(l[i-1])+tk.sty.Width(l[i]))/2 + plotcanvas.Pixels(10)
		if tk.vertical {
			need = tk.sty.Height(l[i]) + plotcanvas.Pixels(3)
		}
		if gap < need {
			return false
		}
	}
	return true
}

// chooseTicks picks "nice" ticks for a: steps of 1, 2 or 5 × 10^k on a
// linear axis (aiming at 5–8 ticks), powers of ten on a log axis. Only tick
// sets whose labels fit (as judged by fits) are considered.
func chooseTicks(a *axis, fits func([]float64, []string) bool) ([]float64, []string) {
	if a.log {
		lo, hi := math.Ceil(a.lo), math.Floor(a.hi)
		for stride := 1.0; hi-lo >= 1 && stride <= hi-lo; stride++ {
			var t []float64
			for e := lo; e <= hi; e += stride {
				t = append(t, math.Pow(10, e))
			}
			if l := formatTicks(t); len(t) <= 8 && fits(t, l) {
				return t, l
			}
		}
		// Less than two decades shown: ticks at 1, 2, 5 × 10^k, else linear.
		var t []float64
		for e := math.Floor(a.lo); e <= a.hi; e++ {
			for _, m := range []float64{1, 2, 5} {
				if v := m * math.Pow(10, e); math.Log10(v) >= a.lo && math.Log10(v) <= a.hi {
					t = append(t, v)
				}
			}
		}
		if l := formatTicks(t); len(t) >= 2 && len(t) <= 8 && fits(t, l) {
			return t, l
		}
		return linearTicks(math.Pow(10, a.lo), math.Pow(10, a.hi), fits)
	}
	return linearTicks(a.lo, a.hi, fits)
}

func linearTicks(lo, hi float64, fits func([]float64, []string) bool) ([]float64, []string) {
	e := math.Floor(math.Log10(hi-lo)) - 1 // 10^e <= span/10
	var best []float64
	var bestLabels []string
	bestScore := math.Inf(1)
	for i := 0; i < 12; i++ {
		m, p := []float64{1, 2, 5}[i%3], e+float64(i/3)
		t := stepTicks(lo, hi, m, p)
		l := formatTicks(t)
		if !fits(t, l) {
			continue
		}
		// Lowest for 6–7 ticks; too many is penalised more than too few.
		score := math.Max(float64(5-len(t)), 2*float64(len(t)-8))
		if score < bestScore {
			best, bestLabels, bestScore = t, l, score
		}
	}
	return best, bestLabels
}

// stepTicks returns the multiples of m×10^p in [lo, hi], computed as
// integer × m scaled by an exact power of ten so that 0.1 steps give 0.3
// rather than 0.30000000000000004.
func stepTicks(lo, hi, m, p float64) []float64 {
	step := m * math.Pow(10, p)
	klo, khi := math.Ceil(lo/step), math.Floor(hi/step)
	if !(khi-klo < 100) { // also catches NaN
		return nil
	}
	var t []float64
	// Counted by an int: beyond 2^53, k++ would leave a float k unchanged
	// (a span of a few ulps around 1 hung the loop).
	for i := 0; i <= int(khi-klo); i++ {
		k := klo + float64(i)
		v := k * m * math.Pow(10, p)
		if p < 0 {
			v = k * m / math.Pow(10, -p)
		}
		if v >= lo && v <= hi && (len(t) == 0 || v != t[len(t)-1]) {
			t = append(t, v)
		}
	}
	return t
}

// formatTicks formats tick values compactly and consistently along an axis:
// plain decimals ("0.001", "250") unless a value reaches 1e4 or a non-zero
// value is below 1e-4, in which case all use exponent form ("2e+04").
func formatTicks(t []float64) []string {
	exp := false
	for _, v := range t {
		if a := math.Abs(v); a >= 1e4 || (a != 0 && a < 1e-4) {
			exp = true
		}
	}
	l := make([]string, len(t))
	for i, v := range t {
		switch {
		case v == 0:
			l[i] = "0"
		case exp:
			l[i] = strconv.FormatFloat(v, 'e', -1, 64)
		default:
			l[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return l
}

// padRange widens [lo, hi] (transformed values) by 5% on each side, or by 1
// (a factor of 10 on a log axis, where the values are already log10) when
// lo == hi. On a log axis the padding stops at 1e-307 and 1e308, so that
// the axis's ends are positive and finite as values.
func padRange(lo, hi float64, log bool) (float64, float64) {
	l, h := lo, hi
	if lo == hi {
		d := 1.0
		if !log && lo+d == lo { // magnitude too large for ±1 to register
			d = math.Abs(lo) / 10
		}
		l, h = lo-d, hi+d
	} else {
		pad := 0.05*hi - 0.05*lo // no overflow for huge spans
		if pl, ph := lo-pad, hi+pad; !math.IsInf(pl, 0) && !math.IsInf(ph, 0) {
			l, h = pl, ph
		}
	}
	if log {
		l, h = math.Max(l, math.Min(lo, -307)), math.Min(h, math.Max(hi, 308))
	}
	return l, h
}

// legend is a row of entries, each a series' thumbnail and name, left to
// right and wrapped at the right margin (gonum's plot.Legend is one column
// over the data).
type legend struct {
	sty     text.Style
	entries []legendEntry
}

type legendEntry struct {
	text  string
	thumb plot.Thumbnailer
}

func newLegend() legend {
	return legend{sty: text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 11), Handler: plot.DefaultTextHandler,
		YAlign: draw.YBottom}}
}

func (l *legend) add(name string, t plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{name, t})
}

// draw lays the entries out along the top of c and returns the height they
// take, with the gap below them; with paint false it only measures.
func (l *legend) draw(c draw.Canvas, paint bool) vg.Length {
	if len(l.entries) == 0 {
		return 0
	}
	lineH := l.sty.Height("Mg")
	thumbW, gap, colGap := lineH, lineH/3, lineH
	descent := l.sty.FontExtents().Descent
	x, row := c.Min.X, 0
	for _, e := range l.entries {
		w := thumbW + gap + l.sty.Width(e.text)
		if x > c.Min.X && x+w > c.Max.X {
			x, row = c.Min.X, row+1
		}
		if paint {
			top := c.Max.Y - vg.Length(row)*lineH
			thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: top - lineH}, Max: vg.Point{X: x + thumbW, Y: top}}}
			e.thumb.Thumbnail(&thumb)
			c.FillText(l.sty, vg.Point{X: x + thumbW + gap, Y: top - lineH + descent}, e.text)
		}
		x += w + colGap
	}
	return vg.Length(row+1)*lineH + lineH/2
}

// points is a plot.Plotter that draws a series' points as squares 3 PNG
// pixels wide, centred on the pixel that holds the point (a point moves by
// at most half a pixel, so the squares are crisp, without antialiasing),
// each pixel's square once, all in one path filled once. With 10^5 points
// that is several times faster than plotter.Scatter, which fills a glyph
// per point, and it keeps dense SVG and PDF files small.
type points struct {
	xys    plotter.XYs
	colour color.Color
}

func (p *points) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	px := plotcanvas.Pixels(1)
	pixel := func(l vg.Length) int { return int(math.Floor(float64(l / px))) }
	// seen marks the pixels that have a square, over the data area and a
	// pixel around it.
	x0, y0 := pixel(c.Min.X)-1, pixel(c.Min.Y)-1
	w, h := pixel(c.Max.X)+2-x0, pixel(c.Max.Y)+2-y0
	seen := make([]bool, w*h)
	var path vg.Path
	for _, xy := range p.xys {
		i, j := pixel(trX(xy.X)), pixel(trY(xy.Y))
		if i < x0 || i >= x0+w || j < y0 || j >= y0+h || seen[(j-y0)*w+i-x0] {
			continue // off the data area (the axes span every point) or drawn
		}
		seen[(j-y0)*w+i-x0] = true
		lo := vg.Point{X: vg.Length(i-1) * px, Y: vg.Length(j-1) * px}
		hi := vg.Point{X: vg.Length(i+2) * px, Y: vg.Length(j+2) * px}
		path.Move(lo)
		path.Line(vg.Point{X: hi.X, Y: lo.Y})
		path.Line(hi)
		path.Line(vg.Point{X: lo.X, Y: hi.Y})
		path.Close()
	}
	c.SetColor(p.colour)
	c.Fill(path)
}

// swatch is a legend's thumbnail: a square of the series' colour.
type swatch struct{ colour color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	h := 0.3 * c.Size().Y
	ctr := c.Center()
	c.FillPolygon(s.colour, []vg.Point{{X: ctr.X - h, Y: ctr.Y - h}, {X: ctr.X + h, Y: ctr.Y - h},
		{X: ctr.X + h, Y: ctr.Y + h}, {X: ctr.X - h, Y: ctr.Y + h}})
}
