package sim

import "math/bits"

// prefixIndex maps a block's prefix hash to the block that holds it. It is
// an open-addressing table with linear probing and backward-shift deletion:
// the keys are already well-mixed 64-bit hashes, so it skips the hashing and
// bookkeeping of a Go map, which dominated the profile (every filled block is
// inserted, every reused one deleted). Key 0 marks an empty slot, so a hash
// of 0 is stored as 1; a collision of two real prefixes is as unlikely as
// any 64-bit hash collision.
type prefixIndex struct {
	keys []uint64
	vals []int32
	mask uint64
	n    int
}

func newPrefixIndex(capacity int64) *prefixIndex {
	size := uint64(1) << bits.Len64(uint64(max(capacity, 4))*2-1)
	return &prefixIndex{keys: make([]uint64, size), vals: make([]int32, size), mask: size - 1}
}

func nonzero(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
}

func (p *prefixIndex) get(k uint64) (int32, bool) {
	k = nonzero(k)
	for i := k & p.mask; ; i = (i + 1) & p.mask {
		switch p.keys[i] {
		case k:
			return p.vals[i], true
		case 0:
			return 0, false
		}
	}
}

// put inserts k unless present; it reports whether it inserted. The table
// never fills: it holds at most one entry per block and has twice as many
// slots.
func (p *prefixIndex) put(k uint64, v int32) bool {
	k = nonzero(k)
	for i := k & p.mask; ; i = (i + 1) & p.mask {
		switch p.keys[i] {
		case k:
			return false
		case 0:
			p.keys[i], p.vals[i] = k, v
			p.n++
			return true
		}
	}
}

func (p *prefixIndex) del(k uint64) {
	k = nonzero(k)
	i := k & p.mask
	for p.keys[i] != k {
		if p.keys[i] == 0 {
			return
		}
		i = (i + 1) & p.mask
	}
	// Shift later members of the probe run back into the hole unless their
	// home slot lies cyclically in (hole, j].
	for j := (i + 1) & p.mask; p.keys[j] != 0; j = (j + 1) & p.mask {
		home := p.keys[j] & p.mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			p.keys[i], p.vals[i] = p.keys[j], p.vals[j]
			i = j
		}
	}
	p.keys[i] = 0
	p.n--
}

func (p *prefixIndex) len() int { return p.n }
