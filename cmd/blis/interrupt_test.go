package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this binary's main as blis itself
// (BLIS_TEST_MAIN=1), to send it a real signal.
func TestMain(m *testing.M) {
	if os.Getenv("BLIS_TEST_MAIN") == "1" {
		os.Args = append([]string{"blis"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestInterruptedRunIsPartial: a run whose context ends (Ctrl-C) prints
// its report marked partial, writes none of its output files, and fails
// with errInterrupted.
func TestInterruptedRunIsPartial(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "decisions.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"run", "--num-instances", "2", "--requests", "100000", "--trace-level", "decisions", "--decision-trace", trace})
	err := cmd.ExecuteContext(ctx)
	require.ErrorIs(t, err, errInterrupted)
	var rep struct {
		Partial bool `json:"partial"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.True(t, rep.Partial)
	require.Contains(t, errb.String(), "the run was cancelled")
	_, err = os.Stat(trace)
	require.True(t, errors.Is(err, os.ErrNotExist))
}

// TestSIGINTEndsARunCleanly sends SIGINT to a real blis run mid-way: it
// exits with status 130, its stdout is a partial report, and no output
// file (nor temporary file) is left.
func TestSIGINTEndsARunCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "run.jsonl")
	cmd := exec.Command(os.Args[0], "run", "-q", "--requests", "100000000", "--rate", "100000", "--otlp-trace", trace)
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
		Metrics struct {
			Requests struct {
				Completed int64 `json:"completed"`
			} `json:"requests"`
		} `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	require.True(t, rep.Partial)
	require.Less(t, rep.Metrics.Requests.Completed, int64(100000000))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no output and no temporary file")
}
