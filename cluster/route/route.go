// Package route holds the cluster's routing policies (docs/cluster.md): given a
// request and a read-only View of the instances, pick one.
//
// A View is aligned slices, one entry per instance, index i being instance
// i (instances are numbered in their zero-padded ID order, so the lowest
// index is also the lexicographically lowest ID). Policies read it; they
// never see the instances themselves, only what a real router would: the
// instance-reported signals, as fresh as the cluster's scrape settings make
// them, and the router's own in-flight counts.
//
// Every policy breaks ties on the lowest index. Route may update the
// policy's own state (round-robin's counter); Score never does; Routed is
// the observer call after every decision (the prefix index learns from it).
// Policies are deterministic and serve one run.
package route

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/weights"
	"github.com/blis-sim/blis/sim"
)

// View is what a routing decision sees of the instances. All slices have
// the same length, the number of instances.
type View struct {
	NowUs int64
	// QueueDepth, BatchSize, KVUtilization, FreeKVBlocks and CacheHitRate
	// are instance-reported (possibly stale, per the scrape settings);
	// InFlight is router-local: requests routed to the instance and not yet
	// completed (always fresh).
	QueueDepth, BatchSize, InFlight, FreeKVBlocks []int64
	KVUtilization, CacheHitRate                   []float64
	// Routable, when not nil, says which instances take requests: an
	// autoscaled instance still starting or draining does not. Nil means
	// every one does. The cluster only asks for a decision when at least
	// one is routable, and a policy never returns one that is not.
	Routable []bool
	// Live, when not nil, lists in ascending order the instances a policy
	// looks at: an instance not in it is not routable (an autoscaled
	// instance terminated for good). A decision then costs O(len(Live)),
	// not O(every instance the run ever started); what Score writes for
	// the instances outside it is unspecified. Nil means every instance.
	Live []int32
	all  []int32 // 0 … Len()−1 (Indexes, when Live is nil)
}

// OK reports whether instance i takes requests.
func (v *View) OK(i int) bool { return v.Routable == nil || v.Routable[i] }

// Indexes is the instances the policies look at, in ascending order: Live,
// or every instance.
func (v *View) Indexes() []int32 {
	if v.Live != nil {
		return v.Live
	}
	if n := v.Len(); len(v.all) != n {
		v.all = v.all[:0]
		for i := range n {
			v.all = append(v.all, int32(i))
		}
	}
	return v.all
}

// first is the lowest routable index (0 when none is).
func (v *View) first() int {
	for _, i := range v.Indexes() {
		if v.OK(int(i)) {
			return int(i)
		}
	}
	return 0
}

// Len is the number of instances.
func (v *View) Len() int { return len(v.InFlight) }

// Load is instance i's effective load: queue depth + batch size + in-flight
// requests (docs/cluster.md).
func (v *View) Load(i int) int64 { return v.QueueDepth[i] + v.BatchSize[i] + v.InFlight[i] }

// Resize makes every slice n long, reusing their storage (and growing it
// geometrically, so that adding instances one at a time costs O(1) each).
func (v *View) Resize(n int) {
	grow := func(s []int64) []int64 {
		if cap(s) < n {
			return append(s[:cap(s)], make([]int64, n-cap(s))...)[:n]
		}
		return s[:n]
	}
	growF := func(s []float64) []float64 {
		if cap(s) < n {
			return append(s[:cap(s)], make([]float64, n-cap(s))...)[:n]
		}
		return s[:n]
	}
	v.QueueDepth, v.BatchSize, v.InFlight, v.FreeKVBlocks = grow(v.QueueDepth), grow(v.BatchSize), grow(v.InFlight), grow(v.FreeKVBlocks)
	v.KVUtilization, v.CacheHitRate = growF(v.KVUtilization), growF(v.CacheHitRate)
	if v.Routable != nil {
		if cap(v.Routable) < n {
			v.Routable = append(v.Routable[:cap(v.Routable)], make([]bool, n-cap(v.Routable))...)
		}
		v.Routable = v.Routable[:n]
	}
}

