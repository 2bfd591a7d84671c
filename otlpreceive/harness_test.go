package otlpreceive

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/blis-sim/blis/internal/testsupport/parquettest"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/otlpingest"
)

// The realistic trace the simulator writes (blis run --otlp-trace; see
// testdata/traces/README.md).
const simulatedTrace = "../testdata/traces/simulated_run.jsonl.gz"

// readSpans reads every span of trace files with the ingest's reader.
func readSpans(t testing.TB, files ...string) []otlpingest.Span {
	t.Helper()
	var out []otlpingest.Span
	err := otlpingest.ReadTraces(files, otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
		for _, sp := range b.Spans {
			sp.Attrs = append([]otlpingest.KeyValue{}, sp.Attrs...)
			ev := make([]otlpingest.Event, len(sp.Events))
			for i, e := range sp.Events {
				ev[i] = e
				ev[i].Attrs = append([]otlpingest.KeyValue{}, e.Attrs...)
			}
			sp.Events = ev
			out = append(out, sp)
		}
		require.Empty(t, b.Issues)
		return nil
	})
	require.NoError(t, err)
	return out
}

// sdkSpans turns spans into the OpenTelemetry Go SDK's read-only spans,
// ready for an exporter: what vLLM's process would hand its exporter.
func sdkSpans(t testing.TB, spans []otlpingest.Span) []sdktrace.ReadOnlySpan {
	t.Helper()
	resources := map[[2]string]*resource.Resource{}
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i := range spans {
		sp := &spans[i]
		key := [2]string{sp.Service, sp.Instance}
		res, ok := resources[key]
		if !ok {
			attrs := []attribute.KeyValue{attribute.String(tracevocab.ServiceName, sp.Service)}
			if sp.Instance != "" {
				attrs = append(attrs, attribute.String(tracevocab.ServiceInstanceID, sp.Instance))
			}
			res = resource.NewSchemaless(attrs...)
			resources[key] = res
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(sp.TraceID), SpanID: trace.SpanID(sp.SpanID), TraceFlags: trace.FlagsSampled})
		var parent trace.SpanContext
		if sp.ParentSpanID != (otlpingest.SpanID{}) {
			parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(sp.TraceID), SpanID: trace.SpanID(sp.ParentSpanID), TraceFlags: trace.FlagsSampled})
		}
		events := make([]sdktrace.Event, len(sp.Events))
		for j, e := range sp.Events {
			events[j] = sdktrace.Event{Name: e.Name, Time: time.Unix(0, int64(e.TimeUnixNano)), Attributes: sdkAttrs(t, e.Attrs)}
		}
		out[i] = tracetest.SpanStub{
			Name: sp.Name, SpanContext: sc, Parent: parent, SpanKind: trace.SpanKind(sp.Kind),
			StartTime: time.Unix(0, int64(sp.StartUnixNano)), EndTime: time.Unix(0, int64(sp.EndUnixNano)),
			Attributes: sdkAttrs(t, sp.Attrs), Events: events, DroppedEvents: int(sp.DroppedEventsCount),
			Resource: res, InstrumentationScope: instrumentation.Scope{Name: sp.Scope},
		}.Snapshot()
	}
	return out
}

func sdkAttrs(t testing.TB, kvs []otlpingest.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		switch kv.Value.Type {
		case otlpingest.ValString:
			out[i] = attribute.String(kv.Key, kv.Value.Str)
		case otlpingest.ValInt:
			out[i] = attribute.Int64(kv.Key, kv.Value.Int)
		case otlpingest.ValDouble:
			out[i] = attribute.Float64(kv.Key, kv.Value.Double)
		case otlpingest.ValBool:
			out[i] = attribute.Bool(kv.Key, kv.Value.Bool)
		default:
			t.Fatalf("attribute %s of type %v has no SDK form here", kv.Key, kv.Value.Type)
		}
	}
	return out
}

// server is a receiver serving HTTP and gRPC on free loopback ports.
type server struct {
	r        *Receiver
	dir      string
	httpAddr string
	grpcAddr string
	hs       *http.Server
	gs       *grpc.Server
	stopped  bool
}

func startServer(t testing.TB, cfg Config) *server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	r, err := New(cfg)
	require.NoError(t, err)
	hl, err := r.Listen("127.0.0.1:0")
	require.NoError(t, err)
	gl, err := r.Listen("127.0.0.1:0")
	require.NoError(t, err)
	s := &server{r: r, dir: cfg.Dir, httpAddr: hl.Addr().String(), grpcAddr: gl.Addr().String(), hs: r.NewHTTPServer(""), gs: r.NewGRPCServer()}
	go func() { _ = s.hs.Serve(hl) }()
	go func() { _ = s.gs.Serve(gl) }()
	t.Cleanup(s.stop)
	return s
}

// stop shuts the servers down gracefully and closes the receiver.
func (s *server) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.hs.Shutdown(ctx)
	s.gs.GracefulStop()
	_ = s.r.Close()
}

func (s *server) url() string { return "http://" + s.httpAddr + TracesPath }

