package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/fit"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
)

// simTables simulates a short noisy-roofline run on Llama-3.1-8B / H100
// (chunked prefill off, so no snapshots are needed), traces every step,
// ingests it and returns the tables directory.
func simTables(t *testing.T, seed int64) string {
	t.Helper()
	dir := t.TempDir()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.ChunkedPrefillEnabled, k.TotalKVBlocksGPU, k.MaxNumSeqs = false, 5000, 64
	c, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	rng := sim.NewRNG(seed)
	spec := workload.Spec{Requests: 400, Rate: 20}
	spec.Prompt, _ = workload.ParseDist("lognormal:mean=600,cv=0.6,max=4000")
	spec.Output, _ = workload.ParseDist("lognormal:mean=100,cv=0.6,max=500")
	reqs, err := workload.Generate(spec, rng.Stream(sim.StreamWorkload))
	require.NoError(t, err)
	k.ChunkedPrefillEnabled, k.PrefixCachingEnabled = false, true
	return traceTables(t, dir, k, c, reqs, rng, "")
}

// traceTables simulates reqs on one instance of c with knobs k and 5 %
// step-time noise, writes the run's OTLP trace in dir (the served model
// named model, when not empty) and ingests it: the tables' directory.
func traceTables(t *testing.T, dir string, k physics.VLLMKnobs, c *physics.PhysicsConfig, reqs []sim.RequestSpec, rng sim.RNG, model string) string {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "trace.jsonl"))
	require.NoError(t, err)
	opt := simtrace.DefaultOptions()
	opt.StepSampleRate, opt.RichSubsampleRate = 1, 0
	if model != "" {
		opt.Model = model
	}
	tw, err := simtrace.NewWriter(f, nil, opt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
	require.NoError(t, err)
	s, err := sim.New(sim.Config{Engine: sim.EngineConfig{VLLMKnobs: k, OffloadThreshold: 0.8},
		Latency: sim.NewNoisy(sim.DefaultRoofline(c), 0.05, rng.Stream(sim.StreamLatencyNoise)), Observer: tw}, reqs)
	require.NoError(t, err)
	_, err = s.Run()
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, f.Close())
	_, err = otlpingest.Ingest(otlpingest.FileSources([]string{filepath.Join(dir, "trace.jsonl")}), otlpingest.Options{OutDir: filepath.Join(dir, "tables")})
	require.NoError(t, err)
	return filepath.Join(dir, "tables")
}

