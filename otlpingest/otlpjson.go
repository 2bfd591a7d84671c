package otlpingest

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// jsonDecoder decodes ExportTraceServiceRequest messages in the OTLP JSON
// mapping: lowerCamelCase keys (snake_case accepted too), hex ids (base64
// accepted), 64-bit integers as strings or numbers, enums as integers or
// names, unknown fields ignored. One decoder serves one goroutine.
type jsonDecoder struct {
	s      scanner
	intern map[string]string
	// Attributes and events are decoded into scratch space, then copied
	// into large slabs that many spans share: one allocation per few
	// thousand values instead of a growing slice per event.
	kvTmp  []KeyValue
	evTmp  []Event
	kvSlab []KeyValue
	evSlab []Event
	// lastKeys[i] is the key last decoded at position i of an attribute list.
	lastKeys []string
	lastVals []string // likewise the string value last decoded there
	recycle  bool     // slabs come from the pools and are listed in used
	slow     bool     // no fast paths: tests check that both ways agree
	used     slabs    // the pooled slabs in use since the last takeSlabs
}

const slabLen = 4096

// slabs recycles full-size slabs when the spans that used them are no
// longer needed (ReadOptions.recycle): Ingest turns spans into rows as
// soon as a batch arrives, and fresh slabs for every chunk would be most
// of what the decoder allocates.
type slabs struct {
	kv [][]KeyValue
	ev [][]Event
}

var (
	kvSlabPool = sync.Pool{New: func() any { return make([]KeyValue, 0, slabLen) }}
	evSlabPool = sync.Pool{New: func() any { return make([]Event, 0, slabLen) }}
)

// release hands the slabs back for reuse; their spans must be dead.
func (s *slabs) release() {
	for _, b := range s.kv {
		kvSlabPool.Put(b[:0]) //lint:ignore SA6002 a slab's slice header boxed per Put is small beside the slab it keeps alive
	}
	for _, b := range s.ev {
		evSlabPool.Put(b[:0]) //lint:ignore SA6002 as above
	}
	s.kv, s.ev = nil, nil
}

// slab copies src to the end of *slab (a new slab when it is full) and
// returns the copy, capped so that later appends never touch it. New
// full-size slabs come from pool when one is given and are listed in used.
func slab[T any](slab *[]T, src []T, pool *sync.Pool, used *[][]T) []T {
	if len(src) == 0 {
		return nil
	}
	if cap(*slab)-len(*slab) < len(src) {
		if pool != nil && len(src) <= slabLen {
			*slab = pool.Get().([]T)[:0]
			*used = append(*used, *slab)
		} else {
			*slab = make([]T, 0, max(slabLen, len(src)))
		}
	}
	n := len(*slab)
	*slab = append(*slab, src...)
	return (*slab)[n:len(*slab):len(*slab)]
}

// takeSlabs ends the decoder's use of its slabs (when they are pooled) and
// returns them, to be released once their spans are dead.
func (d *jsonDecoder) takeSlabs() slabs {
	out := d.used
	d.used = slabs{}
	d.kvSlab, d.evSlab = nil, nil
	return out
}

func (d *jsonDecoder) kvPool() *sync.Pool {
	if d.recycle {
		return &kvSlabPool
	}
	return nil
}

func (d *jsonDecoder) evPool() *sync.Pool {
	if d.recycle {
		return &evSlabPool
	}
	return nil
}

func newJSONDecoder() *jsonDecoder {
	return &jsonDecoder{intern: make(map[string]string, 1024)}
}

// maxInterned bounds the intern table: repeated names and short enum-like
// values are shared, unique ids are not worth keeping.
const maxInterned = 8192

func (d *jsonDecoder) str(b []byte) string {
	if len(b) > 40 {
		return string(b)
	}
	if v, ok := d.intern[string(b)]; ok {
		return v
	}
	v := string(b)
	if len(d.intern) < maxInterned {
		d.intern[v] = v
	}
	return v
}

// key interns an attribute key. Events of one kind list their keys in the
// same order, so the key last seen at this position is usually the one:
// a byte comparison instead of a map lookup.
func (d *jsonDecoder) key(pos int, b []byte) string {
	if pos < len(d.lastKeys) && d.lastKeys[pos] == string(b) {
		return d.lastKeys[pos]
	}
	k := d.str(b)
	if pos < 64 {
		for len(d.lastKeys) <= pos {
			d.lastKeys = append(d.lastKeys, "")
		}
		d.lastKeys[pos] = k
	}
	return k
}

