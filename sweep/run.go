package sweep

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blis-sim/blis/internal/clip"
)

// Options are how Execute runs a plan's runs.
type Options struct {
	// Workers is the runs simulated at once, each on its own goroutine
	// (0: one per CPU). The rows are the same for any value.
	Workers int
	// Done are rows known already (a table resumed, shards merged): their
	// runs are not run again.
	Done []Row
	// Progress, when set, is called after each run ends, from one
	// goroutine at a time: the row, and the counts so far.
	Progress func(row *Row, done, failed, total int)
	// Checkpoint, when set, is called with the rows so far (sorted by
	// run) at most every CheckpointEvery of wall time, and once more when
	// the context ends the sweep, for the caller to write them: an
	// interrupted sweep then leaves the rows it finished. When it is
	// called has no effect on the rows.
	Checkpoint      func(rows []Row) error
	CheckpointEvery time.Duration
}

// Result is what Execute ran.
type Result struct {
	Rows []Row // the runs of the range, sorted by run
	// Ran are the runs simulated by this call (not taken from Done);
	// Failed the rows with status error, Warnings each distinct warning
	// of the runs with the number of runs that gave it, sorted.
	Ran, Failed int
	Warnings    []Warning
}

// Warning is a warning the runs gave (coefficients used outside their
// fit, requests dropped) and how many runs gave it.
type Warning struct {
	Text string
	Runs int
}

// Execute runs the runs of shard i of n (the runs r with r mod n = i;
// 0 of 1 is every run) that Done lacks, on opt.Workers goroutines, and
// returns every row of the shard, sorted by run. When ctx ends, runs in
// progress are abandoned (a run is a row only when it ended by itself),
// and the rows so far come back with ctx's error.
func (p *Plan) Execute(parent context.Context, i, n int, opt Options) (*Result, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if n < 1 || i < 0 || i >= n {
		return nil, fmt.Errorf("shard %d of %d: want 0 <= i < n", i, n)
	}
	var rows []Row
	have := map[int]bool{}
	for _, r := range opt.Done {
		if r.Run >= 0 && r.Run < p.Runs && r.Run%n == i && !have[r.Run] {
			have[r.Run] = true
			rows = append(rows, r)
		}
	}
	var todo []int
	total := 0
	for r := i; r < p.Runs; r += n {
		total++
		if !have[r] {
			todo = append(todo, r)
		}
	}
	res := &Result{}
	failed := 0
	for _, r := range rows {
		if r.Status != StatusOK {
			failed++
		}
	}
	warn := map[string]int{}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(todo)))

	type done struct {
		row  Row
		warn []string
		err  error
	}
	jobs := make(chan int)
	out := make(chan done)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				row, w, err := p.RunOne(ctx, r)
				out <- done{row, w, err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, r := range todo {
			select {
			case jobs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(out) }()

	var fatal error
	last := time.Now()
	checkpoint := func() error {
		if opt.Checkpoint == nil {
			return nil
		}
		snap := slices.Clone(rows)
		sortRows(snap)
		last = time.Now()
		return opt.Checkpoint(snap)
	}
	for d := range out {
		if d.err != nil {
			if fatal == nil && parent.Err() == nil {
				fatal = d.err // an error of the sweep, not of a run: stop
				cancel()
			}
			continue
		}
		rows = append(rows, d.row)
		res.Ran++
		if d.row.Status != StatusOK {
			failed++
		}
		for _, w := range dedupeStrings(d.warn) {
			warn[w]++
		}
		if opt.Progress != nil {
			opt.Progress(&d.row, len(rows), failed, total)
		}
		if opt.CheckpointEvery > 0 && time.Since(last) >= opt.CheckpointEvery && fatal == nil {
			if err := checkpoint(); err != nil && fatal == nil {
				fatal = err
			}
		}
	}
	sortRows(rows)
	res.Rows, res.Failed = rows, failed
	for w, n := range warn {
		res.Warnings = append(res.Warnings, Warning{Text: w, Runs: n})
	}
	slices.SortFunc(res.Warnings, func(a, b Warning) int { return strings.Compare(a.Text, b.Text) })
	if fatal != nil {
		return res, fatal
	}
	if err := parent.Err(); err != nil {
		if cerr := checkpoint(); cerr != nil {
			return res, fmt.Errorf("%w; and writing the rows so far: %v", err, cerr)
		}
		return res, err
	}
	return res, nil
}

func dedupeStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// ParseShard reads --shard I/N: shard I (from 0) of N. I may be the name
// of an environment variable that holds it (JOB_COMPLETION_INDEX in a
// Kubernetes Indexed Job, SLURM_ARRAY_TASK_ID in a Slurm array); getenv
// reads it (nil: os.Getenv).
func ParseShard(s string, getenv func(string) string) (i, n int, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	a, b, ok := strings.Cut(s, "/")
	n, err = strconv.Atoi(b)
	if !ok || err != nil || n < 1 || n > MaxRuns {
		return 0, 0, fmt.Errorf("--shard %q: want I/N, N a number of shards in [1, %d] and I from 0 to N-1, or an environment variable holding I (JOB_COMPLETION_INDEX/N)", clip.String(s), MaxRuns)
	}
	from := ""
	if a != "" && (a[0] < '0' || a[0] > '9') && a[0] != '-' && a[0] != '+' {
		from = a
		a = strings.TrimSpace(getenv(a))
		if a == "" {
			return 0, 0, fmt.Errorf("--shard %q: the environment variable %s is not set", clip.String(s), clip.String(from))
		}
	}
	i, err = strconv.Atoi(a)
	if err != nil || i < 0 || i >= n {
		if from != "" {
			return 0, 0, fmt.Errorf("--shard %q: %s=%q is not a shard index from 0 to %d", clip.String(s), clip.String(from), clip.String(a), n-1)
		}
		return 0, 0, fmt.Errorf("--shard %q: the shard index must be from 0 to %d", clip.String(s), n-1)
	}
	return i, n, nil
}

// ShardRuns is the number of runs of shard i of n over runs runs: they
// are the runs r with r mod n = i, so that every shard gets its share of
// every part of the grid (the heavy points and the light ones), and the
// shards' rows, taken in turn (run r is row r div n of shard r mod n),
// are the table in run order.
func ShardRuns(runs, i, n int) int {
	if i >= runs {
		return 0
	}
	return (runs-1-i)/n + 1
}