// traceFiles lists the receiver's files in name order.
func traceFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.Name()[0] != '.' {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// ingestTables ingests files and returns every table's rows without the
// columns that say which file and record a row came from, sorted: what
// must not depend on how the spans reached the disk.
func ingestTables(t testing.TB, files []string) (map[string][]string, *otlpingest.Manifest) {
	t.Helper()
	dir := t.TempDir()
	m, err := otlpingest.Ingest(otlpingest.FileSources(files), otlpingest.Options{OutDir: dir, Workers: 1})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, name := range otlpingest.TableNames {
		_, rows := parquettest.Read(t, filepath.Join(dir, name+".parquet"))
		var lines []string
		for _, r := range rows {
			for _, c := range []string{"file", "record", "api_file", "api_record", "core_file", "core_record"} {
				delete(r, c)
			}
			b, err := json.Marshal(r) // map keys sorted
			require.NoError(t, err)
			lines = append(lines, string(b))
		}
		sort.Strings(lines)
		out[name] = lines
	}
	return out, m
}

// tablesEqual compares two ingests table by table, naming the first row
// that differs.
func tablesEqual(t testing.TB, want, got map[string][]string) {
	t.Helper()
	for _, name := range otlpingest.TableNames {
		require.Equal(t, len(want[name]), len(got[name]), "%s: row count", name)
		for i := range want[name] {
			if want[name][i] != got[name][i] {
				require.Equal(t, want[name][i], got[name][i], "%s: first differing row", name)
			}
		}
	}
}

// protoRequest encodes spans as one binary ExportTraceServiceRequest, one
// resourceSpans per span (what a client may send; the ingest reads each
// span's resource and scope from its own).
func protoRequest(t testing.TB, spans []otlpingest.Span) []byte {
	t.Helper()
	req := &coltracepb.ExportTraceServiceRequest{}
	for i := range spans {
		sp := &spans[i]
		res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: tracevocab.ServiceName, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: sp.Service}}}}}
		if sp.Instance != "" {
			res.Attributes = append(res.Attributes, &commonpb.KeyValue{Key: tracevocab.ServiceInstanceID, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: sp.Instance}}})
		}
		ps := &tracepb.Span{TraceId: append([]byte{}, sp.TraceID[:]...), SpanId: append([]byte{}, sp.SpanID[:]...), Name: sp.Name,
			Kind: tracepb.Span_SpanKind(sp.Kind), StartTimeUnixNano: sp.StartUnixNano, EndTimeUnixNano: sp.EndUnixNano,
			Attributes: protoKVs(sp.Attrs), DroppedEventsCount: sp.DroppedEventsCount}
		if sp.ParentSpanID != (otlpingest.SpanID{}) {
			ps.ParentSpanId = append([]byte{}, sp.ParentSpanID[:]...)
		}
		for _, e := range sp.Events {
			ps.Events = append(ps.Events, &tracepb.Span_Event{TimeUnixNano: e.TimeUnixNano, Name: e.Name, Attributes: protoKVs(e.Attrs)})
		}
		req.ResourceSpans = append(req.ResourceSpans, &tracepb.ResourceSpans{Resource: res,
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: sp.Scope}, Spans: []*tracepb.Span{ps}}}})
	}
	b, err := proto.Marshal(req)
	require.NoError(t, err)
	return b
}

func protoKVs(kvs []otlpingest.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		v := &commonpb.AnyValue{}
		switch kv.Value.Type {
		case otlpingest.ValString:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: kv.Value.Str}
		case otlpingest.ValInt:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: kv.Value.Int}
		case otlpingest.ValDouble:
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: kv.Value.Double}
		case otlpingest.ValBool:
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: kv.Value.Bool}
		}
		out[i] = &commonpb.KeyValue{Key: kv.Key, Value: v}
	}
	return out
}

// post sends a body and returns the status, the headers and the body of
// the answer.
func post(t testing.TB, url, contentType string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// decodeStatus decodes a failure's google.rpc.Status in its content type.
func decodeStatus(t testing.TB, h http.Header, body []byte) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	if h.Get("Content-Type") == contentJSON {
		require.NoError(t, protojson.Unmarshal(body, st), "%s", body)
	} else {
		require.Equal(t, contentProto, h.Get("Content-Type"))
		require.NoError(t, proto.Unmarshal(body, st))
	}
	return st
}

// spanIDs are the span ids of the ingested journey and step rows' spans.
func ingestedSpanIDs(t testing.TB, files []string) map[otlpingest.SpanID]bool {
	t.Helper()
	out := map[otlpingest.SpanID]bool{}
	if len(files) == 0 {
		return out
	}
	for _, sp := range readSpansLoose(t, files...) {
		out[sp.SpanID] = true
	}
	return out
}

// readSpansLoose reads spans, tolerating damaged records (counted by the
// reader), as the ingest does.
func readSpansLoose(t testing.TB, files ...string) []otlpingest.Span {
	t.Helper()
	var out []otlpingest.Span
	require.NoError(t, otlpingest.ReadTraces(files, otlpingest.ReadOptions{Workers: 1}, func(b *otlpingest.Batch) error {
		for _, sp := range b.Spans {
			out = append(out, otlpingest.Span{SpanID: sp.SpanID, TraceID: sp.TraceID, Name: sp.Name})
		}
		return nil
	}))
	return out
}