// Request is what the router knows of a request. It is valid only during
// the call that receives it: a policy must not keep it or its slices.
type Request struct {
	Spec *sim.RequestSpec
	// Blocks is the number of the prompt's full blocks at the router's
	// block size, and Hashes the chained hashes (sim.AppendBlockHashes) of
	// its leading shared ones (sim.SharedBlocks), the only ones a later
	// request can share. Both are filled only for policies whose
	// NeedsHashes is true.
	Blocks int
	Hashes []uint64
}

// Policy routes requests.
type Policy interface {
	Name() string
	// Route returns the chosen instance, in [0, v.Len()).
	Route(req *Request, v *View) int
	// Score writes the score for req of every instance of v.Indexes()
	// into dst (len v.Len()), higher being better: the ranking the decision trace reports and
	// regret is measured on. Policies without a scoring rule of their own
	// score −(effective load). Score changes nothing.
	Score(req *Request, v *View, dst []float64)
	// Routed tells the policy where req went.
	Routed(req *Request, instance int)
	// NeedsHashes says whether the policy reads Request.Hashes.
	NeedsHashes() bool
}

// Forgetter is a policy that keeps per-instance state: Forget drops
// instance i's, once the instance is gone for good.
type Forgetter interface {
	Forget(instance int)
}

// PrefixIndexer is a policy that keeps a router-side prefix index (the
// prefix-affinity policy, the weighted policy with its prefix-affinity
// scorer): the cluster sizes it from its instances.
type PrefixIndexer interface {
	PrefixIndex() *PrefixIndex
}

// PreciseIndexer is a policy that may read the instances' KV events
// (PrefixPrecise): the cluster feeds its index, when it is not nil, before
// every decision.
type PreciseIndexer interface {
	PreciseIndex() *PreciseIndex
}

// Names of the built-in policies.
const (
	RoundRobinName    = "round-robin"
	LeastLoadedName   = "least-loaded"
	AlwaysBusiestName = "always-busiest"
	WeightedName      = "weighted"
)

// Names lists the built-in policies, the default first.
var Names = []string{RoundRobinName, LeastLoadedName, AlwaysBusiestName, WeightedName, VLLMDPName, PrefixAffinityName}

// Params are the policies' parameters.
type Params struct {
	// Scorers and their weights for the weighted policy.
	Scorers []WeightedScorer
	// PrefixIndexCapacity is the router-side prefix index's size per
	// instance, in blocks, for the weighted policy's prefix-affinity scorer
	// and the prefix-affinity policy; AutoPrefixIndexCapacity (0, the
	// default) sizes it from each instance's KV capacity.
	PrefixIndexCapacity int
	// PrefixMode is the prefix-affinity scorer's index: PrefixApproximate
	// ("" too) or PrefixPrecise; TierWeights the precise scorer's (nil:
	// DefaultTierWeights).
	PrefixMode  string
	TierWeights *TierWeights
	// MinMatchShare is the prefix-affinity policy's hit threshold, in
	// [0, 1) (PrefixAffinityPolicy).
	MinMatchShare float64
	// RefreshUs is how often the instances' queue depths are refreshed
	// (the vllm-dp policy's publication interval).
	RefreshUs int64
}

// New returns the named policy for n instances. An unknown name is an
// error that lists the valid ones.
//
// New panics if n < 1 or if p breaks a precondition of NewWeighted,
// NewPrefixAffinity or the prefix mode (a mode other than "",
// PrefixApproximate and PrefixPrecise; a tier weight outside [0, 1]):
// the routing templates' parameters are range-checked, once, where a
// file, a flag or --set gives them, so the error names the key.
func New(name string, n int, p Params) (Policy, error) {
	if n < 1 {
		panic(fmt.Sprintf("route: routing needs at least one instance, got %d", n))
	}
	switch name {
	case RoundRobinName:
		return &RoundRobin{}, nil
	case LeastLoadedName:
		return LeastLoaded{}, nil
	case AlwaysBusiestName:
		return AlwaysBusiest{}, nil
	case VLLMDPName:
		return NewVLLMDP(n, p.RefreshUs), nil
	case PrefixAffinityName:
		pa := NewPrefixAffinity(n, p.PrefixIndexCapacity, p.MinMatchShare)
		pa.scorer.setMode(n, p.PrefixMode, p.TierWeights)
		return pa, nil
	case WeightedName:
		ws := p.Scorers
		if ws == nil {
			ws = Scorers(DefaultScorerWeights)
		}
		w := NewWeighted(ws, n, p.PrefixIndexCapacity)
		for _, s := range w.scorers {
			if f, ok := s.(*PrefixAffinityScorer); ok {
				f.setMode(n, p.PrefixMode, p.TierWeights)
			}
		}
		return w, nil
	}
	return nil, fmt.Errorf("routing policy %q is not a policy; use one of %s", name, strings.Join(Names, ", "))
}

