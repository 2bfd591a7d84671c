package coefficients

import (
	"flag"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

var update = flag.Bool("update", false, "rewrite testdata/valid.golden.yaml")

func readValid(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("testdata/valid.yaml")
	require.NoError(t, err)
	return string(data)
}

func loadValid(t testing.TB) *File {
	t.Helper()
	f, err := Load("testdata/valid.yaml")
	require.NoError(t, err)
	return f
}

func TestLoadValid(t *testing.T) {
	f := loadValid(t)
	require.Equal(t, SchemaVersion, f.SchemaVersion)
	require.Equal(t, "1.0", f.FeatureSpecVersion)
	require.Equal(t, AppliesTo{
		Model: "llama-3.1-8b", Hardware: "h100-sxm", TP: 1,
		VLLM: physics.VLLMKnobs{
			MaxNumSeqs: 256, MaxBatchedTokens: 8192, ChunkedPrefillEnabled: true,
			BlockSizeTokens: 16, TotalKVBlocksGPU: 28279, GPUMemoryUtilization: 0.9,
			PrefixCachingEnabled: true,
		},
	}, f.AppliesTo)
	require.Equal(t, []FittedConfig{
		{Name: "h100-tp1", Model: "llama-3.1-8b", Hardware: "h100-sxm", TP: 1, Architecture: ArchDense, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
			ChunkedPrefillEnabled: true, BlockSizeTokens: 16, SamplesBeta: 3000, SamplesAlpha: 700},
		{Name: "h100-tp2", Model: "llama-3.1-8b", Hardware: "h100-sxm", TP: 2, Architecture: ArchDense, MaxNumSeqs: 128, MaxBatchedTokens: 8192,
			ChunkedPrefillEnabled: true, BlockSizeTokens: 16, SamplesBeta: 2678, SamplesAlpha: 534},
	}, f.FittedConfigs)
	require.Equal(t, f.FittedConfigs, f.FittedSpan())
	require.Equal(t, 0.3, f.Gamma)
	require.Equal(t, 0.001, f.Alpha[0])
	require.Equal(t, -0.0005, f.Alpha[6])
	require.Equal(t, 0.0, f.Alpha[9])
	require.Equal(t, 1.2, f.Beta[0])
	require.Equal(t, 0.0025, f.Beta[features.NumBeta-1])
	require.Equal(t, Overheads{900, 0.05, 300, 2}, f.Overheads)
	require.Equal(t, &Fit{
		LambdaAlpha: 0.1, LambdaBeta: 0.01, Folds: 5,
		LambdaGrid: []float64{0.001, 0.01, 0.1, 1, 10, 100}, GammaGrid: []float64{0.1, 0.3, 0.5},
		AlphaCVMAPE: 0.21, BetaCVMAPE: 0.08, BetaTarget: "ts_start_diff",
		SamplesAlpha: 1234, SamplesBeta: 5678,
	}, f.Fit)
	require.Equal(t, Provenance{
		Tool: "calibrate", ToolVersion: "0.1.0", Command: "calibrate fit tables/ -o coeffs.yaml",
		Inputs: []Input{{Path: "tables/steps.parquet", SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Rows: 12345}},
		Notes:  "test fixture; placeholder numbers",
	}, f.Provenance)
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/no-such-file.yaml")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The vllm block must keep the keys of physics.VLLMKnobs' JSON tags.
func TestKnobKeysFollowPhysics(t *testing.T) {
	var want []string
	typ := reflect.TypeFor[physics.VLLMKnobs]()
	for i := range typ.NumField() {
		want = append(want, typ.Field(i).Tag.Get("json"))
	}
	var a AppliesTo
	vllm := a.layout().fields[3]
	require.Equal(t, "vllm", vllm.key)
	require.Equal(t, strings.Join(want, ", "), keys(vllm.val.(mapping)))
	// fitted_configs entries carry some of them, under the same keys and
	// in the same order.
	var fc FittedConfig
	var knobs []string
	for _, fl := range fc.layout().fields {
		if slices.Contains(want, fl.key) {
			knobs = append(knobs, fl.key)
		}
	}
	require.Equal(t, []string{"max_num_seqs", "max_batched_tokens", "chunked_prefill_enabled", "cpu_offloading", "block_size_tokens"}, knobs)
}

// The layout written by Marshal is pinned; go test -update rewrites it.
func TestMarshalGolden(t *testing.T) {
	got, err := loadValid(t).Marshal()
	require.NoError(t, err)
	const golden = "testdata/valid.golden.yaml"
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestRoundTrip(t *testing.T) {
	f := loadValid(t)
	negZero := math.Copysign(0, -1)
	// Within MaxMagnitude: the bound is 1e9 exactly, and 1 << 29 is a
	// power of two that prints as an integer.
	f.Alpha = [features.NumAlpha]float64{1e-300, 0.1, 1.0 / 3, negZero, 1 << 29, 1e9, 123456789, -999999999.9999999, math.SmallestNonzeroFloat64, -2.5e-7, 5}
	for i := range f.Beta {
		f.Beta[i] = -math.Pi * math.Pow(10, float64(3*i-37))
	}
	f.Gamma = math.Nextafter(1, 0)
	f.AppliesTo.VLLM.MaxNumSeqs = math.MaxInt64
	f.AppliesTo.VLLM.TotalKVBlocksGPU = 1 << 40
	f.AppliesTo.VLLM.CPUOffloading = true
	f.AppliesTo.VLLM.TotalKVBlocksCPU = 3
	f.Overheads.ArrivalPerPromptTokenUs = 1e-300
	f.Fit.LambdaGrid = []float64{0, 1e-12, 1e12}
	f.Fit.SamplesBeta = math.MaxInt64
	f.Fit.BetaTarget = ""            // may be empty
	f.Provenance.Tool = "yes"        // a boolean to YAML 1.1 readers
	f.Provenance.ToolVersion = "1.0" // a float if unquoted
	f.Provenance.Command = `calibrate fit "tables/" -o c.yaml # not a comment: {x}`
	f.Provenance.Notes = "line one\nline two\n\ttabbed, trailing space \nünïcödé ✓\n"
	f.Provenance.Inputs = append(f.Provenance.Inputs, Input{Path: " lead space", SHA256: strings.Repeat("0", 64), Rows: math.MaxInt64})
	f.FittedConfigs = append(f.FittedConfigs, FittedConfig{Name: "no", Model: "~", Hardware: "1.0", TP: math.MaxInt32, Architecture: ArchMoE,
		MaxNumSeqs: math.MaxInt64, MaxBatchedTokens: 1, CPUOffloading: true, BlockSizeTokens: 1, SamplesBeta: math.MaxInt64})

	first, err := f.Marshal()
	require.NoError(t, err)
	got, err := Parse(first, "roundtrip.yaml")
	require.NoError(t, err, string(first))
	require.Equal(t, f, got)
	requireSameBits(t, f, got)
	require.True(t, math.Signbit(got.Alpha[3]), "-0 lost its sign")

	second, err := got.Marshal()
	require.NoError(t, err)
	require.Equal(t, string(first), string(second))
	again, err := f.Marshal()
	require.NoError(t, err)
	require.Equal(t, first, again)
}

func TestRoundTripWithoutFit(t *testing.T) {
	f := loadValid(t)
	f.Fit = nil
	f.FittedConfigs = nil
	f.Provenance.Inputs = nil
	f.Provenance.Notes = ""
	data, err := f.Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(data), "\nfit:")
	require.NotContains(t, string(data), "fitted_configs")
	require.NotContains(t, string(data), "\n  inputs:")
	require.NotContains(t, string(data), "\n  notes:")
	got, err := Parse(data, "nofit.yaml")
	require.NoError(t, err)
	require.Equal(t, f, got)
}

// Strings that YAML could take for something else, or that need escapes,
// read back unchanged.
func TestRoundTripStrings(t *testing.T) {
	for _, s := range []string{
		"<<", "~", "null", "yes", "on", "0x1F", "1e3", ".5", "2001-12-14", "---", "...",
		"- a", "? a", "a: b", "a #b", "#a", "&a", "*a", "!a", "%a", "@a", "`a", "|", ">", "[a]", "{a}", ",",
		"'", "\"", "\\", " ", "a ", "\t", "a\tb", "\n", "a\n\n", "a\n ", "\r\n", "a\r",
		"\x00a", "\x01", "\x7f", "\u0085", "a\u2028b", "\ufeffa", "\u00a0", "\U0001F600", "\ufffe",
	} {
		f := loadValid(t)
		f.AppliesTo.Model = s + "m" // must not be blank
		f.Provenance.Command = "c" + s
		f.Provenance.Notes = s
		data, err := f.Marshal()
		require.NoError(t, err, "%q", s)
		got, err := Parse(data, "strings.yaml")
		require.NoError(t, err, "%q", s)
		require.Equal(t, f, got, "%q", s)
	}
}

// requireSameBits compares every float of two Files bit for bit, which
// require.Equal does not (-0 == +0).
func requireSameBits(t testing.TB, a, b *File) {
	t.Helper()
	var walk func(path string, x, y mapping)
	walk = func(path string, x, y mapping) {
		for i, fx := range x.fields {
			p := join(path, fx.key)
			switch vx := fx.val.(type) {
			case mapping:
				walk(p, vx, y.fields[i].val.(mapping))
			case **Fit:
				if vy := y.fields[i].val.(**Fit); *vx != nil && *vy != nil {
					walk(p, (*vx).layout(), (*vy).layout())
				}
			case *float64:
				require.Equal(t, math.Float64bits(*vx), math.Float64bits(*y.fields[i].val.(*float64)), p)
			case *[]float64:
				vy := *y.fields[i].val.(*[]float64)
				require.Len(t, vy, len(*vx), p)
				for j := range *vx {
					require.Equal(t, math.Float64bits((*vx)[j]), math.Float64bits(vy[j]), p)
				}
			}
		}
	}
	walk("", a.layout(), b.layout())
}

func TestFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.0", math.Copysign(0, -1): "-0.0", 5: "5.0", -5: "-5.0", 0.1: "0.1",
		1e-300: "1.0e-300", 1e6: "1.0e+06", 1.5e6: "1.5e+06", 1.0 / 3: "0.3333333333333333",
	} {
		require.Equal(t, want, formatFloat(v), "%v", v)
	}
}

