package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/steady"
)

// The points table (blis sweep --points FILE): one row per grid point,
// each metric's mean over the point's seeds with its 95 % interval over
// them (the replication interval, Student's t on the seeds' values, Law
// & Kelton §9.4.1; with one seed, that run's own interval within the run
// when it has one), and the worst verdict of its runs. It is made from
// the runs' rows, so a sweep run in shards and merged gives the same
// points table as one run at once.

// PointColumns are the points table's columns: point, the swept keys,
// seeds (the runs that succeeded), stability, then for each metric of the
// sweep's table (not its interval columns) the mean and its interval's
// ends.
func (p *Plan) PointColumns() []Column {
	cols := []Column{colPoint}
	for i, a := range p.Grid.Axes {
		cols = append(cols, Column{Name: a.Key, Kind: p.Kinds[i], Doc: "a swept key's value"})
	}
	cols = append(cols,
		Column{Name: "seeds", Kind: Int, Doc: "the point's runs that succeeded, the seeds its means and intervals are over"},
		Column{Name: "stability", Kind: String, Metric: true, Doc: "the worst verdict of its runs: unstable, else indeterminate, else stable"})
	for _, m := range p.metrics {
		if m.aux {
			continue
		}
		u := m.Unit
		cols = append(cols,
			Column{Name: m.Name, Kind: Float, Unit: u, Metric: true, Doc: "the mean over the point's seeds of " + m.Name},
			Column{Name: m.Name + "_ci_low", Kind: Float, Unit: u, Metric: true, Doc: "the low end of its 95 % interval over the seeds"},
			Column{Name: m.Name + "_ci_high", Kind: Float, Unit: u, Metric: true, Doc: "the high end"})
	}
	return cols
}

// PointCells are the points table's rows, from the runs' rows (sorted by
// run, every run of the sweep or some).
func (p *Plan) PointCells(rows []Row) [][]string {
	byPoint := make([][]*Row, p.Points)
	for i := range rows {
		pt := p.Point(rows[i].Run)
		byPoint[pt] = append(byPoint[pt], &rows[i])
	}
	stab, low, high := -1, map[int]int{}, map[int]int{}
	for j, m := range p.metrics {
		switch {
		case m.Name == "stability":
			stab = j
		case m.aux:
		default:
			for k, n := range p.metrics {
				switch n.Name {
				case m.Name + "_ci_low":
					low[j] = k
				case m.Name + "_ci_high":
					high[j] = k
				}
			}
		}
	}
	var out [][]string
	for pt, rs := range byPoint {
		var ok []*Row
		for _, r := range rs {
			if r.Status == StatusOK {
				ok = append(ok, r)
			}
		}
		cells := []string{fmtInt(int64(pt))}
		cells = append(cells, p.Grid.Values(pt)...)
		cells = append(cells, fmtInt(int64(len(ok))), worst(ok, stab))
		for j, m := range p.metrics {
			if m.aux {
				continue
			}
			var xs []float64
			for _, r := range ok {
				if v := r.Cells[j]; v != "" {
					x, err := strconv.ParseFloat(v, 64)
					if err == nil {
						xs = append(xs, x)
					}
				}
			}
			if len(xs) == 0 {
				cells = append(cells, "", "", "")
				continue
			}
			iv := steady.Replicate(xs)
			lo, hi := "", ""
			switch {
			case iv.Has():
				lo, hi = fmtFloat(iv.Low), fmtFloat(iv.High)
			case len(ok) == 1:
				l, okl := low[j]
				h, okh := high[j]
				if okl && okh {
					lo, hi = ok[0].Cells[l], ok[0].Cells[h]
				}
			}
			cells = append(cells, fmtFloat(iv.Estimate), lo, hi)
		}
		out = append(out, cells)
	}
	return out
}

// worst is the worst verdict of rows in the stability column (j < 0:
// none).
func worst(rows []*Row, j int) string {
	if j < 0 || len(rows) == 0 {
		return ""
	}
	rank := map[string]int{steady.Stable: 1, steady.Indeterminate: 2, steady.Unstable: 3}
	w := ""
	for _, r := range rows {
		if v := r.Cells[j]; rank[v] > rank[w] {
			w = v
		}
	}
	return w
}

// WritePoints writes the points table of rows in format ("csv" or
// "parquet"; Parquet's blis.table is sweep-points).
func (p *Plan) WritePoints(w io.Writer, rows []Row, format string) error {
	cols, cells := p.PointColumns(), p.PointCells(rows)
	if format == "parquet" {
		return writeParquet(w, "sweep-points", cols, cells)
	}
	return writeCSV(w, cols, cells)
}

// CheckPoints refuses a --points file that is not a table, or one asked
// of a shard (which holds only some of each point's seeds); "" is none.
func CheckPoints(path string, shard bool) error {
	if path == "" {
		return nil
	}
	if shard {
		return errors.New("--points: a shard has only some of each point's seeds; merge the shards first (--rows) and write the points then")
	}
	if _, err := FormatOf(path); err != nil {
		return fmt.Errorf("--points: %w", err)
	}
	return nil
}

// WritePointsFile writes the points table of rows to path (--points),
// atomically, in the format its extension names; "" writes nothing.
func (p *Plan) WritePointsFile(path string, rows []Row) error {
	if path == "" {
		return nil
	}
	format, err := FormatOf(path)
	if err != nil {
		return fmt.Errorf("--points: %w", err)
	}
	var b bytes.Buffer
	if err := p.WritePoints(&b, rows, format); err != nil {
		return fmt.Errorf("--points: %w", err)
	}
	return atomicfile.WriteFile(path, "--points", b.Bytes())
}
