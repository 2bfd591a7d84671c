package features

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// The golden fixture is generated from the case list below by this code and
// checked in. Regenerate it with:
//
//	go test ./features -run TestGoldenFixtureUpToDate -update
var update = flag.Bool("update", false, "rewrite testdata/physics_features_golden.json from the code")

const goldenPath = "../testdata/physics_features_golden.json"

type goldenFixture struct {
	Version               string            `json:"version"`
	Description           string            `json:"description"`
	Spec                  string            `json:"spec"`
	Regenerate            string            `json:"regenerate"`
	ToleranceRelative     float64           `json:"tolerance_relative"`
	ToleranceAbsoluteZero float64           `json:"tolerance_absolute_zero"`
	Epsilon               float64           `json:"epsilon"`
	FeatureMax            float64           `json:"feature_max"`
	AlphaFeatureNames     [NumAlpha]string  `json:"alpha_feature_names"`
	BetaFeatureNames      [NumBeta]string   `json:"beta_feature_names"`
	BetaV2FeatureNames    [NumBetaV2]string `json:"beta_v2_feature_names"`
	BetaV3FeatureNames    [NumBetaV3]string `json:"beta_v3_feature_names"`
	TestCases             []goldenCase      `json:"test_cases"`
}

type goldenConfig struct {
	Model    json.RawMessage   `json:"model"`
	Hardware json.RawMessage   `json:"hardware"`
	TP       int               `json:"tp"`
	VLLM     physics.VLLMKnobs `json:"vllm"`
}

type goldenCase struct {
	ID                    string              `json:"id"`
	Description           string              `json:"description"`
	Tags                  []string            `json:"tags"`
	Config                goldenConfig        `json:"config"`
	AlphaInput            AlphaInput          `json:"alpha_input"`
	BetaInput             BetaInput           `json:"beta_input"`
	ExpectedPhysicsConfig goldenPhysics       `json:"expected_physics_config"`
	ExpectedIntermediates goldenIntermediates `json:"expected_intermediates"`
	ExpectedAlpha         [NumAlpha]float64   `json:"expected_alpha_features"`
	ExpectedBeta          [NumBeta]float64    `json:"expected_beta_features"`
	// ExpectedBetaV2 is spec 2.0's vector; null when the hardware has no
	// boost clock (the seed's hardware), which spec 2.0 refuses.
	ExpectedBetaV2 *[NumBetaV2]float64 `json:"expected_beta_v2_features"`
	// ExpectedBetaV3 is spec 3.0's vector, null where spec 2.0's is.
	ExpectedBetaV3 *[NumBetaV3]float64 `json:"expected_beta_v3_features"`
}

// goldenPhysics carries every PhysicsConfig constant, so that a
// cross-language mismatch can be traced to a constant before a feature
// (docs/physics-spec.md, the golden fixture).
type goldenPhysics struct {
	*physics.PhysicsConfig
	TotalKVBlocksGPU int64 `json:"total_kv_blocks_gpu"`
}

type goldenIntermediates struct {
	GateS                    float64 `json:"gate_s"`
	GateM                    float64 `json:"gate_m"`
	GateG                    float64 `json:"gate_g"`
	EffectiveWeightBytesStep float64 `json:"effective_weight_bytes_step"`
	MoEActivationStep        float64 `json:"moe_activation_step"`
}

func physicsOf(c *physics.PhysicsConfig) goldenPhysics {
	return goldenPhysics{PhysicsConfig: c, TotalKVBlocksGPU: c.Knobs.TotalKVBlocksGPU}
}

func intermediatesOf(c *physics.PhysicsConfig, a AlphaInput, b BetaInput) goldenIntermediates {
	s, m, g := Gate(c, a.RunningDepth, a.KVUsageRatio)
	return goldenIntermediates{GateS: s, GateM: m, GateG: g,
		EffectiveWeightBytesStep: c.EffectiveWeightBytes(b.ScheduledTokens),
		MoEActivationStep:        c.MoEActivation(b.ScheduledTokens)}
}

