package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPhysicsDefaultRun(t *testing.T) {
	out, err := run(t, "physics")
	require.NoError(t, err)
	assert.Contains(t, out, "llama-3.1-8b: dense, GQA 32/8 heads")
	assert.Contains(t, out, "flops_linear_per_token    1.50093e+10")
	assert.Contains(t, out, "kv_bytes_per_token        131072")
	assert.Contains(t, out, "16 bias")
	assert.Contains(t, out, "11 queued_regime_bias")
	assert.Contains(t, out, "(989.4 TFLOP/s peak, 726.4 sustained in GEMMs (measured; the roofline's ceiling)")
	out, err = run(t, "physics", "--hardware", "a100-80gb")
	require.NoError(t, err)
	assert.Contains(t, out, "(312 TFLOP/s peak, 234 sustained in GEMMs (assumed: 0.75 of the peak;")
}

func TestPhysicsJSONMatchesLibrary(t *testing.T) {
	out, err := run(t, "physics", "--model", "mixtral-8x7b", "--hardware", "a100-80gb", "--tp", "4", "--json")
	require.NoError(t, err)
	var got struct {
		TP       int                `json:"tp"`
		Physics  map[string]float64 `json:"physics_config"`
		VLLM     physics.VLLMKnobs  `json:"vllm"`
		Examples []struct {
			Name  string              `json:"name"`
			Beta  features.BetaInput  `json:"beta_input"`
			Alpha features.AlphaInput `json:"alpha_input"`
			BF    map[string]float64  `json:"beta_features"`
			AF    map[string]float64  `json:"alpha_features"`
		} `json:"examples"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	m, _ := physics.LoadModel("mixtral-8x7b")
	h, _ := physics.LoadHardware("a100-80gb")
	c, err := physics.NewPhysicsConfig(m, h, 4, physics.DefaultVLLMKnobs())
	require.NoError(t, err)
	assert.Equal(t, 4, got.TP)
	assert.Equal(t, c.FlopsLinearPerToken, got.Physics["flops_linear_per_token"])
	assert.Equal(t, c.Knobs.TotalKVBlocksGPU, got.VLLM.TotalKVBlocksGPU)
	require.Len(t, got.Examples, 4)
	for _, e := range got.Examples {
		b := features.BetaFeatures(c, e.Beta)
		for i, name := range features.BetaNames {
			assert.Equal(t, b[i], e.BF[name], "%s %s", e.Name, name)
		}
		a := features.AlphaFeatures(c, e.Alpha)
		for i, name := range features.AlphaNames {
			assert.Equal(t, a[i], e.AF[name], "%s %s", e.Name, name)
		}
	}
}

func TestPhysicsOutputIsDeterministic(t *testing.T) {
	for _, args := range [][]string{{"physics"}, {"physics", "--json", "--model", "qwen2.5-7b", "--tp", "2"}} {
		a, err := run(t, args...)
		require.NoError(t, err)
		b, err := run(t, args...)
		require.NoError(t, err)
		assert.Equal(t, a, b)
	}
}

func TestPhysicsErrorsNameTheInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"physics", "--model", "no-such"}, "--model"},
		{[]string{"physics", "--hardware", "tpu"}, "--hardware"},
		{[]string{"physics", "--tp", "3"}, "--model, --hardware, --tp: tp 3 does not divide num_attention_heads"},
		{[]string{"physics", "--tp", "0"}, "--model, --hardware, --tp: tp must be >= 1, got 0"}, // named no flag
		{[]string{"physics", "--gpu-memory-utilization", "1e-300"}, "--model, --hardware, --tp: model \"llama-3.1-8b\" does not fit"},
		{[]string{"physics", "--max-num-batched-tokens", "0"}, "--max-num-batched-tokens: must be > 0, got 0"},
		{[]string{"physics", "--max-num-seqs", "0"}, "--max-num-seqs: must be > 0, got 0"},
		{[]string{"physics", "--cpu-offloading"}, "--cpu-offloading=true disagrees with --kv-blocks-cpu 0: KV offloading is on exactly when --kv-blocks-cpu > 0"},
		{[]string{"physics", "--cpu-offloading=false", "--kv-blocks-cpu", "10"}, "--cpu-offloading=false disagrees with --kv-blocks-cpu 10"},
		{[]string{"physics", "--kv-blocks-cpu", "-1"}, "--kv-blocks-cpu must be >= 0"},
		{[]string{"physics", "--model", "mixtral-8x7b"}, "does not fit"},
		{[]string{"physics", "extra"}, "unknown command"},
	}
	for _, tc := range cases {
		_, err := run(t, tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestOffloadRuleIsBlisRuns: calibrate turns KV offloading on exactly
// when --kv-blocks-cpu > 0, as blis run does (docs/fit.md).
func TestOffloadRuleIsBlisRuns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--kv-blocks-cpu", "1000"}, true},
		{[]string{"--kv-blocks-cpu", "1000", "--cpu-offloading"}, true},
		{[]string{"--kv-blocks-cpu", "0", "--cpu-offloading=false"}, false},
	} {
		out, err := run(t, append([]string{"physics", "--json"}, tc.args...)...)
		require.NoError(t, err, "%v", tc.args)
		var got struct {
			VLLM physics.VLLMKnobs `json:"vllm"`
		}
		// In-process, cobra prints the deprecation notice of
		// --cpu-offloading into the shared test buffer ahead of the JSON.
		require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got))
		require.Equal(t, tc.want, got.VLLM.CPUOffloading, "%v", tc.args)
	}
}

func TestPhysicsNotesAnAssumedDtype(t *testing.T) {
	// A BLOOM config as shipped on the Hub: n_inner null, no torch_dtype.
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"model_type":"bloom","hidden_size":1024,"n_layer":24,"n_head":16,
	 "n_inner":null,"vocab_size":250880}`), 0o644))
	cmd := newRootCmd()
	var out, stderr bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"physics", "--model", path})
	require.NoError(t, cmd.Execute())
	assert.Contains(t, stderr.String(), "calibrate: note: "+path+": no torch_dtype: weights taken as bfloat16")
	assert.NotContains(t, out.String(), "note:")
}

func TestPhysicsList(t *testing.T) {
	out, err := run(t, "physics", "--list")
	require.NoError(t, err)
	assert.Contains(t, out, "mixtral-8x7b")
	assert.Contains(t, out, "h100-sxm")
}
