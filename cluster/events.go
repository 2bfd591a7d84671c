package cluster

// evKind orders simultaneous cluster events (seed 002's type priorities:
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
	at  int64
	seq uint64
	id  int64 // evDone, evTimeout: the request
	// evDone, for the time windows: the request's TTFT (µs) and output
	// tokens when it completed.
	ttftUs, tokens int64
	inst           int32 // evDone, evTimeout: the instance
	slot           int32 // evRoute: the pending request's slot
	kind           evKind
	out            Outcome
}

func (a *cevent) less(b *cevent) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap of cluster events by (time, kind, seq).
type eventHeap struct {
	ev  []cevent
	seq uint64
}

func (h *eventHeap) len() int      { return len(h.ev) }
func (h *eventHeap) peek() *cevent { return &h.ev[0] }
func (h *eventHeap) push(e cevent) {
	h.seq++
	e.seq = h.seq
	h.ev = append(h.ev, e)
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.ev[i].less(&h.ev[p]) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) pop() cevent {
	top := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.ev[r].less(&h.ev[l]) {
			m = r
		}
		if !h.ev[m].less(&h.ev[i]) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return top
}

// instHeap orders the instances that have a pending event by (next event
// time, index): the lowest index goes first among equal times (seed 001).
// pos[i] is instance i's place in the heap, -1 when it has no event.
type instHeap struct {
	idx []int32
	at  []int64 // by instance
	pos []int32 // by instance
}

func newInstHeap(n int) *instHeap {
	h := &instHeap{at: make([]int64, n), pos: make([]int32, n)}
	for i := range h.pos {
		h.pos[i] = -1
	}
	return h
}

func (h *instHeap) len() int { return len(h.idx) }

// grow adds an instance with no event.
func (h *instHeap) grow() {
	h.at = append(h.at, 0)
	h.pos = append(h.pos, -1)
}

// top is the instance with the earliest event, and its time.
func (h *instHeap) top() (int, int64) { i := h.idx[0]; return int(i), h.at[i] }

func (h *instHeap) less(a, b int32) bool {
	if h.at[a] != h.at[b] {
		return h.at[a] < h.at[b]
	}
	return a < b
}

func (h *instHeap) swap(x, y int) {
	h.idx[x], h.idx[y] = h.idx[y], h.idx[x]
	h.pos[h.idx[x]], h.pos[h.idx[y]] = int32(x), int32(y)
}

func (h *instHeap) up(k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !h.less(h.idx[k], h.idx[p]) {
			break
		}
		h.swap(k, p)
		k = p
	}
}

func (h *instHeap) down(k int) {
	n := len(h.idx)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.idx[r], h.idx[l]) {
			m = r
		}
		if !h.less(h.idx[m], h.idx[k]) {
			return
		}
		h.swap(k, m)
		k = m
	}
}

// set records instance i's next event time, or removes it when it has none.
func (h *instHeap) set(i int, at int64, ok bool) {
	k := int(h.pos[i])
	switch {
	case !ok && k < 0:
	case !ok:
		last := len(h.idx) - 1
		h.swap(k, last)
		h.idx = h.idx[:last]
		h.pos[i] = -1
		if k < last {
			h.down(k)
			h.up(k)
		}
	case k < 0:
		h.at[i] = at
		h.idx = append(h.idx, int32(i))
		h.pos[i] = int32(len(h.idx) - 1)
		h.up(len(h.idx) - 1)
	default:
		old := h.at[i]
		h.at[i] = at
		if at < old {
			h.up(k)
		} else {
			h.down(k)
		}
	}
}
