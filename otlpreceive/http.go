package otlpreceive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/gzip"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TracesPath is the OTLP/HTTP path of trace exports.
const TracesPath = "/v1/traces"

// The OTLP/HTTP content types.
const (
	contentProto = "application/x-protobuf"
	contentJSON  = "application/json"
)

// errTooLarge is a body past the size bound, before or after decompression.
var errTooLarge = errors.New("too large")

// NewHTTPServer returns an http.Server serving the receiver's OTLP/HTTP
// endpoint on addr, with the header and body deadlines of its Config (a
// client slower than them is cut off). Serve it on a listener bounded to
// Config.MaxConns connections (Listen).
func (r *Receiver) NewHTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           r,
		ReadHeaderTimeout: r.cfg.HeaderTimeout,
		ReadTimeout:       r.cfg.HeaderTimeout + r.cfg.BodyTimeout,
		WriteTimeout:      r.cfg.HeaderTimeout + r.cfg.BodyTimeout + 5*time.Minute, // a request may wait for a slow disk
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// ServeHTTP is the OTLP/HTTP trace endpoint.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	enc := encProto
	if ct == contentJSON {
		enc = encJSON
	}
	if req.URL.Path != TracesPath {
		r.bad.Add(1)
		writeStatus(w, enc, http.StatusNotFound, codes.NotFound, fmt.Sprintf("%s: this receiver takes traces only, at POST %s", req.URL.Path, TracesPath), nil)
		return
	}
	if req.Method != http.MethodPost {
		r.bad.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		writeStatus(w, enc, http.StatusMethodNotAllowed, codes.Unimplemented, req.Method+" "+TracesPath+": only POST", nil)
		return
	}
	if ct != contentProto && ct != contentJSON {
		r.bad.Add(1)
		writeStatus(w, enc, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("Content-Type %q: OTLP/HTTP takes %s or %s", req.Header.Get("Content-Type"), contentProto, contentJSON), nil)
		return
	}
	ce := req.Header.Get("Content-Encoding")
	if ce != "" && ce != "gzip" && ce != "identity" {
		r.bad.Add(1)
		writeStatus(w, enc, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("Content-Encoding %q: OTLP/HTTP takes gzip or none", ce), nil)
		return
	}
	if req.ContentLength > r.cfg.MaxRequestBytes {
		r.bad.Add(1)
		writeStatus(w, enc, http.StatusRequestEntityTooLarge, codes.InvalidArgument, tooLargeMsg(req.ContentLength, r.cfg.MaxRequestBytes), nil)
		return
	}
	if !r.acquire() {
		o := r.busyOutcome()
		writeRetry(w, enc, http.StatusServiceUnavailable, codes.ResourceExhausted, o.msg, o.retryAfter)
		return
	}
	defer r.release()
	body, err := readBody(w, req, ce == "gzip", r.cfg.MaxRequestBytes)
	if err != nil {
		r.bad.Add(1)
		var ne net.Error
		switch {
		case errors.Is(err, errTooLarge):
			writeStatus(w, enc, http.StatusRequestEntityTooLarge, codes.InvalidArgument, tooLargeMsg(-1, r.cfg.MaxRequestBytes), nil)
		case errors.As(err, &ne) && ne.Timeout():
			writeStatus(w, enc, http.StatusRequestTimeout, codes.DeadlineExceeded, "reading the body: "+err.Error(), nil)
		default:
			writeStatus(w, enc, http.StatusBadRequest, codes.InvalidArgument, "reading the body: "+err.Error(), nil)
		}
		return
	}
	o := r.accept(body, enc)
	switch o.kind {
	case badData:
		writeStatus(w, enc, http.StatusBadRequest, codes.InvalidArgument, o.msg, &errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "resource_spans", Description: o.msg}}})
	case unavailable:
		writeRetry(w, enc, http.StatusServiceUnavailable, codes.Unavailable, o.msg, o.retryAfter)
	default:
		resp := &coltracepb.ExportTraceServiceResponse{}
		if o.msg != "" {
			resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{ErrorMessage: o.msg}
		}
		writeMessage(w, enc, http.StatusOK, resp)
	}
}

func tooLargeMsg(n, limit int64) string {
	if n >= 0 {
		return fmt.Sprintf("request body of %d bytes: the bound is %d bytes (calibrate receive --max-request-mib); send smaller batches", n, limit)
	}
	return fmt.Sprintf("request body past %d bytes, before or after decompression (calibrate receive --max-request-mib); send smaller batches", limit)
}

// readBody reads a request's body, decompressing gzip, reading at most
// limit bytes of it before and after decompression: past either, it
// returns errTooLarge after reading limit + 1 bytes.
func readBody(w http.ResponseWriter, req *http.Request, gz bool, limit int64) ([]byte, error) {
	var src io.Reader = http.MaxBytesReader(w, req.Body, limit)
	if gz {
		zr, err := gzip.NewReader(src)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, errTooLarge
			}
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	var b bytes.Buffer
	if !gz && req.ContentLength > 0 && req.ContentLength <= limit {
		b.Grow(int(req.ContentLength))
	}
	n, err := b.ReadFrom(io.LimitReader(src, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), n > limit:
		return nil, errTooLarge
	case err != nil && gz && !isNetErr(err):
		return nil, fmt.Errorf("gzip: %w", err)
	case err != nil:
		return nil, err
	}
	return b.Bytes(), nil
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// compactLine is a JSON body on one line, for a JSON lines file. A JSON
// text holds no raw newline inside its strings, so compacting it is
// enough.
func compactLine(body []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(body) + 1)
	if err := json.Compact(&b, body); err != nil {
		return nil, fmt.Errorf("OTLP JSON: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// writeMessage writes a protobuf message in the request's encoding.
func writeMessage(w http.ResponseWriter, enc encoding, code int, m proto.Message) {
	var b []byte
	var err error
	ct := contentProto
	if enc == encJSON {
		ct = contentJSON
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil { // a response of our own making always encodes
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeStatus writes a failure: a google.rpc.Status with the message and
// an optional detail.
func writeStatus(w http.ResponseWriter, enc encoding, code int, grpcCode codes.Code, msg string, detail proto.Message) {
	st := &spb.Status{Code: int32(grpcCode), Message: msg}
	if detail != nil {
		if a, err := anypb.New(detail); err == nil {
			st.Details = append(st.Details, a)
		}
	}
	writeMessage(w, enc, code, st)
}

// writeRetry writes a retryable failure with Retry-After (whole seconds,
// rounded up) and the same delay as a RetryInfo detail.
func writeRetry(w http.ResponseWriter, enc encoding, code int, grpcCode codes.Code, msg string, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(after.Seconds()))))
	writeStatus(w, enc, code, grpcCode, msg, &errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
}