// --- the case list -------------------------------------------------------

// seedModel and seedHardware are Iteration 6, Refinement 3 verbatim.
const seedModel = `{"name":"llama-8b-seed","num_hidden_layers":32,"hidden_size":4096,"num_attention_heads":32,` +
	`"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256,"n_mlp_proj":3,"bytes_per_param":2}`
const seedHardware = `{"name":"H100-seed","TFlopsPeak":989,"BwPeakTBs":3.35,"pcie_bandwidth_gb_s":64,` +
	`"pcie_efficiency":0.75,"interconnect_bandwidth_gb_s":900}`

type setup struct {
	model, hw string // shipped names, or "seed"
	tp        int
	label     string // knob variant, part of the case id
	knobs     func(*physics.VLLMKnobs)
}

func knobsFixed(blocks int64, chunked, offload bool) func(*physics.VLLMKnobs) {
	return func(k *physics.VLLMKnobs) {
		k.TotalKVBlocksGPU = blocks
		k.ChunkedPrefillEnabled = chunked
		k.CPUOffloading = offload
		if offload {
			k.TotalKVBlocksCPU = 4 * max(blocks, 5000)
		}
	}
}

// shape is one batch composition with the arrival state paired with it.
type shape struct {
	desc  string
	alpha AlphaInput
	beta  func(k physics.VLLMKnobs) BetaInput
}

func decodes(n int, ctx0, step int64) func(*BetaInput) {
	return func(b *BetaInput) {
		for i := 0; i < n; i++ {
			ctx := ctx0 + int64(i)*step
			b.AddDecode(ctx, (ctx+15)/16)
		}
	}
}

func batch(ema float64, parts ...func(*BetaInput)) func(physics.VLLMKnobs) BetaInput {
	return func(physics.VLLMKnobs) BetaInput {
		var b BetaInput
		for _, p := range parts {
			p(&b)
		}
		b.PreemptionEMA = ema
		return b
	}
}

func prefill(computed, chunk int64) func(*BetaInput) {
	return func(b *BetaInput) { b.AddPrefill(computed, chunk) }
}

func offloadIO(transfer, read int64) func(*BetaInput) {
	return func(b *BetaInput) { b.TransferBlocks, b.CPUResidentReadBlocks = transfer, read }
}

