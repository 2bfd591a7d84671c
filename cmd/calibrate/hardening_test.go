package main

// docs/hardening.md, its classes.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

// Class 7, example: predict --batches took a duplicated column, the last
// copy winning (42.9 ms instead of 204 ms); it is refused, naming both.
func TestPredictBatchesDuplicateColumn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dup.csv")
	require.NoError(t, os.WriteFile(p, []byte("prefill_tokens,num_prefill_reqs,prefill_tokens\n2000,1,100\n"), 0o644))
	_, err := run(t, "predict", "--coefficients", filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml"), "--batches", p)
	require.ErrorContains(t, err, "--batches "+p+": line 1: column prefill_tokens appears twice (columns 1 and 3)")
}

// fullCacheTables is simTables with the GPU KV cache vLLM would size on
// the H100 (not shrunk to 5,000 blocks).
func fullCacheTables(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.ChunkedPrefillEnabled = false
	c, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	k = c.Knobs // the blocks sized from memory
	rng := sim.NewRNG(4)
	spec := workload.Spec{Requests: 300, Rate: 20}
	spec.Prompt, _ = workload.ParseDist("lognormal:mean=600,cv=0.6,max=4000")
	spec.Output, _ = workload.ParseDist("lognormal:mean=100,cv=0.6,max=500")
	reqs, err := workload.Generate(spec, rng.Stream(sim.StreamWorkload))
	require.NoError(t, err)
	return traceTables(t, dir, k, c, reqs, rng, "meta-llama/Llama-3.1-8B") // as vLLM names the model served
}

// Class 8, example: calibrate fit --model gpt2 on a Llama-3.1-8B trace
// exited 0 with coefficients, the mismatch one line in report.md. The
// trace's KV capacity (28,279 blocks) contradicts gpt2 on an H100 (63,907,
// 2.26x): refused unless --allow-kv-mismatch, and the name mismatch is
// said on stderr. Beyond the example: a trace of the right configuration
// passes; a shrunk cache (5,000 blocks, 5.7x) needs the flag; another
// model of the same family (Llama-2-7B, 7,402 blocks) is refused.
func TestFitRefusesAnotherModelsTrace(t *testing.T) {
	tables := fullCacheTables(t)
	out := filepath.Join(t.TempDir(), "c.yaml")
	base := []string{"fit", tables, "--enable-chunked-prefill=false", "-q", "-o", out}
	_, err := run(t, base...)
	require.NoError(t, err, "the trace's own configuration")
	for _, model := range []string{"gpt2", "llama-2-7b"} {
		refused := filepath.Join(t.TempDir(), model+".yaml")
		_, err = run(t, "fit", tables, "--enable-chunked-prefill=false", "-q", "-o", refused, "--model", model)
		require.ErrorContains(t, err, "configuration "+model+": the traces report")
		require.ErrorContains(t, err, "GPU KV blocks (kv.blocks_total_gpu), but model "+model+" on H100-SXM at TP 1")
		require.ErrorContains(t, err, "--allow-kv-mismatch to fit anyway")
		_, statErr := os.Stat(refused)
		require.True(t, os.IsNotExist(statErr), "nothing written")
	}
	got, err := run(t, append(base, "--model", "gpt2", "--allow-kv-mismatch")...)
	require.NoError(t, err)
	require.Contains(t, got, `calibrate: warning (gpt2): `+tables+`: the requests name the model "meta-llama/Llama-3.1-8B", but the configuration's model is "gpt2"`)
	require.Equal(t, 1, strings.Count(got, "calibrate: warning"), got)

	shrunk := simTables(t, 1)
	_, err = run(t, "fit", shrunk, "--enable-chunked-prefill=false", "--max-num-seqs", "64", "-q", "-o", out)
	require.ErrorContains(t, err, "the traces report 5000 GPU KV blocks")
}

// Class 5: fit's outputs are checked before any table is read: a missing
// folder for -o was found only after the fit (minutes on 10M rows).
func TestFitChecksOutputsFirst(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "no", "c.yaml")
	_, err := run(t, "fit", filepath.Join(dir, "tables"), "-o", out, "-q")
	require.ErrorContains(t, err, "-o "+out+": the folder "+filepath.Join(dir, "no")+" does not exist")
	_, err = run(t, "fit", filepath.Join(dir, "tables"), "-o", filepath.Join(dir, "c.yaml"), "--report", filepath.Join(dir, "c.yaml", "rep"), "-q")
	require.Error(t, err)
}
