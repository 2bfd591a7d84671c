package sim

import "github.com/blis-sim/blis/internal/eventq"

// eventKind orders simultaneous events: an arrival becomes a queued request
// before a step at the same microsecond runs, so that step can admit it,
// and an abort deferred to a step's end is applied before the next step
// schedules (vLLM reads aborts from its input queue between steps).
type eventKind uint8

const (
	evArrival eventKind = iota
	evQueued
	evAbort
	evStep
	evPulled    // a HandoffDecode request's KV arrived
	evReleaseKV // a HandoffPrefill request's kept KV is freed
)

func (k eventKind) String() string {
	switch k {
	case evArrival:
		return "arrival"
	case evQueued:
		return "queued"
	case evAbort:
		return "abort"
	case evStep:
		return "step"
	case evPulled:
		return "pulled"
	case evReleaseKV:
		return "release-kv"
	}
	return "unknown"
}

// eventHeap is the engine's event queue (internal/eventq, the kernel the
// cluster shares), ordered by (time, kind, insertion sequence); an
// event's payload is its request's slot (-1 for a step).
type eventHeap struct{ q eventq.Queue[int32] }

type event = eventq.Event[int32]

func (h *eventHeap) len() int                                 { return h.q.Len() }
func (h *eventHeap) push(at int64, kind eventKind, req int32) { h.q.Push(at, uint8(kind), req) }
func (h *eventHeap) pop() event                               { return h.q.Pop() }
func (h *eventHeap) peek() *event                             { return h.q.Peek() }

// remove deletes the event of that kind for request req, if there is one.
// It scans the heap, which holds one step and the requests in transit to
// the queue: an abort is rare next to the events themselves.
func (h *eventHeap) remove(kind eventKind, req int32) bool {
	return h.q.Remove(func(e *event) bool { return e.Kind == uint8(kind) && e.P == req })
}
