package otlpreceive

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkReceive measures the receiver's throughput with the
// OpenTelemetry Go SDK's exporters as clients: 4 exporters at once, each
// sending the simulated trace (553 spans, 2.6 MB of OTLP JSON, 1.2 MB of
// protobuf) in batches of 512 spans, every request written and synced
// before it is answered. One op is one pass of every exporter over the
// trace. It reports spans/s and MB/s (protobuf bytes on disk).
//
// By default the receiver runs in the benchmark's process on a temporary
// directory. To measure the calibrate binary (its memory, say, with
// /usr/bin/time -v), start `calibrate receive -o DIR -q` and point the
// benchmark at it: BLIS_BENCH_RECEIVER_HTTP=127.0.0.1:4318 or
// BLIS_BENCH_RECEIVER_GRPC=127.0.0.1:4317.
func BenchmarkReceive(b *testing.B) {
	spans := sdkSpans(b, readSpans(b, simulatedTrace))
	for _, proto := range []string{"http", "grpc"} {
		b.Run(proto, func(b *testing.B) {
			httpAddr, grpcAddr := os.Getenv("BLIS_BENCH_RECEIVER_HTTP"), os.Getenv("BLIS_BENCH_RECEIVER_GRPC")
			var s *server
			if httpAddr == "" && grpcAddr == "" {
				s = startServer(b, Config{})
				httpAddr, grpcAddr = s.httpAddr, s.grpcAddr
			}
			addr := httpAddr
			if proto == "grpc" {
				addr = grpcAddr
			}
			if addr == "" {
				b.Skipf("no %s receiver given", proto)
			}
			ctx := context.Background()
			const clients = 4
			exps := make([]sdktrace.SpanExporter, clients)
			for i := range exps {
				var err error
				if proto == "http" {
					exps[i], err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+addr+TracesPath))
				} else {
					exps[i], err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			var bytesBefore int64
			if s != nil {
				bytesBefore = s.r.Stats().Bytes
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				for _, exp := range exps {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < len(spans); i += 512 {
							if err := exp.ExportSpans(ctx, spans[i:min(i+512, len(spans))]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			for _, exp := range exps {
				_ = exp.Shutdown(ctx)
			}
			b.ReportMetric(float64(b.N*clients*len(spans))/el, "spans/s")
			if s != nil {
				b.ReportMetric(float64(s.r.Stats().Bytes-bytesBefore)/1e6/el, "MB/s")
				if st := s.r.Stats(); st.Refused > 0 {
					b.ReportMetric(float64(st.Refused), "refused")
				}
			}
		})
	}
}
