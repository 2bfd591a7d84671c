package sim

import (
	"math"
	"slices"

	"github.com/blis-sim/blis/internal/hashindex"
)

// kvBlock is one GPU KV block. Free blocks sit on an LRU list (kvCache's
// free ring): allocation takes from the head, release appends at the tail,
// so the block freed longest ago is reused (and its cached prefix evicted)
// first.
//
// A hashed block holds cached content. Shared content (a group's prefix)
// is registered in the prefix index, where any request can find it. A
// request's own content is not: only that request can ever ask for it
// again (after a preemption), so it finds it through its own record of
// the blocks it filled (request.holder), which spares the index an insert
// and a delete for most blocks (own marks those).
//
// A block's hash is kept apart (kvCache.hashes), so that this state, which
// allocation and release touch for every block, is 12 bytes a block.
//
// A block no one can find while it is free is detached: released by its
// only holder with content no lookup can reach (a request's own content
// once it has left, without a CPU tier to store it, or no content), it
// keeps the state allocation gave it (heldAlone). Its release and its next
// allocation then write nothing to it: at fleet scale, where each step
// finds its instance's blocks out of the processor's caches, those two
// writes per block were a fifth of the run.
//
// Detached blocks, like the blocks never used, are interchangeable: no one
// can name one, and each is in allocation's state. So the free list keeps
// only their places (kvCache's free ring: runs of them, by kind) and
// their ids apart (kvCache.spare), and a place of either kind is filled
// with the id of the detached block released last, or else a block never
// used. What the free list holds at each place, and so every eviction and
// every cache hit, is the free list's; only which id fills a place is
// not. A cache thus uses about as many blocks as it ever holds at once
// (plus the free ones holding content), reused while they are still in
// the processor's caches, rather than cycling through all of them.
type kvBlock struct {
	ref     int32
	freePos uint32 // its entry's position in the free ring, when onFree
	hashed  bool   // holds cached content under its hash
	own     bool   // hashed own content, not in the index
	onFree  bool
}

// heldAlone is a block's state while one request holds it alone, from its
// allocation until it is written to (cached, shared, released attached),
// and a detached free block's.
var heldAlone = kvBlock{ref: 1}

// holds says whether block b still holds the content hashed h (a
// request's own block, found through its holder record).
func (c *kvCache) holds(b int32, h uint64) bool {
	blk := &c.blocks[b]
	return blk.hashed && c.hashes[b] == h
}

// kvCache is the GPU block pool with hierarchical prefix caching (vLLM's
// automatic prefix caching): block i of a token stream is identified by a
// hash chained over blocks 0..i, so equal hashes mean equal prefixes.
//
// Memory follows the blocks used, not the blocks configured: blocks[i]
// exists only once block i has been allocated. The free list starts with
// n-taken places of blocks never used (they were its first entries, and
// every released block is appended after them), so they are implicit,
// handed out before the ring's head; the ids not yet used are
// len(blocks)..n-1, taken in order when no detached block's id is spare.
// A cache of 2^31 blocks thus costs nothing until a workload fills it.
//
// The released blocks on the free list are a FIFO ring (freeEnt) rather
// than a linked list, so that allocating a block reads the ring in order
// and writes the block, instead of reading the block and its neighbours on
// the list first (each one a cache miss: the list's order is unrelated to
// the blocks' addresses). A block taken off the list from the middle (a
// prefix hit on a free block) leaves its entry behind, stale. Allocation
// skips stale entries; they are dropped when they outnumber the live ones.
// Detached blocks take one entry per run of places of one kind.
type kvCache struct {
	blockSize int64
	n         int64     // blocks in the cache
	blocks    []kvBlock // the blocks used so far, ids 0..len-1
	hashes    []uint64  // hashes[b] is block b's prefix hash, when it is hashed
	// ring holds the released part of the free list, from position head
	// to tail (wrapping uint32 positions; index pos & (len(ring)-1)).
	ring       []freeEnt
	head, tail uint32
	stale      int64 // entries between head and tail taken off the list
	// taken is how many of the free list's first n places, those of the
	// blocks never used, allocation has filled.
	taken int64
	// spare holds the ids of the detached free blocks, the one released
	// last at the end. The free list's places of blocks never used and of
	// detached blocks are filled from it first, then with ids never used:
	// len(spare) + n - len(blocks) = fresh() + the detached places.
	spare   []int32
	numFree int64            // free blocks: places never used, detached places and the ring's live entries
	prefix  bool             // prefix caching on
	index   *hashindex.Index // hash → block holding that prefix
	cpu     *cpuTier         // nil without CPU offload
	// x is the state of the tiers beyond the GPU (sim/tiers.go): nil
	// without a CPU tier, a disk, a store or KV block events.
	x *tierState

	evictions int64 // cached blocks whose content was dropped by reuse
	offloaded int64 // blocks copied to the CPU tier when evicted under pressure
	// stepStored counts blocks stored to the CPU tier during the current step.
	stepStored int64
	now        int64 // µs, for the CPU tier's thrashing detector
}