// loadScores writes −(effective load), the score of the policies that have
// no scoring rule of their own.
func loadScores(v *View, dst []float64) {
	for _, i := range v.Indexes() {
		dst[i] = float64(-v.Load(int(i))) // an integer negation: no −0
	}
}

// RoundRobin sends requests to instances in turn.
type RoundRobin struct{ next int }

func (p *RoundRobin) Name() string                           { return RoundRobinName }
func (p *RoundRobin) NeedsHashes() bool                      { return false }
func (p *RoundRobin) Score(_ *Request, v *View, d []float64) { loadScores(v, d) }
func (p *RoundRobin) Routed(*Request, int)                   {}
func (p *RoundRobin) Route(_ *Request, v *View) int {
	n := v.Len()
	i := p.next % n
	// The first routable instance from i on, cyclically, among those
	// looked at (the others are not routable).
	idx := v.Indexes()
	k, _ := slices.BinarySearch(idx, int32(i))
	for range idx {
		if k == len(idx) {
			k = 0
		}
		if j := int(idx[k]); v.OK(j) {
			i = j
			break
		}
		k++
	}
	p.next = i + 1
	return i
}

// LeastLoaded picks the instance with the lowest effective load.
type LeastLoaded struct{}

func (LeastLoaded) Name() string                           { return LeastLoadedName }
func (LeastLoaded) NeedsHashes() bool                      { return false }
func (LeastLoaded) Score(_ *Request, v *View, d []float64) { loadScores(v, d) }
func (LeastLoaded) Routed(*Request, int)                   {}
func (LeastLoaded) Route(_ *Request, v *View) int {
	best := v.first()
	for _, j := range v.Indexes() {
		if i := int(j); i > best && v.OK(i) && v.Load(i) < v.Load(best) {
			best = i
		}
	}
	return best
}

// AlwaysBusiest picks the instance with the highest effective load
// (pathological, for testing: it piles work on one instance).
type AlwaysBusiest struct{}

func (AlwaysBusiest) Name() string                           { return AlwaysBusiestName }
func (AlwaysBusiest) NeedsHashes() bool                      { return false }
func (AlwaysBusiest) Score(_ *Request, v *View, d []float64) { loadScores(v, d) }
func (AlwaysBusiest) Routed(*Request, int)                   {}
func (AlwaysBusiest) Route(_ *Request, v *View) int {
	best := v.first()
	for _, j := range v.Indexes() {
		if i := int(j); i > best && v.OK(i) && v.Load(i) > v.Load(best) {
			best = i
		}
	}
	return best
}

// DefaultScorers are the weighted policy's default scorers
// (DefaultScorerWeights) as ParseScorers reads them.
var DefaultScorers = FormatScorers(Scorers(DefaultScorerWeights))

// WeightedScorer is a scorer name and its weight.
type WeightedScorer struct {
	Name   string
	Weight float64
}

// ParseScorers reads "name:weight,name:weight", the form of the cluster's
// scripted scenarios (cluster/testdata/scenarios; a file's, a flag's and
// --set's scorers are read and checked by the weighted template's
// declaration instead). Weights must be finite and
// >= 0 and not all 0; a name may appear once. Unknown names are an error
// listing the valid ones.
func ParseScorers(s string) ([]WeightedScorer, error) {
	ws, err := weights.Parse(s, "scorer", "scorer weights", func(name string) error {
		if !knownScorer(name) {
			return fmt.Errorf("scorer %q is not a scorer; use one of %s", name, strings.Join(ScorerNames, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]WeightedScorer, len(ws))
	for i, w := range ws {
		out[i] = WeightedScorer{Name: w.Name, Weight: w.Weight}
	}
	return out, nil
}

// FormatScorers is the inverse of ParseScorers.
func FormatScorers(ws []WeightedScorer) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.Name + ":" + strconv.FormatFloat(w.Weight, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