func TestParseErrors(t *testing.T) {
	valid := readValid(t)
	// edit replaces the first old with new in valid.yaml for each pair
	// old, new. fitted_configs, at the end, repeats some of applies_to.
	edit := func(pairs ...string) string {
		s := valid
		for i := 0; i < len(pairs); i += 2 {
			require.Contains(t, s, pairs[i])
			s = strings.Replace(s, pairs[i], pairs[i+1], 1)
		}
		return s
	}
	upTo := func(marker string) string {
		before, _, found := strings.Cut(valid, marker)
		require.True(t, found)
		return before
	}
	for _, tc := range []struct {
		name  string
		input string
		want  []string
	}{
		{"unknown top-level key", valid + "extra: 1\n", []string{"line 101: extra: unknown key; expected one of schema_version, feature_spec_version, applies_to, fitted_configs, gamma"}},
		{"unknown alpha key", edit("  batch_saturation:", "  batch_saturaton:"), []string{"line 23: alpha.batch_saturaton: unknown key; expected one of batch_saturation, kv_pressure,"}},
		{"unknown knob", edit("max_num_seqs: 256", "max_num_seq: 256"), []string{"applies_to.vllm.max_num_seq: unknown key"}},
		{"unknown fit key", edit("  folds: 5", "  folds: 5\n  seed: 1"), []string{"fit.seed: unknown key"}},
		{"unknown input key", edit("      rows: 12345", "      rows: 12345\n      size: 1"), []string{"provenance.inputs[0].size: unknown key"}},
		{"duplicate key", edit("  kv_pressure: 0.002\n", "  kv_pressure: 0.002\n  kv_pressure: 0.002\n"), []string{"line 25: alpha.kv_pressure: duplicate key (first at line 24)"}},
		{"duplicate top-level key", valid + "gamma: 0.5\n", []string{"gamma: duplicate key (first at line 21)"}},
		{"missing beta entry", edit("  bias: 0.0025\n", ""), []string{"coeffs.yaml: beta.bias: missing (beta starts at line 35)"}},
		{"missing alpha entry", edit("  kv_pressure: 0.002\n", ""), []string{"alpha.kv_pressure: missing"}},
		{"missing fit entry", edit("  folds: 5\n", ""), []string{"fit.folds: missing"}},
		{"missing provenance", upTo("provenance:"), []string{"coeffs.yaml: provenance: missing"}},
		{"missing schema_version", edit("schema_version: 1\n", ""), []string{"schema_version: missing"}},
		{"out-of-order alpha", edit("  batch_saturation: 0.001\n  kv_pressure: 0.002\n", "  kv_pressure: 0.002\n  batch_saturation: 0.001\n"),
			[]string{"line 23: alpha.kv_pressure: out of order: expected batch_saturation here"}},
		{"nan", edit("kv_read: 1.4", "kv_read: .nan"), []string{"beta.kv_read: must be a finite number, got NaN"}},
		{"inf", edit("queue_drain: 0.8", "queue_drain: -.inf"), []string{"line 27: alpha.queue_drain: must be a finite number, got -Inf"}},
		{"huge", edit("queue_drain: 0.8", "queue_drain: 1e30"), []string{"line 27: alpha.queue_drain: magnitude 1e+30 is beyond 1e+09"}},
		{"huge overhead", edit("arrival_base_us: ", "arrival_base_us: 1e12 #"), []string{"overheads.arrival_base_us: magnitude 1e+12 is beyond 1e+09"}},
		{"inf gamma", edit("gamma: 0.3", "gamma: .Inf"), []string{"gamma: must be a finite number"}},
		{"nan in grid", edit("[0.1, 0.3, 0.5]", "[0.1, .nan, 0.5]"), []string{"fit.gamma_grid[1]: must be a finite number"}},
		{"schema_version 2", edit("schema_version: 1", "schema_version: 2"), []string{"line 5: schema_version: written by a newer tool (schema_version 2, this tool reads 1)"}},
		{"schema_version 2 with new keys", edit("schema_version: 1", "schema_version: 2\nnew_block: {}"), []string{"written by a newer tool (schema_version 2, this tool reads 1)"}},
		{"schema_version 0", edit("schema_version: 1", "schema_version: 0"), []string{"schema_version: must be 1, got 0"}},
		{"schema_version string", edit("schema_version: 1", `schema_version: "1"`), []string{`schema_version: expected an integer, got the string "1"`}},
		{"feature_spec_version 4.0", edit(`feature_spec_version: "1.0"`, `feature_spec_version: "4.0"`), []string{`feature_spec_version: "4.0" has major version "4"`}},
		{"spec 3.0 with spec 1.0 beta names", edit(`feature_spec_version: "1.0"`, `feature_spec_version: "3.0"`), []string{`beta.prefill_linear_compute: unknown key`}},
		{"spec 2.0 with spec 1.0 beta names", edit(`feature_spec_version: "1.0"`, `feature_spec_version: "2.0"`), []string{`beta.prefill_linear_compute: unknown key; expected one of linear_compute_bound`}},
		{"feature_spec_version unquoted", edit(`feature_spec_version: "1.0"`, `feature_spec_version: 1.0`), []string{"feature_spec_version: expected a string, got the number 1.0"}},
		{"tp 0", edit("tp: 1", "tp: 0"), []string{"line 10: applies_to.tp: must be >= 1, got 0"}},
		{"tp fractional", edit("tp: 1", "tp: 1.5"), []string{"applies_to.tp: expected an integer, got the number 1.5"}},
		{"knob invalid", edit("max_num_seqs: 256", "max_num_seqs: 0"), []string{"line 12: applies_to.vllm.max_num_seqs: must be > 0, got 0"}},
		{"knob offload without blocks", edit("cpu_offloading: false", "cpu_offloading: true"), []string{"applies_to.vllm.total_kv_blocks_cpu: must be > 0 when cpu_offloading is on"}},
		{"knob yes is not a boolean", edit("cpu_offloading: false", "cpu_offloading: no"), []string{`applies_to.vllm.cpu_offloading: expected true or false, got the string "no"`}},
		{"empty model", edit("model: llama-3.1-8b", `model: ""`), []string{"applies_to.model: must not be empty"}},
		{"negative overhead", edit("departure_base_us: 300", "departure_base_us: -1"), []string{"overheads.departure_base_us: must be >= 0, got -1"}},
		{"gamma 0", edit("gamma: 0.3", "gamma: 0"), []string{"line 21: gamma: must be in (0, 1], got 0"}},
		{"gamma above 1", edit("gamma: 0.3", "gamma: 1.5"), []string{"gamma: must be in (0, 1], got 1.5"}},
		{"bad sha256", edit(`"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`, `"E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"`),
			[]string{"provenance.inputs[0].sha256: must be 64 lowercase hex digits"}},
		{"short sha256", edit(`"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`, `abc`), []string{"provenance.inputs[0].sha256: must be 64 lowercase hex digits"}},
		{"empty command", edit(`command: "calibrate fit tables/ -o coeffs.yaml"`, `command: ""`), []string{"provenance.command: must not be empty"}},
		{"null command", edit(`command: "calibrate fit tables/ -o coeffs.yaml"`, `command:`), []string{"provenance.command: expected a string, got null"}},
		{"non-numeric alpha", edit("base_bias: 0.0004", "base_bias: fast"), []string{`line 26: alpha.base_bias: expected a number, got the string "fast"`}},
		{"quoted alpha", edit("base_bias: 0.0004", `base_bias: "0.0004"`), []string{`alpha.base_bias: expected a number, got the string "0.0004"`}},
		{"list for alpha", edit("base_bias: 0.0004", "base_bias: [1]"), []string{"alpha.base_bias: expected a number, got a list"}},
		{"alias", edit("gamma: 0.3", "gamma: &g 0.3", "base_bias: 0.0004", "base_bias: *g"), []string{"alpha.base_bias: expected a number, got an alias (*g); aliases are not supported"}},
		{"alpha not a mapping", edit("\nalpha:", "\nalpha: 1\nold_alpha:"), []string{"alpha: expected a mapping, got the number 1"}},
		{"inputs not a list", edit("  inputs:\n", "  inputs: {}\n  old_inputs:\n"), []string{"provenance.inputs: expected a list, got a mapping"}},
		{"not a mapping at top level", "- 1\n- 2\n", []string{"line 1: (top level): expected a mapping, got a list"}},
		{"scalar at top level", "hello\n", []string{`(top level): expected a mapping, got the string "hello"`}},
		{"empty file", "", []string{"coeffs.yaml: empty file"}},
		{"only comments", "# nothing here\n", []string{"coeffs.yaml: empty file"}},
		{"null document", "---\n", []string{"(top level): expected a mapping, got null"}},
		{"second document", valid + "---\nschema_version: 1\n", []string{"(top level): a second YAML document"}},
		{"syntax error", edit("gamma: 0.3", "gamma: [0.3"), []string{"coeffs.yaml: line 20: did not find expected"}},
		{"fitted_configs unknown key", edit("    samples_alpha: 700", "    samples_alpha: 700\n    colour: red"), []string{"fitted_configs[0].colour: unknown key"}},
		{"fitted_configs missing key", edit("    architecture: dense\n", ""), []string{"fitted_configs[1].architecture: missing"}},
		{"fitted_configs architecture", edit("    architecture: dense ", "    architecture: ssm "), []string{"line 81: fitted_configs[0].architecture: must be dense or moe, got \"ssm\""}},
		{"fitted_configs tp", edit("    tp: 2", "    tp: 0"), []string{"fitted_configs[1].tp: must be >= 1, got 0"}},
		{"fitted_configs knob", edit("    max_num_seqs: 128", "    max_num_seqs: -1"), []string{"fitted_configs[1].max_num_seqs: must be > 0, got -1"}},
		{"fitted_configs empty name", edit("  - name: h100-tp2", `  - name: ""`), []string{"fitted_configs[1].name: must not be empty"}},
		{"fitted_configs not a list", strings.Replace(upTo("fitted_configs:"), "\nfit:", "\nfitted_configs: {}\nfit:", 1), []string{"fitted_configs: expected a list, got a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.input), "coeffs.yaml")
			require.Error(t, err)
			require.Nil(t, f)
			require.True(t, strings.HasPrefix(err.Error(), "coeffs.yaml: "), err.Error())
			for _, want := range tc.want {
				require.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestKnobErrorUnwraps(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(readValid(t), "block_size_tokens: 16", "block_size_tokens: -16", 1)), "coeffs.yaml")
	var fe *physics.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "block_size_tokens", fe.Field)
	require.Contains(t, err.Error(), "coeffs.yaml: line 16: applies_to.vllm.block_size_tokens: must be in [1, 1024], got -16")
}

// Validate and Marshal check hand-built Files the way Parse checks files.
func TestValidateHandBuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*File)
		want   string
	}{
		{"zero File", func(f *File) { *f = File{} }, "coefficients: schema_version: must be 1, got 0"},
		{"newer schema", func(f *File) { f.SchemaVersion = 3 }, "schema_version: written by a newer tool (schema_version 3, this tool reads 1)"},
		{"empty feature spec", func(f *File) { f.FeatureSpecVersion = "" }, "feature_spec_version: must not be empty"},
		{"feature spec 10.0", func(f *File) { f.FeatureSpecVersion = "10.0" }, `feature_spec_version: "10.0" has major version "10"`},
		{"nan alpha", func(f *File) { f.Alpha[1] = math.NaN() }, "alpha.kv_pressure: must be a finite number, got NaN"},
		{"inf beta", func(f *File) { f.Beta[15] = math.Inf(1) }, "beta.bias: must be a finite number, got +Inf"},
		{"blank hardware", func(f *File) { f.AppliesTo.Hardware = "  " }, "applies_to.hardware: must not be empty"},
		{"knobs", func(f *File) { f.AppliesTo.VLLM.GPUMemoryUtilization = 0 }, "applies_to.vllm.gpu_memory_utilization: must be in (0, 1], got 0"},
		{"negative folds", func(f *File) { f.Fit.Folds = -1 }, "fit.folds: must be >= 0, got -1"},
		{"negative lambda", func(f *File) { f.Fit.LambdaGrid[2] = -0.1 }, "fit.lambda_grid[2]: must be >= 0, got -0.1"},
		{"negative rows", func(f *File) { f.Provenance.Inputs[0].Rows = -1 }, "provenance.inputs[0].rows: must be >= 0, got -1"},
		{"empty input path", func(f *File) { f.Provenance.Inputs[0].Path = "" }, "provenance.inputs[0].path: must not be empty"},
		{"empty tool", func(f *File) { f.Provenance.Tool = "" }, "provenance.tool: must not be empty"},
		{"empty tool_version", func(f *File) { f.Provenance.ToolVersion = "" }, "provenance.tool_version: must not be empty"},
		{"invalid UTF-8", func(f *File) { f.Provenance.Notes = "\xff" }, "provenance.notes: is not valid UTF-8"},
		{"fitted architecture", func(f *File) { f.FittedConfigs[1].Architecture = "" }, `fitted_configs[1].architecture: must be dense or moe, got ""`},
		{"fitted samples", func(f *File) { f.FittedConfigs[0].SamplesBeta = -1 }, "fitted_configs[0].samples_beta: must be >= 0, got -1"},
		{"fitted hardware", func(f *File) { f.FittedConfigs[0].Hardware = "" }, "fitted_configs[0].hardware: must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := loadValid(t)
			require.NoError(t, f.Validate())
			tc.modify(f)
			err := f.Validate()
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "coefficients: "), err.Error())
			require.Contains(t, err.Error(), tc.want)
			data, err := f.Marshal()
			require.Nil(t, data)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// physicsConfig is the physics of model on hardware at tp with the