var shapes = map[string]shape{
	"pure_prefill": {desc: "one whole 512-token prompt", alpha: AlphaInput{RunningDepth: 24, WaitingDepth: 8, KVUsageRatio: 0.72,
		PromptTokens: 512, KVFreeBytes: 5e9, PreemptionEMA: 0.05}, beta: batch(0.05, prefill(0, 512))},
	"pure_decode": {desc: "64 decodes, contexts 200..2090", alpha: AlphaInput{RunningDepth: 64, WaitingDepth: 0, KVUsageRatio: 0.35,
		PromptTokens: 900, KVFreeBytes: 2.5e10}, beta: batch(0, decodes(64, 200, 30))},
	"mixed": {desc: "two prefill chunks and 30 decodes", alpha: AlphaInput{RunningDepth: 120, WaitingDepth: 17, KVUsageRatio: 0.6,
		PromptTokens: 2048, PrefixHitRatio: 0.25, KVFreeBytes: 8e9, PreemptionEMA: 0.02},
		beta: batch(0.02, prefill(0, 300), prefill(256, 1024), decodes(30, 700, 91))},
	"chunked_multi": {desc: "late chunks of two long prompts (512 at 1024, 2048 at 6144) and 10 decodes", alpha: AlphaInput{RunningDepth: 40,
		WaitingDepth: 3, KVUsageRatio: 0.45, PromptTokens: 8192, KVFreeBytes: 1.2e10},
		beta: batch(0, prefill(1024, 512), prefill(6144, 2048), decodes(10, 3000, 7))},
	"single_token_decode": {desc: "one decode token over a 37-token context", alpha: AlphaInput{RunningDepth: 1, KVUsageRatio: 0.001,
		PromptTokens: 12, KVFreeBytes: 4e10}, beta: batch(0, decodes(1, 37, 0))},
	"empty": {desc: "an empty step and an idle engine", alpha: AlphaInput{}, beta: batch(0)},
	"single_request": {desc: "a one-token prompt alone", alpha: AlphaInput{PromptTokens: 1, KVFreeBytes: 1e10},
		beta: batch(0, prefill(0, 1))},
	"max_batch": {desc: "max_num_seqs running and the token budget full", alpha: AlphaInput{RunningDepth: 256, WaitingDepth: 1000,
		KVUsageRatio: 0.97, PromptTokens: 4000, KVFreeBytes: 3e8, PreemptionEMA: 0.3},
		beta: func(k physics.VLLMKnobs) BetaInput {
			var b BetaInput
			decodes(int(k.MaxNumSeqs-1), 500, 13)(&b)
			b.AddPrefill(100, k.MaxBatchedTokens-(k.MaxNumSeqs-1))
			b.PreemptionEMA = 0.3
			return b
		}},
	"moe_small": {desc: "8 decode tokens: few experts touched", alpha: AlphaInput{RunningDepth: 8, WaitingDepth: 1, KVUsageRatio: 0.1,
		PromptTokens: 300, KVFreeBytes: 3e10}, beta: batch(0, decodes(8, 128, 64))},
	"moe_large": {desc: "a 4096-token prefill with 64 decodes: every expert touched", alpha: AlphaInput{RunningDepth: 65, WaitingDepth: 40,
		KVUsageRatio: 0.8, PromptTokens: 4096, KVFreeBytes: 2e9, PreemptionEMA: 0.1},
		beta: batch(0.1, prefill(0, 4096), decodes(64, 1000, 10))},
	"moe_b50": {desc: "50 decode tokens: (1−top_k/E)^50 is far from underflow", alpha: AlphaInput{RunningDepth: 50, WaitingDepth: 1,
		KVUsageRatio: 0.3, PromptTokens: 64, KVFreeBytes: 1e10}, beta: batch(0, decodes(50, 64, 1))},
	"moe_b130": {desc: "130 decode tokens: the last B at which 1−0.75^B is still below 1 in float64", alpha: AlphaInput{RunningDepth: 130, WaitingDepth: 1,
		KVUsageRatio: 0.3, PromptTokens: 64, KVFreeBytes: 1e10}, beta: batch(0, decodes(130, 64, 1))},
	"moe_b131": {desc: "131 decode tokens: the first B at which 1−0.75^B rounds to exactly 1", alpha: AlphaInput{RunningDepth: 131, WaitingDepth: 1,
		KVUsageRatio: 0.3, PromptTokens: 64, KVFreeBytes: 1e10}, beta: batch(0, decodes(131, 64, 1))},
	"moe_b3000": {desc: "3000 tokens: 0.75^3000 underflows to 0 (from B = 2591)", alpha: AlphaInput{RunningDepth: 2, WaitingDepth: 1,
		KVUsageRatio: 0.3, PromptTokens: 64, KVFreeBytes: 1e10}, beta: batch(0, prefill(0, 2999), decodes(1, 10, 0))},
	"full_kv": {desc: "KV cache full: no free bytes, kv_usage 1", alpha: AlphaInput{RunningDepth: 200, WaitingDepth: 50,
		KVUsageRatio: 1.0, PromptTokens: 1000, KVFreeBytes: 0, PreemptionEMA: 0.4},
		beta: batch(0.4, decodes(200, 1500, 3))},
	"offload_io": {desc: "decodes with KV blocks moving over PCIe", alpha: AlphaInput{RunningDepth: 100, WaitingDepth: 20,
		KVUsageRatio: 0.9, PromptTokens: 3000, KVFreeBytes: 1e9, PreemptionEMA: 0.05},
		beta: batch(0.05, prefill(0, 256), decodes(99, 2000, 5), offloadIO(48, 130))},
	"near_epsilon": {desc: "denominators at ε: free bytes 1e-6, tiny ratios", alpha: AlphaInput{RunningDepth: 1, WaitingDepth: 1,
		KVUsageRatio: 1e-6, PromptTokens: 1, PrefixHitRatio: 1e-6, KVFreeBytes: 1e-6, PreemptionEMA: 1e-6},
		beta: batch(1e-6, decodes(1, 1, 0))},
	"below_epsilon": {desc: "free bytes below ε are floored to ε", alpha: AlphaInput{RunningDepth: 3, WaitingDepth: 2,
		KVUsageRatio: 0.5, PromptTokens: 2, KVFreeBytes: 5e-7}, beta: batch(0, prefill(0, 2))},
	"oversubscribed": {desc: "running above max_num_seqs and kv ratio above 1: gate inputs clamp", alpha: AlphaInput{RunningDepth: 300,
		WaitingDepth: 5, KVUsageRatio: 1.02, PromptTokens: 100, KVFreeBytes: 1e7}, beta: batch(0, decodes(256, 100, 1))},
	"queue_1000": {desc: "log1p at 1000 waiting", alpha: AlphaInput{RunningDepth: 250, WaitingDepth: 1000, KVUsageRatio: 0.9,
		PromptTokens: 128, KVFreeBytes: 5e9}, beta: batch(0, decodes(250, 50, 2))},
	"queue_1": {desc: "log1p at 1 waiting", alpha: AlphaInput{RunningDepth: 10, WaitingDepth: 1, KVUsageRatio: 0.2,
		PromptTokens: 128, KVFreeBytes: 5e9}, beta: batch(0, prefill(0, 128), decodes(9, 50, 2))},
}

