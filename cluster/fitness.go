package cluster

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/blis-sim/blis/internal/weights"
	"github.com/blis-sim/blis/sim"
)

// Fitness (docs/cluster.md, fitness) folds a run's metrics into one number for comparing
// policies: a weighted sum of normalized metrics, higher being better.
//
//   - A latency metric of value v µs maps to 1 / (1 + v/1000): 1 ms gives
//     0.5, 50 ms 0.0196.
//   - Throughput maps to v / (v + ref), ref = 100 requests/s for
//     throughput and 10,000 output tokens/s for tokens_per_sec.
//   - A latency with no samples (every request rejected, dropped or timed
//     out before it) has no value: its raw value is null, its sample
//     count 0, and it maps to 0, the worst, never to the 1 a latency of
//     0 ms would give. A run that serves nothing scores 0.
//
// Weights are used as given (not normalized) and must be >= 0, not all 0.
// The normalization compresses differences (a 38 % better TTFT can be an
// 8 % better fitness), so the raw metrics are always printed beside it.
//
// Keys: throughput, tokens_per_sec, and STAT_METRIC with STAT one of mean,
// p50, p90, p95, p99, max and METRIC one of ttft, itl, e2e,
// scheduling_delay (e.g. p99_ttft).

// Reference throughputs of the normalization.
const (
	ReferenceRPS = 100.0
	ReferenceTPS = 10_000.0
)

// FitnessWeight is one key and its weight.
type FitnessWeight struct {
	Key    string
	Weight float64
}

var (
	fitnessStats   = []string{"mean", "p50", "p90", "p95", "p99", "max"}
	fitnessMetrics = []string{"ttft", "itl", "e2e", "scheduling_delay"}
)

// FitnessKeys lists every valid key.
func FitnessKeys() []string {
	keys := []string{"throughput", "tokens_per_sec"}
	for _, m := range fitnessMetrics {
		for _, s := range fitnessStats {
			keys = append(keys, s+"_"+m)
		}
	}
	return keys
}

func validFitnessKey(k string) bool {
	for _, v := range FitnessKeys() {
		if v == k {
			return true
		}
	}
	return false
}

// ParseFitnessWeights reads "key:weight,key:weight".
func ParseFitnessWeights(s string) ([]FitnessWeight, error) {
	ws, err := weights.Parse(s, "fitness key", "fitness weights", func(k string) error {
		if !validFitnessKey(k) {
			return fmt.Errorf("fitness key %q is not a metric; use throughput, tokens_per_sec or STAT_METRIC with STAT in %s and METRIC in %s",
				k, strings.Join(fitnessStats, ", "), strings.Join(fitnessMetrics, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]FitnessWeight, len(ws))
	for i, w := range ws {
		out[i] = FitnessWeight{Key: w.Name, Weight: w.Weight}
	}
	return out, nil
}

// FitnessResult is the score and how each key contributed.
type FitnessResult struct {
	Score      float64            `json:"score"`
	Components []FitnessComponent `json:"components"`
}

// FitnessComponent is one key's raw value (ms for latencies, per second
// for throughputs), normalized value and weight; for a latency key, the
// number of samples its raw value summarizes (Raw is null in JSON when
// there are none).
type FitnessComponent struct {
	Key        string  `json:"key"`
	Raw        float64 `json:"raw"`
	Normalized float64 `json:"normalized"`
	Weight     float64 `json:"weight"`
	// Samples is the latency's sample count, nil for a throughput key.
	Samples *int64 `json:"samples,omitempty"`
}

// MarshalJSON writes raw as null for a latency without samples.
func (c FitnessComponent) MarshalJSON() ([]byte, error) {
	type plain FitnessComponent
	if c.Samples != nil && *c.Samples == 0 {
		return json.Marshal(struct {
			plain
			Raw *float64 `json:"raw"`
		}{plain: plain(c)})
	}
	return json.Marshal(plain(c))
}

func statOf(d sim.Distribution, stat string) float64 {
	switch stat {
	case "mean":
		return d.Mean
	case "p50":
		return d.P50
	case "p90":
		return d.P90
	case "p95":
		return d.P95
	case "p99":
		return d.P99
	}
	return d.Max
}

// Fitness scores a run.
func Fitness(r *Result, ws []FitnessWeight) FitnessResult {
	var f FitnessResult
	for _, w := range ws {
		c := FitnessComponent{Key: w.Key, Weight: w.Weight}
		switch w.Key {
		case "throughput":
			c.Raw = r.RequestsPerS
			c.Normalized = c.Raw / (c.Raw + ReferenceRPS)
		case "tokens_per_sec":
			c.Raw = r.OutputTokensPerS
			c.Normalized = c.Raw / (c.Raw + ReferenceTPS)
		default:
			stat, metric, _ := strings.Cut(w.Key, "_")
			d := map[string]sim.Distribution{"ttft": r.TTFT, "itl": r.ITL, "e2e": r.E2E, "scheduling_delay": r.SchedulingDelay}[metric]
			n := d.Count
			c.Samples = &n
			if n > 0 {
				c.Raw = statOf(d, stat)
				c.Normalized = 1 / (1 + c.Raw) // v µs / 1000 = v ms
			}
		}
		f.Score += c.Weight * c.Normalized
		f.Components = append(f.Components, c)
	}
	return f
}
