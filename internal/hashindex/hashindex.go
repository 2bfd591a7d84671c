// Package hashindex is an open-addressing hash table from well-mixed
// 64-bit keys (chained block hashes) to int32 values, small enough that
// the tables of many simulated instances stay in cache. The engine's
// prefix cache and the router's prefix index both use it.
package hashindex

// Index maps keys to values in [0, 2^31−1). A slot holds only a key's
// 32-bit tag (its high half) and the value; the caller keeps each value's
// full key (a block's hash, in the block the lookup goes on to read
// anyway) and gives the index a function to read it, with which a lookup
// confirms a tag match: the index is exact while a slot takes 8 bytes
// instead of 16. Its home slot comes from the tag (multiply-shift over the
// table size), so that probing and deletion never read the caller's keys.
//
// Collisions are resolved by linear probing with backward-shift deletion
// (no tombstones). The table keeps at least two slots per key, so that
// probe runs stay short even when full; the caller keeps the number of
// keys within the capacity.
//
// Memory follows the keys actually held: the table starts with two slots
// per key of capacity up to EagerKeys keys, and doubles (up to two slots
// per key of capacity) when half full. A capacity given by a user (a KV
// cache of 2^31 blocks) therefore costs nothing until it is used.
type Index struct {
	slots   []uint64 // tag<<32 | (value+1); 0 is empty
	size    uint64
	maxSize uint64 // two slots per key of capacity
	n       int
	keyOf   func(v int32) uint64
}

// EagerKeys is the number of keys an index has room for from the start
// (4 KiB of slots); a larger capacity is reached by growing, so that an
// instance that has served nothing costs next to nothing (a fleet of
// 4,096 idle instances once reserved 1.7 GB of tables at 1 MiB each).
const EagerKeys = 1 << 8

// New returns an empty index for at most capacity keys; keyOf(v) is the
// key value v is stored under.
func New(capacity int64, keyOf func(v int32) uint64) *Index {
	maxSize := 2 * uint64(max(capacity, 8))
	size := min(maxSize, 2*EagerKeys)
	return &Index{slots: make([]uint64, size), size: size, maxSize: maxSize, keyOf: keyOf}
}

// grow doubles the table (up to maxSize) and reinserts every slot; homes
// come from tags alone, so keyOf is not read.
func (p *Index) grow() {
	old := p.slots
	p.size = min(2*p.size, p.maxSize)
	p.slots = make([]uint64, p.size)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := p.home(uint32(s >> 32))
		for p.slots[i] != 0 {
			i = p.next(i)
		}
		p.slots[i] = s
	}
}

func tag(k uint64) uint32 { return uint32(k >> 32) }

func (p *Index) home(t uint32) uint64 { return uint64(t) * p.size >> 32 }

func (p *Index) next(i uint64) uint64 {
	if i++; i == p.size {
		return 0
	}
	return i
}

func slotValue(s uint64) int32 { return int32(uint32(s)) - 1 }

// Get returns the value of k.
func (p *Index) Get(k uint64) (int32, bool) {
	t := tag(k)
	for i := p.home(t); ; i = p.next(i) {
		s := p.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == t {
			if v := slotValue(s); p.keyOf(v) == k {
				return v, true
			}
		}
	}
}

// Put maps k to v unless k is present; it reports whether it inserted.
// keyOf must give the key of every value already in the index (v's own key
// need not be set yet).
func (p *Index) Put(k uint64, v int32) bool {
	t := tag(k)
	for i := p.home(t); ; i = p.next(i) {
		s := p.slots[i]
		if s == 0 {
			if uint64(p.n) >= p.size/2 && p.size < p.maxSize {
				// Half full: grow, then insert into the new table.
				p.grow()
				return p.Put(k, v)
			}
			p.slots[i] = uint64(t)<<32 | uint64(uint32(v+1))
			p.n++
			return true
		}
		if uint32(s>>32) == t && p.keyOf(slotValue(s)) == k {
			return false
		}
	}
}

// Del removes value v, which must be stored under key k if it is in the
// index at all (keyOf(v) == k).
func (p *Index) Del(k uint64, v int32) {
	t := tag(k)
	want := uint64(t)<<32 | uint64(uint32(v+1))
	i := p.home(t)
	for p.slots[i] != want {
		if p.slots[i] == 0 {
			return
		}
		i = p.next(i)
	}
	// Shift later members of the probe run back into the hole unless their
	// home slot lies cyclically in (hole, j].
	for j := p.next(i); p.slots[j] != 0; j = p.next(j) {
		h := p.home(uint32(p.slots[j] >> 32))
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			p.slots[i] = p.slots[j]
			i = j
		}
	}
	p.slots[i] = 0
	p.n--
}

// Len is the number of keys.
func (p *Index) Len() int { return p.n }

// Clone returns an independent copy of the index whose lookups read keys
// through keyOf (the copy's owner's keys).
func (p *Index) Clone(keyOf func(v int32) uint64) *Index { return p.CloneInto(nil, keyOf) }

// CloneInto is Clone in old's table (an index nothing uses any more; nil:
// a new one), which it returns.
func (p *Index) CloneInto(old *Index, keyOf func(v int32) uint64) *Index {
	if old == nil {
		old = &Index{}
	}
	slots := old.slots
	*old = *p
	old.slots = append(slots[:0], p.slots...)
	old.keyOf = keyOf
	return old
}
