// Package workload produces the requests a simulation run serves, as
// []sim.RequestSpec: either synthetic (Generate, from a Spec of arrival
// process and token-length distributions) or replayed from a trace
// (Replay, from the requests table of `calibrate ingest` or a CSV file).
//
// Everything is deterministic: all randomness comes from the *rand.Rand the
// caller passes in (normally sim.RNG.Stream(sim.StreamWorkload)), no map
// order reaches the output, and no clock is read.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/sim"
)

// Distribution kinds.
const (
	KindConst       = "const"
	KindUniform     = "uniform"
	KindNormal      = "normal"
	KindLognormal   = "lognormal"
	KindExponential = "exponential"
	KindHistogram   = "histogram"
)

// maxTokens bounds every parameter and sample: sim.MaxTokens, the most
// tokens a request may have. It is far above any real context length and
// keeps float-to-int conversions exact (< 2^53).
const maxTokens = sim.MaxTokens

// distForms lists the accepted ParseDist syntax, for error messages.
const distForms = `accepted forms: 512 | const:512 | uniform:128,2048 | ` +
	`normal:mean=512,cv=0.3 | lognormal:mean=512,cv=0.5 | exponential:mean=256 | ` +
	`histogram:1-128=0.3,129-1024=0.6,4096=0.1 (inclusive ranges or values = weights); ` +
	`every form takes optional ,min=N,max=N`

// Dist is a token-length distribution. Samples are rounded to integers and
// clamped to [Min, Max] (Max 0 = no upper bound; Min defaults to 1).
// Mean and CV describe the distribution before rounding and clamping, so a
// tight clamp moves the realised mean.
type Dist struct {
	Kind     string  // "const", "uniform", "normal", "lognormal", "exponential"
	Mean, CV float64 // normal/lognormal/exponential: mean and coefficient of variation (exponential: CV is 1, ignored)
	Lo, Hi   float64 // uniform bounds (inclusive integers after rounding); const uses Mean
	Min, Max int64
	// Bins is a histogram's ranges with their cumulative weights,
	// normalized so the last is 1.
	Bins []Bin
	// mu and sigma are a lognormal's parameters, computed once by
	// ParseDist (0: Sample computes them).
	mu, sigma float64
}

// Bin is one range of an empirical histogram: integers Lo..Hi inclusive,
// each equally likely within the bin, with weight W (as given); Cum is
// the cumulative probability up to and including this bin.
type Bin struct {
	Lo, Hi int64
	W, Cum float64
}

