//go:build unix

package atomicfile

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FIFO given as an output is written into, not replaced by a regular
// file (the temporary file used to be renamed over it: the reader saw
// nothing and the pipe was gone), and only on Commit: an aborted output
// writes nothing into it.
func TestFIFOIsWrittenInto(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "trace.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.True(t, Stream(fifo))
	require.NoError(t, Check(nil, []Named{{Label: "--decision-trace", Path: fifo}}), "a FIFO without a reader yet passes the check without blocking")

	got := make(chan string, 1)
	go func() {
		r, err := os.Open(fifo) // waits for the writer
		if err != nil {
			got <- "open: " + err.Error()
			return
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got <- string(b)
	}()
	time.Sleep(50 * time.Millisecond) // the reader waits in open
	require.NoError(t, Check(nil, []Named{{Label: "--decision-trace", Path: fifo}}), "the check does not open the FIFO (its reader would get nothing)")
	aborted, err := Create(fifo, "--decision-trace")
	require.NoError(t, err)
	aborted.WriteString("never seen")
	aborted.Abort()
	require.NoError(t, WriteFile(fifo, "--decision-trace", []byte("a decision\n")))
	select {
	case s := <-got:
		require.Equal(t, "a decision\n", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the reader of the FIFO got nothing: the FIFO was replaced")
	}
	st, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeNamedPipe, "the FIFO is still a FIFO")
	require.Len(t, must(os.ReadDir(dir)), 1, "no temporary file beside it")
}

// A character device (the system's null device, made in a temporary
// folder with mknod where permitted; the real /dev/null only where this
// process cannot replace it) is written into and stays a device.
func TestCharDeviceIsWrittenInto(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		dev = "/dev/null"
		probe, err := os.CreateTemp("/dev", ".blis-probe-*")
		if err == nil {
			probe.Close()
			os.Remove(probe.Name())
			t.Fatalf("mknod is not permitted yet /dev is writable: the test would risk the system's /dev/null")
		}
	}
	require.True(t, Stream(dev))
	require.NoError(t, Check(nil, []Named{{Label: "--otlp-trace", Path: dev}}))
	var g Group
	require.NoError(t, g.WriteFile(dev, "--otlp-trace", []byte("spans\n")))
	require.NoError(t, g.Commit())
	st, err := os.Lstat(dev)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeCharDevice, "%s is still a character device", dev)
}

// A socket is refused, naming the output, before the run (Check) and at
// Create.
func TestSocketRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	require.ErrorContains(t, Check(nil, []Named{{Label: "--plot", Path: sock}}), "--plot "+sock+" is a socket")
	_, err = Create(sock, "--plot")
	require.ErrorContains(t, err, "--plot "+sock+" is a socket")
	require.False(t, Stream(sock))
}

// An output through a symbolic link replaces the file the link points to
// and keeps the link.
func TestSymlinkWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.csv")
	link := filepath.Join(dir, "link.csv")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o644))
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, WriteFile(link, "--out", []byte("new")))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeSymlink, "the link is kept")
	require.Equal(t, "new", string(must(os.ReadFile(target))))
}

// Two writers of one output: the second is refused at once, naming the
// path and the holder; once the first unlocks, the path can be locked
// again, and no lock file is left.
func TestLockRefusesASecondWriter(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "table.csv")
	unlock, err := Lock(out, "--out", "another blis sweep")
	require.NoError(t, err)
	_, err = Lock(out, "--out", "another blis sweep")
	require.ErrorContains(t, err, "--out "+out+": another blis sweep is writing it")
	unlock()
	unlock2, err := Lock(out, "--out", "another blis sweep")
	require.NoError(t, err)
	unlock2()
	require.Empty(t, must(os.ReadDir(dir)), "no lock file left")

	fifo := filepath.Join(dir, "f")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	u1, err := Lock(fifo, "--out", "x")
	require.NoError(t, err)
	u2, err := Lock(fifo, "--out", "x")
	require.NoError(t, err, "a stream is written once, not renamed over: not locked")
	u1()
	u2()
}
