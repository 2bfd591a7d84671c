package fit

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

// writeSynthTables writes a steps table of n steps and a requests table of
// n/10 requests with the columns LoadTrace reads, from a known linear model
// plus 5% noise (the speed benchmark's input; too big for the simulator's
// own traces to be practical).
func writeSynthTables(tb testing.TB, dir string, c *physics.PhysicsConfig, n int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	const chunk = 1 << 20
	stepCols := []string{"step_id", "step_ts_start_ns", "queue_running_depth", "queue_waiting_depth", "batch_num_prefill_reqs",
		"batch_num_decode_reqs", "batch_scheduled_tokens", "batch_prefill_tokens", "batch_decode_tokens", "batch_num_finished",
		"batch_num_preempted", "kv_blocks_total_gpu", "kv_blocks_free_gpu"}
	fields := make([]arrow.Field, 0, len(stepCols)+2)
	for _, name := range stepCols {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: "kv_usage_gpu_ratio", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "has_rich_snapshots", Type: arrow.FixedWidthTypes.Boolean})
	schema := arrow.NewSchema(fields, nil)
	f, err := os.Create(filepath.Join(dir, "steps.parquet"))
	require.NoError(tb, err)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	require.NoError(tb, err)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	beta := truthBeta
	ts := int64(1e12)
	kvTotal := c.Knobs.TotalKVBlocksGPU
	for i := range n {
		running := 1 + rng.Int64N(c.Knobs.MaxNumSeqs)
		var in features.BetaInput
		numPrefill := int64(0)
		if rng.IntN(4) == 0 {
			numPrefill = 1 + rng.Int64N(min(4, running))
		}
		for range numPrefill {
			in.AddPrefill(0, 64+rng.Int64N(2048))
		}
		used := int64(float64(kvTotal) * (0.1 + 0.8*rng.Float64()))
		usage := float64(used) / float64(kvTotal)
		dec := running - numPrefill
		share := float64(dec) / float64(running)
		in.DecodeTokens, in.NumDecodeReqs, in.RunningDepth = dec, dec, running
		in.ScheduledTokens += dec
		in.DecodeContextTokens = int64(math.Round(usage * float64(kvTotal) * float64(c.Knobs.BlockSizeTokens) * share))
		in.SumDecodeKVBlocks = int64(math.Round(float64(used) * share))
		in.SumPrefillAttnWork = float64(in.PrefillTokens) * float64(in.PrefillTokens) / float64(max(1, numPrefill))
		x := features.BetaFeatures(c, in)
		var dt float64
		for j := range x {
			dt += beta[j] * x[j]
		}
		dt *= 1 + 0.05*rng.NormFloat64()
		vals := []int64{int64(i + 1), ts, running, rng.Int64N(20), numPrefill, dec, in.ScheduledTokens, in.PrefillTokens,
			in.DecodeTokens, 0, 0, kvTotal, kvTotal - used}
		for j, v := range vals {
			b.Field(j).(*array.Int64Builder).Append(v)
		}
		b.Field(len(vals)).(*array.Float64Builder).Append(usage)
		b.Field(len(vals) + 1).(*array.BooleanBuilder).Append(false)
		ts += int64(max(1e4, dt*1e9))
		if (i+1)%chunk == 0 || i == n-1 {
			rec := b.NewRecord()
			require.NoError(tb, w.WriteBuffered(rec))
			rec.Release()
		}
	}
	require.NoError(tb, w.Close())
}

var benchTables struct {
	once sync.Once
	dir  string
	cfg  *physics.PhysicsConfig
}

// benchTrace is the 10M-step table, written once per process. Set
// BLIS_BENCH_TABLES to a directory to write it there and keep it (for
// timing calibrate fit itself on it).
func benchTrace(b *testing.B) (string, *physics.PhysicsConfig) {
	benchTables.once.Do(func() {
		m, _ := physics.LoadModel("llama-3.1-8b")
		h, _ := physics.LoadHardware("h100-sxm")
		k := physics.DefaultVLLMKnobs()
		k.ChunkedPrefillEnabled = false
		var err error
		benchTables.cfg, err = physics.NewPhysicsConfig(m, h, 1, k)
		require.NoError(b, err)
		benchTables.dir = os.Getenv("BLIS_BENCH_TABLES")
		if benchTables.dir == "" {
			benchTables.dir, err = os.MkdirTemp("", "blis-fit-bench")
			require.NoError(b, err)
		} else {
			require.NoError(b, os.MkdirAll(benchTables.dir, 0o755))
		}
		if _, err := os.Stat(filepath.Join(benchTables.dir, "steps.parquet")); err != nil {
			writeSynthTables(b, benchTables.dir, benchTables.cfg, 10_000_000)
		}
	})
	return benchTables.dir, benchTables.cfg
}

// BenchmarkFit10M loads a 10M-row steps table and runs the whole pipeline
// (18-point CV grid, hold-out, final fit). go test ./fit -run '^$' -bench Fit10M -benchtime 1x
func BenchmarkFit10M(b *testing.B) {
	dir, c := benchTrace(b)
	b.ResetTimer()
	for range b.N {
		tr, err := LoadTrace(dir)
		require.NoError(b, err)
		res, err := Run([]Config{{Name: "bench", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "bench")
		require.NoError(b, err)
		b.ReportMetric(res.Report.Beta.Holdout[0].MAPE*100, "holdout-MAPE-%")
		b.ReportMetric(float64(res.Report.Beta.Samples), "samples")
	}
}
