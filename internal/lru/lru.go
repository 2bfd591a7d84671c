// Package lru is the recency list that the router's prefix index
// (cluster/route) and the fleet's shared KV store (kvstore) keep their
// entries on: an intrusive doubly linked list whose nodes live by value
// in one slice, linked by int32 indices, with freed slots reused. Nothing
// is allocated per entry once the slice has grown, and a node's index is
// stable, so an open-addressing index (internal/hashindex) can name it.
//
// The front is the most recently used end and the back the least: an
// entry is touched with MoveToFront and evicted from Back. What an entry
// holds, and when to evict, is the user's: the list only keeps the order.
// It is not safe for concurrent use.
package lru

// List is a recency list of values of type V. Make one with New (its
// zero value is not ready: an empty list's ends are -1).
type List[V any] struct {
	nodes       []node[V]
	free        []int32
	front, back int32
}

type node[V any] struct {
	v          V
	prev, next int32 // -1: none
}

// New returns an empty list.
func New[V any]() List[V] { return List[V]{front: -1, back: -1} }

// Alloc takes a node for v, unlinked: a freed one when there is one.
func (l *List[V]) Alloc(v V) int32 {
	if k := len(l.free); k > 0 {
		n := l.free[k-1]
		l.free = l.free[:k-1]
		l.nodes[n] = node[V]{v: v, prev: -1, next: -1}
		return n
	}
	l.nodes = append(l.nodes, node[V]{v: v, prev: -1, next: -1})
	return int32(len(l.nodes) - 1)
}

// Free returns unlinked node n for reuse.
func (l *List[V]) Free(n int32) { l.free = append(l.free, n) }

// At is node n's value.
func (l *List[V]) At(n int32) *V { return &l.nodes[n].v }

// Front is the most recently used node, -1 when the list is empty.
func (l *List[V]) Front() int32 { return l.front }

// Back is the least recently used node, -1 when the list is empty.
func (l *List[V]) Back() int32 { return l.back }

// Next is the node after n towards the back, -1 at the back.
func (l *List[V]) Next(n int32) int32 { return l.nodes[n].next }

// Prev is the node before n towards the front, -1 at the front.
func (l *List[V]) Prev(n int32) int32 { return l.nodes[n].prev }

// PushFront links unlinked node n as the most recently used.
func (l *List[V]) PushFront(n int32) {
	nd := &l.nodes[n]
	nd.prev, nd.next = -1, l.front
	if l.front >= 0 {
		l.nodes[l.front].prev = n
	} else {
		l.back = n
	}
	l.front = n
}

// Unlink takes node n off the list (it stays allocated; its links are
// stale until PushFront).
func (l *List[V]) Unlink(n int32) {
	nd := &l.nodes[n]
	if nd.prev >= 0 {
		l.nodes[nd.prev].next = nd.next
	} else {
		l.front = nd.next
	}
	if nd.next >= 0 {
		l.nodes[nd.next].prev = nd.prev
	} else {
		l.back = nd.prev
	}
}

// MoveToFront makes linked node n the most recently used.
func (l *List[V]) MoveToFront(n int32) {
	if n != l.front {
		l.Unlink(n)
		l.PushFront(n)
	}
}