// eagerBlocks is the number of blocks a request's block table and hash
// chain have room for from the start (Engine.blockCap).
const eagerBlocks = 1 << 16

// kvEagerBlocks is the number of blocks the cache has room for from the
// start (10 KiB); beyond it, blocks is grown as blocks are first used, so
// that an idle instance costs little (it once reserved 1.3 MiB).
const kvEagerBlocks = 1 << 9

func newKVCache(total, blockSize int64, prefix bool, cpu *cpuTier) *kvCache {
	c := &kvCache{
		blockSize: blockSize,
		n:         total,
		blocks:    make([]kvBlock, 0, min(total, kvEagerBlocks)),
		hashes:    make([]uint64, 0, min(total, kvEagerBlocks)),
		numFree:   total,
		prefix:    prefix,
		cpu:       cpu,
	}
	if prefix {
		// The index keeps only tags; a match is confirmed against the
		// block's own hash, which the lookup reads next anyway.
		c.index = hashindex.New(total, func(b int32) uint64 { return c.hashes[b] })
	}
	return c
}

func (c *kvCache) total() int64 { return c.n }

// fresh is the number of places of blocks never used yet, the head of the
// free list.
func (c *kvCache) fresh() int64 { return c.n - c.taken }
func (c *kvCache) used() int64  { return c.total() - c.numFree }

// freeEnt is a ring entry: a released block and the kind of content it
// held when released, which cannot change while it is free (only
// allocation evicts it), so that taking a block from the head reads the
// ring, in order, and only writes the block, unless its content was
// shared (the prefix index needs its hash). b is -1 once the block was
// taken off the list from the middle (a prefix hit on a free block).
// detached marks a run of b (>= 1) places of detached blocks, whose ids
// are spare: hashed is then content no one can find, whose reuse counts
// as an eviction.
type freeEnt struct {
	b                     int32
	hashed, own, detached bool
}

// pushTail puts a released block, whose content is of the kind given, at
// the tail of the free list.
func (c *kvCache) pushTail(b int32, hashed, own bool) {
	if int(c.tail-c.head) == len(c.ring) {
		c.growRing()
	}
	blk := &c.blocks[b]
	blk.freePos, blk.onFree = c.tail, true
	c.pushEnt(freeEnt{b: b, hashed: hashed, own: own})
}

// pushEnt appends e to the free ring (its block's state is written by the
// caller, if at all).
func (c *kvCache) pushEnt(e freeEnt) {
	c.ring[c.tail&uint32(len(c.ring)-1)] = e
	c.tail++
	c.numFree++
}

// pushDetached puts a released block, in allocation's state, at the tail
// of the free list without writing to it: its id to the spare ones, its
// place to the run of detached places at the tail, or a new one; hashed
// says it holds content (no one's to find).
func (c *kvCache) pushDetached(b int32, hashed bool) {
	c.spare = append(c.spare, b)
	if c.tail != c.head {
		if e := &c.ring[(c.tail-1)&uint32(len(c.ring)-1)]; e.detached && e.hashed == hashed && e.b < math.MaxInt32 {
			e.b++
			c.numFree++
			return
		}
	}
	if int(c.tail-c.head) == len(c.ring) {
		c.growRing()
	}
	c.pushEnt(freeEnt{b: 1, hashed: hashed, own: hashed, detached: true})
}

