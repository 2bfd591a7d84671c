package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/sim"
	"sync/atomic"
)

// Arrival processes.
const (
	ArrivalPoisson = "poisson"
	ArrivalGamma   = "gamma"
)

// Spec describes a synthetic workload. Error messages name fields by their
// command-line flag spelling (gamma-cv, prefix-groups, ...).
type Spec struct {
	Requests int     // number of requests (> 0)
	Rate     float64 // mean arrivals per second (> 0)
	Arrival  string  // "poisson" (also when empty) or "gamma"
	// GammaCV is the coefficient of variation of gamma inter-arrival times
	// (1 = Poisson, > 1 burstier, < 1 more regular); within [0.001, 1000].
	GammaCV float64
	// Prompt is the total prompt length, shared prefix included.
	Prompt, Output Dist
	PrefixGroups   int     // number of shared-prefix groups (0 = none; then the next two are ignored)
	PrefixTokens   int64   // tokens of the shared prefix (each group's prefix has this length)
	PrefixFraction float64 // share of requests that belong to some group (0..1); members pick a group uniformly
	StartUs        int64   // arrival time of the first possible arrival (default 0)
}

// Validate reports the first invalid field.
func (s Spec) Validate() error {
	if s.Requests <= 0 {
		return fmt.Errorf("requests must be > 0, got %d", s.Requests)
	}
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
		return fmt.Errorf("rate must be > 0 and finite, got %g", s.Rate)
	}
	switch s.Arrival {
	case "", ArrivalPoisson:
	case ArrivalGamma:
		// Outside this range the shape 1/cv² under- or overflows.
		if !(s.GammaCV >= 1e-3 && s.GammaCV <= 1e3) {
			return fmt.Errorf("gamma-cv must be within [0.001, 1000], got %g", s.GammaCV)
		}
	default:
		return fmt.Errorf("arrival must be %q or %q, got %q", ArrivalPoisson, ArrivalGamma, clip.String(s.Arrival))
	}
	if err := s.Prompt.Validate(); err != nil {
		return fmt.Errorf("prompt-tokens: %w", err)
	}
	if err := s.Output.Validate(); err != nil {
		return fmt.Errorf("output-tokens: %w", err)
	}
	if s.PrefixGroups < 0 || s.PrefixGroups > math.MaxInt32 {
		return fmt.Errorf("prefix-groups must be within [0, %d], got %d", math.MaxInt32, s.PrefixGroups)
	}
	if !(s.PrefixFraction >= 0 && s.PrefixFraction <= 1) {
		return fmt.Errorf("prefix-fraction must be within [0, 1], got %g", s.PrefixFraction)
	}
	// With PrefixGroups 0, PrefixTokens and PrefixFraction are ignored (the
	// CLI keeps its defaults for them when --prefix-groups 0 turns prefixes off).
	switch {
	case s.PrefixTokens < 0 || s.PrefixTokens >= maxTokens:
		return fmt.Errorf("prefix-tokens must be within [0, %d), got %d", int64(maxTokens), s.PrefixTokens)
	case s.PrefixGroups > 0 && s.PrefixTokens == 0:
		return fmt.Errorf("prefix-tokens must be > 0 when prefix-groups is %d", s.PrefixGroups)
	case s.PrefixGroups > 0 && s.Prompt.largest() <= s.PrefixTokens:
		// A prompt's length includes its group's prefix, and a grouped
		// prompt no longer than the prefix is raised to PrefixTokens+1
		// (see Generate): when every prompt would be, the run would serve
		// prompts the distribution cannot give, whatever its kind.
		return fmt.Errorf("prefix-tokens %d must be < the longest prompt of %s (%d): a prompt's length includes its group's prefix",
			s.PrefixTokens, s.Prompt, s.Prompt.largest())
	}
	if s.StartUs < 0 {
		return fmt.Errorf("start-us must be >= 0, got %d", s.StartUs)
	}
	return nil
}

// Seeds of the second PCG word, one per per-request value, so two values
// never share a stream even if their 64-bit seeds collide.
const (
	streamGap uint64 = iota + 0x9e3779b97f4a7c15
	streamPrompt
	streamOutput
	streamPrefix
)

