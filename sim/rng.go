package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
)

// Stream names of the partitioned RNG. Each subsystem draws only from its
// own stream, so adding a draw in one never shifts another's sequence.
const (
	StreamWorkload     = "workload"
	StreamLatencyNoise = "latency-noise"
	StreamTraceJourney = "trace-journey"
	StreamTraceStep    = "trace-step"
	// StreamCounterfactual samples routing decisions for counterfactual
	// simulation (a rate; cluster.Counterfactual).
	StreamCounterfactual = "counterfactual"
)

// InstanceStream is the name of instance index's own stream of a
// per-instance subsystem (latency noise, trace sampling): the subsystem's
// name for instance 0, so that a one-instance cluster draws exactly as a
// single-instance run does, and name/instance_<index> for the others.
// Instance indices are never reused, so neither are stream names, and
// adding an instance shifts no other instance's draws.
func InstanceStream(name string, index int) string {
	if index == 0 {
		return name
	}
	return name + "/instance_" + strconv.Itoa(index)
}

// RNG derives independent random streams from one seed (docs/simulator.md, determinism):
// stream s is a PCG seeded with (seed, FNV-1a(s)).
type RNG struct{ seed uint64 }

// NewRNG returns the partitioned RNG of a run.
func NewRNG(seed int64) RNG { return RNG{seed: uint64(seed)} }

// Stream returns a fresh generator for the named subsystem. Two calls with
// the same name return generators with the same sequence.
func (r RNG) Stream(name string) *rand.Rand { return rand.New(r.Source(name)) }

// Source is the named stream's generator itself, whose state can be
// copied (Stream wraps it).
func (r RNG) Source(name string) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.NewPCG(r.seed, h.Sum64())
}
