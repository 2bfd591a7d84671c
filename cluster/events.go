package cluster

import "github.com/blis-sim/blis/internal/eventq"

// evKind orders simultaneous cluster events (docs/cluster.md's type priorities:
// arrival 0, admission 1, routing 2, completion 5). Arrivals and admission
// decisions are not heap events: the source is peeked, and admission is
// decided as a request arrives.
type evKind uint8

const (
	evRoute   evKind = 2 // a routing decision after the admission latency
	evHandoff evKind = 3 // a prefill handoff's response departs: its prefill instance's in-flight count drops (pd.go)
	evTimeout evKind = 4 // a client gives up: its request is aborted at its instance
	evDone    evKind = 5 // a request left an instance: the router's in-flight count drops
)

type cevent struct {
	at int64
	id int64 // evDone, evTimeout: the request
	// evDone, for the time windows: the request's TTFT (µs) and output
	// tokens when it completed.
	ttftUs, tokens int64
	inst           int32 // evDone, evTimeout: the instance
	slot           int32 // evRoute: the pending request's slot
	kind           evKind
	out            Outcome
}

// evPayload is what an event carries besides its time and kind.
type evPayload struct {
	id, ttftUs, tokens int64
	inst, slot         int32
	out                Outcome
}

// eventHeap is a queue of cluster events by (time, kind, insertion order):
// the engine's kernel (internal/eventq).
type eventHeap struct{ q eventq.Queue[evPayload] }

func (h *eventHeap) len() int { return h.q.Len() }

func (h *eventHeap) push(e cevent) {
	h.q.Push(e.at, uint8(e.kind), evPayload{id: e.id, ttftUs: e.ttftUs, tokens: e.tokens, inst: e.inst, slot: e.slot, out: e.out})
}

func unpack(ev *eventq.Event[evPayload]) cevent {
	p := &ev.P
	return cevent{at: ev.At, kind: evKind(ev.Kind), id: p.id, ttftUs: p.ttftUs, tokens: p.tokens, inst: p.inst, slot: p.slot, out: p.out}
}

func (h *eventHeap) pop() cevent { ev := h.q.Pop(); return unpack(&ev) }

// peek is the first event, by value.
func (h *eventHeap) peek() cevent { return unpack(h.q.Peek()) }

// instHeap orders the instances that have a pending event by (next event
// time, index): the lowest index goes first among equal times (docs/cluster.md).
// The heap holds each instance's time with its index, so that sifting
// compares entries side by side rather than looking each time up by
// instance; pos[i] is instance i's place in the heap, -1 when it has no
// event.
//
// It also keeps which instances changed since the router last looked
// (touch; set touches): every change to an engine is followed by set, so
// a routing decision refreshes the view of those alone (Sim.fillView).
type instHeap struct {
	ent []instEnt
	pos []int32 // by instance
	// dirty marks, by instance, a change the router's view has not seen;
	// touched lists them.
	dirty   []bool
	touched []int32
}

// instEnt is an instance's place in the heap: its next event's time.
type instEnt struct {
	at int64
	i  int32
}

func newInstHeap(n int) *instHeap {
	h := &instHeap{pos: make([]int32, n), dirty: make([]bool, n)}
	for i := range h.pos {
		h.pos[i] = -1
		h.touch(i)
	}
	return h
}

// touch marks instance i changed.
func (h *instHeap) touch(i int) {
	if !h.dirty[i] {
		h.dirty[i] = true
		h.touched = append(h.touched, int32(i))
	}
}

// touchAll marks every instance changed.
func (h *instHeap) touchAll() {
	for i := range h.dirty {
		h.touch(i)
	}
}

func (h *instHeap) len() int { return len(h.ent) }

// grow adds an instance with no event.
func (h *instHeap) grow() {
	h.pos = append(h.pos, -1)
	h.dirty = append(h.dirty, false)
	h.touch(len(h.dirty) - 1)
}

// top is the instance with the earliest event, and its time.
func (h *instHeap) top() (int, int64) { e := h.ent[0]; return int(e.i), e.at }

func (a instEnt) before(b instEnt) bool { return a.at < b.at || (a.at == b.at && a.i < b.i) }

// up moves the entry at k towards the root until its parent is before it.
func (h *instHeap) up(k int) {
	e := h.ent[k]
	for k > 0 {
		p := (k - 1) / 2
		if !e.before(h.ent[p]) {
			break
		}
		h.ent[k] = h.ent[p]
		h.pos[h.ent[k].i] = int32(k)
		k = p
	}
	h.ent[k] = e
	h.pos[e.i] = int32(k)
}

// down moves the entry at k towards the leaves until it is before its
// children.
func (h *instHeap) down(k int) {
	n := len(h.ent)
	e := h.ent[k]
	for {
		l := 2*k + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.ent[r].before(h.ent[l]) {
			m = r
		}
		if !h.ent[m].before(e) {
			break
		}
		h.ent[k] = h.ent[m]
		h.pos[h.ent[k].i] = int32(k)
		k = m
	}
	h.ent[k] = e
	h.pos[e.i] = int32(k)
}

// set records instance i's next event time, or removes it when it has none.
func (h *instHeap) set(i int, at int64, ok bool) {
	h.touch(i)
	k := int(h.pos[i])
	switch {
	case !ok && k < 0:
	case !ok:
		last := len(h.ent) - 1
		moved := h.ent[last]
		h.ent = h.ent[:last]
		h.pos[i] = -1
		if k < last {
			h.ent[k] = moved
			h.pos[moved.i] = int32(k)
			h.down(k)
			h.up(int(h.pos[moved.i]))
		}
	case k < 0:
		h.ent = append(h.ent, instEnt{at: at, i: int32(i)})
		h.up(len(h.ent) - 1)
	default:
		old := h.ent[k].at
		h.ent[k].at = at
		if at < old {
			h.up(k)
		} else {
			h.down(k)
		}
	}
}
