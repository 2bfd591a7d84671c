package otlpreceive

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/blis-sim/blis/otlpingest"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestHTTPProtocol: each OTLP/HTTP rule of the specification, one case
// each: paths, methods, content types, encodings, sizes, bad data, empty
// requests, and the answer's encoding.
func TestHTTPProtocol(t *testing.T) {
	spans := readSpans(t, simulatedTrace)
	good := protoRequest(t, spans[:4])
	badID := append([]byte{}, good...)
	// A trace id of 3 bytes: decodes as protobuf, but the ingest refuses it.
	shortID := protoRequest(t, spans[:1])
	{
		var req coltracepb.ExportTraceServiceRequest
		require.NoError(t, proto.Unmarshal(shortID, &req))
		req.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId = []byte{1, 2, 3}
		var err error
		shortID, err = proto.Marshal(&req)
		require.NoError(t, err)
	}
	badID[0] = 0xff // not a valid first field tag... followed by garbage
	badID = append([]byte{0xff, 0xff, 0xff}, badID...)
	jsonLine := otlpingest.AppendJSON(nil, spans[:4])
	pretty := bytes.ReplaceAll(jsonLine, []byte(`,"`), []byte(",\n  \""))
	foreign := append([]otlpingest.Span{}, spans[:2]...)
	foreign[1].Name = "GET /health"
	foreign[1].Scope = "opentelemetry.instrumentation.fastapi"
	truncGz := gzipped(t, good)
	truncGz = truncGz[:len(truncGz)/2]

	cases := []struct {
		name        string
		method      string
		path        string
		ct          string
		body        []byte
		headers     []string
		status      int
		code        codes.Code // of the failure's Status
		msg         string     // in the Status message or the warning
		wantSpans   int64      // stored by this request
		wantWarning bool
	}{
		{name: "protobuf", ct: contentProto, body: good, status: 200, wantSpans: 4},
		{name: "protobuf gzip", ct: contentProto, body: gzipped(t, good), headers: []string{"Content-Encoding", "gzip"}, status: 200, wantSpans: 4},
		{name: "json", ct: contentJSON, body: jsonLine, status: 200, wantSpans: 4},
		{name: "json over several lines", ct: contentJSON, body: pretty, status: 200, wantSpans: 4},
		{name: "json with charset", ct: contentJSON + "; charset=utf-8", body: jsonLine, status: 200, wantSpans: 4},
		{name: "json gzip", ct: contentJSON, body: gzipped(t, jsonLine), headers: []string{"Content-Encoding", "gzip"}, status: 200, wantSpans: 4},
		{name: "identity encoding", ct: contentProto, body: good, headers: []string{"Content-Encoding", "identity"}, status: 200, wantSpans: 4},
		{name: "empty protobuf", ct: contentProto, body: nil, status: 200},
		{name: "empty json", ct: contentJSON, body: []byte(`{}`), status: 200},
		{name: "json without spans", ct: contentJSON, body: []byte(`{"resourceSpans":[{"scopeSpans":[]}]}`), status: 200},
		{name: "foreign spans", ct: contentProto, body: protoRequest(t, foreign), status: 200, wantSpans: 2, wantWarning: true, msg: `1 of 2 spans are not vLLM journey or step tracing spans ("GET /health" (scope "opentelemetry.instrumentation.fastapi"))`},
		{name: "metrics path", path: "/v1/metrics", ct: contentProto, body: good, status: 404, code: codes.NotFound, msg: "traces only"},
		{name: "GET", method: http.MethodGet, ct: contentProto, status: 405, code: codes.Unimplemented, msg: "only POST"},
		{name: "text/plain", ct: "text/plain", body: good, status: 415, code: codes.InvalidArgument, msg: `Content-Type "text/plain"`},
		{name: "no content type", ct: "", body: good, status: 415, code: codes.InvalidArgument, msg: "OTLP/HTTP takes"},
		{name: "protobuf under another name", ct: "application/protobuf", body: good, status: 415, code: codes.InvalidArgument},
		{name: "brotli", ct: contentProto, body: good, headers: []string{"Content-Encoding", "br"}, status: 415, code: codes.InvalidArgument, msg: `Content-Encoding "br"`},
		{name: "malformed protobuf", ct: contentProto, body: badID, status: 400, code: codes.InvalidArgument, msg: "OTLP protobuf"},
		{name: "short trace id", ct: contentProto, body: shortID, status: 400, code: codes.InvalidArgument, msg: "trace_id has 3 bytes, want 16"},
		{name: "malformed json", ct: contentJSON, body: []byte(`{"resourceSpans":[{`), status: 400, code: codes.InvalidArgument, msg: "OTLP JSON"},
		{name: "json array", ct: contentJSON, body: []byte(`[1,2]`), status: 400, code: codes.InvalidArgument},
		{name: "protobuf sent as json", ct: contentJSON, body: good, status: 400, code: codes.InvalidArgument},
		{name: "json sent as protobuf", ct: contentProto, body: jsonLine, status: 400, code: codes.InvalidArgument},
		{name: "truncated gzip", ct: contentProto, body: truncGz, headers: []string{"Content-Encoding", "gzip"}, status: 400, code: codes.InvalidArgument, msg: "gzip"},
		{name: "gzip header on a plain body", ct: contentProto, body: good, headers: []string{"Content-Encoding", "gzip"}, status: 400, code: codes.InvalidArgument, msg: "gzip"},
	}
	s := startServer(t, Config{})
	var stored int64
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			path := c.path
			if path == "" {
				path = TracesPath
			}
			req, err := http.NewRequest(method, "http://"+s.httpAddr+path, bytes.NewReader(c.body))
			require.NoError(t, err)
			if c.ct != "" {
				req.Header.Set("Content-Type", c.ct)
			}
			for i := 0; i+1 < len(c.headers); i += 2 {
				req.Header.Set(c.headers[i], c.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, c.status, resp.StatusCode, "%q", body)
			wantCT := contentProto
			if strings.HasPrefix(c.ct, contentJSON) {
				wantCT = contentJSON
			}
			require.Equal(t, wantCT, resp.Header.Get("Content-Type"), "the answer is in the request's encoding")
			if c.status == 200 {
				var out coltracepb.ExportTraceServiceResponse
				if wantCT == contentJSON {
					require.NoError(t, protojson.Unmarshal(body, &out))
				} else {
					require.NoError(t, proto.Unmarshal(body, &out))
				}
				if c.wantWarning {
					require.NotNil(t, out.PartialSuccess)
					assert.Zero(t, out.PartialSuccess.RejectedSpans, "a warning rejects nothing")
					assert.Contains(t, out.PartialSuccess.ErrorMessage, c.msg)
				} else {
					assert.Nil(t, out.PartialSuccess, "full success leaves partial_success unset")
				}
				stored += c.wantSpans
				require.Equal(t, stored, s.r.Stats().Spans)
				return
			}
			st := decodeStatus(t, resp.Header, body)
			assert.Equal(t, int32(c.code), st.Code)
			assert.Contains(t, st.Message, c.msg)
			if c.status == 405 {
				assert.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
			}
			if c.status == 400 && c.code == codes.InvalidArgument && st.Details != nil {
				var br errdetails.BadRequest
				require.NoError(t, st.Details[0].UnmarshalTo(&br), "bad data carries a BadRequest")
			}
			require.Equal(t, stored, s.r.Stats().Spans, "a refused request stores nothing")
		})
	}
	s.stop()
	_, m := ingestTables(t, traceFiles(t, s.dir))
	var read int64
	for _, in := range m.Inputs {
		read += in.Spans
	}
	require.Equal(t, stored, read, "the files hold exactly the accepted requests")
	// The same four spans were sent eight times: the ingest keeps the first
	// and counts the rest; the foreign span is its one unknown_span.
	kinds := map[otlpingest.IssueKind]int64{}
	for _, c := range m.Issues.ByKind {
		kinds[c.Kind] = c.Count
	}
	require.Equal(t, map[otlpingest.IssueKind]int64{otlpingest.IssueUnknownSpan: 1, otlpingest.IssueDuplicateSpan: stored - 4 - 1}, kinds)
}