// takeID is the id for a place of a block never used or of a detached
// block: the detached block released last, or else the next id never used
// (its block created in allocation's state).
func (c *kvCache) takeID() int32 {
	if n := len(c.spare); n > 0 {
		b := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return b
	}
	b := int32(len(c.blocks))
	if len(c.blocks) == cap(c.blocks) {
		more := int(min(c.n-int64(len(c.blocks)), int64(len(c.blocks))))
		c.blocks = slices.Grow(c.blocks, more)
		c.hashes = slices.Grow(c.hashes, more)
	}
	c.blocks = append(c.blocks, heldAlone)
	c.hashes = append(c.hashes, 0)
	return b
}

// growRing doubles the ring. Positions are kept: an entry's index is its
// position modulo the ring's length.
func (c *kvCache) growRing() {
	ring := make([]freeEnt, max(64, 2*len(c.ring)))
	for pos := c.head; pos != c.tail; pos++ {
		ring[pos&uint32(len(ring)-1)] = c.ring[pos&uint32(len(c.ring)-1)]
	}
	c.ring = ring
}

// popHead takes the place at the head of the free list (the ring must
// hold a live one): its entry, or one place of a run of detached ones
// (the entry, b counting the run).
func (c *kvCache) popHead() freeEnt {
	for {
		p := &c.ring[c.head&uint32(len(c.ring)-1)]
		e := *p
		switch {
		case e.b < 0:
			c.head++
			c.stale--
			continue
		case e.detached && e.b > 1:
			p.b--
		default:
			c.head++
		}
		c.numFree--
		return e
	}
}

// unlink takes a free block off the list wherever it is; its ring entry
// goes stale.
func (c *kvCache) unlink(b int32) {
	blk := &c.blocks[b]
	blk.onFree = false
	c.ring[blk.freePos&uint32(len(c.ring)-1)].b = -1
	c.numFree--
	c.stale++
	if live := int64(c.tail-c.head) - c.stale; c.stale > max(live, 64) {
		c.compactRing()
	}
}

// compactRing drops the stale entries, keeping the live ones' order: O(n),
// paid for by the more than n/2 unlinks since the last one. The live
// entries stay fewer than 2^31 (one per free block at most) and the stale
// ones at most as many (or 64), so positions in use never wrap onto one
// another.
func (c *kvCache) compactRing() {
	m := uint32(len(c.ring) - 1)
	w := c.head
	for pos := c.head; pos != c.tail; pos++ {
		if e := c.ring[pos&m]; e.b >= 0 {
			c.ring[w&m] = e
			if !e.detached {
				c.blocks[e.b].freePos = w
			}
			w++
		}
	}
	c.tail = w
	c.stale = 0
}

// eachReleased calls f with every block on the ring, head first, but the
// detached ones (whose places are runs, their ids spare).
func (c *kvCache) eachReleased(f func(int32)) {
	c.eachFree(func(e freeEnt) {
		if !e.detached {
			f(e.b)
		}
	})
}

// eachFree calls f with every live entry of the ring, head first (a run
// of detached places is one entry).
func (c *kvCache) eachFree(f func(freeEnt)) {
	for pos := c.head; pos != c.tail; pos++ {
		if e := c.ring[pos&uint32(len(c.ring)-1)]; e.b >= 0 {
			f(e)
		}
	}
}

// match counts the leading hashes whose blocks the prefix index holds:
// shared content only (a request's own blocks are found through it).
func (c *kvCache) match(hashes []uint64) (hits int64) {
	if !c.prefix {
		return 0
	}
	for _, h := range hashes {
		if _, ok := c.index.Get(h); !ok {
			break
		}
		hits++
	}
	return hits
}

// acquire takes a reference on each of blocks (cached blocks a match
// found) and appends them to dst.
func (c *kvCache) acquire(blocks []int32, dst []int32) []int32 {
	for _, b := range blocks {
		if c.blocks[b].ref == 0 {
			c.unlink(b)
		}
		c.blocks[b].ref++
		dst = append(dst, b)
	}
	return dst
}

