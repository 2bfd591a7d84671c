package workload

// docs/hardening.md, class 3: every key takes effect or is refused by name.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// A spec of closed-loop tenants only refuses the keys that drive open-loop
// arrivals (rate, arrival, load_profile), and a closed-loop tenant the
// behaviours that multiply arrivals; each error names its key and line.
func TestClosedLoopSpecRefusesOpenLoopKeys(t *testing.T) {
	const tenants = "tenants:\n  - id: c\n    closed_loop: {clients: 2}\n"
	for key, line := range map[string]string{
		"rate":         "rate: 50\n",
		"arrival":      "arrival: {process: poisson}\n",
		"load_profile": "load_profile:\n  - {type: step, start_s: 0, end_s: 5, multiplier: 2}\n",
	} {
		_, err := ParseSpec([]byte("version: 1\nduration_s: 10\n"+line+tenants), "w.yaml")
		require.ErrorContains(t, err, fmt.Sprintf("w.yaml:3: %s: applies to open-loop tenants only", key))
		// With an open-loop tenant beside it, the key takes effect.
		_, err = ParseSpec([]byte("version: 1\nduration_s: 10\n"+line+tenants+"  - id: o\n"), "w.yaml")
		require.NoError(t, err, key)
	}
	_, err := ParseSpec([]byte("version: 1\nduration_s: 10\ntenants:\n  - id: c\n    behavior: bursty\n    closed_loop: {clients: 2}\n"), "w.yaml")
	require.ErrorContains(t, err, "tenants[0].behavior: bursty multiplies arrivals")
	_, err = ParseSpec([]byte("version: 1\nduration_s: 10\ntenants:\n  - id: c\n    behavior: abusive\n    abusive: {rate_multiplier: 5}\n    closed_loop: {clients: 2}\n"), "w.yaml")
	require.ErrorContains(t, err, "tenants[0].abusive.rate_multiplier: multiplies the arrival rate")
}

// Every time key of a spec is validated after rounding to the clock's
// microsecond: a positive value that rounds to 0 (which would mean none)
// is refused by name; 1 µs is accepted.
func TestSpecTimesValidatedAfterRounding(t *testing.T) {
	for _, tc := range []struct{ key, body string }{
		{"duration_s", "version: 1\nduration_s: %s\ntenants: [{id: a}]\n"},
		{"tenants[0].timeout_s", "version: 1\nduration_s: 1\ntenants:\n  - {id: a, timeout_s: %s}\n"},
		{"load_profile[0].start_s", "version: 1\nduration_s: 1\nload_profile:\n  - {type: step, start_s: %s, end_s: 5, multiplier: 2}\ntenants: [{id: a}]\n"},
		{"load_profile[0].end_s", "version: 1\nduration_s: 1\nload_profile:\n  - {type: step, start_s: 0, end_s: %s, multiplier: 2}\ntenants: [{id: a}]\n"},
		{"arrival.burst_interval_s", "version: 1\nduration_s: 1\narrival: {process: bursty, burst_interval_s: %s, burst_duration_s: 0}\ntenants: [{id: a}]\n"},
		{"arrival.burst_duration_s", "version: 1\nduration_s: 1\narrival: {process: bursty, burst_interval_s: 1, burst_duration_s: %s}\ntenants: [{id: a}]\n"},
		{"arrival.period_s", "version: 1\nduration_s: 1\narrival: {process: diurnal, period_s: %s, time_compression: 1}\ntenants: [{id: a}]\n"},
		{"slo_classes.batch.e2e_ms", "version: 1\nduration_s: 1\nslo_classes:\n  batch: {e2e_ms: %s}\ntenants: [{id: a}]\n"},
	} {
		small := "4e-7"
		if tc.key == "slo_classes.batch.e2e_ms" {
			small = "4e-4"
		}
		_, err := ParseSpec([]byte(fmt.Sprintf(tc.body, small)), "w.yaml")
		require.ErrorContains(t, err, tc.key+": ", tc.key)
		require.ErrorContains(t, err, "rounds to 0 µs", tc.key)
	}
	for _, ok := range []string{"version: 1\nduration_s: 1e-6\ntenants: [{id: a}]\n", "version: 1\nduration_s: 1\ntenants:\n  - {id: a, timeout_s: 1e-6}\n"} {
		_, err := ParseSpec([]byte(ok), "w.yaml")
		require.NoError(t, err)
	}
}

