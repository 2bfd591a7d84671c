package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/otlpreceive"
)

// TestMain lets a test run this binary's main as calibrate itself
// (CALIBRATE_TEST_MAIN=1), to send it real signals.
func TestMain(m *testing.M) {
	if os.Getenv("CALIBRATE_TEST_MAIN") == "1" {
		os.Args = append([]string{"calibrate"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const simulatedTrace = "../../testdata/traces/simulated_run.jsonl.gz"

// jsonRequests are the simulated trace's spans, one OTLP/JSON request per
// span, with the span ids each holds.
func jsonRequests(t *testing.T) ([][]byte, []otlpingest.SpanID) {
	t.Helper()
	var bodies [][]byte
	var ids []otlpingest.SpanID
	require.NoError(t, otlpingest.ReadTraces([]string{simulatedTrace}, otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
		for i := range b.Spans {
			bodies = append(bodies, otlpingest.AppendJSON(nil, b.Spans[i:i+1]))
			ids = append(ids, b.Spans[i].SpanID)
		}
		return nil
	}))
	return bodies, ids
}

// spanIDsIn reads the span ids a directory's trace files hold.
func spanIDsIn(t *testing.T, dir string) map[otlpingest.SpanID]bool {
	t.Helper()
	files, _, err := expandInputs([]string{dir})
	if err != nil {
		return map[otlpingest.SpanID]bool{}
	}
	got := map[otlpingest.SpanID]bool{}
	require.NoError(t, otlpingest.ReadTraces(files, otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
		for _, sp := range b.Spans {
			got[sp.SpanID] = true
		}
		return nil
	}))
	return got
}

func TestReceiveFlags(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(regular, nil, 0o644))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"receive"}, "-o DIR is required"},
		{[]string{"receive", "-o", dir, "--listen", "off", "--grpc-listen", "off"}, "both off"},
		{[]string{"receive", "-o", dir, "--max-request-mib", "0"}, "--max-request-mib must be in [1, 128], got 0"},
		{[]string{"receive", "-o", dir, "--max-request-mib", "129"}, "--max-request-mib must be in [1, 128], got 129"},
		{[]string{"receive", "-o", dir, "--max-inflight", "0"}, "--max-inflight must be in [1, 1024], got 0"},
		{[]string{"receive", "-o", dir, "--max-queue-mib", "-1"}, "--max-queue-mib must be in"},
		{[]string{"receive", "-o", dir, "--rotate-mib", "0"}, "--rotate-mib must be in"},
		{[]string{"receive", "-o", dir, "--shutdown-timeout", "0s"}, "--shutdown-timeout must be positive"},
		{[]string{"receive", "-o", dir, "--tables", dir}, "the tables would be read back as traces"},
		{[]string{"receive", "-o", dir, "--tables", dir + "/."}, "the tables would be read back as traces"},
		{[]string{"receive", "-o", regular}, "-o " + regular},
		{[]string{"receive", "-o", dir, "--listen", "127.0.0.1:99999", "--grpc-listen", "off"}, "--listen 127.0.0.1:99999"},
		{[]string{"receive", "-o", dir, "extra"}, "unknown command"},
	} {
		out, err := run(t, c.args...)
		require.Error(t, err, "%v: %s", c.args, out)
		require.Contains(t, err.Error(), c.msg, "%v", c.args)
	}
}

