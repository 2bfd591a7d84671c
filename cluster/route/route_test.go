package route

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// view builds a View from per-instance (queue, batch, in-flight, kv util).
func view(rows ...[4]float64) *View {
	v := &View{}
	v.Resize(len(rows))
	for i, r := range rows {
		v.QueueDepth[i], v.BatchSize[i], v.InFlight[i], v.KVUtilization[i] = int64(r[0]), int64(r[1]), int64(r[2]), r[3]
		v.FreeKVBlocks[i] = int64((1 - r[3]) * 1000)
	}
	return v
}

func TestSimplePolicies(t *testing.T) {
	req := &Request{Spec: &sim.RequestSpec{ID: 1, PromptTokens: 10, OutputTokens: 1}}
	for _, tc := range []struct {
		name string
		v    *View
		want []int // choices for successive requests on the same view
	}{
		// Loads 5, 2, 2: least-loaded takes the lowest index among the minima.
		{LeastLoadedName, view([4]float64{3, 1, 1, 0}, [4]float64{0, 1, 1, 0}, [4]float64{1, 0, 1, 0}), []int{1, 1}},
		// In-flight counts are part of the load.
		{LeastLoadedName, view([4]float64{0, 0, 3, 0}, [4]float64{1, 1, 0, 0}), []int{1}},
		{AlwaysBusiestName, view([4]float64{0, 1, 1, 0}, [4]float64{3, 1, 1, 0}, [4]float64{3, 1, 1, 0}), []int{1, 1}},
		{RoundRobinName, view([4]float64{9, 9, 9, 0}, [4]float64{}, [4]float64{}), []int{0, 1, 2, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.name, tc.v.Len(), Params{})
			require.NoError(t, err)
			var got []int
			for range tc.want {
				i := p.Route(req, tc.v)
				p.Routed(req, i)
				got = append(got, i)
			}
			require.Equal(t, tc.want, got)
			// Their decision-trace score is −(effective load).
			s := make([]float64, tc.v.Len())
			p.Score(req, tc.v, s)
			for i := range s {
				require.Equal(t, -float64(tc.v.Load(i)), s[i])
			}
		})
	}
}

func TestScorers(t *testing.T) {
	v := view([4]float64{2, 2, 0, 0.25}, [4]float64{0, 0, 0, 1}, [4]float64{6, 1, 1, 0.5})
	req := &Request{Spec: &sim.RequestSpec{}}
	for _, tc := range []struct {
		s    Scorer
		want []float64
	}{
		// Loads 4, 0, 8: min-max normalized, lower is better.
		{QueueDepthScorer{}, []float64{0.5, 1, 0}},
		{KVUtilizationScorer{}, []float64{0.75, 0, 0.5}},
		{LoadBalanceScorer{}, []float64{1.0 / 5, 1, 1.0 / 9}},
	} {
		got := make([]float64, 3)
		tc.s.Score(req, v, got)
		require.InDeltaSlice(t, tc.want, got, 1e-12, tc.s.Name())
	}
	// Equal loads: every instance scores 1.
	got := make([]float64, 2)
	QueueDepthScorer{}.Score(req, view([4]float64{1, 1, 1, 0}, [4]float64{2, 0, 1, 0}), got)
	require.Equal(t, []float64{1, 1}, got)
	// Only routable instances set the range: a draining instance's load
	// (8, instance 0 here) does not compress the others' scores.
	v = view([4]float64{6, 1, 1, 0}, [4]float64{2, 2, 0, 0}, [4]float64{0, 0, 0, 0})
	v.Routable = []bool{false, true, true}
	got = make([]float64, 3)
	QueueDepthScorer{}.Score(req, v, got)
	require.Equal(t, []float64{0, 1}, got[1:], "loads 4 and 0 among the routable: 0 and 1, not 0.5 and 1")
}

func TestPrefixAffinityLearnsFromDecisions(t *testing.T) {
	s := &PrefixAffinityScorer{Index: NewPrefixIndex(3, 100)}
	a := &Request{Hashes: []uint64{11, 12, 13, 14}, Blocks: 6}
	s.Routed(a, 2)
	got := make([]float64, 3)
	s.Score(a, view([4]float64{}, [4]float64{}, [4]float64{}), got)
	require.Equal(t, []float64{0, 0, 4.0 / 6}, got, "its 4 shared blocks of 6")
	// A request sharing the first two blocks: half its blocks, leading.
	b := &Request{Hashes: []uint64{11, 12, 99, 14}, Blocks: 4}
	s.Score(b, view([4]float64{}, [4]float64{}, [4]float64{}), got)
	require.Equal(t, []float64{0, 0, 0.5}, got, "only leading blocks count: block 14 comes after a miss")
	// A prompt shorter than a block scores 0 everywhere.
	s.Score(&Request{}, view([4]float64{}, [4]float64{}, [4]float64{}), got)
	require.Equal(t, []float64{0, 0, 0}, got)
}

