package workload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

const minimalSpec = `version: 1
duration_s: 10
tenants:
  - id: a
`

func TestParseSpecDefaults(t *testing.T) {
	s, err := ParseSpec([]byte(minimalSpec), "w.yaml")
	require.NoError(t, err)
	require.Equal(t, int64(10e6), s.DurationUs)
	require.Equal(t, 1.0, s.Rate)
	require.Equal(t, ProcessPoisson, s.Arrival.Process)
	require.Len(t, s.Tenants, 1)
	tn := s.Tenants[0]
	require.Equal(t, sim.SLOInteractive, tn.SLOClass)
	require.Equal(t, BehaviorNormal, tn.Behavior)
	require.Len(t, tn.Types, 1)
	require.Equal(t, TypeCompletion, tn.Types[0].Type)
	require.Equal(t, defaultPrompt, tn.Types[0].Prompt.String())
	require.Equal(t, DefaultSLOTargets(), s.SLO)
}

// Every refusal names the file, the line and the key.
func TestParseSpecErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown top key", "version: 1\nduration_s: 1\nrat: 3\ntenants: [{id: a}]\n", `w.yaml:3: unknown key "rat" in the top level; use one of version,`},
		{"unknown tenant key", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    wieght: 2\n", `w.yaml:5: unknown key "wieght" in a tenant`},
		{"no version", "duration_s: 1\ntenants: [{id: a}]\n", "w.yaml:1: version: must be 1"},
		{"no end", "version: 1\ntenants: [{id: a}]\n", "duration_s: give duration_s or requests"},
		{"negative rate", "version: 1\nduration_s: 1\nrate: -2\ntenants: [{id: a}]\n", "w.yaml:3: rate: must be requests per second in [0, 1e+07], got -2"},
		{"negative weight", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    weight: -1\n", "w.yaml:5: tenants[0].weight: must be a finite number >= 0, got -1"},
		{"zero weights", "version: 1\nduration_s: 1\ntenants:\n  - {id: a, weight: 0}\n  - {id: b, weight: 0}\n", "tenants: the open-loop tenants' weights sum to 0"},
		{"duplicate tenant", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n  - id: a\n", "w.yaml:5: tenants[1].id: tenant \"a\" is listed twice"},
		{"bad class", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    slo_class: gold\n", `w.yaml:5: tenants[0].slo_class: "gold" is not a class`},
		{"bad dist", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    prompt_tokens: \"pareto:3\"\n", `w.yaml:5: tenants[0].prompt_tokens: distribution "pareto:3"`},
		{"bad type", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    request_types:\n      - type: video\n", `w.yaml:6: tenants[0].request_types[0].type: "video" is not a request type`},
		{"key of another type", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    request_types:\n      - {type: completion, turns: \"3\"}\n", "request_types[0].turns: does not apply to a completion request"},
		{"bounded without max", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    request_types:\n      - {type: chat, context: bounded}\n", "max_context_tokens: context: bounded needs"},
		{"type weights", "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    request_types:\n      - {type: chat, weight: 0}\n", "tenants[0].request_types: the weights sum to 0"},
		{"overlap", "version: 1\nduration_s: 9\nload_profile:\n  - {type: step, start_s: 0, end_s: 5, multiplier: 2}\n  - {type: step, start_s: 4, end_s: 6, multiplier: 2}\ntenants: [{id: a}]\n", "w.yaml:5: load_profile[1].start_s: overlaps the previous segment"},
		{"ramp multiplier", "version: 1\nduration_s: 9\nload_profile:\n  - {type: ramp, start_s: 0, end_s: 5, multiplier: 2}\ntenants: [{id: a}]\n", "load_profile[0].multiplier: a ramp takes from and to"},
		{"gamma under profile", "version: 1\nduration_s: 9\narrival: {process: gamma}\nload_profile:\n  - {type: spike, start_s: 0, end_s: 5, multiplier: 2}\ntenants: [{id: a}]\n", "tenants[0].arrival.process: a load profile needs a Poisson-family process"},
		{"param of another process", "version: 1\nduration_s: 9\narrival: {process: poisson, cv: 2}\ntenants: [{id: a}]\n", "w.yaml:3: arrival.cv: applies to the gamma process only, not poisson"},
		{"burst longer than interval", "version: 1\nduration_s: 9\narrival: {process: bursty, burst_interval_s: 5, burst_duration_s: 6}\ntenants: [{id: a}]\n", "arrival.burst_duration_s: the burst (6 s) must not be longer than its interval (5 s)"},
		{"closed loop weight", "version: 1\nduration_s: 9\ntenants:\n  - id: a\n    weight: 1\n    closed_loop: {clients: 3}\n", "tenants[0].weight: a closed-loop tenant sends at its clients' pace"},
		{"burst without bursty", "version: 1\nduration_s: 9\ntenants:\n  - id: a\n    burst: {probability: 0.5}\n", "tenants[0].burst: applies to behavior: bursty only"},
		{"slo class key", "version: 1\nduration_s: 9\nslo_classes:\n  gold: {ttft_ms: 3}\ntenants: [{id: a}]\n", "w.yaml:4: slo_classes.gold: not a class"},
		{"negative target", "version: 1\nduration_s: 9\nslo_classes:\n  batch: {e2e_ms: -3}\ntenants: [{id: a}]\n", "slo_classes.batch.e2e_ms: must be milliseconds >= 0"},
		{"zipf", "version: 1\nduration_s: 9\ntenants:\n  - id: a\n    prefix: {groups: 2, popularity: \"zipf:0\"}\n", "tenants[0].prefix.popularity: zipf:S needs an exponent"},
		{"two documents", minimalSpec + "---\nversion: 1\n", "a second YAML document"},
		{"wrong type", "version: 1\nduration_s: [1]\ntenants: [{id: a}]\n", "w.yaml:2: cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(tt.body), "w.yaml")
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// Every scenario parses, and its text (what --print-spec shows) is
// documented: it starts with a comment naming it.
func TestScenarios(t *testing.T) {
	names := Scenarios()
	require.Equal(t, []string{"agentic", "bursty-traffic", "diurnal-cycle", "mixed-slo", "multi-turn-chat", "prefix-heavy", "unfair-tenants"}, names)
	for _, n := range names {
		text, err := ScenarioText(n)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(text), "# "+n+": "), n)
		s, err := Scenario(n)
		require.NoError(t, err, n)
		back, err := ParseSpec(text, "scenario "+n)
		require.NoError(t, err)
		require.Equal(t, s, back)
	}
	_, err := Scenario("nope")
	require.ErrorContains(t, err, `no scenario "nope"; the scenarios are agentic, bursty-traffic`)
}
