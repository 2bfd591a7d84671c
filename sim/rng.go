package sim

import (
	"hash/fnv"
	"math/rand/v2"
)

// Stream names of the partitioned RNG. Each subsystem draws only from its
// own stream, so adding a draw in one never shifts another's sequence.
const (
	StreamWorkload     = "workload"
	StreamLatencyNoise = "latency-noise"
	StreamTraceJourney = "trace-journey"
	StreamTraceStep    = "trace-step"
)

// RNG derives independent random streams from one seed (seed 002, E.2):
// stream s is a PCG seeded with (seed, FNV-1a(s)).
type RNG struct{ seed uint64 }

// NewRNG returns the partitioned RNG of a run.
func NewRNG(seed int64) RNG { return RNG{seed: uint64(seed)} }

// Stream returns a fresh generator for the named subsystem. Two calls with
// the same name return generators with the same sequence.
func (r RNG) Stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(r.seed, h.Sum64()))
}
