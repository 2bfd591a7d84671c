package steady

import (
	"fmt"
	"math"
	"strconv"
)

// StableShare is the practical threshold of the verdict: a backlog that
// grows by less than this share of the arrival rate (the servers serve at
// least 99 % of what arrives) is not called unstable, and a run is
// called stable only when its growth's interval lies below it.
const StableShare = 0.01

// Rule is the stopping rule of a run sized by precision (Law & Kelton
// §9.4.1, relative precision; their sequential procedure): at each
// checkpoint, stop when the run is unstable, or stable with Metric's 95 %
// interval within Rel of its estimate (Metric "": stable alone).
type Rule struct {
	Rel    float64
	Metric string
	// MinArrivals is the first checkpoint.
	MinArrivals int64
	// MaxArrivals and MaxTimeUs are the caps (the workload's size and the
	// run's horizon), named as the reason when the run ends at one.
	MaxArrivals int64
	MaxTimeUs   int64
}

// analyze is the analysis of the run up to now, over the arrivals up to
// until (<= now).
func (c *Collector) analyze(now, until int64) *Report {
	b := &c.bins
	b.advance(now)
	w := b.w
	// Complete bins within [t0, until].
	nb := int(min(int64(len(b.bins)), (until-b.t0)/w))
	nb = max(nb, 0)
	st := &Stability{}
	rep := &Report{Stability: st}
	if !c.cfg.Stationary {
		st.NotStationary = c.cfg.NotStationary
	}
	level := func(lo, hi int) []float64 {
		out := make([]float64, 0, hi-lo)
		for _, x := range b.bins[lo:hi] {
			out = append(out, float64(x.area)/float64(w))
		}
		return out
	}
	// The warm-up: a bin index of the backlog and a time.
	warm, found, rule := 0, true, "none"
	switch {
	case !c.cfg.Stationary:
	case c.cfg.Warmup == WarmupFixed:
		rule = "given"
		warm = int(min(int64(nb), (c.cfg.WarmupUs+w-1)/w))
	case c.cfg.Warmup == WarmupAuto:
		rule = fmt.Sprintf("MSER-%d", c.e2e.m)
		d, ok := MSER(level(0, nb))
		found = ok
		t := b.t0 + int64(d)*w
		// The backlog and the end-to-end latency: the system's state and
		// the latency its transient moves most (TTFT's transient is part of
		// E2E's); the later truncation of the two.
		for _, s := range [1]*Series{c.e2e} {
			lo, hi := s.window(b.t0, until)
			if hi-lo < mserMin {
				continue
			}
			if sd, ok := MSER(s.means(lo, hi)); !ok {
				found = false
			} else {
				t = max(t, s.cells[lo+sd].first)
			}
		}
		warm = int(min(int64(nb), (t-b.t0+w-1)/w))
	}
	// Without a warm-up end, the verdict looks at the second half: an
	// unstable run's backlog keeps rising, which MSER reads as a
	// transient that never ends.
	from := warm
	if !found || !c.cfg.Stationary {
		// (A workload not stationary by design has no warm-up to remove by
		// rule; its verdict reads the second half too, past the start's
		// filling up.)
		from = nb / 2
	}
	c.verdict(st, from, nb, found, level)
	if c.cfg.Stationary && found && nb > warm {
		rep.SteadyState = c.steady(warm, nb, until, rule)
		rep.WarmupEndUs = b.t0 + int64(warm)*w
	}
	return rep
}