// default knobs after edit.
func physicsConfig(t testing.TB, model, hardware string, tp int, edit func(*physics.VLLMKnobs)) *physics.PhysicsConfig {
	t.Helper()
	m, err := physics.LoadModel(model)
	require.NoError(t, err)
	h, err := physics.LoadHardware(hardware)
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	if edit != nil {
		edit(&k)
	}
	pc, err := physics.NewPhysicsConfig(m, h, tp, k)
	require.NoError(t, err)
	return pc
}

// Check warns about whatever lies outside the fitted configurations and
// refuses only another architecture family.
func TestCheck(t *testing.T) {
	f := loadValid(t) // fitted on llama-3.1-8b / h100-sxm at TP 1 (256 seqs) and TP 2 (128 seqs)
	const span = "fitted: h100-tp1 (llama-3.1-8b, dense, on 1 × h100-sxm; max_num_seqs 256, max_batched_tokens 8192, block_size_tokens 16, chunked prefill on, CPU offloading off; 3000 beta, 700 alpha samples); h100-tp2 (llama-3.1-8b, dense, on 2 × h100-sxm; max_num_seqs 128"
	for _, tc := range []struct {
		name      string
		model, hw string
		tp        int
		knobs     func(*physics.VLLMKnobs)
		warnings  []string // substrings, one per warning
		err       string
	}{
		{name: "first fitted", model: "llama-3.1-8b", hw: "h100-sxm", tp: 1},
		{name: "second fitted", model: "llama-3.1-8b", hw: "H100-SXM", tp: 2, knobs: func(k *physics.VLLMKnobs) { k.MaxNumSeqs = 128 }},
		{name: "KV size, memory and prefix caching are not compared", model: "llama-3.1-8b", hw: "h100-sxm", tp: 1,
			knobs: func(k *physics.VLLMKnobs) {
				k.TotalKVBlocksGPU, k.GPUMemoryUtilization, k.PrefixCachingEnabled = 5000, 0.5, false
			}},
		{name: "tp", model: "llama-3.1-8b", hw: "h100-sxm", tp: 4,
			warnings: []string{"the coefficients were not fitted on this configuration (tp 4, fitted: 1, 2); " /* and the span */}},
		{name: "hardware", model: "llama-3.1-8b", hw: "a100-80gb", tp: 1,
			warnings: []string{"(hardware A100-80GB, fitted: h100-sxm)"}},
		{name: "other dense model", model: "qwen2.5-7b", hw: "h100-sxm", tp: 1, warnings: []string{"(model qwen2.5-7b, fitted: llama-3.1-8b)"}},
		{name: "knobs", model: "llama-3.1-8b", hw: "h100-sxm", tp: 1,
			knobs: func(k *physics.VLLMKnobs) {
				k.MaxBatchedTokens, k.BlockSizeTokens, k.ChunkedPrefillEnabled = 2048, 32, false
			},
			warnings: []string{"(max_batched_tokens 2048, fitted: 8192; block_size_tokens 32, fitted: 16; chunked_prefill_enabled false, fitted: true)"}},
		{name: "a new combination", model: "llama-3.1-8b", hw: "h100-sxm", tp: 2,
			warnings: []string{"(each setting was fitted, but not this combination of them)"}},
		{name: "CPU offloading never fitted", model: "llama-3.1-8b", hw: "h100-sxm", tp: 1,
			knobs: func(k *physics.VLLMKnobs) { k.CPUOffloading, k.TotalKVBlocksCPU = true, 1000 },
			warnings: []string{"(cpu_offloading true, fitted: false)",
				"CPU offloading is on but no fitted configuration had it: the coefficients of its features were never fitted, so KV transfers cost what the file says (cpu_offload_transfer 1, cpu_offload_kv_read 1, cpu_offload_expansion 0)"}},
		{name: "MoE on dense coefficients", model: "mixtral-8x7b", hw: "h100-sxm", tp: 2,
			err: "coefficients fitted only on dense models cannot predict the MoE model mixtral-8x7b: their moe_activation feature (b8) is 0 on every dense step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := f.Check(physicsConfig(t, tc.model, tc.hw, tc.tp, tc.knobs))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, span, "the error lists the fitted configurations")
				require.Nil(t, w)
				return
			}
			require.NoError(t, err)
			require.Len(t, w, len(tc.warnings), "%q", w)
			for i, want := range tc.warnings {
				require.Contains(t, w[i], want)
			}
			if len(w) > 0 {
				require.Contains(t, w[0], span, "the warning lists the fitted configurations")
			}
		})
	}

	t.Run("dense on MoE coefficients", func(t *testing.T) {
		g := loadValid(t)
		for i := range g.FittedConfigs {
			g.FittedConfigs[i].Model, g.FittedConfigs[i].Architecture = "mixtral-8x7b", ArchMoE
		}
		_, err := g.Check(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 1, nil))
		require.ErrorContains(t, err, "coefficients fitted only on MoE models cannot predict the dense model llama-3.1-8b: on MoE steps moe_activation (b8) is 1")
		w, err := g.Check(physicsConfig(t, "qwen3-30b-a3b-instruct-2507", "h100-sxm", 1, nil))
		require.NoError(t, err, "another MoE model")
		require.Len(t, w, 1)
	})
	t.Run("both families fitted", func(t *testing.T) {
		g := loadValid(t)
		g.FittedConfigs[1].Model, g.FittedConfigs[1].Architecture = "mixtral-8x7b", ArchMoE
		w, err := g.Check(physicsConfig(t, "mixtral-8x7b", "h100-sxm", 2, func(k *physics.VLLMKnobs) { k.MaxNumSeqs = 128 }))
		require.NoError(t, err)
		require.Empty(t, w)
	})
}

