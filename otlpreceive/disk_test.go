package otlpreceive

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/blis-sim/blis/otlpingest"
)

// faults make trace files fail or stall, as a full, broken or slow disk
// would.
type faults struct {
	mu       sync.Mutex
	openErr  error         // creating a file fails
	writeErr error         // a write writes half its bytes, then fails
	syncErr  error         // a sync fails
	truncErr error         // cutting a file back fails
	gate     chan struct{} // writes wait until it is closed
	writes   int
}

type faultyFile struct {
	*os.File
	ctl *faults
}

func (f *faultyFile) Write(b []byte) (int, error) {
	f.ctl.mu.Lock()
	gate, werr := f.ctl.gate, f.ctl.writeErr
	f.ctl.writes++
	f.ctl.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if werr != nil {
		n, _ := f.File.Write(b[:len(b)/2])
		return n, werr
	}
	return f.File.Write(b)
}

func (f *faultyFile) Sync() error {
	f.ctl.mu.Lock()
	err := f.ctl.syncErr
	f.ctl.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(n int64) error {
	f.ctl.mu.Lock()
	err := f.ctl.truncErr
	f.ctl.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(n)
}

func (ctl *faults) open(path string) (file, error) {
	ctl.mu.Lock()
	err := ctl.openErr
	ctl.mu.Unlock()
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &faultyFile{f, ctl}, nil
}

func (ctl *faults) set(fn func(*faults)) {
	ctl.mu.Lock()
	fn(ctl)
	ctl.mu.Unlock()
}

// oneSpanRequests cuts spans into one request each.
func oneSpanRequests(t testing.TB, spans []otlpingest.Span) [][]byte {
	out := make([][]byte, len(spans))
	for i := range spans {
		out[i] = protoRequest(t, spans[i:i+1])
	}
	return out
}

// TestSlowDiskRefusesInsteadOfBuffering: while the disk does not take a
// write, accepted requests wait in a queue bounded by --max-queue-mib;
// past it a request is refused at once (503, Retry-After, RetryInfo),
// never buffered; once the disk moves, every accepted request is answered
// with success and is on disk.
func TestSlowDiskRefusesInsteadOfBuffering(t *testing.T) {
	ctl := &faults{gate: make(chan struct{})}
	reqs := oneSpanRequests(t, readSpans(t, simulatedTrace)[:40])
	s := startServer(t, Config{MaxQueueBytes: 16 << 10, MaxInflight: 64, openFile: ctl.open})

	type result struct {
		i      int
		code   int
		header http.Header
		body   []byte
	}
	results := make(chan result, len(reqs))
	for i, body := range reqs {
		go func() {
			code, h, b := post(t, s.url(), contentProto, body)
			results <- result{i, code, h, b}
		}()
	}
	// With the disk stalled, the queue fills and the rest are refused.
	refused := map[int]bool{}
	var maxQueued int64
	deadline := time.After(20 * time.Second)
	for len(refused) == 0 || s.r.Stats().Refused < int64(len(refused)) {
		select {
		case r := <-results:
			require.Equal(t, http.StatusServiceUnavailable, r.code, "nothing succeeds while the disk is stalled: %s", r.body)
			after, err := strconv.Atoi(r.header.Get("Retry-After"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, after, 1)
			st := decodeStatus(t, r.header, r.body)
			require.Contains(t, st.Message, "the disk is behind")
			var ri errdetails.RetryInfo
			require.NoError(t, st.Details[0].UnmarshalTo(&ri))
			refused[r.i] = true
		case <-deadline:
			t.Fatal("no request refused while the disk was stalled")
		}
		maxQueued = max(maxQueued, s.r.Stats().QueuedBytes)
	}
	for len(refused) < len(reqs) {
		select {
		case r := <-results:
			require.Equal(t, http.StatusServiceUnavailable, r.code)
			refused[r.i] = true
		case <-time.After(3 * time.Second):
			// No answer for 3 s: the rest wait for the disk. (500 ms was
			// too short on a loaded machine: a request the test had not
			// yet sent was counted as waiting, then refused.)
			goto settled
		}
	}
settled:
	maxQueued = max(maxQueued, s.r.Stats().QueuedBytes)
	require.LessOrEqual(t, maxQueued, int64(16<<10)+int64(len(reqs[0])+4)*2, "the queue holds at most its bound (and one record past it when alone)")
	waiting := len(reqs) - len(refused)
	require.Positive(t, waiting, "some requests were accepted and wait for the disk")

	close(ctl.gate) // the disk moves
	// A request the loaded machine sent only after the 3 s of quiet may
	// still have met the full queue: refused as the others were, it is
	// retried with them below. At least one must have waited and passed.
	waited := 0
	for range waiting {
		r := <-results
		if r.code == http.StatusServiceUnavailable {
			refused[r.i] = true
			continue
		}
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		waited++
	}
	require.Positive(t, waited, "some requests waited for the disk and were accepted")
	// The refused ones, retried, now succeed.
	for i := range refused {
		code, _, b := post(t, s.url(), contentProto, reqs[i])
		require.Equal(t, http.StatusOK, code, "%s", b)
	}
	s.stop()
	require.Equal(t, int64(len(reqs)), s.r.Stats().Spans)
	_, m := ingestTables(t, traceFiles(t, s.dir))
	require.Equal(t, int64(0), m.Issues.Total)
}

// TestDiskErrorsAreRetryableAndLeaveNoHalfRecord: a write that fails part
// way (a full disk), a failed sync, and a file that cannot be created
// refuse their request as retryable (503, Retry-After 5) and leave the
// files whole: the ingest finds exactly the accepted requests and no
// damage. A failure that cannot even be cut back moves on to a new file,
// and the damage left is counted by the ingest.
func TestDiskErrorsAreRetryableAndLeaveNoHalfRecord(t *testing.T) {
	ctl := &faults{}
	spans := readSpans(t, simulatedTrace)[:12]
	reqs := oneSpanRequests(t, spans)
	s := startServer(t, Config{openFile: ctl.open})
	send := func(i int, want int) {
		t.Helper()
		code, h, b := post(t, s.url(), contentProto, reqs[i])
		require.Equal(t, want, code, "request %d: %s", i, b)
		if want == http.StatusServiceUnavailable {
			require.Equal(t, "5", h.Get("Retry-After"), "a failed write asks for 5 s")
			require.Contains(t, decodeStatus(t, h, b).Message, "not written")
		}
	}
	accepted := map[otlpingest.SpanID]bool{}
	ok := func(i int) { send(i, http.StatusOK); accepted[spans[i].SpanID] = true }

	ok(0)
	ctl.set(func(c *faults) { c.writeErr = syscall.ENOSPC })
	send(1, http.StatusServiceUnavailable)
	send(2, http.StatusServiceUnavailable)
	ctl.set(func(c *faults) { c.writeErr = nil })
	ok(3)
	ctl.set(func(c *faults) { c.syncErr = syscall.EIO })
	send(4, http.StatusServiceUnavailable)
	ctl.set(func(c *faults) { c.syncErr = nil })
	ok(5)
	files := traceFiles(t, s.dir)
	require.Len(t, files, 1, "cut back, the file goes on")
	ctl.set(func(c *faults) { c.openErr = syscall.EACCES })
	ctl.set(func(c *faults) { c.writeErr, c.truncErr = syscall.ENOSPC, syscall.EIO })
	send(6, http.StatusServiceUnavailable) // half written, not cut back: the file is given up
	send(7, http.StatusServiceUnavailable) // and no new file can be made
	ctl.set(func(c *faults) { c.openErr, c.writeErr, c.truncErr = nil, nil, nil })
	ok(8)
	s.stop()
	st := s.r.Stats()
	require.Equal(t, int64(4), st.Requests)
	require.Equal(t, int64(5), st.WriteErrors)

	files = traceFiles(t, s.dir)
	require.Len(t, files, 2, "the broken file and its successor")
	got := ingestedSpanIDs(t, files)
	require.Equal(t, accepted, got, "exactly the accepted spans")
	_, m := ingestTables(t, files)
	// The requests were cut into single spans, so halves of requests lack
	// their other half; apart from that, one damaged record.
	for _, c := range m.Issues.ByKind {
		switch c.Kind {
		case otlpingest.IssueOrphanAPISpan, otlpingest.IssueOrphanCoreSpan:
		case otlpingest.IssueCorruptFraming:
			require.Equal(t, int64(1), c.Count, "the half record that could not be cut back")
		default:
			t.Fatalf("unexpected damage %s: %+v", c.Kind, m.Issues.Details)
		}
	}
	for _, d := range m.Issues.Details {
		if d.Kind == otlpingest.IssueCorruptFraming {
			require.Equal(t, filepath.Base(files[0]), filepath.Base(d.File))
		}
	}
}

// TestOutputDirectory: the directory must exist and be a directory; one
// receiver per directory; numbering goes on after the files there.
func TestOutputDirectory(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(regular, nil, 0o644))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, c := range []struct{ dir, msg string }{
		{filepath.Join(dir, "missing"), "no such file or directory"},
		{regular, "is not a directory"},
		{fifo, "is not a directory (p---------)"},
		{filepath.Join(regular, "sub"), "not a directory"},
	} {
		_, err := New(Config{Dir: c.dir})
		require.ErrorContains(t, err, c.msg, c.dir)
	}
	for _, bad := range []Config{
		{Dir: dir, MaxRequestBytes: MaxRequestBytesLimit + 1},
		{Dir: dir, MaxInflight: -1},
		{Dir: dir, Prefix: "../x"},
		{Dir: dir, Prefix: ".hidden"},
	} {
		_, err := New(bad)
		require.Error(t, err, "%+v", bad)
	}

	out := t.TempDir()
	first, err := New(Config{Dir: out, RotateBytes: 1})
	require.NoError(t, err)
	_, err = New(Config{Dir: out})
	require.ErrorContains(t, err, "another calibrate receive (process "+strconv.Itoa(os.Getpid())+") is writing into "+out)
	reqs := oneSpanRequests(t, readSpans(t, simulatedTrace)[:3])
	for _, b := range reqs {
		require.Equal(t, accepted, first.accept(b, encProto).kind)
	}
	require.NoError(t, first.Close())
	require.Len(t, traceFiles(t, out), 3, "a file per record past the rotation size")

	// A second run in the same directory numbers its files after the first's.
	second, err := New(Config{Dir: out})
	require.NoError(t, err, "the lock is released on Close")
	require.Equal(t, accepted, second.accept(reqs[0], encProto).kind)
	require.NoError(t, second.Close())
	// A name taken by something else meanwhile (here a FIFO) is skipped.
	third, err := New(Config{Dir: out})
	require.NoError(t, err)
	require.NoError(t, syscall.Mkfifo(filepath.Join(out, "otlp-000005.binpb"), 0o644))
	require.Equal(t, accepted, third.accept(reqs[1], encProto).kind)
	require.NoError(t, third.Close())
	require.NoError(t, os.Remove(filepath.Join(out, "otlp-000005.binpb")))
	names := []string{}
	for _, f := range traceFiles(t, out) {
		names = append(names, filepath.Base(f))
	}
	require.Equal(t, []string{"otlp-000001.binpb", "otlp-000002.binpb", "otlp-000003.binpb", "otlp-000004.binpb", "otlp-000006.binpb"}, names)
}
