package fit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// TestCrossCheckRefusesWhatTheTraceContradicts (docs/fit.md, cross-checks): a
// configuration the trace shows to be wrong is refused by name, and one
// trace listed twice is refused instead of counting its samples twice
// (tools/physics_trainer's test_cross_check_and_duplicates).
func TestCrossCheckRefusesWhatTheTraceContradicts(t *testing.T) {
	c, tr := roofTrace(t, nil)
	maxRunning, maxSched := int64(0), int64(0)
	for _, s := range tr.Steps {
		maxRunning, maxSched = max(maxRunning, s.Running), max(maxSched, s.Scheduled)
	}
	require.Greater(t, maxRunning, int64(4))
	with := func(edit func(*physics.VLLMKnobs)) *physics.PhysicsConfig {
		cc := *c
		edit(&cc.Knobs)
		return &cc
	}
	for _, tc := range []struct {
		name string
		cfgs []Config
		want string
	}{
		{"same trace twice", []Config{{Name: "a", Phys: c, Traces: []*Trace{tr, tr}}}, "has the same steps table as configuration a, trace"},
		{"same trace as two configurations", []Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}, {Name: "b", Phys: c, Traces: []*Trace{tr}}},
			"configuration b, trace " + tr.Dir + " has the same steps table as configuration a"},
		{"max_num_seqs below the trace's running", []Config{{Name: "a", Phys: with(func(k *physics.VLLMKnobs) { k.MaxNumSeqs = maxRunning - 1 }), Traces: []*Trace{tr}}},
			"more than the configuration's max_num_seqs"},
		{"max_batched_tokens below the trace's", []Config{{Name: "a", Phys: with(func(k *physics.VLLMKnobs) { k.MaxBatchedTokens = maxSched - 1 }), Traces: []*Trace{tr}}},
			"more than the configuration's max_batched_tokens"},
		{"chunked prefill off on a chunked trace", []Config{{Name: "a", Phys: with(func(k *physics.VLLMKnobs) { k.ChunkedPrefillEnabled = false }), Traces: []*Trace{tr}}},
			"a prefill chunk, but the configuration has chunked prefill off"},
	} {
		_, err := Run(tc.cfgs, DefaultOptions(), "test")
		require.ErrorContains(t, err, tc.want, tc.name)
	}

	// A served model name that does not name the configuration's model is
	// a warning in the report.
	named := *tr
	named.Models = []string{"openai-community/gpt2"}
	res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{&named}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	require.Contains(t, res.Report.Configs[0].Warnings[0], `the requests name the model "openai-community/gpt2", but the configuration's model is "llama-3.1-8b"`)
}

func TestAnyModelMatches(t *testing.T) {
	for _, tc := range []struct {
		model  string
		served []string
		want   bool
	}{
		{"llama-3.1-8b", []string{"meta-llama/Llama-3.1-8B-Instruct"}, true},
		{"Qwen3-32B", []string{"Qwen/Qwen3-32B"}, true},
		{"llama-3.1-8b", []string{"llama"}, true},
		{"gpt2", []string{"meta-llama/Llama-3.1-8B-Instruct"}, false},
		{"llama-3.1-8b", []string{"meta-llama/Llama-3.1-70B"}, false},
		{"llama-3.1-8b", []string{"/"}, false},
	} {
		require.Equal(t, tc.want, anyModelMatches(tc.model, tc.served), "%s vs %v", tc.model, tc.served)
	}
}
