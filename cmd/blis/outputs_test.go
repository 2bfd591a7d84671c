//go:build unix

package main

// Hardening, round 4: outputs that are streams, two writers of one
// table, flags a sweep would ignore, checks after long work, the plan's
// bound and the Kubernetes manifest of an oddly named file.

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/sweep"
)

// readFIFO reads everything written into the FIFO at path (the read
// waits for a writer), sent once the writer closes it.
func readFIFO(t *testing.T, path string) <-chan string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			got <- "open: " + err.Error()
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- string(b)
	}()
	return got
}

// An output given as a FIFO was replaced by a regular file (exit 0, the
// reader got nothing); a character device (as root, the system's null
// device) would have been replaced the same way. Both are written into,
// and stay what they were.
func TestOutputsIntoAFIFOAndADevice(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "decisions.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	got := readFIFO(t, fifo)
	_, _, err := runCLI(t, "run", "-q", "--num-instances", "2", "--requests", "20", "--trace-level", "decisions", "--decision-trace", fifo)
	require.NoError(t, err)
	select {
	case s := <-got:
		require.Equal(t, 20, strings.Count(s, `"type":"routing"`), "the decision trace came through the FIFO: %.300s", s)
	case <-time.After(30 * time.Second):
		t.Fatal("nothing came through the FIFO")
	}
	st, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeNamedPipe, "still a FIFO")

	// A character device: one made in the temporary folder (mknod needs
	// root); never the system's own.
	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		_, _, err = runCLI(t, "run", "-q", "--requests", "20", "--otlp-trace", dev)
		require.NoError(t, err)
		st, err = os.Lstat(dev)
		require.NoError(t, err)
		require.NotZero(t, st.Mode()&os.ModeCharDevice, "still a device")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.Contains(e.Name(), ".tmp-"), "no temporary file left: %s", e.Name())
	}
}

// A sweep's table into a FIFO: written once, at the end (no checkpoint
// copies), the same bytes as a file.
func TestSweepTableIntoAFIFO(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "-q", "--config", sweepExp, "--set", "deployment.pools[0].replicas=1,2", "--set", "run.horizon_s=10", "--workers", "2"}
	file := filepath.Join(dir, "t.csv")
	_, _, err := runCLI(t, append(args, "--out", file)...)
	require.NoError(t, err)
	fifo := filepath.Join(dir, "fifo.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	got := readFIFO(t, fifo)
	_, _, err = runCLI(t, append(args, "--out", fifo)...)
	require.NoError(t, err)
	require.Equal(t, string(must(os.ReadFile(file))), <-got)
	_, _, err = runCLI(t, append(args, "--out", fifo, "--resume")...)
	require.ErrorContains(t, err, "--out "+fifo+" is a pipe or a device")
}

// Two sweeps writing one --out both succeeded and one's rows vanished:
// the second is refused at once while the first holds the table.
func TestSweepRefusesASecondWriterOfItsTable(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.csv")
	unlock, err := atomicfile.Lock(out, "--out", "another blis sweep") // the first sweep
	require.NoError(t, err)
	start := time.Now()
	_, _, err = runCLI(t, "sweep", "--config", sweepExp, "--grid", sweepGrid, "--out", out)
	require.ErrorContains(t, err, "--out "+out+": another blis sweep is writing it")
	require.Less(t, time.Since(start), 5*time.Second, "refused before any run")
	require.NoFileExists(t, out)
	unlock()
	_, _, err = runCLI(t, "sweep", "-q", "--config", sweepExp, "--set", "run.horizon_s=5", "--out", out)
	require.NoError(t, err)
	require.FileExists(t, out)
	require.Len(t, must(os.ReadDir(dir)), 1, "no lock file left")
}

// Flags a sweep read as another value, or ignored, are refused by name.
func TestSweepFlagsItWouldIgnore(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "-1"}, "--workers -1: the runs at once, 0 for one per CPU"},
		{[]string{"--seeds", "0"}, "--seeds 0: must be in [1, 65536]"},
		{[]string{"--image", "registry.example/blis:v1"}, "--image is read only with --emit k8s-indexed-job"},
		{[]string{"--parallelism", "2"}, "--parallelism is read only with --emit k8s-indexed-job"},
		{[]string{"--shards", "2"}, "--shards is read only with --emit k8s-indexed-job"},
		{[]string{"--emit", "k8s-indexed-job", "--shards", "4", "--image", "a", "--parallelism", "-3"}, "--parallelism -3: the pods at once, 0 for every shard"},
		{[]string{"--emit", "k8s-indexed-job", "--shards", "4", "--image", "registry.example/blis:v1\nkind: Pod"}, `--image "registry.example/blis:v1\nkind: Pod"`},
		{[]string{"--emit", "plan", "--plot", "x.png"}, "--plot is not read with --emit plan"},
		{[]string{"--emit", "plan", "--resume"}, "--resume is not read with --emit plan"},
	} {
		_, _, err := runCLI(t, append([]string{"sweep", "--config", sweepExp, "--grid", sweepGrid}, c.args...)...)
		require.ErrorContains(t, err, c.want, "%q", c.args)
	}
}

