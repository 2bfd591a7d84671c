package fit

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteMarkdown writes the report as Markdown. plots lists PNG files (paths
// relative to the Markdown file) to link.
func (r *Report) WriteMarkdown(w io.Writer, plots []string) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pass := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "**FAIL**"
	}
	p("# Calibration report\n\n")
	p("`%s` (%s %s). Acceptance (docs/physics-spec.md §9, provisional; beta's checks, alpha's are reported, not judged): %s.\n\n", r.Command, r.Tool, r.Version, pass(r.Pass))
	o := r.Options
	outliers := "no beta outlier rule"
	if o.OutlierFactor > 0 {
		outliers = fmt.Sprintf("beta steps above %g× the median of their configuration's steps with as many tokens (buckets of ≥ %d steps) or below the hardware's lower bound left out", o.OutlierFactor, MinOutlierBucket)
	}
	p("Grid λ %v × γ %v, %d temporal folds, last %g of each trace held out, warm-up steps ≤ %d left out, %s, steps with more than %g of running requests preempted weighted %g, beta target %s.\n\n",
		o.Lambdas, o.Gammas, o.Folds, o.Holdout, o.WarmupSteps, outliers, o.PreemptHeavy, o.PreemptWeight, o.BetaTarget)

	p("## Configurations\n\n| name | model | hardware | TP | traces | beta median cycle | beta samples with snapshots |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Configs {
		p("| %s | %s | %s | %d | %s | %.3f ms | %d |\n", c.Name, c.Model, c.Hardware, c.TP, strings.Join(c.Traces, ", "), c.BetaMedianMs, c.RichSamples)
	}
	for _, c := range r.Configs {
		for _, w := range c.Warnings {
			p("\n- warning (%s): %s", c.Name, w)
		}
		for _, d := range c.Dropped {
			p("\n- %s: %d rows dropped on read: %s", c.Name, d.Count, d.Reason)
		}
		if n := c.Outliers.Unjudged; n > 0 {
			p("\n- %s: %d steps in token buckets of fewer than %d steps were kept without being judged slow", c.Name, n, MinOutlierBucket)
		}
	}
	p("\n\n")
	writeOutliers(&b, r.Configs)

	vector := func(title string, v *VectorReport, regimes [2]string) {
		p("## %s\n\n", title)
		if !v.Fitted {
			p("Not fitted: %s.\n\n", v.NotFitted)
			writeCounts(&b, v.Skipped)
			return
		}
		p("%d samples", v.Samples)
		if len(v.Sources) > 0 {
			p(" (targets: %s)", describeSources(v.Sources))
		}
		p("; chosen λ = %g, γ = %g; solved by %s (rank %d, condition %.3g)", v.Lambda, v.Gamma, v.Solve.Method, v.Solve.Rank, v.Solve.Cond)
		if len(v.Solve.Dropped) > 0 {
			p("; all-zero features dropped: %s", strings.Join(v.Solve.Dropped, ", "))
		}
		p(".\n\n")
		writeCounts(&b, v.Skipped)
		p("| set | samples | MAPE | median APE | RMSE ms | median abs err ms | max abs err ms | max / median |\n|---|---|---|---|---|---|---|---|\n")
		row := func(name string, e Errors) {
			if e.N == 0 {
				p("| %s | 0 | no samples | | | | | |\n", name)
				return
			}
			p("| %s | %d | %s | %s | %.4g | %.4g | %.4g | %.3g |\n", name, e.N, percent(e.MAPE), percent(e.MedianAPE), e.RMSEms, e.MedianAEms, e.MaxAEms, e.MaxOverMedian)
		}
		row("cross-validation (training part)", v.CV)
		for _, h := range v.Holdout {
			row(h.Config+": hold-out", h.Errors)
			for i, rg := range h.Regimes {
				if rg.N > 0 {
					row(h.Config+": hold-out, "+regimes[i], rg)
				}
			}
		}
		for _, l := range v.LeaveOneOut {
			row(l.Config+": left out", l.Errors)
		}
		if len(v.LeaveOneOut) == 0 {
			p("\nLeave-one-config-out: not applicable with one configuration.\n")
		}
		if oo := v.OtherObjective; oo != nil {
			p("\nThe same samples fitted under the %s objective instead (λ = %g, for comparison; not the file's coefficients):\n\n", oo.Objective, oo.Lambda)
			p("| set | samples | MAPE | median APE | RMSE ms | median abs err ms | max abs err ms | max / median |\n|---|---|---|---|---|---|---|---|\n")
			row("cross-validation (training part)", oo.CV)
			for _, h := range oo.Holdout {
				row(h.Config+": hold-out", h.Errors)
			}
			for _, l := range oo.LeaveOneOut {
				row(l.Config+": left out", l.Errors)
			}
		}
		p("\n| check | config | value | threshold | result |\n|---|---|---|---|---|\n")
		for _, c := range v.Checks {
			note := ""
			if c.Note != "" {
				note = " (" + c.Note + ")"
			}
			value := fmt.Sprintf("%.4g", c.Value)
			if math.IsNaN(c.Value) {
				value = "none"
			}
			p("| %s%s | %s | %s | %s | %s |\n", c.Check, note, c.Config, value, c.Threshold, pass(c.Pass))
		}
		p("\n| coefficient | value |\n|---|---|\n")
		for _, c := range v.Coefficients {
			p("| %s | %.6g |\n", c.Name, c.Value)
		}
		p("\nCV RMSE (ms) by γ (rows) and λ (columns):\n\n| γ \\ λ |")
		var lambdas []float64
		for _, g := range v.Grid {
			if g.Gamma == v.Grid[0].Gamma {
				lambdas = append(lambdas, g.Lambda)
				p(" %g |", g.Lambda)
			}
		}
		p("\n|---|%s\n", strings.Repeat("---|", len(lambdas)))
		for i, g := range v.Grid {
			if i%len(lambdas) == 0 {
				p("| %g |", g.Gamma)
			}
			p(" %.5g |", g.RMSEms)
			if i%len(lambdas) == len(lambdas)-1 {
				p("\n")
			}
		}
		p("\n")
	}
	vector("Beta: step time", &r.Beta, [2]string{"prefill-dominated", "decode-dominated"})
	vector("Alpha: QUEUED → first SCHEDULED", &r.Alpha, [2]string{"queued", "unqueued"})
	c := r.Correction
	p("Scheduler-overhead correction: %s", c.Note)
	if c.Applied {
		p(" Overhead %.4g ms from %d unqueued requests; base_bias fitted %.6g, written %.6g.", c.OverheadMs, c.Samples, c.BaseBiasFitted, c.BaseBiasFitted+c.OverheadMs/1e3)
	}
	p(" The reference step started a median %.4g ms before QUEUED.\n\n", c.MedianLagMs)

	p("## Request overheads (what the simulator adds around the engine)\n\n| overhead | samples | base µs | per token µs | method | median µs | MAE µs |\n|---|---|---|---|---|---|---|\n")
	for _, l := range []struct {
		name string
		f    LineFit
	}{{"ARRIVED → QUEUED (per prompt token)", r.Arrival}, {"FINISHED → DEPARTED (per output token)", r.Departure}} {
		p("| %s | %d | %.4g | %.4g | %s | %.4g | %.4g |\n", l.name, l.f.N, l.f.BaseUs, l.f.PerUnit, l.f.Method, l.f.MedianUs, l.f.MAEUs)
	}
	writeCounts(&b, r.Overheads)
	if len(plots) > 0 {
		p("\n## Residual plots\n\n")
		for _, pl := range plots {
			p("![%s](%s)\n\n", pl, pl)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCounts(b *strings.Builder, cs []Count) {
	if len(cs) == 0 {
		return
	}
	b.WriteString("Left out:\n\n")
	for _, c := range cs {
		fmt.Fprintf(b, "- %d: %s\n", c.Count, c.Reason)
	}
	b.WriteString("\n")
}

// maxOutliersListed bounds the removed steps report.md lists per
// configuration; report.json lists all of them.
const maxOutliersListed = 20

func writeOutliers(b *strings.Builder, cfgs []ConfigInfo) {
	n := 0
	for _, c := range cfgs {
		n += len(c.Outliers.Removed)
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "## Beta steps removed as outliers\n\n%d steps (every one is in report.json, beta_outliers of its configuration).\n\n", n)
	b.WriteString("| config | trace | step | scheduled tokens | cycle ms | limit ms | reason |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cfgs {
		for i, r := range c.Outliers.Removed {
			if i == maxOutliersListed {
				fmt.Fprintf(b, "| %s | … %d more | | | | | |\n", c.Name, len(c.Outliers.Removed)-i)
				break
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %.4g | %.4g | %s |\n", c.Name, r.Trace, r.StepID, r.Tokens, r.Ms, r.LimitMs, r.Reason)
		}
	}
	b.WriteString("\n")
}

// percent is a fraction as a percentage, or "no positive target" for a
// MAPE over no sample (NaN).
func percent(x float64) string {
	if math.IsNaN(x) {
		return "no positive target"
	}
	return fmt.Sprintf("%.2f %%", x*100)
}