func TestFitWritesALoadableFileAndReport(t *testing.T) {
	tables := simTables(t, 1)
	out := filepath.Join(t.TempDir(), "c.yaml")
	// The traces' cache is shrunk to 5,000 blocks (Llama-3.1-8B on an H100
	// holds ~28,000): --allow-kv-mismatch says so.
	stdout, err := run(t, "fit", tables, "--enable-chunked-prefill=false", "--max-num-seqs", "64", "-o", out, "-q", "--allow-kv-mismatch")
	require.NoError(t, err)
	require.Contains(t, stdout, "beta  llama-3.1-8b: hold-out MAPE")
	f, err := coefficients.Load(out)
	require.NoError(t, err)
	require.Equal(t, int64(5000), f.AppliesTo.VLLM.TotalKVBlocksGPU, "taken from the trace")
	require.Len(t, f.FittedConfigs, 1)
	require.Equal(t, int64(64), f.FittedConfigs[0].MaxNumSeqs)
	require.False(t, f.FittedConfigs[0].ChunkedPrefillEnabled)
	require.Len(t, f.Provenance.Inputs, 5, "every table read, with its hash")
	rep := strings.TrimSuffix(out, ".yaml") + ".report"
	for _, name := range []string{"report.md", "report.json", "beta_predicted_vs_actual.png", "beta_residuals.png", "alpha_residuals.png"} {
		st, err := os.Stat(filepath.Join(rep, name))
		require.NoError(t, err, name)
		require.Greater(t, st.Size(), int64(100), name)
		if strings.HasSuffix(name, ".png") {
			// An 800 × 600 chart with something drawn on it.
			data, err := os.ReadFile(filepath.Join(rep, name))
			require.NoError(t, err, name)
			img, err := png.Decode(bytes.NewReader(data))
			require.NoError(t, err, name)
			require.Equal(t, image.Rect(0, 0, 800, 600), img.Bounds(), name)
			inked := 0
			for y := 0; y < 600; y += 2 {
				for x := 0; x < 800; x += 2 {
					if r, g, b, _ := img.At(x, y).RGBA(); r&g&b != 0xffff {
						inked++
					}
				}
			}
			require.Greater(t, inked, 1000, name)
		}
	}

	// predict on another trace of the same configuration.
	other := simTables(t, 2)
	js, err := run(t, "predict", "--coefficients", out, "--tables", other)
	require.NoError(t, err)
	require.Contains(t, js, `"beta"`)
	require.Contains(t, js, `"mape"`)
	// predict scores every step with a measured cycle by default (docs/fit.md,
	// cleaning: outliers); the fit's cleaning is asked for by flag.
	type eval struct {
		Beta struct {
			N int64 `json:"samples"`
		} `json:"beta"`
		Skipped  []fit.Count        `json:"beta_skipped"`
		Outliers fit.OutlierSummary `json:"beta_outliers"`
	}
	var all, cleaned eval
	require.NoError(t, json.Unmarshal([]byte(js), &all))
	js2, err := run(t, "predict", "--coefficients", out, "--tables", other, "--warmup-steps", "10", "--outlier-factor", "5")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(js2), &cleaned))
	for _, c := range all.Skipped {
		require.NotContains(t, c.Reason, "warm-up")
		require.NotContains(t, c.Reason, "outlier")
	}
	require.Empty(t, all.Outliers.Removed)
	require.Equal(t, all.Beta.N, cleaned.Beta.N+10+int64(len(cleaned.Outliers.Removed)), "every step but the 10 warm-up steps and the listed outliers")
	_, err = run(t, "predict", "--coefficients", out, "--batches", "x.csv", "--outlier-factor", "5")
	require.ErrorContains(t, err, "--outlier-factor applies only with --tables")
	csvPath := filepath.Join(t.TempDir(), "b.csv")
	require.NoError(t, os.WriteFile(csvPath, []byte("prefill_tokens,num_prefill_reqs,sum_prefill_attn_work,prompt_tokens\n512,1,262144,512\n1024,1,1048576,1024\n"), 0o644))
	res, err := run(t, "predict", "--coefficients", out, "--batches", csvPath)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(res), "\n")
	require.Equal(t, "row,step_time_ms,queue_delay_ms", lines[0])
	require.Len(t, lines, 3)
}

