package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func (m constModel) CloneLatency() (LatencyModel, error) { return m, nil }

// cloneRig drives an engine through a workload as a cluster would:
// requests injected just in time, every event advanced, and now and then
// a request aborted. Its position (the next request, the operation count)
// is a value, so that a clone of the engine can be driven on from where
// the original was.
type cloneRig struct {
	reqs []RequestSpec
	next int // the next request to inject
	ops  int
	done []Completion
}

// drive performs n operations (all that are left when n < 0).
func (g *cloneRig) drive(t *testing.T, e *Engine, n int) {
	t.Helper()
	for ; n != 0; n-- {
		at, ok := e.NextEventUs()
		if g.next < len(g.reqs) && (!ok || g.reqs[g.next].ArrivalUs <= at) {
			q := g.reqs[g.next]
			require.NoError(t, e.Inject(q, max(q.ArrivalUs, e.Now())))
			g.next++
		} else if !ok {
			return
		} else {
			require.NoError(t, e.Advance())
			g.done = append(g.done, e.Completions()...)
		}
		g.ops++
		if g.ops%23 == 0 && g.next > 4 {
			if hit, err := e.Abort(g.reqs[g.next-4].ID, e.Now()); err == nil && hit {
				g.done = append(g.done, e.Completions()...)
			}
		}
	}
}

// cloneConfig is a random engine under memory pressure: a small GPU cache
// (preemptions), sometimes a CPU tier (offload and reload), any
// scheduler, async scheduling or not, and a noisy blackbox model, so
// that step times depend on the batch and on the noise stream's position.
func cloneConfig(r *rand.Rand, seed uint64) Config {
	cfg := baseConfig()
	cfg.Options.Exhaustive = false
	cfg.Engine.TotalKVBlocksGPU = int64(60 + r.IntN(200))
	cfg.Policies.Scheduler = SchedulerPolicy(r.IntN(4))
	cfg.Policies.Priority = PriorityPolicy{Kind: PrioritySLOBased, AgeWeight: 1, ClassScore: [4]float64{50, 100, 50, 10}}
	cfg.Engine.Pipeline.AsyncDepth = r.IntN(2)
	cfg.Engine.Pipeline.OutputDelayUs = int64(r.IntN(2000))
	if r.IntN(2) == 0 {
		cfg.Engine.TotalKVBlocksCPU = int64(100 + r.IntN(400))
		cfg.Engine.CPUOffloading = true
		cfg.Engine.OffloadThreshold = 0.5
	}
	bb := &Blackbox{Alpha: [3]float64{200, 0.1, 1}, Beta: [3]float64{800, 2, 30}}
	cfg.Latency = NewNoisySource(bb, 0.2, NewRNG(int64(seed)).Source("noise"))
	return cfg
}

// TestCloneContinuesAsTheOriginal: a clone made at any point and driven
// on with the same calls reports exactly what the original reports from
// that point (journeys, steps, KV events, completions, status); a second
// clone driven elsewhere (other requests, to the end) changes nothing in
// the original, whose whole run equals that of an engine never cloned.
func TestCloneContinuesAsTheOriginal(t *testing.T) {
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			reqs := randomWorkload(r, 250)
			for i := range reqs {
				reqs[i].SLOClass = SLOClass(r.IntN(4))
			}
			at := 50 + r.IntN(500) // the operation the clones are made after

			var refObs recorder
			refCfg := cloneConfig(rand.New(rand.NewPCG(seed, 6)), seed)
			refCfg.Observer = &refObs
			ref, err := NewEngine(refCfg)
			require.NoError(t, err)
			refRig := &cloneRig{reqs: reqs}
			refRig.drive(t, ref, -1)
			refRes, err := ref.Finish()
			require.NoError(t, err)

			var obs recorder
			cfg := cloneConfig(rand.New(rand.NewPCG(seed, 6)), seed)
			cfg.Observer = &obs
			e, err := NewEngine(cfg)
			require.NoError(t, err)
			rig := &cloneRig{reqs: reqs}
			rig.drive(t, e, at)
			mark := obs // lengths at the clone
			doneAt, nextAtClone, opsAtClone := len(rig.done), rig.next, rig.ops

			// The replay reuses the memory of a clone of another engine,
			// driven on after it was made (CloneInto).
			junkCfg := cloneConfig(rand.New(rand.NewPCG(seed+100, 6)), seed+100)
			junkEng, err := NewEngine(junkCfg)
			require.NoError(t, err)
			junkRig := &cloneRig{reqs: randomWorkload(rand.New(rand.NewPCG(seed+100, 5)), 250)}
			junkRig.drive(t, junkEng, 300)
			junk, err := junkEng.Clone(nil)
			require.NoError(t, err)
			junkRig.drive(t, junk, 60)

			var replayObs, otherObs recorder
			replay, err := e.CloneInto(junk, &replayObs)
			require.NoError(t, err)
			require.Same(t, junk, replay)
			other, err := e.Clone(&otherObs)
			require.NoError(t, err)
			require.Equal(t, e.Status(), replay.Status())

			// The other clone serves a different future to its end.
			otherRig := &cloneRig{reqs: slices.Clone(reqs[:rig.next]), next: rig.next, ops: rig.ops}
			for k := 0; k < 40; k++ {
				q := RequestSpec{ID: 10_000 + int64(k), ArrivalUs: other.Now() + int64(k)*300, PromptTokens: 700, OutputTokens: 90}
				otherRig.reqs = append(otherRig.reqs, q)
			}
			otherRig.drive(t, other, -1)
			_, err = other.Finish()
			require.NoError(t, err)

			rig.drive(t, e, -1)
			res, err := e.Finish()
			require.NoError(t, err)
			a, _ := json.Marshal(refRes)
			b, _ := json.Marshal(res)
			require.Equal(t, string(a), string(b), "cloning changed the original's run")
			require.Equal(t, refObs, obs, "cloning changed what the original reported")
			require.Equal(t, refRig.done, rig.done)

			replayRig := &cloneRig{reqs: reqs, next: nextAtClone, ops: opsAtClone}
			replayRig.drive(t, replay, -1)
			require.Equal(t, obs.journeys[len(mark.journeys):], replayObs.journeys)
			require.Equal(t, obs.steps[len(mark.steps):], replayObs.steps)
			require.Equal(t, obs.kv[len(mark.kv):], replayObs.kv)
			require.Equal(t, obs.dropped[len(mark.dropped):], replayObs.dropped)
			require.Equal(t, rig.done[doneAt:], replayRig.done)
			require.Equal(t, e.Status(), replay.Status())
			cres, err := replay.Finish()
			require.NoError(t, err)
			require.Equal(t, res.Requests, cres.Requests)
			require.Equal(t, res.Steps, cres.Steps)
			require.Equal(t, res.Preemptions, cres.Preemptions)
			require.Equal(t, res.KVOffload, cres.KVOffload)
		})
	}
}