type caseSpec struct {
	setup setup
	shape string
	tags  []string
}

func shipped(model, hw string, tp int, blocks int64, chunked, offload bool) setup {
	label := ""
	if chunked {
		label += "_chunked"
	}
	if offload {
		label += "_offload"
	}
	if blocks == 0 {
		label += "_derivedkv"
	}
	return setup{model, hw, tp, label, knobsFixed(blocks, chunked, offload)}
}

func caseList() []caseSpec {
	var cs []caseSpec
	add := func(s setup, tags []string, shapes ...string) {
		for _, sh := range shapes {
			cs = append(cs, caseSpec{s, sh, tags})
		}
	}
	seed := setup{"seed", "seed", 1, "", func(k *physics.VLLMKnobs) {
		*k = physics.VLLMKnobs{MaxNumSeqs: 256, MaxBatchedTokens: 8192, BlockSizeTokens: 16, TotalKVBlocksGPU: 4000,
			GPUMemoryUtilization: 0.9}
	}}
	cs = append(cs, caseSpec{seed, "seed_worked", []string{"dense_gqa", "h100", "tp1", "seed_worked_case"}})

	l8 := "llama-3.1-8b"
	add(shipped(l8, "h100-sxm", 1, 4000, false, false), []string{"dense_gqa", "h100", "tp1"},
		"pure_prefill", "pure_decode", "mixed", "single_token_decode", "empty", "single_request", "full_kv", "near_epsilon", "below_epsilon", "queue_1")
	add(shipped(l8, "h100-sxm", 1, 0, true, false), []string{"dense_gqa", "h100", "tp1", "chunked", "kv_blocks_derived"},
		"chunked_multi", "max_batch", "mixed")
	add(shipped(l8, "h100-sxm", 2, 20000, true, true), []string{"dense_gqa", "h100", "tp2", "chunked", "offload"},
		"offload_io", "mixed", "full_kv")
	add(shipped(l8, "h100-sxm", 4, 30000, true, false), []string{"dense_gqa", "h100", "tp4", "chunked"},
		"max_batch", "pure_decode", "oversubscribed")
	add(shipped(l8, "a100-80gb", 1, 12000, false, false), []string{"dense_gqa", "a100", "tp1"},
		"pure_prefill", "pure_decode", "queue_1000")
	add(shipped(l8, "a100-80gb", 2, 0, true, true), []string{"dense_gqa", "a100", "tp2", "chunked", "offload", "kv_blocks_derived"},
		"offload_io", "chunked_multi")

	l7 := "llama-2-7b"
	add(shipped(l7, "a100-80gb", 1, 3000, false, false), []string{"dense_mha", "a100", "tp1"},
		"pure_prefill", "pure_decode", "mixed", "empty", "full_kv")
	add(shipped(l7, "a100-80gb", 2, 9000, true, false), []string{"dense_mha", "a100", "tp2", "chunked"},
		"chunked_multi", "max_batch")
	add(shipped(l7, "a100-80gb", 4, 20000, true, true), []string{"dense_mha", "a100", "tp4", "chunked", "offload"},
		"offload_io", "oversubscribed")
	add(shipped(l7, "h100-sxm", 1, 0, false, false), []string{"dense_mha", "h100", "tp1", "kv_blocks_derived"},
		"single_request", "queue_1000")

	add(shipped("gpt2", "a100-80gb", 1, 50000, false, false), []string{"dense_mha", "non_gated", "fp32", "a100", "tp1"},
		"pure_prefill", "mixed")
	add(shipped("gpt2", "l40s", 2, 0, true, false), []string{"dense_mha", "non_gated", "fp32", "l40s", "tp2", "kv_blocks_derived"},
		"chunked_multi")

	mx := "mixtral-8x7b"
	add(shipped(mx, "h100-sxm", 2, 15000, true, false), []string{"moe", "h100", "tp2", "chunked"},
		"moe_small", "moe_large", "moe_b50", "moe_b130", "moe_b131", "moe_b3000", "single_token_decode", "empty", "mixed")
	add(shipped(mx, "h100-sxm", 4, 0, true, true), []string{"moe", "h100", "tp4", "chunked", "offload", "kv_blocks_derived"},
		"moe_small", "offload_io", "max_batch")
	add(shipped(mx, "a100-80gb", 4, 10000, false, false), []string{"moe", "a100", "tp4"},
		"moe_large", "pure_decode", "full_kv")

	add(shipped("qwen2.5-7b", "h100-sxm", 1, 8000, true, false), []string{"dense_gqa", "h100", "tp1", "chunked"},
		"mixed", "near_epsilon")
	add(shipped("qwen2.5-7b", "h100-sxm", 4, 40000, true, false), []string{"dense_gqa", "h100", "tp4", "chunked"},
		"chunked_multi")
	add(shipped("llama-2-70b", "h100-sxm", 4, 0, true, false), []string{"dense_gqa", "h100", "tp4", "chunked", "kv_blocks_derived"},
		"max_batch", "mixed")
	add(shipped("codellama-34b", "a100-80gb", 4, 16000, true, false), []string{"dense_gqa", "a100", "tp4", "chunked"},
		"chunked_multi", "pure_decode")
	return cs
}