// ParseDist reads a distribution from its command-line form:
//
//	512                                     const 512
//	const:512
//	uniform:128,2048                        integers 128..2048, inclusive
//	normal:mean=512,cv=0.3
//	lognormal:mean=512,cv=0.5               the distribution's own mean and CV, not mu/sigma
//	exponential:mean=256
//
// Every form accepts trailing ,min=N and ,max=N (integers). The kind is
// case-insensitive and spaces around items are ignored.
func ParseDist(s string) (Dist, error) {
	in := strings.TrimSpace(s)
	kind, args, ok := strings.Cut(in, ":")
	if !ok {
		// A bare number is a constant.
		v, err := parseNum(in)
		if err != nil {
			return Dist{}, fmt.Errorf("distribution %q: %v; %s", clip.String(s), err, distForms)
		}
		d := Dist{Kind: KindConst, Mean: v}
		return d, d.Validate()
	}
	d := Dist{Kind: strings.ToLower(strings.TrimSpace(kind))}
	syntax := func(format string, a ...any) (Dist, error) {
		return Dist{}, fmt.Errorf("distribution %q: %s; %s", clip.String(s), fmt.Sprintf(format, a...), distForms)
	}
	switch d.Kind {
	case KindHistogram:
		if err := d.parseBins(args); err != nil {
			return syntax("%v", err)
		}
		return d, d.Validate()
	case KindConst, KindUniform, KindNormal, KindLognormal, KindExponential:
	default:
		return syntax("unknown kind %q", clip.String(d.Kind))
	}
	var positional []string
	var keys []string // in input order, to reject duplicates
	for _, item := range strings.Split(args, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return syntax("empty item")
		}
		key, val, isKey := strings.Cut(item, "=")
		if !isKey {
			if len(keys) > 0 {
				return syntax("positional value %q after key=value items", clip.String(item))
			}
			positional = append(positional, item)
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		if slices.Contains(keys, key) {
			return syntax("%s given twice", key)
		}
		keys = append(keys, key)
		var err error
		switch {
		case key == "min" || key == "max":
			v, perr := strconv.ParseInt(val, 10, 64)
			if perr != nil {
				return syntax("%s: %q is not an integer", clip.String(key), clip.String(val))
			}
			if key == "min" {
				d.Min = v
			} else {
				d.Max = v
			}
		case key == "mean" && (d.Kind == KindNormal || d.Kind == KindLognormal || d.Kind == KindExponential):
			d.Mean, err = parseNum(val)
		case key == "cv" && (d.Kind == KindNormal || d.Kind == KindLognormal):
			d.CV, err = parseNum(val)
		default:
			return syntax("%s does not take %q", d.Kind, clip.String(key))
		}
		if err != nil {
			return syntax("%s: %v", key, err)
		}
	}
	has := func(k string) bool { return slices.Contains(keys, k) }
	wantPositional := 0
	switch d.Kind {
	case KindConst:
		wantPositional = 1
	case KindUniform:
		wantPositional = 2
	case KindNormal, KindLognormal:
		if !has("mean") || !has("cv") {
			return syntax("%s needs mean= and cv=", d.Kind)
		}
	case KindExponential:
		if !has("mean") {
			return syntax("exponential needs mean=")
		}
	}
	if len(positional) != wantPositional {
		return syntax("%s takes %d positional value(s), got %d", d.Kind, wantPositional, len(positional))
	}
	vals := make([]float64, len(positional))
	for i, p := range positional {
		v, err := parseNum(p)
		if err != nil {
			return syntax("%v", err)
		}
		vals[i] = v
	}
	switch d.Kind {
	case KindConst:
		d.Mean = vals[0]
	case KindUniform:
		d.Lo, d.Hi = vals[0], vals[1]
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	if d.Kind == KindLognormal {
		d.mu, d.sigma = lognormalParams(d.Mean, d.CV)
	}
	return d, nil
}

// parseBins reads a histogram's items: lo-hi=weight, value=weight, and
// the optional min=N, max=N.
func (d *Dist) parseBins(args string) error {
	var total float64
	for _, item := range strings.Split(args, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("item %q is not range=weight", clip.String(item))
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if k == "min" || k == "max" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not an integer", clip.String(k), clip.String(v))
			}
			if k == "min" {
				d.Min = n
			} else {
				d.Max = n
			}
			continue
		}
		los, his, isRange := strings.Cut(k, "-")
		if !isRange {
			his = los
		}
		lo, err1 := strconv.ParseInt(strings.TrimSpace(los), 10, 64)
		hi, err2 := strconv.ParseInt(strings.TrimSpace(his), 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("range %q is not N or N-M with integers", clip.String(k))
		}
		w, err := parseNum(v)
		if err != nil {
			return fmt.Errorf("weight of %s: %v", k, err)
		}
		if !(w >= 0) {
			return fmt.Errorf("weight of %s must be >= 0, got %g", k, w)
		}
		total += w
		d.Bins = append(d.Bins, Bin{Lo: lo, Hi: hi, W: w})
	}
	if !(total > 0) || math.IsInf(total, 0) {
		return fmt.Errorf("the weights must sum to a finite number > 0, got %g", total)
	}
	var cum float64
	for i := range d.Bins {
		cum += d.Bins[i].W
		d.Bins[i].Cum = cum / total
	}
	d.Bins[len(d.Bins)-1].Cum = 1
	return nil
}

// parseNum parses a finite float.
func parseNum(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", clip.String(s))
	}
	return v, nil
}

// Validate reports whether d can be sampled; the error starts with the kind.
func (d Dist) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	// inRange checks lo <= v <= maxTokens; the negated form also catches NaN.
	inRange := func(name string, v, lo float64) error {
		if !(v >= lo) || !finite(v) {
			return fmt.Errorf("%s: %s must be >= %g, got %g", d.Kind, name, lo, v)
		}
		if v > maxTokens {
			return fmt.Errorf("%s: %s must be <= %d, got %g", d.Kind, name, int64(maxTokens), v)
		}
		return nil
	}
	var err error
	switch d.Kind {
	case KindConst:
		err = inRange("value", d.Mean, 1)
	case KindUniform:
		if err = inRange("lo", d.Lo, 1); err == nil {
			err = inRange("hi", d.Hi, d.Lo)
		}
	case KindNormal, KindLognormal:
		if !(d.Mean > 0) {
			return fmt.Errorf("%s: mean must be > 0, got %g", d.Kind, d.Mean)
		}
		if !(d.CV > 0) || !finite(d.CV) {
			return fmt.Errorf("%s: cv must be > 0, got %g", d.Kind, d.CV)
		}
		err = inRange("mean", d.Mean, 0)
	case KindExponential:
		if !(d.Mean > 0) {
			return fmt.Errorf("%s: mean must be > 0, got %g", d.Kind, d.Mean)
		}
		err = inRange("mean", d.Mean, 0)
	case KindHistogram:
		if len(d.Bins) == 0 {
			return fmt.Errorf("histogram: no bins")
		}
		prev := 0.0
		for _, b := range d.Bins {
			switch {
			case b.Lo < 1 || b.Hi < b.Lo || b.Hi > maxTokens:
				return fmt.Errorf("histogram: range %d-%d must satisfy 1 <= lo <= hi <= %d", b.Lo, b.Hi, int64(maxTokens))
			case !(b.Cum >= prev && b.Cum <= 1):
				return fmt.Errorf("histogram: cumulative weights must rise to 1")
			}
			prev = b.Cum
		}
		if prev != 1 {
			return fmt.Errorf("histogram: cumulative weights end at %g, not 1", prev)
		}
	case "":
		return fmt.Errorf("distribution kind is empty; %s", distForms)
	default:
		return fmt.Errorf("unknown distribution kind %q; %s", clip.String(d.Kind), distForms)
	}
	if err != nil {
		return err
	}
	switch {
	case d.Min < 0 || d.Min > maxTokens:
		return fmt.Errorf("%s: min must be within [0, %d], got %d", d.Kind, int64(maxTokens), d.Min)
	case d.Max < 0 || d.Max > maxTokens:
		return fmt.Errorf("%s: max must be within [0, %d] (0 = none), got %d", d.Kind, int64(maxTokens), d.Max)
	case d.Max != 0 && d.Max < d.lower():
		return fmt.Errorf("%s: max %d must be >= min %d", d.Kind, d.Max, d.lower())
	}
	return nil
}

