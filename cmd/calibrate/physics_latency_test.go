package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// calibrate physics says which latency model blis run takes for the
// configuration and why: the physics model with a shipped file fitted on
// it, the roofline otherwise.
func TestPhysicsSaysTheDefaultLatencyModel(t *testing.T) {
	k := physics.DefaultVLLMKnobs()
	sw := k
	sw.MaxNumSeqs, sw.ChunkedPrefillEnabled = 64, false
	for _, c := range []struct {
		model, hw string
		tp        int
		knobs     physics.VLLMKnobs
		want      latencyChoice
	}{
		{"llama-3.1-8b", "h100-sxm", 1, k, latencyChoice{Model: "physics", Coefficients: "builtin:shipped/llama-3.1-8b_h100-sxm_tp1.yaml"}},
		{"llama-2-70b", "h100-sxm", 4, k, latencyChoice{Model: "roofline"}},
		{"llama-2-70b", "a100-80gb", 8, sw, latencyChoice{Model: "physics", Coefficients: "builtin:shipped/llama-2-70b_splitwise.yaml"}},
	} {
		var out bytes.Buffer
		require.NoError(t, runPhysics(&out, &bytes.Buffer{}, physicsOpts{model: c.model, hardware: c.hw, tp: c.tp, knobs: c.knobs, asJSON: true}))
		var got struct {
			D latencyChoice `json:"default_latency"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		require.Equal(t, c.want.Model, got.D.Model, "%s %s TP %d", c.model, c.hw, c.tp)
		require.Equal(t, c.want.Coefficients, got.D.Coefficients)
		require.NotEmpty(t, got.D.Why)
	}
}

// calibrate physics shows the shipped file's provenance: what it was
// fitted on and its held-out step-time error.
func TestPhysicsShowsTheShippedProvenance(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runPhysics(&out, &bytes.Buffer{}, physicsOpts{model: "llama-3.1-8b", hardware: "h100-sxm", tp: 1, knobs: physics.DefaultVLLMKnobs()}))
	s := out.String()
	require.Contains(t, s, "on step times built from measured kernel profiles")
	require.Contains(t, s, "  provenance: fitted on llama-3.1-8b")
	require.Contains(t, s, "Vidur's measured H100 and A100 profiles")
	require.Regexp(t, `held-out step-time error \(cross-validated MAPE\): [0-9.]+ %`, s)
}