func seedWorkedShape() shape {
	return shape{
		desc: "the design's worked example: LLaMA-8B, H100, TP 1, pure prefill, with the design's own config and inputs",
		alpha: AlphaInput{RunningDepth: 24, WaitingDepth: 8, KVUsageRatio: 0.72, PromptTokens: 512, PrefixHitRatio: 0,
			KVFreeBytes: 1835008, PreemptionEMA: 0.05},
		beta: func(physics.VLLMKnobs) BetaInput {
			return BetaInput{PrefillTokens: 512, ScheduledTokens: 512, NumPrefillReqs: 1, RunningDepth: 1,
				SumPrefillAttnWork: 262144, PreemptionEMA: 0.05}
		},
	}
}

// resolveSetup returns the JSON the fixture carries for a setup.
func resolveSetup(t testing.TB, s setup) (modelJSON, hwJSON []byte, knobs physics.VLLMKnobs) {
	t.Helper()
	knobs = physics.DefaultVLLMKnobs()
	s.knobs(&knobs)
	if s.model == "seed" {
		return []byte(seedModel), []byte(seedHardware), knobs
	}
	m, err := physics.LoadModel(s.model)
	require.NoError(t, err)
	h, err := physics.LoadHardware(s.hw)
	require.NoError(t, err)
	// Neither the sources, the device names, the measured GEMM rate nor
	// the interconnect and compute capability (the roofline's, not the
	// features') enter the features.
	h.Sources, h.DeviceNames, h.GEMMTFlops = nil, nil, 0
	h.Interconnect, h.ComputeCapability = "", ""
	modelJSON, err = json.Marshal(m)
	require.NoError(t, err)
	hwJSON, err = json.Marshal(h)
	require.NoError(t, err)
	return modelJSON, hwJSON, knobs
}

