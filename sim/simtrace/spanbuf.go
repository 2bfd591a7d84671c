package simtrace

import (
	"github.com/blis-sim/blis/internal/otlpspan"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/sim"
)

// spanBuf is one span being recorded. Its events live in a ring that keeps
// the last max events, as the OpenTelemetry Python SDK does: a span's
// events are a BoundedList, a deque with maxlen, whose append drops the
// oldest element when full and counts it in `dropped`, which the exporter
// writes as droppedEventsCount.
//
// A spanBuf and its event slots are reused once its span has been written,
// so that steady-state tracing allocates little.
type spanBuf struct {
	kind    spanKind
	sp      otlpspan.Span
	ring    []otlpspan.Event // slots; each keeps its Attrs capacity across reuse
	start   int              // oldest event once the ring is full
	n       int              // events held
	dropped int64
}

func (b *spanBuf) reset() {
	sp := &b.sp
	*sp = otlpspan.Span{Attrs: sp.Attrs[:0], Events: sp.Events[:0]}
	b.start, b.n, b.dropped = 0, 0, 0
}

// add appends an event, dropping the oldest when max are held, and
// returns it with its attributes emptied for the caller to fill.
func (b *spanBuf) add(max int, timeNs uint64, name string) *otlpspan.Event {
	var e *otlpspan.Event
	if b.n < max {
		// Not full: start is 0 and the slots 0..n-1 are in use.
		if b.n == len(b.ring) {
			b.ring = append(b.ring, otlpspan.Event{})
		}
		e = &b.ring[b.n]
		b.n++
	} else {
		e = &b.ring[b.start]
		b.start++
		if b.start == max {
			b.start = 0
		}
		b.dropped++
	}
	e.TimeUnixNano = timeNs
	e.Name = name
	e.Attrs = e.Attrs[:0]
	return e
}

// dropLastAfter removes the newest event if it is called name and is
// later than timeNs. It does nothing once the ring has dropped events
// (the newest is then not at the end of the slots).
func (b *spanBuf) dropLastAfter(timeNs uint64, name string) {
	if b.n == 0 || b.dropped > 0 {
		return
	}
	if e := &b.ring[b.n-1]; e.Name == name && e.TimeUnixNano > timeNs {
		b.n--
	}
}

// finish lays the held events out oldest first in the span and sets its
// dropped count.
func (b *spanBuf) finish() {
	sp := &b.sp
	sp.Events = append(sp.Events[:0], b.ring[b.start:b.n]...)
	sp.Events = append(sp.Events, b.ring[:b.start]...)
	d := b.dropped
	if d > 1<<32-1 {
		d = 1<<32 - 1
	}
	sp.DroppedEventsCount = uint32(d)
}

type spanKind uint8

const (
	kindAPI spanKind = iota
	kindCore
	kindStep
	numKinds
)

// Attribute helpers.

func sv(k, v string) otlpspan.KeyValue {
	return otlpspan.KeyValue{Key: k, Value: otlpspan.Value{Type: otlpspan.ValString, Str: v}}
}

func iv(k string, v int64) otlpspan.KeyValue {
	return otlpspan.KeyValue{Key: k, Value: otlpspan.Value{Type: otlpspan.ValInt, Int: v}}
}

func dv(k string, v float64) otlpspan.KeyValue {
	return otlpspan.KeyValue{Key: k, Value: otlpspan.Value{Type: otlpspan.ValDouble, Double: v}}
}

// phaseName is vLLM's name of a request phase (the phase and
// request.phase attributes).
func phaseName(p sim.Phase) string {
	switch p {
	case sim.PhasePrefill:
		return tracevocab.PhasePrefill
	case sim.PhaseDecode:
		return tracevocab.PhaseDecode
	}
	return tracevocab.PhaseWaiting
}
