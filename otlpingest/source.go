package otlpingest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Format is how a file's (decompressed) content is framed.
type Format string

const (
	FormatEmpty        Format = "empty"
	FormatJSONLines    Format = "json-lines"    // one ExportTraceServiceRequest per line
	FormatJSONDocument Format = "json-document" // a single ExportTraceServiceRequest
	FormatProto        Format = "proto"         // 4-byte big-endian length, then the message
	FormatKVEvents     Format = "kv-events"     // vLLM KV events subscriber JSON lines: [ts, [event, ...], dp_rank?]
)

// Compression is a file's outer encoding, detected from its magic bytes.
type Compression string

const (
	CompressionNone Compression = "none"
	CompressionGzip Compression = "gzip"
	CompressionZstd Compression = "zstd"
)

// IssueKind names a reason a record was skipped or counted.
type IssueKind string

const (
	IssueMalformedRecord      IssueKind = "malformed_record"
	IssueTruncatedCompression IssueKind = "truncated_compression"
	IssueCorruptFraming       IssueKind = "corrupt_framing"
	// IssueRecordTooLarge is a JSON line or document longer than the
	// record limit (ReadOptions.MaxRecordBytes): it is skipped unread.
	IssueRecordTooLarge IssueKind = "record_too_large"
)

// Issue is one skipped record or counted anomaly, located by file and
// record (line for JSON lines, message number for proto; 0 for the file).
type Issue struct {
	Kind   IssueKind `json:"kind"`
	File   string    `json:"file"`
	Record int64     `json:"record"`
	Detail string    `json:"detail"`
}

func (i Issue) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", i.File, i.Record, i.Kind, i.Detail)
}

// FileInfo describes one input file after it has been read.
type FileInfo struct {
	Path              string      `json:"path"`
	SHA256            string      `json:"sha256"`
	Bytes             int64       `json:"bytes"`
	DecompressedBytes int64       `json:"decompressed_bytes"`
	Compression       Compression `json:"compression"`
	Format            Format      `json:"format"`
	Records           int64       `json:"records"`
	Spans             int64       `json:"spans"`
	KVEvents          int64       `json:"kv_events"`
}

// Batch is what the reader hands the consumer, in input order: the spans
// decoded from one chunk and the issues met there. The last batch of a file
// carries its FileInfo.
type Batch struct {
	File     string
	Spans    []Span
	KVEvents []KVEventRow
	Issues   []Issue
	FileDone *FileInfo
}

// ReadOptions tune ReadTraces; zero values take defaults.
type ReadOptions struct {
	Workers    int                   // decoding goroutines; default GOMAXPROCS
	ChunkBytes int                   // target chunk size; default DefaultChunkBytes
	Progress   func(bytesRead int64) // called from the reading goroutine
	// MaxRecordBytes bounds one JSON line, JSON document or proto message
	// (default DefaultMaxRecordBytes). A longer JSON line or document is
	// skipped and counted (IssueRecordTooLarge) after reading at most this
	// many bytes of it into memory; a longer proto message loses the
	// framing, and the rest of its file is skipped and counted.
	MaxRecordBytes int

	// recycle lets the reader reuse a batch's memory once consume has
	// returned: the consumer keeps nothing of a batch's spans (Ingest).
	recycle bool
}

// DefaultChunkBytes is the default chunk size, 1 MiB: the unit of
// parallel decoding. At most 2 × workers + 1 chunks and their decoded
// spans are in memory. 2 MiB chunks measured the same speed and 30 MB
// more peak RSS on a 1.1 GB trace, 4 MiB chunks 70 MB more on a 300 MB one.
const DefaultChunkBytes = 1 << 20

// DefaultMaxRecordBytes is the default record limit: 1 GiB.
const DefaultMaxRecordBytes = 1 << 30

// chunkPool recycles the chunk buffers of one ReadSources call: without
// it every file, however small, would cost a fresh (zeroed) chunk buffer.
// Only buffers of exactly the chunk size are kept, at most a few more than
// can be in flight.
type chunkPool struct {
	size int
	free chan []byte
}

func (p *chunkPool) get() []byte {
	select {
	case b := <-p.free:
		return b[:p.size]
	default:
		return make([]byte, p.size)
	}
}

