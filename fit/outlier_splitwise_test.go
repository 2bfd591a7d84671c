package fit

import (
	"bytes"
	"encoding/csv"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// TestOutlierRuleOnMeasuredSteps replays the outlier rule's old defect (docs/fit.md) on the
// measured Llama2-70B data (testdata/splitwise/): each row becomes one
// prefill step (batch × prompt tokens) and one decode step (batch tokens),
// one trace per GPU and TP degree, as the author fed them to
// calibrate fit. The rule with the default factor must keep every
// possible prefill: the seed's rule (and the configuration-median fallback
// for small buckets) removed every prefill of ≥ 1,024 tokens. What it
// removes is the steps faster than the hardware allows: the TP2 batch-64
// prefills (the evaluation of TestSplitwiseEvaluation leaves out the same
// ten rows).
func TestOutlierRuleOnMeasuredSteps(t *testing.T) {
	var rows []SplitwiseRow
	for _, r := range ReadSplitwise(t, "../testdata/splitwise/") {
		if r.Model == "llama2-70b" && r.HW != "h100-80gb-pcap" {
			rows = append(rows, r)
		}
	}
	m, err := physics.LoadModel("llama-2-70b")
	require.NoError(t, err)
	hwName := map[string]string{"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm"}
	type key struct {
		hw string
		tp int
	}
	const kvTotal = 1 << 20
	steps := map[key][]StepRow{}
	var order []key
	for _, r := range rows {
		k := key{r.HW, r.TP}
		if _, ok := steps[k]; !ok {
			order = append(order, k)
		}
		batch, prompt := r.Batch, r.Prompt
		// The next row's prefill starts where the last decode ends: ss's
		// last row is a placeholder that carries that start.
		ss := steps[k]
		ts := int64(0)
		if n := len(ss); n > 0 {
			ts, ss = ss[n-1].TsStartNs, ss[:n-1]
		}
		id := int64(len(ss) + 1)
		pre := StepRow{ID: id, TsStartNs: ts, Running: batch, Waiting: 1, NumPrefill: batch, PrefillTok: batch * prompt,
			Scheduled: batch * prompt, KVTotal: kvTotal, KVFree: kvTotal, KVUsage: 0}
		ts += int64(r.PrefillS * 1e9)
		ctx := float64(batch*prompt) / (kvTotal * 16)
		dec := StepRow{ID: id + 1, TsStartNs: ts, Running: batch, Waiting: 1, NumDecode: batch, DecodeTok: batch,
			Scheduled: batch, KVTotal: kvTotal, KVFree: kvTotal / 2, KVUsage: ctx}
		ts += int64(r.TokS * 1e9)
		steps[k] = append(ss, pre, dec, StepRow{ID: id + 2, TsStartNs: ts, KVTotal: kvTotal})
	}
	var slowPrefills, fast, kept, bigPrefills int
	for _, k := range order {
		h, err := physics.LoadHardware(hwName[k.hw])
		require.NoError(t, err)
		kn := physics.DefaultVLLMKnobs()
		kn.MaxNumSeqs, kn.ChunkedPrefillEnabled, kn.TotalKVBlocksGPU = 64, false, kvTotal
		c, err := physics.NewPhysicsConfig(m, h, k.tp, kn)
		require.NoError(t, err)
		o := DefaultOptions()
		o.WarmupSteps, o.BetaTarget = 0, SourcePairs
		bb := newBetaBuilder(c, &o)
		tr := &Trace{Dir: k.hw, Steps: steps[k]}
		x := newStepIndex(tr, o.Gammas, new([]Count))
		bb.add(0, tr, x)
		_, sum := bb.dropOutliers(o.OutlierFactor)
		for _, r := range sum.Removed {
			switch {
			case r.Reason == OutlierTooFast:
				fast++
				require.Equal(t, 2, k.tp, "%+v", r)
			case r.Tokens > 64:
				slowPrefills++
			}
		}
		for i := range bb.out.len() {
			kept++
			if s := x.steps[bb.out.ref[i]]; s.NumPrefill > 0 && s.PrefillTok >= 1024 {
				bigPrefills++
			}
		}
	}
	require.Zero(t, slowPrefills, "no prefill is removed as slow")
	require.Equal(t, 10, fast, "the TP2 batch-64 prefills, which did not do the work they name")
	require.Equal(t, 2*len(rows)-10, kept)
	require.Positive(t, bigPrefills)
}

// SplitwiseRow is one row of testdata/splitwise's measured profile: a
// model on a GPU at a TP degree, a batch of prompts, its prefill time and
// its per-token decode time, in seconds.
type SplitwiseRow struct {
	Model          string // splitwise's name: llama2-70b, bloom-176b
	HW             string
	TP             int
	Prompt, Batch  int64
	PrefillS, TokS float64
}

// ReadSplitwise reads dir's splitwise profile (exported for the fit_test
// package's evaluation): SplitwiseSim's whole data/perf_model.csv when dir
// has it (every model and GPU), else the Llama2-70B subset shipped here,
// perf_model_llama2-70b.csv.
func ReadSplitwise(t *testing.T, dir string) []SplitwiseRow {
	t.Helper()
	name := dir + "perf_model.csv"
	if _, err := os.Stat(name); err != nil {
		name = dir + "perf_model_llama2-70b.csv"
	}
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	num := func(r []string, k string) float64 {
		v, err := strconv.ParseFloat(r[col[k]], 64)
		require.NoError(t, err, k)
		return v
	}
	var rows []SplitwiseRow
	for _, r := range recs[1:] {
		rows = append(rows, SplitwiseRow{Model: r[col["model"]], HW: r[col["hardware"]], TP: int(num(r, "tensor_parallel")),
			Prompt: int64(num(r, "prompt_size")), Batch: int64(num(r, "batch_size")),
			PrefillS: num(r, "prompt_time") / 1e3, TokS: num(r, "token_time") / 1e3})
	}
	return rows
}
