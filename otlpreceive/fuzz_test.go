package otlpreceive

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/blis-sim/blis/otlpingest"
)

// memFile is a trace file in memory, for the fuzz target.
type memFile struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (m memFile) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buf.Write(b)
}
func (memFile) Sync() error { return nil }
func (m memFile) Truncate(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf.Truncate(int(n))
	return nil
}
func (memFile) Close() error { return nil }

// FuzzServeHTTP posts arbitrary bodies, with each content type and with or
// without gzip, to the OTLP/HTTP handler: it never panics, answers with a
// status the specification names and a body that decodes as the message
// that status calls for, and what it accepts the ingest reads back whole,
// with the number of spans the receiver counted.
func FuzzServeHTTP(f *testing.F) {
	spans := readSpans(f, simulatedTrace)[:3]
	good := protoRequest(f, spans)
	f.Add(good, uint8(0), false)
	f.Add(gzipped(f, good), uint8(0), true)
	f.Add(otlpingest.AppendJSON(nil, spans), uint8(1), false)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00","spanId":"01"}]}]}]}`), uint8(1), false)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, uint8(0), false)
	f.Add([]byte(`{}`), uint8(2), false)

	var mu sync.Mutex
	files := map[string]*bytes.Buffer{}
	cfg := Config{Dir: f.TempDir(), MaxRequestBytes: 1 << 20, openFile: func(path string) (file, error) {
		mu.Lock()
		defer mu.Unlock()
		b := &bytes.Buffer{}
		files[path] = b
		return memFile{&mu, b}, nil
	}}
	r, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = r.Close() })
	types := []string{contentProto, contentJSON, "text/plain"}

	f.Fuzz(func(t *testing.T, body []byte, ct uint8, gz bool) {
		before := r.Stats()
		mu.Lock()
		sizes := map[string]int{}
		for p, b := range files {
			sizes[p] = b.Len()
		}
		mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", types[int(ct)%len(types)])
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		resp := rec.Result()
		out, _ := io.ReadAll(resp.Body)
		var m proto.Message = &spb.Status{}
		switch resp.StatusCode {
		case http.StatusOK:
			m = &coltracepb.ExportTraceServiceResponse{}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
		if resp.Header.Get("Content-Type") == contentJSON {
			err = protojson.Unmarshal(out, m)
		} else {
			err = proto.Unmarshal(out, m)
		}
		if err != nil {
			t.Fatalf("status %d: answer does not decode: %v", resp.StatusCode, err)
		}
		after := r.Stats()
		if resp.StatusCode != http.StatusOK {
			if after.Spans != before.Spans {
				t.Fatal("a refused request was counted")
			}
			return
		}
		// What was appended reads back whole, with the spans counted.
		mu.Lock()
		var appended [][]byte
		for p, b := range files {
			if b.Len() > sizes[p] {
				appended = append(appended, append([]byte{}, b.Bytes()[sizes[p]:]...))
			}
		}
		mu.Unlock()
		var got int64
		for _, a := range appended {
			err := otlpingest.ReadSources([]otlpingest.Source{{Name: "appended", Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(a)), nil }}},
				otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
					if len(b.Issues) > 0 {
						t.Fatalf("accepted bytes read back with issues: %v", b.Issues)
					}
					got += int64(len(b.Spans))
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
		}
		if got != after.Spans-before.Spans {
			t.Fatalf("read back %d spans, counted %d", got, after.Spans-before.Spans)
		}
	})
}
