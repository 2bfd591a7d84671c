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

// docs/hardening.md, class 5: a process stopped by SIGINT or SIGTERM leaves no
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

// docs/hardening.md, class 5: every output path is checked before the work: its
// folder must exist (or, for a folder the command makes, a writable
// ancestor) and take a file; a failing output was found only when the
// run wrote it, after minutes of work.
func TestCheckProbesOutputFolders(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		out  Named
		want string
	}{
		{Named{Label: "-o", Path: filepath.Join(dir, "c.yaml")}, ""},
		{Named{Label: "-o", Path: filepath.Join(dir, "no", "c.yaml")}, "the folder " + filepath.Join(dir, "no") + " does not exist"},
		{Named{Label: "--report", Path: filepath.Join(dir, "no", "deeper", "report.md"), MadeDir: true}, ""},
		{Named{Label: "-o", Path: filepath.Join(file, "c.yaml")}, file + " is not a folder"},
		{Named{Label: "--report", Path: filepath.Join(file, "r", "report.md"), MadeDir: true}, file + " is not a folder"},
	} {
		err := Check(nil, []Named{c.out})
		if c.want == "" {
			require.NoError(t, err, c.out.Path)
		} else {
			require.ErrorContains(t, err, c.out.Label+" "+c.out.Path+": "+c.want)
		}
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "the probes are removed")
}
