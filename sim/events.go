package sim

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

// event is a value type so that the heap holds no pointers.
type event struct {
	at   int64 // µs
	kind eventKind
	seq  uint64 // insertion order: the final tie-breaker
	req  int32  // request index for arrival, queued and abort events
}

func (a event) less(b event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap ordered by (time, kind, seq). It is
// hand-written rather than container/heap to avoid boxing every event.
type eventHeap struct {
	ev  []event
	seq uint64
}

func (h *eventHeap) len() int { return len(h.ev) }

func (h *eventHeap) push(at int64, kind eventKind, req int32) {
	h.seq++
	h.ev = append(h.ev, event{at: at, kind: kind, seq: h.seq, req: req})
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.ev[i].less(h.ev[p]) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	top := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	h.down(0)
	return top
}

func (h *eventHeap) peek() event { return h.ev[0] }

// remove deletes the event of that kind for request req, if there is one.
// It scans the heap, which holds one step and the requests in transit to
// the queue: an abort is rare next to the events themselves.
func (h *eventHeap) remove(kind eventKind, req int32) bool {
	for i := range h.ev {
		if h.ev[i].kind != kind || h.ev[i].req != req {
			continue
		}
		n := len(h.ev) - 1
		h.ev[i] = h.ev[n]
		h.ev = h.ev[:n]
		if i < n {
			h.down(i)
			h.up(i)
		}
		return true
	}
	return false
}

func (h *eventHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.ev[i].less(h.ev[p]) {
			return
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) down(i int) {
	n := len(h.ev)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.ev[r].less(h.ev[l]) {
			m = r
		}
		if !h.ev[m].less(h.ev[i]) {
			return
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
}
