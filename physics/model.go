package physics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ModelSpec is the resolved transformer architecture the physics model needs.
// Its JSON form uses HuggingFace config.json key names plus the two derived
// keys of the golden fixture (n_mlp_proj, bytes_per_param), so a ModelSpec
// written as JSON is itself a valid input to ParseModelConfig.
type ModelSpec struct {
	Name             string `json:"name,omitempty"`
	NumLayers        int    `json:"num_hidden_layers"`
	HiddenSize       int    `json:"hidden_size"`
	NumHeads         int    `json:"num_attention_heads"`
	NumKVHeads       int    `json:"num_key_value_heads"`
	HeadDim          int    `json:"head_dim"`
	IntermediateSize int    `json:"intermediate_size"` // per expert for MoE models
	VocabSize        int    `json:"vocab_size"`
	// NMLPProj is the number of MLP weight matrices: 3 for gated MLPs
	// (gate, up, down), 2 otherwise (up, down).
	NMLPProj      int     `json:"n_mlp_proj"`
	BytesPerParam float64 `json:"bytes_per_param"`
	// NumExperts and TopK are zero for dense models.
	NumExperts int `json:"num_local_experts"`
	TopK       int `json:"num_experts_per_tok"`
	// SharedExpertIntermediateSize is the width of an always-active shared
	// expert MLP (Qwen2-MoE style); zero when there is none.
	SharedExpertIntermediateSize int  `json:"shared_expert_intermediate_size"`
	TieWordEmbeddings            bool `json:"tie_word_embeddings"`
	MaxPositionEmbeddings        int  `json:"max_position_embeddings,omitempty"`
	// Notes say where ParseModelConfig assumed a value the config left out
	// (a missing torch_dtype taken as bfloat16); commands print them to
	// stderr. Not part of the JSON form.
	Notes []string `json:"-"`
}

// IsMoE reports whether the MLP is a routed mixture of experts.
func (m ModelSpec) IsMoE() bool { return m.NumExperts > 0 }

// FieldError names the offending field of an input file.
type FieldError struct {
	Source string // file name or other origin; may be empty
	Field  string
	Msg    string
}

func (e *FieldError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("%s: field %q: %s", e.Source, e.Field, e.Msg)
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
}