func TestFitAndPredictBadInput(t *testing.T) {
	dir := t.TempDir()
	n := 0
	manifest := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("m%d.yaml", n))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	badCSV := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(badCSV, []byte("prefill_tokens,bogus\n1,2\n"), 0o644))
	nanCSV := filepath.Join(dir, "nan.csv")
	require.NoError(t, os.WriteFile(nanCSV, []byte("prefill_tokens\nNaN\n"), 0o644))
	good := filepath.Join("..", "..", "coefficients", "testdata", "valid.yaml")
	csvFile := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("b%d.csv", n))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fit"}, "no TABLES_DIR"},
		{[]string{"fit", dir}, "steps.parquet"},
		{[]string{"fit", dir, "--folds", "1"}, "--folds"},
		{[]string{"fit", dir, "--lambdas", "-1"}, "--lambdas"},
		{[]string{"fit", dir, "--gammas", "0"}, "--gammas"},
		{[]string{"fit", dir, "--beta-target", "duration"}, "--beta-target"},
		{[]string{"fit", dir, "--configs", "x.yaml"}, "not both"},
		{[]string{"fit", "--configs", filepath.Join(dir, "none.yaml")}, "--configs"},
		{[]string{"fit", "--configs", manifest("configs:\n  - name: a\n    tables: [t]\n    model: llama-3.1-8b\n    hardware: h100-sxm\n    colour: red\n")},
			`line 6: unknown key "colour" (the keys here are name, tables, model, hardware, tp, vllm)`},
		{[]string{"fit", "--configs", manifest("")}, "the file is empty; it needs a configs: list"},
		{[]string{"fit", "--configs", manifest("confs: []\n")}, `line 1: unknown key "confs" (the keys here are configs)`},
		{[]string{"fit", dir, "--min-pairs", "-1"}, "--min-pairs"},
		{[]string{"fit", "--configs", manifest("configs:\n  - name: a\n    tables: [t]\n    model: llama-3.1-8b\n    hardware: h100-sxm\n    vllm: {max_seqs: 3}\n")}, "max_seqs"},
		{[]string{"fit", "--configs", manifest("configs:\n  - name: a\n    model: llama-3.1-8b\n")}, "required"},
		{[]string{"fit", "--configs", manifest("configs: []\n")}, "no configs"},
		{[]string{"fit", "--configs", manifest("configs:\n  - name: a\n    tables: [t]\n    model: m\n    hardware: h\n"), "--tp", "2"}, "--tp"},
		{[]string{"predict", "--batches", badCSV}, "--coefficients is required"},
		{[]string{"predict", "--coefficients", good}, "exactly one"},
		{[]string{"predict", "--coefficients", filepath.Join(dir, "none.yaml"), "--batches", badCSV}, "--coefficients"},
		{[]string{"predict", "--coefficients", good, "--batches", badCSV}, `column 2: unknown column "bogus"`},
		{[]string{"predict", "--coefficients", good, "--batches", nanCSV}, "line 2, column 1 (prefill_tokens)"},
		// Rows no step can have are refused by line.
		{[]string{"predict", "--coefficients", good, "--batches", csvFile("prefill_tokens,num_prefill_reqs,scheduled_tokens\n100,1,100\n100,1,50\n")},
			"line 3: scheduled_tokens 50 is not prefill_tokens 100 + decode_tokens 0"},
		{[]string{"predict", "--coefficients", good, "--batches", csvFile("decode_tokens,kv_usage_ratio,prompt_tokens\n4,5,10\n")}, "line 2: kv_usage_ratio 5 is more than 1"},
		{[]string{"predict", "--coefficients", good, "--batches", csvFile("prefill_tokens\n100\n")}, "line 2: prefill_tokens 100 with num_prefill_reqs 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, tc.args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// A vLLM setting the physics library refuses is
	// named by its flag, not by the library's field.
	tables := simTables(t, 1)
	for _, args := range [][]string{
		{"fit", tables, "-q", "-o", filepath.Join(dir, "c.yaml"), "--max-num-seqs", "0"},
		{"predict", "--coefficients", good, "--batches", csvFile("decode_tokens\n4\n"), "--max-num-seqs", "0"},
	} {
		_, err := run(t, args...)
		require.ErrorContains(t, err, "--max-num-seqs: must be > 0, got 0", "%v", args)
	}
}

