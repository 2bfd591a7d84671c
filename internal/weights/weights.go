// Package weights reads "name:weight,name:weight" lists, the form of
// blis run's --routing-scorers and --fitness-weights.
package weights

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Weight is one name and its weight.
type Weight struct {
	Name   string
	Weight float64
}

// Parse reads s. Every item is name:weight; weights are finite and >= 0,
// not all 0; a name appears once; known (the caller's vocabulary) accepts
// or rejects each name. item names one entry in errors ("scorer"), list
// the whole ("scorer weights").
func Parse(s, item, list string, known func(name string) error) ([]Weight, error) {
	var out []Weight
	var sum float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, w, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%s %q: want name:weight", item, part)
		}
		name = strings.TrimSpace(name)
		if err := known(name); err != nil {
			return nil, err
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%s %s: weight %q must be a finite number >= 0", item, name, w)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, fmt.Errorf("%s %s is listed twice", item, name)
			}
		}
		out = append(out, Weight{Name: name, Weight: v})
		sum += v
	}
	if !(sum > 0) {
		return nil, fmt.Errorf("%s %q are all 0; at least one must be > 0", list, s)
	}
	if math.IsInf(sum, 0) {
		// Normalizing divides by the sum: an infinite one turns every
		// weight into 0 (or NaN) instead of failing.
		return nil, fmt.Errorf("%s %q sum to more than %g; use smaller numbers (only their ratios matter)", list, s, math.MaxFloat64)
	}
	return out, nil
}
