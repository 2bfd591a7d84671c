package sweep

import (
	"errors"
	"fmt"
	"os"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/plotcanvas"
)

// Flags are what blis sweep's own flags ask, for Check: the checks that
// refuse a flag the sweep would otherwise ignore, or read as another
// value, before anything is read or planned.
type Flags struct {
	Emit                        string
	Workers, Seeds, Parallelism int
	// Given reports whether the flag called name (without dashes) was
	// given on the command line.
	Given func(name string) bool
}

// GridOf is the grid blis sweep's flags describe: the grid file (--grid;
// "" for none), then each --set KEY=V1,V2,... over it.
func GridOf(path string, sets []string) (Grid, error) {
	var g Grid
	if path != "" {
		data, err := inputfile.Read(path)
		if err != nil {
			return Grid{}, fmt.Errorf("--grid: %w", err)
		}
		gp, err := ParseGrid(data, path)
		if err != nil {
			return Grid{}, fmt.Errorf("--grid: %w", err)
		}
		g = *gp
	}
	for _, s := range sets {
		key, values, err := ParseSet(s)
		if err != nil {
			return Grid{}, err
		}
		if err := g.Add(key, values, "--set "+key, true); err != nil {
			return Grid{}, err
		}
	}
	return g, nil
}

// The flags only --emit k8s-indexed-job reads, and those only a sweep
// that runs reads.
var (
	K8sFlags = []string{"shards", "parallelism", "image", "job-name", "claim"}
	RunFlags = []string{"out", "resume", "rows", "plot", "plot-metric", "plot-x", "shard"}
)

// Check refuses, naming the flag: an unknown --emit, a negative
// --workers or --parallelism, --seeds out of [1, MaxSeeds], a
// Kubernetes flag without --emit k8s-indexed-job, and an output or
// resume flag with --emit (which prints instead of running).
func (f Flags) Check() error {
	switch f.Emit {
	case "", "plan", "k8s-indexed-job":
	default:
		return fmt.Errorf("--emit %q: plan or k8s-indexed-job", clip.String(f.Emit))
	}
	if f.Workers < 0 {
		return fmt.Errorf("--workers %d: the runs at once, 0 for one per CPU", f.Workers)
	}
	if f.Given("seeds") && (f.Seeds < 1 || f.Seeds > MaxSeeds) {
		return fmt.Errorf("--seeds %d: must be in [1, %d]", f.Seeds, MaxSeeds)
	}
	if f.Parallelism < 0 {
		return fmt.Errorf("--parallelism %d: the pods at once, 0 for every shard", f.Parallelism)
	}
	for _, name := range K8sFlags {
		if f.Given(name) && f.Emit != "k8s-indexed-job" {
			return fmt.Errorf("--%s is read only with --emit k8s-indexed-job", name)
		}
	}
	for _, name := range RunFlags {
		if f.Given(name) && f.Emit != "" {
			return fmt.Errorf("--%s is not read with --emit %s, which prints instead of running", name, f.Emit)
		}
	}
	return nil
}

// Outputs are a sweep's files: the table (Out, "" for stdout; its
// {shard} already replaced), the figure (Plot, "" for none), whether
// --resume reads the table, and the inputs no output may be.
type Outputs struct {
	Out, Plot string
	// Points is the points table (--points); Sharded says the sweep runs
	// one shard, which cannot write it.
	Points          string
	Resume, Sharded bool
	Inputs          []atomicfile.Named
}

// Opened are a sweep's outputs checked and its table locked: Unlock
// when the sweep ends.
type Opened struct {
	Format, PlotFormat string // the table's ("csv" without Out) and the figure's
	// Stream says the table is a pipe or a device: written once, at the
	// end, with no checkpoint.
	Stream bool
	Unlock func()
}

// Open checks o before the plan resolves a point (each output's format,
// that its folder exists and can be written, that it is no input and
// not the other output: atomicfile.Check) and locks the table for as
// long as this sweep writes it, refusing a second sweep writing the same
// --out (its rows and checkpoints would replace this one's).
func (o Outputs) Open() (*Opened, error) {
	op := &Opened{Format: "csv", Unlock: func() {}}
	var err error
	if o.Out != "" {
		if op.Format, err = FormatOf(o.Out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
	}
	if o.Plot != "" {
		if op.PlotFormat, err = plotcanvas.FormatOf("--plot", o.Plot); err != nil {
			return nil, err
		}
	}
	if err := CheckPoints(o.Points, o.Sharded); err != nil {
		return nil, err
	}
	if o.Resume && o.Out == "" {
		return nil, errors.New("--resume reads the rows of --out: give --out")
	}
	if err := atomicfile.Check(o.Inputs, []atomicfile.Named{{Label: "--out", Path: o.Out}, {Label: "--plot", Path: o.Plot}, {Label: "--points", Path: o.Points}}); err != nil {
		return nil, err
	}
	if o.Out == "" {
		return op, nil
	}
	if op.Stream = atomicfile.Stream(o.Out); op.Stream && o.Resume {
		return nil, fmt.Errorf("--resume reads the rows of --out, and --out %s is a pipe or a device", o.Out)
	}
	if op.Unlock, err = atomicfile.Lock(o.Out, "--out", "another blis sweep"); err != nil {
		return nil, err
	}
	return op, nil
}

// Resumed are the tables whose rows a sweep keeps: rows, then the table
// itself when resuming and it exists.
func (o Outputs) Resumed(rows []string) []string {
	if o.Resume {
		if _, err := os.Stat(o.Out); err == nil {
			return append(rows, o.Out)
		}
	}
	return rows
}