func TestPrefixIndexEvictsLeastRecentlyUsedTailFirst(t *testing.T) {
	x := NewPrefixIndex(1, 4)
	x.Record(0, []uint64{1, 2, 3}, 0)
	x.Record(0, []uint64{7, 8}, 0)
	require.Equal(t, 4, x.Len(0))
	// 3 (the first prompt's tail) was touched first and went first.
	require.Equal(t, 2, x.Match(0, []uint64{1, 2, 3}))
	require.Equal(t, 2, x.Match(0, []uint64{7, 8}))
	// Matching changes nothing: recording 9 evicts 2, the least recent.
	x.Record(0, []uint64{9}, 0)
	require.Equal(t, 1, x.Match(0, []uint64{1, 2}))
	require.Equal(t, 0, x.Match(5, []uint64{1}), "an instance it never saw")
}

// TestPrefixIndexMatchesAReferenceLRU drives the index and a plain
// per-block LRU list with the same prompts, own blocks included (each own
// block a key of its own, as a per-block LRU would hold it): the set sizes
// and the presence of every shared key agree after every prompt.
func TestPrefixIndexMatchesAReferenceLRU(t *testing.T) {
	const capacity = 50
	x := NewPrefixIndex(1, capacity)
	var ref []uint64 // most recent last
	touch := func(h uint64) {
		for i, k := range ref {
			if k == h {
				ref = append(ref[:i], ref[i+1:]...)
				break
			}
		}
		ref = append(ref, h)
		if len(ref) > capacity {
			ref = ref[1:]
		}
	}
	seed := uint64(1)
	ownKey := uint64(1) << 62 // own blocks: never reused
	for i := 0; i < 5000; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		n := int(seed >> 61)
		hs := make([]uint64, n)
		for j := range hs {
			hs[j] = 2 + (seed>>(8*uint(j%7)))%120 // hashindex stores key 0 as 1
		}
		own := int(seed>>20) % 7
		if i%97 == 0 {
			own = 80 // more than the capacity
		}
		x.Record(0, hs, own)
		for j := 0; j < own; j++ {
			ownKey++
			touch(ownKey)
		}
		for j := n - 1; j >= 0; j-- {
			touch(hs[j])
		}
		require.Equal(t, len(ref), x.Len(0), "prompt %d", i)
		present := map[uint64]bool{}
		for _, h := range ref {
			present[h] = true
		}
		for h := uint64(2); h < 122; h++ {
			require.Equal(t, present[h], x.Match(0, []uint64{h}) == 1, "prompt %d, key %d", i, h)
		}
	}
}

func TestWeightedCombinesNormalizedClampedScores(t *testing.T) {
	ws, err := ParseScorers("kv-utilization:1,load-balance:3")
	require.NoError(t, err)
	p := NewWeighted(ws, 2, 0)
	// kv 1−u: 0.2, 1.0; load balance 1/(1+load): 1, 1/3.
	v := view([4]float64{0, 0, 0, 0.8}, [4]float64{1, 1, 0, 0})
	s := make([]float64, 2)
	p.Score(&Request{Spec: &sim.RequestSpec{}}, v, s)
	require.InDeltaSlice(t, []float64{0.25*0.2 + 0.75*1, 0.25*1 + 0.75/3}, s, 1e-12)
	require.Equal(t, 0, p.Route(&Request{Spec: &sim.RequestSpec{}}, v))
	// Scaling the weights changes nothing.
	ws10, _ := ParseScorers("kv-utilization:10,load-balance:30")
	p10 := NewWeighted(ws10, 2, 0)
	s10 := make([]float64, 2)
	p10.Score(&Request{Spec: &sim.RequestSpec{}}, v, s10)
	require.InDeltaSlice(t, s, s10, 1e-12)
	// A utilization above 1 (stale or bogus) is clamped to a 0 score, not negative.
	v.KVUtilization[1] = 1.5
	p.Score(&Request{Spec: &sim.RequestSpec{}}, v, s)
	require.Equal(t, 0.0, p.Raw(0)[1])
	// Ties go to the lowest index.
	tie := view([4]float64{1, 0, 0, 0.5}, [4]float64{1, 0, 0, 0.5}, [4]float64{1, 0, 0, 0.5})
	require.Equal(t, 0, p.Route(&Request{Spec: &sim.RequestSpec{}}, tie))
}

func TestParseScorersAndNewReportBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"prefix-affinity", "want name:weight"},
		{"magic:1", "use one of prefix-affinity, queue-depth, kv-utilization, load-balance"},
		{"queue-depth:-1", "finite number >= 0"},
		{"queue-depth:NaN", "finite number >= 0"},
		{"queue-depth:0,kv-utilization:0", "all 0"},
		{"queue-depth:1,queue-depth:2", "twice"},
	} {
		_, err := ParseScorers(tc.in)
		require.ErrorContains(t, err, tc.want, tc.in)
	}
	_, err := New("random", 2, Params{})
	require.ErrorContains(t, err, "use one of round-robin, least-loaded, always-busiest, weighted")
	// Preconditions (the template's parameters are range-checked where
	// they are read) panic.
	require.Contains(t, panicText(func() { _, _ = New(RoundRobinName, 0, Params{}) }), "at least one instance")
	for _, tc := range []struct {
		ws   []WeightedScorer
		cap  int
		want string
	}{
		{[]WeightedScorer{{QueueDepth, 1}}, -1, "capacity -1"},
		{[]WeightedScorer{{QueueDepth, 1}}, MaxPrefixIndexCapacity + 1, "capacity"},
		{nil, 0, "at least one scorer"},
		{[]WeightedScorer{{QueueDepth, -1}, {KVUtilization, 2}}, 0, "not >= 0"},
		{[]WeightedScorer{{QueueDepth, math.NaN()}}, 0, "not >= 0"},
		{[]WeightedScorer{{QueueDepth, 0}}, 0, "sum to 0"},
		{[]WeightedScorer{{QueueDepth, math.MaxFloat64}, {KVUtilization, math.MaxFloat64}}, 0, "sum to +Inf"},
		{[]WeightedScorer{{"magic", 1}}, 0, "not one of"},
	} {
		require.Contains(t, panicText(func() { NewWeighted(tc.ws, 2, tc.cap) }), tc.want, "%+v", tc)
	}
	ws, err := ParseScorers(DefaultScorers)
	require.NoError(t, err)
	require.Equal(t, DefaultScorers, FormatScorers(ws))
}

// TestMatchAllAgreesWithMatch: the heads and memo shortcuts give every
// instance the same count as walking its own set, through evictions of
// first blocks and of memoized runs, prompts sharing runs of every length,
// for small clusters and beyond 64 instances.
func TestMatchAllAgreesWithMatch(t *testing.T) {
	for _, n := range []int{1, 5, 70} {
		x := NewPrefixIndex(n, 30)
		seed := uint64(n)
		rnd := func(k int) int {
			seed = seed*6364136223846793005 + 1442695040888963407
			return int(seed>>33) % k
		}
		prompt := func() []uint64 {
			// A few shared chains of varying length: heads recur.
			g := uint64(1 + rnd(6))
			hs := make([]uint64, 1+rnd(12))
			for j := range hs {
				hs[j] = g<<40 | uint64(j+1)
				if j > 3 && rnd(2) == 0 {
					hs[j] |= uint64(1+rnd(1000)) << 20 // a request's own tail
				}
			}
			return hs
		}
		got, want := make([]int, n), make([]int, n)
		all := make([]int32, n)
		for i := range all {
			all[i] = int32(i)
		}
		for step := 0; step < 20000; step++ {
			hs := prompt()
			// Every instance, or some of them (the others' entries
			// are then unspecified: poisoned first, not compared).
			idx := all
			if step%2 == 1 {
				idx = nil
				for i := range all {
					got[i] = -7
					if rnd(3) > 0 {
						idx = append(idx, int32(i))
					}
				}
			}
			x.MatchAll(hs, idx, got)
			for _, i := range idx {
				want[i] = x.Match(int(i), hs)
				require.Equal(t, want[i], got[i], "n=%d step %d instance %d", n, step, i)
			}
			x.Record(rnd(n), hs, rnd(4))
		}
	}
}

// TestPrefixIndexForget: a forgotten instance matches nothing, holds
// nothing, and the others keep their matches, below and beyond the 64
// instances of the heads bit set.
func TestPrefixIndexForget(t *testing.T) {
	for _, n := range []int{4, 70} {
		x := NewPrefixIndex(n, 100)
		hashes := []uint64{11, 12, 13}
		for i := 0; i < n; i++ {
			x.Record(i, hashes, 2)
		}
		x.Forget(2)
		x.Forget(2)     // twice: nothing left to drop
		x.Forget(n + 5) // never recorded
		dst := make([]int, n)
		x.MatchAll(hashes, (&View{InFlight: make([]int64, n)}).Indexes(), dst)
		for i, m := range dst {
			want := 3
			if i == 2 {
				want = 0
			}
			require.Equal(t, want, m, "n %d, instance %d", n, i)
			require.Equal(t, want, x.Match(i, hashes), "n %d, instance %d", n, i)
		}
		require.Zero(t, x.Len(2))
		x.Record(2, hashes, 0) // a new instance at the index would start empty; ids are never reused, but the index allows it
		require.Equal(t, 3, x.Match(2, hashes))
	}
	// Forgetting every holder of a head removes the head.
	x := NewPrefixIndex(2, 100)
	x.Record(0, []uint64{7}, 0)
	x.Forget(0)
	require.Empty(t, x.heads)
}

// Names, New's vocabulary, lists the templates (the plug-ins' registry).
func TestNamesAreTheTemplates(t *testing.T) {
	var names []string
	for _, tp := range Templates {
		names = append(names, tp.Name)
	}
	require.ElementsMatch(t, names, Names)
}