// TestHTTPSizeBounds: a body past --max-request-mib is 413 whether its
// length is announced, streamed without one, or reached only after
// decompression (a gzip bomb), and reading it allocates about the bound,
// not the body.
func TestHTTPSizeBounds(t *testing.T) {
	const limit = 256 << 10
	s := startServer(t, Config{MaxRequestBytes: limit})
	spans := readSpans(t, simulatedTrace)
	var big []otlpingest.Span
	for len(protoRequest(t, big)) <= limit {
		big = append(big, spans[len(big)%len(spans)])
	}
	body := protoRequest(t, big)

	code, h, b := post(t, s.url(), contentProto, body)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	st := decodeStatus(t, h, b)
	require.Contains(t, st.Message, "request body of "+strconv.Itoa(len(body))+" bytes: the bound is 262144 bytes")

	// Streamed, no Content-Length.
	req, err := http.NewRequest(http.MethodPost, s.url(), io.MultiReader(bytes.NewReader(body)))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", contentProto)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// A gzip bomb: 64 MiB of zeros in ~64 KiB.
	bomb := gzipped(t, make([]byte, 64<<20))
	require.Less(t, len(bomb), limit)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, h, b = post(t, s.url(), contentProto, bomb, "Content-Encoding", "gzip")
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Contains(t, decodeStatus(t, h, b).Message, "before or after decompression")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16*limit+8<<20), "decompression stops at the bound")

	// At the bound exactly, it is taken.
	var fit []otlpingest.Span
	for len(protoRequest(t, append(fit, spans[len(fit)]))) <= limit {
		fit = append(fit, spans[len(fit)])
	}
	code, _, b = post(t, s.url(), contentProto, protoRequest(t, fit))
	require.Equal(t, http.StatusOK, code, "%s", b)
	require.Equal(t, int64(len(fit)), s.r.Stats().Spans)
	require.Equal(t, int64(3), s.r.Stats().BadRequests)
}
