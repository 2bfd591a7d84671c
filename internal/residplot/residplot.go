// Package residplot draws the residual and predicted-versus-actual scatter
// plots that `calibrate fit` writes as PNG files into its validation report.
//
// A Plot holds one or more Series of points; Encode draws them with a frame,
// tick marks and labels, a title, axis labels, a legend, optional grey
// reference lines (y = x and horizontal lines) and optional log10 axes, and
// writes the result as a PNG. Text uses the fixed 7×13 bitmap face of
// golang.org/x/image/font/basicfont; everything else is drawn pixel by pixel
// into an 8-bit paletted image, so no plotting library is needed.
//
// Output is deterministic: the same Plot always gives a byte-identical PNG,
// which keeps generated reports stable under version control and lets tests
// compare images byte for byte.
package residplot

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
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
	Width, Height         int       // pixels; 0 means 800 (Width) or 600 (Height); at least 200×150, at most 16384 each
	LogX, LogY            bool      // log10 axes; points with a non-positive coordinate on a log axis are skipped
	Diagonal              bool      // draw the y = x line (for predicted-vs-actual)
	HLines                []float64 // horizontal reference lines (e.g. 0 for residuals); they do not widen the axis range, and ones outside it are not drawn
	MaxPoints             int       // per series; 0 means 100000. Larger series are thinned deterministically (every k-th point, k = ceil(n/MaxPoints)); the legend says "(1 in k shown)".
}

const (
	defaultWidth, defaultHeight = 800, 600
	minWidth, minHeight         = 200, 150
	maxSide                     = 16384
	defaultMaxPoints            = 100000
)

// Palette indices. Index 0 is the background so a new image is already white.
const (
	cWhite uint8 = iota
	cBlack
	cGrey
	cGrid
	cSeries // first of the series colours, which run to the end of palette
)

// palette holds white, black, the grey of reference lines, the light grey of
// the grid, then the six series colours (blue, orange, green, red, purple,
// brown).
var palette = color.Palette{
	color.RGBA{0xff, 0xff, 0xff, 0xff}, color.RGBA{0, 0, 0, 0xff},
	color.RGBA{0x80, 0x80, 0x80, 0xff}, color.RGBA{0xe6, 0xe6, 0xe6, 0xff},
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
}

func seriesColour(i int) uint8 { return cSeries + uint8(i%(len(palette)-int(cSeries))) }

var face font.Face = basicfont.Face7x13

const (
	glyphAscent = 11 // basicfont.Face7x13 metrics
	lineHeight  = 13
)

// Encode draws p and writes it as PNG to w. It returns the number of points
// skipped as non-finite or off a log axis (non-positive coordinate). A plot
// without any drawable point is not an error: it is drawn as an empty frame
// saying "no data".
func Encode(w io.Writer, p Plot) (skipped int, err error) {
	img, _, skipped, err := render(p)
	if err != nil {
		return 0, err
	}
	if err := png.Encode(w, img); err != nil {
		return skipped, fmt.Errorf("residplot: encoding PNG: %w", err)
	}
	return skipped, nil
}

// axis maps data values to pixels along one direction. lo and hi are in
// transformed space (log10 of the value on a log axis).
type axis struct {
	log    bool
	lo, hi float64
	ticks  []float64 // data values, not transformed
	labels []string
}

func (a *axis) tr(v float64) float64 {
	if a.log {
		return math.Log10(v)
	}
	return v
}

// drawable reports whether v can be placed on the axis.
func (a *axis) drawable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

// layout is the pixel geometry of a chart. The plot frame occupies
// [x0, x1] × [y0, y1] inclusive; data are mapped onto the same rectangle.
type layout struct {
	w, h           int
	x0, y0, x1, y1 int
	titleY         int // baseline
	legend         []legendEntry
}

type legendEntry struct {
	x, y   int // top-left of the swatch
	colour uint8
	text   string
}

