package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxErr bounds an error about one bad input (as in package experiment's
// test of every key).
const maxErr = 1500

func boundedErr(t *testing.T, what string, err error) {
	t.Helper()
	require.Error(t, err, what)
	require.LessOrEqual(t, len(err.Error()), maxErr, "%s: %.300s", what, err.Error())
}

// Every parser of the sweep's own inputs quotes a clip of a huge value:
// --set (its key, its values), the grid file, --target, --shard, --emit,
// the figure's metric and x, the Kubernetes flags, and a --rows table
// holding a 2 MB swept value or column name (a 2 MB error before).
func TestSweepErrorsQuoteInputsClipped(t *testing.T) {
	huge := strings.Repeat("x", 2<<20)
	for _, arg := range []string{huge, huge + "=1", "workload.rate_scale=" + huge, "workload.rate_scale=[" + huge, "k" + huge + "=1,2",
		"workload.rate_scale=1,1" + huge + "," + "1,1" + huge} {
		key, vals, err := ParseSet(arg)
		if err == nil {
			var g Grid
			err = g.Add(key, vals, "--set "+key, true)
			if err == nil {
				_, err = NewPlan(Spec{Base: base(), Grid: g, Seeds: 1, Workers: 1})
			}
		}
		boundedErr(t, "--set "+arg[:10], err)
	}
	for _, doc := range []string{"version: 1\ngrid:\n  " + huge + ": [1, 2]\n", "version: 1\ngrid:\n  workload.rate_scale: [1, " + huge + "]\n",
		"version: 1\ngrid:\n  workload.rate_scale: [" + huge + ", " + huge + "]\n", "version: 1\ngrid:\n  k" + huge + ": []\n"} {
		g, err := ParseGrid([]byte(doc), "grid.yaml")
		if err == nil {
			_, err = NewPlan(Spec{Base: base(), Grid: *g, Seeds: 1, Workers: 1})
		}
		boundedErr(t, "grid "+doc[:30], err)
	}
	for _, s := range []string{huge, huge + ">=1", "ttft_p99_ms>=" + huge} {
		_, err := ParseTarget(s)
		boundedErr(t, "--target", err)
	}
	for _, s := range []string{huge, huge + "/2", "1/" + huge, "X" + huge + "/2"} {
		_, _, err := ParseShard(s, func(string) string { return huge })
		boundedErr(t, "--shard", err)
	}
	boundedErr(t, "--emit", Flags{Emit: huge, Given: func(string) bool { return false }}.Check())
	job := K8sJob{Name: "j", Image: "i", Shards: 1, Claim: "c"}
	for _, edit := range []func(*K8sJob){func(j *K8sJob) { j.Name = huge }, func(j *K8sJob) { j.Image = huge + " " }, func(j *K8sJob) { j.Claim = huge }} {
		j := job
		edit(&j)
		_, err := j.Manifest()
		boundedErr(t, "k8s", err)
	}

	// A plan, and tables that are not its own.
	p, err := NewPlan(Spec{Base: base("workload.synthetic.requests", "20"), Grid: Grid{Axes: []Axis{axis("workload.rate_scale", "1", "2")}}, Seeds: 1, Workers: 1})
	require.NoError(t, err)
	boundedErr(t, "--plot-metric", p.CheckFigure(Figure{Metric: huge, X: "workload.rate_scale"}))
	boundedErr(t, "--plot-x", p.CheckFigure(Figure{Metric: "ttft_p99_ms", X: huge}))
	dir := t.TempDir()
	header := strings.Join(p.names(), ",")
	for name, table := range map[string]string{
		"a 2 MB swept value": header + "\n0," + huge + ",42,ok," + strings.Repeat(",", len(p.Columns)-5) + "\n",
		"a 2 MB column name": header + "," + huge + "\n",
		"2,000 columns":      header + strings.Repeat(",c", 2000) + "\n",
		"a 2 MB point":       header + "\n" + huge + ",1,42,ok," + strings.Repeat(",", len(p.Columns)-5) + "\n",
		"a 2 MB seed":        header + "\n0,1," + huge + ",ok," + strings.Repeat(",", len(p.Columns)-5) + "\n",
	} {
		path := filepath.Join(dir, "rows.csv")
		require.NoError(t, os.WriteFile(path, []byte(table), 0o644))
		_, err := p.ReadFile(path)
		boundedErr(t, fmt.Sprintf("--rows with %s", name), err)
	}
}
