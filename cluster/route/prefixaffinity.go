package route

import "fmt"

// PrefixAffinityName is the prefix-affinity routing policy (docs/cluster.md:
// prefix-affinity, least-loaded on a miss). The scorer of the same name
// (PrefixAffinity) is one term of the weighted policy; this policy is the
// rule on its own.
const PrefixAffinityName = "prefix-affinity"

// PrefixAffinityPolicy sends a request where the router believes the
// longest share of its prompt is cached, and balances load otherwise.
// Each instance's match share is the one the prefix-affinity scorer
// computes from the router's PrefixIndex (leading cached blocks over the
// prompt's full blocks, in [0, 1]; learned from every decision, Routed).
// When the best share exceeds MinMatchShare, the request is a hit and goes
// to an instance with that share, the lowest effective load (View.Load)
// among them, then the lowest index; otherwise it is a miss and goes where
// least-loaded would send it. A prompt shorter than a block shares nothing
// and always misses.
//
// Score reports the match shares, so the decision trace shows what the
// rule saw; on a miss the chosen instance need not score best (its regret
// then measures the affinity given up for load). A decision allocates
// nothing once its buffers fit the instance count.
type PrefixAffinityPolicy struct {
	scorer   PrefixAffinityScorer
	minShare float64
	share    []float64
}

// NewPrefixAffinity returns the policy for n instances, with a prefix index
// of capacity blocks per instance (AutoPrefixIndexCapacity, 0: each
// instance's KV capacity) and a hit threshold minMatchShare (0: any cached
// block is a hit).
//
// NewPrefixAffinity panics if capacity is outside
// [0, MaxPrefixIndexCapacity] or minMatchShare outside [0, 1) (or NaN).
// These are preconditions: the template's prefix_index_capacity and
// min_match_share are range-checked, once, where they are read
// (internal/schema), and the error names the key.
func NewPrefixAffinity(n, capacity int, minMatchShare float64) *PrefixAffinityPolicy {
	if capacity < 0 || capacity > MaxPrefixIndexCapacity {
		panic(fmt.Sprintf("route: prefix index capacity %d is not within [0, %d] blocks", capacity, MaxPrefixIndexCapacity))
	}
	if !(minMatchShare >= 0 && minMatchShare < 1) { // NaN too
		panic(fmt.Sprintf("route: minimum prefix match share %v is not within [0, 1)", minMatchShare))
	}
	return &PrefixAffinityPolicy{scorer: PrefixAffinityScorer{Index: NewPrefixIndex(n, capacity)}, minShare: minMatchShare}
}

func (p *PrefixAffinityPolicy) Name() string      { return PrefixAffinityName }
func (p *PrefixAffinityPolicy) NeedsHashes() bool { return true }

// MinMatchShare is the share a hit must exceed.
func (p *PrefixAffinityPolicy) MinMatchShare() float64 { return p.minShare }

// Index is the router-side prefix index the policy reads and trains.
func (p *PrefixAffinityPolicy) Index() *PrefixIndex { return p.scorer.Index }

// PrefixIndex is the index (PrefixIndexer).
func (p *PrefixAffinityPolicy) PrefixIndex() *PrefixIndex { return p.scorer.Index }

// Forget drops a terminated instance from the index.
func (p *PrefixAffinityPolicy) Forget(i int) { p.scorer.forget(i) }

// PreciseIndex is the policy's precise index, nil in approximate mode
// (PreciseIndexer).
func (p *PrefixAffinityPolicy) PreciseIndex() *PreciseIndex { return p.scorer.Precise }

// Score writes each instance's match share.
func (p *PrefixAffinityPolicy) Score(req *Request, v *View, dst []float64) {
	p.scorer.Score(req, v, dst)
}

func (p *PrefixAffinityPolicy) Route(req *Request, v *View) int {
	n := v.Len()
	if cap(p.share) < n {
		p.share = make([]float64, n)
	}
	share := p.share[:n]
	p.scorer.Score(req, v, share)
	best := v.first()
	for _, j := range v.Indexes() {
		// Shares of one request have one denominator: equal counts are
		// equal floats, so == is a tie of cached blocks.
		i := int(j)
		if i <= best || !v.OK(i) {
			continue
		}
		if share[i] > share[best] || (share[i] == share[best] && v.Load(i) < v.Load(best)) {
			best = i
		}
	}
	if share[best] > p.minShare {
		return best
	}
	return LeastLoaded{}.Route(req, v)
}

func (p *PrefixAffinityPolicy) Routed(req *Request, instance int) { p.scorer.Routed(req, instance) }