// render draws p and returns the image, its layout and the skipped count.
func render(p Plot) (*image.Paletted, layout, int, error) {
	if p.Width == 0 {
		p.Width = defaultWidth
	}
	if p.Height == 0 {
		p.Height = defaultHeight
	}
	switch {
	case p.Width < minWidth || p.Width > maxSide:
		return nil, layout{}, 0, fmt.Errorf("residplot: Width %d out of range [%d, %d]", p.Width, minWidth, maxSide)
	case p.Height < minHeight || p.Height > maxSide:
		return nil, layout{}, 0, fmt.Errorf("residplot: Height %d out of range [%d, %d]", p.Height, minHeight, maxSide)
	case p.MaxPoints < 0:
		return nil, layout{}, 0, fmt.Errorf("residplot: MaxPoints %d is negative", p.MaxPoints)
	}
	if p.MaxPoints == 0 {
		p.MaxPoints = defaultMaxPoints
	}
	for i, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return nil, layout{}, 0, fmt.Errorf("residplot: Series[%d] %q: X has %d values but Y has %d", i, s.Name, len(s.X), len(s.Y))
		}
	}

	ax, ay := axis{log: p.LogX}, axis{log: p.LogY}
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	skipped := 0
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
	if hasData {
		ax.lo, ax.hi = padRange(xlo, xhi, ax.log)
		ay.lo, ay.hi = padRange(ylo, yhi, ay.log)
	}

	lay, err := makeLayout(p, &ax, &ay, hasData)
	if err != nil {
		return nil, layout{}, 0, err
	}
	img := image.NewPaletted(image.Rect(0, 0, lay.w, lay.h), palette)
	c := canvas{img: img, lay: lay}

	if hasData {
		c.axes(&ax, &ay)
		kx := float64(lay.x1-lay.x0) / (ax.hi - ax.lo)
		ky := float64(lay.y1-lay.y0) / (ay.hi - ay.lo)
		for si, s := range p.Series {
			k, _ := thin(len(s.X), p.MaxPoints)
			col := seriesColour(si)
			for i := 0; i < len(s.X); i += k {
				x, y := s.X[i], s.Y[i]
				if !ax.drawable(x) || !ay.drawable(y) {
					continue
				}
				px := float64(lay.x0) + (ax.tr(x)-ax.lo)*kx
				py := float64(lay.y1) - (ay.tr(y)-ay.lo)*ky
				c.square(px, py, col)
			}
		}
		for _, v := range p.HLines {
			if ay.drawable(v) {
				c.hline(float64(lay.y1)-(ay.tr(v)-ay.lo)*ky, cGrey)
			}
		}
		if p.Diagonal {
			c.diagonal(&ax, &ay, ky)
		}
	} else {
		msg := "no data"
		c.text((lay.x0+lay.x1-textWidth(msg))/2, (lay.y0+lay.y1)/2+glyphAscent/2, msg, cBlack)
	}
	c.rect(lay.x0, lay.y0, lay.x1, lay.y1, cBlack)

	if p.Title != "" {
		c.text((lay.w-textWidth(p.Title))/2, lay.titleY, p.Title, cBlack)
	}
	if p.XLabel != "" {
		c.text((lay.x0+lay.x1-textWidth(p.XLabel))/2, lay.h-6-2, p.XLabel, cBlack)
	}
	if p.YLabel != "" {
		// Rotated 90° anticlockwise, read bottom to top, centred on the frame.
		c.vtext(6, (lay.y0+lay.y1+textWidth(p.YLabel))/2, p.YLabel, cBlack)
	}
	for _, e := range lay.legend {
		c.fill(e.x, e.y+2, e.x+7, e.y+9, e.colour)
		c.text(e.x+12, e.y+glyphAscent, e.text, cBlack)
	}
	return img, lay, skipped, nil
}

// thin returns the stride k = ceil(n/maxPoints) (at least 1) used to thin a
// series of n points, and the number of points shown, ceil(n/k).
// maxPoints must be positive.
func thin(n, maxPoints int) (k, shown int) {
	k = max(1, (n+maxPoints-1)/maxPoints)
	return k, (n + k - 1) / k
}

// padRange widens [lo, hi] (transformed values) by 5% on each side, or by 1
// (a factor of 10 on a log axis, where the values are already log10) when
// lo == hi.
func padRange(lo, hi float64, log bool) (float64, float64) {
	if lo == hi {
		d := 1.0
		if !log && lo+d == lo { // magnitude too large for ±1 to register
			d = math.Abs(lo) / 10
		}
		return lo - d, hi + d
	}
	pad := 0.05*hi - 0.05*lo // no overflow for huge spans
	if l, h := lo-pad, hi+pad; !math.IsInf(l, 0) && !math.IsInf(h, 0) {
		return l, h
	}
	return lo, hi
}

