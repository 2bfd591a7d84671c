package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// CounterSecond is one tick of an engine's counters, measured (vLLM's stat
// logger) or simulated (cluster windows): the prompt and generated tokens
// per second counted in the tick, and the running and waiting requests at
// its end, all summed over the data-parallel engines.
type CounterSecond struct {
	PromptPerS, GenerationPerS float64
	Running, Waiting           int64
}

// PhaseStat is one side of a phase: the ticks in it and the median of the
// phase's quantity over them (nearest rank, the lower middle value; NaN
// without ticks).
type PhaseStat struct {
	Ticks  int     `json:"ticks"`
	Median float64 `json:"median"`
}

// Phase compares measured and simulated engine counters over the ticks of
// one phase of a run.
type Phase struct {
	Name string `json:"phase"`
	// Unit is the quantity's: "ms" for the step time, running requests ÷
	// generated tokens per second (one token per running request per step
	// when no request is prefilling), "tokens/s" for a throughput per
	// engine.
	Unit                string    `json:"unit"`
	Measured, Simulated PhaseStat `json:"-"`
	// Err is (simulated − measured) / measured of the medians, NaN when
	// either side has no tick.
	Err float64 `json:"-"`
}

// decodeBands are the bands of running requests per engine that the
// decode-only ticks are split into: [1, 8), [8, 32), [32, 128), [128, ∞).
var decodeBands = []int64{1, 8, 32, 128}

// ComparePhases splits the ticks of both sides into phases and compares
// the medians:
//   - decode only (no prompt token counted, some generated), by running
//     requests per engine (decodeBands): the step time, ms;
//   - prefilling with requests waiting (prompt tokens counted and a
//     queue at the tick's end, the engine saturated): the step time, ms,
//     and the prompt plus generated tokens per second per engine.
//
// The step time is running ÷ generated tokens per second: exact for a tick
// of decode steps with a constant batch, an estimate otherwise (requests
// that finish within the tick are not in its end count). Ticks without a
// generated token or a running request have no step time and are left
// out. engines (≥ 1) divides the sums.
func ComparePhases(measured, simulated []CounterSecond, engines int) []Phase {
	e := float64(max(engines, 1))
	type pick func(c *CounterSecond) (float64, bool)
	step := func(c *CounterSecond) (float64, bool) {
		if c.GenerationPerS <= 0 || c.Running <= 0 {
			return 0, false
		}
		return 1000 * float64(c.Running) / c.GenerationPerS, true
	}
	decode := func(lo, hi int64) pick {
		return func(c *CounterSecond) (float64, bool) {
			per := float64(c.Running) / e
			if c.PromptPerS != 0 || per < float64(lo) || (hi > 0 && per >= float64(hi)) {
				return 0, false
			}
			return step(c)
		}
	}
	saturated := func(c *CounterSecond) bool { return c.PromptPerS > 0 && c.Waiting > 0 }
	var phases []Phase
	add := func(name, unit string, f pick) {
		p := Phase{Name: name, Unit: unit, Measured: medianOf(measured, f), Simulated: medianOf(simulated, f)}
		p.Err = relErr(p.Simulated.Median, p.Measured.Median)
		phases = append(phases, p)
	}
	for i, lo := range decodeBands {
		var hi int64
		name := fmt.Sprintf("decode only, %d+ running per engine", lo)
		if i+1 < len(decodeBands) {
			hi = decodeBands[i+1]
			name = fmt.Sprintf("decode only, %d-%d running per engine", lo, hi-1)
		}
		add(name, "ms", decode(lo, hi))
	}
	add("prefilling, requests waiting", "ms", func(c *CounterSecond) (float64, bool) {
		if !saturated(c) {
			return 0, false
		}
		return step(c)
	})
	add("prefilling, requests waiting", "tokens/s", func(c *CounterSecond) (float64, bool) {
		if !saturated(c) {
			return 0, false
		}
		return (c.PromptPerS + c.GenerationPerS) / e, true
	})
	return phases
}

func medianOf(ticks []CounterSecond, f func(*CounterSecond) (float64, bool)) PhaseStat {
	var v []float64
	for i := range ticks {
		if x, ok := f(&ticks[i]); ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return PhaseStat{Median: math.NaN()}
	}
	slices.Sort(v)
	// Nearest rank, as for the latencies: the lower middle value.
	return PhaseStat{Ticks: len(v), Median: v[(len(v)-1)/2]}
}

// MarshalJSON encodes a phase with NaN as null.
func (p Phase) MarshalJSON() ([]byte, error) {
	stat := func(s PhaseStat) any {
		return struct {
			Ticks  int      `json:"ticks"`
			Median *float64 `json:"median"`
		}{s.Ticks, nullable(s.Median)}
	}
	return json.Marshal(struct {
		Name      string   `json:"phase"`
		Unit      string   `json:"unit"`
		Measured  any      `json:"measured"`
		Simulated any      `json:"simulated"`
		Err       *float64 `json:"err"`
	}{p.Name, p.Unit, stat(p.Measured), stat(p.Simulated), nullable(p.Err)})
}

// WritePhases prints the phases as an aligned table.
func WritePhases(w io.Writer, phases []Phase) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tunit\tmeas_ticks\tsim_ticks\tmeas_median\tsim_median\terr\t")
	num := func(x float64) string {
		if math.IsNaN(x) {
			return "n/a"
		}
		return fmt.Sprintf("%.1f", x)
	}
	for _, p := range phases {
		e := "n/a"
		if !math.IsNaN(p.Err) {
			e = fmt.Sprintf("%+.1f%%", 100*p.Err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", p.Name, p.Unit, p.Measured.Ticks, p.Simulated.Ticks, num(p.Measured.Median), num(p.Simulated.Median), e)
	}
	return tw.Flush()
}
