package validate

import (
	"errors"
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/blis-sim/blis/internal/plotcanvas"
)

// Formats are the image formats WritePlot writes, by file extension.
var Formats = plotcanvas.Formats

// The figure's size; a PNG has 96 pixels per inch (1152 × 432).
const (
	plotWidth  = 12 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	// maxPoints is the most points a panel draws; a panel with more draws
	// every k-th compared request, k = ceil(n / maxPoints), and says so.
	maxPoints = 20000
)

// The points (Okabe and Ito's blue, translucent so that dense regions show)
// and the y = x line.
var (
	pointColor = color.NRGBA{0, 114, 178, 128}
	lineStyle  = draw.LineStyle{Color: color.Gray{100}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
)

// panels are the figure's panels from left to right, with the µs per unit
// of their axes.
var panels = [...]struct {
	metric Metric
	name   string
	unit   string
	perUs  float64
}{{TTFT, "TTFT", "s", 1e6}, {ITL, "mean ITL", "ms", 1e3}, {E2E, "E2E", "s", 1e6}}

// WritePlot draws three scatter panels side by side, TTFT (s), mean ITL
// (ms) and E2E (s): x the measured, y the simulated value, one point per
// compared request (see the package doc; more than 20000 are thinned to
// every k-th), with the y = x line, under title (none when ""), to w in
// format, "png", "svg" or "pdf" (Formats; the same inputs give the same
// bytes, see internal/plotcanvas). The caller makes the file (blis
// validate writes a temporary file and renames it on success). It is an
// error when no request has both a measured and a simulated value of any
// metric; nothing is written then.
func WritePlot(w io.Writer, pairs []Pair, title, format string) error {
	c, err := plotcanvas.New(format, plotWidth, plotHeight)
	if err != nil {
		return err
	}
	plots, err := buildPlots(pairs)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	padTop := vg.Points(6)
	if title != "" {
		sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 14), Handler: plot.DefaultTextHandler,
			XAlign: draw.XCenter, YAlign: draw.YTop}
		dc.FillText(sty, vg.Point{X: plotWidth / 2, Y: plotHeight - vg.Points(6)}, title)
		padTop += sty.Height(title) + vg.Points(10)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadTop: padTop, PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12), PadX: vg.Points(18)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	_, err = c.WriteTo(w)
	return err
}

// buildPlots makes the panels.
func buildPlots(pairs []Pair) ([]*plot.Plot, error) {
	var plots []*plot.Plot
	var total int
	for _, pn := range panels {
		var pts plotter.XYs
		var hi float64
		for i := range pairs {
			a, b := pairs[i].Values(pn.metric)
			if a < 0 || b < 0 {
				continue
			}
			x, y := float64(a)/pn.perUs, float64(b)/pn.perUs
			pts = append(pts, plotter.XY{X: x, Y: y})
			hi = max(hi, x, y)
		}
		n := len(pts)
		total += n
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %d requests", pn.name, n)
		if k := (n + maxPoints - 1) / maxPoints; k > 1 {
			thin := make(plotter.XYs, 0, maxPoints)
			for j := 0; j < n; j += k {
				thin = append(thin, pts[j])
			}
			pts = thin
			p.Title.Text += fmt.Sprintf(" (1 in %d shown)", k)
		}
		p.X.Label.Text = fmt.Sprintf("measured %s (%s)", pn.name, pn.unit)
		p.Y.Label.Text = fmt.Sprintf("simulated %s (%s)", pn.name, pn.unit)
		if hi <= 0 { // nothing, or all zero: an axis from 0 to 1
			hi = 1
		}
		hi *= 1.05
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, hi, 0, hi
		p.Add(plotter.NewGrid())
		diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: hi, Y: hi}})
		if err != nil {
			return nil, err
		}
		diag.LineStyle = lineStyle
		p.Add(diag)
		if n > 0 {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pn.name, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: pointColor, Radius: vg.Points(1.5), Shape: draw.CircleGlyph{}}
			p.Add(sc)
		}
		plots = append(plots, p)
	}
	if total == 0 {
		return nil, errors.New("no request has both a measured and a simulated latency to plot")
	}
	return plots, nil
}
