// Package otlpreceive receives OpenTelemetry traces over OTLP (HTTP with
// protobuf or JSON bodies, and gRPC) and writes them to rotating files in
// the forms the OpenTelemetry Collector's file exporter writes, so that
// `calibrate ingest DIR` reads them as it reads a collector's output
// (docs/vllm-tracing.md): a vLLM server can export straight to
// `calibrate receive`, with no collector.
//
// The protocol is the OTLP specification's (opentelemetry-proto,
// docs/specification.md):
//
//   - HTTP: POST /v1/traces, Content-Type application/x-protobuf or
//     application/json, optionally Content-Encoding gzip. Success is 200
//     with an ExportTraceServiceResponse in the request's content type;
//     failures carry a google.rpc.Status. A body that does not decode is
//     400 (not retryable); a body past the size bound, before or after
//     decompression, 413 (not retryable); an unsupported content type or
//     encoding 415; a receiver that cannot take the request now (too many
//     requests being decoded, the disk behind, a failed write, shutting
//     down) 503 with Retry-After, which every OTLP exporter retries (429
//     is not used: the OpenTelemetry Python SDK's HTTP exporter, which
//     vLLM uses, long retried only 408 and 5xx, dropping a request
//     answered 429).
//   - gRPC: opentelemetry.proto.collector.trace.v1.TraceService/Export,
//     gzip accepted. Bad data is INVALID_ARGUMENT; too many requests being
//     decoded is RESOURCE_EXHAUSTED and a full queue, a failed write or a
//     shutdown UNAVAILABLE, both with a RetryInfo detail (which makes
//     RESOURCE_EXHAUSTED retryable) and the same delay in the
//     google.rpc.retryinfo-bin trailer, which is where the Python SDK's
//     exporter looks for it. A message past the size bound is refused by
//     gRPC itself (RESOURCE_EXHAUSTED without RetryInfo: not retryable).
//   - A request whose spans include some the tables do not take (another
//     program's spans, upstream vLLM's summary span) is accepted whole and
//     answered with a partial_success warning (rejected_spans 0) naming
//     them; an empty request is a success and writes nothing.
//
// A request is validated by the ingest's own decoders (otlpingest
// DecodeProto and DecodeJSON), so that what is accepted is what the
// ingest reads, and written unchanged: protobuf bodies (HTTP and gRPC) as
// length-prefixed messages in PREFIX-NNNNNN.binpb, JSON bodies compacted
// to one line in PREFIX-NNNNNN.jsonl. A request is answered with success
// only once its bytes are written and synced (group commit), so an
// accepted span survives the receiver's crash; a failed write is cut back
// out of its file and the request refused (retryable).
//
// Memory is bounded: at most MaxInflight requests are read and decoded at
// once (each at most MaxRequestBytes, compressed and decompressed), and at
// most MaxQueueBytes of accepted records wait for the disk; a request that
// finds either bound reached is refused at once, never buffered.
package otlpreceive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blis-sim/blis/otlpingest"
)

// Defaults, for Config and for calibrate receive's flags.
const (
	DefaultHTTPAddr = "127.0.0.1:4318" // the OTLP/HTTP default port
	DefaultGRPCAddr = "127.0.0.1:4317" // the OTLP/gRPC default port
	// DefaultMaxRequestBytes bounds one request's body, compressed and
	// decompressed. The specification recommends 20 MiB for HTTP and
	// 4 MiB for gRPC; vLLM's exporter sends up to 512 spans at a time
	// without splitting, and a batch of step spans with rich snapshots
	// can pass 4 MiB, so the bound is that of examples/otel-collector.yaml.
	DefaultMaxRequestBytes = 64 << 20
	// MaxRequestBytesLimit caps MaxRequestBytes: a proto file's length
	// prefix must start with a byte below 0x09, so that the ingest's
	// content detection never takes it for white space, '{', or a gzip or
	// zstd magic number.
	MaxRequestBytesLimit = 128 << 20
	DefaultMaxInflight   = 4
	DefaultMaxQueueBytes = 64 << 20
	DefaultRotateBytes   = 256 << 20
	DefaultPrefix        = "otlp"
	// DefaultHeaderTimeout and DefaultBodyTimeout bound how long a client
	// may take to send a request's headers and its whole body; a slower
	// one is cut off, so slow clients cannot hold the receiver.
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 60 * time.Second
	// DefaultMaxConns bounds the open connections of each listener.
	DefaultMaxConns = 256
)