// TestReceiveInProcess runs calibrate receive with --tables, sends the
// simulated trace over OTLP/HTTP JSON, stops it as Ctrl-C would, and
// checks its stderr (the listening line, a progress line, the summary)
// and that --tables wrote what calibrate ingest of its files writes.
func TestReceiveInProcess(t *testing.T) {
	dir, tables := t.TempDir(), filepath.Join(t.TempDir(), "tables")
	bodies, ids := jsonRequests(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runReceive(ctx, &stdout, &stderr, receiveOpts{out: dir, tables: tables, listen: "127.0.0.1:0", grpcListen: "127.0.0.1:0",
			maxRequestMiB: 64, maxInflight: 4, maxQueueMiB: 64, rotateMiB: 1, shutdownTimeout: 10 * time.Second,
			ready: func(h, _ string) { addr <- h }})
	}()
	url := "http://" + <-addr + "/v1/traces"
	start := time.Now()
	for i, b := range bodies {
		resp, err := http.Post(url, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
	}
	time.Sleep(max(0, 2100*time.Millisecond-time.Since(start))) // one progress line
	cancel()
	require.NoError(t, <-done)
	errText := stderr.String()
	require.Regexp(t, `^receive: OTLP/HTTP on http://127\.0\.0\.1:\d+/v1/traces and OTLP/gRPC on 127\.0\.0\.1:\d+; writing into `, errText)
	// A progress line (its counts are those of its moment: under load the
	// posts outlast the 2.1 s, and the last tick may come before the last
	// post); the closing line below holds the totals.
	require.Regexp(t, `\rreceive: \d+ requests?, \d+ spans \(\d+/s\), [0-9.]+ [KMG]?i?B in \d+ files?, [0-9.]+ [KMG]?i?B queued, \d+ refused for now, 0 bad`, errText)
	require.Contains(t, errText, "receive: 553 requests, 553 spans (0 not vLLM's) written to "+dir)
	got := spanIDsIn(t, dir)
	require.Len(t, got, len(ids))
	for _, id := range ids {
		require.True(t, got[id])
	}
	files, _, err := expandInputs([]string{dir})
	require.NoError(t, err)
	require.Greater(t, len(files), 1, "rotated at 1 MiB")

	// --tables is calibrate ingest DIR.
	again := filepath.Join(t.TempDir(), "again")
	_, err = run(t, "ingest", dir, "-o", again, "-q")
	require.NoError(t, err)
	for _, name := range append(append([]string{}, otlpingest.TableNames...), "manifest") {
		ext := ".parquet"
		if name == "manifest" {
			ext = ".json"
		}
		a, err := os.ReadFile(filepath.Join(tables, name+ext))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(again, name+ext))
		require.NoError(t, err)
		if name == "manifest" {
			var ma, mb map[string]any
			require.NoError(t, json.Unmarshal(a, &ma))
			require.NoError(t, json.Unmarshal(b, &mb))
			delete(ma, "tool")
			delete(mb, "tool")
			require.Equal(t, mb, ma)
			continue
		}
		require.True(t, bytes.Equal(a, b), "%s: --tables writes what calibrate ingest writes", name)
	}
	require.Contains(t, stdout.String(), "requests.parquet                  256 rows")
}

// TestReceiveNothingReceived: stopped before any request, --tables says
// so by name instead of writing empty tables.
func TestReceiveNothingReceived(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	dir := t.TempDir()
	err := runReceive(ctx, &stdout, &stderr, receiveOpts{out: dir, tables: filepath.Join(t.TempDir(), "t"), listen: "127.0.0.1:0", grpcListen: off,
		maxRequestMiB: 64, maxInflight: 4, maxQueueMiB: 64, rotateMiB: 256, shutdownTimeout: time.Second, quiet: true})
	require.ErrorContains(t, err, "holds no trace file (nothing was received): no tables written")
	require.Contains(t, stderr.String(), "receive: 0 requests, 0 spans")
}

// startReceiver starts this test binary as `calibrate receive` and
// returns it, its stderr (read as it comes) and its OTLP/HTTP URL.
func startReceiver(t *testing.T, dir string, extra ...string) (*exec.Cmd, *syncBuffer, string) {
	t.Helper()
	args := append([]string{"receive", "-o", dir, "--listen", "127.0.0.1:0", "--grpc-listen", "off", "-q"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CALIBRATE_TEST_MAIN=1")
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	stderr := (&syncBuffer{}).init()
	sc := bufio.NewScanner(pipe)
	first := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if stderr.Len() == 0 {
				first <- sc.Text()
			}
			stderr.WriteLine(sc.Text())
		}
		close(stderr.closed)
	}()
	select {
	case line := <-first:
		m := regexp.MustCompile(`http://[0-9.:]+/v1/traces`).FindString(line)
		require.NotEmpty(t, m, line)
		return cmd, stderr, m
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver did not start")
	}
	return nil, nil, ""
}

type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	closed chan struct{}
}

