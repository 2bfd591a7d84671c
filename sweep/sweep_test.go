package sweep

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"
)

// base is a draft of short runs (sets key=value pairs over the default
// experiment).
func base(kv ...string) func() (*experiment.Draft, error) {
	return func() (*experiment.Draft, error) {
		d := experiment.NewDraft()
		for i := 0; i < len(kv); i += 2 {
			if err := d.Set(kv[i], kv[i+1], "test"); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
}

func axis(key string, values ...string) Axis { return Axis{Key: key, Values: values} }

func plan(t *testing.T, s Spec) *Plan {
	t.Helper()
	if s.Seeds == 0 {
		s.Seeds = 1
	}
	p, err := NewPlan(s)
	require.NoError(t, err)
	return p
}

func run(t *testing.T, p *Plan, workers int) []Row {
	t.Helper()
	res, err := p.Execute(context.Background(), 0, 1, Options{Workers: workers})
	require.NoError(t, err)
	require.Len(t, res.Rows, p.Runs)
	return res.Rows
}

func write(t *testing.T, p *Plan, rows []Row, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, p.Write(&b, rows, format))
	return b.Bytes()
}

// small is a sweep of 12 short runs: 2 instance counts × 3 rates × 2
// seeds of a 2-tenant workload with SLO classes.
func small() Spec {
	return Spec{
		Base:  base("workload.scenario", "mixed-slo", "run.horizon_s", "20", "policies.routing.type", "least-loaded"),
		Grid:  Grid{Axes: []Axis{axis("deployment.pools[0].replicas", "1", "2"), axis("workload.rate_scale", "0.5", "1", "2")}},
		Seeds: 2,
	}
}

// TestSameTableAnyWorkersOrderOrShards: the table's bytes do not depend
// on the worker count, the completion order or the sharding.
func TestSameTableAnyWorkersOrderOrShards(t *testing.T) {
	p := plan(t, small())
	require.Equal(t, 6, p.Points)
	require.Equal(t, 12, p.Runs)
	want := run(t, p, 1)
	csv, pq := write(t, p, want, "csv"), write(t, p, want, "parquet")
	for _, workers := range []int{2, 5, 12} {
		got := run(t, p, workers)
		require.Equal(t, csv, write(t, p, got, "csv"), "workers %d", workers)
		require.Equal(t, pq, write(t, p, got, "parquet"), "workers %d", workers)
	}
	// Shards run apart, read back from their CSV and merged in any order;
	// taken in turn, their lines are the table.
	for _, n := range []int{1, 3, 5, 12, 13} {
		var files [][]byte
		var lines [][]string
		for i := range n {
			res, err := p.Execute(context.Background(), i, n, Options{Workers: 2})
			require.NoError(t, err)
			require.Len(t, res.Rows, ShardRuns(p.Runs, i, n))
			files = append(files, write(t, p, res.Rows, "csv"))
			lines = append(lines, strings.SplitAfter(string(files[i]), "\n")[1:])
		}
		turns := strings.SplitAfter(string(csv), "\n")[0]
		for r := range p.Runs {
			turns += lines[r%n][r/n]
		}
		require.Equal(t, string(csv), turns, "%d shards taken in turn", n)
		rand.New(rand.NewPCG(uint64(n), 1)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
		var rows []Row
		for _, f := range files {
			r, err := p.ReadCSV(bytes.NewReader(f))
			require.NoError(t, err)
			rows = append(rows, r...)
		}
		rows, err := dedupe(rows)
		require.NoError(t, err)
		require.Equal(t, csv, write(t, p, rows, "csv"), "%d shards", n)
		require.Equal(t, pq, write(t, p, rows, "parquet"), "%d shards", n)
	}
	// The columns: the swept keys after point, the classes' metrics.
	header := strings.SplitN(string(csv), "\n", 2)[0]
	require.True(t, strings.HasPrefix(header, "point,deployment.pools[0].replicas,workload.rate_scale,seed,status,error,stability,warmup_s,arrived,completed,"), header)
	for _, c := range []string{"slo_attainment", "slo_attainment_ci_low", "slo_attainment_ci_high", "goodput_rps", "realtime_slo_attainment", "interactive_tpot_p99_ms", "batch_goodput_rps", "jain_index",
		"ttft_p99_ms,ttft_p99_ms_ci_low,ttft_p99_ms_ci_high"} {
		require.Contains(t, header, ","+c)
	}
	require.NotContains(t, header, "fitness")
	// Seeds of a point: its run.seed + k.
	lines := strings.Split(string(csv), "\n")
	require.True(t, strings.HasPrefix(lines[1], "0,1,0.5,42,ok,,"), lines[1])
	require.True(t, strings.HasPrefix(lines[2], "0,1,0.5,43,ok,,"), lines[2])
	require.True(t, strings.HasPrefix(lines[12], "5,2,2,43,ok,,"), lines[12])
}

// TestReadBackWritesTheSameBytes: a table read back (CSV or Parquet)
// and written again in either format gives the same bytes.
func TestReadBackWritesTheSameBytes(t *testing.T) {
	p := plan(t, small())
	rows := run(t, p, 0)
	dir := t.TempDir()
	for _, format := range Formats {
		data := write(t, p, rows, format)
		path := filepath.Join(dir, "t."+format)
		require.NoError(t, os.WriteFile(path, data, 0o644))
		back, err := p.ReadFile(path)
		require.NoError(t, err)
		for _, f2 := range Formats {
			require.Equal(t, write(t, p, rows, f2), write(t, p, back, f2), "%s read, %s written", format, f2)
		}
	}
}

func TestReadRefusesAnotherSweepsTable(t *testing.T) {
	p := plan(t, small())
	rows := run(t, p, 0)
	csv := string(write(t, p, rows, "csv"))
	other := Spec{Base: small().Base, Grid: Grid{Axes: []Axis{axis("deployment.pools[0].replicas", "1", "3"), axis("workload.rate_scale", "0.5", "1", "2")}}, Seeds: 2}
	q := plan(t, other)
	_, err := q.ReadCSV(strings.NewReader(csv))
	require.ErrorContains(t, err, "point 3 has deployment.pools[0].replicas = 2 in the table but 3 in this sweep (another sweep's table?)")
	three := small()
	three.Seeds = 1
	_, err = plan(t, three).ReadCSV(strings.NewReader(csv))
	require.ErrorContains(t, err, `point 0: seed "43" is not one of this sweep's (42 to 42)`)
	for _, tc := range []struct{ edit func(string) string }{
		{func(s string) string { return strings.Replace(s, "point,", "pt,", 1) }},
		{func(s string) string { return strings.Replace(s, ",jain_index", "", 1) }},
	} {
		_, err := p.ReadCSV(strings.NewReader(tc.edit(csv)))
		require.Error(t, err)
	}
	// A run given twice must be the same row.
	lines := strings.SplitAfter(csv, "\n")
	_, err = p.ReadCSV(strings.NewReader(csv + lines[1]))
	require.NoError(t, err)
	_, err = p.ReadCSV(strings.NewReader(csv + strings.Replace(lines[1], ",ok,,", ",error,boom,", 1)))
	require.ErrorContains(t, err, "run 0: status error with metrics")
}

// TestUnknownKeyListsValidKeys: a key that is not the experiment's is
// refused before anything runs, with the valid keys.
func TestUnknownKeyListsValidKeys(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"workload.ratescale", "sweep workload.ratescale = 1: workload.ratescale: no such key; workload takes rate_scale, synthetic, spec, spec_file, scenario, replay"},
		{"deployment.poolz", "deployment takes mode, pools, router"},
		{"runs.seed", "the top level takes version, deployment, workload, policies, run"},
		{"run.seed", `sweep run.seed=x: want a whole number, got "x"`},
	} {
		_, err := NewPlan(Spec{Base: base(), Grid: Grid{Axes: []Axis{axis(tc.key, "1", "x")}}, Seeds: 1})
		require.ErrorContains(t, err, tc.want)
	}
	// Every point failing is an error of the sweep.
	_, err := NewPlan(Spec{Base: base(), Grid: Grid{Axes: []Axis{axis("policies.routing.params.foo", "1", "2")}}, Seeds: 1})
	require.ErrorContains(t, err, "every point of the sweep fails; point 0 (policies.routing.params.foo=1)")
}

