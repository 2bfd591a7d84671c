package workload

import (
	"math"
	"math/rand/v2"
)

// arrivals draws one tenant's open-loop arrival times (conversation
// starts), in seconds since time 0.
//
// The Poisson family (poisson, bursty, diurnal, and any of them under a
// load profile) is an exact non-homogeneous Poisson process with rate
// λ(t) = base · profile(t) · process(t), drawn by thinning (Lewis and
// Shedler 1979) over pieces: on each piece of time λ is bounded by a
// constant λ̄; candidates come at rate λ̄ and each is kept with probability
// λ(t)/λ̄; a candidate past the piece's end is discarded and drawing
// restarts at the end, which memorylessness makes exact. Pieces end at
// load-profile segment edges and burst edges (when bursts are long enough
// to hold arrivals), so λ̄ stays close to λ and few candidates are
// wasted; a diurnal cycle is bounded by its peak.
//
// Gamma and constant are renewal processes at the base rate; the spec
// refuses them under a load profile.
type arrivals struct {
	a       Arrival
	base    float64 // arrivals per second
	profile []Segment
	r       *rand.Rand
	t       float64 // seconds
	seg     int     // first profile segment not wholly before t
	amp     float64 // diurnal amplitude
	periodS float64 // diurnal period after compression
	k, sc   float64 // gamma shape and scale
}

func newArrivals(a Arrival, base float64, profile []Segment, r *rand.Rand) *arrivals {
	g := &arrivals{a: a, base: base, profile: profile, r: r}
	switch a.Process {
	case ProcessDiurnal:
		g.amp = (a.PeakToTrough - 1) / (a.PeakToTrough + 1)
		g.periodS = float64(a.PeriodUs) / 1e6 / a.TimeCompression
	case ProcessGamma:
		g.k = 1 / (a.CV * a.CV)
		g.sc = 1 / (base * g.k)
	}
	return g
}

// next returns the next arrival, in seconds, or false when there is none
// before horizonS (+Inf: no horizon).
func (g *arrivals) next(horizonS float64) (float64, bool) {
	if !(g.base > 0) {
		return 0, false
	}
	switch g.a.Process {
	case ProcessConstant:
		g.t += 1 / g.base
		return g.t, g.t < horizonS
	case ProcessGamma:
		g.t += gammaSample(g.r, g.k) * g.sc
		return g.t, g.t < horizonS
	}
	for g.t < horizonS {
		end, bound := g.piece(g.t)
		if !(bound > 0) {
			g.t = end
			continue
		}
		c := g.t + g.r.ExpFloat64()/bound
		if c >= end {
			g.t = end
			continue
		}
		g.t = c
		if g.r.Float64()*bound <= g.rate(c) {
			return c, c < horizonS
		}
	}
	return g.t, false
}

// rate is λ(t) in arrivals per second.
func (g *arrivals) rate(t float64) float64 {
	return g.base * g.profileAt(t) * g.processAt(t)
}

func (g *arrivals) processAt(t float64) float64 {
	switch g.a.Process {
	case ProcessBursty:
		if g.inBurst(t) {
			return g.a.BurstMultiplier
		}
	case ProcessDiurnal:
		return 1 + g.amp*math.Sin(2*math.Pi*t/g.periodS)
	}
	return 1
}

func (g *arrivals) inBurst(t float64) bool {
	iv, d := float64(g.a.BurstIntervalUs)/1e6, float64(g.a.BurstDurationUs)/1e6
	return t-math.Floor(t/iv)*iv < d
}

func (g *arrivals) profileAt(t float64) float64 {
	for i := g.seg; i < len(g.profile); i++ {
		s := &g.profile[i]
		st, en := float64(s.StartUs)/1e6, float64(s.EndUs)/1e6
		if t < st {
			return 1
		}
		if t < en {
			return s.From + (s.To-s.From)*(t-st)/(en-st)
		}
	}
	return 1
}

// piece returns the end of the piece of time holding t and a bound on λ
// over it.
func (g *arrivals) piece(t float64) (end, bound float64) {
	end, pb := math.Inf(1), 1.0
	for g.seg < len(g.profile) && float64(g.profile[g.seg].EndUs)/1e6 <= t {
		g.seg++
	}
	if g.seg < len(g.profile) {
		s := &g.profile[g.seg]
		if st := float64(s.StartUs) / 1e6; t < st {
			end = st // a gap: multiplier 1
		} else {
			end, pb = float64(s.EndUs)/1e6, max(s.From, s.To)
		}
	}
	qb := 1.0
	switch g.a.Process {
	case ProcessBursty:
		iv, d, m := float64(g.a.BurstIntervalUs)/1e6, float64(g.a.BurstDurationUs)/1e6, g.a.BurstMultiplier
		if g.base*max(m, 1)*iv < 1 {
			// Bursts shorter than the gaps: one bound over both keeps
			// the work per arrival at most m candidates, not a piece per
			// burst.
			qb = max(m, 1)
			break
		}
		k := math.Floor(t / iv)
		if t-k*iv < d {
			end, qb = min(end, k*iv+d), m
		} else {
			end = min(end, (k+1)*iv)
		}
	case ProcessDiurnal:
		// The sine's peak bounds it; at most half the candidates are
		// discarded, and the work never depends on the period.
		qb = 1 + g.amp
	}
	// A little headroom against rounding in the sine and the ramp.
	return end, g.base * pb * qb * (1 + 1e-9)
}