// val interns a string value like key: the value last seen at this
// position of an attribute list (a phase, a route, a model) is usually
// the one.
func (d *jsonDecoder) val(pos int, b []byte) string {
	if pos < len(d.lastVals) && d.lastVals[pos] == string(b) {
		return d.lastVals[pos]
	}
	v := d.str(b)
	if pos < 64 {
		for len(d.lastVals) <= pos {
			d.lastVals = append(d.lastVals, "")
		}
		d.lastVals[pos] = v
	}
	return v
}

// decode appends the spans of one ExportTraceServiceRequest to out. On
// error, out is returned as it was.
func (d *jsonDecoder) decode(data []byte, record int64, out []Span) ([]Span, error) {
	n0 := len(out)
	s := &d.s
	s.reset(data)
	if s.peek() == 'n' {
		s.fail("want an object, got null")
	}
	s.fields(func(k []byte) {
		switch string(k) {
		case "resourceSpans", "resource_spans":
			s.items(func() { out = d.resourceSpans(out, record) })
		default:
			s.skip()
		}
	})
	s.end()
	if s.err != nil {
		return out[:n0], s.err
	}
	return out, nil
}

// resourceSpans and scopeSpans fill in service, instance and scope after
// the whole object is read, because JSON does not order its keys.
func (d *jsonDecoder) resourceSpans(out []Span, record int64) []Span {
	s := &d.s
	start, service, instance := len(out), "", ""
	s.fields(func(k []byte) {
		switch string(k) {
		case "resource":
			s.fields(func(k []byte) {
				if string(k) != "attributes" {
					s.skip()
					return
				}
				for _, kv := range d.attributes(nil) {
					if kv.Value.Type != ValString {
						continue
					}
					switch kv.Key {
					case tracevocab.ServiceName:
						service = kv.Value.Str
					case tracevocab.ServiceInstanceID:
						instance = kv.Value.Str
					}
				}
			})
		case "scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans":
			s.items(func() { out = d.scopeSpans(out, record) })
		default:
			s.skip()
		}
	})
	for i := start; i < len(out); i++ {
		out[i].Service, out[i].Instance = service, instance
	}
	return out
}

func (d *jsonDecoder) scopeSpans(out []Span, record int64) []Span {
	s := &d.s
	start, scope := len(out), ""
	s.fields(func(k []byte) {
		switch string(k) {
		case "scope", "instrumentationLibrary", "instrumentation_library":
			s.fields(func(k []byte) {
				if string(k) == "name" {
					scope = d.str(s.str())
				} else {
					s.skip()
				}
			})
		case "spans":
			s.items(func() {
				out = append(out, Span{Record: record})
				d.span(&out[len(out)-1])
			})
		default:
			s.skip()
		}
	})
	for i := start; i < len(out); i++ {
		out[i].Scope = scope
	}
	return out
}

func (d *jsonDecoder) span(sp *Span) {
	s := &d.s
	s.fields(func(k []byte) {
		switch string(k) {
		case "traceId", "trace_id":
			d.id(sp.TraceID[:], "traceId")
		case "spanId", "span_id":
			d.id(sp.SpanID[:], "spanId")
		case "parentSpanId", "parent_span_id":
			d.id(sp.ParentSpanID[:], "parentSpanId")
		case "name":
			sp.Name = d.str(s.str())
		case "kind":
			sp.Kind = d.spanKind()
		case "startTimeUnixNano", "start_time_unix_nano":
			sp.StartUnixNano = s.uint64()
		case "endTimeUnixNano", "end_time_unix_nano":
			sp.EndUnixNano = s.uint64()
		case "attributes":
			sp.Attrs = d.attributes(sp.Attrs)
		case "events":
			evs := d.evTmp[:0]
			s.items(func() {
				evs = append(evs, Event{})
				d.event(&evs[len(evs)-1])
			})
			d.evTmp = evs
			if sp.Events == nil {
				sp.Events = slab(&d.evSlab, evs, d.evPool(), &d.used.ev)
			} else { // a repeated "events" key appends
				sp.Events = append(sp.Events, evs...)
			}
			clear(evs) // drop references held by the scratch space
		case "droppedEventsCount", "dropped_events_count":
			v := s.uint64()
			if v > 1<<32-1 {
				s.fail("droppedEventsCount out of range")
			}
			sp.DroppedEventsCount = uint32(v)
		default:
			s.skip()
		}
	})
}

