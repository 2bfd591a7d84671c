package otlpspan

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// AppendJSON appends spans as one ExportTraceServiceRequest in the OTLP
// JSON mapping the Collector's file exporter writes: hex ids, 64-bit
// integers as decimal strings, enums as integers. Consecutive spans with
// the same resource (service and instance) and scope share a
// resourceSpans/scopeSpans entry, and span order is kept, so otlpingest.DecodeJSON
// gives the spans back. The resource attribute service.instance.id is
// written only for a non-empty Instance. No newline is appended; a
// JSON-lines writer adds one per request.
func AppendJSON(dst []byte, spans []Span) []byte {
	dst = append(dst, `{"resourceSpans":[`...)
	for i := 0; i < len(spans); {
		j := i
		for j < len(spans) && spans[j].Service == spans[i].Service && spans[j].Instance == spans[i].Instance {
			j++
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"resource":{"attributes":[{"key":"`+tracevocab.ServiceName+`","value":{"stringValue":`...)
		dst = appendJSONString(dst, spans[i].Service)
		if spans[i].Instance != "" {
			dst = append(dst, `}},{"key":"`+tracevocab.ServiceInstanceID+`","value":{"stringValue":`...)
			dst = appendJSONString(dst, spans[i].Instance)
		}
		dst = append(dst, `}}]},"scopeSpans":[`...)
		for k := i; k < j; {
			l := k
			for l < j && spans[l].Scope == spans[k].Scope {
				l++
			}
			if k > i {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"scope":{"name":`...)
			dst = appendJSONString(dst, spans[k].Scope)
			dst = append(dst, `},"spans":[`...)
			for m := k; m < l; m++ {
				if m > k {
					dst = append(dst, ',')
				}
				dst = appendSpanJSON(dst, &spans[m])
			}
			dst = append(dst, "]}"...)
			k = l
		}
		dst = append(dst, "]}"...)
		i = j
	}
	return append(dst, "]}"...)
}

func appendSpanJSON(dst []byte, sp *Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = hex.AppendEncode(dst, sp.TraceID[:])
	dst = append(dst, `","spanId":"`...)
	dst = hex.AppendEncode(dst, sp.SpanID[:])
	dst = append(dst, '"')
	if !sp.ParentSpanID.IsZero() {
		dst = append(dst, `,"parentSpanId":"`...)
		dst = hex.AppendEncode(dst, sp.ParentSpanID[:])
		dst = append(dst, '"')
	}
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, sp.Name)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(sp.Kind), 10)
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, sp.StartUnixNano, 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, sp.EndUnixNano, 10)
	dst = append(dst, `","attributes":`...)
	dst = appendAttrsJSON(dst, sp.Attrs)
	dst = append(dst, `,"events":[`...)
	for i := range sp.Events {
		if i > 0 {
			dst = append(dst, ',')
		}
		ev := &sp.Events[i]
		dst = append(dst, `{"timeUnixNano":"`...)
		dst = strconv.AppendUint(dst, ev.TimeUnixNano, 10)
		dst = append(dst, `","name":`...)
		dst = appendJSONString(dst, ev.Name)
		dst = append(dst, `,"attributes":`...)
		dst = appendAttrsJSON(dst, ev.Attrs)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if sp.DroppedEventsCount > 0 {
		dst = append(dst, `,"droppedEventsCount":`...)
		dst = strconv.AppendUint(dst, uint64(sp.DroppedEventsCount), 10)
	}
	return append(dst, `,"status":{}}`...)
}

func appendAttrsJSON(dst []byte, kvs []KeyValue) []byte {
	dst = append(dst, '[')
	for i, kv := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = appendJSONString(dst, kv.Key)
		dst = append(dst, `,"value":{`...)
		v := kv.Value
		switch v.Type {
		case ValString:
			dst = append(dst, `"stringValue":`...)
			dst = appendJSONString(dst, v.Str)
		case ValInt:
			dst = append(dst, `"intValue":"`...)
			dst = strconv.AppendInt(dst, v.Int, 10)
			dst = append(dst, '"')
		case ValDouble:
			dst = append(dst, `"doubleValue":`...)
			dst = appendJSONDouble(dst, v.Double)
		case ValBool:
			dst = append(dst, `"boolValue":`...)
			dst = strconv.AppendBool(dst, v.Bool)
		case ValArray:
			dst = append(dst, `"arrayValue":`...)
			dst = append(dst, v.Str...)
		case ValKVList:
			dst = append(dst, `"kvlistValue":`...)
			dst = append(dst, v.Str...)
		case ValBytes:
			dst = append(dst, `"bytesValue":`...)
			dst = appendJSONString(dst, v.Str)
		}
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}

// appendJSONDouble writes the shortest exact decimal; the non-finite values
// are strings, as the protobuf JSON mapping requires.
func appendJSONDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s) // rare: escapes and non-ASCII
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
