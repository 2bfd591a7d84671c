package otlpreceive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// encoding is how a record is framed in its file.
type encoding int

const (
	encProto encoding = iota // 4-byte big-endian length, then the message: the collector's format: proto
	encJSON                  // one compact JSON message per line: the collector's format: json
)

// ext is the file extension of each encoding.
var ext = [...]string{encProto: "binpb", encJSON: "jsonl"}

// record is one accepted request on its way to disk: its bytes framed for
// its file, and where the writer reports the outcome.
type record struct {
	enc   encoding
	data  []byte
	spans int
	done  chan error // buffered: the writer never blocks on it
}

// file is what the writer needs of an open file; tests give it files that
// fail or stall.
type file interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// openFile creates a new file for appending, failing if it exists.
func openFile(path string) (file, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
}

// outFile is the file an encoding is being written to.
type outFile struct {
	f    file
	name string
	size int64
}

// errClosed refuses records once the receiver is shutting down.
var errClosed = errors.New("the receiver is shutting down")

// errQueueFull refuses a record that would take the bytes waiting for the
// disk past the queue's bound.
var errQueueFull = errors.New("the disk is behind: the write queue is full")

// writer writes records to rotating files, in the order they were queued.
// It commits in groups: it takes every queued record, writes each to its
// encoding's file, syncs the files it wrote to, and only then tells each
// record's sender, so that a request answered with success is on disk.
// A write or sync that fails truncates its file back to where the group
// began, so that no file ever holds part of a record that was refused.
//
// Its memory is bounded: the queue holds at most maxQueue bytes of records
// waiting for the disk or being written (a record alone in the queue is
// always taken, so one larger than the bound is not refused forever).
type writer struct {
	dir, prefix string
	maxQueue    int64
	rotate      int64
	open        func(path string) (file, error)

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*record
	queued int64 // bytes of records queued or being written
	closed bool

	// Owned by the writing goroutine.
	files [2]*outFile
	seq   int

	// Statistics, under mu.
	written    int64 // bytes on disk
	filesMade  int
	lastErr    error
	lastErrAt  time.Time
	drainBps   float64 // bytes per second of write + sync, smoothed
	stopped    chan struct{}
	writeError func(error) // reports a failed write (for the progress line)
}

// fileName is a trace file's name: PREFIX-NNNNNN.EXT, NNNNNN counting the
// files this directory has held, so that name order is creation order.
func fileName(prefix string, seq int, e encoding) string {
	return fmt.Sprintf("%s-%06d.%s", prefix, seq, ext[e])
}