// TestManifestPathsFromItsFolder: in a --configs file, relative tables,
// model and hardware paths are read from the file's folder, not the working
// directory; shipped names and absolute paths still work.
func TestManifestPathsFromItsFolder(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.MkdirAll(filepath.Join(sub, "hw"), 0o755))
	model := func(name string) []byte {
		return []byte(`{"name":"` + name + `","model_type":"llama","hidden_size":64,"num_hidden_layers":2,
		 "num_attention_heads":4,"intermediate_size":256,"vocab_size":100,"torch_dtype":"bfloat16"}`)
	}
	hw := func(name string) []byte {
		return []byte(`{"name":"` + name + `","TFlopsPeak":100,"BwPeakTBs":1,"pcie_bandwidth_gb_s":10,"memory_gib":80}`)
	}
	require.NoError(t, os.WriteFile(filepath.Join(sub, "model.json"), model("next-to-the-file"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "hw", "gpu.json"), hw("next-to-the-file"), 0o644))
	absModel := filepath.Join(dir, "abs-model.json")
	require.NoError(t, os.WriteFile(absModel, model("absolute"), 0o644))
	// Decoys of the same relative names in the working directory.
	cwd := filepath.Join(dir, "cwd")
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, "hw"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "model.json"), model("working-directory"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "hw", "gpu.json"), hw("working-directory"), 0o644))
	t.Chdir(cwd)

	path := filepath.Join(sub, "configs.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`configs:
  - name: relative
    tables: [run1/tables]
    model: model.json
    hardware: hw/gpu.json
  - name: shipped
    tables: [`+filepath.Join(dir, "t")+`]
    model: meta-llama/Llama-3.1-8B
    hardware: " h100-sxm "
  - name: absolute
    tables: [t]
    model: `+absModel+`
    hardware: h100-sxm.json
`), 0o644))
	specs, err := readManifest(path)
	require.NoError(t, err)
	require.Len(t, specs, 3)
	want := []struct{ model, hardware, dir string }{
		{"next-to-the-file", "next-to-the-file", filepath.Join(sub, "run1", "tables")},
		{"llama-3.1-8b", "H100-SXM", filepath.Join(dir, "t")},
		{"absolute", "H100-SXM", filepath.Join(sub, "t")},
	}
	for i, s := range specs {
		m, err := physics.LoadModel(s.model)
		require.NoError(t, err, s.name)
		h, err := physics.LoadHardware(s.hardware)
		require.NoError(t, err, s.name)
		require.Equal(t, want[i].model, m.Name, s.name)
		require.Equal(t, want[i].hardware, h.Name, s.name)
		require.Equal(t, []string{want[i].dir}, s.dirs, s.name)
	}
}

// TestPredictBatchesUsesTheFilesSpec: a spec 2.0 file predicts with the 9
// spec 2.0 features (it used spec 1.0's 16, a silent wrong result), and a
// negative prediction is warned about.
func TestPredictBatchesUsesTheFilesSpec(t *testing.T) {
	shipped := filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml")
	f, err := coefficients.Load(shipped)
	require.NoError(t, err)
	require.Equal(t, features.SpecV2, f.Spec())
	pc := physicsOf(t, f)
	b := features.BetaInput{}
	b.AddPrefill(0, 512)
	x := features.Beta(features.SpecV2, pc, b)
	var want float64
	for j, c := range f.Beta {
		want += c * x[j]
	}
	path := filepath.Join(t.TempDir(), "b.csv")
	require.NoError(t, os.WriteFile(path, []byte("prefill_tokens,num_prefill_reqs,sum_prefill_attn_work\n512,1,262144\n"), 0o644))
	out, err := run(t, "predict", "--coefficients", shipped, "--batches", path)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("row,step_time_ms\n1,%.4f\n", want*1e3), out)

	neg := physicsFileWith(t, func(f *coefficients.File) { f.Beta[6] = -1e6 })
	stdout, stderr, err := runSplit(t, "predict", "--coefficients", neg, "--batches", path)
	require.NoError(t, err)
	require.Contains(t, stdout, "1,-")
	require.Contains(t, stderr, "1 rows predict a negative step time (first: row 1)")
}

// physicsOf is the configuration of f's applies_to.
func physicsOf(t *testing.T, f *coefficients.File) *physics.PhysicsConfig {
	t.Helper()
	m, err := loadEither(physics.LoadModel, f.AppliesTo.Model)
	require.NoError(t, err)
	h, err := loadEither(physics.LoadHardware, f.AppliesTo.Hardware)
	require.NoError(t, err)
	pc, err := physics.NewPhysicsConfig(m, h, f.AppliesTo.TP, f.AppliesTo.VLLM)
	require.NoError(t, err)
	return pc
}

// physicsFileWith writes the shipped file with edit applied.
func physicsFileWith(t *testing.T, edit func(*coefficients.File)) string {
	t.Helper()
	f, err := coefficients.Load(filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml"))
	require.NoError(t, err)
	edit(f)
	data, err := f.Marshal()
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestFitHoldoutAfter: --holdout-after leaves the end of the trace out,
// records the split in the file's provenance and says how to validate on
// it; a split that leaves nothing on one side is refused naming the flag.
func TestFitHoldoutAfter(t *testing.T) {
	tables := simTables(t, 3)
	out := filepath.Join(t.TempDir(), "c.yaml")
	args := []string{"fit", tables, "--enable-chunked-prefill=false", "--max-num-seqs", "64", "-q", "--allow-kv-mismatch"}
	stdout, err := run(t, append(args, "-o", out, "--holdout-after", "70%")...)
	require.NoError(t, err)
	f, err := coefficients.Load(out)
	require.NoError(t, err)
	h := f.Provenance.Holdout
	require.NotNil(t, h)
	require.Positive(t, h.Requests)
	require.Less(t, h.Requests, int64(400))
	require.Positive(t, h.Steps)
	require.Contains(t, stdout, fmt.Sprintf("held out: %d requests arriving after %s (and %d steps); validate on them with blis validate TABLES --coefficients %s --from %s",
		h.Requests, h.After, h.Steps, out, h.After))
	require.Contains(t, f.Provenance.Notes, "were held out: blis validate --from "+h.After)

	// The same split given as that instant holds out the same.
	out2 := filepath.Join(t.TempDir(), "c2.yaml")
	_, err = run(t, append(args, "-o", out2, "--holdout-after", h.After)...)
	require.NoError(t, err)
	f2, err := coefficients.Load(out2)
	require.NoError(t, err)
	require.Equal(t, *h, *f2.Provenance.Holdout)
	require.Equal(t, f.Beta, f2.Beta, "the same data fitted")

	// Without the split, the fit sees more steps.
	out3 := filepath.Join(t.TempDir(), "c3.yaml")
	_, err = run(t, append(args, "-o", out3)...)
	require.NoError(t, err)
	f3, err := coefficients.Load(out3)
	require.NoError(t, err)
	require.Nil(t, f3.Provenance.Holdout)
	require.Greater(t, f3.Fit.SamplesBeta, f.Fit.SamplesBeta)

	for _, bad := range []string{"100%", "1h", "2000-01-01T00:00:00Z", "soon"} {
		_, err := run(t, append(args, "-o", filepath.Join(t.TempDir(), "x.yaml"), "--holdout-after", bad)...)
		require.ErrorContains(t, err, "--holdout-after \""+bad+"\"", bad)
	}
}

// TestFitCLIMatchesLibraryDefaults: calibrate fit TABLES with its default
// configuration flags fits what fit.Run fits for Llama-3.1-8B on one H100
// with vLLM's default settings and the trace's GPU KV blocks, with the
// split of --holdout-after applied by fit.HoldOutTraces. blis's README
// test (TestCalibrationTourInDocs) fits through the library on that
// ground.
func TestFitCLIMatchesLibraryDefaults(t *testing.T) {
	tables := simTables(t, 5)
	out := filepath.Join(t.TempDir(), "c.yaml")
	_, err := run(t, "fit", tables, "-o", out, "-q", "--allow-kv-mismatch", "--enable-chunked-prefill=false", "--holdout-after", "75%")
	require.NoError(t, err)
	cli, err := coefficients.Load(out)
	require.NoError(t, err)

	tr, err := fit.LoadTrace(tables)
	require.NoError(t, err)
	h, err := fit.HoldOutTraces([]*fit.Trace{tr}, "75%")
	require.NoError(t, err)
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	hw, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.ChunkedPrefillEnabled = false
	k.TotalKVBlocksGPU = tr.Steps[0].KVTotal
	pc, err := physics.NewPhysicsConfig(m, hw, 1, k)
	require.NoError(t, err)
	res, err := fit.Run([]fit.Config{{Name: "llama-3.1-8b", Phys: pc, Traces: []*fit.Trace{tr}}}, fit.DefaultOptions(), "x")
	require.NoError(t, err)
	require.Equal(t, *h, *cli.Provenance.Holdout)
	require.Equal(t, res.File.Beta, cli.Beta)
	require.Equal(t, res.File.Alpha, cli.Alpha)
	require.Equal(t, res.File.Overheads, cli.Overheads)
	require.Equal(t, res.File.AppliesTo, cli.AppliesTo)
}