// TestFailedRunIsARow: a point that does not resolve is rows with its
// error; the sweep goes on.
func TestFailedRunIsARow(t *testing.T) {
	p := plan(t, Spec{Base: base("workload.synthetic.requests", "50"), Grid: Grid{Axes: []Axis{axis("deployment.pools[0].vllm.max_num_seqs", "0", "16")}}, Seeds: 2})
	res, err := p.Execute(context.Background(), 0, 1, Options{})
	require.NoError(t, err)
	require.Equal(t, 2, res.Failed)
	require.Equal(t, 4, res.Ran)
	csv := string(write(t, p, res.Rows, "csv"))
	lines := strings.Split(csv, "\n")
	empty := strings.Repeat(",", len(p.Columns)-5) // no metric, no verdict
	require.Equal(t, `0,0,0,error,"sweep deployment.pools[0].vllm.max_num_seqs=0: must be >= 1 requests, got 0"`+empty, lines[1])
	require.Equal(t, `0,0,1,error,"sweep deployment.pools[0].vllm.max_num_seqs=0: must be >= 1 requests, got 0"`+empty, lines[2])
	require.True(t, strings.HasPrefix(lines[3], "1,16,42,ok,,indeterminate,,50,50,0,"), lines[3])
	// An instance sweep has no SLO columns.
	require.NotContains(t, lines[0], "slo")
	// The error rows read back.
	back, err := p.ReadCSV(strings.NewReader(csv))
	require.NoError(t, err)
	require.Equal(t, csv, string(write(t, p, back, "csv")))
}