// Class 6: think times that push a request beyond the simulator's clock
// end the stream with an error naming the spec and the key, never a
// request the simulator refuses as "request N: arrival_us ...".
func TestSourceTimesBeyondTheClockNameTheKey(t *testing.T) {
	const huge = `"1125899906842624"` // the largest a distribution takes, ms
	for key, body := range map[string]string{
		"tenants[0].closed_loop.think_time_ms":      "version: 1\nrequests: 10\ntenants:\n  - id: c\n    closed_loop: {clients: 2, think_time_ms: " + huge + "}\n",
		"tenants[1].request_types[1].think_time_ms": "version: 1\nrequests: 30\ntenants:\n  - id: a\n    closed_loop: {clients: 1, think_time_ms: \"100000000000000\"}\n  - id: b\n    closed_loop: {clients: 1, think_time_ms: \"1\"}\n    request_types:\n      - {type: completion, weight: 0.001}\n      - {type: chat, turns: \"5\", think_time_ms: " + huge + "}\n",
	} {
		spec, err := ParseSpec([]byte(body), "w.yaml")
		require.NoError(t, err)
		src := NewSource(spec, sim.NewRNG(1))
		for {
			at, ok := src.Peek()
			if !ok {
				break
			}
			r := src.Next()
			require.NoError(t, r.Validate(), "every request sent is valid")
			require.Equal(t, at, r.ArrivalUs)
			src.RequestDone(r.ID, r.ArrivalUs+1, sim.Completed)
		}
		require.ErrorContains(t, src.Err(), "w.yaml: "+key+": the times it draws put a request at", key)
	}
	spec, err := ParseSpec([]byte(minimalSpec), "w.yaml")
	require.NoError(t, err)
	src := NewSource(spec, sim.NewRNG(1))
	for _, ok := src.Peek(); ok; _, ok = src.Peek() {
		r := src.Next()
		src.RequestDone(r.ID, r.ArrivalUs+1, sim.Completed)
	}
	require.NoError(t, src.Err())
}

// Class 4: totals are bounded where parsed. Closed-loop clients were
// bounded per tenant, not in all (10,000 tenants × 10⁶ clients ran out of
// memory); a burst of 10¹² sessions was scheduled at once.
func TestSpecBoundsTotals(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nrequests: 10\ntenants:\n")
	for i := range 3 {
		fmt.Fprintf(&b, "  - id: t%d\n    closed_loop: {clients: 400000}\n", i)
	}
	_, err := ParseSpec([]byte(b.String()), "w.yaml")
	require.ErrorContains(t, err, "w.yaml:9: tenants[2].closed_loop.clients: the spec's closed-loop clients total 1200000 from the first 3 tenants; at most 1000000 in all")
	for size, want := range map[string]string{
		`"1000000000000"`:                     "can draw bursts of 1000000000000 sessions; at most 100000",
		`"lognormal:mean=20,cv=1"`:            "can draw bursts of",
		`"lognormal:mean=20,cv=1,max=100000"`: "",
		`"uniform:5,20"`:                      "",
	} {
		_, err := ParseSpec([]byte("version: 1\nduration_s: 1\ntenants:\n  - id: a\n    behavior: bursty\n    burst: {size: "+size+"}\n"), "w.yaml")
		if want == "" {
			require.NoError(t, err, size)
		} else {
			require.ErrorContains(t, err, "tenants[0].burst.size: "+want, size)
		}
	}
	// Every scenario shipped stays within the bounds.
	for _, n := range Scenarios() {
		text, err := ScenarioText(n)
		require.NoError(t, err)
		_, err = ParseSpec(text, n)
		require.NoError(t, err, n)
	}
}