// allocate appends n fresh blocks, or none at all when fewer are free:
// allocation is transactional.
func (c *kvCache) allocate(n int64, dst []int32) ([]int32, bool) {
	if n > c.numFree {
		return dst, false
	}
	for ; n > 0; n-- {
		var b int32
		if c.fresh() > 0 {
			// A place of a block never used: it was the free list's head.
			c.taken++
			c.numFree--
			b = c.takeID()
		} else {
			// At most writes to the block: its content is in the entry.
			e := c.popHead()
			if e.hashed {
				c.evict(e)
			}
			if e.detached {
				b = c.takeID()
			} else {
				b = e.b
				c.blocks[b] = heldAlone
			}
		}
		dst = append(dst, b)
	}
	return dst, true
}

// evict drops a cached block's prefix entry as the block is reused (the
// allocation then clears its state). Under memory pressure the content is
// first stored to the CPU tier.
func (c *kvCache) evict(e freeEnt) {
	c.evictions++
	if e.detached {
		return // no one's to find, and no CPU tier
	}
	if !e.own {
		c.index.Del(c.hashes[e.b], e.b)
	}
	if c.x != nil && !e.own {
		c.x.event(c.hashes[e.b], TierGPU, true)
	}
	if c.cpu != nil && c.cpu.pressure(c) {
		if c.cpu.store(c.hashes[e.b], c.now, !e.own) {
			c.offloaded++
			c.stepStored++
		}
	}
}

// release drops one reference on each block, last block first, so that a
// sequence's tail is evicted before its head (its head is likelier shared).
func (c *kvCache) release(blocks []int32) { c.releaseOwn(blocks, nil, int64(len(blocks)), 0) }

// releaseOwn is release for a request whose blocks from index from on are
// its own, held by it alone and holding no cached content (in the state
// allocation gave them), except that blocks[from:to] are registered now as
// its own content under hashes[from:to] (as content no one can find, with
// hashes nil). Those registered under a hash are written, not read; the
// others are released detached, untouched: a cache miss or two less per
// block.
func (c *kvCache) releaseOwn(blocks []int32, hashes []uint64, from, to int64) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if k := int64(i); k >= from {
			hashed := k < to
			if !hashed || hashes == nil {
				c.pushDetached(b, hashed)
				continue
			}
			blk := &c.blocks[b]
			blk.hashed, blk.own, blk.ref = true, true, 0
			c.hashes[b] = hashes[k]
			c.pushTail(b, true, true)
			continue
		}
		blk := &c.blocks[b]
		blk.ref--
		if blk.ref == 0 {
			c.pushTail(b, blk.hashed, blk.own)
		}
	}
}

// commit registers a block of shared content that has just become full
// under its prefix hash. When another block already holds that prefix the
// block stays anonymous.
func (c *kvCache) commit(b int32, h uint64) {
	if !c.prefix {
		return
	}
	if c.index.Put(h, b) {
		c.hashes[b], c.blocks[b].hashed = h, true
		if c.x != nil {
			c.x.filled(h)
		}
	}
}

// cpuTier is the host-memory KV tier: a capacity-bounded LRU set of block
// hashes. GPU blocks evicted while GPU usage is above the offload threshold
// are stored here; a prefix that misses on the GPU but hits here is reloaded
// over PCIe instead of being recomputed.
type cpuTier struct {
	capacity  int64
	threshold float64 // GPU usage share above which evicted blocks are stored
	entries   map[uint64]*cpuEntry
	head      *cpuEntry // least recently used
	tail      *cpuEntry
	// pool is the chunk new entries are taken from. Entries never move: a
	// full chunk is left to the entries in it and a new one started, so
	// memory follows the blocks stored, not the capacity.
	pool []cpuEntry

	stored, reloaded, evicted, thrashing int64
	stepEvicted                          int64

	// x, when not nil, hears what the tier evicts (sim/tiers.go: KV block
	// events, and the CPU tier's spill to the disk); tier is which tier
	// this is (a disk is a cpuTier too).
	x    *tierState
	tier Tier
}

