package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// pprofStrings reads a pprof file (a gzipped profile.proto) and returns its
// string table (field 6 of Profile), where the sample types are named.
func pprofStrings(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err, "%s is not gzipped", path)
	b, err := io.ReadAll(z)
	require.NoError(t, err)
	var strs []string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.GreaterOrEqual(t, n, 0, "%s: not a profile.proto", path)
		b = b[n:]
		if num == 6 && typ == protowire.BytesType {
			s, m := protowire.ConsumeBytes(b)
			require.GreaterOrEqual(t, m, 0)
			strs = append(strs, string(s))
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		require.GreaterOrEqual(t, m, 0, "%s: not a profile.proto", path)
		b = b[m:]
	}
	return strs
}

// TestProfilesAreWritten: --cpuprofile and --memprofile write pprof files
// that name their sample types, and leave no temporary file.
func TestProfilesAreWritten(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	_, _, err := runCLI(t, "run", "-q", "--num-instances", "2", "--requests", "200", "--cpuprofile", cpu, "--memprofile", mem)
	require.NoError(t, err)
	require.Contains(t, pprofStrings(t, cpu), "cpu")
	strs := pprofStrings(t, mem)
	require.Contains(t, strs, "inuse_space")
	require.Contains(t, strs, "alloc_space")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary file left")
}

// TestProfilePathsHostile: a profile path that would destroy something or
// cannot be written is refused before the run, naming the flag, and
// nothing is written.
func TestProfilePathsHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	cfg := filepath.Join(dir, "exp.yaml")
	out, _, err := runCLI(t, "run", "--requests", "10", "--print-config")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, []byte(out), 0o644))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"fifo", []string{"--cpuprofile", fifo}, "--cpuprofile " + fifo + " is a named pipe (FIFO)"},
		{"fifo mem", []string{"--memprofile", fifo}, "--memprofile " + fifo + " is a named pipe (FIFO)"},
		{"device", []string{"--memprofile", os.DevNull}, "is a device"},
		{"directory", []string{"--cpuprofile", dir}, "is a directory"},
		{"missing folder", []string{"--cpuprofile", filepath.Join(dir, "no", "cpu.prof")}, "does not exist"},
		{"under a file", []string{"--memprofile", filepath.Join(file, "mem.prof")}, "is not a folder"},
		{"same twice", []string{"--cpuprofile", filepath.Join(dir, "p"), "--memprofile", filepath.Join(dir, "p")}, "--memprofile " + filepath.Join(dir, "p") + " is also the output --cpuprofile"},
		{"over an output", []string{"--trace-level", "decisions", "--decision-trace", filepath.Join(dir, "d"), "--cpuprofile", filepath.Join(dir, "d")}, "--cpuprofile"},
		{"over the input", []string{"--config", cfg, "--cpuprofile", cfg}, "is also the input --config"},
		{"print-config", []string{"--cpuprofile", filepath.Join(dir, "c.prof"), "--print-config"}, "--print-config runs nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "-q", "--requests", "10"}, c.args...)...)
			require.ErrorContains(t, err, c.want)
		})
	}
	st, err := os.Stat(fifo)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeNamedPipe, "the FIFO is still a FIFO")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "keep", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	require.Equal(t, []string{"exp.yaml", "fifo", "file"}, names, "nothing written")
}

// TestProfileOfAFailedRunIsNotWritten: a run that fails without a report
// writes no profile.
func TestProfileOfAFailedRunIsNotWritten(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("arrival_us,prompt_tokens,output_tokens\n0,10,x\n"), 0o644))
	_, _, err := runCLI(t, "run", "-q", "--replay", bad, "--cpuprofile", filepath.Join(dir, "cpu.prof"), "--memprofile", filepath.Join(dir, "mem.prof"))
	require.ErrorContains(t, err, "output_tokens")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the input")
}

// TestProfileOfAnInterruptedRun: a run whose context ends (Ctrl-C) prints
// its partial report and still writes its profiles.
func TestProfileOfAnInterruptedRun(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"run", "--num-instances", "2", "--requests", "100000", "--cpuprofile", cpu, "--memprofile", mem})
	err := cmd.ExecuteContext(ctx)
	require.ErrorIs(t, err, errInterrupted)
	require.ErrorContains(t, err, "but for the profiles (--cpuprofile "+cpu+", --memprofile "+mem+")", "the message names the files it did write")
	require.Contains(t, pprofStrings(t, cpu), "cpu")
	require.Contains(t, pprofStrings(t, mem), "inuse_space")
}

// TestSIGINTWritesTheProfile sends SIGINT to a real blis run mid-way: it
// exits with status 130, and its CPU profile is in place (the run's other
// outputs are not, as TestSIGINTEndsARunCleanly checks), with no
// temporary file left.
func TestSIGINTWritesTheProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpu.prof")
	cmd := exec.Command(os.Args[0], "run", "-q", "--requests", "100000000", "--rate", "100000", "--cpuprofile", cpu)
	cmd.Env = append(os.Environ(), "BLIS_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 130, ee.ExitCode())
	var rep struct {
		Partial bool `json:"partial"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	require.True(t, rep.Partial)
	require.Contains(t, pprofStrings(t, cpu), "cpu")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the profile and no temporary file")
}
