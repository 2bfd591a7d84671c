//go:build unix

package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 32, class 5: a process stopped by SIGINT or SIGTERM leaves no
// hidden temporary (".NAME.tmp-N", GBs for a trace) and commits nothing
// after. The helper below runs in a child process (this test binary).
func TestSignalRemovesTemporaries(t *testing.T) {
	if dir := os.Getenv("ATOMICFILE_SIGNAL_DIR"); dir != "" {
		defer ExitOnSignal("helper", os.Stderr)()
		f, err := Create(filepath.Join(dir, "trace.jsonl"), "--otlp-trace")
		if err != nil {
			os.Exit(3)
		}
		f.WriteString("half a trace")
		sig := syscall.SIGTERM
		if os.Getenv("ATOMICFILE_SIGNAL") == "INT" {
			sig = syscall.SIGINT
		}
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(10 * time.Second)
		os.Exit(4) // the signal did not stop the process
	}
	for sig, code := range map[string]int{"INT": 130, "TERM": 143} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTemporaries$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_SIGNAL_DIR="+dir, "ATOMICFILE_SIGNAL="+sig)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		require.Equal(t, code, exit.ExitCode(), stderr.String())
		require.Contains(t, stderr.String(), "no temporary file is left")
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, left, "SIG%s left files behind", sig)
	}
}

// After RemoveTemporaries nothing is created or committed.
func TestNothingCommittedAfterRemoveTemporaries(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "a"), "--out")
	require.NoError(t, err)
	RemoveTemporaries()
	defer func() { live.Lock(); live.closed = false; live.Unlock() }()
	require.ErrorIs(t, f.Commit(), ErrStopped)
	_, err = Create(filepath.Join(dir, "b"), "--out")
	require.ErrorIs(t, err, ErrStopped)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left)
}