// verdict fills st from the bins [from, to).
func (c *Collector) verdict(st *Stability, from, to int, found bool, level func(lo, hi int) []float64) {
	b := &c.bins
	wS := float64(b.w) / 1e6
	st.FromS, st.ToS = float64(from)*wS, float64(to)*wS
	var arr, dep int64
	for _, x := range b.bins[from:to] {
		arr += x.arrived
		dep += x.departed
	}
	span := float64(to-from) * wS
	lv := level(from, to)
	if span > 0 {
		st.OfferedPerS, st.ServedPerS = float64(arr)/span, float64(dep)/span
	}
	deps := make([]float64, 0, to-from)
	for _, x := range b.bins[from:to] {
		deps = append(deps, float64(x.departed))
	}
	j := judge(lv, wS, st.OfferedPerS, st.OfferedPerS-st.ServedPerS, deps, found)
	st.Verdict, st.Growth, st.MeanInSystem = j.verdict, j.g, j.mean
	g, delta := j.g, j.delta
	switch st.Verdict {
	case Unstable:
		st.Why = fmt.Sprintf("the number of requests in the system grows by %.3g per second (95 %% interval %.3g to %.3g) from %.4g s to %.4g s: %.4g requests per second arrive, %.4g leave",
			g.Estimate, g.Low, g.High, st.FromS, st.ToS, st.OfferedPerS, st.ServedPerS)
	case Stable:
		st.Why = fmt.Sprintf("the number of requests in the system does not grow: %.3g per second (95 %% interval %.3g to %.3g, below %g %% of the %.4g arriving per second), %.4g on average",
			g.Estimate, g.Low, g.High, 100*StableShare, st.OfferedPerS, st.MeanInSystem)
	default:
		if !j.ok && from >= to && c.cfg.Stationary && c.cfg.Warmup == WarmupFixed && c.cfg.WarmupUs >= c.lastArrival-c.bins.t0 {
			// A warm-up as long as the run leaves nothing to judge, and no
			// longer run of the same length tells ("about 50 s would
			// tell", it said, of --warmup 1000h).
			st.Why = fmt.Sprintf("the warm-up given (%s s) removes the whole run (%s s of arrivals): nothing is left to judge; give a shorter warm-up (or auto)",
				fmtSeconds(float64(c.cfg.WarmupUs)/1e6), fmtSeconds(float64(c.lastArrival-c.bins.t0)/1e6))
			break
		}
		if !j.ok && c.arrivals > 1 && c.lastArrival == c.bins.t0 {
			// Every request arrived at one instant (a rate of 1e300 per
			// second): there is no arrival rate to judge, and no length of
			// run would tell ("about 0 s (0 requests at this rate) would
			// tell", it said).
			st.Why = "every request arrived at the same instant: a burst has no arrival rate, so no steady state to tell"
			break
		}
		if !j.ok {
			st.Why = fmt.Sprintf("the run is too short to tell: %.3g s analyzed", span)
			st.NeededS = 2 * max(st.ToS, 1e-3)
		} else {
			// The slope's standard error falls as T^(-3/2) with the length T
			// analyzed (batch means of a stationary backlog: each batch
			// mean's variance falls as 1/T, the spread of their times grows
			// as T).
			gap := delta - g.Estimate
			if g.Estimate >= delta {
				gap = g.Estimate
			}
			need := span * 2
			if h := g.HalfWidth(); gap > 0 && h > 0 {
				need = span * math.Pow(h/gap, 2.0/3)
			}
			if !j.indep {
				need = max(need, 2*span)
			}
			need = max(need, float64(minBatches)*j.w) // batches as long as a request stays
			total := need + st.FromS
			if !found {
				total = max(total, 2*st.ToS)
			}
			st.NeededS = total * 1.1
			why := "its growth's interval straddles the threshold"
			switch {
			case !found:
				why = "the warm-up had not ended (MSER's truncation point lies in the second half of the run)"
			case j.few:
				why = fmt.Sprintf("fewer than %d requests left the system in the part analyzed", minDepartures)
			case j.filling:
				why = "the departure rate still rises: the system is still filling up after its start"
			case !j.long:
				why = fmt.Sprintf("%d batches of %.3g s are shorter than the %.3g s a request stays in the system (Little's law)", g.Batches, span/float64(g.Batches), j.w)
			case !j.indep:
				why = "the backlog's batch means still correlate (the batches are too short)"
			}
			st.Why = fmt.Sprintf("too short to tell: %s; growth %.3g per second (95 %% interval %.3g to %.3g) against a threshold of %.3g", why, g.Estimate, g.Low, g.High, delta)
		}
		rate := st.OfferedPerS
		if rate == 0 && c.lastArrival > c.bins.t0 {
			// No arrival in the part analyzed (a short run's second
			// half): the whole run's rate, not "0 requests".
			rate = float64(c.arrivals-1) / (float64(c.lastArrival-c.bins.t0) / 1e6)
		}
		st.NeededRequests = int64(math.Ceil(st.NeededS * rate))
		st.Why += fmt.Sprintf("; about %s s (%d requests at this rate) would tell", fmtSeconds(st.NeededS), st.NeededRequests)
	}
	if st.Verdict == Unstable && c.bins.perInst && len(c.bins.inst) > 1 {
		c.cause(st, from, to)
	}
}

// judgement is a backlog's verdict and its evidence.
type judgement struct {
	verdict string
	g       Interval
	mean    float64
	delta   float64 // the practical threshold, per second
	w       float64 // the mean time in the system, s (Little's law)
	ok      bool    // enough bins for a trend
	indep   bool    // the batch means passed the test of independence
	long    bool    // the batches are at least w long
	filling bool    // the departure rate still rises: the system is filling up
	few     bool    // fewer than minDepartures departures
}