// blis sweep --plot nodir/x.png ran every point, wrote the table, then
// failed on the figure's folder; every output (and the figure's metric
// and x) is checked before any run.
func TestSweepChecksItsOutputsBeforeRunning(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.csv")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.csv"), 0o755))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "--plot", filepath.Join(dir, "nodir", "x.png")}, "--plot " + filepath.Join(dir, "nodir", "x.png") + ": the folder " + filepath.Join(dir, "nodir") + " does not exist"},
		{[]string{"--out", filepath.Join(dir, "nodir", "t.csv")}, "--out " + filepath.Join(dir, "nodir", "t.csv") + ": the folder"},
		{[]string{"--out", filepath.Join(dir, "sub.csv")}, "--out " + filepath.Join(dir, "sub.csv") + " is a directory"},
		{[]string{"--out", out, "--plot", out + ".png", "--plot-metric", "no_such_metric"}, "--plot: no metric no_such_metric"},
		{[]string{"--out", out, "--plot", out + ".png", "--plot-x", "run.seed"}, `--plot: the figure's x axis "run.seed" is not a swept key`},
	} {
		start := time.Now()
		_, diag, err := runCLI(t, append([]string{"sweep", "--config", sweepExp, "--grid", sweepGrid, "--workers", "1"}, c.args...)...)
		require.ErrorContains(t, err, c.want, "%q", c.args)
		require.NotContains(t, diag, "runs", "nothing ran")
		require.Less(t, time.Since(start), 10*time.Second)
		require.NoFileExists(t, out)
	}
	// An output over an input.
	g := filepath.Join(dir, "grid.csv")
	require.NoError(t, os.WriteFile(g, must(os.ReadFile(sweepGrid)), 0o644))
	_, _, err := runCLI(t, "sweep", "--config", sweepExp, "--grid", g, "--out", g)
	require.ErrorContains(t, err, "--out "+g+" is also the input --grid "+g)
}

// --emit plan of a grid past sweep.MaxPoints took minutes and a GB; it is
// refused before a point is resolved, and the bound is quoted in the
// help and docs/sweeps.md.
func TestSweepPlanBound(t *testing.T) {
	vals := make([]string, 400)
	for i := range vals {
		vals[i] = strings.Repeat("1", i+1)
	}
	list := strings.Join(vals, ",")
	start := time.Now()
	_, _, err := runCLI(t, "sweep", "--set", "workload.synthetic.requests="+list, "--set", "run.seed="+list, "--emit", "plan")
	require.ErrorContains(t, err, "the grid has more than 100000 points (400 × 400 values)")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 100000, sweep.MaxPoints, "update the help and docs/sweeps.md with the bound")
	help, _, _ := runCLI(t, "sweep", "--help")
	require.Contains(t, help, "100,000 points")
	docs := must(os.ReadFile(filepath.Join("..", "..", "docs", "sweeps.md")))
	require.Contains(t, string(docs), "100,000 points")
}

// A file named "my exp's.yaml" gave a ConfigMap key kubectl refuses
// ([-._a-zA-Z0-9]+) and a merge hint naming the key, not the file.
func TestK8sManifestOfAnOddlyNamedFile(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "my exp's.yaml")
	require.NoError(t, os.WriteFile(exp, must(os.ReadFile(sweepExp)), 0o644))
	out, _, err := runCLI(t, "sweep", "--config", exp, "--grid", sweepGrid, "--emit", "k8s-indexed-job", "--shards", "2", "--image", "registry.example/blis:v1")
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader([]byte(out)))
	var cm struct{ Data map[string]string }
	require.NoError(t, dec.Decode(&cm))
	require.Len(t, cm.Data, 2)
	var key string
	for k := range cm.Data {
		require.Regexp(t, `^[-._a-zA-Z0-9]+$`, k)
		if strings.HasPrefix(k, "config-") {
			key = k
		}
	}
	require.Equal(t, sweep.ConfigMapKey("config", "my exp's.yaml"), key)
	require.Contains(t, out, "- --config\n            - "+key, "the pods read the key")
	require.Contains(t, out, "#   blis sweep --config '"+strings.ReplaceAll(exp, "'", `'\''`)+"'", "the merge hint names the local file")
}