func (p *chunkPool) put(b []byte) {
	if p == nil || cap(b) != p.size {
		return
	}
	select {
	case p.free <- b[:0]:
	default:
	}
}

// bufPool recycles the 1 MiB read buffers: rotated traces come as many
// files, and fresh buffers for each would cost page faults, not just GC.
var bufPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<20) }}

func getBufReader(r io.Reader) *bufio.Reader {
	br := bufPool.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

type chunk struct {
	seq         int
	file        string
	format      Format
	firstRecord int64
	data        []byte
	limit       int    // record limit: a longer line is counted, not decoded
	buf         []byte // the buffer data lives in, recycled after decoding
	offsets     []int  // proto: message boundaries within data
	issues      []Issue
	trailing    []Issue // issues that follow the chunk's records (the file's own, on its last chunk)
	done        *FileInfo
}

// Source is one named input; Open is called once, when its turn comes.
type Source struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// FileSources names files as sources.
func FileSources(paths []string) []Source {
	srcs := make([]Source, len(paths))
	for i, p := range paths {
		srcs[i] = Source{Name: p, Open: func() (io.ReadCloser, error) { return os.Open(p) }}
	}
	return srcs
}

// ReadTraces reads trace files in order; see ReadSources.
func ReadTraces(files []string, opt ReadOptions, consume func(*Batch) error) error {
	return ReadSources(FileSources(files), opt, consume)
}

// ReadSources reads sources in order and calls consume for every batch in
// input order, whatever the number of workers. Chunks are decoded in
// parallel; at most a few chunks per worker are in memory at once.
func ReadSources(files []Source, opt ReadOptions, consume func(*Batch) error) error {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	chunkBytes := opt.ChunkBytes
	if chunkBytes <= 0 {
		chunkBytes = DefaultChunkBytes
	}
	limit := opt.MaxRecordBytes
	if limit <= 0 {
		limit = DefaultMaxRecordBytes
	}
	inflight := make(chan struct{}, 2*workers+1)
	pool := &chunkPool{size: chunkBytes, free: make(chan []byte, 2*workers+3)}
	jobs := make(chan *chunk, workers)
	results := make(chan *decodedChunk, 2*workers+1)
	stop := make(chan struct{})
	var readErr error

	go func() {
		defer close(jobs)
		seq := 0
		emit := func(c *chunk) bool {
			select {
			case inflight <- struct{}{}:
			case <-stop:
				return false
			}
			c.seq = seq
			seq++
			jobs <- c
			return true
		}
		var total int64
		for _, f := range files {
			if err := readFile(f, fileReader{chunkBytes: chunkBytes, limit: limit, pool: pool}, emit, func(n int64) {
				total += n
				if opt.Progress != nil {
					opt.Progress(total)
				}
			}); err != nil {
				readErr = err
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jd, pd := newJSONDecoder(), &protoDecoder{}
			jd.recycle = opt.recycle
			for c := range jobs {
				d := &decodedChunk{seq: c.seq}
				if opt.recycle {
					d.batch.Spans = spanPool.Get().([]Span)[:0]
				}
				decodeChunk(d, c, jd, pd)
				d.slabs = jd.takeSlabs()
				pool.put(c.buf) // decoded values never alias the chunk's bytes
				if n := cap(c.data); n >= bigRecordBytes {
					c.data, c.buf = nil, nil
					releaseBig(n)
				}
				results <- d
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	pending := map[int]*decodedChunk{}
	next := 0
	fileSpans, fileKV := int64(0), int64(0) // files are read one after another, so batches of a file are contiguous
	var consumeErr error
	for r := range results {
		pending[r.seq] = r
		for {
			d, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			fileSpans += int64(len(d.batch.Spans))
			fileKV += int64(len(d.batch.KVEvents))
			if d.batch.FileDone != nil {
				d.batch.FileDone.Spans, d.batch.FileDone.KVEvents = fileSpans, fileKV
				fileSpans, fileKV = 0, 0
			}
			if consumeErr == nil {
				if err := consume(&d.batch); err != nil {
					consumeErr = err
					close(stop)
				}
			}
			if opt.recycle {
				d.slabs.release()
				clear(d.batch.Spans)
				spanPool.Put(d.batch.Spans[:0]) //lint:ignore SA6002 a batch's slice header boxed per Put is small beside the spans it keeps alive
			}
			<-inflight
		}
	}
	if consumeErr != nil {
		return consumeErr
	}
	return readErr
}

type decodedChunk struct {
	seq   int
	batch Batch
	slabs slabs // pooled memory of the batch's spans (ReadOptions.recycle)
}

// spanPool recycles the span slices of batches (ReadOptions.recycle).
var spanPool = sync.Pool{New: func() any { return []Span(nil) }}

// decodeChunk decodes c into d, appending to d.batch.Spans.
func decodeChunk(d *decodedChunk, c *chunk, jd *jsonDecoder, pd *protoDecoder) {
	d.batch.File, d.batch.Issues, d.batch.FileDone = c.file, c.issues, c.done
	bad := func(rec int64, err error) {
		d.batch.Issues = append(d.batch.Issues, Issue{Kind: IssueMalformedRecord, File: c.file, Record: rec, Detail: err.Error()})
	}
	switch c.format {
	case FormatJSONLines:
		eachLine(c.data, c.firstRecord, func(line []byte, rec int64) {
			if len(line) > c.limit {
				d.batch.Issues = append(d.batch.Issues, tooLarge(c.file, rec, "line", int64(len(line)), c.limit))
				return
			}
			var err error
			if d.batch.Spans, err = jd.decode(line, rec, d.batch.Spans); err != nil {
				bad(rec, err)
			}
		})
	case FormatKVEvents:
		eachLine(c.data, c.firstRecord, func(line []byte, rec int64) {
			if len(line) > c.limit {
				d.batch.Issues = append(d.batch.Issues, tooLarge(c.file, rec, "line", int64(len(line)), c.limit))
				return
			}
			d.batch.KVEvents, d.batch.Issues = decodeKVLine(line, Where{c.file, rec}, d.batch.KVEvents, d.batch.Issues)
		})
	case FormatJSONDocument:
		var err error
		if d.batch.Spans, err = jd.decode(c.data, c.firstRecord, d.batch.Spans); err != nil {
			bad(c.firstRecord, err)
		}
	case FormatProto:
		for i := 0; i+1 < len(c.offsets); i++ {
			rec := c.firstRecord + int64(i)
			var err error
			if d.batch.Spans, err = pd.decode(c.data[c.offsets[i]:c.offsets[i+1]], rec, d.batch.Spans); err != nil {
				bad(rec, err)
			}
		}
	}
	d.batch.Issues = append(d.batch.Issues, c.trailing...)
}

// eachLine calls fn for every non-blank line of data, numbered from first.
func eachLine(data []byte, first int64, fn func(line []byte, rec int64)) {
	for rec := first; len(data) > 0; rec++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			fn(line, rec)
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r   io.Reader
	n   int64
	err error // the last error other than io.EOF
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// fileReader is what reading one file needs besides the file itself.
type fileReader struct {
	chunkBytes int
	limit      int // record limit, bytes
	pool       *chunkPool
}

// bigRecordBytes is where a record stops growing its buffer by doubling.
// A longer one gets a buffer of the whole record limit at once: the
// operating system backs its pages only as they are read into, so memory
// follows the record's bytes, and the record never holds its old buffer
// and a doubled copy at once (1.5 times the limit).
const bigRecordBytes = 64 << 20

// grow returns the size of the buffer that continues a record of which n
// bytes are held: at least twice n, or limit+1 (a record that fills it is
// over the limit).
func (fr fileReader) grow(n int) int {
	size := fr.chunkBytes
	for size < 2*n {
		size *= 2
	}
	if size > bigRecordBytes {
		size = fr.limit + 1
	}
	return max(min(size, fr.limit+1), n+1)
}

// releaseBig returns the memory of a dropped record buffer of n bytes to
// the operating system at once when it is big: otherwise the collector
// would let the heap grow to twice that size before it runs again, and
// the skipped bytes would still count in the process's memory.
func releaseBig(n int) {
	if n >= bigRecordBytes {
		debug.FreeOSMemory()
	}
}

// tooLarge is the issue of a record over the limit.
func tooLarge(path string, rec int64, what string, n int64, limit int) Issue {
	return Issue{Kind: IssueRecordTooLarge, File: path, Record: rec,
		Detail: fmt.Sprintf("%s of %d bytes is longer than the record limit of %d bytes; skipped", what, n, limit)}
}

// readFile detects a file's compression and format and emits its chunks;
// the last one carries the FileInfo.
func readFile(src Source, fr fileReader, emitChunk func(*chunk) bool, progress func(int64)) error {
	path := src.Name
	f, err := src.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	// Each chunk is held back until the next one shows it is not the
	// file's last, so that the FileInfo rides on the last chunk: a small
	// file is one trip through the pipeline, not two.
	var held *chunk
	emit := func(c *chunk) bool {
		c.limit = fr.limit
		if held != nil && !emitChunk(held) {
			held = nil
			return false
		}
		held = c
		return true
	}
	info := &FileInfo{Path: path, Compression: CompressionNone}
	h := sha256.New()
	raw := &countingReader{r: io.TeeReader(f, h)}
	// A decompressor's error is damage to count, unless the file itself
	// failed to read: that is an I/O error and stops the run.
	damaged := func(err error) bool {
		return isReadFailure(err) || (info.Compression != CompressionNone && raw.err == nil)
	}
	br := getBufReader(raw)
	defer bufPool.Put(br)
	magic, _ := br.Peek(4)
	var r io.Reader = br
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		info.Compression = CompressionGzip
		gz, err := gzip.NewReader(br)
		if err != nil {
			if !damaged(err) {
				return fmt.Errorf("%s: gzip: %w", path, err)
			}
			// A broken header: the file has nothing readable; count it.
			r = &errReader{fmt.Errorf("gzip header: %w", err)}
			break
		}
		defer gz.Close()
		r = gz
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		info.Compression = CompressionZstd
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max(fr.limit, DefaultMaxRecordBytes))))
		if err != nil {
			return fmt.Errorf("%s: zstd: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	dec := &countingReader{r: r}
	body := getBufReader(dec)
	defer bufPool.Put(body)

	var fileIssues []Issue
	readIssue := func(rec int64, err error) {
		kind := IssueTruncatedCompression
		if info.Compression == CompressionNone {
			kind = IssueCorruptFraming
		}
		fileIssues = append(fileIssues, Issue{Kind: kind, File: path, Record: rec, Detail: err.Error()})
	}
	lastRaw := int64(0)
	tick := func() {
		progress(raw.n - lastRaw)
		lastRaw = raw.n
	}

	info.Format, err = detectFormat(body)
	if err != nil {
		if !damaged(err) {
			return fmt.Errorf("%s: %w", path, err)
		}
		readIssue(1, err)
		err = nil
	}
	switch info.Format {
	case FormatJSONLines, FormatKVEvents:
		err = chunkLines(path, info.Format, body, fr, emit, tick, info, readIssue, damaged)
	case FormatJSONDocument:
		err = readDocument(path, body, fr, emit, info, readIssue, damaged)
	case FormatProto:
		err = chunkProto(path, body, fr, emit, tick, info, readIssue, damaged)
	}
	if err != nil {
		return err
	}
	// Drain what follows (e.g. gzip trailer) so the hash covers the file.
	if _, err := io.Copy(io.Discard, f); err != nil {
		return err
	}
	tick()
	info.Bytes = raw.n
	info.DecompressedBytes = dec.n
	info.SHA256 = hex.EncodeToString(h.Sum(nil))
	last := held
	if last == nil {
		last = &chunk{file: path}
	}
	last.trailing, last.done = fileIssues, info
	emitChunk(last)
	return nil
}

// readDocument reads a single JSON document, at most the record limit of
// it: a longer one is counted and skipped.
func readDocument(path string, r io.Reader, fr fileReader, emit func(*chunk) bool, info *FileInfo, readIssue func(int64, error), damaged func(error) bool) error {
	info.Records = 1
	// Grow by doubling up to one byte past the limit, which tells a
	// document over it: at most 1.5 times the limit is held at once.
	buf := make([]byte, min(fr.chunkBytes, fr.limit+1))
	n := 0
	for {
		m, err := fill(r, buf[n:])
		n += m
		if err != nil {
			if err != io.EOF {
				if !damaged(err) {
					return fmt.Errorf("%s: %w", path, err)
				}
				readIssue(1, err)
			}
			emit(&chunk{file: path, format: FormatJSONDocument, firstRecord: 1, data: buf[:n]})
			return nil
		}
		if n > fr.limit {
			buf = nil
			releaseBig(n)
			skipped, err := io.Copy(io.Discard, r)
			if err != nil && !damaged(err) {
				return fmt.Errorf("%s: %w", path, err)
			}
			emit(&chunk{file: path, issues: []Issue{tooLarge(path, 1, "JSON document", int64(n)+skipped, fr.limit)}})
			if err != nil {
				readIssue(1, err)
			}
			return nil
		}
		nb := make([]byte, fr.grow(n))
		copy(nb, buf[:n])
		buf, nb = nb, nil
		releaseBig(n)
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// isReadFailure tells a damaged input (truncated or corrupt compressed
// stream) from an I/O failure that should stop the run.
func isReadFailure(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, zstd.ErrMagicMismatch) || errors.Is(err, zstd.ErrWindowSizeExceeded) ||
		errors.Is(err, zstd.ErrBlockTooSmall) || errors.Is(err, zstd.ErrCRCMismatch) || errors.Is(err, zstd.ErrReservedBlockType) ||
		errors.Is(err, zstd.ErrUnknownDictionary) || errors.Is(err, zstd.ErrFrameSizeMismatch) || errors.Is(err, zstd.ErrDecoderSizeExceeded)
}

// detectFormat looks at the start of the content. JSON starts with '{'
// after optional white space; it is one document per line when the first
// line holds a complete JSON value or is too long to be pretty-printed,
// and a single document otherwise. Anything else is taken as proto.
func detectFormat(r *bufio.Reader) (Format, error) {
	head, err := r.Peek(r.Size())
	if err == io.EOF || err == bufio.ErrBufferFull {
		err = nil
	}
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) == 0 {
		return FormatEmpty, err
	}
	if trimmed[0] == '[' {
		return FormatKVEvents, nil
	}
	if trimmed[0] != '{' {
		return FormatProto, nil
	}
	line := trimmed
	if i := bytes.IndexByte(trimmed, '\n'); i >= 0 {
		line = trimmed[:i]
	} else if len(head) == r.Size() {
		return FormatJSONLines, nil // a first line longer than the peek window
	}
	var s scanner
	s.reset(line)
	s.skip()
	s.end()
	if s.err == nil || len(line) > 4096 {
		return FormatJSONLines, nil
	}
	return FormatJSONDocument, nil
}

// fill reads into buf until it is full or the stream ends. A clean end
// returns io.EOF with what was read; any other error is the stream's own,
// so that a truncated compressed stream is not mistaken for a clean end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// chunkLines cuts a stream of lines into chunks of whole lines. A line
// longer than a chunk grows the buffer (doubling, so that at most 1.5
// times the record limit is held at once); a line longer than the record
// limit is counted and skipped, and only its first limit+1 bytes are read
// into memory.
func chunkLines(path string, format Format, r io.Reader, fr fileReader, emit func(*chunk) bool, tick func(), info *FileInfo, readIssue func(int64, error), damaged func(error) bool) error {
	var carry, carryBuf []byte // the start of a line the last buffer did not end, and that buffer
	line := int64(1)
	for {
		var buf []byte
		if 2*len(carry) <= fr.chunkBytes {
			buf = fr.pool.get()
		} else {
			buf = make([]byte, fr.grow(len(carry)))
		}
		n := copy(buf, carry)
		if carryBuf != nil {
			fr.pool.put(carryBuf)
		}
		carry, carryBuf = nil, nil
		m, err := fill(r, buf[n:])
		data := buf[:n+m]
		end := err != nil
		if err != nil && err != io.EOF {
			if !damaged(err) {
				return fmt.Errorf("%s: %w", path, err)
			}
			// A damaged stream: keep what was read, count the damage.
			readIssue(line+int64(bytes.Count(data, []byte{'\n'})), err)
		}
		cut := len(data)
		if !end {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 { // a line longer than the buffer
				if len(data) <= fr.limit {
					carry, carryBuf = data, buf // read more
					continue
				}
				// Over the limit: skip the rest of it.
				read := len(data)
				buf, data = nil, nil
				releaseBig(read)
				sbuf := fr.pool.get()
				skipped, rest, err := skipLine(r, sbuf)
				if err != nil && err != io.EOF {
					if !damaged(err) {
						return fmt.Errorf("%s: %w", path, err)
					}
					readIssue(line, err)
				}
				info.Records++
				if !emit(&chunk{file: path, format: format, firstRecord: line,
					issues: []Issue{tooLarge(path, line, "line", int64(read)+skipped, fr.limit)}}) {
					return nil
				}
				line++
				tick()
				if err != nil {
					return nil
				}
				carry = append([]byte(nil), rest...)
				fr.pool.put(sbuf)
				continue
			}
			cut = i + 1
		}
		if cut < len(data) {
			carry = append([]byte(nil), data[cut:]...)
		}
		if cut > 0 {
			nl := int64(bytes.Count(data[:cut], []byte{'\n'}))
			records := nl
			if data[cut-1] != '\n' {
				records++
			}
			info.Records += records
			if !emit(&chunk{file: path, format: format, firstRecord: line, data: data[:cut], buf: buf}) {
				return nil
			}
			line += nl
		} else {
			fr.pool.put(buf)
		}
		tick()
		if end {
			return nil
		}
	}
}

// skipLine reads r through buf up to the end of the current line and
// returns how many bytes of the line it read and what followed the newline
// (in buf); err is io.EOF when the stream ended first.
func skipLine(r io.Reader, buf []byte) (int64, []byte, error) {
	var skipped int64
	for {
		m, err := fill(r, buf)
		if i := bytes.IndexByte(buf[:m], '\n'); i >= 0 {
			return skipped + int64(i), buf[i+1 : m], nil
		}
		skipped += int64(m)
		if err != nil {
			return skipped, nil, err
		}
	}
}

func chunkProto(path string, r io.Reader, fr fileReader, emit func(*chunk) bool, tick func(), info *FileInfo, readIssue func(int64, error), damaged func(error) bool) error {
	rec := int64(1)
	flush := func(c *chunk) bool {
		if len(c.offsets) <= 1 {
			return true
		}
		info.Records += int64(len(c.offsets) - 1)
		return emit(c)
	}
	for {
		c := &chunk{file: path, format: FormatProto, firstRecord: rec, offsets: []int{0}}
		for len(c.data) < fr.chunkBytes {
			var hdr [4]byte
			n, err := fill(r, hdr[:])
			if err != nil && !(err == io.EOF && n == len(hdr)) {
				switch {
				case err == io.EOF && n == 0:
					flush(c)
					tick()
					return nil
				case err == io.EOF || damaged(err):
					readIssue(rec, fmt.Errorf("length prefix cut short after %d bytes: %v", n, err))
					flush(c)
					return nil
				default:
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			size := binary.BigEndian.Uint32(hdr[:])
			if uint64(size) > uint64(fr.limit) {
				readIssue(rec, fmt.Errorf("message length %d exceeds %d: framing is lost, rest of file skipped", size, fr.limit))
				flush(c)
				return nil
			}
			// Grow as data arrives: a corrupt length must not allocate a GiB.
			start, got := len(c.data), 0
			for got < int(size) {
				step := min(int(size)-got, 1<<20)
				c.data = append(c.data, make([]byte, step)...)
				m, err := fill(r, c.data[start+got:])
				got += m
				if m < step {
					c.data = c.data[:start]
					if err == nil || err == io.EOF || damaged(err) {
						readIssue(rec, fmt.Errorf("message of %d bytes cut short after %d: %v", size, got, err))
						flush(c)
						return nil
					}
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			c.offsets = append(c.offsets, len(c.data))
			rec++
		}
		tick()
		if !flush(c) {
			return nil
		}
	}
}
