package route

import (
	"fmt"
	"math"
)

// Scorer names.
const (
	PrefixAffinity = "prefix-affinity"
	QueueDepth     = "queue-depth"
	KVUtilization  = "kv-utilization"
	LoadBalance    = "load-balance"
)

// ScorerNames lists the scorers.
var ScorerNames = []string{PrefixAffinity, QueueDepth, KVUtilization, LoadBalance}

func knownScorer(name string) bool {
	for _, n := range ScorerNames {
		if n == name {
			return true
		}
	}
	return false
}

// Scorer evaluates one signal for every instance.
type Scorer interface {
	Name() string
	// Score writes the score of each instance of v.Indexes() into dst
	// (len v.Len()); the weighted policy clamps it to [0, 1].
	Score(req *Request, v *View, dst []float64)
	// Routed is told every decision (the stateful prefix-affinity scorer
	// learns from it).
	Routed(req *Request, instance int)
}

// Weighted composes scorers (docs/cluster.md; llm-d's endpoint picker): each
// scorer gives every instance a score in [0, 1] (clamped), the scores are
// combined with weights normalized to sum to 1, and the highest total wins,
// the lowest index on a tie.
type Weighted struct {
	scorers []Scorer
	weights []float64 // normalized
	raw     [][]float64
	tmp     []float64
}

// Forget drops a terminated instance from the prefix-affinity scorer's
// index, if there is one.
func (p *Weighted) Forget(i int) {
	for _, s := range p.scorers {
		if f, ok := s.(*PrefixAffinityScorer); ok {
			f.forget(i)
		}
	}
}

// PreciseIndex is the prefix-affinity scorer's precise index, nil
// without the scorer or in approximate mode (PreciseIndexer).
func (p *Weighted) PreciseIndex() *PreciseIndex {
	for _, s := range p.scorers {
		if f, ok := s.(*PrefixAffinityScorer); ok {
			return f.Precise
		}
	}
	return nil
}

// PrefixIndex is the prefix-affinity scorer's index, nil without the
// scorer (PrefixIndexer).
func (p *Weighted) PrefixIndex() *PrefixIndex {
	for _, s := range p.scorers {
		if f, ok := s.(*PrefixAffinityScorer); ok {
			return f.Index
		}
	}
	return nil
}

// NewWeighted builds the policy for n instances; prefixCapacity sizes the
// prefix-affinity scorer's index (AutoPrefixIndexCapacity, 0: from each
// instance's KV capacity, as the cluster reports it).
//
// NewWeighted panics if ws is empty, names a scorer not in ScorerNames,
// has a negative or NaN weight or weights that sum to 0 or to infinity,
// or if prefixCapacity is outside [0, MaxPrefixIndexCapacity]. These are
// preconditions: the weighted template's scorers and
// prefix_index_capacity are range-checked, once, where a file, a flag or
// --set gives them (internal/schema), and the error names the key.
func NewWeighted(ws []WeightedScorer, n, prefixCapacity int) *Weighted {
	if len(ws) == 0 {
		panic("route: the weighted policy needs at least one scorer")
	}
	if prefixCapacity < 0 || prefixCapacity > MaxPrefixIndexCapacity {
		panic(fmt.Sprintf("route: prefix index capacity %d is not within [0, %d] blocks", prefixCapacity, MaxPrefixIndexCapacity))
	}
	var sum float64
	for _, w := range ws {
		if !(w.Weight >= 0) {
			panic(fmt.Sprintf("route: scorer %s's weight %v is not >= 0", w.Name, w.Weight))
		}
		sum += w.Weight
	}
	if !(sum > 0) || math.IsInf(sum, 1) {
		panic(fmt.Sprintf("route: scorer weights sum to %v, not to a finite number > 0", sum))
	}
	p := &Weighted{}
	for _, w := range ws {
		var s Scorer
		switch w.Name {
		case PrefixAffinity:
			s = &PrefixAffinityScorer{Index: NewPrefixIndex(n, prefixCapacity)}
		case QueueDepth:
			s = QueueDepthScorer{}
		case KVUtilization:
			s = KVUtilizationScorer{}
		case LoadBalance:
			s = LoadBalanceScorer{}
		default:
			panic(fmt.Sprintf("route: scorer %q is not one of %v", w.Name, ScorerNames))
		}
		p.scorers = append(p.scorers, s)
		p.weights = append(p.weights, w.Weight/sum)
		p.raw = append(p.raw, nil)
	}
	return p
}

func (p *Weighted) Name() string { return WeightedName }

// Scorers returns the scorers and their normalized weights.
func (p *Weighted) Scorers() ([]Scorer, []float64) { return p.scorers, p.weights }

// Raw is scorer k's clamped scores from the last Score or Route call.
func (p *Weighted) Raw(k int) []float64 { return p.raw[k] }

func (p *Weighted) NeedsHashes() bool {
	for _, s := range p.scorers {
		if s.Name() == PrefixAffinity {
			return true
		}
	}
	return false
}

