// Package otlpingest reads the OpenTelemetry traces and KV-event streams
// that vLLM writes with journey and step tracing on, and turns them into
// columnar tables (see docs/ingest.md and ../shared/vllm-tracing-schema.md).
//
// Reading is split into a pure part, decoding one OTLP message (JSON or
// protobuf) into Spans, and an I/O part that detects formats and
// compression, splits files into chunks, and decodes chunks in parallel
// while keeping their order, so that the output does not depend on
// scheduling.
package otlpingest

import (
	"encoding/hex"
	"strconv"
)

// ValueType is the type of an attribute value.
type ValueType uint8

const (
	ValEmpty ValueType = iota
	ValString
	ValInt
	ValDouble
	ValBool
	ValArray  // Str holds the OTLP JSON of the array
	ValKVList // Str holds the OTLP JSON of the list
	ValBytes  // Str holds the base64 text
)

var valueTypeNames = [...]string{"empty", "string", "int", "double", "bool", "array", "kvlist", "bytes"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "ValueType(" + strconv.Itoa(int(t)) + ")"
}

// Value is an OTLP AnyValue.
type Value struct {
	Type   ValueType
	Str    string
	Int    int64
	Double float64
	Bool   bool
}

// KeyValue is one attribute.
type KeyValue struct {
	Key   string
	Value Value
}

// Event is a span event.
type Event struct {
	TimeUnixNano uint64
	Name         string
	Attrs        []KeyValue
}

// TraceID and SpanID are OTLP identifiers; the zero value means absent.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

func (t TraceID) String() string { return hex.EncodeToString(t[:]) }
func (s SpanID) String() string  { return hex.EncodeToString(s[:]) }

// IsZero reports an absent id.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// Span is one span with what it needs of its resource and scope.
type Span struct {
	Service            string // resource attribute service.name
	Instance           string // resource attribute service.instance.id (which engine of a cluster); "" when absent
	Scope              string // instrumentation scope name
	TraceID            TraceID
	SpanID             SpanID
	ParentSpanID       SpanID
	Name               string
	Kind               int32
	StartUnixNano      uint64
	EndUnixNano        uint64
	Attrs              []KeyValue
	Events             []Event
	DroppedEventsCount uint32
	// Record is the 1-based line (JSON lines) or message number (proto) of
	// the span's ExportTraceServiceRequest in its file.
	Record int64
}

// Attr returns the value of a span attribute.
func (s *Span) Attr(key string) (Value, bool) { return lookup(s.Attrs, key) }

// Attr returns the value of an event attribute.
func (e *Event) Attr(key string) (Value, bool) { return lookup(e.Attrs, key) }

func lookup(kvs []KeyValue, key string) (Value, bool) {
	for i := range kvs {
		if kvs[i].Key == key {
			return kvs[i].Value, true
		}
	}
	return Value{}, false
}
