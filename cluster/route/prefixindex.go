package route

import "github.com/blis-sim/blis/internal/hashindex"

// DefaultPrefixIndexCapacity is the router-side prefix index's default
// size per instance, in blocks (seed 001).
const DefaultPrefixIndexCapacity = 10_000

// PrefixIndex is the router's approximate picture of each instance's
// prefix cache (seed 001): per instance, an LRU set of the block hashes of
// the prompts routed there, at most Capacity blocks. It never asks the
// instances; it only remembers where it sent what.
//
// Record touches a prompt's blocks from the last to the first, so a
// prompt's first block is its most recently used and is evicted last:
// since matches count leading blocks, evicting a prompt's head first (the
// order of the seed's simulator) would throw away every match on that
// prompt while keeping blocks that can no longer match.
type PrefixIndex struct {
	capacity int
	inst     []*lruSet
}

// NewPrefixIndex returns an empty index for n instances (more are added as
// they are recorded) of capacity blocks each.
func NewPrefixIndex(n, capacity int) *PrefixIndex {
	return &PrefixIndex{capacity: capacity, inst: make([]*lruSet, n)}
}

// MatchAll writes Match(i, hashes) for every instance i < len(dst).
func (x *PrefixIndex) MatchAll(hashes []uint64, dst []int) {
	for i := range dst {
		dst[i] = x.Match(i, hashes)
	}
}

// Match is how many leading hashes of a prompt instance i holds. It
// changes nothing (in particular not the LRU order).
func (x *PrefixIndex) Match(i int, hashes []uint64) int {
	if i >= len(x.inst) || x.inst[i] == nil {
		return 0
	}
	s := x.inst[i]
	n := 0
	for _, h := range hashes {
		if _, ok := s.index.Get(h); !ok {
			break
		}
		n++
	}
	return n
}

// Record notes that instance i now holds hashes.
func (x *PrefixIndex) Record(i int, hashes []uint64) {
	for i >= len(x.inst) {
		x.inst = append(x.inst, nil)
	}
	s := x.inst[i]
	if s == nil {
		s = newLRUSet(x.capacity)
		x.inst[i] = s
	}
	for j := len(hashes) - 1; j >= 0; j-- {
		s.touch(hashes[j])
	}
}

// Len is the number of blocks instance i's set holds.
func (x *PrefixIndex) Len(i int) int {
	if i >= len(x.inst) || x.inst[i] == nil {
		return 0
	}
	return x.inst[i].index.Len()
}

// lruSet is a bounded set of hashes with least-recently-used eviction: an
// index from hash to node, and the nodes, each with its hash, on an
// intrusive doubly linked list (most recent at the head).
type lruSet struct {
	index      *hashindex.Index
	nodes      []node
	head, tail int32
	capacity   int32
}

type node struct {
	key        uint64
	prev, next int32
}

func newLRUSet(capacity int) *lruSet {
	s := &lruSet{head: -1, tail: -1, capacity: int32(capacity)}
	s.index = hashindex.New(int64(capacity), func(n int32) uint64 { return s.nodes[n].key })
	return s
}

func (s *lruSet) unlink(n int32) {
	l := &s.nodes[n]
	if l.prev >= 0 {
		s.nodes[l.prev].next = l.next
	} else {
		s.head = l.next
	}
	if l.next >= 0 {
		s.nodes[l.next].prev = l.prev
	} else {
		s.tail = l.prev
	}
}

func (s *lruSet) pushHead(n int32) {
	s.nodes[n].prev, s.nodes[n].next = -1, s.head
	if s.head >= 0 {
		s.nodes[s.head].prev = n
	} else {
		s.tail = n
	}
	s.head = n
}

// touch makes h the most recently used, inserting it (and evicting the
// least recently used when full) if absent.
func (s *lruSet) touch(h uint64) {
	if n, ok := s.index.Get(h); ok {
		if n != s.head {
			s.unlink(n)
			s.pushHead(n)
		}
		return
	}
	var n int32
	if int32(len(s.nodes)) < s.capacity {
		n = int32(len(s.nodes))
		s.nodes = append(s.nodes, node{key: h})
	} else {
		n = s.tail
		s.unlink(n)
		s.index.Del(s.nodes[n].key, n)
		s.nodes[n].key = h
	}
	s.index.Put(h, n)
	s.pushHead(n)
}