// LockName is the file a receiver holds locked in its directory, so that
// two receivers never write into one directory. Its name starts with a
// dot: the ingest skips it when it reads the directory.
const LockName = ".calibrate-receive.lock"

// Config configures a Receiver; zero values take the defaults.
type Config struct {
	Dir             string // where trace files go; it must exist
	Prefix          string // file names are PREFIX-NNNNNN.binpb / .jsonl
	MaxRequestBytes int64
	MaxInflight     int
	MaxQueueBytes   int64
	RotateBytes     int64
	HeaderTimeout   time.Duration
	BodyTimeout     time.Duration
	MaxConns        int
	// openFile, for tests: how trace files are created.
	openFile func(path string) (file, error)
}

func (c *Config) defaults() {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if c.RotateBytes == 0 {
		c.RotateBytes = DefaultRotateBytes
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.openFile == nil {
		c.openFile = openFile
	}
}

func (c *Config) validate() error {
	switch {
	case c.MaxRequestBytes < 1 || c.MaxRequestBytes > MaxRequestBytesLimit:
		return fmt.Errorf("the request size bound must be in [1 B, %d MiB], got %d B", MaxRequestBytesLimit>>20, c.MaxRequestBytes)
	case c.MaxInflight < 1 || c.MaxInflight > 1024:
		return fmt.Errorf("the requests decoded at once must be in [1, 1024], got %d", c.MaxInflight)
	case c.MaxQueueBytes < 1:
		return fmt.Errorf("the write queue bound must be positive, got %d B", c.MaxQueueBytes)
	case c.RotateBytes < 1:
		return fmt.Errorf("the rotation size must be positive, got %d B", c.RotateBytes)
	case c.MaxConns < 1:
		return fmt.Errorf("the connection bound must be positive, got %d", c.MaxConns)
	case strings.ContainsAny(c.Prefix, "/\\") || strings.HasPrefix(c.Prefix, "."):
		return fmt.Errorf("the file prefix %q must be a plain name not starting with a dot", c.Prefix)
	}
	return nil
}

// Stats are a receiver's counts so far.
type Stats struct {
	Requests     int64 // answered with success
	Spans        int64 // in those requests
	ForeignSpans int64 // of which the tables do not take
	Bytes        int64 // written and synced
	Files        int   // trace files created
	BadRequests  int64 // refused as undecodable, oversized or of an unsupported type (not retryable)
	Refused      int64 // refused for now: busy, queue full, write failed, shutting down (retryable)
	WriteErrors  int64 // failed writes or syncs
	QueuedBytes  int64 // waiting for the disk now
}

// Receiver turns OTLP export requests into trace files. Its HTTP handler
// and gRPC service may serve concurrently; Close drains it.
type Receiver struct {
	cfg      Config
	w        *writer
	lock     *os.File
	inflight chan struct{}

	requests, spans, foreign, bad, refused, writeErrs atomic.Int64

	closeOnce sync.Once
}

// New opens a receiver on cfg.Dir: it takes the directory's lock (another
// receiver holding it is an error naming its process), and names its
// files after those already there.
func New(cfg Config) (*Receiver, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("output directory %s is not a directory (%s)", cfg.Dir, st.Mode().Type())
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	r := &Receiver{cfg: cfg, lock: lock, inflight: make(chan struct{}, cfg.MaxInflight)}
	r.w, err = newWriter(cfg.Dir, cfg.Prefix, cfg.MaxQueueBytes, cfg.RotateBytes, cfg.openFile)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	r.w.writeError = func(error) { r.writeErrs.Add(1) }
	return r, nil
}

// lockDir takes the directory's lock file, writing this process's id into
// it for the error another receiver will show.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output directory %s is not writable: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another calibrate receive (process %s) is writing into %s: give each receiver its own directory",
				strings.TrimSpace(string(owner)), dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	}
	return f, nil
}

