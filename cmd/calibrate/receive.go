package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/plural"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/otlpreceive"
)

type receiveOpts struct {
	out, tables        string
	listen, grpcListen string
	maxRequestMiB      int
	maxInflight        int
	maxQueueMiB        int
	rotateMiB          int
	shutdownTimeout    time.Duration
	quiet              bool
	// ready, for tests: called with the addresses listened on.
	ready func(httpAddr, grpcAddr string)
}

// off turns a listener off.
const off = "off"

func newReceiveCmd() *cobra.Command {
	var o receiveOpts
	cmd := &cobra.Command{
		Use:   "receive -o DIR",
		Short: "Receive OTLP traces from vLLM (HTTP and gRPC) into trace files, with no collector",
		Long: `receive is an OTLP trace receiver: point vLLM's --otlp-traces-endpoint at
it, and it writes the spans it receives into DIR as rotating trace files that
calibrate ingest reads (--tables DIR2 ingests them when it stops).

  OTLP/HTTP  POST http://` + otlpreceive.DefaultHTTPAddr + otlpreceive.TracesPath + ` (--listen), protobuf or JSON, gzip or not
  OTLP/gRPC  ` + otlpreceive.DefaultGRPCAddr + ` (--grpc-listen), vLLM's default protocol

Protobuf requests (gRPC and HTTP) go into OTLP-NNNNNN.binpb as length-prefixed
messages, JSON ones into OTLP-NNNNNN.jsonl one per line: the forms of the
OpenTelemetry Collector's file exporter. A file is closed and the next begun
past --rotate-mib; numbering continues after the files already in DIR, and a
second receiver on the same DIR is refused.

A request is answered with success only once it is written and synced to
disk. One that cannot be taken now (--max-inflight requests being read, or
--max-queue-mib of accepted data waiting for a slow disk, or a failed write)
is refused at once as retryable: HTTP 503 with Retry-After, gRPC
UNAVAILABLE or RESOURCE_EXHAUSTED with RetryInfo; exporters retry it. A body
that does not decode is refused (HTTP 400, gRPC INVALID_ARGUMENT), and one
past --max-request-mib, before or after decompression, too (HTTP 413); these
are not retried.

Ctrl-C (SIGINT) or SIGTERM stops it cleanly: it stops listening, answers the
requests it is reading (waiting at most --shutdown-timeout), writes and syncs
them, and exits 0; a second Ctrl-C exits at once, losing no request already
answered. A progress line goes to stderr every 2 s (-q: none).

Setting up vLLM, and what the files hold: docs/vllm-tracing.md.`,
		Example: `  calibrate receive -o traces/
  vllm serve MODEL --enable-journey-tracing --step-tracing-enabled \
      --otlp-traces-endpoint http://127.0.0.1:4317
  # ... run the load, stop vLLM, then Ctrl-C the receiver:
  calibrate ingest traces/ -o tables

  calibrate receive -o traces/ --tables tables/ --grpc-listen off   # HTTP only, tables when stopped`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.out == "" {
				return errors.New("receive: -o DIR is required (where the trace files go)")
			}
			if o.listen == off && o.grpcListen == off {
				return errors.New("receive: --listen and --grpc-listen are both off: nothing to receive on")
			}
			if o.maxRequestMiB < 1 || o.maxRequestMiB > otlpreceive.MaxRequestBytesLimit>>20 {
				return fmt.Errorf("--max-request-mib must be in [1, %d], got %d", otlpreceive.MaxRequestBytesLimit>>20, o.maxRequestMiB)
			}
			if o.maxInflight < 1 || o.maxInflight > 1024 {
				return fmt.Errorf("--max-inflight must be in [1, 1024], got %d", o.maxInflight)
			}
			if o.maxQueueMiB < 1 || o.maxQueueMiB > 1<<16 {
				return fmt.Errorf("--max-queue-mib must be in [1, %d], got %d", 1<<16, o.maxQueueMiB)
			}
			if o.rotateMiB < 1 || o.rotateMiB > 1<<20 {
				return fmt.Errorf("--rotate-mib must be in [1, %d], got %d", 1<<20, o.rotateMiB)
			}
			if o.shutdownTimeout <= 0 {
				return fmt.Errorf("--shutdown-timeout must be positive, got %s", o.shutdownTimeout)
			}
			// receive handles Ctrl-C itself: it must drain, not exit.
			stopExitOnSignal()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			go func() { <-ctx.Done(); stop() }() // a second signal takes the default action: exit at once
			return runReceive(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "directory for the trace files (created if needed)")
	f.StringVar(&o.tables, "tables", "", "when stopped, ingest DIR's trace files into these tables, as calibrate ingest DIR -o TABLES does")
	f.StringVar(&o.listen, "listen", otlpreceive.DefaultHTTPAddr, "OTLP/HTTP address, HOST:PORT (port 0: any free port), or off")
	f.StringVar(&o.grpcListen, "grpc-listen", otlpreceive.DefaultGRPCAddr, "OTLP/gRPC address, HOST:PORT, or off")
	f.IntVar(&o.maxRequestMiB, "max-request-mib", otlpreceive.DefaultMaxRequestBytes>>20, "largest request body in MiB, before and after decompression (larger: HTTP 413, gRPC RESOURCE_EXHAUSTED)")
	f.IntVar(&o.maxInflight, "max-inflight", otlpreceive.DefaultMaxInflight, "requests read and decoded at once; more are refused as retryable")
	f.IntVar(&o.maxQueueMiB, "max-queue-mib", otlpreceive.DefaultMaxQueueBytes>>20, "accepted data waiting for the disk, in MiB; past it requests are refused as retryable")
	f.IntVar(&o.rotateMiB, "rotate-mib", otlpreceive.DefaultRotateBytes>>20, "start a new trace file past this size, in MiB")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on Ctrl-C, how long to wait for requests being received")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress line")
	return cmd
}

