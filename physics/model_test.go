package physics

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const llamaLike = `{"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,
 "num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,
 "vocab_size":128256,"torch_dtype":"bfloat16","hidden_act":"silu"}`

// withField returns llamaLike with one key replaced or added.
func withField(key, value string) string {
	body := strings.TrimSuffix(strings.TrimSpace(llamaLike), "}")
	return body + `,"` + key + `":` + value + `}`
}

func TestParseModelConfigShipped(t *testing.T) {
	cases := []struct {
		name                      string
		layers, hidden, heads, kv int
		headDim, inter, vocab     int
		nproj                     int
		bytes                     float64
		experts, topk             int
		tied                      bool
	}{
		{"llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 3, 2, 0, 0, false},
		{"llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, 3, 2, 0, 0, false},
		{"llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, 3, 2, 0, 0, false},
		{"codellama-34b", 48, 8192, 64, 8, 128, 22016, 32000, 3, 2, 0, 0, false},
		{"mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 3, 2, 8, 2, false},
		{"qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, 3, 2, 0, 0, false},
		{"gpt2", 12, 768, 12, 12, 64, 3072, 50257, 2, 4, 0, 0, true},
		// Qwen3: head_dim is given and is not hidden / heads (64 × 128 =
		// 8192 against 5120; 32 × 128 against 2048).
		{"qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, 3, 2, 0, 0, false},
		{"qwen3-30b-a3b-instruct-2507", 48, 2048, 32, 4, 128, 768, 151936, 3, 2, 128, 8, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := LoadModel(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.layers, m.NumLayers)
			assert.Equal(t, tc.hidden, m.HiddenSize)
			assert.Equal(t, tc.heads, m.NumHeads)
			assert.Equal(t, tc.kv, m.NumKVHeads)
			assert.Equal(t, tc.headDim, m.HeadDim)
			assert.Equal(t, tc.inter, m.IntermediateSize)
			assert.Equal(t, tc.vocab, m.VocabSize)
			assert.Equal(t, tc.nproj, m.NMLPProj)
			assert.Equal(t, tc.bytes, m.BytesPerParam)
			assert.Equal(t, tc.experts, m.NumExperts)
			assert.Equal(t, tc.topk, m.TopK)
			assert.Equal(t, tc.tied, m.TieWordEmbeddings)
		})
	}
}

func TestLoadModelByOtherNames(t *testing.T) {
	for _, ref := range []string{"meta-llama/Llama-3.1-8B", "Llama-3.1-8B", "llama-3.1-8b.json", "meta-llama/Llama-2-7b-hf",
		"Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B-Instruct-2507"} {
		_, err := LoadModel(ref)
		assert.NoError(t, err, ref)
	}
	_, err := LoadModel("no-such-model")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "llama-3.1-8b", "the error lists what is shipped")
}

func TestParseModelConfigRoundTrip(t *testing.T) {
	// A resolved ModelSpec written as JSON parses back to itself: the golden
	// fixture relies on this.
	for _, name := range BuiltinModels() {
		m, err := LoadModel(name)
		require.NoError(t, err)
		data, err := json.Marshal(m)
		require.NoError(t, err)
		back, err := ParseModelConfig(data, name)
		require.NoError(t, err, string(data))
		assert.Equal(t, m, back, name)
	}
}

func TestParseModelConfigNamings(t *testing.T) {
	qwenMoE := `{"model_type":"qwen2_moe","hidden_size":2048,"num_hidden_layers":24,"num_attention_heads":16,
	 "num_key_value_heads":16,"intermediate_size":5632,"moe_intermediate_size":1408,"num_experts":60,
	 "num_experts_per_tok":4,"shared_expert_intermediate_size":5632,"vocab_size":151936,"torch_dtype":"bfloat16"}`
	m, err := ParseModelConfig([]byte(qwenMoE), "qwen-moe")
	require.NoError(t, err)
	assert.Equal(t, 60, m.NumExperts)
	assert.Equal(t, 4, m.TopK)
	assert.Equal(t, 1408, m.IntermediateSize, "moe_intermediate_size is the expert width")
	assert.Equal(t, 5632, m.SharedExpertIntermediateSize)
	assert.Equal(t, 3, m.NMLPProj)

	explicitHeadDim, err := ParseModelConfig([]byte(withField("head_dim", "64")), "x")
	require.NoError(t, err)
	assert.Equal(t, 64, explicitHeadDim.HeadDim)

	newDtypeKey := strings.Replace(llamaLike, `"torch_dtype"`, `"dtype"`, 1)
	m, err = ParseModelConfig([]byte(newDtypeKey), "x")
	require.NoError(t, err)
	assert.Equal(t, 2.0, m.BytesPerParam)

	unknownTypeGelu := `{"model_type":"somenet","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
	 "intermediate_size":256,"vocab_size":100,"torch_dtype":"float16","hidden_act":"gelu"}`
	m, err = ParseModelConfig([]byte(unknownTypeGelu), "x")
	require.NoError(t, err)
	assert.Equal(t, 2, m.NMLPProj)
	assert.Equal(t, 4, m.NumKVHeads, "absent num_key_value_heads means MHA")
}

// TestParseModelConfigArchitectureDefaults reads configs that leave the MLP
// width null or out, or give no dtype, as transformers and vLLM do.
func TestParseModelConfigArchitectureDefaults(t *testing.T) {
	cases := []struct {
		name                   string
		json                   string
		hidden, heads, headDim int
		inter, nproj           int
		bytes                  float64
		tied                   bool
		dtypeNote              bool
	}{
		// bigscience/bloom-560m: n_inner null, no torch_dtype.
		{"bloom-560m", `{"model_type":"bloom","architectures":["BloomForCausalLM"],"hidden_size":1024,"n_layer":24,
		  "n_head":16,"n_inner":null,"vocab_size":250880,"layer_norm_epsilon":1e-05}`, 1024, 16, 64, 4096, 2, 2, true, true},
		// bigscience/bloom: the older n_embed, num_attention_heads, no n_inner.
		{"bloom-176b", `{"model_type":"bloom","n_embed":14336,"n_layer":70,"num_attention_heads":112,"vocab_size":250880}`,
			14336, 112, 128, 57344, 2, 2, true, true},
		// BloomConfig: n_embed overrides hidden_size; BloomMLP ignores n_inner.
		{"bloom n_embed wins", `{"model_type":"bloom","hidden_size":64,"n_embed":128,"n_layer":2,"n_head":4,"n_inner":100,
		  "vocab_size":100,"torch_dtype":"float16"}`, 128, 4, 32, 512, 2, 2, true, false},
		{"gpt2 n_inner null", `{"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"n_inner":null,"vocab_size":50257,
		  "torch_dtype":"float32"}`, 768, 12, 64, 3072, 2, 4, true, false},
		{"gpt2 n_inner given", `{"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"n_inner":1000,"vocab_size":50257,
		  "torch_dtype":"float32"}`, 768, 12, 64, 1000, 2, 4, true, false},
		{"gpt_bigcode no n_inner", `{"model_type":"gpt_bigcode","n_embd":256,"n_layer":2,"n_head":4,"vocab_size":100,
		  "torch_dtype":"bfloat16"}`, 256, 4, 64, 1024, 2, 2, false, false},
		{"llama without dtype", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
		  "intermediate_size":256,"vocab_size":100,"torch_dtype":null}`, 64, 4, 16, 256, 3, 2, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseModelConfig([]byte(tc.json), "config.json")
			require.NoError(t, err)
			assert.Equal(t, tc.hidden, m.HiddenSize)
			assert.Equal(t, tc.heads, m.NumHeads)
			assert.Equal(t, tc.heads, m.NumKVHeads, "no num_key_value_heads: multi-head attention")
			assert.Equal(t, tc.headDim, m.HeadDim)
			assert.Equal(t, tc.inter, m.IntermediateSize)
			assert.Equal(t, tc.nproj, m.NMLPProj)
			assert.Equal(t, tc.bytes, m.BytesPerParam)
			assert.Equal(t, tc.tied, m.TieWordEmbeddings)
			if tc.dtypeNote {
				require.Len(t, m.Notes, 1)
				assert.Contains(t, m.Notes[0], "config.json: no torch_dtype")
				assert.Contains(t, m.Notes[0], "bfloat16")
			} else {
				assert.Empty(t, m.Notes)
			}
		})
	}
}

func TestParseModelConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, json, field string
	}{
		{"zero heads", withField("num_attention_heads", "0"), "num_attention_heads"},
		{"negative layers", withField("num_hidden_layers", "-1"), "num_hidden_layers"},
		{"kv heads not dividing", withField("num_key_value_heads", "5"), "num_key_value_heads"},
		{"unknown dtype", withField("torch_dtype", `"float12"`), "torch_dtype"},
		{"missing hidden", `{"model_type":"llama","num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":256,"vocab_size":100,"torch_dtype":"float16"}`, "hidden_size"},
		{"missing intermediate", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"torch_dtype":"float16"}`, "intermediate_size"},
		{"wrong type", withField("vocab_size", `"big"`), "vocab_size"},
		{"top_k above experts", withField("num_local_experts", "8") + "", "num_experts_per_tok"},
		{"bad n_mlp_proj", withField("n_mlp_proj", "4"), "n_mlp_proj"},
		{"MLA", withField("kv_lora_rank", "512"), "kv_lora_rank"},
		{"quantized", withField("quantization_config", `{"quant_method":"awq"}`), "quantization_config"},
		{"unknown activation", `{"model_type":"zzz","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":256,"vocab_size":100,"torch_dtype":"float16","hidden_act":"mish"}`, "model_type"},
		{"heads not dividing hidden", withField("num_attention_heads", "24"), "num_attention_heads"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModelConfig([]byte(tc.json), "cfg.json")
			require.Error(t, err)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a FieldError, got %v", err)
			assert.Equal(t, tc.field, fe.Field, err.Error())
			assert.Contains(t, err.Error(), "cfg.json")
		})
	}
}

func TestParseHardwareSpec(t *testing.T) {
	h, err := ParseHardwareSpec([]byte(`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"interconnect_bandwidth_gb_s":50}`), "hw.json")
	require.NoError(t, err)
	assert.Equal(t, DefaultPCIeEfficiency, h.PCIeEfficiency, "absent pcie_efficiency takes the default")
	assert.InDelta(t, 100*DefaultGEMMShare, h.SustainedTFlops(), 1e-12, "absent gemm_tflops: the default share of the peak")
	h, err = ParseHardwareSpec([]byte(`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":104}`), "hw.json")
	require.NoError(t, err)
	assert.Equal(t, 104.0, h.SustainedTFlops(), "a measured rate, even above the rated peak (boost clocks), is taken as is")

	for _, tc := range []struct{ json, field string }{
		{`{"TFlopsPeak":0,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32}`, "TFlopsPeak"},
		{`{"TFlopsPeak":1,"BwPeakTBs":-1,"pcie_bandwidth_gb_s":32}`, "BwPeakTBs"},
		{`{"TFlopsPeak":1,"BwPeakTBs":1}`, "pcie_bandwidth_gb_s"},
		{`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"pcie_efficiency":1.5}`, "pcie_efficiency"},
		{`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"pcie_efficiency":0}`, "pcie_efficiency"},
		{`{"TFlopsPeak":"fast","BwPeakTBs":1,"pcie_bandwidth_gb_s":32}`, "TFlopsPeak"},
		// Strict keys, bounded magnitudes.
		{`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"memory_gib":1e300}`, "memory_gib"},
		{`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"memory_GiB":80}`, "memory_GiB"},
		{`{"tflopspeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32}`, "tflopspeak"},
		{`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"nvlink":900}`, "nvlink"},
		{`{"TFlopsPeak":1e9,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32}`, "TFlopsPeak"},
		// A measured GEMM rate: not negative, not half again the peak
		// (the sparsity figure or TFLOP/s given in GFLOP/s).
		{`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":-1}`, "gemm_tflops"},
		{`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":151}`, "gemm_tflops"},
		{`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":"75"}`, "gemm_tflops"},
	} {
		_, err := ParseHardwareSpec([]byte(tc.json), "hw.json")
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: want a FieldError, got %v", tc.json, err)
		assert.Equal(t, tc.field, fe.Field)
	}
	_, err = ParseHardwareSpec([]byte(`{"TFlopsPeak":1,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"nvlink":900}`), "hw.json")
	require.ErrorContains(t, err, "unknown key (the keys are name, TFlopsPeak, BwPeakTBs")
	for _, name := range BuiltinHardware() {
		h, err := LoadHardware(name)
		require.NoError(t, err)
		assert.NotEmpty(t, h.Sources, "shipped spec %s cites its sources", name)
		assert.Positive(t, h.MemoryGiB)
		if h.GEMMTFlops > 0 {
			assert.True(t, slices.ContainsFunc(h.Sources, func(s string) bool { return strings.HasPrefix(s, "gemm_tflops: ") }),
				"shipped spec %s says where its measured GEMM rate comes from", name)
		}
	}
}

// FuzzParseModelConfig: the parser never panics, and whatever it accepts is
// valid and survives a round trip.
func FuzzParseModelConfig(f *testing.F) {
	f.Add([]byte(llamaLike))
	for _, name := range BuiltinModels() {
		data, _ := builtinFS.ReadFile("data/models/" + name + ".json")
		f.Add(data)
	}
	f.Add([]byte(`{"n_embd":1,"n_layer":1,"n_head":1,"vocab_size":1,"model_type":"gpt2","torch_dtype":"fp8"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModelConfig(data, "fuzz")
		if err != nil {
			return
		}
		if k, dup := duplicateKey(data); dup {
			t.Fatalf("accepted a config that names %q twice", k)
		}
		if verr := m.Validate(); verr != nil {
			t.Fatalf("accepted an invalid spec: %v", verr)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseModelConfig(out, "roundtrip")
		m.Notes = nil // the JSON form states every assumed value
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip changed %+v into %+v (%v)", m, back, err)
		}
	})
}

// FuzzParseHardwareSpec: the parser never panics; whatever it accepts is
// valid, has a positive compute ceiling no more than MaxGEMMOverPeak times
// the peak, and survives a round trip.
func FuzzParseHardwareSpec(f *testing.F) {
	for _, name := range BuiltinHardware() {
		data, _ := builtinFS.ReadFile("data/hardware/" + name + ".json")
		f.Add(data)
	}
	f.Add([]byte(`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":150}`))
	f.Add([]byte(`{"TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":32,"gemm_tflops":0}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHardwareSpec(data, "fuzz")
		if err != nil {
			return
		}
		if k, dup := duplicateKey(data); dup {
			t.Fatalf("accepted a spec that names %q twice", k)
		}
		if verr := h.Validate(); verr != nil {
			t.Fatalf("accepted an invalid spec: %v", verr)
		}
		if s := h.SustainedTFlops(); !(s > 0 && s <= MaxGEMMOverPeak*h.TFlopsPeak) {
			t.Fatalf("compute ceiling %v outside (0, %v × peak %v]", s, MaxGEMMOverPeak, h.TFlopsPeak)
		}
		out, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseHardwareSpec(out, "roundtrip")
		// omitempty writes an empty list as nothing, which reads back as nil.
		if len(h.Sources) == 0 {
			h.Sources = nil
		}
		if len(h.DeviceNames) == 0 {
			h.DeviceNames = nil
		}
		if err != nil || !reflect.DeepEqual(back, h) {
			t.Fatalf("round trip changed %+v into %+v (%v)", h, back, err)
		}
	})
}

// TestDuplicateKeysRefused: a hardware spec or model config that names a
// key twice is refused naming the file and the key (encoding/json would
// keep the last copy silently: a gemm_tflops of 726.4 then 1 ran at 1
// TFLOP/s). Keys match as encoding/json matches them, case-insensitively.
func TestDuplicateKeysRefused(t *testing.T) {
	hw := `{"TFlopsPeak":989.4,"BwPeakTBs":3.35,"pcie_bandwidth_gb_s":64,"gemm_tflops":726.4%s}`
	_, err := ParseHardwareSpec([]byte(strings.Replace(hw, "%s", "", 1)), "gpu.json")
	require.NoError(t, err)
	for _, tc := range []struct{ extra, key string }{
		{`,"gemm_tflops":1`, "gemm_tflops"},
		{`,"sources":["a"],"sources":["b"]`, "sources"},
		{`,"TFlopsPeak":989.4`, "TFlopsPeak"},
	} {
		_, err := ParseHardwareSpec([]byte(strings.Replace(hw, "%s", tc.extra, 1)), "gpu.json")
		require.Error(t, err, tc.extra)
		assert.Contains(t, err.Error(), "gpu.json")
		assert.Contains(t, err.Error(), `"`+tc.key+`"`)
		assert.Contains(t, err.Error(), "twice")
	}
	_, err = ParseModelConfig([]byte(strings.Replace(llamaLike, `"hidden_size":4096,`, `"hidden_size":4096, "HIDDEN_SIZE": 8192,`, 1)), "config.json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config.json: field "HIDDEN_SIZE": given twice`)
	// A repeated key inside a nested object is not a top-level duplicate.
	_, err = ParseModelConfig([]byte(strings.Replace(llamaLike, `"hidden_size":4096,`, `"hidden_size":4096, "rope_scaling": {"a": 1, "b": {"a": 2}},`, 1)), "config.json")
	require.NoError(t, err)
}