// Close writes every accepted request still queued, syncs and closes the
// files and releases the directory. Call it after the servers have
// stopped (http.Server.Shutdown, grpc.Server.GracefulStop), so that no
// request is answered after it; requests arriving meanwhile are refused
// as retryable.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		r.w.close()
		_ = syscall.Flock(int(r.lock.Fd()), syscall.LOCK_UN)
		_ = r.lock.Close()
	})
	return nil
}

// Stats returns the counts so far.
func (r *Receiver) Stats() Stats {
	r.w.mu.Lock()
	bytes, files, queued := r.w.written, r.w.filesMade, r.w.queued
	r.w.mu.Unlock()
	return Stats{
		Requests: r.requests.Load(), Spans: r.spans.Load(), ForeignSpans: r.foreign.Load(),
		Bytes: bytes, Files: files, BadRequests: r.bad.Load(), Refused: r.refused.Load(),
		WriteErrors: r.writeErrs.Load(), QueuedBytes: queued,
	}
}

// outcome is what became of one request, whatever its transport.
type outcome struct {
	kind       outcomeKind
	msg        string        // for failures and warnings
	retryAfter time.Duration // for retryable failures
	spans      int
	foreign    int
}

type outcomeKind int

const (
	accepted    outcomeKind = iota
	badData                 // undecodable: 400 / INVALID_ARGUMENT
	busy                    // too many requests decoding: 503 / RESOURCE_EXHAUSTED + RetryInfo
	unavailable             // queue full, write failed, shutting down: 503 / UNAVAILABLE + RetryInfo
)

// acquire takes a decoding slot, or reports that none is free.
func (r *Receiver) acquire() bool {
	select {
	case r.inflight <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *Receiver) release() { <-r.inflight }

// busyOutcome refuses a request for want of a decoding slot.
func (r *Receiver) busyOutcome() outcome {
	r.refused.Add(1)
	return outcome{kind: busy, retryAfter: time.Second,
		msg: fmt.Sprintf("%d requests are being received already; retry later", r.cfg.MaxInflight)}
}

// accept validates a request body (decompressed) with the ingest's
// decoder for its encoding, and writes it; it returns once the request is
// on disk or refused. The caller holds a decoding slot.
func (r *Receiver) accept(body []byte, enc encoding) outcome {
	var spans []otlpingest.Span
	var err error
	var data []byte
	switch enc {
	case encProto:
		spans, err = otlpingest.DecodeProto(body)
		if err == nil {
			data = make([]byte, 4, 4+len(body))
			data[0], data[1], data[2], data[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
			data = append(data, body...)
		}
	case encJSON:
		spans, err = otlpingest.DecodeJSON(body)
		if err == nil {
			data, err = compactLine(body)
		}
	}
	if err != nil {
		r.bad.Add(1)
		return outcome{kind: badData, msg: err.Error()}
	}
	o := outcome{kind: accepted, spans: len(spans)}
	var names []string
	for i := range spans {
		if !otlpingest.IsVLLMSpan(spans[i].Name) {
			o.foreign++
			if len(names) < 3 {
				names = append(names, fmt.Sprintf("%q (scope %q)", spans[i].Name, spans[i].Scope))
			}
		}
	}
	if o.foreign > 0 {
		o.msg = fmt.Sprintf("%d of %d spans are not vLLM journey or step tracing spans (%s): they are stored, and calibrate ingest will count them as unknown_span",
			o.foreign, o.spans, strings.Join(names, ", "))
	}
	if len(spans) == 0 { // an empty request is a success, and nothing to write
		r.requests.Add(1)
		return o
	}
	rec := &record{enc: enc, data: data, spans: len(spans), done: make(chan error, 1)}
	if err := r.w.enqueue(rec); err != nil {
		r.refused.Add(1)
		return outcome{kind: unavailable, msg: err.Error() + "; retry later", retryAfter: r.w.retryAfter()}
	}
	if err := <-rec.done; err != nil {
		r.refused.Add(1)
		return outcome{kind: unavailable, msg: "not written: " + err.Error() + "; retry later", retryAfter: r.w.retryAfter()}
	}
	r.requests.Add(1)
	r.spans.Add(int64(o.spans))
	r.foreign.Add(int64(o.foreign))
	return o
}