// rising reports whether departures (per bin) come significantly faster
// in the second half than in the first: a system still filling up after
// its start (its first requests have not yet had the time to finish),
// whose backlog grows as an unstable one's does but will stop. In an
// unstable one the servers are saturated and the departure rate is flat.
// The test is the difference of two counts against its Poisson standard
// deviation, at 2 (sensitive: a false alarm only delays a verdict).
func rising(deps []float64) bool {
	if len(deps) < 2 {
		return false
	}
	var a, b float64
	h := len(deps) / 2
	for i, d := range deps {
		if i < h {
			a += d
		} else if i >= len(deps)-h {
			b += d
		}
	}
	return b-a > 2*math.Sqrt(a+b)
}

// minDepartures is the fewest departures a verdict other than
// indeterminate rests on: the served rate's Poisson noise is then at most
// 10 %.
const minDepartures = 100

// judge is the verdict on a backlog's levels (bins wS seconds wide),
// arrivals at rate per second, of which deficit per second more than
// left (NaN: unknown). Unstable: the least-squares growth is above the
// practical threshold (StableShare of the rate) and its interval above
// 0, the rise it makes over the span is more than 3√2 standard
// deviations of the levels around it (more than the difference of two
// levels' noise explains, so that a correlated run's too narrow interval
// cannot make a transient's bump unstable), and requests arrive faster
// than they leave by more than the threshold. Stable: a warm-up end was
// found, the batch means are independent and each at least as long as
// the mean time in the system (W = mean level / rate, Little's law), and
// the growth's whole interval lies below the threshold. Else
// indeterminate.
func judge(lv []float64, wS, rate, deficit float64, deps []float64, found bool) judgement {
	j := judgement{verdict: Indeterminate, delta: StableShare * rate}
	if len(lv) == 0 {
		return j
	}
	j.mean = mean(lv)
	if rate > 0 {
		j.w = j.mean / rate
	}
	g, indep, ok := trend(lv, wS)
	j.indep, j.ok = indep, ok
	if !ok {
		return j
	}
	span := float64(len(lv)) * wS
	j.long = span/float64(g.Batches) >= j.w
	// The levels' spread around the fitted line.
	mx := span / 2
	var sse float64
	for i, y := range lv {
		e := y - j.mean - g.Estimate*((float64(i)+0.5)*wS-mx)
		sse += e * e
	}
	sd := math.Sqrt(sse / float64(max(1, len(lv)-2)))
	// The slope's standard error is at least what the backlog's own
	// correlation makes it: for a stationary level of variance σ² and
	// integrated autocorrelation time τ, the least-squares slope over T
	// has variance 12 σ² τ / T³; τ is taken as 2W (exact for a level whose
	// correlation decays as exp(−t/W), an M/M/∞ queue's), or a bin's
	// width if wider. Batch means too short to be independent understate
	// it; this keeps a transient's bump in a short run from reading as
	// growth.
	tau := max(wS, 2*j.w)
	seL := math.Sqrt(12 * sd * sd * tau / (span * span * span))
	if h := g.HalfWidth(); g.Batches > 2 && seL*tTwoSided(g.Batches-2) > h {
		h = seL * tTwoSided(g.Batches-2)
		g.Low, g.High = g.Estimate-h, g.Estimate+h
	}
	j.g = g
	j.filling = rising(deps)
	var nd float64
	for _, d := range deps {
		nd += d
	}
	j.few = deps != nil && nd < minDepartures
	switch {
	case j.few:
	case g.Estimate > j.delta && g.Low > 0 && g.Estimate*span > 3*math.Sqrt2*sd && !(deficit <= j.delta) && !j.filling:
		j.verdict = Unstable
	case found && indep && j.long && g.High < j.delta:
		j.verdict = Stable
	}
	return j
}

// cause names why a fleet is unstable: imbalance when some instances'
// backlogs grow while others keep up (stable, idle, or not growing:
// the whole interval of their growth below the threshold), capacity when
// none keeps up.
func (c *Collector) cause(st *Stability, from, to int) {
	b := &c.bins
	wS := float64(b.w) / 1e6
	n := len(b.instBins)
	var unstable, keepUp int
	for i, ib := range b.instBins {
		lv := make([]float64, 0, to-from)
		for _, a := range ib[from:to] {
			lv = append(lv, float64(a)/float64(b.w))
		}
		j := judge(lv, wS, st.OfferedPerS/float64(n), math.NaN(), nil, true)
		v := InstanceVerdict{Verdict: j.verdict, Growth: j.g, MeanInSystem: j.mean}
		if i < len(c.cfg.InstanceIDs) {
			v.ID = c.cfg.InstanceIDs[i]
		}
		switch {
		case j.verdict == Unstable:
			unstable++
		case j.verdict == Stable, j.mean == 0, j.ok && j.g.High < j.delta:
			v.KeepsUp = true
			keepUp++
		}
		st.Instances = append(st.Instances, v)
	}
	st.Cause = CauseCapacity
	if keepUp > 0 && unstable > 0 {
		st.Cause = CauseImbalance
	}
}

