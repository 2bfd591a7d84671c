package coefficients

import "github.com/blis-sim/blis/features"

// The file's keys are declared once, as a table of pointers into a File, so
// that Parse and Marshal cannot drift apart.

// field is one key of a mapping. val points at the value: *float64, *int,
// *int64, *bool, *string, *[]float64, *[]Input, *[]FittedConfig, **Fit,
// **Holdout, or a nested mapping.
type field struct {
	key      string
	val      any
	optional bool   // may be absent; Marshal omits it when zero
	quoted   bool   // Marshal double-quotes the string
	comment  string // Marshal's line comment
}

// lazy is a mapping whose layout depends on a value read before it (the beta
// names depend on feature_spec_version, which comes first in the file).
type lazy func() mapping

// mapping is the layout of one YAML mapping.
type mapping struct {
	fields  []field
	ordered bool // keys must come in the order of fields
}

func (f *File) layout() mapping {
	return mapping{fields: []field{
		{key: "schema_version", val: &f.SchemaVersion},
		{key: "feature_spec_version", val: &f.FeatureSpecVersion, quoted: true, comment: "docs/physics-spec.md version the features follow"},
		{key: "applies_to", val: f.AppliesTo.layout(), comment: "the default configuration"},
		{key: "fitted_configs", val: &f.FittedConfigs, optional: true, comment: "every configuration the fit used"},
		{key: "gamma", val: &f.Gamma, comment: "preemption EMA factor of features a9 and b12"},
		{key: "alpha", val: vector(f.Alpha[:], features.AlphaNames[:]), comment: "features.AlphaNames, in that order"},
		{key: "beta", val: lazy(f.betaLayout), comment: betaComment(f.Spec())},
		{key: "overheads", val: f.Overheads.layout(), comment: "microseconds, all >= 0"},
		{key: "fit", val: &f.Fit, optional: true},
		{key: "provenance", val: f.Provenance.layout()},
	}}
}

func (a *AppliesTo) layout() mapping {
	k := &a.VLLM
	return mapping{fields: []field{
		{key: "model", val: &a.Model, comment: "physics.ModelSpec.Name"},
		{key: "hardware", val: &a.Hardware, comment: "physics.HardwareSpec.Name"},
		{key: "tp", val: &a.TP},
		// physics.VLLMKnobs' JSON tags, in its field order.
		{key: "vllm", comment: "physics.VLLMKnobs", val: mapping{fields: []field{
			{key: "max_num_seqs", val: &k.MaxNumSeqs},
			{key: "max_batched_tokens", val: &k.MaxBatchedTokens},
			{key: "chunked_prefill_enabled", val: &k.ChunkedPrefillEnabled},
			{key: "cpu_offloading", val: &k.CPUOffloading},
			{key: "block_size_tokens", val: &k.BlockSizeTokens},
			{key: "total_kv_blocks_gpu", val: &k.TotalKVBlocksGPU},
			{key: "total_kv_blocks_cpu", val: &k.TotalKVBlocksCPU},
			{key: "gpu_memory_utilization", val: &k.GPUMemoryUtilization},
			{key: "prefix_caching_enabled", val: &k.PrefixCachingEnabled},
		}}},
	}}
}

// betaLayout keys the beta vector by the names of the file's feature spec
// (spec 1.0's when the version is unknown: validate reports that).
func (f *File) betaLayout() mapping {
	names, err := features.BetaNamesOf(SpecOf(f.FeatureSpecVersion))
	if err != nil {
		names = features.BetaNames[:]
	}
	return vector(f.Beta[:len(names)], names)
}

func betaComment(spec string) string {
	switch spec {
	case features.SpecV2:
		return "features.BetaV2Names, in that order"
	case features.SpecV3:
		return "features.BetaV3Names, in that order"
	}
	return "features.BetaNames, in that order"
}

