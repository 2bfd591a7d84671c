// Package sweep runs many experiments that differ in a few keys and
// gathers their headline metrics into one tidy table: the grid of a
// capacity plan (rates × instance counts × GPUs × policies) and the seeds
// of each point, run on a pool of workers in-process (experiment.Run), in
// shards on other machines, or by bisection (Capacity).
//
// A sweep is a base experiment (package experiment: a file, flags,
// --set) and a Grid: axes, each a dotted experiment key with a list of
// values, expanded as their product in a fixed order (the first axis
// varies slowest), and K seeds per point (seed k is the point's run.seed
// + k). Run r of the sweep is point r / K with seed index r % K; shard i
// of N is the runs r with r mod N = i, so that every shard has its share
// of the heavy points and the light ones, and the shards' rows taken in
// turn in index order are the whole table.
//
// The table has one row per run: point, the swept keys, seed, status,
// error and the metric columns (Metrics, in a fixed order) that the
// sweep's experiments can report, decided from the experiments before
// any run, so that every shard writes the same columns. It is written as
// CSV or Parquet with repeatable bytes: the same sweep gives the same
// file whatever the worker count, the completion order or the sharding.
// A run that fails is a row with its error; the sweep goes on.
//
// Invariants: a Plan's rows are a function of the Spec alone; a table
// read back (Read) and written again gives the same bytes; Capacity
// evaluates its points in a fixed order, so its answer and its runs are
// the same on every machine.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/steady"
)

// Limits: a sweep of more points, runs, or seeds per point, is refused.
// Every point is resolved before any run (so that a bad value fails
// first, and every shard writes the same columns): ~0.15 ms of CPU and
// 0.6 KB each, 15 s and 60 MB at MaxPoints (blis sweep --emit plan).
const (
	MaxPoints = 100_000
	MaxRuns   = 1 << 24
	MaxSeeds  = 1 << 16
)

// Spec is a sweep to plan.
type Spec struct {
	// Base returns a new draft of the base experiment (its file, flags and
	// --set overrides) at every call: each point is built on its own.
	Base func() (*experiment.Draft, error)
	Grid Grid
	// Seeds per point (>= 1).
	Seeds int
	// Workers resolves the points in parallel (0: one per CPU); the plan
	// is the same for any value.
	Workers int
}

// Plan is a sweep expanded: its runs, and the table's columns.
type Plan struct {
	Spec
	Points, Runs int
	// Cluster is set when the points would infer different modes (a
	// replicas axis from 1 over a synthetic workload): every point then
	// runs as a cluster, so that their columns compare.
	Cluster bool
	Columns []Column
	// Kinds are the axes' column types: Int when every value is a whole
	// number, Float when every value is a number, else String.
	Kinds   []Kind
	metrics []*metric
	// seed is each point's run.seed; failed its error resolving, "" when
	// it resolved.
	seed   []int64
	failed []string
}