func textWidth(s string) int { return font.MeasureString(face, s).Ceil() }

// makeLayout places title, legend and frame, and chooses the ticks of both
// axes so that their labels do not overlap.
func makeLayout(p Plot, ax, ay *axis, hasData bool) (layout, error) {
	lay := layout{w: p.Width, h: p.Height}
	top := 6
	if p.Title != "" {
		lay.titleY = top + glyphAscent
		top += lineHeight + 6
	}
	// Legend: entries left to right, wrapped at the right margin.
	x, rows := 10, 0
	for i, s := range p.Series {
		text := s.Name
		if text == "" {
			text = "series " + strconv.Itoa(i+1)
		}
		if k, _ := thin(len(s.X), p.MaxPoints); k > 1 {
			text += fmt.Sprintf(" (1 in %d shown)", k)
		}
		wd := 12 + textWidth(text)
		if rows == 0 || (x > 10 && x+wd > lay.w-10) {
			x = 10
			rows++
		}
		lay.legend = append(lay.legend, legendEntry{x: x, y: top + (rows-1)*(lineHeight+2), colour: seriesColour(i), text: text})
		x += wd + 18
	}
	top += rows*(lineHeight+2) + 8
	lay.y0 = top
	lay.y1 = lay.h - 1 - (4 + 2 + lineHeight + 6)
	if p.XLabel != "" {
		lay.y1 -= lineHeight + 3
	}
	left := 6
	if p.YLabel != "" {
		left += lineHeight + 6
	}
	if hasData {
		ay.ticks, ay.labels = chooseTicks(ay, labelsFit(ay, lay.y1-lay.y0, true))
		wmax := 0
		for _, l := range ay.labels {
			wmax = max(wmax, textWidth(l))
		}
		left += wmax + 4
	}
	lay.x0 = left + 4
	lay.x1 = lay.w - 1 - 25
	if lay.x1-lay.x0 < 40 || lay.y1-lay.y0 < 40 {
		return lay, fmt.Errorf("residplot: %d×%d image leaves no room for the plot beside its labels and legend", lay.w, lay.h)
	}
	if hasData {
		ax.ticks, ax.labels = chooseTicks(ax, labelsFit(ax, lay.x1-lay.x0, false))
	}
	return lay, nil
}

// tickPixels gives the tick positions as pixel offsets from the axis start.
func tickPixels(a *axis, ticks []float64, length int) []float64 {
	pos := make([]float64, len(ticks))
	for i, t := range ticks {
		pos[i] = (a.tr(t) - a.lo) / (a.hi - a.lo) * float64(length)
	}
	return pos
}

// labelsFit returns a check that tick labels along an axis of the given
// pixel length do not overlap (text is horizontal on both axes).
func labelsFit(a *axis, length int, vertical bool) func([]float64, []string) bool {
	return func(t []float64, l []string) bool {
		pos := tickPixels(a, t, length)
		for i := 1; i < len(t); i++ {
			need := float64(textWidth(l[i-1])+textWidth(l[i]))/2 + 10
			if vertical {
				need = lineHeight + 3
			}
			if pos[i]-pos[i-1] < need {
				return false
			}
		}
		return true
	}
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
	for k := klo; k <= khi; k++ {
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

// canvas draws into a paletted image; every write is clipped to the image.
type canvas struct {
	img *image.Paletted
	lay layout
}

func (c *canvas) set(x, y int, col uint8) {
	if x >= 0 && y >= 0 && x < c.lay.w && y < c.lay.h {
		c.img.Pix[y*c.img.Stride+x] = col
	}
}

// fill paints the rectangle [x0, x1] × [y0, y1] inclusive.
func (c *canvas) fill(x0, y0, x1, y1 int, col uint8) {
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			c.set(x, y, col)
		}
	}
}

func (c *canvas) rect(x0, y0, x1, y1 int, col uint8) {
	c.fill(x0, y0, x1, y0, col)
	c.fill(x0, y1, x1, y1, col)
	c.fill(x0, y0, x0, y1, col)
	c.fill(x1, y0, x1, y1, col)
}