// TestMixedModesRunAsClusters: replicas 1 alone would be an instance
// run; in a sweep with replicas 2 every point runs as a cluster.
func TestMixedModesRunAsClusters(t *testing.T) {
	p := plan(t, Spec{Base: base("workload.synthetic.requests", "50"), Grid: Grid{Axes: []Axis{axis("deployment.pools[0].replicas", "1", "2")}}})
	require.True(t, p.Cluster)
	for r := range p.Runs {
		e, err := p.Experiment(r)
		require.NoError(t, err)
		require.Equal(t, experiment.ModeCluster, e.Mode)
		require.Equal(t, 1, e.Run.Workers, "one goroutine per run in a sweep")
	}
	q := plan(t, Spec{Base: base("workload.synthetic.requests", "50"), Grid: Grid{Axes: []Axis{axis("workload.rate_scale", "1", "2")}}})
	require.False(t, q.Cluster)
}

func TestColumnsFollowTheExperiments(t *testing.T) {
	p := plan(t, Spec{Base: base("workload.synthetic.requests", "50", "deployment.mode", "cluster", "run.fitness_weights", "{throughput: 1}"),
		Grid: Grid{Axes: []Axis{axis("run.seed", "1", "2")}}})
	names := strings.Join(p.names(), ",")
	require.Contains(t, names, ",fitness")
	require.NotContains(t, names, "slo", "synthetic requests have no class")
	require.NotContains(t, names, "jain")
	require.Equal(t, []Kind{Int}, p.Kinds)
	require.Equal(t, Float, plan(t, Spec{Base: base(), Grid: Grid{Axes: []Axis{axis("workload.rate_scale", "1", "2.5")}}}).Kinds[0])
	require.Equal(t, String, plan(t, Spec{Base: base(), Grid: Grid{Axes: []Axis{axis("policies.scheduler.type", "fcfs", "sjf")}}}).Kinds[0])
}

func TestOutputsAndSeedsRefused(t *testing.T) {
	_, err := NewPlan(Spec{Base: base("deployment.mode", "cluster", "run.window", "5s", "run.outputs.window_out", "w.csv"), Grid: Grid{Axes: []Axis{axis("run.seed", "1", "2")}}, Seeds: 1})
	require.ErrorContains(t, err, "run.outputs.window_out (w.csv): a sweep's runs write no files")
	// The summary and counterfactual sampling were accepted while the
	// other outputs were refused (the sampling costing 36× for the same
	// table).
	_, err = NewPlan(Spec{Base: base("deployment.mode", "cluster", "run.outputs.summary", "x.md"), Seeds: 1})
	require.ErrorContains(t, err, "run.outputs.summary (x.md): a sweep's runs write no files")
	_, err = NewPlan(Spec{Base: base("deployment.mode", "cluster", "run.counterfactual_sample", "0.5"), Seeds: 1})
	require.ErrorContains(t, err, "run.counterfactual_sample (0.5): a sweep's table has no column")
	_, err = NewPlan(Spec{Base: base("run.seed", "9223372036854775807"), Seeds: 2})
	require.ErrorContains(t, err, "passes the largest seed")
	_, err = NewPlan(Spec{Base: base(), Seeds: 0})
	require.ErrorContains(t, err, "seeds per point must be in [1, 65536]")
}