// A file from before fitted_configs loads, and its span is applies_to.
func TestFileWithoutFittedConfigs(t *testing.T) {
	f, err := Load("testdata/no_fitted_configs.yaml")
	require.NoError(t, err)
	require.Nil(t, f.FittedConfigs)
	k := f.AppliesTo.VLLM
	require.Equal(t, []FittedConfig{{Name: "applies_to", Model: "llama-3.1-8b", Hardware: "h100-sxm", TP: 1, Architecture: ArchDense,
		MaxNumSeqs: k.MaxNumSeqs, MaxBatchedTokens: k.MaxBatchedTokens, ChunkedPrefillEnabled: true, BlockSizeTokens: 16}}, f.FittedSpan())
	w, err := f.Check(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 1, nil))
	require.NoError(t, err)
	require.Empty(t, w)
	w, err = f.Check(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 2, nil))
	require.NoError(t, err)
	require.Len(t, w, 1)
	require.Contains(t, w[0], "(tp 2, fitted: 1)")
	require.Contains(t, w[0], "fitted: applies_to (llama-3.1-8b, dense, on 1 × h100-sxm;")
	_, err = f.Check(physicsConfig(t, "mixtral-8x7b", "h100-sxm", 2, nil))
	require.ErrorContains(t, err, "coefficients fitted only on dense models cannot predict the MoE model")

	// A model the registry does not know: the family is not checked.
	f.AppliesTo.Model = "my-private-model"
	require.Equal(t, "", f.FittedSpan()[0].Architecture)
	w, err = f.Check(physicsConfig(t, "mixtral-8x7b", "h100-sxm", 2, nil))
	require.NoError(t, err)
	require.Len(t, w, 2)
	require.Contains(t, w[0], `the architecture the coefficients were fitted on is unknown (applies_to.model "my-private-model" is not a shipped model`)

	// Marshal does not add the list.
	data, err := f.Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(data), "fitted_configs")
}