// configFromFixture rebuilds a PhysicsConfig from a case's JSON alone, as
// the Python twin must.
func configFromFixture(cfg goldenConfig, id string) (*physics.PhysicsConfig, error) {
	m, err := physics.ParseModelConfig(cfg.Model, id+".config.model")
	if err != nil {
		return nil, err
	}
	h, err := physics.ParseHardwareSpec(cfg.Hardware, id+".config.hardware")
	if err != nil {
		return nil, err
	}
	return physics.NewPhysicsConfig(m, h, cfg.TP, cfg.VLLM)
}

func buildFixture(t testing.TB) goldenFixture {
	fx := goldenFixture{
		Version:           "1.0",
		Description:       "Physics-normalized feature golden cases: inputs and the values the Go implementation computes for them. Go is authoritative; the Python twin must match.",
		Spec:              "docs/physics-spec.md",
		Regenerate:        "go test ./features -run TestGoldenFixtureUpToDate -update",
		ToleranceRelative: 1e-10, ToleranceAbsoluteZero: 1e-15,
		Epsilon: Epsilon, FeatureMax: FeatureMax,
		AlphaFeatureNames: AlphaNames, BetaFeatureNames: BetaNames, BetaV2FeatureNames: BetaV2Names,
		BetaV3FeatureNames: BetaV3Names,
	}
	seen := map[string]int{}
	for _, cspec := range caseList() {
		sh, ok := shapes[cspec.shape]
		if cspec.shape == "seed_worked" {
			sh, ok = seedWorkedShape(), true
		}
		require.True(t, ok, "unknown shape %s", cspec.shape)
		modelJSON, hwJSON, knobs := resolveSetup(t, cspec.setup)
		gc := goldenConfig{Model: modelJSON, Hardware: hwJSON, TP: cspec.setup.tp, VLLM: knobs}
		id := fmt.Sprintf("%s_%s_tp%d%s_%s", cspec.setup.model, cspec.setup.hw, cspec.setup.tp, cspec.setup.label, cspec.shape)
		if cspec.setup.model == "seed" {
			id = "seed_llama8b_h100_tp1_worked_case"
		}
		seen[id]++
		require.Equal(t, 1, seen[id], "duplicate case id %s", id)
		c, err := configFromFixture(gc, id)
		require.NoError(t, err, id)
		b := sh.beta(c.Knobs)
		tags := append(append([]string{}, cspec.tags...), cspec.shape)
		if c.Knobs.CPUOffloading {
			tags = append(tags, "offload_on")
		} else {
			tags = append(tags, "offload_off")
		}
		sort.Strings(tags)
		var v2, v3 *[NumBetaV2]float64
		if CheckSpec(c, SpecV2) == nil {
			f, f3 := BetaFeaturesV2(c, b), BetaFeaturesV3(c, b)
			v2, v3 = &f, &f3
		}
		fx.TestCases = append(fx.TestCases, goldenCase{
			ID: id, Description: sh.desc, Tags: tags, Config: gc,
			AlphaInput: sh.alpha, BetaInput: b,
			ExpectedPhysicsConfig: physicsOf(c),
			ExpectedIntermediates: intermediatesOf(c, sh.alpha, b),
			ExpectedAlpha:         AlphaFeatures(c, sh.alpha),
			ExpectedBeta:          BetaFeatures(c, b),
			ExpectedBetaV2:        v2,
			ExpectedBetaV3:        v3,
		})
	}
	return fx
}