func (d *jsonDecoder) event(ev *Event) {
	s := &d.s
	// The usual head, {"timeUnixNano":"N","name":"NAME", read in one go.
	if data, i := s.data, s.pos; !d.slow && hasAt(data, i, `{"timeUnixNano":"`) {
		i += len(`{"timeUnixNano":"`)
		ds := i
		var t uint64
		for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
			t = t*10 + uint64(data[i]-'0')
		}
		if n := i - ds; n > 0 && n <= 19 && hasAt(data, i, `","name":"`) { // 19 digits cannot overflow
			i += len(`","name":"`)
			ns := i
			for ; i < len(data) && data[i] != '"' && data[i] != '\\' && data[i] >= 0x20; i++ {
			}
			if i < len(data) && data[i] == '"' {
				ev.TimeUnixNano, ev.Name = t, d.str(data[ns:i])
				s.pos = i + 1
				d.eventFields(ev, false)
				return
			}
		}
	}
	if s.null() || !s.object() {
		return
	}
	d.eventFields(ev, true)
}

// eventFields reads an event's keys up to the end of its object; first
// tells whether none has been read yet.
func (d *jsonDecoder) eventFields(ev *Event, first bool) {
	s := &d.s
	for {
		k, ok := s.key(&first)
		if !ok {
			return
		}
		switch string(k) {
		case "timeUnixNano", "time_unix_nano":
			ev.TimeUnixNano = s.uint64()
		case "name":
			ev.Name = d.str(s.str())
		case "attributes":
			ev.Attrs = d.attributes(ev.Attrs)
		default:
			s.skip()
		}
	}
}

var spanKinds = map[string]int32{
	"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
	"SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
}

func (d *jsonDecoder) spanKind() int32 {
	s := &d.s
	if s.peek() == '"' {
		b := s.str()
		if k, ok := spanKinds[string(b)]; ok {
			return k
		}
		s.fail("unknown span kind %q", b)
		return 0
	}
	v := s.int64()
	if v < -1<<31 || v > 1<<31-1 {
		s.fail("span kind out of range")
	}
	return int32(v)
}

// id decodes a hex id (the OTLP JSON mapping), or a base64 one as written
// by generic protobuf JSON encoders, into dst. Empty means absent.
func (d *jsonDecoder) id(dst []byte, field string) {
	s := &d.s
	if s.null() {
		return
	}
	b := s.str()
	if s.err != nil || len(b) == 0 {
		return
	}
	if len(b) == 2*len(dst) {
		if _, err := hex.Decode(dst, b); err == nil {
			return
		}
	}
	if len(b) == base64.StdEncoding.EncodedLen(len(dst)) {
		var tmp [24]byte // DecodedLen of the 24 characters of a 16-byte id
		if n, err := base64.StdEncoding.Decode(tmp[:], b); err == nil && n == len(dst) {
			copy(dst, tmp[:n])
			return
		}
	}
	for i := range dst {
		dst[i] = 0
	}
	s.fail("%s %q is neither %d hex digits nor base64 of %d bytes", field, b, 2*len(dst), len(dst))
}

func (d *jsonDecoder) attributes(out []KeyValue) []KeyValue {
	s := &d.s
	tmp := d.kvTmp[:0]
	if !s.null() && s.array() { // null stands for an empty list
		for first := true; s.elem(&first); {
			pos := len(tmp)
			tmp = append(tmp, KeyValue{})
			if !d.fastAttr(pos, &tmp[pos]) {
				d.attr(pos, &tmp[pos])
			}
		}
	}
	d.kvTmp = tmp
	if out != nil { // a repeated "attributes" key appends
		return append(out, tmp...)
	}
	return slab(&d.kvSlab, tmp, d.kvPool(), &d.used.kv)
}

// attr decodes one KeyValue object, whatever its form.
func (d *jsonDecoder) attr(pos int, kv *KeyValue) {
	s := &d.s
	s.fields(func(k []byte) {
		switch string(k) {
		case "key":
			kv.Key = d.key(pos, s.str())
		case "value":
			kv.Value = d.anyValue()
		default:
			s.skip()
		}
	})
}