// nextSeq is one more than the largest sequence number of the files in dir
// named like this writer's, so that a new run never writes over an old
// one's files.
func nextSeq(dir, prefix string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-(\d+)\.(binpb|jsonl)$`)
	next := 1
	for _, e := range entries {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err == nil && n >= next {
			next = n + 1
		}
	}
	return next, nil
}

func newWriter(dir, prefix string, maxQueue, rotate int64, open func(string) (file, error)) (*writer, error) {
	seq, err := nextSeq(dir, prefix)
	if err != nil {
		return nil, err
	}
	w := &writer{dir: dir, prefix: prefix, maxQueue: maxQueue, rotate: rotate, open: open, seq: seq, stopped: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w, nil
}

// enqueue hands a record to the writer, or refuses it at once when the
// queue is full or the writer closed. The outcome of an accepted record
// arrives on its done channel.
func (w *writer) enqueue(r *record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	n := int64(len(r.data))
	if w.queued > 0 && w.queued+n > w.maxQueue {
		return errQueueFull
	}
	w.queued += n
	w.queue = append(w.queue, r)
	w.cond.Signal()
	return nil
}

// close stops taking records, writes those queued, syncs and closes the
// files, and returns when all is done.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Signal()
	w.mu.Unlock()
	<-w.stopped
}

func (w *writer) loop() {
	defer close(w.stopped)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		batch := w.queue
		w.queue = nil
		closing := w.closed
		w.mu.Unlock()
		if len(batch) > 0 {
			start := time.Now()
			var bytes int64
			for _, r := range batch {
				bytes += int64(len(r.data))
			}
			w.writeGroup(batch)
			el := time.Since(start).Seconds()
			w.mu.Lock()
			w.queued -= bytes
			if el > 0 {
				bps := float64(bytes) / el
				if w.drainBps == 0 {
					w.drainBps = bps
				} else {
					w.drainBps = 0.8*w.drainBps + 0.2*bps
				}
			}
			w.mu.Unlock()
		}
		if closing && len(batch) == 0 {
			for _, of := range w.files {
				if of != nil {
					_ = of.f.Sync()
					_ = of.f.Close()
				}
			}
			return
		}
	}
}

// writeGroup writes a group of records, each encoding to its own file.
func (w *writer) writeGroup(batch []*record) {
	for e := range w.files {
		var recs []*record
		for _, r := range batch {
			if r.enc == encoding(e) {
				recs = append(recs, r)
			}
		}
		if len(recs) > 0 {
			w.writeEncoding(encoding(e), recs)
		}
	}
}

// writeEncoding appends records to their encoding's file, rotating it when
// it would pass the rotation size, syncs, and reports each record's
// outcome.
func (w *writer) writeEncoding(e encoding, recs []*record) {
	var pending []*record // written since start, not yet synced
	var start int64       // size of the current file before pending
	fail := func(err error, rs []*record) {
		for _, r := range rs {
			r.done <- err
		}
		if len(rs) > 0 {
			w.noteError(err)
		}
	}
	// commit syncs the current file and acknowledges pending, or, when the
	// sync fails, cuts the file back and refuses them.
	commit := func() {
		of := w.files[e]
		if of == nil || len(pending) == 0 {
			pending = nil
			return
		}
		if err := of.f.Sync(); err != nil {
			w.cutBack(e, start)
			fail(fmt.Errorf("sync %s: %w", of.name, err), pending)
			pending = nil
			return
		}
		var n int64
		for _, r := range pending {
			n += int64(len(r.data))
			r.done <- nil
		}
		w.mu.Lock()
		w.written += n
		w.mu.Unlock()
		pending = nil
	}
	for _, r := range recs {
		of := w.files[e]
		if of != nil && of.size > 0 && of.size+int64(len(r.data)) > w.rotate {
			commit()
			w.closeFile(e)
			of = nil
		}
		if of == nil {
			var err error
			if of, err = w.newFile(e); err != nil {
				fail(err, []*record{r})
				continue
			}
			start = 0
		}
		if len(pending) == 0 {
			start = of.size
		}
		n, err := of.f.Write(r.data)
		of.size += int64(n)
		if err != nil {
			w.cutBack(e, start)
			fail(fmt.Errorf("write %s: %w", of.name, err), append(pending, r))
			pending = nil
			continue
		}
		pending = append(pending, r)
	}
	commit()
}

// newFile opens the next file of an encoding. A name taken meanwhile (by
// something else writing into the directory) is skipped, never opened.
func (w *writer) newFile(e encoding) (*outFile, error) {
	name := fileName(w.prefix, w.seq, e)
	f, err := w.open(filepath.Join(w.dir, name))
	for tries := 0; errors.Is(err, os.ErrExist) && tries < 100; tries++ {
		w.seq++
		name = fileName(w.prefix, w.seq, e)
		f, err = w.open(filepath.Join(w.dir, name))
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Join(w.dir, name), err)
	}
	w.seq++
	of := &outFile{f: f, name: name}
	w.files[e] = of
	w.mu.Lock()
	w.filesMade++
	w.mu.Unlock()
	return of, nil
}

func (w *writer) closeFile(e encoding) {
	if of := w.files[e]; of != nil {
		_ = of.f.Close()
		w.files[e] = nil
	}
}

// cutBack truncates an encoding's file to size after a failed write or
// sync. When even that fails, the file is closed and the next record goes
// to a new file; what is left past size was never acknowledged, and the
// ingest counts the damage (a cut proto message is corrupt_framing, a cut
// JSON line malformed_record).
func (w *writer) cutBack(e encoding, size int64) {
	of := w.files[e]
	if of == nil {
		return
	}
	if err := of.f.Truncate(size); err == nil {
		of.size = size
		return
	}
	w.closeFile(e)
}

func (w *writer) noteError(err error) {
	w.mu.Lock()
	w.lastErr, w.lastErrAt = err, time.Now()
	w.mu.Unlock()
	if w.writeError != nil {
		w.writeError(err)
	}
}

// retryAfter is how long a refused client should wait: the time the disk
// takes to drain what is queued, at the rate it has been writing, or 5 s
// after a failed write; between 1 and 30 s.
func (w *writer) retryAfter() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr != nil && time.Since(w.lastErrAt) < 10*time.Second {
		return 5 * time.Second
	}
	d := time.Second
	if w.drainBps > 0 {
		d = time.Duration(float64(w.queued) / w.drainBps * float64(time.Second))
	}
	return min(max(d, time.Second), 30*time.Second)
}
