package otlpreceive

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/netutil"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcenc "google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // OTLP servers must take gzip
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// retryInfoTrailer is the trailer in which the OpenTelemetry Python SDK's
// gRPC exporter looks for a RetryInfo (its exporter.py); Go's and the
// collector's read the status details.
const retryInfoTrailer = "google.rpc.retryinfo-bin"

// rawRequest is an Export request's undecoded bytes: the service writes
// them as they came, after the ingest's decoder has checked them.
type rawRequest struct{ b []byte }

// rawCodec hands the service its request's bytes and encodes responses
// as protobuf. gRPC applies the message size bound (after decompression)
// before the codec sees the message.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("otlpreceive: cannot encode %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch x := v.(type) {
	case *rawRequest:
		x.b = data.Materialize()
		return nil
	case proto.Message:
		return proto.Unmarshal(data.Materialize(), x)
	}
	return fmt.Errorf("otlpreceive: cannot decode into %T", v)
}

var _ grpcenc.CodecV2 = rawCodec{}

// traceServiceDesc is the OTLP TraceService with an Export handler of our
// own: it takes a decoding slot before it reads the message, so that a
// request refused for want of one is never read into memory.
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*Receiver).export(ctx, dec)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// NewGRPCServer returns a gRPC server of the receiver's TraceService, with
// its message size bound (larger messages are refused by gRPC with
// RESOURCE_EXHAUSTED, which clients do not retry) and handshake deadline.
// Serve it on a listener bounded to Config.MaxConns connections (Listen).
func (r *Receiver) NewGRPCServer() *grpc.Server {
	s := grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(int(r.cfg.MaxRequestBytes)),
		grpc.MaxConcurrentStreams(uint32(4*r.cfg.MaxInflight)),
		grpc.ConnectionTimeout(r.cfg.HeaderTimeout),
	)
	s.RegisterService(&traceServiceDesc, r)
	return s
}

func (r *Receiver) export(ctx context.Context, dec func(any) error) (any, error) {
	if !r.acquire() {
		o := r.busyOutcome()
		return nil, retryStatus(ctx, codes.ResourceExhausted, o.msg, o.retryAfter)
	}
	defer r.release()
	var req rawRequest
	if err := dec(&req); err != nil {
		// gRPC has answered already: RESOURCE_EXHAUSTED for a message past
		// the size bound, or the error of a stream that broke.
		r.bad.Add(1)
		return nil, err
	}
	o := r.accept(req.b, encProto)
	switch o.kind {
	case badData:
		st, err := status.New(codes.InvalidArgument, o.msg).WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "resource_spans", Description: o.msg}}})
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, o.msg)
		}
		return nil, st.Err()
	case unavailable:
		return nil, retryStatus(ctx, codes.Unavailable, o.msg, o.retryAfter)
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if o.msg != "" {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{ErrorMessage: o.msg}
	}
	return resp, nil
}

// retryStatus is a retryable failure: the code with a RetryInfo detail,
// and the same RetryInfo in the trailer the Python exporter reads.
func retryStatus(ctx context.Context, code codes.Code, msg string, after time.Duration) error {
	ri := &errdetails.RetryInfo{RetryDelay: durationpb.New(after)}
	if b, err := proto.Marshal(ri); err == nil {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(retryInfoTrailer, string(b)))
	}
	st, err := status.New(code, msg).WithDetails(ri)
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// Listen listens on a TCP address, accepting at most Config.MaxConns
// connections at once (more wait to be accepted).
func (r *Receiver) Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(l, r.cfg.MaxConns), nil
}
