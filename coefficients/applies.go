package coefficients

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

// FittedSpan returns the configurations the coefficients were fitted on:
// FittedConfigs, or for a file without the list (written before it existed,
// or by hand) applies_to alone, named "applies_to", with the architecture
// of the shipped model of that name ("" when there is none, and then the
// family is not checked).
func (f *File) FittedSpan() []FittedConfig {
	if len(f.FittedConfigs) > 0 {
		return f.FittedConfigs
	}
	a, k := f.AppliesTo, f.AppliesTo.VLLM
	fc := FittedConfig{
		Name: "applies_to", Model: a.Model, Hardware: a.Hardware, TP: a.TP,
		MaxNumSeqs: k.MaxNumSeqs, MaxBatchedTokens: k.MaxBatchedTokens, ChunkedPrefillEnabled: k.ChunkedPrefillEnabled,
		CPUOffloading: k.CPUOffloading, BlockSizeTokens: k.BlockSizeTokens,
	}
	if m, err := physics.LoadModel(a.Model); err == nil {
		fc.Architecture = Architecture(m)
	}
	return []FittedConfig{fc}
}

// Check says whether the coefficients can predict a run of pc (the model,
// hardware, TP and vLLM settings a simulation or prediction uses) and how
// far it lies from what they were fitted on. It never prints: the caller
// shows the warnings (each one sentence or more, without a "warning:"
// prefix) and goes on, or stops on the error.
//
// The features are physics-normalized, so another model, GPU, TP or set of
// knobs is a legitimate what-if; each of these outside FittedSpan is a
// warning that names what differs and lists the fitted configurations. The
// KV cache size, memory utilization and prefix caching are not compared
// (they change no coefficient's meaning).
//
// Errors are the runs the features cannot carry over to, the architecture
// family (docs/fit.md "What a coefficient file applies to"):
//
//   - a MoE model with coefficients fitted on dense models only: their
//     moe_activation feature (b8) is 0 on every step, so its coefficient
//     was never fitted and a MoE step would lose the expert-activation term;
//   - a dense model with coefficients fitted on MoE models only: there b8
//     is 1 on all but the smallest steps, collinear with bias, and the fit
//     splits the constant step cost between the two arbitrarily; a dense
//     model's b8 = 0 drops that share.
//
// CPU offloading on when no fitted configuration had it is a warning, not
// an error: the offload features (a10, b13, b14) are 0 without offloading,
// so their coefficients were never fitted and the run prices KV transfers
// at what the file says (0 from calibrate fit), while the rest of the step
// is modelled as fitted.
//
// A feature_spec_version of another major version is refused when the file
// is read (Parse, Validate).
func (f *File) Check(pc *physics.PhysicsConfig) (warnings []string, err error) {
	span := f.FittedSpan()
	arch := Architecture(pc.Model)
	var archs []string
	for _, fc := range span {
		if fc.Architecture != "" && !slices.Contains(archs, fc.Architecture) {
			archs = append(archs, fc.Architecture)
		}
	}
	switch {
	case len(archs) == 0:
		warnings = append(warnings, fmt.Sprintf("the architecture the coefficients were fitted on is unknown (applies_to.model %q is not a shipped model and the file has no fitted_configs), so whether they cover the %s model %s is not checked",
			f.AppliesTo.Model, archName(arch), pc.Model.Name))
	case !slices.Contains(archs, arch):
		why := "their moe_activation feature (b8) is 0 on every dense step, so its coefficient was never fitted and a MoE step would lose its expert-activation cost"
		if arch == ArchDense {
			why = "on MoE steps moe_activation (b8) is 1 on all but the smallest batches, collinear with bias, so the fit split the constant step cost between them arbitrarily and a dense model (b8 = 0) would lose part of it"
		}
		return nil, fmt.Errorf("coefficients fitted only on %s models cannot predict the %s model %s: %s; fit on traces that include a %s model (fitted: %s)",
			archName(archs[0]), archName(arch), pc.Model.Name, why, archName(arch), describeSpan(span))
	}

	if !slices.ContainsFunc(span, func(fc FittedConfig) bool { return fc.matches(pc) }) {
		warnings = append(warnings, fmt.Sprintf("the coefficients were not fitted on this configuration (%s); the physics normalization carries them over, but check the predictions against a trace of it if you can (fitted: %s)",
			describeDiff(span, pc), describeSpan(span)))
	}

	if pc.Knobs.CPUOffloading && !slices.ContainsFunc(span, func(fc FittedConfig) bool { return fc.CPUOffloading }) {
		var coefs []string
		for _, c := range []struct {
			names []string
			v     []float64
			name  string
		}{
			{features.BetaNames[:], f.Beta[:], "cpu_offload_transfer"},
			{features.BetaNames[:], f.Beta[:], "cpu_offload_kv_read"},
			{features.AlphaNames[:], f.Alpha[:], "cpu_offload_expansion"},
		} {
			if i := slices.Index(c.names, c.name); i >= 0 {
				coefs = append(coefs, c.name+" "+strconv.FormatFloat(c.v[i], 'g', -1, 64))
			}
		}
		warnings = append(warnings, fmt.Sprintf("CPU offloading is on but no fitted configuration had it: the coefficients of its features were never fitted, so KV transfers cost what the file says (%s) and the rest of the step is modelled as fitted",
			strings.Join(coefs, ", ")))
	}
	return warnings, nil
}