// NewPlan expands s: it builds and resolves every point, so that a key
// that is not the experiment's, or a value its key cannot take, is
// refused before anything runs (the error lists the valid keys), and
// decides the columns. A point that does not resolve (replicas 0, a
// model that does not fit its GPU) is not an error of the plan: its runs
// become rows with the error. A plan whose every point fails is refused.
func NewPlan(s Spec) (*Plan, error) {
	if s.Seeds < 1 || s.Seeds > MaxSeeds {
		return nil, fmt.Errorf("seeds per point must be in [1, %d], got %d", MaxSeeds, s.Seeds)
	}
	points, err := s.Grid.Points()
	if err != nil {
		return nil, err
	}
	if points > MaxRuns/s.Seeds {
		return nil, fmt.Errorf("%d points × %d seeds is more than %d runs", points, s.Seeds, MaxRuns)
	}
	p := &Plan{Spec: s, Points: points, Runs: points * s.Seeds, seed: make([]int64, points), failed: make([]string, points)}
	for _, a := range s.Grid.Axes {
		p.Kinds = append(p.Kinds, kindOf(a.Values))
	}
	// What the plan needs of each point, kept instead of the point's
	// experiment: a sweep's points held resolved took 9 KB each (1 GB for
	// 100,000 points just to print the plan).
	pts := make([]*pointOf, points)
	resolve := func(i int) error {
		e, err := p.resolve(i)
		var fe *fatalError
		if errors.As(err, &fe) {
			return fe.err
		}
		if err != nil {
			p.failed[i] = oneLine(err.Error())
			return nil
		}
		pts[i] = p.summarize(i, e)
		return nil
	}
	if err := parallel(points, s.Workers, resolve); err != nil {
		return nil, err
	}
	modes := map[experiment.Mode]bool{}
	for _, pt := range pts {
		if pt != nil {
			modes[pt.mode] = true
		}
	}
	if len(modes) > 1 {
		p.Cluster = true
		if err := parallel(points, s.Workers, func(i int) error {
			if pts[i] != nil && pts[i].mode != experiment.ModeCluster {
				pts[i] = nil
				return resolve(i)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	first := -1
	for i, pt := range pts {
		if pt == nil {
			continue
		}
		if first < 0 {
			first = i
		}
		if pt.err != nil {
			return nil, pt.err
		}
		p.seed[i] = pt.seed
	}
	if first < 0 {
		return nil, fmt.Errorf("every point of the sweep fails; point 0 (%s): %s", p.describe(0), p.failed[0])
	}
	p.Columns = append(p.Columns, colPoint)
	for i, a := range s.Grid.Axes {
		p.Columns = append(p.Columns, Column{Name: a.Key, Kind: p.Kinds[i], Doc: "a swept key's value"})
	}
	p.Columns = append(p.Columns, colSeed, colStatus, colError)
	for j, m := range registry {
		for _, pt := range pts {
			if pt != nil && pt.declared[j] {
				p.metrics = append(p.metrics, m)
				p.Columns = append(p.Columns, m.Column)
				break
			}
		}
	}
	return p, nil
}

// pointOf is what a plan keeps of a point resolved: its mode, its
// run.seed, the registry's metrics it declares, and check's error.
type pointOf struct {
	mode     experiment.Mode
	seed     int64
	declared []bool
	err      error
}

func (p *Plan) summarize(i int, e *experiment.Experiment) *pointOf {
	pt := &pointOf{mode: e.Mode, seed: e.Run.Seed, declared: make([]bool, len(registry)), err: p.check(i, e)}
	for j, m := range registry {
		pt.declared[j] = m.declared(e)
	}
	return pt
}

// fatalError is an error of the sweep itself, not of one point.
type fatalError struct{ err error }

func (f *fatalError) Error() string { return f.err.Error() }

// draft builds point i's draft: the base, the grid's settings, the point's
// values, and the mode when the plan forces it.
func (p *Plan) draft(i int) (*experiment.Draft, error) {
	d, err := p.Base()
	if err != nil {
		return nil, &fatalError{err}
	}
	for _, s := range p.Grid.Set {
		if err := d.Set(s.Key, s.Value, s.Origin); err != nil {
			return nil, &fatalError{fmt.Errorf("%s: %w", s.Origin, err)}
		}
	}
	for j, v := range p.Grid.Values(i) {
		key := p.Grid.Axes[j].Key
		if err := d.Set(key, v, "sweep "+key+"="+clip.String(v)); err != nil {
			var bad *schema.Error
			switch {
			case errors.As(err, &bad) && bad.Range:
				return nil, err // a value its key's range refuses: this point's runs fail, the sweep goes on
			case bad != nil:
				return nil, &fatalError{err} // named by its origin already
			}
			return nil, &fatalError{fmt.Errorf("sweep %s = %s: %w", key, clip.String(v), err)}
		}
	}
	if p.Cluster {
		if err := d.Set("deployment.mode", string(experiment.ModeCluster), "blis sweep (the points' modes differ; every point runs as a cluster)"); err != nil {
			return nil, &fatalError{err}
		}
	}
	return d, nil
}

func (p *Plan) resolve(i int) (*experiment.Experiment, error) {
	d, err := p.draft(i)
	if err != nil {
		return nil, err
	}
	return d.Resolve()
}

// check refuses what a sweep cannot run: output files (every run would
// write the same one), seeds past the int64 range.
func (p *Plan) check(i int, e *experiment.Experiment) error {
	o := e.Run.Outputs
	for _, k := range []struct{ key, path string }{
		{"run.outputs.otlp_trace", o.OTLPTrace}, {"run.outputs.kv_events", o.KVEvents}, {"run.outputs.decision_trace", o.DecisionTrace},
		{"run.outputs.window_out", o.WindowOut}, {"run.outputs.window_plot", o.WindowPlot}, {"run.outputs.summary", o.Summary},
	} {
		if k.path != "" {
			return fmt.Errorf("%s (%s): a sweep's runs write no files (every run would write this one); remove it", k.key, clip.String(k.path))
		}
	}
	if s := e.Run.CounterfactualSample; s != "" {
		// Simulating alternatives multiplies a run's time and fills a
		// section of the report no column of the table holds.
		return fmt.Errorf("run.counterfactual_sample (%s): a sweep's table has no column of the counterfactual regret it simulates; remove it", s)
	}
	if e.Run.Seed > math.MaxInt64-int64(p.Seeds-1) {
		return fmt.Errorf("point %d: run.seed %d + %d seeds passes the largest seed", i, e.Run.Seed, p.Seeds)
	}
	return nil
}

// Seed is run r's seed.
func (p *Plan) Seed(r int) int64 { return p.seed[r/p.Seeds] + int64(r%p.Seeds) }

// Point is run r's point.
func (p *Plan) Point(r int) int { return r / p.Seeds }

// describe names point i by its values ("replicas=2, rate_scale=0.5").
func (p *Plan) describe(i int) string {
	if len(p.Grid.Axes) == 0 {
		return "the base experiment"
	}
	vals := p.Grid.Values(i)
	parts := make([]string, len(vals))
	for j, v := range vals {
		parts[j] = p.Grid.Axes[j].Key + "=" + clip.String(v)
	}
	return strings.Join(parts, ", ")
}

// Experiment builds run r's experiment, resolved, with its seed, and one
// worker per cluster run unless run.workers was given (the pool runs
// runs side by side; the report is the same for any value).
func (p *Plan) Experiment(r int) (*experiment.Experiment, error) {
	i := p.Point(r)
	if p.failed[i] != "" {
		return nil, errors.New(p.failed[i])
	}
	d, err := p.draft(i)
	if err != nil {
		return nil, err
	}
	if err := d.Set("run.seed", strconv.FormatInt(p.Seed(r), 10), "blis sweep (seed)"); err != nil {
		return nil, err
	}
	e, err := d.Resolve()
	if err != nil {
		return nil, err
	}
	if e.Run.Workers == 0 {
		e.Run.Workers = 1
	}
	return e, nil
}

// Row is one run's line of the table, without the columns the plan
// gives (point, the swept keys, seed).
type Row struct {
	Run    int
	Status string // "ok" or "error"
	Error  string
	// Cells are the metric columns' values as the table writes them, ""
	// when absent.
	Cells []string
	// stability is the run's verdict with its evidence, for blis
	// capacity's explanations; nil for a row read from a table.
	stability *steady.Stability
}

// Status values.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// RunOne runs run r and makes its row: a failed run is a row with its
// error (a panic inside the simulator too). It returns ctx's error, and
// no row, when ctx ended the run.
func (p *Plan) RunOne(ctx context.Context, r int) (row Row, warnings []string, err error) {
	row = Row{Run: r, Status: StatusError, Cells: make([]string, len(p.metrics))}
	defer func() {
		if v := recover(); v != nil {
			row = Row{Run: r, Status: StatusError, Error: oneLine(fmt.Sprint("panic: ", v)), Cells: make([]string, len(p.metrics))}
			warnings, err = nil, nil
		}
	}()
	e, err := p.Experiment(r)
	if err != nil {
		var fe *fatalError
		if errors.As(err, &fe) {
			return row, nil, fe.err
		}
		row.Error = oneLine(err.Error())
		return row, nil, nil
	}
	res, err := experiment.Run(ctx, e, &experiment.MemSinks{})
	if ctx.Err() != nil {
		return row, nil, ctx.Err()
	}
	if err != nil {
		row.Error = oneLine(err.Error())
		return row, nil, nil
	}
	v := newView(res)
	row.stability = v.s.Stability
	for j, m := range p.metrics {
		if s, ok := m.value(v); ok {
			row.Cells[j] = s
		}
	}
	row.Status = StatusOK
	return row, res.Warnings, nil
}

// oneLine keeps a message on one line of the table.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", "; ").Replace(strings.TrimSpace(s))
}

// MetricIndex is the position of metric name among the plan's metric
// columns (Row.Cells), or an error listing them.
func (p *Plan) MetricIndex(name string) (int, error) {
	for j, m := range p.metrics {
		if m.Name == name {
			return j, nil
		}
	}
	var names []string
	for _, m := range p.metrics {
		if !m.aux {
			names = append(names, m.Name)
		}
	}
	for _, m := range registry {
		if m.Name == name {
			return 0, fmt.Errorf("metric %s: this sweep's runs do not report it; they report %s", clip.String(name), strings.Join(names, ", "))
		}
	}
	return 0, fmt.Errorf("no metric %s; use one of %s", clip.String(name), strings.Join(names, ", "))
}

// kindOf is the column type of an axis's values.
func kindOf(values []string) Kind {
	k := Int
	for _, v := range values {
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || strings.ContainsAny(v, "xX_") {
			return String
		}
		k = Float
	}
	return k
}

// parallel calls f(i) for i in [0, n) on workers goroutines (0: one per
// CPU) and returns the first error by index.
func parallel(n, workers int, f func(i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sortRows orders rows by run.
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int { return a.Run - b.Run })
}