// square draws a 3×3 point centred on (px, py), clipped to the frame interior.
func (c *canvas) square(px, py float64, col uint8) {
	l := c.lay
	if !(px > float64(l.x0-2) && px < float64(l.x1+2) && py > float64(l.y0-2) && py < float64(l.y1+2)) {
		return // also rejects NaN
	}
	cx, cy := int(math.Round(px)), int(math.Round(py))
	for y := max(cy-1, l.y0+1); y <= min(cy+1, l.y1-1); y++ {
		row := c.img.Pix[y*c.img.Stride:]
		for x := max(cx-1, l.x0+1); x <= min(cx+1, l.x1-1); x++ {
			row[x] = col
		}
	}
}

// hline draws a horizontal line across the frame interior at pixel row py.
func (c *canvas) hline(py float64, col uint8) {
	if py > float64(c.lay.y0) && py < float64(c.lay.y1) { // also rejects NaN
		c.fill(c.lay.x0+1, int(math.Round(py)), c.lay.x1-1, int(math.Round(py)), col)
	}
}

// diagonal draws y = x, one column at a time, joining consecutive columns
// with vertical runs so that steep stretches stay connected; it is a curve
// when exactly one axis is logarithmic.
func (c *canvas) diagonal(ax, ay *axis, ky float64) {
	l := c.lay
	row := func(x int) float64 {
		v := ax.lo + float64(x-l.x0)/float64(l.x1-l.x0)*(ax.hi-ax.lo)
		if ax.log {
			v = math.Pow(10, v)
		}
		if !ay.drawable(v) {
			return math.NaN()
		}
		// Clamp far-off rows so the conversion to int below is safe.
		return math.Max(float64(l.y0-1), math.Min(float64(l.y1+1), float64(l.y1)-(ay.tr(v)-ay.lo)*ky))
	}
	for x := l.x0 + 1; x < l.x1; x++ {
		a, b := row(x), row(x+1)
		if math.IsNaN(a) {
			continue
		}
		if math.IsNaN(b) || x+1 == l.x1 {
			b = a
		}
		ya, yb := int(math.Round(a)), int(math.Round(b))
		for y := max(min(ya, yb), l.y0+1); y <= min(max(ya, yb), l.y1-1); y++ {
			c.img.Pix[y*c.img.Stride+x] = cGrey
		}
	}
}

// axes draws grid lines, tick marks outside the frame and tick labels.
func (c *canvas) axes(ax, ay *axis) {
	l := c.lay
	for i, p := range tickPixels(ax, ax.ticks, l.x1-l.x0) {
		x := int(math.Round(float64(l.x0) + p))
		if x > l.x0 && x < l.x1 {
			c.fill(x, l.y0+1, x, l.y1-1, cGrid)
		}
		c.fill(x, l.y1+1, x, l.y1+4, cBlack)
		c.text(x-textWidth(ax.labels[i])/2, l.y1+6+glyphAscent, ax.labels[i], cBlack)
	}
	for i, p := range tickPixels(ay, ay.ticks, l.y1-l.y0) {
		c.hline(float64(l.y1)-p, cGrid)
		y := int(math.Round(float64(l.y1) - p))
		c.fill(l.x0-4, y, l.x0-1, y, cBlack)
		c.text(l.x0-6-textWidth(ay.labels[i]), y+glyphAscent/2, ay.labels[i], cBlack)
	}
}

// text draws s with its baseline starting at (x, y).
func (c *canvas) text(x, y int, s string, col uint8) {
	c.glyphs(s, func(gx, gy int) { c.set(x+gx, y+gy, col) })
}

// vtext draws s rotated 90° anticlockwise, reading upwards from row y, with
// the tops of the glyphs at column x.
func (c *canvas) vtext(x, y int, s string, col uint8) {
	c.glyphs(s, func(gx, gy int) { c.set(x+gy+glyphAscent, y-gx, col) })
}

// glyphs calls plot for every set pixel of s laid out horizontally, with
// coordinates relative to the start of the baseline.
func (c *canvas) glyphs(s string, plot func(gx, gy int)) {
	dot := fixed.P(0, 0)
	for _, r := range s {
		dr, mask, mp, adv, _ := face.Glyph(dot, r)
		if a, ok := mask.(*image.Alpha); ok {
			for y := dr.Min.Y; y < dr.Max.Y; y++ {
				for x := dr.Min.X; x < dr.Max.X; x++ {
					if a.AlphaAt(mp.X+x-dr.Min.X, mp.Y+y-dr.Min.Y).A >= 0x80 {
						plot(x, y)
					}
				}
			}
		}
		dot.X += adv
	}
}
