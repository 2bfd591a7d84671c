package main

import (
	"bytes"
	"path/filepath"

	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/residplot"
)

// writePlots adds the hold-out residual plots of both vectors in dir to
// outs and returns their file names.
func writePlots(outs *atomicfile.Group, dir string, res *fit.Result) ([]string, error) {
	var names []string
	for _, v := range []struct {
		name, what string
		pts        []fit.Point
	}{
		{"beta", "step time", res.BetaHoldout},
		{"alpha", "QUEUED → SCHEDULED", res.AlphaHoldout},
	} {
		if len(v.pts) == 0 {
			continue
		}
		var series, resid []residplot.Series
		for c, cfg := range res.Report.Configs {
			s := residplot.Series{Name: cfg.Name}
			r := residplot.Series{Name: cfg.Name}
			for _, p := range v.pts {
				if p.Config != c {
					continue
				}
				s.X, s.Y = append(s.X, p.Actual*1e3), append(s.Y, p.Predicted*1e3)
				r.X, r.Y = append(r.X, p.Predicted*1e3), append(r.Y, (p.Predicted-p.Actual)*1e3)
			}
			series, resid = append(series, s), append(resid, r)
		}
		for _, pl := range []struct {
			file string
			plot residplot.Plot
		}{
			{v.name + "_predicted_vs_actual.png", residplot.Plot{
				Title: v.name + " hold-out: predicted vs actual " + v.what, XLabel: "actual (ms)", YLabel: "predicted (ms)",
				Series: series, Diagonal: true, LogX: v.name == "alpha", LogY: v.name == "alpha"}},
			{v.name + "_residuals.png", residplot.Plot{
				Title: v.name + " hold-out: residual vs predicted " + v.what, XLabel: "predicted (ms)", YLabel: "predicted - actual (ms)",
				Series: resid, HLines: []float64{0}}},
		} {
			var b bytes.Buffer
			if _, err := residplot.Encode(&b, pl.plot); err != nil {
				return nil, err
			}
			if err := outs.WriteFile(filepath.Join(dir, pl.file), "--report", b.Bytes()); err != nil {
				return nil, err
			}
			names = append(names, pl.file)
		}
	}
	return names, nil
}
