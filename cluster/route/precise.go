package route

import (
	"fmt"

	"github.com/blis-sim/blis/sim"
)

// Prefix index modes: the router's own guess from where it sent what
// (approximate, PrefixIndex), or the instances' KV events (precise,
// PreciseIndex), as llm-d's precise prefix-cache scorer reads vLLM's.
const (
	PrefixApproximate = "approximate"
	PrefixPrecise     = "precise"
)

// TierWeights are what a block held in each tier is worth to the precise
// scorer (by sim.Tier: GPU, CPU, disk, store).
type TierWeights [sim.NumTiers]float64

// DefaultTierWeights: llm-d's precise prefix-cache scorer's
// kvCacheBackendConfigs, gpu 1.0 and cpu 0.8 (llm-d-kv-cache's
// configuration docs); the disk's and the store's are ours (each load
// costs more than the tier before it; docs/kv-tiers.md), configurable.
var DefaultTierWeights = TierWeights{1.0, 0.8, 0.6, 0.5}

// mustBeShares panics unless each weight is in [0, 1] (a precondition:
// the routing templates' cpu_weight, disk_weight and store_weight are
// range-checked where they are read).
func (w TierWeights) mustBeShares() {
	for t, x := range w {
		if !(x >= 0 && x <= 1) {
			panic(fmt.Sprintf("route: %s tier weight %v is not within [0, 1]", sim.Tier(t), x))
		}
	}
}

// PreciseIndex is the router's exact picture of each instance's KV: the
// shared blocks each holds and in which tiers (GPU, CPU, disk), fed by the
// instances' KV block events (sim.KVBlockEvent: vLLM's BlockStored and
// BlockRemoved with their medium), and the shared store's content for the
// instances linked to it. A prompt's score on an instance is the sum, over
// its leading blocks that some tier of the instance holds, of the best
// such tier's weight, over the prompt's full blocks: llm-d's longest-prefix
// scoring with kvCacheBackendConfigs weights.
type PreciseIndex struct {
	w     TierWeights
	inst  []map[uint64]uint8 // tier bits per block
	store func(uint64) bool  // nil: no store
	link  []bool             // instances linked to the store
}

// NewPreciseIndex returns an empty index with tier weights w.
func NewPreciseIndex(n int, w TierWeights) *PreciseIndex {
	return &PreciseIndex{w: w, inst: make([]map[uint64]uint8, n)}
}

// Apply records instance i's KV block event.
func (x *PreciseIndex) Apply(i int, ev sim.KVBlockEvent) {
	for i >= len(x.inst) {
		x.inst = append(x.inst, nil)
	}
	m := x.inst[i]
	if m == nil {
		m = map[uint64]uint8{}
		x.inst[i] = m
	}
	bit := uint8(1) << ev.Tier
	if ev.Removed {
		if b := m[ev.Hash] &^ bit; b != 0 {
			m[ev.Hash] = b
		} else {
			delete(m, ev.Hash)
		}
		return
	}
	m[ev.Hash] |= bit
}

// SetStore tells the index what the shared store holds (has, read at
// scoring time) and whether instance i is linked to it.
func (x *PreciseIndex) SetStore(has func(uint64) bool) { x.store = has }

// Link marks instance i as linked to the store.
func (x *PreciseIndex) Link(i int) {
	for i >= len(x.link) {
		x.link = append(x.link, false)
	}
	x.link[i] = true
}

// Forget drops instance i (gone for good).
func (x *PreciseIndex) Forget(i int) {
	if i < len(x.inst) {
		x.inst[i] = nil
	}
	if i < len(x.link) {
		x.link[i] = false
	}
}

// Blocks is how many shared blocks the index says instance i holds.
func (x *PreciseIndex) Blocks(i int) int {
	if i < len(x.inst) {
		return len(x.inst[i])
	}
	return 0
}

// Score writes the weighted leading match of hashes over blocks full
// blocks of each instance of idx (ascending, each < len(dst)).
func (x *PreciseIndex) Score(hashes []uint64, blocks int, idx []int32, dst []float64) {
	for _, i := range idx {
		dst[i] = 0
	}
	if blocks <= 0 || len(hashes) == 0 {
		return
	}
	// The store's leading run, once for every linked instance.
	var inStore int
	if x.store != nil {
		for inStore < len(hashes) && x.store(hashes[inStore]) {
			inStore++
		}
	}
	for _, i32 := range idx {
		i := int(i32)
		var m map[uint64]uint8
		if i < len(x.inst) {
			m = x.inst[i]
		}
		linked := i < len(x.link) && x.link[i]
		var sum float64
		for j, h := range hashes {
			var w float64
			if b := m[h]; b != 0 {
				for t := sim.TierGPU; t < sim.TierStore; t++ {
					if b&(1<<t) != 0 {
						w = max(w, x.w[t])
					}
				}
			}
			if linked && j < inStore {
				w = max(w, x.w[sim.TierStore])
			}
			if w == 0 {
				break
			}
			sum += w
		}
		dst[i] = sum / float64(blocks)
	}
}
