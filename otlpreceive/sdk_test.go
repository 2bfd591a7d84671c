package otlpreceive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportAll sends spans through an exporter in batches of 512, the batch
// span processor's default (OTEL_BSP_MAX_EXPORT_BATCH_SIZE), and shuts it
// down.
func exportAll(t *testing.T, exp sdktrace.SpanExporter, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < len(spans); i += 512 {
		require.NoError(t, exp.ExportSpans(ctx, spans[i:min(i+512, len(spans))]))
	}
	require.NoError(t, exp.Shutdown(ctx))
}

// TestSDKExportersGiveTheFileRoutesTables sends the simulator's trace to
// the receiver with the OpenTelemetry Go SDK's exporters (OTLP/HTTP
// protobuf and OTLP/gRPC, each plain and gzip-compressed), and with raw
// OTLP/HTTP JSON posts of its lines: every span arrives, and ingesting the
// receiver's files gives the tables that ingesting the trace file gives,
// row for row (apart from the file and record columns, and row order).
func TestSDKExportersGiveTheFileRoutesTables(t *testing.T) {
	spans := readSpans(t, simulatedTrace)
	require.Len(t, spans, 553)
	want, wantM := ingestTables(t, []string{simulatedTrace})
	require.Equal(t, int64(0), wantM.Issues.Total)

	ctx := context.Background()
	clients := []struct {
		name string
		send func(t *testing.T, s *server)
	}{
		{"http-protobuf", func(t *testing.T, s *server) {
			exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.url()))
			require.NoError(t, err)
			exportAll(t, exp, sdkSpans(t, spans))
		}},
		{"http-protobuf-gzip", func(t *testing.T, s *server) {
			exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.url()), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			require.NoError(t, err)
			exportAll(t, exp, sdkSpans(t, spans))
		}},
		{"grpc", func(t *testing.T, s *server) {
			exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.grpcAddr), otlptracegrpc.WithInsecure())
			require.NoError(t, err)
			exportAll(t, exp, sdkSpans(t, spans))
		}},
		{"grpc-gzip", func(t *testing.T, s *server) {
			exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.grpcAddr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithCompressor("gzip"))
			require.NoError(t, err)
			exportAll(t, exp, sdkSpans(t, spans))
		}},
		{"http-json", func(t *testing.T, s *server) {
			// The Go SDK sends protobuf only; OTLP/JSON clients post what
			// the collector's file exporter writes, one request per line.
			f, err := os.Open(simulatedTrace)
			require.NoError(t, err)
			defer f.Close()
			zr, err := gzip.NewReader(f)
			require.NoError(t, err)
			sc := bufio.NewScanner(zr)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				resp, err := http.Post(s.url(), contentJSON, bytes.NewReader(sc.Bytes()))
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
				require.Equal(t, contentJSON, resp.Header.Get("Content-Type"))
				require.Equal(t, "{}", string(body), "full success: partial_success unset")
			}
			require.NoError(t, sc.Err())
		}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, Config{})
			c.send(t, s)
			s.stop()
			st := s.r.Stats()
			require.Equal(t, int64(len(spans)), st.Spans, "every span received")
			require.Zero(t, st.ForeignSpans)
			require.Zero(t, st.BadRequests+st.Refused+st.WriteErrors)
			got, m := ingestTables(t, traceFiles(t, s.dir))
			require.Equal(t, int64(0), m.Issues.Total, "%+v", m.Issues.Details)
			var read int64
			for _, in := range m.Inputs {
				read += in.Spans
			}
			require.Equal(t, int64(len(spans)), read, "every span ingested")
			tablesEqual(t, want, got)
		})
	}
}
