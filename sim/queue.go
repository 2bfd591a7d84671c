package sim

// queue is the waiting queue. FCFS is a deque: new requests at the back,
// preempted ones back at the front. The keyed policies (priority-fcfs,
// sjf, reverse-priority) are a binary min-heap on (sortKey, arrival, id),
// a total order since ids are unique, so it pops exactly in the order a
// sorted list would give. Every operation is O(1) or O(log n): under
// overload the queue holds most of a run's requests.
//
// Removal (an abort) is lazy: the request's ticket is cleared and its
// entry, now stale, is dropped when it reaches the front, or when stale
// entries outnumber live ones (compact). Each push gets a new ticket, so
// an entry can never be mistaken for a later request in a reused slot.
type queue struct {
	keyed bool
	heap  []qent // keyed: a binary min-heap
	// FCFS: a ring buffer of len(ring) = a power of two; n entries from head.
	ring    []ringEnt
	head, n int

	live, stale int
	tickets     uint64 // the last ticket given
}

// qent is a keyed queue entry. The order is copied in, so that sifting
// reads only the heap, not the request slots.
type qent struct {
	key     float64
	arrival int64
	id      int64
	ticket  uint64
	slot    int32
}

type ringEnt struct {
	ticket uint64
	slot   int32
}

// less is the queue order: key, then arrival, then id. The ticket (newer
// first, as the sorted list inserted before equals) only breaks ties
// between duplicate ids, which valid input never has.
func (a *qent) less(b *qent) bool {
	switch {
	case a.key != b.key:
		return a.key < b.key
	case a.arrival != b.arrival:
		return a.arrival < b.arrival
	case a.id != b.id:
		return a.id < b.id
	}
	return a.ticket > b.ticket
}

func (q *queue) len() int { return q.live }

func (q *queue) take(r *request) uint64 {
	q.tickets++
	r.qticket = q.tickets
	q.live++
	return q.tickets
}

// push adds request slot i: in key order (keyed; key is its sortKey) or
// at the back (FCFS).
func (q *queue) push(r *request, i int32, key float64) {
	t := q.take(r)
	if q.keyed {
		q.heap = append(q.heap, qent{key: key, arrival: r.spec.ArrivalUs, id: r.spec.ID, ticket: t, slot: i})
		q.up(len(q.heap) - 1)
		return
	}
	q.growRing()
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = ringEnt{ticket: t, slot: i}
	q.n++
}

// pushFront puts request slot i at the front of an FCFS queue.
func (q *queue) pushFront(r *request, i int32) {
	t := q.take(r)
	q.growRing()
	q.head = (q.head - 1) & (len(q.ring) - 1)
	q.ring[q.head] = ringEnt{ticket: t, slot: i}
	q.n++
}

func (q *queue) growRing() {
	if q.n < len(q.ring) {
		return
	}
	ring := make([]ringEnt, max(16, 2*len(q.ring)))
	for k := range q.n {
		ring[k] = q.ring[(q.head+k)&(len(q.ring)-1)]
	}
	q.ring, q.head = ring, 0
}

// top is the first entry, stale or not, and its ticket.
func (q *queue) top() (int32, uint64) {
	if q.keyed {
		return q.heap[0].slot, q.heap[0].ticket
	}
	e := q.ring[q.head]
	return e.slot, e.ticket
}

// drop removes the first entry.
func (q *queue) drop() {
	if !q.keyed {
		q.head = (q.head + 1) & (len(q.ring) - 1)
		q.n--
		return
	}
	n := len(q.heap) - 1
	q.heap[0] = q.heap[n]
	q.heap = q.heap[:n]
	q.down(0)
}

// front is the first request; the queue must not be empty. Stale
// entries before it are dropped.
func (q *queue) front(reqs []request) int32 {
	for {
		i, t := q.top()
		if reqs[i].qticket == t {
			return i
		}
		q.drop()
		q.stale--
	}
}

// popFront removes the first request.
func (q *queue) popFront(reqs []request) {
	reqs[q.front(reqs)].qticket = 0
	q.drop()
	q.live--
}

// remove takes request slot i out of the queue wherever it is, keeping the
// others' order; it reports whether i was there.
func (q *queue) remove(reqs []request, i int32) bool {
	if reqs[i].qticket == 0 {
		return false
	}
	reqs[i].qticket = 0
	q.live--
	q.stale++
	if q.stale > 64 && q.stale > q.live {
		q.compact(reqs)
	}
	return true
}

// compact drops every stale entry: O(n), paid for by the more than n/2
// removals since the last one.
func (q *queue) compact(reqs []request) {
	if q.keyed {
		h := q.heap[:0]
		for _, e := range q.heap {
			if reqs[e.slot].qticket == e.ticket {
				h = append(h, e)
			}
		}
		clear(q.heap[len(h):])
		q.heap = h
		for k := len(h)/2 - 1; k >= 0; k-- {
			q.down(k)
		}
	} else {
		m := len(q.ring) - 1
		n := 0
		for k := range q.n {
			if e := q.ring[(q.head+k)&m]; reqs[e.slot].qticket == e.ticket {
				q.ring[(q.head+n)&m] = e
				n++
			}
		}
		q.n = n
	}
	q.stale = 0
}

// each calls f with every request in the queue, in no particular order.
func (q *queue) each(reqs []request, f func(int32)) {
	if q.keyed {
		for _, e := range q.heap {
			if reqs[e.slot].qticket == e.ticket {
				f(e.slot)
			}
		}
		return
	}
	for k := range q.n {
		if e := q.ring[(q.head+k)&(len(q.ring)-1)]; reqs[e.slot].qticket == e.ticket {
			f(e.slot)
		}
	}
}

func (q *queue) up(k int) {
	h := q.heap
	for k > 0 {
		p := (k - 1) / 2
		if !h[k].less(&h[p]) {
			return
		}
		h[k], h[p] = h[p], h[k]
		k = p
	}
}

func (q *queue) down(k int) {
	h := q.heap
	n := len(h)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].less(&h[l]) {
			m = r
		}
		if !h[m].less(&h[k]) {
			return
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
}