func marshalFixture(t testing.TB, fx goldenFixture) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(fx))
	return buf.Bytes()
}

// TestGoldenFixtureUpToDate fails when the checked-in fixture is not exactly
// what the code computes now.
func TestGoldenFixtureUpToDate(t *testing.T) {
	want := marshalFixture(t, buildFixture(t))
	if *update {
		require.NoError(t, os.WriteFile(goldenPath, want, 0o644))
		t.Logf("wrote %s (%d bytes)", goldenPath, len(want))
		return
	}
	got, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	if !bytes.Equal(want, got) {
		line := 1
		for i := 0; i < len(want) && i < len(got); i++ {
			if want[i] != got[i] {
				break
			}
			if want[i] == '\n' {
				line++
			}
		}
		t.Fatalf("%s is stale (first difference at line %d); regenerate it with:\n  go test ./features -run TestGoldenFixtureUpToDate -update\nand review the diff", goldenPath, line)
	}
}

func closeEnough(want, got, rel, abs float64) bool {
	if want == 0 {
		return math.Abs(got) <= abs
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// TestPhysicsFeaturesGolden validates the checked-in fixture the way the
// Python twin does: from its JSON alone, at its stated tolerances.
func TestPhysicsFeaturesGolden(t *testing.T) {
	data, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	var fx goldenFixture
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&fx))
	require.GreaterOrEqual(t, len(fx.TestCases), 50)
	assert.Equal(t, 1e-10, fx.ToleranceRelative)
	assert.Equal(t, AlphaNames, fx.AlphaFeatureNames)
	assert.Equal(t, BetaNames, fx.BetaFeatureNames)
	assert.Equal(t, BetaV2Names, fx.BetaV2FeatureNames)
	assert.Equal(t, BetaV3Names, fx.BetaV3FeatureNames)

	ids := map[string]bool{}
	for _, tc := range fx.TestCases {
		t.Run(tc.ID, func(t *testing.T) {
			require.False(t, ids[tc.ID], "duplicate id")
			ids[tc.ID] = true
			c, err := configFromFixture(tc.Config, tc.ID)
			require.NoError(t, err)
			check := func(what string, want, got float64) {
				if !closeEnough(want, got, fx.ToleranceRelative, fx.ToleranceAbsoluteZero) {
					t.Errorf("%s: want %v, got %v", what, want, got)
				}
			}
			gotP, wantP := physicsOf(c), tc.ExpectedPhysicsConfig
			gv, wv := reflectFloats(gotP), reflectFloats(wantP)
			for k := range wv {
				check("expected_physics_config."+k, wv[k], gv[k])
			}
			gi, wi := reflectFloats(intermediatesOf(c, tc.AlphaInput, tc.BetaInput)), reflectFloats(tc.ExpectedIntermediates)
			for k := range wi {
				check("expected_intermediates."+k, wi[k], gi[k])
			}
			a, b := AlphaFeatures(c, tc.AlphaInput), BetaFeatures(c, tc.BetaInput)
			for i := range a {
				check("alpha "+AlphaNames[i], tc.ExpectedAlpha[i], a[i])
			}
			for i := range b {
				check("beta "+BetaNames[i], tc.ExpectedBeta[i], b[i])
			}
			if v2 := tc.ExpectedBetaV2; v2 != nil {
				got := BetaFeaturesV2(c, tc.BetaInput)
				for i := range got {
					check("beta v2 "+BetaV2Names[i], v2[i], got[i])
				}
				// Spec 2.0 invariants: one of the two linear terms, none
				// for an empty step, the spec 1.0 offload terms.
				assert.Zero(t, v2[0]*v2[1], "compute- and weight-bound at once")
				if tc.BetaInput.ScheduledTokens == 0 {
					assert.Zero(t, v2[0]+v2[1]+v2[2]+v2[3]+v2[4]+v2[5]+v2[6], "empty step")
				} else {
					assert.Positive(t, v2[0]+v2[1], "a step with tokens reads its weights")
					assert.Positive(t, v2[6], "layer latency")
				}
				assert.Equal(t, tc.ExpectedBeta[12], v2[7])
				assert.Equal(t, tc.ExpectedBeta[13], v2[8])
				if tc.Config.TP == 1 {
					assert.Zero(t, v2[4]+v2[5], "no all-reduce at TP 1")
				}
				// Spec 3.0 is spec 2.0 but for the attention terms; its
				// attention read equals spec 2.0's KV read without GQA
				// or KV-head replication.
				v3 := tc.ExpectedBetaV3
				require.NotNil(t, v3, "spec 3.0 vector wherever spec 2.0's is")
				got3 := BetaFeaturesV3(c, tc.BetaInput)
				for i := range got3 {
					check("beta v3 "+BetaV3Names[i], v3[i], got3[i])
					if i != 2 && i != 3 {
						assert.Equal(t, v2[i], v3[i], "spec 3.0 feature %d is spec 2.0's", i+1)
					}
				}
				if c.QDim == c.KVDim && c.Model.NumKVHeads >= c.TP {
					check("attention_read = kv_read without GQA", v2[3], v3[3])
				} else {
					assert.GreaterOrEqual(t, v3[3], v2[3])
				}
				assert.LessOrEqual(t, v3[2], v2[2], "prefill attention is spec 2.0's attention without decode")
			} else {
				assert.Error(t, CheckSpec(c, SpecV2), "spec 2.0 vector left out only when the spec cannot be computed")
				assert.Nil(t, tc.ExpectedBetaV3)
			}
			// Invariants the frozen values must also satisfy, independent
			// of the code that produced them.
			for i, v := range append(tc.ExpectedAlpha[:], tc.ExpectedBeta[:]...) {
				assert.True(t, v >= 0 && v <= FeatureMax, "feature %d out of [0,100]: %v", i, v)
			}
			assert.Equal(t, 1.0, tc.ExpectedAlpha[3], "alpha base bias")
			assert.Equal(t, 1.0, tc.ExpectedBeta[15], "beta bias")
			assert.Equal(t, tc.ExpectedAlpha[10], tc.ExpectedIntermediates.GateG, "alpha f11 is the gate")
			if tc.BetaInput.ScheduledTokens == 0 {
				assert.Zero(t, tc.ExpectedBeta[7], "MoE empty-step guard")
			}
			if !tc.Config.VLLM.CPUOffloading {
				assert.Zero(t, tc.ExpectedBeta[12]+tc.ExpectedBeta[13]+tc.ExpectedAlpha[9], "offload off")
			}
		})
	}
}