// Generate returns s.Requests requests with IDs 0..n-1 in arrival order.
//
// Draw order: for each request, r yields exactly four 64-bit seeds, in this
// order: gap, prompt, output, prefix. Each value is then sampled from its
// own short PCG stream seeded with its seed, so r advances by four draws
// per request whatever the distributions are (rejection samplers use a
// variable number of draws). Changing one distribution, the arrival
// process, or the prefix settings therefore never changes any other value
// of any request. The prefix stream always yields its two values
// (membership, then group index), even when PrefixGroups is 0.
//
// Arrivals: the first request arrives one inter-arrival gap after StartUs.
// Gaps are exponential with mean 1/Rate (poisson) or gamma with shape
// k = 1/GammaCV² and scale 1/(Rate·k) (gamma). Time accumulates in float64
// seconds and each arrival is rounded to microseconds on its own, so
// rounding error does not accumulate.
//
// Prefixes: a request joins a group with probability PrefixFraction, the
// group being uniform over 1..PrefixGroups. The sampled prompt length is
// the total prompt, shared prefix included; a member whose sampled prompt
// is <= PrefixTokens is raised to PrefixTokens+1, so every prompt has at
// least one token of its own after the prefix (as with a real system
// prompt, a request cannot be shorter than it). This raise ignores
// Prompt.Max, which Validate requires to exceed PrefixTokens.
func Generate(s Spec, r *rand.Rand) ([]sim.RequestSpec, error) {
	g, err := NewGenerator(s, r)
	if err != nil {
		return nil, err
	}
	// The slice grows with the requests made, never sized up front from
	// the count a user gave (10^13 would panic in makeslice).
	out := make([]sim.RequestSpec, 0, min(s.Requests, 1<<16))
	for range s.Requests {
		req, err := g.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}

// Stream is a Generator seen one request ahead: the sim.Source (and
// cluster.Source) of a synthetic workload, so that a run holds one request
// of it at a time, whatever Spec.Requests is. A generation error (an
// arrival time past int64 microseconds) ends the stream; Err reports it.
type Stream struct {
	g    *Generator
	next sim.RequestSpec
	ok   bool
	err  error
	arr  Arrivals
	prog *Progress
}

// Arrivals counts the requests a workload sent and the span of their
// arrival times, for the offered rate.
type Arrivals struct {
	N, FirstUs, LastUs int64
}

func (a *Arrivals) add(at int64) {
	if a.N == 0 {
		a.FirstUs = at
	}
	a.N++
	a.LastUs = at
}

// PerS is the offered rate, requests per second between the first arrival
// and the last; 0 without two arrivals apart.
func (a Arrivals) PerS() float64 {
	if a.N < 2 || a.LastUs <= a.FirstUs {
		return 0
	}
	return float64(a.N-1) / (float64(a.LastUs-a.FirstUs) / 1e6)
}

// Arrivals is what Next has returned so far.
func (s *Stream) Arrivals() Arrivals { return s.arr }

// ArrivalsOf counts requests given in arrival order (a replay).
func ArrivalsOf(reqs []sim.RequestSpec) Arrivals {
	var a Arrivals
	if n := len(reqs); n > 0 {
		a = Arrivals{N: int64(n), FirstUs: reqs[0].ArrivalUs, LastUs: reqs[n-1].ArrivalUs}
	}
	return a
}

// Progress is what a workload has sent, readable from another goroutine
// while the simulation runs (a progress line).
type Progress struct {
	Sent, LastArrivalUs atomic.Int64
}

func (p *Progress) add(a Arrivals) {
	if p != nil {
		p.Sent.Store(a.N)
		p.LastArrivalUs.Store(a.LastUs)
	}
}

// Watch reports every request Next returns to p.
func (s *Stream) Watch(p *Progress) { s.prog = p }

// NewStream returns g's stream, its first request generated.
func NewStream(g *Generator) *Stream {
	s := &Stream{g: g}
	s.advance()
	return s
}

func (s *Stream) advance() {
	s.ok = false
	if s.err != nil || s.g.Remaining() == 0 {
		return
	}
	s.next, s.err = s.g.Next()
	s.ok = s.err == nil
}

// Peek is the next request's arrival time, false when none is left.
func (s *Stream) Peek() (int64, bool) { return s.next.ArrivalUs, s.ok }

// Next returns the next request (Peek must have returned true).
func (s *Stream) Next() sim.RequestSpec {
	r := s.next
	s.arr.add(r.ArrivalUs)
	s.prog.add(s.arr)
	s.advance()
	return r
}

// Remaining is the number of requests Next has not returned yet.
func (s *Stream) Remaining() int64 {
	n := int64(s.g.Remaining())
	if s.ok {
		n++
	}
	return n
}

// Err is the error that ended the stream early, if any.
func (s *Stream) Err() error { return s.err }

// Raised is Generator.Raised of the requests Next has returned.
func (s *Stream) Raised() (raised, grouped int64) {
	raised, grouped = s.g.Raised()
	if s.ok && s.next.PrefixGroup > 0 {
		// The request generated ahead is not returned yet.
		grouped--
		if s.g.lastRaised {
			raised--
		}
	}
	return raised, grouped
}

// Generator produces Generate's requests one at a time, so that a run of
// any length holds one request of its workload, not all of them. The
// sequence is exactly Generate's.
type Generator struct {
	s   Spec
	r   *rand.Rand
	gap func(*rand.Rand) float64
	src *rand.PCG
	sub *rand.Rand
	t   float64 // seconds since StartUs
	i   int
	// grouped counts the requests that joined a prefix group, raised
	// those whose sampled prompt was no longer than the prefix.
	grouped, raised int64
	lastRaised      bool // the last request was raised
}

// Raised is how many of the requests generated so far joined a prefix
// group (grouped) and how many of those had a sampled prompt no longer
// than the prefix, raised to PrefixTokens+1 (raised): the requests whose
// prompt is not the distribution's sample.
func (g *Generator) Raised() (raised, grouped int64) { return g.raised, g.grouped }

// NewGenerator validates s and returns its generator.
func NewGenerator(s Spec, r *rand.Rand) (*Generator, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{s: s, r: r}
	g.gap = func(r *rand.Rand) float64 { return r.ExpFloat64() / s.Rate }
	if s.Arrival == ArrivalGamma {
		k := 1 / (s.GammaCV * s.GammaCV)
		scale := 1 / (s.Rate * k)
		g.gap = func(r *rand.Rand) float64 { return gammaSample(r, k) * scale }
	}
	// One reseeded PCG serves every per-value stream; rand.Rand keeps no
	// state of its own, so reseeding the source restarts the stream.
	g.src = rand.NewPCG(0, 0)
	g.sub = rand.New(g.src)
	return g, nil
}

// Remaining is the number of requests not yet generated.
func (g *Generator) Remaining() int { return g.s.Requests - g.i }

func (g *Generator) stream(seed, which uint64) *rand.Rand {
	g.src.Seed(seed, which)
	return g.sub
}

// Next returns the next request; it is an error to call it when Remaining
// is 0.
// ErrArrivalOverflow is Next's error when a rate too low for the number of
// requests puts an arrival beyond the clock's range (sim.MaxTimeUs, 2^61
// µs: every arrival is within it, so that no time the simulation adds to
// one can overflow int64).
var ErrArrivalOverflow = errors.New("an arrival time is beyond the clock's range of 2^61 µs (73,000 years)")

func (g *Generator) Next() (sim.RequestSpec, error) {
	if g.i >= g.s.Requests {
		return sim.RequestSpec{}, fmt.Errorf("the workload's %d requests are all generated", g.s.Requests)
	}
	s, r, i := &g.s, g.r, g.i
	gapSeed, promptSeed, outputSeed, prefixSeed := r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()

	g.t += g.gap(g.stream(gapSeed, streamGap))
	us := math.Round(g.t * 1e6)
	if !(us <= float64(sim.MaxTimeUs)) || int64(us) > sim.MaxTimeUs-s.StartUs {
		return sim.RequestSpec{}, fmt.Errorf("request %d: %w; raise rate or lower requests", i, ErrArrivalOverflow)
	}
	// One statement per stream: sub is shared, so each sample must
	// finish before the next reseed.
	req := sim.RequestSpec{ID: int64(i), ArrivalUs: int64(us) + s.StartUs}
	req.PromptTokens = s.Prompt.Sample(g.stream(promptSeed, streamPrompt))
	req.OutputTokens = s.Output.Sample(g.stream(outputSeed, streamOutput))
	pr := g.stream(prefixSeed, streamPrefix)
	member, which := pr.Float64(), pr.Float64()
	g.lastRaised = false
	if s.PrefixGroups > 0 && member < s.PrefixFraction {
		grp := 1 + int64(which*float64(s.PrefixGroups))
		req.PrefixGroup = int32(min(grp, int64(s.PrefixGroups))) // guard float rounding at the top
		req.PrefixTokens = s.PrefixTokens
		g.grouped++
		if g.lastRaised = req.PromptTokens <= s.PrefixTokens; g.lastRaised {
			req.PromptTokens = s.PrefixTokens + 1
			g.raised++
		}
	}
	g.i++
	return req, nil
}

// gammaSample draws from Gamma(k, 1) by Marsaglia and Tsang (2000). For
// k < 1 it draws Gamma(k+1) and then U^(1/k) (the "boost"), in that order.
func gammaSample(r *rand.Rand, k float64) float64 {
	if k < 1 {
		g := gammaSample(r, k+1)
		return g * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		var x, v float64
		for v <= 0 {
			x = r.NormFloat64()
			v = 1 + c*x
		}
		v = v * v * v
		u := r.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 || math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