// trend is the growth per second of levels (bin means, wS seconds wide):
// the least-squares slope of k batch means against their times, with
// its 95 % interval from the residuals (k−2 degrees of freedom), k halved
// from maxBatches until the residuals pass the test of independence,
// down to minBatches; indep reports whether they did. ok is false with
// fewer than minBatches bins.
func trend(levels []float64, wS float64) (g Interval, indep, ok bool) {
	n := len(levels)
	if n < minBatches {
		return Interval{}, false, false
	}
	var x, y, res []float64
	for k := min(n, maxBatches); k >= minBatches; k /= 2 {
		gsz := n / k
		skip := n - k*gsz
		x, y = x[:0], y[:0]
		for j := range k {
			var s float64
			for i := skip + j*gsz; i < skip+(j+1)*gsz; i++ {
				s += levels[i]
			}
			y = append(y, s/float64(gsz))
			x = append(x, (float64(skip+j*gsz)+float64(gsz)/2)*wS)
		}
		mx, my := mean(x), mean(y)
		var sxx, sxy float64
		for j := range k {
			sxx += (x[j] - mx) * (x[j] - mx)
			sxy += (x[j] - mx) * (y[j] - my)
		}
		slope := sxy / sxx
		res = res[:0]
		var sse float64
		for j := range k {
			e := y[j] - my - slope*(x[j]-mx)
			res = append(res, e)
			sse += e * e
		}
		indep = independent(res)
		if !indep && k/2 >= minBatches {
			continue
		}
		h := tTwoSided(k-2) * math.Sqrt(sse/float64(k-2)/sxx)
		return Interval{Estimate: slope, Low: slope - h, High: slope + h, Batches: k, Independent: indep}, indep, true
	}
	return Interval{}, false, false
}

// steady makes the steady-state estimates from the bins [warm, nb), the
// series' cells from the bin warm's start up to until.
func (c *Collector) steady(warm, nb int, until int64, rule string) *SteadyState {
	b := &c.bins
	from := b.t0 + int64(warm)*b.w
	s := &SteadyState{Warmup: Warmup{Rule: rule, RemovedS: float64(from-b.t0) / 1e6}}
	for _, x := range b.bins[:warm] {
		s.Warmup.RemovedRequests += x.arrived
	}
	// Rates from the bins.
	num, den, tok := make([]float64, 0, nb-warm), make([]float64, 0, nb-warm), make([]float64, 0, nb-warm)
	for _, x := range b.bins[warm:nb] {
		num = append(num, float64(x.departed))
		tok = append(tok, float64(x.tokens))
		den = append(den, float64(b.w)/1e6)
	}
	s.RequestsPerS, s.TokensPerS = batchRatio(num, den), batchRatio(tok, den)
	ms := func(iv Interval) Interval {
		iv.Estimate, iv.Low, iv.High = iv.Estimate/1000, iv.Low/1000, iv.High/1000
		return iv
	}
	dist := func(sr *Series) Dist {
		lo, hi := sr.window(from, until)
		var d Dist
		d.Mean = ms(sr.mean(lo, hi))
		for _, q := range []struct {
			p   float64
			dst **Interval
		}{{0.5, &d.P50}, {0.9, &d.P90}, {0.99, &d.P99}} {
			if iv, ok := sr.quantile(q.p, lo, hi); ok {
				iv = ms(iv)
				*q.dst = &iv
			}
		}
		return d
	}
	s.TTFT, s.E2E = dist(c.ttft), dist(c.e2e)
	lo, hi := c.ttft.window(from, until)
	for _, cl := range c.ttft.cells[lo:hi] {
		s.Requests += cl.n
	}
	opt := func(sr *Series, scale float64) *Interval {
		lo, hi := sr.window(from, until)
		if hi <= lo {
			return nil
		}
		iv := sr.mean(lo, hi)
		iv.Estimate, iv.Low, iv.High = iv.Estimate*scale, iv.Low*scale, iv.High*scale
		return &iv
	}
	s.ITL, s.Sched = opt(c.itl, 1e-3), opt(c.sched, 1e-3)
	if a := c.attain[0]; a != nil {
		s.SLO = opt(a, 1)
		for k := 1; k <= 3; k++ {
			if a := c.attain[k]; a != nil {
				if iv := opt(a, 1); iv != nil {
					s.PerClass = append(s.PerClass, ClassSteady{Class: ClassNames[k], Attainment: *iv})
				}
			}
		}
	}
	return s
}

// fmtSeconds writes a length of run in whole seconds, or to two
// significant digits below 10 s ("about 0 s would tell" said nothing).
func fmtSeconds(x float64) string {
	if x < 10 {
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}