// lower is the effective minimum: Min, defaulting to 1.
func (d Dist) lower() int64 { return max(d.Min, 1) }

// largest is the largest value Sample can return: the kind's own largest
// value, clamped.
func (d Dist) largest() int64 {
	switch d.Kind {
	case KindConst:
		return d.clamp(d.Mean)
	case KindUniform:
		return d.clamp(math.Round(d.Hi))
	case KindHistogram:
		var hi int64
		prev := 0.0
		for _, b := range d.Bins {
			if b.Cum > prev { // a bin of weight 0 is never drawn
				hi = max(hi, b.Hi)
			}
			prev = b.Cum
		}
		return d.clamp(float64(hi))
	}
	return d.upper()
}

// upper is the effective maximum: Max, or maxTokens when unbounded.
func (d Dist) upper() int64 {
	if d.Max == 0 {
		return maxTokens
	}
	return d.Max
}

// Sample draws one token count. d must be valid (see Validate); Sample
// panics on an unknown kind, as that is a programming error.
func (d Dist) Sample(r *rand.Rand) int64 {
	var x float64
	switch d.Kind {
	case KindConst:
		x = d.Mean
	case KindUniform:
		lo, hi := int64(math.Round(d.Lo)), int64(math.Round(d.Hi))
		return d.clamp(float64(lo + r.Int64N(hi-lo+1)))
	case KindNormal:
		x = d.Mean + d.Mean*d.CV*r.NormFloat64()
	case KindLognormal:
		mu, sigma := d.mu, d.sigma
		if sigma == 0 {
			mu, sigma = lognormalParams(d.Mean, d.CV)
		}
		x = math.Exp(mu + sigma*r.NormFloat64())
	case KindExponential:
		x = d.Mean * r.ExpFloat64()
	case KindHistogram:
		u := r.Float64()
		i, _ := slices.BinarySearchFunc(d.Bins, u, func(b Bin, u float64) int {
			if b.Cum <= u {
				return -1
			}
			return 1
		})
		b := d.Bins[min(i, len(d.Bins)-1)]
		return d.clamp(float64(b.Lo + r.Int64N(b.Hi-b.Lo+1)))
	default:
		panic(fmt.Sprintf("workload: Sample on invalid distribution kind %q", d.Kind))
	}
	return d.clamp(x)
}

// lognormalParams solves mu, sigma from the distribution's own mean and
// CV: sigma² = ln(1+CV²), mu = ln(mean) - sigma²/2.
func lognormalParams(mean, cv float64) (mu, sigma float64) {
	s2 := math.Log1p(cv * cv)
	return math.Log(mean) - s2/2, math.Sqrt(s2)
}

// clamp rounds x and bounds it to [lower, upper], in float space first so
// that huge tails never overflow the int64 conversion.
func (d Dist) clamp(x float64) int64 {
	x = math.Round(x)
	switch lo, hi := d.lower(), d.upper(); {
	case !(x >= float64(lo)): // also NaN
		return lo
	case x >= float64(hi):
		return hi
	default:
		return int64(x)
	}
}

// String returns the canonical form, which ParseDist reads back to the
// same Dist.
func (d Dist) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var b strings.Builder
	b.WriteString(d.Kind)
	b.WriteByte(':')
	switch d.Kind {
	case KindConst:
		b.WriteString(f(d.Mean))
	case KindUniform:
		b.WriteString(f(d.Lo) + "," + f(d.Hi))
	case KindExponential:
		b.WriteString("mean=" + f(d.Mean))
	case KindHistogram:
		for i, bin := range d.Bins {
			if i > 0 {
				b.WriteByte(',')
			}
			if bin.Lo == bin.Hi {
				fmt.Fprintf(&b, "%d=%s", bin.Lo, f(bin.W))
			} else {
				fmt.Fprintf(&b, "%d-%d=%s", bin.Lo, bin.Hi, f(bin.W))
			}
		}
	default: // normal, lognormal, and anything invalid
		b.WriteString("mean=" + f(d.Mean) + ",cv=" + f(d.CV))
	}
	if d.Min != 0 {
		fmt.Fprintf(&b, ",min=%d", d.Min)
	}
	if d.Max != 0 {
		fmt.Fprintf(&b, ",max=%d", d.Max)
	}
	return b.String()
}