func archName(a string) string {
	if a == ArchMoE {
		return "MoE"
	}
	return a
}

// matches reports whether pc is this configuration, as far as the span
// goes. Model and hardware names compare case-insensitively.
func (fc *FittedConfig) matches(pc *physics.PhysicsConfig) bool {
	k := pc.Knobs
	return strings.EqualFold(fc.Model, pc.Model.Name) && strings.EqualFold(fc.Hardware, pc.Hardware.Name) && fc.TP == pc.TP &&
		fc.MaxNumSeqs == k.MaxNumSeqs && fc.MaxBatchedTokens == k.MaxBatchedTokens && fc.BlockSizeTokens == k.BlockSizeTokens &&
		fc.ChunkedPrefillEnabled == k.ChunkedPrefillEnabled && fc.CPUOffloading == k.CPUOffloading
}

// dimension is one thing a run is compared on.
type dimension struct {
	name string
	of   func(*FittedConfig) string // the value, lower case for names
	run  string
}

func dimensions(pc *physics.PhysicsConfig) []dimension {
	k := pc.Knobs
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []dimension{
		{"model", func(fc *FittedConfig) string { return fc.Model }, pc.Model.Name},
		{"hardware", func(fc *FittedConfig) string { return fc.Hardware }, pc.Hardware.Name},
		{"tp", func(fc *FittedConfig) string { return strconv.Itoa(fc.TP) }, strconv.Itoa(pc.TP)},
		{"max_num_seqs", func(fc *FittedConfig) string { return itoa(fc.MaxNumSeqs) }, itoa(k.MaxNumSeqs)},
		{"max_batched_tokens", func(fc *FittedConfig) string { return itoa(fc.MaxBatchedTokens) }, itoa(k.MaxBatchedTokens)},
		{"block_size_tokens", func(fc *FittedConfig) string { return itoa(fc.BlockSizeTokens) }, itoa(k.BlockSizeTokens)},
		{"chunked_prefill_enabled", func(fc *FittedConfig) string { return strconv.FormatBool(fc.ChunkedPrefillEnabled) }, strconv.FormatBool(k.ChunkedPrefillEnabled)},
		{"cpu_offloading", func(fc *FittedConfig) string { return strconv.FormatBool(fc.CPUOffloading) }, strconv.FormatBool(k.CPUOffloading)},
	}
}

// describeDiff names each setting of pc that no fitted configuration has,
// with the fitted values; or, when each one is in some fitted
// configuration, says that the combination is new.
func describeDiff(span []FittedConfig, pc *physics.PhysicsConfig) string {
	var parts []string
	for _, d := range dimensions(pc) {
		var fitted []string
		found := false
		for i := range span {
			v := d.of(&span[i])
			found = found || strings.EqualFold(v, d.run)
			if !slices.ContainsFunc(fitted, func(s string) bool { return strings.EqualFold(s, v) }) {
				fitted = append(fitted, v)
			}
		}
		if !found {
			parts = append(parts, fmt.Sprintf("%s %s, fitted: %s", d.name, d.run, strings.Join(fitted, ", ")))
		}
	}
	if len(parts) == 0 {
		return "each setting was fitted, but not this combination of them"
	}
	return strings.Join(parts, "; ")
}

// describeSpan lists the fitted configurations in one line.
func describeSpan(span []FittedConfig) string {
	parts := make([]string, len(span))
	for i := range span {
		parts[i] = span[i].String()
	}
	return strings.Join(parts, "; ")
}

// String describes the configuration in one line, e.g. "h100-tp1
// (llama-3.1-8b, dense, on 1 × H100-SXM; max_num_seqs 256,
// max_batched_tokens 8192, block_size_tokens 16, chunked prefill on, CPU
// offloading off; 5678 beta samples)".
func (fc FittedConfig) String() string {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	arch := ""
	if fc.Architecture != "" {
		arch = ", " + archName(fc.Architecture)
	}
	s := fmt.Sprintf("%s (%s%s, on %d × %s; max_num_seqs %d, max_batched_tokens %d, block_size_tokens %d, chunked prefill %s, CPU offloading %s",
		fc.Name, fc.Model, arch, fc.TP, fc.Hardware, fc.MaxNumSeqs, fc.MaxBatchedTokens, fc.BlockSizeTokens,
		onOff(fc.ChunkedPrefillEnabled), onOff(fc.CPUOffloading))
	if fc.SamplesBeta > 0 || fc.SamplesAlpha > 0 {
		s += fmt.Sprintf("; %d beta, %d alpha samples", fc.SamplesBeta, fc.SamplesAlpha)
	}
	return s + ")"
}