func (fc *FittedConfig) layout() mapping {
	return mapping{fields: []field{
		{key: "name", val: &fc.Name},
		{key: "model", val: &fc.Model},
		{key: "hardware", val: &fc.Hardware},
		{key: "tp", val: &fc.TP},
		{key: "architecture", val: &fc.Architecture, comment: "dense or moe"},
		// The knobs of applies_to.vllm that change feature values, in
		// physics.VLLMKnobs' field order.
		{key: "max_num_seqs", val: &fc.MaxNumSeqs},
		{key: "max_batched_tokens", val: &fc.MaxBatchedTokens},
		{key: "chunked_prefill_enabled", val: &fc.ChunkedPrefillEnabled},
		{key: "cpu_offloading", val: &fc.CPUOffloading},
		{key: "block_size_tokens", val: &fc.BlockSizeTokens},
		{key: "samples_beta", val: &fc.SamplesBeta},
		{key: "samples_alpha", val: &fc.SamplesAlpha},
	}}
}

// vector lays out a coefficient vector keyed by its feature names, in order.
func vector(v []float64, names []string) mapping {
	m := mapping{ordered: true, fields: make([]field, len(v))}
	for i := range v {
		m.fields[i] = field{key: names[i], val: &v[i]}
	}
	return m
}

func (o *Overheads) layout() mapping {
	return mapping{fields: []field{
		{key: "arrival_base_us", val: &o.ArrivalBaseUs, comment: "api.ARRIVED -> journey.QUEUED"},
		{key: "arrival_per_prompt_token_us", val: &o.ArrivalPerPromptTokenUs, comment: "tokenization"},
		{key: "departure_base_us", val: &o.DepartureBaseUs, comment: "journey.FINISHED -> api.DEPARTED"},
		{key: "departure_per_output_token_us", val: &o.DeparturePerOutputTokenUs, comment: "detokenization"},
	}}
}

func (f *Fit) layout() mapping {
	return mapping{fields: []field{
		{key: "lambda_alpha", val: &f.LambdaAlpha},
		{key: "lambda_beta", val: &f.LambdaBeta},
		{key: "folds", val: &f.Folds},
		{key: "lambda_grid", val: &f.LambdaGrid},
		{key: "gamma_grid", val: &f.GammaGrid},
		{key: "alpha_cv_mape", val: &f.AlphaCVMAPE, comment: "fraction"},
		{key: "beta_cv_mape", val: &f.BetaCVMAPE, comment: "fraction"},
		{key: "beta_target", val: &f.BetaTarget},
		{key: "samples_alpha", val: &f.SamplesAlpha},
		{key: "samples_beta", val: &f.SamplesBeta},
		{key: "objective", val: &f.Objective, optional: true, comment: "relative or absolute; absent in older files (absolute)"},
	}}
}

func (p *Provenance) layout() mapping {
	return mapping{fields: []field{
		{key: "tool", val: &p.Tool},
		{key: "tool_version", val: &p.ToolVersion, quoted: true},
		{key: "command", val: &p.Command},
		{key: "inputs", val: &p.Inputs, optional: true},
		{key: "notes", val: &p.Notes, optional: true},
		{key: "holdout", val: &p.Holdout, optional: true, comment: "requests after this instant, and the steps, were left out of the fit"},
	}}
}

func (h *Holdout) layout() mapping {
	return mapping{fields: []field{
		{key: "after", val: &h.After, quoted: true, comment: "UTC, wall clock"},
		{key: "after_unix_ns", val: &h.AfterUnixNs},
		{key: "requests", val: &h.Requests, comment: "held out: arrived after it"},
		{key: "steps", val: &h.Steps, comment: "held out: started after it"},
	}}
}

func (in *Input) layout() mapping {
	return mapping{fields: []field{
		{key: "path", val: &in.Path},
		{key: "sha256", val: &in.SHA256, quoted: true},
		{key: "rows", val: &in.Rows},
	}}
}