// stopExitOnSignal turns off main's exit on Ctrl-C (set by main; a no-op
// in tests, which call the commands directly).
var stopExitOnSignal = func() {}

func runReceive(ctx context.Context, stdout, stderr io.Writer, o receiveOpts) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("-o %s: %w", o.out, err)
	}
	if o.tables != "" {
		if same, err := sameDir(o.out, o.tables); err != nil {
			return err
		} else if same {
			return fmt.Errorf("--tables %s is -o %s: the tables would be read back as traces; give them their own directory", o.tables, o.out)
		}
	}
	rec, err := otlpreceive.New(otlpreceive.Config{
		Dir: o.out, MaxRequestBytes: int64(o.maxRequestMiB) << 20, MaxInflight: o.maxInflight,
		MaxQueueBytes: int64(o.maxQueueMiB) << 20, RotateBytes: int64(o.rotateMiB) << 20,
	})
	if err != nil {
		return err
	}
	defer rec.Close()

	var hs *http.Server
	var gs *grpc.Server
	var hl, gl net.Listener
	if o.listen != off {
		if hl, err = rec.Listen(o.listen); err != nil {
			return fmt.Errorf("--listen %s: %w", o.listen, err)
		}
		hs = rec.NewHTTPServer(o.listen)
	}
	if o.grpcListen != off {
		if gl, err = rec.Listen(o.grpcListen); err != nil {
			if hl != nil {
				hl.Close()
			}
			return fmt.Errorf("--grpc-listen %s: %w", o.grpcListen, err)
		}
		gs = rec.NewGRPCServer()
	}
	serveErr := make(chan error, 2)
	var where []string
	var httpAddr, grpcAddr string
	if hs != nil {
		httpAddr = hl.Addr().String()
		where = append(where, "OTLP/HTTP on http://"+httpAddr+otlpreceive.TracesPath)
		go func() {
			if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("OTLP/HTTP: %w", err)
			}
		}()
	}
	if gs != nil {
		grpcAddr = gl.Addr().String()
		where = append(where, "OTLP/gRPC on "+grpcAddr)
		go func() {
			if err := gs.Serve(gl); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				serveErr <- fmt.Errorf("OTLP/gRPC: %w", err)
			}
		}()
	}
	fmt.Fprintf(stderr, "receive: %s; writing into %s (Ctrl-C to stop)\n", joinAnd(where), o.out)
	if o.ready != nil {
		o.ready(httpAddr, grpcAddr)
	}

	start := time.Now()
	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() {
		defer close(progressDone)
		if o.quiet {
			return
		}
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		var last otlpreceive.Stats
		lastT := start
		printed := false
		for {
			select {
			case <-stopProgress:
				if printed {
					fmt.Fprintln(stderr)
				}
				return
			case now := <-tick.C:
				s := rec.Stats()
				rate := float64(s.Spans-last.Spans) / now.Sub(lastT).Seconds()
				fmt.Fprintf(stderr, "\rreceive: %s, %d spans (%.0f/s), %s in %s, %s queued, %d refused for now, %d bad   ",
					plural.Of(s.Requests, "request"), s.Spans, rate, humanBytes(s.Bytes), plural.Of(s.Files, "file"), humanBytes(s.QueuedBytes), s.Refused, s.BadRequests)
				last, lastT, printed = s, now, true
			}
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	close(stopProgress)
	<-progressDone
	fmt.Fprintf(stderr, "receive: stopping: answering the requests being received (at most %s)\n", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	cut := false
	var cutMu sync.Mutex
	if hs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close()
				cutMu.Lock()
				cut = true
				cutMu.Unlock()
			}
		}()
	}
	if gs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { gs.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-sctx.Done():
				gs.Stop()
				<-done
				cutMu.Lock()
				cut = true
				cutMu.Unlock()
			}
		}()
	}
	wg.Wait()
	rec.Close()
	s := rec.Stats()
	if cut {
		fmt.Fprintf(stderr, "receive: --shutdown-timeout passed: requests still being received were cut off unanswered (their clients will retry them elsewhere); no answered request is lost\n")
	}
	fmt.Fprintf(stderr, "receive: %s, %d spans (%d not vLLM's) written to %s in %s (%s) in %s; refused %d for now, %d bad\n",
		plural.Of(s.Requests, "request"), s.Spans, s.ForeignSpans, o.out, plural.Of(s.Files, "file"), humanBytes(s.Bytes), time.Since(start).Round(time.Second), s.Refused, s.BadRequests)
	if runErr != nil {
		return runErr
	}
	if o.tables == "" {
		return nil
	}
	if files, _, err := expandInputs([]string{o.out}); err != nil || len(files) == 0 {
		return fmt.Errorf("--tables %s: %s holds no trace file (nothing was received): no tables written", o.tables, o.out)
	}
	// The ingest writes its outputs through atomicfile: a Ctrl-C now
	// removes its temporaries and exits, as calibrate ingest does.
	defer atomicfile.ExitOnSignal("calibrate", stderr)()
	return runIngest(stdout, stderr, []string{o.out}, ingestOpts{
		out: o.tables, maxDetails: 100, maxRecord: otlpingest.DefaultMaxRecordBytes >> 20, quiet: o.quiet})
}

// sameDir says whether two paths name one directory (cleaned, absolute,
// through symbolic links; a path that does not exist yet is no other).
func sameDir(a, b string) (bool, error) {
	aa, err := filepath.Abs(a)
	if err != nil {
		return false, err
	}
	bb, err := filepath.Abs(b)
	if err != nil {
		return false, err
	}
	if aa == bb {
		return true, nil
	}
	sa, errA := os.Stat(aa)
	sb, errB := os.Stat(bb)
	return errA == nil && errB == nil && os.SameFile(sa, sb), nil
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	out := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		out += ", " + p
	}
	return out + " and " + parts[len(parts)-1]
}
