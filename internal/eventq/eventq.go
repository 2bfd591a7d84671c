// Package eventq is the simulators' event queue, shared by the engine
// (package sim), the cluster and the fleet core: a binary min-heap of
// events ordered by time, then kind, then insertion sequence. The kind
// orders simultaneous events (each user numbers its kinds so that what
// must happen first at an instant has the smaller number); the sequence
// makes the order total, so that equal events pop in the order they were
// pushed and a run is deterministic.
//
// An event carries a payload of any type P, held by value: the heap holds
// no pointers unless P does, and pushing allocates nothing once the heap
// has grown. It is hand-written rather than container/heap, whose interface
// boxes every element. Push and Pop are O(log n); Remove scans (O(n)) and
// is for rare events (an abort).
package eventq

// Event is one event: its time (µs), kind and payload. Seq is set by Push.
type Event[P any] struct {
	At   int64
	Seq  uint64
	P    P
	Kind uint8
}

// Before reports whether a comes before b: earlier, or at the same time of
// a smaller kind, or of the same kind pushed earlier.
func (a *Event[P]) Before(b *Event[P]) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Seq < b.Seq
}

// Queue is a min-heap of events. Its zero value is empty and ready to use.
type Queue[P any] struct {
	ev  []Event[P]
	seq uint64
}

// Len is the number of events queued.
func (q *Queue[P]) Len() int { return len(q.ev) }

// Peek is the first event (the queue must not be empty); the pointer is
// valid until the next Push, Pop or Remove.
func (q *Queue[P]) Peek() *Event[P] { return &q.ev[0] }

// Push queues an event of kind at time at.
func (q *Queue[P]) Push(at int64, kind uint8, p P) {
	q.seq++
	q.ev = append(q.ev, Event[P]{At: at, Kind: kind, Seq: q.seq, P: p})
	q.up(len(q.ev) - 1)
}

// Pop removes and returns the first event (the queue must not be empty).
func (q *Queue[P]) Pop() Event[P] {
	top := q.ev[0]
	n := len(q.ev) - 1
	q.ev[0] = q.ev[n]
	q.ev = q.ev[:n]
	q.down(0)
	return top
}

// Remove deletes the first event, in heap order, for which match is true,
// and reports whether there was one. It scans the queue.
func (q *Queue[P]) Remove(match func(*Event[P]) bool) bool {
	for i := range q.ev {
		if !match(&q.ev[i]) {
			continue
		}
		n := len(q.ev) - 1
		q.ev[i] = q.ev[n]
		q.ev = q.ev[:n]
		if i < n {
			q.down(i)
			q.up(i)
		}
		return true
	}
	return false
}

func (q *Queue[P]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.ev[i].Before(&q.ev[p]) {
			return
		}
		q.ev[i], q.ev[p] = q.ev[p], q.ev[i]
		i = p
	}
}

func (q *Queue[P]) down(i int) {
	n := len(q.ev)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.ev[r].Before(&q.ev[l]) {
			m = r
		}
		if !q.ev[m].Before(&q.ev[i]) {
			return
		}
		q.ev[i], q.ev[m] = q.ev[m], q.ev[i]
		i = m
	}
}

// CloneInto makes dst a copy of q, reusing dst's array when it is large
// enough.
func (q *Queue[P]) CloneInto(dst *Queue[P]) {
	dst.ev = append(dst.ev[:0], q.ev...)
	dst.seq = q.seq
}
