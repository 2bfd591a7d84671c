package otlpreceive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// bytesCodec sends a request's bytes as they are, so that a test can send
// what no well-behaved client would.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }
func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// exportRaw calls Export with raw bytes and returns the response, the
// trailer and the error.
func exportRaw(t testing.TB, addr string, body []byte, opts ...grpc.CallOption) (*coltracepb.ExportTraceServiceResponse, metadata.MD, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	var resp coltracepb.ExportTraceServiceResponse
	var trailer metadata.MD
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts = append(opts, grpc.ForceCodecV2(bytesCodec{}), grpc.Trailer(&trailer))
	err = cc.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &body, &resp, opts...)
	return &resp, trailer, err
}

// retryDelay is the RetryInfo of a status, checked against the trailer
// the Python exporter reads.
func retryDelay(t testing.TB, err error, trailer metadata.MD) time.Duration {
	t.Helper()
	st := status.Convert(err)
	var d time.Duration = -1
	for _, det := range st.Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok {
			d = ri.RetryDelay.AsDuration()
		}
	}
	require.GreaterOrEqual(t, d, time.Duration(0), "a RetryInfo detail")
	vals := trailer.Get(retryInfoTrailer)
	require.Len(t, vals, 1, "the RetryInfo trailer")
	var ri errdetails.RetryInfo
	require.NoError(t, proto.Unmarshal([]byte(vals[0]), &ri))
	require.Equal(t, d, ri.RetryDelay.AsDuration())
	return d
}

// TestGRPCProtocol: the OTLP/gRPC rules, one case each.
func TestGRPCProtocol(t *testing.T) {
	spans := readSpans(t, simulatedTrace)
	good := protoRequest(t, spans[:4])
	s := startServer(t, Config{MaxRequestBytes: 64 << 10, MaxInflight: 1})

	resp, _, err := exportRaw(t, s.grpcAddr, good)
	require.NoError(t, err)
	require.Nil(t, resp.PartialSuccess)
	_, _, err = exportRaw(t, s.grpcAddr, good, grpc.UseCompressor(gzip.Name))
	require.NoError(t, err, "gzip")
	require.Equal(t, int64(8), s.r.Stats().Spans)

	_, _, err = exportRaw(t, s.grpcAddr, []byte{0xff, 0xff, 0xff, 0x01})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "bad data: %v", err)
	var br *errdetails.BadRequest
	for _, d := range status.Convert(err).Details() {
		br, _ = d.(*errdetails.BadRequest)
	}
	require.NotNil(t, br, "bad data carries a BadRequest")

	// Past the size bound: refused by gRPC itself, not retryable, before
	// or after decompression.
	var big []byte
	for n := 4; len(big) <= 64<<10; n *= 2 {
		big = protoRequest(t, spans[:min(n, len(spans))])
	}
	_, _, err = exportRaw(t, s.grpcAddr, big)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	_, _, err = exportRaw(t, s.grpcAddr, big, grpc.UseCompressor(gzip.Name))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "after decompression: %v", err)
	for _, d := range status.Convert(err).Details() {
		_, isRetry := d.(*errdetails.RetryInfo)
		require.False(t, isRetry, "a message too large is not retryable")
	}

	// Every decoding slot taken: RESOURCE_EXHAUSTED with RetryInfo, so
	// that clients retry it, and the message is not read.
	require.True(t, s.r.acquire())
	_, tr, err := exportRaw(t, s.grpcAddr, good)
	s.r.release()
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Equal(t, time.Second, retryDelay(t, err, tr))

	// Foreign spans: accepted, with a warning.
	foreign := append(spans[:0:0], spans[0])
	foreign[0].Name = "grpc.health.v1.Health/Check"
	resp, _, err = exportRaw(t, s.grpcAddr, protoRequest(t, foreign))
	require.NoError(t, err)
	require.NotNil(t, resp.PartialSuccess)
	require.Zero(t, resp.PartialSuccess.RejectedSpans)
	require.Contains(t, resp.PartialSuccess.ErrorMessage, "1 of 1 spans are not vLLM")

	// An empty request succeeds and writes nothing.
	resp, _, err = exportRaw(t, s.grpcAddr, nil)
	require.NoError(t, err)
	require.Nil(t, resp.PartialSuccess)

	st := s.r.Stats()
	require.Equal(t, int64(9), st.Spans)
	require.Equal(t, int64(3), st.BadRequests, "the malformed message and the two too large")
	require.Equal(t, int64(1), st.Refused)
}
