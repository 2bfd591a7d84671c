package route

import (
	"math/bits"
	"slices"

	"github.com/blis-sim/blis/internal/hashindex"
	"github.com/blis-sim/blis/internal/lru"
)

// DefaultPrefixIndexCapacity is the router-side prefix index's size per
// instance, in blocks, when it is not sized from the instances (seed
// 001's number).
const DefaultPrefixIndexCapacity = 10_000

// AutoPrefixIndexCapacity (0), given as a policy's index capacity, sizes
// each instance's set from the instance's own KV capacity (its GPU blocks
// and the CPU tier and disk behind them), which the cluster reports
// (SizeInstance); until it does, DefaultPrefixIndexCapacity. 10,000 blocks
// are 160K tokens at 16-token blocks, less than one H100's KV cache, so a
// fixed index forgets what the instances still hold.
const AutoPrefixIndexCapacity = 0

// MaxPrefixIndexCapacity bounds the index's size per instance: its sets
// count blocks and number their nodes in int32 (a capacity of 2^31 wrapped
// to a negative one and panicked on the first routed request).
const MaxPrefixIndexCapacity = 1 << 30

// PrefixIndex is the router's approximate picture of each instance's
// prefix cache (docs/cluster.md): per instance, an LRU set of the block hashes of
// the prompts routed there, at most Capacity blocks. It never asks the
// instances; it only remembers where it sent what.
//
// Record touches a prompt's blocks from the last to the first, so a
// prompt's first block is its most recently used and is evicted last:
// since matches count leading blocks, evicting a prompt's head first (the
// order of the seed's simulator) would throw away every match on that
// prompt while keeping blocks that can no longer match.
//
// Only a prompt's shared blocks (sim.SharedBlocks: a group's prefix) can
// ever match a later request; the blocks after are the request's own. They
// still take room in the set and are evicted in their turn, so Record keeps
// them as one anonymous run of that many blocks at the place their touches
// would have put them (older than the prompt's shared blocks), instead of
// one entry each that no lookup could ever find. Matches, and the order in
// which shared blocks are evicted, are exactly a per-block LRU's.
//
// MatchAll gives every instance's Match at once, without walking every
// instance's set block by block, which would cost one cold lookup per
// block per instance for every decision (a popular system prompt is held
// everywhere). Two exact shortcuts:
//
//   - heads: a block that starts a prompt can only ever start one (its
//     hash chains from nothing), so the index keeps, for each first block
//     it holds, the instances holding it. Instances without the request's
//     first block match nothing.
//   - memo: per instance and first block, the leading run last found
//     present. Blocks leave a set only when evicted, and an eviction of a
//     block in a memoized run drops the memo, so a request whose chain
//     starts with the memoized run (compared in place, not looked up)
//     matches at least that run and only needs the blocks after it looked
//     up.
//
// Match walks one instance's set and is the reference MatchAll is tested
// against.
type PrefixIndex struct {
	capacity int
	// auto: sized per instance (caps, 0: capacity) by SizeInstance.
	auto bool
	caps []int
	inst []*lruSet
	// heads maps a first block's hash to the instances holding it, as a
	// bit set (64 instances a word).
	heads map[uint64]bitset
}

// NewPrefixIndex returns an empty index for n instances (more are added as
// they are recorded) of capacity blocks each.
func NewPrefixIndex(n, capacity int) *PrefixIndex {
	x := &PrefixIndex{capacity: capacity, inst: make([]*lruSet, n), heads: map[uint64]bitset{}}
	if capacity == AutoPrefixIndexCapacity {
		x.capacity, x.auto = DefaultPrefixIndexCapacity, true
	}
	return x
}

// Auto reports whether the index is sized from the instances.
func (x *PrefixIndex) Auto() bool { return x.auto }