// Score is the weighted sum of the clamped scores.
func (p *Weighted) Score(req *Request, v *View, dst []float64) {
	n := v.Len()
	idx := v.Indexes()
	for _, i := range idx {
		dst[i] = 0
	}
	for k, s := range p.scorers {
		if cap(p.raw[k]) < n {
			p.raw[k] = make([]float64, n)
		}
		raw := p.raw[k][:n]
		p.raw[k] = raw
		s.Score(req, v, raw)
		w := p.weights[k]
		for _, i := range idx {
			x := raw[i]
			switch {
			case !(x > 0): // also NaN
				x = 0
			case x > 1:
				x = 1
			}
			raw[i] = x
			dst[i] += w * x
		}
	}
}

func (p *Weighted) Route(req *Request, v *View) int {
	n := v.Len()
	if cap(p.tmp) < n {
		p.tmp = make([]float64, n)
	}
	total := p.tmp[:n]
	p.Score(req, v, total)
	best := v.first()
	for _, j := range v.Indexes() {
		if i := int(j); i > best && v.OK(i) && total[i] > total[best] {
			best = i
		}
	}
	return best
}

func (p *Weighted) Routed(req *Request, instance int) {
	for _, s := range p.scorers {
		s.Routed(req, instance)
	}
}

// PrefixAffinityScorer scores the share of the request's prompt blocks
// that the router's index believes the instance holds: the leading blocks
// found, over all of the prompt's full blocks (0 for a prompt shorter than
// a block). It learns from every routing decision. Only shared blocks can
// be found: a request's own blocks are new everywhere.
type PrefixAffinityScorer struct {
	Index *PrefixIndex
	// Precise, when not nil, scores instead of Index: the instances' KV
	// events and tiers (PreciseIndex); routing decisions then teach it
	// nothing.
	Precise *PreciseIndex
	matched []int
}

func (s *PrefixAffinityScorer) Name() string { return PrefixAffinity }
func (s *PrefixAffinityScorer) Score(req *Request, v *View, dst []float64) {
	idx := v.Indexes()
	if s.Precise != nil {
		s.Precise.Score(req.Hashes, req.Blocks, idx, dst)
		return
	}
	n := req.Blocks
	if cap(s.matched) < len(dst) {
		s.matched = make([]int, len(dst))
	}
	m := s.matched[:len(dst)]
	s.Index.MatchAll(req.Hashes, idx, m)
	for _, i := range idx {
		dst[i] = 0
		if n > 0 {
			dst[i] = float64(m[i]) / float64(n)
		}
	}
}
func (s *PrefixAffinityScorer) Routed(req *Request, instance int) {
	if s.Precise != nil {
		return
	}
	s.Index.Record(instance, req.Hashes, req.Blocks-len(req.Hashes))
}

// QueueDepthScorer is the min-max normalized effective load, lower load
// scoring higher: (max − load) / (max − min) over the routable instances
// (the candidates, as llm-d's scorers see only the pods its filters
// pass); every instance scores 1 when all loads are equal.
type QueueDepthScorer struct{}

func (QueueDepthScorer) Name() string         { return QueueDepth }
func (QueueDepthScorer) Routed(*Request, int) {}
func (QueueDepthScorer) Score(_ *Request, v *View, dst []float64) {
	f := v.first()
	lo, hi := v.Load(f), v.Load(f)
	idx := v.Indexes()
	for _, j := range idx {
		if i := int(j); i > f && v.OK(i) {
			lo, hi = min(lo, v.Load(i)), max(hi, v.Load(i))
		}
	}
	for _, i := range idx {
		if hi == lo {
			dst[i] = 1
		} else {
			dst[i] = float64(hi-v.Load(int(i))) / float64(hi-lo)
		}
	}
}

// KVUtilizationScorer is 1 − KV utilization.
type KVUtilizationScorer struct{}

func (KVUtilizationScorer) Name() string         { return KVUtilization }
func (KVUtilizationScorer) Routed(*Request, int) {}
func (KVUtilizationScorer) Score(_ *Request, v *View, dst []float64) {
	for _, i := range v.Indexes() {
		dst[i] = 1 - v.KVUtilization[i]
	}
}

// LoadBalanceScorer is 1 / (1 + effective load).
type LoadBalanceScorer struct{}

func (LoadBalanceScorer) Name() string         { return LoadBalance }
func (LoadBalanceScorer) Routed(*Request, int) {}
func (LoadBalanceScorer) Score(_ *Request, v *View, dst []float64) {
	for _, i := range v.Indexes() {
		dst[i] = 1 / (1 + float64(v.Load(int(i))))
	}
}

func (s *PrefixAffinityScorer) forget(i int) {
	s.Index.Forget(i)
	if s.Precise != nil {
		s.Precise.Forget(i)
	}
}

// setMode turns the scorer's precise mode on (PrefixPrecise) or leaves it
// approximate ("" or PrefixApproximate). It panics on another mode or a
// tier weight outside [0, 1] (preconditions: the templates' prefix_mode
// and tier weights are checked where they are read).
func (s *PrefixAffinityScorer) setMode(n int, mode string, w *TierWeights) {
	switch mode {
	case "", PrefixApproximate:
		return
	case PrefixPrecise:
		tw := DefaultTierWeights
		if w != nil {
			tw = *w
		}
		tw.mustBeShares()
		s.Precise = NewPreciseIndex(n, tw)
		return
	}
	panic(fmt.Sprintf("route: prefix index mode %q is not %s or %s", mode, PrefixApproximate, PrefixPrecise))
}
