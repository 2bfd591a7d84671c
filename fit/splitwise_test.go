package fit_test

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/physics"
)

// The cross-configuration evaluation (docs/physics-spec.md) on measured step
// times: Llama2-70B on A100 and H100 at TP 2, 4 and 8 (splitwise-sim's
// profile, testdata/splitwise/; with SplitwiseSim's whole
// data/perf_model.csv in that folder, every model and GPU of it). Each row
// gives a prefill step (batch × prompt tokens, no context) and a decode
// step (batch tokens, context ≈ prompt). It reports, for each feature spec
// and objective, the relative error within a configuration (5-fold by
// row), leaving one configuration out, across GPUs (fit on A100, predict
// H100, and back) and, with more than one model, across models (fit on the
// others, predict one), and asserts the targets for the defaults. The
// table is checked in; regenerate it with
//
//	go test ./fit -run TestSplitwiseEvaluation -update
var updateEval = flag.Bool("update", false, "rewrite testdata/splitwise/evaluation.md")

const splitwiseDir = "../testdata/splitwise/"

type swRow = fit.SplitwiseRow

// swModels and swHardware map splitwise's names to the shipped specs. The
// power-capped H100 (h100-80gb-pcap) gets the H100's: SplitwiseSim's
// configs give the capped server's power (0.70 of the DGX H100's), not
// the GPU's cap nor its clock there, without which a spec could not
// describe it better (docs/physics-spec.md, "The power limit").
var (
	swModels   = map[string]string{"llama2-70b": "llama-2-70b", "bloom-176b": "bloom-176b"}
	swHardware = map[string]string{"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm", "h100-80gb-pcap": "h100-sxm"}
)

type swConfig struct {
	name  string
	model string
	hw    string
	phys  *physics.PhysicsConfig
	rows  []swRow
}

// steps turns rows into samples; rows whose prefill is faster than the
// hardware's peak allows are left out whole (the batch-64 TP2 runs, which
// did not do the work they name) and counted.
func (c *swConfig) steps(keep func(i int) bool) (out []fit.StepSample, impossible int) {
	for i, r := range c.rows {
		if !keep(i) {
			continue
		}
		var pre, dec features.BetaInput
		for range r.Batch {
			pre.AddPrefill(0, r.Prompt)
			dec.AddDecode(r.Prompt, (r.Prompt+15)/16)
		}
		if r.PrefillS < features.LowerBoundSeconds(c.phys, &pre) || r.TokS < features.LowerBoundSeconds(c.phys, &dec) {
			impossible++
			continue
		}
		out = append(out, fit.StepSample{In: pre, Seconds: r.PrefillS}, fit.StepSample{In: dec, Seconds: r.TokS})
	}
	return out, impossible
}