// SizeInstance sets instance i's capacity to blocks (clamped to [1,
// MaxPrefixIndexCapacity]) when the index is sized from the instances,
// before anything is recorded for it.
func (x *PrefixIndex) SizeInstance(i int, blocks int64) {
	if !x.auto {
		return
	}
	for i >= len(x.caps) {
		x.caps = append(x.caps, 0)
	}
	x.caps[i] = int(min(max(blocks, 1), MaxPrefixIndexCapacity))
	if i < len(x.inst) && x.inst[i] != nil && int(x.inst[i].size) == 0 {
		x.inst[i] = nil
	}
}

// Capacity is instance i's capacity, in blocks.
func (x *PrefixIndex) Capacity(i int) int {
	if i < len(x.caps) && x.caps[i] > 0 {
		return x.caps[i]
	}
	return x.capacity
}

// MatchAll writes Match(i, hashes) for every instance i of idx (ascending,
// each < len(dst)); it may write other instances' entries too.
func (x *PrefixIndex) MatchAll(hashes []uint64, idx []int32, dst []int) {
	for _, i := range idx {
		dst[i] = 0
	}
	if len(hashes) == 0 {
		return
	}
	for w, set := range x.heads[hashes[0]] {
		for ; set != 0; set &= set - 1 {
			if i := w*64 + bits.TrailingZeros64(set); i < len(dst) {
				dst[i] = x.inst[i].matchMemo(hashes)
			}
		}
	}
}

// Match is how many leading hashes of a prompt instance i holds. It
// changes nothing (in particular not the LRU order).
func (x *PrefixIndex) Match(i int, hashes []uint64) int {
	if i >= len(x.inst) || x.inst[i] == nil {
		return 0
	}
	return x.inst[i].walk(hashes, 0)
}

// Record notes that instance i now holds a prompt: its shared blocks'
// hashes and own more blocks of its own.
func (x *PrefixIndex) Record(i int, hashes []uint64, own int) {
	for i >= len(x.inst) {
		x.inst = append(x.inst, nil)
	}
	s := x.inst[i]
	if s == nil {
		s = newLRUSet(x.Capacity(i))
		x.inst[i] = s
		s.heads, s.word, s.bit = x.heads, i/64, uint64(1)<<(i%64)
	}
	s.addRun(own)
	for j := len(hashes) - 1; j >= 0; j-- {
		s.touch(hashes[j], j == 0)
	}
	if len(hashes) > 0 {
		x.heads[hashes[0]] = x.heads[hashes[0]].set(s.word, s.bit)
	}
}

// Forget drops instance i's set: the instance is gone (an autoscaler
// terminated it), and what it held must neither match nor take memory.
func (x *PrefixIndex) Forget(i int) {
	if i >= len(x.inst) || x.inst[i] == nil {
		return
	}
	s := x.inst[i]
	for n := s.list.Front(); n >= 0; n = s.list.Next(n) {
		if nd := s.list.At(n); nd.first && !nd.anon {
			s.dropHead(nd.key)
		}
	}
	x.inst[i] = nil
}

// Len is the number of blocks instance i's set holds.
func (x *PrefixIndex) Len(i int) int {
	if i >= len(x.inst) || x.inst[i] == nil {
		return 0
	}
	return int(x.inst[i].size)
}

// lruSet is a bounded set of blocks with least-recently-used eviction: an
// index from hash to node, and the nodes on a recency list (internal/lru,
// the kernel the KV store shares: most recent at the front). A node is one
// hashed block, or an anonymous run of own blocks (count > 1 possible, not
// in the index).
type lruSet struct {
	index    *hashindex.Index
	list     lru.List[node]
	capacity int32
	size     int32 // blocks held
	// heads is the index's first-block table this instance reports to,
	// as bit of word.
	heads map[uint64]bitset
	word  int
	bit   uint64
	// memo maps a first block to the leading run last found present from
	// it; the run's nodes carry that first block (node.memo).
	memo map[uint64]memoRun
}

// memoRun is a run of leading blocks present in the set.
type memoRun struct{ hashes []uint64 }

type node struct {
	key   uint64
	memo  uint64 // the first block of the memoized run this node is in (0: none)
	count int32  // blocks: 1 for a hashed block; an anonymous run's length
	first bool   // the block starts a prompt
	anon  bool   // an anonymous run of own blocks
}

