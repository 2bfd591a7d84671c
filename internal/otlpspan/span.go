// Package otlpspan is the span model shared by the tools that read and
// write OpenTelemetry traces (otlpingest decodes into it, sim/simtrace
// writes from it): spans with their resource and scope folded in,
// attributes as typed values, and AppendJSON, the OTLP JSON encoding the
// Collector's file exporter writes. The names vLLM gives its spans,
// events and attributes are in internal/tracevocab.
package otlpspan

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
func (s *Span) Attr(key string) (Value, bool) { return Lookup(s.Attrs, key) }

// Attr returns the value of an event attribute.
func (e *Event) Attr(key string) (Value, bool) { return Lookup(e.Attrs, key) }

// Lookup returns the value of the first attribute named key.
func Lookup(kvs []KeyValue, key string) (Value, bool) {
	for i := range kvs {
		if kvs[i].Key == key {
			return kvs[i].Value, true
		}
	}
	return Value{}, false
}