func fieldErr(src, field, format string, args ...any) error {
	return &FieldError{Source: src, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// hfConfig lists every config.json key the loader understands, under each
// common spelling. Pointers distinguish "absent" from zero.
type hfConfig struct {
	ModelType     string   `json:"model_type"`
	Architectures []string `json:"architectures"`
	Name          string   `json:"name"`
	NameOrPath    string   `json:"_name_or_path"`

	HiddenSize *int `json:"hidden_size"`
	NEmbd      *int `json:"n_embd"`
	NEmbed     *int `json:"n_embed"` // BLOOM's older spelling; overrides hidden_size

	NumHiddenLayers *int `json:"num_hidden_layers"`
	NLayer          *int `json:"n_layer"`

	NumAttentionHeads *int `json:"num_attention_heads"`
	NHead             *int `json:"n_head"`
	NumKeyValueHeads  *int `json:"num_key_value_heads"`
	HeadDim           *int `json:"head_dim"`

	IntermediateSize    *int `json:"intermediate_size"`
	NInner              *int `json:"n_inner"`
	MoEIntermediateSize *int `json:"moe_intermediate_size"`

	VocabSize             *int `json:"vocab_size"`
	MaxPositionEmbeddings *int `json:"max_position_embeddings"`
	NPositions            *int `json:"n_positions"`

	TorchDtype    *string  `json:"torch_dtype"`
	Dtype         *string  `json:"dtype"`
	BytesPerParam *float64 `json:"bytes_per_param"`

	NMLPProj           *int    `json:"n_mlp_proj"`
	HiddenAct          *string `json:"hidden_act"`
	ActivationFunction *string `json:"activation_function"`

	NumLocalExperts              *int  `json:"num_local_experts"`
	NumExperts                   *int  `json:"num_experts"`
	NRoutedExperts               *int  `json:"n_routed_experts"`
	NumExpertsPerTok             *int  `json:"num_experts_per_tok"`
	SharedExpertIntermediateSize *int  `json:"shared_expert_intermediate_size"`
	NSharedExperts               *int  `json:"n_shared_experts"`
	TieWordEmbeddings            *bool `json:"tie_word_embeddings"`

	// Architectures the physics model cannot describe; present means refuse.
	KVLoraRank   *int            `json:"kv_lora_rank"`
	TextConfig   json.RawMessage `json:"text_config"`
	Quantization json.RawMessage `json:"quantization_config"`
}

// gatedModelTypes use a gated MLP (gate, up and down projections).
var gatedModelTypes = map[string]bool{
	"llama": true, "mistral": true, "mixtral": true, "qwen2": true, "qwen2_moe": true,
	"qwen3": true, "qwen3_moe": true, "gemma": true, "gemma2": true, "phi3": true,
	"olmo": true, "olmo2": true, "granite": true, "cohere": true, "internlm2": true,
	"starcoder2": false, "gpt2": false, "gpt_neox": false, "gptj": false, "opt": false,
	"bloom": false, "falcon": false, "phi": false, "gpt_bigcode": false,
}

// dtypeBytes maps config.json dtype spellings to bytes per parameter.
var dtypeBytes = map[string]float64{
	"float32": 4, "float": 4, "fp32": 4,
	"bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
	"float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "int8": 1,
}

// fourHiddenMLPTypes are the architectures whose MLP width defaults to
// 4 × hidden when the config leaves it null or out: GPT-2, GPT-J and
// GPTBigCode read n_inner (None → 4 × n_embd); BLOOM reads no width at all
// (BloomMLP is always hidden → 4 × hidden → hidden, whatever n_inner says).
var fourHiddenMLPTypes = map[string]bool{"gpt2": true, "gptj": true, "gpt_bigcode": true, "bloom": true}

// DefaultDtype is the parameter dtype assumed when a config gives none:
// vLLM reads such a config as float32 and its --dtype auto then serves it
// in the GPU's first supported half type, bfloat16 on every GPU the
// shipped hardware lists (float16 before compute capability 8.0; either
// way 2 bytes per parameter).
const DefaultDtype = "bfloat16"

// ParseModelConfig reads a HuggingFace config.json (or a ModelSpec written
// as JSON) and resolves it into a validated ModelSpec. source names the input
// in error messages.
func ParseModelConfig(data []byte, source string) (ModelSpec, error) {
	c, err := decodeHFConfig(data, source)
	if err != nil {
		return ModelSpec{}, err
	}
	m := ModelSpec{Name: c.Name}
	if m.Name == "" {
		m.Name = c.NameOrPath
	}
	// Each step resolves some fields of m from c, in this order (a later
	// one reads what an earlier one resolved), and the first error stops.
	for _, resolve := range []func(m *ModelSpec, source string) error{
		c.dimensions, c.attention, c.experts, c.mlpWidth, c.mlpProjections, c.dtype,
	} {
		if err := resolve(&m, source); err != nil {
			return ModelSpec{}, err
		}
	}
	c.embeddings(&m)
	if err := m.validate(source); err != nil {
		return ModelSpec{}, err
	}
	return m, nil
}

// decodeHFConfig decodes a config.json and refuses the architectures the
// physics model cannot describe: multi-head latent attention, multimodal
// configs, and quantized weights without an explicit bytes_per_param.
func decodeHFConfig(data []byte, source string) (*hfConfig, error) {
	var c hfConfig
	if k, dup := duplicateKey(data); dup {
		return nil, fieldErr(source, k, "given twice (which value holds is not for the reader to guess)")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fieldErr(source, te.Field, "expected %s, got JSON %s", te.Type, te.Value)
		}
		return nil, fmt.Errorf("%s: invalid JSON: %w", source, err)
	}
	if c.KVLoraRank != nil {
		return nil, fieldErr(source, "kv_lora_rank", "multi-head latent attention is not supported by the physics model")
	}
	if len(c.TextConfig) > 0 {
		return nil, fieldErr(source, "text_config", "multimodal configs are not supported; pass the text model's config")
	}
	if len(c.Quantization) > 0 && c.BytesPerParam == nil {
		return nil, fieldErr(source, "quantization_config", "quantized weights are not supported unless bytes_per_param is given explicitly")
	}
	return &c, nil
}

// pick returns the first of vals that is set, with its key in names (names
// and vals in the same order); without one, 0 and the first key.
func pick(names []string, vals ...*int) (int, string, bool) {
	for i, v := range vals {
		if v != nil {
			return *v, names[i], true
		}
	}
	return 0, names[0], false
}

// dimensions resolves the required sizes: hidden size, layers, attention
// heads and vocabulary, each under any of its spellings, each > 0.
func (c *hfConfig) dimensions(m *ModelSpec, source string) error {
	var err error
	need := func(names []string, vals ...*int) int {
		v, name, ok := pick(names, vals...)
		if err != nil {
			return 0
		}
		if !ok {
			err = fieldErr(source, name, "missing")
			return 0
		}
		if v <= 0 {
			err = fieldErr(source, name, "must be > 0, got %d", v)
		}
		return v
	}
	if c.NEmbed != nil {
		// BloomConfig: n_embed, when given, is the hidden size.
		m.HiddenSize = need([]string{"n_embed"}, c.NEmbed)
	} else {
		m.HiddenSize = need([]string{"hidden_size", "n_embd"}, c.HiddenSize, c.NEmbd)
	}
	m.NumLayers = need([]string{"num_hidden_layers", "n_layer"}, c.NumHiddenLayers, c.NLayer)
	m.NumHeads = need([]string{"num_attention_heads", "n_head"}, c.NumAttentionHeads, c.NHead)
	m.VocabSize = need([]string{"vocab_size"}, c.VocabSize)
	return err
}

// attention resolves the KV heads (default: as many as attention heads)
// and the head dimension (default: hidden size / heads).
func (c *hfConfig) attention(m *ModelSpec, source string) error {
	m.NumKVHeads = m.NumHeads // HF convention: absent means multi-head attention
	if c.NumKeyValueHeads != nil {
		m.NumKVHeads = *c.NumKeyValueHeads
	}
	if m.NumKVHeads <= 0 {
		return fieldErr(source, "num_key_value_heads", "must be > 0, got %d", m.NumKVHeads)
	}
	if m.NumHeads%m.NumKVHeads != 0 {
		return fieldErr(source, "num_key_value_heads", "%d does not divide num_attention_heads %d", m.NumKVHeads, m.NumHeads)
	}
	if c.HeadDim != nil {
		m.HeadDim = *c.HeadDim
		if m.HeadDim <= 0 {
			return fieldErr(source, "head_dim", "must be > 0, got %d", m.HeadDim)
		}
	} else {
		if m.HiddenSize%m.NumHeads != 0 {
			return fieldErr(source, "num_attention_heads", "%d does not divide hidden_size %d and head_dim is not given", m.NumHeads, m.HiddenSize)
		}
		m.HeadDim = m.HiddenSize / m.NumHeads
	}
	return nil
}

// experts resolves the number of routed experts and the experts per token
// (both 0 for a dense model).
func (c *hfConfig) experts(m *ModelSpec, source string) error {
	if v, name, ok := pick([]string{"num_local_experts", "num_experts", "n_routed_experts"}, c.NumLocalExperts, c.NumExperts, c.NRoutedExperts); ok {
		if v < 0 {
			return fieldErr(source, name, "must be >= 0, got %d", v)
		}
		m.NumExperts = v
	}
	if m.NumExperts > 0 {
		if c.NumExpertsPerTok == nil {
			return fieldErr(source, "num_experts_per_tok", "missing for a mixture-of-experts model")
		}
		m.TopK = *c.NumExpertsPerTok
		if m.TopK <= 0 || m.TopK > m.NumExperts {
			return fieldErr(source, "num_experts_per_tok", "must be in [1, %d], got %d", m.NumExperts, m.TopK)
		}
	} else if c.NumExpertsPerTok != nil && *c.NumExpertsPerTok != 0 && c.NumLocalExperts == nil && c.NumExperts == nil && c.NRoutedExperts == nil {
		return fieldErr(source, "num_experts_per_tok", "given without a number of experts")
	}
	return nil
}

// mlpWidth resolves the MLP width (per expert for MoE, with
// moe_intermediate_size taking precedence; 4 × hidden for the GPT-2 family
// and BLOOM when not given) and the shared expert's width.
func (c *hfConfig) mlpWidth(m *ModelSpec, source string) error {
	switch {
	case m.NumExperts > 0 && c.MoEIntermediateSize != nil:
		m.IntermediateSize = *c.MoEIntermediateSize
		if m.IntermediateSize <= 0 {
			return fieldErr(source, "moe_intermediate_size", "must be > 0, got %d", m.IntermediateSize)
		}
	case c.IntermediateSize != nil:
		m.IntermediateSize = *c.IntermediateSize
		if m.IntermediateSize <= 0 {
			return fieldErr(source, "intermediate_size", "must be > 0, got %d", m.IntermediateSize)
		}
	case c.ModelType == "bloom":
		m.IntermediateSize = 4 * m.HiddenSize // BloomMLP: always 4 × hidden
	case c.NEmbd != nil || fourHiddenMLPTypes[c.ModelType]:
		m.IntermediateSize = 4 * m.HiddenSize // GPT-2 family: n_inner null or absent means 4 × n_embd
		if c.NInner != nil {
			m.IntermediateSize = *c.NInner
			if m.IntermediateSize <= 0 {
				return fieldErr(source, "n_inner", "must be > 0, got %d", m.IntermediateSize)
			}
		}
	default:
		return fieldErr(source, "intermediate_size", "missing")
	}
	if c.SharedExpertIntermediateSize != nil {
		m.SharedExpertIntermediateSize = *c.SharedExpertIntermediateSize
		if m.SharedExpertIntermediateSize < 0 {
			return fieldErr(source, "shared_expert_intermediate_size", "must be >= 0, got %d", m.SharedExpertIntermediateSize)
		}
	} else if c.NSharedExperts != nil && *c.NSharedExperts > 0 {
		m.SharedExpertIntermediateSize = *c.NSharedExperts * m.IntermediateSize
	}
	return nil
}

// mlpProjections resolves whether the MLP is gated (3 weight matrices) or
// plain (2): n_mlp_proj when given, else by model_type, else by activation.
func (c *hfConfig) mlpProjections(m *ModelSpec, source string) error {
	if c.NMLPProj != nil {
		m.NMLPProj = *c.NMLPProj
		if m.NMLPProj != 2 && m.NMLPProj != 3 {
			return fieldErr(source, "n_mlp_proj", "must be 2 or 3, got %d", m.NMLPProj)
		}
		return nil
	}
	gated, known := gatedModelTypes[c.ModelType]
	if !known {
		act := ""
		if c.HiddenAct != nil {
			act = *c.HiddenAct
		} else if c.ActivationFunction != nil {
			act = *c.ActivationFunction
		}
		switch strings.ToLower(act) {
		case "silu", "swiglu", "swish":
			gated = true
		case "gelu", "gelu_new", "relu", "gelu_fast", "gelu_pytorch_tanh":
			gated = false
		default:
			return fieldErr(source, "model_type", "unknown model_type %q and activation %q: cannot tell whether the MLP is gated; set n_mlp_proj to 2 or 3", c.ModelType, act)
		}
	}
	m.NMLPProj = 2
	if gated {
		m.NMLPProj = 3
	}
	return nil
}

// dtype resolves the bytes per parameter: bytes_per_param when given, else
// from torch_dtype or dtype, else DefaultDtype with a note.
func (c *hfConfig) dtype(m *ModelSpec, source string) error {
	if c.BytesPerParam != nil {
		m.BytesPerParam = *c.BytesPerParam
		if !(m.BytesPerParam > 0) {
			return fieldErr(source, "bytes_per_param", "must be > 0, got %v", m.BytesPerParam)
		}
		return nil
	}
	field, dt := "torch_dtype", DefaultDtype
	switch {
	case c.TorchDtype != nil:
		dt = *c.TorchDtype
	case c.Dtype != nil:
		field, dt = "dtype", *c.Dtype
	default:
		m.Notes = append(m.Notes, missingDtypeNote(source))
	}
	b, ok := dtypeBytes[strings.ToLower(strings.TrimPrefix(dt, "torch."))]
	if !ok {
		return fieldErr(source, field, "unknown dtype %q", dt)
	}
	m.BytesPerParam = b
	return nil
}

// embeddings resolves whether the input and output embeddings are tied and
// the context length (max_position_embeddings or n_positions), if given.
func (c *hfConfig) embeddings(m *ModelSpec) {
	if c.TieWordEmbeddings != nil {
		m.TieWordEmbeddings = *c.TieWordEmbeddings
	} else if c.ModelType == "gpt2" || c.ModelType == "bloom" {
		m.TieWordEmbeddings = true // GPT-2 and BLOOM tie input and output embeddings
	}
	if v, _, ok := pick([]string{"max_position_embeddings", "n_positions"}, c.MaxPositionEmbeddings, c.NPositions); ok {
		m.MaxPositionEmbeddings = v
	}
}

// missingDtypeNote is the note of a config without torch_dtype or dtype.
func missingDtypeNote(source string) string {
	if source == "" {
		source = "model config"
	}
	return fmt.Sprintf("%s: no torch_dtype: weights taken as %s (2 bytes per parameter), as vLLM's --dtype auto serves such a model; set torch_dtype or bytes_per_param to change it", source, DefaultDtype)
}

// Validate checks a ModelSpec built by hand (ParseModelConfig already does).
func (m ModelSpec) Validate() error { return m.validate(m.Name) }

func (m ModelSpec) validate(src string) error {
	pos := []struct {
		name string
		v    int
	}{
		{"num_hidden_layers", m.NumLayers}, {"hidden_size", m.HiddenSize},
		{"num_attention_heads", m.NumHeads}, {"num_key_value_heads", m.NumKVHeads},
		{"head_dim", m.HeadDim}, {"intermediate_size", m.IntermediateSize}, {"vocab_size", m.VocabSize},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fieldErr(src, p.name, "must be > 0, got %d", p.v)
		}
	}
	if m.NumHeads%m.NumKVHeads != 0 {
		return fieldErr(src, "num_key_value_heads", "%d does not divide num_attention_heads %d", m.NumKVHeads, m.NumHeads)
	}
	if m.NMLPProj != 2 && m.NMLPProj != 3 {
		return fieldErr(src, "n_mlp_proj", "must be 2 or 3, got %d", m.NMLPProj)
	}
	if !(m.BytesPerParam > 0) {
		return fieldErr(src, "bytes_per_param", "must be > 0, got %v", m.BytesPerParam)
	}
	if m.NumExperts < 0 {
		return fieldErr(src, "num_local_experts", "must be >= 0, got %d", m.NumExperts)
	}
	if m.NumExperts > 0 && (m.TopK <= 0 || m.TopK > m.NumExperts) {
		return fieldErr(src, "num_experts_per_tok", "must be in [1, %d], got %d", m.NumExperts, m.TopK)
	}
	if m.NumExperts == 0 && m.TopK != 0 {
		return fieldErr(src, "num_experts_per_tok", "must be 0 for a dense model, got %d", m.TopK)
	}
	if m.SharedExpertIntermediateSize < 0 {
		return fieldErr(src, "shared_expert_intermediate_size", "must be >= 0, got %d", m.SharedExpertIntermediateSize)
	}
	return nil
}
