package sweep

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/plotcanvas"
)

// PlotFormats are the figure's formats, by file extension.
var PlotFormats = plotcanvas.Formats

// Figure is what the sweep's figure draws: Metric (a metric column)
// against the swept key X, one line per combination of the other swept
// keys' values (a series), each point the mean over the point's seeds
// with a bar from their least to their greatest value.
type Figure struct {
	Metric, X string
}

// DefaultFigure is the figure drawn when none is chosen: SLO attainment
// when the runs report it, else TTFT p99, against the first numeric
// swept key (the first one when none is numeric).
func (p *Plan) DefaultFigure() Figure {
	f := Figure{Metric: "ttft_p99_ms"}
	if _, err := p.MetricIndex("slo_attainment"); err == nil {
		f.Metric = "slo_attainment"
	}
	for i, a := range p.Grid.Axes {
		if p.Kinds[i] != String {
			f.X = a.Key
			break
		}
	}
	if f.X == "" && len(p.Grid.Axes) > 0 {
		f.X = p.Grid.Axes[0].Key
	}
	return f
}

// Okabe and Ito's colors, told apart by most color-blind readers (their
// yellow left out: too light on white), then the same dashed.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255}, color.RGBA{204, 121, 167, 255},
	color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{0, 0, 0, 255},
}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}}

// Plot draws fig of rows in format (PlotFormats) to w; the same rows give
// the same bytes (internal/plotcanvas).
func (p *Plan) Plot(w io.Writer, rows []Row, fig Figure, format string) error {
	c, err := plotcanvas.New(format, 8*vg.Inch, 5*vg.Inch)
	if err != nil {
		return err
	}
	pl, err := p.figure(rows, fig)
	if err != nil {
		return err
	}
	pl.Draw(draw.Crop(draw.New(c), vg.Points(6), -vg.Points(14), vg.Points(6), -vg.Points(6)))
	_, err = c.WriteTo(w)
	return err
}

// errPts are a series' points with their bars.
type errPts []struct{ x, y, lo, hi float64 }

func (e errPts) Len() int                    { return len(e) }
func (e errPts) XY(i int) (float64, float64) { return e[i].x, e[i].y }
func (e errPts) YError(i int) (float64, float64) {
	return e[i].y - e[i].lo, e[i].hi - e[i].y
}

// CheckFigure refuses a figure the plan cannot draw (a metric its runs do
// not report, an x that is not a swept key), before any run.
func (p *Plan) CheckFigure(fig Figure) error {
	_, _, err := p.figureAxes(fig)
	return err
}

// figureAxes are fig's metric (its index in Row.Cells) and x (its axis).
func (p *Plan) figureAxes(fig Figure) (m, xa int, err error) {
	if m, err = p.MetricIndex(fig.Metric); err != nil {
		return 0, 0, err
	}
	xa = -1
	for i, a := range p.Grid.Axes {
		if a.Key == fig.X {
			xa = i
		}
	}
	if xa < 0 {
		var keys []string
		for _, a := range p.Grid.Axes {
			keys = append(keys, a.Key)
		}
		if len(keys) == 0 {
			return 0, 0, errors.New("the figure draws a metric against a swept key, and this sweep sweeps none")
		}
		return 0, 0, fmt.Errorf("the figure's x axis %q is not a swept key; use one of %s", clip.String(fig.X), strings.Join(keys, ", "))
	}
	return m, xa, nil
}

func (p *Plan) figure(rows []Row, fig Figure) (*plot.Plot, error) {
	m, xa, err := p.figureAxes(fig)
	if err != nil {
		return nil, err
	}
	numeric := p.Kinds[xa] != String
	xvals := p.Grid.Axes[xa].Values
	// Values per point, over its seeds.
	type agg struct {
		sum, lo, hi float64
		n           int
	}
	pts := make([]agg, p.Points)
	for _, r := range rows {
		if r.Status != StatusOK || r.Cells[m] == "" {
			continue
		}
		y, err := strconv.ParseFloat(r.Cells[m], 64)
		if err != nil {
			continue
		}
		a := &pts[p.Point(r.Run)]
		if a.n == 0 {
			a.lo, a.hi = y, y
		}
		a.sum, a.lo, a.hi, a.n = a.sum+y, math.Min(a.lo, y), math.Max(a.hi, y), a.n+1
	}
	// Series: the points grouped by the other axes' values, in grid order.
	var order []string
	series := map[string]errPts{}
	for i := range p.Points {
		a := pts[i]
		if a.n == 0 {
			continue
		}
		vals := p.Grid.Values(i)
		var name []string
		for j, v := range vals {
			if j != xa {
				name = append(name, shortKey(p.Grid.Axes[j].Key)+"="+v)
			}
		}
		key := strings.Join(name, ", ")
		if _, ok := series[key]; !ok {
			order = append(order, key)
		}
		x := 0.0
		for k, v := range xvals {
			if v == vals[xa] {
				x = float64(k)
				if numeric {
					x, _ = strconv.ParseFloat(v, 64)
				}
			}
		}
		series[key] = append(series[key], struct{ x, y, lo, hi float64 }{x, a.sum / float64(a.n), a.lo, a.hi})
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no run that succeeded reports %s: nothing to draw", fig.Metric)
	}
	pl := plot.New()
	col := p.metrics[m].Column
	pl.Title.Text = fmt.Sprintf("%s against %s", col.Name, fig.X)
	if p.Seeds > 1 {
		pl.Title.Text += fmt.Sprintf(" (mean of %d seeds, bars from least to greatest)", p.Seeds)
	}
	pl.X.Label.Text = fig.X
	pl.Y.Label.Text = col.Name
	if col.Unit != "" {
		pl.Y.Label.Text += " (" + col.Unit + ")"
	}
	pl.Legend.Top = true
	pl.Legend.TextStyle.Font.Size = vg.Points(9)
	if !numeric {
		var ticks []plot.Tick
		for k, v := range xvals {
			ticks = append(ticks, plot.Tick{Value: float64(k), Label: v})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
		pl.X.Min, pl.X.Max = -0.5, float64(len(xvals))-0.5
	}
	for k, name := range order {
		pts := series[name]
		style := draw.LineStyle{Color: palette[k%len(palette)], Width: vg.Points(1.5)}
		if k/len(palette)%2 == 1 {
			style.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		line, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", name, err)
		}
		line.LineStyle = style
		sc.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(3), Shape: glyphs[k%len(glyphs)]}
		pl.Add(line, sc)
		if p.Seeds > 1 {
			bars, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", name, err)
			}
			bars.LineStyle = draw.LineStyle{Color: style.Color, Width: vg.Points(1)}
			pl.Add(bars)
		}
		if name != "" { // a single series needs no legend
			pl.Legend.Add(name, line, sc)
		}
	}
	if pad := (pl.X.Max - pl.X.Min) * 0.03; numeric && pad > 0 {
		pl.X.Min, pl.X.Max = pl.X.Min-pad, pl.X.Max+pad
	}
	if len(order) > 1 && pl.Y.Max > pl.Y.Min {
		pl.Y.Max += (pl.Y.Max - pl.Y.Min) * 0.3 // room for the legend
	}
	return pl, nil
}

// shortKey names a swept key in the legend: its last part, and the one
// before when the last says little (policies.routing.type: routing.type).
func shortKey(key string) string {
	parts := strings.Split(key, ".")
	n := len(parts)
	if n >= 2 && (parts[n-1] == "type" || parts[n-1] == "model" || parts[n-2] == "params") {
		return parts[n-2] + "." + parts[n-1]
	}
	return parts[n-1]
}