// TestResume: a sweep interrupted after some runs leaves them (the
// checkpoint); run again with them, it runs only the others and ends
// with the same table.
func TestResume(t *testing.T) {
	p := plan(t, small())
	want := write(t, p, run(t, p, 2), "parquet")
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var saved []Row
	res, err := p.Execute(ctx, 0, 1, Options{Workers: 2,
		Progress: func(_ *Row, done, _, _ int) {
			if done == 5 {
				cancel()
			}
		},
		Checkpoint: func(rows []Row) error { mu.Lock(); saved = rows; mu.Unlock(); return nil }, CheckpointEvery: time.Hour})
	require.ErrorIs(t, err, context.Canceled)
	require.GreaterOrEqual(t, len(res.Rows), 5)
	require.Less(t, len(res.Rows), p.Runs)
	require.Equal(t, res.Rows, saved, "the checkpoint at the interruption holds every finished run")
	// The checkpoint file, read back, resumes.
	path := filepath.Join(t.TempDir(), "t.parquet")
	require.NoError(t, os.WriteFile(path, write(t, p, saved, "parquet"), 0o644))
	done, err := p.ReadFile(path)
	require.NoError(t, err)
	again, err := p.Execute(context.Background(), 0, 1, Options{Workers: 3, Done: done})
	require.NoError(t, err)
	require.Equal(t, p.Runs-len(saved), again.Ran)
	require.Equal(t, want, write(t, p, again.Rows, "parquet"))
}

func TestShards(t *testing.T) {
	for _, tc := range []struct {
		arg, env string
		i, n     int
		err      string
	}{
		{arg: "0/1", i: 0, n: 1},
		{arg: "3/8", i: 3, n: 8},
		{arg: "JOB_COMPLETION_INDEX/8", env: "7", i: 7, n: 8},
		{arg: "JOB_COMPLETION_INDEX/8", env: "8", err: `JOB_COMPLETION_INDEX="8" is not a shard index from 0 to 7`},
		{arg: "JOB_COMPLETION_INDEX/8", err: "the environment variable JOB_COMPLETION_INDEX is not set"},
		{arg: "8/8", err: "the shard index must be from 0 to 7"},
		{arg: "-1/8", err: "the shard index must be from 0 to 7"},
		{arg: "1/0", err: "want I/N"},
		{arg: "1", err: "want I/N"},
	} {
		i, n, err := ParseShard(tc.arg, func(string) string { return tc.env })
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.arg)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, [2]int{tc.i, tc.n}, [2]int{i, n})
	}
	// Shards partition the runs, sizes within one of each other.
	for _, runs := range []int{0, 1, 7, 200, 1 << 24} {
		for _, n := range []int{1, 2, 3, 7, 64, 1000} {
			sum := 0
			for i := range n {
				k := ShardRuns(runs, i, n)
				require.LessOrEqual(t, k, runs/n+1)
				require.GreaterOrEqual(t, k, runs/n)
				sum += k
			}
			require.Equal(t, runs, sum)
		}
	}
}

// TestPanicIsARow: a run that panics is a failed row, not a crash.
func TestPanicIsARow(t *testing.T) {
	calls := 0
	var mu sync.Mutex
	p := plan(t, Spec{Base: func() (*experiment.Draft, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n > 2 { // planning builds each point once
			panic("boom")
		}
		return base("workload.synthetic.requests", "20")()
	}, Grid: Grid{Axes: []Axis{axis("run.seed", "1", "2")}}, Workers: 1})
	res, err := p.Execute(context.Background(), 0, 1, Options{Workers: 1})
	require.NoError(t, err)
	require.Equal(t, 2, res.Failed)
	require.Equal(t, "panic: boom", res.Rows[0].Error)
}
