// Package windowplot draws a cluster run's time windows (cluster.Window)
// as one figure of stacked panels over simulated time: arrival and
// completion rates, the replicas ready and starting (when an autoscaler
// changed them), TTFT p50 and p99, queue depth and running batch, and KV
// utilization. It is apart from package cluster so that the simulator
// does not depend on the plotting library.
package windowplot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/internal/plotcanvas"
)

// Formats are the image formats Write draws, by file extension.
var Formats = plotcanvas.Formats

// The figure's size; a PNG has 96 pixels per inch (768 × 1056).
const (
	width  = 8 * vg.Inch
	height = 11 * vg.Inch
)

// Two colors a panel's series take in turn (Okabe and Ito's blue and
// vermillion, told apart by most color-blind readers), and a dashed line
// for the second.
var (
	colors = [2]color.Color{color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}}
	dashes = [2][]vg.Length{nil, {vg.Points(4), vg.Points(2)}}
)

// series is one line of a panel: a value per window, absent where ok is
// false (the line breaks there).
type series struct {
	name  string
	value func(w *cluster.Window) (v float64, ok bool)
}

// panel is one of the stacked plots.
type panel struct {
	ylabel string
	// atEnd places each window's value at its end (a state sampled there)
	// rather than at its middle (a count over the window).
	atEnd  bool
	ymax   float64 // > 0 fixes the axis's top
	series []series
	// when, if set, says whether the rows call for the panel.
	when func(rows []cluster.Window) bool
}

// scaled reports whether the fleet changed during the run: an
// autoscaler's runs draw their replicas against the load.
func scaled(rows []cluster.Window) bool {
	for i := range rows {
		if w := &rows[i]; w.ReplicasStarting > 0 || w.ReplicasDraining > 0 || w.ReplicasReady != rows[0].ReplicasReady {
			return true
		}
	}
	return false
}

func perS(w *cluster.Window, n int64) float64 {
	return float64(n) * 1e6 / float64(w.EndUs-w.StartUs)
}

var panels = []panel{
	{ylabel: "requests/s", series: []series{
		{"arrived", func(w *cluster.Window) (float64, bool) { return perS(w, w.Arrived), true }},
		{"completed", func(w *cluster.Window) (float64, bool) { return perS(w, w.Completed), true }},
	}},
	{ylabel: "replicas", atEnd: true, when: scaled, series: []series{
		{"ready", func(w *cluster.Window) (float64, bool) { return float64(w.ReplicasReady), true }},
		{"starting (pending, loading, warming)", func(w *cluster.Window) (float64, bool) { return float64(w.ReplicasStarting), true }},
	}},
	{ylabel: "TTFT (ms), by completion", series: []series{
		{"p50", func(w *cluster.Window) (float64, bool) { return float64(w.TTFTP50Us) / 1000, w.Completed > 0 }},
		{"p99", func(w *cluster.Window) (float64, bool) { return float64(w.TTFTP99Us) / 1000, w.Completed > 0 }},
	}},
	{ylabel: "requests, all instances", atEnd: true, series: []series{
		{"waiting (queue depth)", func(w *cluster.Window) (float64, bool) { return float64(w.QueueDepth), true }},
		{"running (batch)", func(w *cluster.Window) (float64, bool) { return float64(w.Running), true }},
	}},
	{ylabel: "KV utilization", atEnd: true, ymax: 1, series: []series{
		{"mean over instances", func(w *cluster.Window) (float64, bool) { return w.KVUtilMean, true }},
		{"max", func(w *cluster.Window) (float64, bool) { return w.KVUtilMax, true }},
	}},
}

// Write draws rows (consecutive windows, as cluster.Result.Windows holds
// them) in format "png", "svg" or "pdf" (Formats) to out; the same rows
// give the same bytes (see internal/plotcanvas).
func Write(out io.Writer, rows []cluster.Window, format string) error {
	c, err := plotcanvas.New(format, width, height)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return errors.New("no time windows to draw")
	}
	plots, err := build(rows)
	if err != nil {
		return err
	}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(10)}
	canvases := plot.Align(grid, tiles, draw.New(c))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	_, err = c.WriteTo(out)
	return err
}

// build makes the panels, sharing one time axis in seconds.
func build(rows []cluster.Window) ([]*plot.Plot, error) {
	first, last := &rows[0], &rows[len(rows)-1]
	d := time.Duration(first.EndUs-first.StartUs) * time.Microsecond
	xmin, xmax := float64(first.StartUs)/1e6, float64(last.EndUs)/1e6
	var plots []*plot.Plot
	for i := range panels {
		pn := &panels[i]
		if pn.when != nil && !pn.when(rows) {
			continue
		}
		p := plot.New()
		p.Y.Label.Text = pn.ylabel
		p.Y.Min = 0
		if pn.ymax > 0 {
			p.Y.Max = pn.ymax
		}
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		for k, s := range pn.series {
			segs := segments(rows, pn.atEnd, s.value)
			for j, seg := range segs {
				style := draw.LineStyle{Color: colors[k%2], Width: vg.Points(1.2), Dashes: dashes[k%2]}
				l, err := plotter.NewLine(seg)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				l.LineStyle = style
				p.Add(l)
				if len(seg) == 1 { // a lone point draws no line
					sc, err := plotter.NewScatter(seg)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", s.name, err)
					}
					sc.GlyphStyle.Color, sc.GlyphStyle.Radius = style.Color, vg.Points(2)
					p.Add(sc)
				}
				if j == 0 {
					p.Legend.Add(s.name, l)
				}
			}
		}
		p.X.Min, p.X.Max = xmin, xmax
		switch {
		case pn.ymax > 0:
		case p.Y.Max <= 0: // all zero: an axis from 0 to 1 rather than around 0
			p.Y.Max = 1
		default: // room for the legend above the lines
			p.Y.Max *= 1.25
		}
		plots = append(plots, p)
	}
	plots[0].Title.Text = fmt.Sprintf("cluster run in time windows of %s", d)
	plots[len(plots)-1].X.Label.Text = "simulated time (s)"
	return plots, nil
}

// segments are the runs of windows where value is present, as points at
// each window's middle or end, in seconds.
func segments(rows []cluster.Window, atEnd bool, value func(*cluster.Window) (float64, bool)) []plotter.XYs {
	var segs []plotter.XYs
	var cur plotter.XYs
	for k := range rows {
		w := &rows[k]
		v, ok := value(w)
		if !ok {
			if len(cur) > 0 {
				segs = append(segs, cur)
				cur = nil
			}
			continue
		}
		x := float64(w.StartUs+w.EndUs) / 2e6
		if atEnd {
			x = float64(w.EndUs) / 1e6
		}
		cur = append(cur, plotter.XY{X: x, Y: v})
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	return segs
}
