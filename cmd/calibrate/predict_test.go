package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runSplit runs calibrate with stdout and stderr apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

// TestPredictOtherConfigurations: --model, --hardware, --tp and the vLLM
// flags choose the configuration predicted; outside the file's fitted
// configurations that is a warning on stderr, and the prediction follows
// the physics of the configuration; another architecture family is
// refused.
func TestPredictOtherConfigurations(t *testing.T) {
	// Fitted on Llama-3.1-8B / H100 at TP 1 (256 seqs) and TP 2 (128 seqs).
	coeffs := filepath.Join("..", "..", "coefficients", "testdata", "valid.yaml")
	csvPath := filepath.Join(t.TempDir(), "b.csv")
	require.NoError(t, os.WriteFile(csvPath, []byte("prefill_tokens,num_prefill_reqs,sum_prefill_attn_work,decode_tokens,num_decode_reqs,decode_context_tokens,prompt_tokens\n"+
		"512,1,262144,0,0,0,512\n0,0,0,64,64,65536,100\n"), 0o644))
	predict := func(args ...string) ([]string, string) {
		t.Helper()
		out, diag, err := runSplit(t, append([]string{"predict", "--coefficients", coeffs, "--batches", csvPath}, args...)...)
		require.NoError(t, err, diag)
		return strings.Split(strings.TrimSpace(out), "\n"), diag
	}
	base, diag := predict()
	require.Empty(t, diag, "applies_to is fitted: no warning")
	require.Len(t, base, 3)

	same, diag := predict("--tp", "2", "--max-num-seqs", "128")
	require.Empty(t, diag, "the second fitted configuration")
	require.NotEqual(t, base[1:], same[1:], "TP 2's physics")

	tp4, diag := predict("--tp", "4")
	require.True(t, strings.HasPrefix(diag, "warning: "+coeffs+": the coefficients were not fitted on this configuration (tp 4, fitted: 1, 2);"), diag)
	require.Contains(t, diag, "fitted: h100-tp1 (llama-3.1-8b, dense, on 1 × h100-sxm;")
	require.Contains(t, diag, "h100-tp2 (llama-3.1-8b, dense, on 2 × h100-sxm;")
	require.Equal(t, 1, strings.Count(diag, "\n"))
	require.NotEqual(t, base[1:], tp4[1:])
	require.Equal(t, base[0], tp4[0])

	a100, diag := predict("--hardware", "a100-80gb")
	require.Contains(t, diag, "(hardware A100-80GB, fitted: h100-sxm)")
	require.NotEqual(t, base[1:], a100[1:])

	_, diag, err := runSplit(t, "predict", "--coefficients", coeffs, "--batches", csvPath, "--model", "mixtral-8x7b", "--tp", "2")
	require.ErrorContains(t, err, "--coefficients "+coeffs+": coefficients fitted only on dense models cannot predict the MoE model mixtral-8x7b")
	require.Empty(t, diag)

	// A file from before fitted_configs: applies_to is its span.
	old := filepath.Join("..", "..", "coefficients", "testdata", "no_fitted_configs.yaml")
	out, diag, err := runSplit(t, "predict", "--coefficients", old, "--batches", csvPath)
	require.NoError(t, err)
	require.Empty(t, diag)
	require.Equal(t, strings.Join(base, "\n"), strings.TrimSpace(out), "the same coefficients")
	_, diag, err = runSplit(t, "predict", "--coefficients", old, "--batches", csvPath, "--tp", "2")
	require.NoError(t, err)
	require.Contains(t, diag, "(tp 2, fitted: 1)")

	_, _, err = runSplit(t, "predict", "--coefficients", coeffs, "--batches", csvPath, "--tp", "0")
	require.ErrorContains(t, err, "--tp must be >= 1")
}

// A --batches CSV a spreadsheet exported starts with a byte order mark:
// it was refused ("unknown column \"\ufeffprefill_tokens\""), while blis's
// replay and counters CSVs read it. It reads as the same file without it.
func TestPredictBatchesWithAByteOrderMark(t *testing.T) {
	coeffs := filepath.Join("..", "..", "coefficients", "testdata", "valid.yaml")
	doc := "prefill_tokens,num_prefill_reqs,sum_prefill_attn_work,decode_tokens,num_decode_reqs,decode_context_tokens,prompt_tokens\n512,1,262144,0,0,0,512\n"
	dir := t.TempDir()
	plain, bom := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	require.NoError(t, os.WriteFile(plain, []byte(doc), 0o644))
	require.NoError(t, os.WriteFile(bom, []byte("\ufeff"+doc), 0o644))
	want, _, err := runSplit(t, "predict", "--coefficients", coeffs, "--batches", plain)
	require.NoError(t, err)
	got, _, err := runSplit(t, "predict", "--coefficients", coeffs, "--batches", bom)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
