package otlpingest

import (
	"encoding/base64"
	"fmt"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// protoDecoder decodes binary ExportTraceServiceRequest messages, reusing
// one message value between calls. They are decoded as TracesData, which
// has the same fields (resource_spans, field 1) by the OTLP specification:
// the collector service's package links gRPC and its gateway into every
// binary that imports it.
type protoDecoder struct {
	msg tracepb.TracesData
}

// decode appends the spans of one message to out.
func (d *protoDecoder) decode(data []byte, record int64, out []Span) ([]Span, error) {
	d.msg.Reset()
	if err := proto.Unmarshal(data, &d.msg); err != nil {
		return out, err
	}
	for _, rs := range d.msg.ResourceSpans {
		service, instance := "", ""
		if rs.Resource != nil {
			for _, kv := range rs.Resource.Attributes {
				switch kv.Key {
				case tracevocab.ServiceName:
					service = kv.Value.GetStringValue()
				case tracevocab.ServiceInstanceID:
					instance = kv.Value.GetStringValue()
				}
			}
		}
		for _, ss := range rs.ScopeSpans {
			scope := ss.GetScope().GetName()
			for _, ps := range ss.Spans {
				sp := Span{Service: service, Instance: instance, Scope: scope, Name: ps.Name, Kind: int32(ps.Kind),
					StartUnixNano: ps.StartTimeUnixNano, EndUnixNano: ps.EndTimeUnixNano,
					DroppedEventsCount: ps.DroppedEventsCount, Record: record}
				if err := copyID(sp.TraceID[:], ps.TraceId, "trace_id"); err != nil {
					return out, err
				}
				if err := copyID(sp.SpanID[:], ps.SpanId, "span_id"); err != nil {
					return out, err
				}
				if err := copyID(sp.ParentSpanID[:], ps.ParentSpanId, "parent_span_id"); err != nil {
					return out, err
				}
				sp.Attrs = protoAttrs(ps.Attributes)
				for _, pe := range ps.Events {
					sp.Events = append(sp.Events, Event{TimeUnixNano: pe.TimeUnixNano, Name: pe.Name, Attrs: protoAttrs(pe.Attributes)})
				}
				out = append(out, sp)
			}
		}
	}
	return out, nil
}

func copyID(dst, src []byte, field string) error {
	if len(src) == 0 {
		return nil
	}
	if len(src) != len(dst) {
		return fmt.Errorf("%s has %d bytes, want %d", field, len(src), len(dst))
	}
	copy(dst, src)
	return nil
}

func protoAttrs(kvs []*commonpb.KeyValue) []KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = KeyValue{Key: kv.Key, Value: protoValue(kv.Value)}
	}
	return out
}

func protoValue(v *commonpb.AnyValue) Value {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return Value{Type: ValString, Str: x.StringValue}
	case *commonpb.AnyValue_IntValue:
		return Value{Type: ValInt, Int: x.IntValue}
	case *commonpb.AnyValue_DoubleValue:
		return Value{Type: ValDouble, Double: x.DoubleValue}
	case *commonpb.AnyValue_BoolValue:
		return Value{Type: ValBool, Bool: x.BoolValue}
	case *commonpb.AnyValue_BytesValue:
		return Value{Type: ValBytes, Str: base64.StdEncoding.EncodeToString(x.BytesValue)}
	case *commonpb.AnyValue_ArrayValue:
		b, _ := protojson.Marshal(x.ArrayValue)
		return Value{Type: ValArray, Str: string(b)}
	case *commonpb.AnyValue_KvlistValue:
		b, _ := protojson.Marshal(x.KvlistValue)
		return Value{Type: ValKVList, Str: string(b)}
	}
	return Value{}
}

// DecodeProto decodes one binary ExportTraceServiceRequest as the reader
// decodes a proto record: an error here is a record the ingest would count
// as malformed_record.
func DecodeProto(data []byte) ([]Span, error) {
	var d protoDecoder
	spans, err := d.decode(data, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("OTLP protobuf: %w", err)
	}
	return spans, nil
}