// fastAttr decodes the form every OTLP JSON exporter writes,
// {"key":"K","value":{"T":V}} without white space or escapes, for the
// common value types. On anything else it returns false with the
// scanner untouched, and attr decodes the element.
func (d *jsonDecoder) fastAttr(pos int, kv *KeyValue) bool {
	s := &d.s
	data, i := s.data, s.pos
	const pre, mid = `{"key":"`, `","value":{"`
	if d.slow || len(data)-i < len(pre)+len(mid)+8 || string(data[i:i+len(pre)]) != pre {
		return false
	}
	i += len(pre)
	ks := i
	for ; i < len(data) && data[i] != '"'; i++ {
		if c := data[i]; c == '\\' || c < 0x20 {
			return false
		}
	}
	key := data[ks:i]
	if len(data)-i < len(mid) || string(data[i:i+len(mid)]) != mid {
		return false
	}
	i += len(mid)
	var v Value
	switch {
	case hasAt(data, i, `intValue":`):
		i += len(`intValue":`)
		quoted := i < len(data) && data[i] == '"'
		if quoted {
			i++
		}
		neg := i < len(data) && data[i] == '-'
		if neg {
			i++
		}
		ds := i
		var n int64
		for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
			n = n*10 + int64(data[i]-'0')
		}
		nd := i - ds
		// At most 18 digits cannot overflow; JSON numbers have no leading
		// zeros (a quoted integer may). Anything else takes the long way.
		if nd == 0 || nd > 18 || (!quoted && nd > 1 && data[ds] == '0') {
			return false
		}
		if quoted {
			if i >= len(data) || data[i] != '"' {
				return false
			}
			i++
		}
		if neg {
			n = -n
		}
		v = Value{Type: ValInt, Int: n}
	case hasAt(data, i, `stringValue":"`):
		i += len(`stringValue":"`)
		vs := i
		for ; i < len(data) && data[i] != '"'; i++ {
			if c := data[i]; c == '\\' || c < 0x20 {
				return false
			}
		}
		if i >= len(data) {
			return false
		}
		v = Value{Type: ValString, Str: d.val(pos, data[vs:i])}
		i++
	case hasAt(data, i, `doubleValue":`):
		i += len(`doubleValue":`)
		save := s.pos
		s.pos = i
		num := s.number()
		if s.err != nil {
			s.err, s.pos = nil, save
			return false
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			s.pos = save
			return false
		}
		i = s.pos
		s.pos = save
		v = Value{Type: ValDouble, Double: f}
	case hasAt(data, i, `boolValue":true`):
		i += len(`boolValue":true`)
		v = Value{Type: ValBool, Bool: true}
	case hasAt(data, i, `boolValue":false`):
		i += len(`boolValue":false`)
		v = Value{Type: ValBool}
	default:
		return false
	}
	if !hasAt(data, i, "}}") {
		return false
	}
	s.pos = i + 2
	kv.Key, kv.Value = d.key(pos, key), v
	return true
}

// hasAt reports whether data holds lit at i.
func hasAt(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

func (d *jsonDecoder) anyValue() Value {
	s := &d.s
	var v Value
	s.fields(func(k []byte) {
		switch string(k) {
		case "stringValue", "string_value":
			v = Value{Type: ValString, Str: d.str(s.str())}
		case "intValue", "int_value":
			v = Value{Type: ValInt, Int: s.int64()}
		case "doubleValue", "double_value":
			v = Value{Type: ValDouble, Double: s.float64()}
		case "boolValue", "bool_value":
			v = Value{Type: ValBool, Bool: s.boolean()}
		case "arrayValue", "array_value":
			v = Value{Type: ValArray, Str: string(s.skip())}
		case "kvlistValue", "kvlist_value":
			v = Value{Type: ValKVList, Str: string(s.skip())}
		case "bytesValue", "bytes_value":
			v = Value{Type: ValBytes, Str: string(s.str())}
		default:
			s.skip()
		}
	})
	return v
}

// DecodeJSON decodes one ExportTraceServiceRequest in the OTLP JSON mapping.
func DecodeJSON(data []byte) ([]Span, error) {
	spans, err := newJSONDecoder().decode(data, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("OTLP JSON: %w", err)
	}
	return spans, nil
}