func newLRUSet(capacity int) *lruSet {
	s := &lruSet{list: lru.New[node](), capacity: int32(capacity), memo: map[uint64]memoRun{}}
	s.index = hashindex.New(int64(capacity), func(n int32) uint64 { return s.list.At(n).key })
	return s
}

// walk counts the leading hashes present, from hashes[from:] on, given
// that the first from are present.
func (s *lruSet) walk(hashes []uint64, from int) int {
	n := from
	for _, h := range hashes[from:] {
		if _, ok := s.index.Get(h); !ok {
			break
		}
		n++
	}
	return n
}

// matchMemo is walk from the start, resumed from the memo when the
// request's chain shares the memoized run; it updates the memo.
func (s *lruSet) matchMemo(hashes []uint64) int {
	head := hashes[0]
	from := 0
	m, ok := s.memo[head]
	if ok && len(m.hashes) <= len(hashes) && slices.Equal(m.hashes, hashes[:len(m.hashes)]) {
		from = len(m.hashes)
	}
	n := s.walk(hashes, from)
	if n > from {
		// A longer run: remember it, and mark its new nodes so that
		// evicting any of them drops the memo (the earlier ones are marked).
		for _, h := range hashes[from:n] {
			nd, _ := s.index.Get(h)
			s.list.At(nd).memo = head
		}
		s.memo[head] = memoRun{hashes: append(m.hashes[:from], hashes[from:n]...)}
	}
	return n
}

// touch makes h the most recently used, inserting it (and evicting the
// least recently used when full) if absent; first says it starts a prompt.
func (s *lruSet) touch(h uint64, first bool) {
	if n, ok := s.index.Get(h); ok {
		s.list.MoveToFront(n)
		return
	}
	s.makeRoom(1)
	n := s.list.Alloc(node{key: h, first: first, count: 1})
	s.index.Put(h, n)
	s.list.PushFront(n)
	s.size++
}

// addRun inserts k own blocks as the most recently used, evicting what
// does not fit, the run's own oldest blocks included.
func (s *lruSet) addRun(k int) {
	if k <= 0 {
		return
	}
	c := int32(min(k, int(s.capacity)))
	s.list.PushFront(s.list.Alloc(node{count: c, anon: true}))
	s.size += c
	s.makeRoom(0)
}

// makeRoom evicts least recently used blocks until k more fit.
func (s *lruSet) makeRoom(k int32) {
	for s.size+k > s.capacity {
		n := s.list.Back()
		nd := s.list.At(n)
		if nd.anon {
			drop := min(nd.count, s.size+k-s.capacity)
			nd.count -= drop
			s.size -= drop
			if nd.count > 0 {
				continue
			}
		} else {
			s.evict(n)
			s.size--
		}
		s.list.Unlink(n)
		s.list.Free(n)
	}
}

// evict drops hashed node n's block: from the index, from the heads table
// if it starts a prompt, and the memo of any run it was in.
func (s *lruSet) evict(n int32) {
	nd := s.list.At(n)
	s.index.Del(nd.key, n)
	if nd.memo != 0 {
		delete(s.memo, nd.memo)
	}
	if nd.first {
		s.dropHead(nd.key)
	}
}

// dropHead takes the instance out of first block h's holders.
func (s *lruSet) dropHead(h uint64) {
	if set, empty := s.heads[h].clear(s.word, s.bit); empty {
		delete(s.heads, h)
	} else {
		s.heads[h] = set
	}
}

// bitset is a set of instances, 64 a word.
type bitset []uint64

// set adds bit of word, growing the set as needed.
func (b bitset) set(word int, bit uint64) bitset {
	for len(b) <= word {
		b = append(b, 0)
	}
	b[word] |= bit
	return b
}

// clear removes bit of word and reports whether the set is then empty.
func (b bitset) clear(word int, bit uint64) (bitset, bool) {
	if word < len(b) {
		b[word] &^= bit
	}
	for _, w := range b {
		if w != 0 {
			return b, false
		}
	}
	return b, true
}
