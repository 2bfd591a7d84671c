package features

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/physics"
)

// betaColumns is a table of step compositions, one slice per BetaInput field.
type betaColumns struct {
	n                                           int
	prefill, decode, sched, nPrefill, nDecode   []int64
	running, decodeCtx, decodeKV, xfer, cpuRead []int64
	work, ema                                   []float64
}

func (t *betaColumns) row(i int) BetaInput {
	return BetaInput{
		PrefillTokens: t.prefill[i], DecodeTokens: t.decode[i], ScheduledTokens: t.sched[i],
		NumPrefillReqs: t.nPrefill[i], NumDecodeReqs: t.nDecode[i], RunningDepth: t.running[i],
		SumPrefillAttnWork: t.work[i], DecodeContextTokens: t.decodeCtx[i], SumDecodeKVBlocks: t.decodeKV[i],
		PreemptionEMA: t.ema[i], TransferBlocks: t.xfer[i], CPUResidentReadBlocks: t.cpuRead[i],
	}
}

// readBetaTable reads a Parquet table whose columns are the golden
// fixture's beta_input keys, as the Python twin's bench_features writes it.
func readBetaTable(tb testing.TB, path string) *betaColumns {
	f, err := pqread.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	i64 := func(name string) []int64 {
		c, err := f.Int64(name)
		require.NoError(tb, err, "%s: column %s", path, name)
		return c.V
	}
	f64 := func(name string) []float64 {
		c, err := f.Float64(name)
		require.NoError(tb, err, "%s: column %s", path, name)
		return c.V
	}
	return &betaColumns{
		n: int(f.NumRows()), prefill: i64("prefill_tokens"), decode: i64("decode_tokens"), sched: i64("scheduled_tokens"),
		nPrefill: i64("num_prefill_reqs"), nDecode: i64("num_decode_reqs"), running: i64("running_depth"),
		work: f64("sum_prefill_attn_work"), decodeCtx: i64("decode_context_tokens"), decodeKV: i64("sum_decode_kv_blocks"),
		ema: f64("preemption_ema"), xfer: i64("transfer_blocks"), cpuRead: i64("cpu_resident_read_blocks"),
	}
}

// randomBetaTable is the benchmark's table when no file is given.
func randomBetaTable(c *physics.PhysicsConfig, n int) *betaColumns {
	r := rand.New(rand.NewPCG(5, 6))
	t := &betaColumns{n: n}
	for range n {
		_, in := randomInputs(r, c)
		t.prefill, t.decode, t.sched = append(t.prefill, in.PrefillTokens), append(t.decode, in.DecodeTokens), append(t.sched, in.ScheduledTokens)
		t.nPrefill, t.nDecode, t.running = append(t.nPrefill, in.NumPrefillReqs), append(t.nDecode, in.NumDecodeReqs), append(t.running, in.RunningDepth)
		t.work, t.decodeCtx, t.decodeKV = append(t.work, in.SumPrefillAttnWork), append(t.decodeCtx, in.DecodeContextTokens), append(t.decodeKV, in.SumDecodeKVBlocks)
		t.ema, t.xfer, t.cpuRead = append(t.ema, in.PreemptionEMA), append(t.xfer, in.TransferBlocks), append(t.cpuRead, in.CPUResidentReadBlocks)
	}
	return t
}

// BenchmarkBetaFeaturesTable computes the 16 beta features of every row of
// a table into an n×16 matrix, the work the Python twin's vectorized
// beta_features_batch does, so that the two report comparable rows/s. The
// table is BLIS_FEATURES_TABLE (a Parquet file written by
// `python -m physics_trainer.bench_features --write`), else 1M random rows;
// reading it is not timed. Config: llama-3.1-8b, h100-sxm, TP 1, default
// knobs, as in bench_features.
func BenchmarkBetaFeaturesTable(b *testing.B) {
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(b, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(b, err)
	c, err := physics.NewPhysicsConfig(m, h, 1, physics.DefaultVLLMKnobs())
	require.NoError(b, err)
	var t *betaColumns
	if path := os.Getenv("BLIS_FEATURES_TABLE"); path != "" {
		t = readBetaTable(b, path)
	} else {
		t = randomBetaTable(c, 1_000_000)
	}
	out := make([]float64, t.n*NumBeta)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range t.n {
			f := BetaFeatures(c, t.row(i))
			copy(out[i*NumBeta:(i+1)*NumBeta], f[:])
		}
	}
	b.ReportMetric(float64(t.n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