type cpuEntry struct {
	hash uint64
	// storedAt is when the block was stored; on a disk, when its write
	// is done and it can be read.
	storedAt   int64
	shared     bool // shared content (KV block events report it)
	prev, next *cpuEntry
}

// thrashWindowUs: a block reloaded this soon after it was stored counts as
// thrashing (docs/anomalies.md: 1000 ticks).
const thrashWindowUs = 1000

// CPU tier entries are allocated in chunks that follow the blocks stored:
// the first holds cpuFirstChunk, each next one twice the last, up to
// cpuChunk, never past the capacity. A tier that is never used costs
// nothing, so memory follows the blocks used at any tier size and any
// instance count (a first chunk of min(capacity, cpuChunk) reserved
// ~2.5 MB per instance, 1.2 GB at 512 instances).
const (
	cpuFirstChunk = 64
	cpuChunk      = 1 << 16
)

func newCPUTier(capacity int64, threshold float64) *cpuTier {
	return &cpuTier{
		capacity:  capacity,
		threshold: threshold,
		entries:   make(map[uint64]*cpuEntry),
	}
}

func (t *cpuTier) pressure(c *kvCache) bool {
	return float64(c.used()) > t.threshold*float64(c.total())
}

func (t *cpuTier) unlink(e *cpuEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		t.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (t *cpuTier) append(e *cpuEntry) {
	e.prev = t.tail
	if t.tail != nil {
		t.tail.next = e
	} else {
		t.head = e
	}
	t.tail = e
}

// store copies a block's content to the CPU; it reports whether a transfer
// happened (false when the content was already there). shared says the
// content is shared (not a request's own).
func (t *cpuTier) store(h uint64, now int64, shared bool) bool {
	if e, ok := t.entries[h]; ok {
		t.unlink(e)
		t.append(e)
		return false
	}
	var e *cpuEntry
	if int64(len(t.entries)) >= t.capacity {
		e = t.head
		t.unlink(e)
		delete(t.entries, e.hash)
		t.evicted++
		t.stepEvicted++
		if t.x != nil {
			t.x.evicted(t.tier, e.hash, e.shared, now)
		}
	} else {
		if len(t.pool) == cap(t.pool) {
			// A new chunk; append never moves the entries the list and
			// the map point to.
			next := min(max(2*int64(cap(t.pool)), cpuFirstChunk), cpuChunk)
			t.pool = make([]cpuEntry, 0, min(t.capacity-int64(len(t.entries)), next))
		}
		t.pool = append(t.pool, cpuEntry{})
		e = &t.pool[len(t.pool)-1]
	}
	*e = cpuEntry{hash: h, storedAt: now, shared: shared}
	t.entries[h] = e
	t.append(e)
	t.stored++
	if t.x != nil && shared {
		t.x.event(h, t.tier, false)
	}
	return true
}

// has reports whether the tier holds h.
func (t *cpuTier) has(h uint64) bool {
	_, ok := t.entries[h]
	return ok
}

// ready reports whether the tier holds h, stored (written) by now.
func (t *cpuTier) ready(h uint64, now int64) bool {
	e, ok := t.entries[h]
	return ok && e.storedAt <= now
}

// touch marks h, which the tier holds, as read now: the most recently
// used.
func (t *cpuTier) touch(h uint64) {
	e := t.entries[h]
	t.unlink(e)
	t.append(e)
	t.reloaded++
}

// match counts leading hashes present on the CPU.
func (t *cpuTier) match(hashes []uint64) int64 {
	var n int64
	for _, h := range hashes {
		if _, ok := t.entries[h]; !ok {
			break
		}
		n++
	}
	return n
}

// reload marks n leading hashes as read back to the GPU; it returns how
// many of them count as thrashing.
func (t *cpuTier) reload(hashes []uint64, now int64) (thrash int64) {
	for _, h := range hashes {
		e := t.entries[h]
		if now-e.storedAt < thrashWindowUs {
			t.thrashing++
			thrash++
		}
		t.unlink(e)
		t.append(e)
		t.reloaded++
	}
	return thrash
}
