// Package otlpingest reads the OpenTelemetry traces and KV-event streams
// that vLLM writes with journey and step tracing on, and turns them into
// columnar tables (see docs/ingest.md and docs/vllm-tracing.md).
//
// Reading is split into a pure part, decoding one OTLP message (JSON or
// protobuf) into Spans, and an I/O part that detects formats and
// compression, splits files into chunks, and decodes chunks in parallel
// while keeping their order, so that the output does not depend on
// scheduling.
//
// The span model and its JSON encoding live in internal/otlpspan (the
// simulator's trace writer shares them without depending on this
// package), and vLLM's names in internal/tracevocab; the aliases below keep
// this package's API whole.
package otlpingest

import "github.com/blis-sim/blis/internal/otlpspan"

// The span model (see internal/otlpspan).
type (
	ValueType = otlpspan.ValueType
	Value     = otlpspan.Value
	KeyValue  = otlpspan.KeyValue
	Event     = otlpspan.Event
	TraceID   = otlpspan.TraceID
	SpanID    = otlpspan.SpanID
	Span      = otlpspan.Span
)

// Attribute value types.
const (
	ValEmpty  = otlpspan.ValEmpty
	ValString = otlpspan.ValString
	ValInt    = otlpspan.ValInt
	ValDouble = otlpspan.ValDouble
	ValBool   = otlpspan.ValBool
	ValArray  = otlpspan.ValArray
	ValKVList = otlpspan.ValKVList
	ValBytes  = otlpspan.ValBytes
)

// AppendJSON appends spans as one ExportTraceServiceRequest in the OTLP
// JSON mapping (see otlpspan.AppendJSON).
func AppendJSON(dst []byte, spans []Span) []byte { return otlpspan.AppendJSON(dst, spans) }
