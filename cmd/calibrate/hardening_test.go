package main

// Issue 32 (hardening, round 3).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Class 7, example: predict --batches took a duplicated column, the last
// copy winning (42.9 ms instead of 204 ms); it is refused, naming both.
func TestPredictBatchesDuplicateColumn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dup.csv")
	require.NoError(t, os.WriteFile(p, []byte("prefill_tokens,num_prefill_reqs,prefill_tokens\n2000,1,100\n"), 0o644))
	_, err := run(t, "predict", "--coefficients", filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml"), "--batches", p)
	require.ErrorContains(t, err, "--batches "+p+": line 1: column prefill_tokens appears twice (columns 1 and 3)")
}