// TestCloneCoversEveryField fails when the engine (or a structure it
// owns) gains a field that holds a reference (slice, map, pointer,
// function, interface): Engine.Clone copies every field by value first,
// so such a field would be shared between an engine and its clone unless
// Clone copies it. Add it to Clone, then here.
func TestCloneCoversEveryField(t *testing.T) {
	handled := map[string][]string{
		"Engine":    {"cfg", "reqs", "free", "int32s", "uint64s", "events", "waiting", "running", "kv", "batch", "hit", "rare", "done", "byID", "m", "retired", "pulls", "lock"},
		"request":   {"blocks", "spec", "hashes", "holder"},
		"kvCache":   {"blocks", "hashes", "ring", "spare", "index", "cpu", "x"},
		"cpuTier":   {"entries", "head", "tail", "pool", "x"},
		"tierState": {"disk", "store", "tier", "events"},
		"metrics":   {"firstTooLong", "firstDropped", "ttft", "e2e", "sched", "ttftH", "itl", "e2eH", "schedH", "records"},
		"queue":     {"heap", "ring"},
		"Config":    {"Engine", "Policies", "Latency", "Observer"},
		"Policies":  {"Priority"},
	}
	for _, v := range []any{Engine{}, request{}, kvCache{}, cpuTier{}, tierState{}, metrics{}, queue{}, Config{}, Policies{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			if holdsReference(f.Type) && !slices.Contains(handled[typ.Name()], f.Name) {
				t.Errorf("%s.%s (%s) holds a reference that Engine.Clone does not copy (sim/clone.go)", typ.Name(), f.Name, f.Type)
			}
		}
	}
}

func holdsReference(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Func, reflect.Interface, reflect.Chan, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return holdsReference(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsReference(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// TestCloneRefusesWhatItCannotCopy: a noise stream made from a bare
// *rand.Rand cannot be copied, nor a latency model of unknown state.
func TestCloneRefusesWhatItCannotCopy(t *testing.T) {
	for _, lat := range []LatencyModel{
		NewNoisy(&Blackbox{Beta: [3]float64{1000, 1, 1}}, 0.1, NewRNG(1).Stream("x")),
		opaqueModel{},
	} {
		cfg := baseConfig()
		cfg.Latency = lat
		e, err := NewEngine(cfg)
		require.NoError(t, err)
		_, err = e.Clone(nil)
		require.Error(t, err)
	}
}

// opaqueModel is a latency model Clone knows nothing of.
type opaqueModel struct{}

func (opaqueModel) Name() string                    { return "opaque" }
func (opaqueModel) StepTimeUs(*Batch) int64         { return 1000 }
func (opaqueModel) ArrivalOverheadUs(int64) int64   { return 0 }
func (opaqueModel) DepartureOverheadUs(int64) int64 { return 0 }
func (opaqueModel) PreemptionGamma() float64        { return DefaultPreemptionGamma }