func FuzzParse(f *testing.F) {
	valid := readValid(f)
	f.Add([]byte(valid))
	golden, err := os.ReadFile("testdata/valid.golden.yaml")
	require.NoError(f, err)
	f.Add(golden)
	for _, s := range []string{
		"",
		"- 1\n",
		"schema_version: 2\n",
		"a: &x [*x]\n",
		strings.Replace(valid, `"test fixture; placeholder numbers"`, "<<", 1),
		strings.Replace(valid, "0.001", "-0", 1),
		strings.Replace(valid, "0.3", ".nan", 1),
		strings.Replace(valid, "kv_pressure", "batch_saturation", 1),
		strings.Replace(valid, `"test fixture; placeholder numbers"`, `"a\n\tb \"c\" \u00e9"`, 1),
		strings.Replace(valid, "fit:", "old_fit:", 1),
		valid + "---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := Parse(data, "fuzz.yaml")
		if err != nil {
			require.Nil(t, first)
			require.True(t, strings.HasPrefix(err.Error(), "fuzz.yaml: "), err.Error())
			return
		}
		out, err := first.Marshal()
		require.NoError(t, err)
		second, err := Parse(out, "marshalled.yaml")
		require.NoError(t, err, string(out))
		require.Equal(t, first, second)
		requireSameBits(t, first, second)
		again, err := second.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(out), string(again))
	})
}

