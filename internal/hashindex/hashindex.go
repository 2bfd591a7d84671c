// Package hashindex is an open-addressing hash table from well-mixed 64-bit
// keys (chained block hashes) to int32 values, without the hashing and
// bookkeeping of a Go map. The engine's prefix cache and the router's
// prefix index both use it.
package hashindex

import "math/bits"

// Index maps a key to a value. It is an open-addressing table with linear
// probing and backward-shift deletion: the keys are already well-mixed
// 64-bit hashes, so it skips the hashing and bookkeeping of a Go map, which
// dominated the engine's profile (every filled block is inserted, every
// reused one deleted). Key 0 marks an empty slot, so a key of 0 is stored
// as 1; a collision of two real prefixes is as unlikely as any 64-bit hash
// collision. It holds at most the capacity it was made with.
type Index struct {
	slots []slot
	mask  uint64
	n     int
}

// slot keeps a key beside its value, so that a lookup touches one cache
// line: the tables of many instances do not fit in cache, and a miss costs
// more than the probe.
type slot struct {
	key uint64
	val int32
}

// New returns an empty index for at most capacity keys, with twice as
// many slots.
func New(capacity int64) *Index {
	size := uint64(1) << bits.Len64(uint64(max(capacity, 4))*2-1)
	return &Index{slots: make([]slot, size), mask: size - 1}
}

func nonzero(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
}

// Get returns the value of k.
func (p *Index) Get(k uint64) (int32, bool) {
	k = nonzero(k)
	for i := k & p.mask; ; i = (i + 1) & p.mask {
		switch s := &p.slots[i]; s.key {
		case k:
			return s.val, true
		case 0:
			return 0, false
		}
	}
}

// Put inserts k unless present; it reports whether it inserted. The
// caller keeps the count within the capacity, so the table never fills.
func (p *Index) Put(k uint64, v int32) bool {
	k = nonzero(k)
	for i := k & p.mask; ; i = (i + 1) & p.mask {
		switch s := &p.slots[i]; s.key {
		case k:
			return false
		case 0:
			*s = slot{key: k, val: v}
			p.n++
			return true
		}
	}
}

// Del removes k if present.
func (p *Index) Del(k uint64) {
	k = nonzero(k)
	i := k & p.mask
	for p.slots[i].key != k {
		if p.slots[i].key == 0 {
			return
		}
		i = (i + 1) & p.mask
	}
	// Shift later members of the probe run back into the hole unless their
	// home slot lies cyclically in (hole, j].
	for j := (i + 1) & p.mask; p.slots[j].key != 0; j = (j + 1) & p.mask {
		home := p.slots[j].key & p.mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			p.slots[i] = p.slots[j]
			i = j
		}
	}
	p.slots[i].key = 0
	p.n--
}

// Len is the number of keys.
func (p *Index) Len() int { return p.n }