func (s *syncBuffer) init() *syncBuffer { s.closed = make(chan struct{}); return s }
func (s *syncBuffer) WriteLine(l string) {
	s.mu.Lock()
	s.b.WriteString(l + "\n")
	s.mu.Unlock()
}
func (s *syncBuffer) Len() int { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Len() }
func (s *syncBuffer) String() string {
	<-s.closed
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sendUntil posts the requests from 8 clients until stop is closed, and
// returns the span ids of those answered with success.
func sendUntil(url string, bodies [][]byte, ids []otlpingest.SpanID, sent func(n int)) map[otlpingest.SpanID]bool {
	var mu sync.Mutex
	acked := map[otlpingest.SpanID]bool{}
	next := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 20 * time.Second}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					acked[ids[i]] = true
					mu.Unlock()
				}
			}
		}()
	}
	for i := range bodies {
		sent(i)
		next <- i
	}
	close(next)
	wg.Wait()
	return acked
}

// TestReceiveCtrlCMidWrite: SIGINT while clients are sending: the process
// stops listening, answers what it is reading, writes it, and exits 0;
// every span it answered with success is in its files.
func TestReceiveCtrlCMidWrite(t *testing.T) {
	dir := t.TempDir()
	bodies, ids := jsonRequests(t)
	cmd, stderr, url := startReceiver(t, dir)
	acked := sendUntil(url, bodies, ids, func(n int) {
		if n == len(bodies)/2 {
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		}
	})
	err := cmd.Wait()
	require.NoError(t, err, "a clean stop exits 0: %s", stderr.String())
	require.Contains(t, stderr.String(), "receive: stopping: answering the requests being received")
	got := spanIDsIn(t, dir)
	for id := range acked {
		require.True(t, got[id], "span %s answered with success but not on disk", id)
	}
	require.Positive(t, len(acked))
	require.Less(t, len(acked), len(bodies))
}

// TestReceiveSecondCtrlCExitsAtOnce: while a stop waits for a slow
// client, a second SIGINT ends the process at once; still, every span
// answered with success is on disk (an answer waits for the sync).
func TestReceiveSecondCtrlCExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	bodies, ids := jsonRequests(t)
	cmd, stderr, url := startReceiver(t, dir)
	acked := map[otlpingest.SpanID]bool{}
	for i := range 100 {
		resp, err := http.Post(url, "application/json", bytes.NewReader(bodies[i]))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		acked[ids[i]] = true
	}

	// A client that sends half a body and dawdles: the stop waits for it.
	host := regexp.MustCompile(`//([0-9.:]+)/`).FindStringSubmatch(url)[1]
	slow, err := net.Dial("tcp", host)
	require.NoError(t, err)
	defer slow.Close()
	_, err = fmt.Fprintf(slow, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"resourceSpans\"")
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the first Ctrl-C waits for the slow client, but the process exited: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "killed by the second signal: %v", err)
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the second Ctrl-C did not end the process")
	}
	require.Contains(t, stderr.String(), "receive: stopping")
	got := spanIDsIn(t, dir)
	for id := range acked {
		require.True(t, got[id], "span %s answered with success but not on disk", id)
	}
}

// TestReceiveDocsStateTheDefaults: the defaults docs/vllm-tracing.md
// quotes are the flags' (declared once, in otlpreceive and here).
func TestReceiveDocsStateTheDefaults(t *testing.T) {
	data, err := os.ReadFile("../../docs/vllm-tracing.md")
	require.NoError(t, err)
	doc := string(data)
	cmd := newReceiveCmd()
	want := []string{
		fmt.Sprintf("`--shutdown-timeout`, %s s", strings.TrimSuffix(cmd.Flags().Lookup("shutdown-timeout").DefValue, "s")),
		fmt.Sprintf("slower than %d s to send its headers or %d s its body", int(otlpreceive.DefaultHeaderTimeout.Seconds()), int(otlpreceive.DefaultBodyTimeout.Seconds())),
		fmt.Sprintf("at most %d connections at once", otlpreceive.DefaultMaxConns),
		"OTLP/HTTP on " + otlpreceive.DefaultHTTPAddr,
		"OTLP/gRPC on " + otlpreceive.DefaultGRPCAddr,
	}
	for _, name := range []string{"max-request-mib", "max-inflight", "max-queue-mib", "rotate-mib"} {
		want = append(want, "`--"+name+"` ("+cmd.Flags().Lookup(name).DefValue+")")
	}
	for _, w := range want {
		require.True(t, strings.Contains(doc, w), "docs/vllm-tracing.md does not say %q", w)
	}
}