func splitwiseConfigs(t *testing.T) []*swConfig {
	var cfgs []*swConfig
	for _, r := range fit.ReadSplitwise(t, splitwiseDir) {
		name := fmt.Sprintf("%s/tp%d", r.HW, r.TP)
		if r.Model != "llama2-70b" {
			name = r.Model + "/" + name
		}
		i := slices.IndexFunc(cfgs, func(c *swConfig) bool { return c.name == name })
		if i < 0 {
			require.Contains(t, swModels, r.Model, "a model of the profile without a shipped config")
			require.Contains(t, swHardware, r.HW, "a GPU of the profile without a shipped spec")
			m, err := physics.LoadModel(swModels[r.Model])
			require.NoError(t, err)
			h, err := physics.LoadHardware(swHardware[r.HW])
			require.NoError(t, err)
			k := physics.DefaultVLLMKnobs()
			k.MaxNumSeqs, k.ChunkedPrefillEnabled = 64, false
			pc, err := physics.NewPhysicsConfig(m, h, r.TP, k)
			if err != nil {
				// The KV cache cannot be derived from memory (BLOOM at TP 8
				// leaves too little by this estimate); the beta features do
				// not read its size.
				k.TotalKVBlocksGPU = 1 << 20
				pc, err = physics.NewPhysicsConfig(m, h, r.TP, k)
			}
			require.NoError(t, err)
			cfgs = append(cfgs, &swConfig{name: name, model: r.Model, hw: r.HW, phys: pc})
			i = len(cfgs) - 1
		}
		cfgs[i].rows = append(cfgs[i].rows, r)
	}
	slices.SortFunc(cfgs, func(a, b *swConfig) int {
		return cmpStrings(a.name, b.name)
	})
	return cfgs
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type swScores struct {
	within, loco []float64 // per configuration, MAPE
	aToH, hToA   float64
	// crossModel is, per model, the MAPE of its configurations predicted
	// by a fit on the other models' (only with more than one model).
	crossModel map[string]float64
	impossible int
}

func evaluateSplitwise(t *testing.T, cfgs []*swConfig, spec, objective string) swScores {
	opt := fit.DefaultOptions()
	opt.Spec, opt.Objective = spec, objective
	all := func(int) bool { return true }
	stepCfg := func(c *swConfig, keep func(int) bool) fit.StepConfig {
		s, _ := c.steps(keep)
		return fit.StepConfig{Name: c.name, Phys: c.phys, Steps: s}
	}
	score := func(train []fit.StepConfig, test fit.StepConfig) float64 {
		coef, err := fit.FitSteps(train, opt)
		require.NoError(t, err)
		e, err := fit.ScoreSteps(test, spec, coef)
		require.NoError(t, err)
		return e.MAPE
	}
	var s swScores
	for _, c := range cfgs {
		_, bad := c.steps(all)
		s.impossible += bad
		// Within: 5 folds by row index; the score pools the folds.
		var sum float64
		var n int
		for k := range 5 {
			test := stepCfg(c, func(i int) bool { return i%5 == k })
			coef, err := fit.FitSteps([]fit.StepConfig{stepCfg(c, func(i int) bool { return i%5 != k })}, opt)
			require.NoError(t, err)
			e, err := fit.ScoreSteps(test, spec, coef)
			require.NoError(t, err)
			sum += e.MAPE * float64(e.N)
			n += int(e.N)
		}
		s.within = append(s.within, sum/float64(n))
		var train []fit.StepConfig
		for _, o := range cfgs {
			if o != c {
				train = append(train, stepCfg(o, all))
			}
		}
		s.loco = append(s.loco, score(train, stepCfg(c, all)))
	}
	// cross fits on the configurations train selects and pools the MAPE
	// of those test selects.
	cross := func(train, test func(*swConfig) bool) float64 {
		var tr []fit.StepConfig
		for _, c := range cfgs {
			if train(c) {
				tr = append(tr, stepCfg(c, all))
			}
		}
		var sum float64
		var n int64
		coef, err := fit.FitSteps(tr, opt)
		require.NoError(t, err)
		for _, c := range cfgs {
			if test(c) {
				e, err := fit.ScoreSteps(stepCfg(c, all), spec, coef)
				require.NoError(t, err)
				sum += e.MAPE * float64(e.N)
				n += e.N
			}
		}
		return sum / float64(n)
	}
	hw := func(name string) func(*swConfig) bool { return func(c *swConfig) bool { return c.hw == name } }
	s.aToH, s.hToA = cross(hw("a100-80gb"), hw("h100-80gb")), cross(hw("h100-80gb"), hw("a100-80gb"))
	models := map[string]bool{}
	for _, c := range cfgs {
		models[c.model] = true
	}
	if len(models) > 1 {
		s.crossModel = map[string]float64{}
		for m := range models {
			s.crossModel[m] = cross(func(c *swConfig) bool { return c.model != m }, func(c *swConfig) bool { return c.model == m })
		}
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func TestSplitwiseEvaluation(t *testing.T) {
	cfgs := splitwiseConfigs(t)
	subset := len(cfgs) == 6 // the Llama2-70B subset shipped here
	var b bytes.Buffer
	b.WriteString("<!-- generated by: go test ./fit -run TestSplitwiseEvaluation -update -->\n")
	b.WriteString("| spec | objective | within-config (median) | leave-one-config-out (median) | worst config left out | A100 → H100 | H100 → A100 |\n|---|---|---|---|---|---|---|\n")
	var def swScores
	var crossRows []string
	for _, spec := range features.Specs {
		for _, obj := range []string{coefficients.ObjectiveAbsolute, coefficients.ObjectiveRelative} {
			s := evaluateSplitwise(t, cfgs, spec, obj)
			if spec == features.DefaultSpec && obj == coefficients.ObjectiveRelative {
				def = s
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %.1f %% |\n", spec, obj,
				100*median(s.within), 100*median(s.loco), 100*slices.Max(s.loco), 100*s.aToH, 100*s.hToA)
			for _, m := range slices.Sorted(maps.Keys(s.crossModel)) {
				crossRows = append(crossRows, fmt.Sprintf("| %s | %s | %s | %.1f %% |\n", spec, obj, m, 100*s.crossModel[m]))
			}
		}
	}
	fmt.Fprintf(&b, "\nMean absolute percentage error over every step of the configuration(s) predicted. %d rows (of %d configurations) whose prefill is faster than the GPUs' peak allows are left out whole.\n",
		def.impossible, len(cfgs))
	if len(crossRows) > 0 {
		b.WriteString("\n| spec | objective | model predicted by a fit on the others | MAPE |\n|---|---|---|---|\n")
		for _, r := range crossRows {
			b.WriteString(r)
		}
	}
	t.Log("\n" + b.String())
	path := splitwiseDir + "evaluation.md"
	if !subset {
		// Another profile than the one checked in: report, do not compare.
		return
	}
	if *updateEval {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "stale %s: go test ./fit -run TestSplitwiseEvaluation -update", path)

	// The targets for the default spec and objective (the
	// leave-one-config-out target, < 8 %, is not met yet: 8.8 %;
	// docs/physics-spec.md).
	require.Equal(t, features.SpecV3, features.DefaultSpec)
	require.Equal(t, coefficients.ObjectiveRelative, fit.DefaultOptions().Objective)
	require.Less(t, median(def.loco), 0.10, "leave-one-config-out median")
	require.Less(t, def.aToH, 0.15, "A100 → H100")
	require.Less(t, def.hToA, 0.15, "H100 → A100")
	require.Equal(t, 10, def.impossible, "the batch-64 TP2 rows, 5 per GPU")
	require.False(t, math.IsNaN(median(def.within)))
}

// Why spec 3.0 counts attention's KV read per query head: on these
// Llama2-70B steps (8 query heads per KV head) spec 2.0's kv_read
// coefficient comes out ~15, a KV read at 7 % of peak bandwidth, which no
// attention kernel that reads each KV head once would show; counted once
// per query head, as a kernel that runs one query head per thread block
// reads it, the same steps give ~2 (50 %). The two specs fit these steps
// equally (one GQA ratio); they differ on a model with another ratio,
// where spec 2.0's coefficient would charge an MHA model's KV 15 times
// (docs/physics-spec.md, "Spec 3.0").
func TestSplitwiseAttentionReadIsPhysical(t *testing.T) {
	cfgs := splitwiseConfigs(t)
	all := func(int) bool { return true }
	coefOf := func(spec string) []float64 {
		var train []fit.StepConfig
		for _, c := range cfgs {
			if c.model == "llama2-70b" {
				s, _ := c.steps(all)
				train = append(train, fit.StepConfig{Name: c.name, Phys: c.phys, Steps: s})
			}
		}
		opt := fit.DefaultOptions()
		opt.Spec = spec
		coef, err := fit.FitSteps(train, opt)
		require.NoError(t, err)
		return coef
	}
	v2, v3 := coefOf(features.SpecV2), coefOf(features.SpecV3)
	require.Equal(t, "kv_read", features.BetaV2Names[3])
	require.Equal(t, "attention_read", features.BetaV3Names[3])
	require.Greater(t, v2[3], 8.0, "spec 2.0: unphysical")
	require.InDelta(t, 2, v3[3], 1, "spec 3.0: 1 / efficiency of a bandwidth-bound kernel")
	t.Logf("kv_read %.2f (spec 2.0), attention_read %.2f (spec 3.0)", v2[3], v3[3])
}

// The coefficients fitted on the measured steps ship as
// coefficients/shipped/llama-2-70b_splitwise.yaml (docs/fit.md): spec
// 3.0, the relative objective, all six Llama2-70B configurations. A run of
// one of them (Llama-2-70B on A100 or H100 at TP 2, 4 or 8, max_num_seqs
// 64, chunked prefill off) takes the physics model with this file by
// default; any other configuration does not (deploy's choice,
// coefficients.FindShipped). The test fails when the checked-in file is
// not what this fit writes; -update rewrites it.
func TestSplitwiseShippedCoefficients(t *testing.T) {
	cfgs := splitwiseConfigs(t)
	require.Len(t, cfgs, 6, "the Llama2-70B subset checked in")
	opt := fit.DefaultOptions()
	all := func(int) bool { return true }
	var train []fit.StepConfig
	var fitted []coefficients.FittedConfig
	for _, c := range cfgs {
		s, _ := c.steps(all)
		train = append(train, fit.StepConfig{Name: c.name, Phys: c.phys, Steps: s})
		fitted = append(fitted, coefficients.NewFittedConfig(c.name, c.phys, int64(len(s)), 0))
	}
	coef, err := fit.FitSteps(train, opt)
	require.NoError(t, err)
	csvPath := splitwiseDir + "perf_model_llama2-70b.csv"
	data, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	first := cfgs[0].phys
	// The step times say nothing of the request overheads around the
	// engine: the roofline's defaults (sim.DefaultOverheads), which
	// package fit cannot import.
	f := &coefficients.File{
		SchemaVersion: coefficients.SchemaVersion, FeatureSpecVersion: opt.Spec,
		AppliesTo:     coefficients.AppliesTo{Model: first.Model.Name, Hardware: first.Hardware.Name, TP: first.TP, VLLM: first.Knobs},
		FittedConfigs: fitted,
		Gamma:         1,
		Overheads:     coefficients.Overheads{ArrivalBaseUs: 1200, ArrivalPerPromptTokenUs: 1.9, DepartureBaseUs: 400, DeparturePerOutputTokenUs: 1.5},
		Provenance: coefficients.Provenance{
			Tool: "blis fit tests", ToolVersion: fit.ToolVersion, Command: "go test ./fit -run TestSplitwiseShippedCoefficients -update",
			Inputs: []coefficients.Input{{Path: "testdata/splitwise/perf_model_llama2-70b.csv", SHA256: fmt.Sprintf("%x", sha256.Sum256(data)), Rows: int64(bytes.Count(data, []byte("\n")) - 1)}},
			Notes: "MEASURED step times, not simulated: SplitwiseSim's profile of Llama2-70B on DGX-A100 and DGX-H100 at TP 2, 4 and 8 " +
				"(github.com/Mutinifni/splitwise-sim data/perf_model.csv, MIT), each row a prefill step and a decode step; " +
				"all 620 usable rows fitted (the 10 batch-64 TP 2 rows faster than the GPUs' peak left out); " +
				"held-out errors of this fit's procedure (testdata/splitwise/evaluation.md, spec 3.0, relative objective): " +
				"leave-one-config-out median 8.8 %, A100 -> H100 12.3 %, H100 -> A100 12.2 %. " +
				"The profile's engine (2023) is not vLLM V1: its per-step constant (layer_latency) comes to ~12 ms on H100, where the roofline takes 0.9 ms for vLLM 0.19, " +
				"so use the file for Splitwise-like deployments, not to predict a current vLLM. Alpha not fitted (no queue delays in the data); " +
				"overheads are the roofline's defaults, not measured; gamma unused by spec 3.0",
		},
	}
	copy(f.Beta[:], coef)
	got, err := f.Marshal()
	require.NoError(t, err)
	path := "../coefficients/shipped/llama-2-70b_splitwise.yaml"
	if *updateEval {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "stale %s: go test ./fit -run TestSplitwiseShippedCoefficients -update", path)
	// The file is taken for its own configurations, and only for them.
	shipped := coefficients.FindShipped(cfgs[3].phys)
	require.NotNil(t, shipped)
	require.Equal(t, "shipped/llama-2-70b_splitwise.yaml", shipped.Name)
	k := cfgs[3].phys.Knobs
	k.ChunkedPrefillEnabled, k.MaxNumSeqs = true, 256
	other, err := physics.NewPhysicsConfig(cfgs[3].phys.Model, cfgs[3].phys.Hardware, cfgs[3].phys.TP, k)
	require.NoError(t, err)
	require.Nil(t, coefficients.FindShipped(other), "vLLM's defaults: the roofline")
}