// TestGoldenFixtureCoverage checks that the cases span the seed's coverage
// matrix (Iteration 5, Validation Protocol, and Observation D).
func TestGoldenFixtureCoverage(t *testing.T) {
	fx := buildFixture(t)
	tags := map[string]int{}
	for _, tc := range fx.TestCases {
		for _, tg := range tc.Tags {
			tags[tg]++
		}
	}
	for _, need := range []string{
		"dense_gqa", "dense_mha", "moe", "a100", "h100", "tp1", "tp2", "tp4",
		"pure_prefill", "pure_decode", "mixed", "chunked_multi", "single_token_decode", "empty", "single_request",
		"max_batch", "moe_small", "moe_large", "full_kv", "offload_on", "offload_off", "near_epsilon", "below_epsilon",
		"oversubscribed", "queue_1", "queue_1000", "moe_b50", "moe_b130", "moe_b131", "moe_b3000", "kv_blocks_derived", "seed_worked_case",
		"non_gated",
	} {
		assert.Positive(t, tags[need], "no golden case tagged %q", need)
	}
	// Every shape is used at least once.
	for name := range shapes {
		assert.Positive(t, tags[name], "shape %q unused", name)
	}
}

// reflectFloats flattens a struct of float64/int64 fields into name→value
// using its JSON tags.
func reflectFloats(v any) map[string]float64 {
	data, _ := json.Marshal(v)
	var m map[string]float64
	_ = json.Unmarshal(data, &m)
	return m
}
