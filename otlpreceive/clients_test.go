package otlpreceive

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/otlpingest"
)

// TestSlowClientsAreCutOff: a client that sends its headers too slowly,
// or its body too slowly, is cut off at the deadline, and the decoding
// slot a slow body held is free again; other clients are served
// meanwhile (or refused as retryable while the slot is held).
func TestSlowClientsAreCutOff(t *testing.T) {
	s := startServer(t, Config{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond, MaxInflight: 1})
	reqs := oneSpanRequests(t, readSpans(t, simulatedTrace)[:3])

	// Headers, never finished.
	slowHead, err := net.Dial("tcp", s.httpAddr)
	require.NoError(t, err)
	defer slowHead.Close()
	_, err = io.WriteString(slowHead, "POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)

	code, _, b := post(t, s.url(), contentProto, reqs[0])
	require.Equal(t, http.StatusOK, code, "served while a client dawdles over its headers: %s", b)

	// A body announced, sent in part, then nothing: it holds the one slot.
	slowBody, err := net.Dial("tcp", s.httpAddr)
	require.NoError(t, err)
	defer slowBody.Close()
	_, err = fmt.Fprintf(slowBody, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 100000\r\n\r\n0123456789", contentProto)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(s.r.inflight) == 1 }, 5*time.Second, 5*time.Millisecond)
	code, h, b := post(t, s.url(), contentProto, reqs[1])
	require.Equal(t, http.StatusServiceUnavailable, code, "the slot is held: %s", b)
	require.Equal(t, "1", h.Get("Retry-After"))

	for name, c := range map[string]net.Conn{"headers": slowHead, "body": slowBody} {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		start := time.Now()
		_, err := io.ReadAll(c) // until the server closes the connection
		require.NoError(t, err, "slow %s: the server closes the connection, the client does not time out", name)
		require.Less(t, time.Since(start), 4*time.Second, name)
	}
	require.Eventually(t, func() bool { return len(s.r.inflight) == 0 }, 5*time.Second, 5*time.Millisecond, "the slot is free again")
	code, _, b = post(t, s.url(), contentProto, reqs[1])
	require.Equal(t, http.StatusOK, code, "%s", b)
	require.Equal(t, int64(2), s.r.Stats().Spans)
}

// TestShutdownLosesNoAcceptedSpan: clients keep sending while the receiver
// shuts down (the servers stop listening and finish what they are
// reading, then the writer drains): every request answered with success
// is in the files, and the files hold nothing that was not sent.
func TestShutdownLosesNoAcceptedSpan(t *testing.T) {
	spans := readSpans(t, simulatedTrace)
	reqs := oneSpanRequests(t, spans)
	s := startServer(t, Config{MaxInflight: 16})
	var mu sync.Mutex
	acked := map[otlpingest.SpanID]bool{}
	var wg sync.WaitGroup
	next := make(chan int)
	client := &http.Client{Timeout: 10 * time.Second}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := client.Post(s.url(), contentProto, bytes.NewReader(reqs[i]))
				if err != nil {
					continue // refused connection after the listener closed
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					acked[spans[i].SpanID] = true
					mu.Unlock()
				}
			}
		}()
	}
	stopped := make(chan struct{})
	go func() {
		for i := range reqs {
			if i == len(reqs)/3 {
				go func() { s.stop(); close(stopped) }()
			}
			next <- i
		}
		close(next)
	}()
	wg.Wait()
	<-stopped
	got := ingestedSpanIDs(t, traceFiles(t, s.dir))
	for id := range acked {
		require.True(t, got[id], "span %s was answered with success but is not on disk", id)
	}
	sent := map[otlpingest.SpanID]bool{}
	for _, sp := range spans {
		sent[sp.SpanID] = true
	}
	for id := range got {
		require.True(t, sent[id])
	}
	require.Positive(t, len(acked))
	require.Less(t, len(acked), len(reqs), "the receiver stopped before the clients did")
	require.Equal(t, int64(len(acked)), s.r.Stats().Spans)
	t.Logf("%d of %d requests accepted before the shutdown, %d on disk", len(acked), len(reqs), len(got))
}

// TestCloseRefusesLateRequests: once closed, the writer refuses new
// records as retryable instead of losing them.
func TestCloseRefusesLateRequests(t *testing.T) {
	r, err := New(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	o := r.accept(protoRequest(t, readSpans(t, simulatedTrace)[:1]), encProto)
	require.Equal(t, unavailable, o.kind)
	require.Contains(t, o.msg, "shutting down")
	require.NoError(t, r.Close(), "Close twice is harmless")
}