func TestShippedFilesParseAndApply(t *testing.T) {
	files := Shipped()
	require.NotEmpty(t, files)
	for _, s := range files {
		require.NoError(t, s.File.Validate(), s.Name)
		require.NotEmpty(t, s.File.Provenance.Inputs, "%s: provenance lists the traces", s.Name)
		// Each says how it is regenerated: the script, or the test that
		// fits the measured splitwise steps.
		p := s.File.Provenance
		require.True(t, strings.Contains(p.Notes, "make-shipped-coefficients.sh") || strings.HasSuffix(p.Command, " -update"), "%s: %s / %s", s.Name, p.Command, p.Notes)
	}
	got := FindShipped(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 1, nil))
	require.NotNil(t, got)
	// Outside the fitted span a shipped file is not chosen by itself (it
	// may still be given with --coefficients).
	require.Nil(t, FindShipped(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 2, nil)), "TP must match")
	require.Nil(t, FindShipped(physicsConfig(t, "llama-3.1-8b", "h100-sxm", 1, func(k *physics.VLLMKnobs) { k.MaxNumSeqs = 7 })), "knobs must match")
}

// A held-out split reads back as written, is checked for consistency, and
// its rule places a request by its arrival, else its QUEUED event.
func TestHoldoutRoundTripAndRule(t *testing.T) {
	f := loadValid(t)
	f.Provenance.Holdout = NewHoldout(1767225910638015200, 580, 9734)
	data, err := f.Marshal()
	require.NoError(t, err)
	require.Contains(t, string(data), "  holdout: # requests after this instant, and the steps, were left out of the fit\n"+
		"    after: \"2026-01-01T00:05:10.6380152Z\" # UTC, wall clock\n    after_unix_ns: 1767225910638015200\n")
	got, err := Parse(data, "holdout.yaml")
	require.NoError(t, err)
	require.Equal(t, f, got)

	for _, tc := range []struct {
		h    Holdout
		want string
	}{
		{Holdout{After: "1970-01-01T00:00:00Z", AfterUnixNs: 0}, "provenance.holdout.after_unix_ns: must be > 0, got 0"},
		{Holdout{After: "2026-01-01T00:00:00Z", AfterUnixNs: 1}, `provenance.holdout.after: must be after_unix_ns in RFC 3339 (1970-01-01T00:00:00.000000001Z), got "2026-01-01T00:00:00Z"`},
		{*NewHoldout(5, -1, 0), "provenance.holdout.requests: must be >= 0, got -1"},
		{*NewHoldout(5, 0, -2), "provenance.holdout.steps: must be >= 0, got -2"},
	} {
		g := loadValid(t)
		g.Provenance.Holdout = &tc.h
		require.ErrorContains(t, g.Validate(), tc.want)
	}

	h := NewHoldout(100, 0, 0)
	require.True(t, h.HeldOut(101, 50), "placed by its arrival")
	require.False(t, h.HeldOut(100, 200), "at the split is not after it")
	require.True(t, h.HeldOut(-1, 101), "no arrival: placed by QUEUED")
	require.False(t, h.HeldOut(-1, -1), "not placed: kept")
}
