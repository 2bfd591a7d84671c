package workload

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// pqRow is one row of a test requests table; nil is null.
type pqRow struct {
	arrived, queued      *float64
	prompt, output       *int64
	tenant, slo, session *string
}

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

// pqColumn is a column of a test table: its Arrow field and how to fill it.
type pqColumn struct {
	field arrow.Field
	fill  func(b array.Builder, r pqRow)
}

func floatCol(name string, get func(pqRow) *float64) pqColumn {
	return pqColumn{arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true}, func(b array.Builder, r pqRow) {
		if v := get(r); v != nil {
			b.(*array.Float64Builder).Append(*v)
		} else {
			b.AppendNull()
		}
	}}
}

func strCol(name string, get func(pqRow) *string) pqColumn {
	return pqColumn{arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}, func(b array.Builder, r pqRow) {
		if v := get(r); v != nil {
			b.(*array.StringBuilder).Append(*v)
		} else {
			b.AppendNull()
		}
	}}
}

func str(s string) *string { return &s }

func intCol(name string, get func(pqRow) *int64) pqColumn {
	return pqColumn{arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}, func(b array.Builder, r pqRow) {
		if v := get(r); v != nil {
			b.(*array.Int64Builder).Append(*v)
		} else {
			b.AppendNull()
		}
	}}
}

var (
	colTraceID = pqColumn{arrow.Field{Name: "trace_id", Type: arrow.BinaryTypes.String}, func(b array.Builder, _ pqRow) {
		b.(*array.StringBuilder).Append("abc")
	}}
	colArrivedS = floatCol("arrived_mono_s", func(r pqRow) *float64 { return r.arrived })
	colQueuedS  = floatCol("queued_mono_s", func(r pqRow) *float64 { return r.queued })
	colPromptT  = intCol("prompt_tokens", func(r pqRow) *int64 { return r.prompt })
	colOutputT  = intCol("output_tokens", func(r pqRow) *int64 { return r.output })
	allColumns  = []pqColumn{colTraceID, colPromptT, colArrivedS, colOutputT, colQueuedS}
)

// writeParquet writes rows as a Parquet table, in two row groups to
// exercise batching, with the blis.table key when table is not empty.
func writeParquet(t testing.TB, path, table string, cols []pqColumn, rows []pqRow) {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	schema := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	fw, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	if table != "" {
		require.NoError(t, fw.AppendKeyValueMetadata("blis.table", table))
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	half := len(rows) / 2
	for _, part := range [][]pqRow{rows[:half], rows[half:]} {
		for _, r := range part {
			for i, c := range cols {
				c.fill(rb.Field(i), r)
			}
		}
		rec := rb.NewRecord()
		require.NoError(t, fw.Write(rec))
		rec.Release()
	}
	require.NoError(t, fw.Close())
}

func TestReplayParquet(t *testing.T) {
	rows := []pqRow{
		{arrived: f64(100.5), queued: f64(100.6), prompt: i64(10), output: i64(5)},
		{queued: f64(100.25), prompt: i64(20), output: i64(6)}, // falls back to queued; earliest
		{prompt: i64(1), output: i64(1)},                       // no_arrival_time
		{arrived: f64(101), output: i64(1)},                    // no_prompt_tokens
		{arrived: f64(101), prompt: i64(1)},                    // no_output_tokens (e.g. aborted)
		{arrived: f64(99), prompt: i64(0), output: i64(3)},     // nonpositive_tokens; does not set t0
		{arrived: f64(100.5), prompt: i64(30), output: i64(7)}, // ties with row 0, stays after it
		{arrived: f64(101), prompt: i64(4), output: i64(-1)},   // nonpositive_tokens
		{arrived: f64(101.0000004), prompt: i64(1), output: i64(1)},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "requests.parquet")
	writeParquet(t, path, "requests", allColumns, rows)

	want := []sim.RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 20, OutputTokens: 6},
		{ID: 1, ArrivalUs: 250000, PromptTokens: 10, OutputTokens: 5},
		{ID: 2, ArrivalUs: 250000, PromptTokens: 30, OutputTokens: 7},
		{ID: 3, ArrivalUs: 750000, PromptTokens: 1, OutputTokens: 1},
	}
	wantRep := ReplayReport{Rows: 9, Kept: 4, Source: path, Skipped: []SkipCount{
		{Reason: SkipNoArrivalTime, Count: 1, FirstRow: 2},
		{Reason: SkipNoOutputTokens, Count: 1, FirstRow: 4},
		{Reason: SkipNoPromptTokens, Count: 1, FirstRow: 3},
		{Reason: SkipNonpositiveTokens, Count: 2, FirstRow: 5},
	}}
	for _, in := range []string{path, dir} {
		t.Run(filepath.Base(in), func(t *testing.T) {
			got, rep, err := Replay(in)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, wantRep, rep)
			require.Contains(t, rep.String(), "kept 4 of 9 rows; skipped 1 no_arrival_time (first row 2)")
		})
	}
}

func TestReplayParquetErrors(t *testing.T) {
	ok := []pqRow{{arrived: f64(1), prompt: i64(1), output: i64(1)}, {arrived: f64(2), prompt: i64(1), output: i64(1)}}
	wrongType := pqColumn{arrow.Field{Name: "prompt_tokens", Type: arrow.PrimitiveTypes.Float64}, func(b array.Builder, _ pqRow) {
		b.(*array.Float64Builder).Append(1)
	}}
	tests := []struct {
		name  string
		table string
		cols  []pqColumn
		rows  []pqRow
		want  string
	}{
		{"missing columns", "requests", []pqColumn{colArrivedS, colOutputT}, ok, "missing column(s) queued_mono_s, prompt_tokens of the requests table"},
		{"other table", "steps", allColumns, ok, `is the "steps" table of calibrate ingest`},
		{"wrong type", "", []pqColumn{colArrivedS, colQueuedS, wrongType, colOutputT}, ok, "column prompt_tokens has type float64, want int64"},
		{"nothing usable", "requests", allColumns, []pqRow{{prompt: i64(1)}, {prompt: i64(1)}}, "none of 2 rows is usable; skipped 2 no_arrival_time (first row 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.parquet")
			writeParquet(t, path, tt.table, tt.cols, tt.rows)
			_, _, err := Replay(path)
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, path)
		})
	}

	t.Run("not parquet", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "requests.parquet")
		require.NoError(t, os.WriteFile(path, []byte("arrival_us,prompt_tokens,output_tokens\n0,1,1\n"), 0o644))
		_, _, err := Replay(path)
		require.ErrorContains(t, err, "not a readable Parquet file")
	})
	t.Run("directory without requests.parquet", func(t *testing.T) {
		_, _, err := Replay(t.TempDir())
		require.ErrorContains(t, err, "requests.parquet")
	})
}

func TestReplayCSV(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sim.RequestSpec
	}{
		{"required columns", "arrival_us,prompt_tokens,output_tokens\n0,10,5\n1500,20,6\n",
			[]sim.RequestSpec{{ID: 0, ArrivalUs: 0, PromptTokens: 10, OutputTokens: 5}, {ID: 1, ArrivalUs: 1500, PromptTokens: 20, OutputTokens: 6}}},
		{"not rebased", "arrival_us,prompt_tokens,output_tokens\n700,1,1\n",
			[]sim.RequestSpec{{ID: 0, ArrivalUs: 700, PromptTokens: 1, OutputTokens: 1}}},
		{"any order, optional columns, spaces, comments, CRLF, BOM",
			"\ufeffpriority, Output_Tokens ,prefix_tokens,arrival_us,prefix_group,prompt_tokens\r\n# a comment\r\n-2, 5 ,8,10,3,12\r\n\r\n,6,,20,,7\r\n",
			[]sim.RequestSpec{
				{ID: 0, ArrivalUs: 10, PromptTokens: 12, OutputTokens: 5, PrefixGroup: 3, PrefixTokens: 8, Priority: -2},
				{ID: 1, ArrivalUs: 20, PromptTokens: 7, OutputTokens: 6},
			}},
		{"sorted stably by arrival", "arrival_us,prompt_tokens,output_tokens\n30,1,1\n10,2,1\n30,3,1\n10,4,1\n",
			[]sim.RequestSpec{
				{ID: 0, ArrivalUs: 10, PromptTokens: 2, OutputTokens: 1},
				{ID: 1, ArrivalUs: 10, PromptTokens: 4, OutputTokens: 1},
				{ID: 2, ArrivalUs: 30, PromptTokens: 1, OutputTokens: 1},
				{ID: 3, ArrivalUs: 30, PromptTokens: 3, OutputTokens: 1},
			}},
		{"quoted fields", "arrival_us,prompt_tokens,output_tokens\n\"5\",\"6\",\"7\"\n",
			[]sim.RequestSpec{{ID: 0, ArrivalUs: 5, PromptTokens: 6, OutputTokens: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.csv")
			require.NoError(t, os.WriteFile(path, []byte(tt.in), 0o644))
			got, rep, err := Replay(path)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			n := int64(len(tt.want))
			require.Equal(t, ReplayReport{Rows: n, Kept: n, Source: path}, rep)
		})
	}
}

func TestReplayCSVErrors(t *testing.T) {
	const h = "arrival_us,prompt_tokens,output_tokens"
	tests := []struct{ name, in, want string }{
		{"empty", "", ": empty file; want a CSV header row"},
		{"header only", h + "\n", ": no requests after the header"},
		{"unknown columns", "arrival_us,prompt_tokens,output_tokens,user,model\n", `:1: unknown column(s) "user", "model"`},
		{"missing column", "arrival_us,prompt_tokens\n1,1\n", ":1: missing column output_tokens"},
		{"duplicate column", "arrival_us,prompt_tokens,output_tokens,arrival_us\n", ":1: column arrival_us appears twice"},
		{"negative arrival", h + "\n0,1,1\n-5,1,1\n", ":3: arrival_us: -5 is negative"},
		{"non-integer", h + "\n0,1.5,1\n", `:2: prompt_tokens: "1.5" is not an integer`},
		{"empty required", h + "\n0,1,\n", `:2: output_tokens: "" is not an integer`},
		{"zero prompt", h + "\n0,0,1\n", ":2: prompt_tokens: 0 must be > 0"},
		{"zero output", h + "\n0,1,0\n", ":2: output_tokens: 0 must be > 0"},
		{"too few fields", h + "\n0,1\n", ":2: 2 fields, but the header has 3"},
		{"too many fields", h + "\n# c\n0,1,1,1\n", ":3: 4 fields, but the header has 3"},
		{"prefix too long", h + ",prefix_group,prefix_tokens\n0,10,1,1,11\n", ":2: prefix_tokens: 11 must be within [0, prompt_tokens 10]"},
		{"prefix without group", h + ",prefix_tokens\n0,10,1,5\n", ":2: prefix_tokens: 5 without a prefix_group"},
		{"negative group", h + ",prefix_group\n0,10,1,-1\n", ":2: prefix_group: -1 must be within [0, 2147483647]"},
		{"priority range", h + ",priority\n0,10,1,3000000000\n", ":2: priority: 3000000000 must fit in 32 bits"},
		{"overflow", h + "\n99999999999999999999,1,1\n", `:2: arrival_us: "99999999999999999999" is not an integer`},
		{"bad quote", h + "\n0,\"1,1\n", ":2: extraneous or missing \" in quoted-field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.csv")
			require.NoError(t, os.WriteFile(path, []byte(tt.in), 0o644))
			_, _, err := Replay(path)
			require.ErrorContains(t, err, path+tt.want)
		})
	}
}

func TestReplayMissingFile(t *testing.T) {
	_, _, err := Replay(filepath.Join(t.TempDir(), "nope.csv"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestReplayCorruptParquet flips bytes of a valid file: Replay must fail or
// succeed cleanly, never panic (the Arrow reader panics on some corrupt
// metadata; see replayParquet).
func TestReplayCorruptParquet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "requests.parquet")
	writeParquet(t, path, "requests", allColumns, []pqRow{
		{arrived: f64(1), prompt: i64(1), output: i64(1)},
		{queued: f64(2), prompt: i64(3), output: i64(1)},
	})
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 1))
	bad := filepath.Join(dir, "bad.parquet")
	for range 500 {
		b := slices.Clone(orig)
		for range 1 + r.IntN(4) {
			b[4+r.IntN(len(b)-8)] = byte(r.Uint32()) // keep both magics
		}
		require.NoError(t, os.WriteFile(bad, b, 0o644))
		reqs, _, err := Replay(bad)
		if err == nil {
			require.NoError(t, sim.ValidateWorkload(reqs))
		}
	}
}

func TestReplayNameColumns(t *testing.T) {
	t.Run("csv", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "w.csv")
		in := "arrival_us,prompt_tokens,output_tokens,tenant_id,slo_class,session_id\n" +
			"30,1,1,acme,batch,s9\n" +
			"10,2,1,zeta,,s1\n" +
			"20,3,1,,realtime,s9\n" +
			"40,4,1,zeta,interactive,\n"
		require.NoError(t, os.WriteFile(path, []byte(in), 0o644))
		got, rep, err := Replay(path)
		require.NoError(t, err)
		require.Equal(t, []sim.RequestSpec{
			{ID: 0, ArrivalUs: 10, PromptTokens: 2, OutputTokens: 1, Tenant: 1, Session: 1},
			{ID: 1, ArrivalUs: 20, PromptTokens: 3, OutputTokens: 1, SLOClass: sim.SLORealtime, Session: 2},
			{ID: 2, ArrivalUs: 30, PromptTokens: 1, OutputTokens: 1, Tenant: 2, SLOClass: sim.SLOBatch, Session: 2},
			{ID: 3, ArrivalUs: 40, PromptTokens: 4, OutputTokens: 1, Tenant: 1, SLOClass: sim.SLOInteractive},
		}, got, "names numbered in arrival order from 1; empty is tenant 0 or no session")
		require.Equal(t, ReplayReport{Rows: 4, Kept: 4, Source: path}, rep)

		require.NoError(t, os.WriteFile(path, []byte("arrival_us,prompt_tokens,output_tokens,slo_class\n0,1,1,gold\n"), 0o644))
		_, _, err = Replay(path)
		require.ErrorContains(t, err, path+`:2: slo_class: "gold" is not a class`)
	})
	t.Run("parquet", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "requests.parquet")
		cols := append(slices.Clone(allColumns),
			strCol("tenant_id", func(r pqRow) *string { return r.tenant }),
			strCol("slo_class", func(r pqRow) *string { return r.slo }),
			strCol("session_id", func(r pqRow) *string { return r.session }))
		writeParquet(t, path, "requests", cols, []pqRow{
			{arrived: f64(2), prompt: i64(1), output: i64(1), tenant: str("a"), slo: str("batch"), session: str("x")},
			{arrived: f64(1), prompt: i64(2), output: i64(1), tenant: str("b"), session: str("x")},
			{arrived: f64(3), prompt: i64(3), output: i64(1), slo: str("gold")},
			{arrived: f64(4), prompt: i64(4), output: i64(1), tenant: str("a")},
		})
		got, rep, err := Replay(path)
		require.NoError(t, err)
		require.Equal(t, []sim.RequestSpec{
			{ID: 0, ArrivalUs: 0, PromptTokens: 2, OutputTokens: 1, Tenant: 1, Session: 1},
			{ID: 1, ArrivalUs: 1000000, PromptTokens: 1, OutputTokens: 1, Tenant: 2, SLOClass: sim.SLOBatch, Session: 1},
			{ID: 2, ArrivalUs: 3000000, PromptTokens: 4, OutputTokens: 1, Tenant: 2},
		}, got)
		require.Equal(t, []SkipCount{{Reason: SkipBadSLOClass, Count: 1, FirstRow: 2}}, rep.Skipped)
		_, _, err = ReplayWith(path, ReplayOptions{Strict: true})
		require.EqualError(t, err, path+`: row 2 (0-based): slo_class: "gold" is not a class; use realtime, interactive or batch`)
	})
}

func TestReplayParquetStrict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.parquet")
	writeParquet(t, path, "requests", allColumns, []pqRow{
		{arrived: f64(1), prompt: i64(1), output: i64(1)},
		{arrived: f64(1), prompt: i64(1), output: i64(0)},
	})
	_, _, err := ReplayWith(path, ReplayOptions{Format: FormatParquet, Strict: true})
	require.EqualError(t, err, path+": row 1 (0-based): output_tokens: 0 must be > 0")
	_, rep, err := ReplayWith(path, ReplayOptions{Format: FormatParquet})
	require.NoError(t, err)
	require.Equal(t, int64(1), rep.Kept)
}

// The imported formats go through package records; see its tests for
// each reader.
func TestReplayImported(t *testing.T) {
	const dir = "records/testdata"
	tests := []struct {
		file, format string
		kept, rows   int64
		skipped      []SkipCount
	}{
		{"azure_2023.csv", "azure", 4, 5, []SkipCount{{Reason: "zero_output_tokens", Count: 1, FirstLine: 5}}},
		{"azure_2024.csv", "azure", 4, 4, nil},
		{"mooncake.jsonl", "mooncake", 4, 5, []SkipCount{{Reason: "zero_output_tokens", Count: 1, FirstLine: 4}}},
		{"vllm_bench.json", "vllm-bench", 3, 4, []SkipCount{{Reason: "failed_request", Count: 1, FirstLine: 2}}},
		{"inference_perf.json", "inference-perf", 3, 4, []SkipCount{{Reason: "failed_request", Count: 1, FirstLine: 3}}},
		{"vllm_runs.jsonl", "vllm-runs", 3, 4, []SkipCount{{Reason: "zero_output_tokens", Count: 1, FirstLine: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			want := ReplayReport{Rows: tt.rows, Kept: tt.kept, Source: path, Format: tt.format, Skipped: tt.skipped}
			for _, format := range []string{"", FormatAuto, tt.format} {
				reqs, rep, err := ReplayWith(path, ReplayOptions{Format: format})
				require.NoError(t, err)
				require.Equal(t, want, rep)
				require.Len(t, reqs, int(tt.kept))
				require.NoError(t, sim.ValidateWorkload(reqs))
			}
			_, _, err := ReplayWith(path, ReplayOptions{Format: tt.format, Strict: true})
			if tt.skipped != nil {
				require.ErrorContains(t, err, path+":")
			} else {
				require.NoError(t, err)
			}
		})
	}
	t.Run("mooncake content", func(t *testing.T) {
		reqs, _, err := Replay(filepath.Join(dir, "mooncake.jsonl"))
		require.NoError(t, err)
		require.Equal(t, sim.RequestSpec{ID: 0, PromptTokens: 1100, OutputTokens: 20, Content: []uint64{0, 1, 2}, ContentTokens: 512}, reqs[0])
	})
	t.Run("inference-perf sessions", func(t *testing.T) {
		reqs, _, err := Replay(filepath.Join(dir, "inference_perf.json"))
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2, 2}, []int64{reqs[0].Session, reqs[1].Session, reqs[2].Session})
	})
	t.Run("errors", func(t *testing.T) {
		_, _, err := ReplayWith(filepath.Join(dir, "mooncake.jsonl"), ReplayOptions{Format: "kimi"})
		require.ErrorContains(t, err, `unknown replay format "kimi"; want one of auto, csv, parquet, azure, mooncake, vllm-bench, inference-perf, vllm-runs`)
		_, _, err = ReplayWith(filepath.Join(dir, "mooncake.jsonl"), ReplayOptions{Format: FormatCSV})
		require.ErrorContains(t, err, `:1: bare " in non-quoted-field`)
		_, _, err = ReplayWith(filepath.Join(dir, "mooncake.jsonl"), ReplayOptions{Format: "azure"})
		require.ErrorContains(t, err, "missing column TIMESTAMP")
		_, _, err = ReplayWith(dir, ReplayOptions{Format: "azure"})
		require.Error(t, err)
	})
}

// The replay report's JSON: CSV and Parquet keep theirs (no format, skips
// by first_row), imported traces name the format and the first line.
func TestReplayReportJSON(t *testing.T) {
	pq := ReplayReport{Rows: 3, Kept: 1, Source: "r.parquet", Skipped: []SkipCount{{Reason: "no_arrival_time", Count: 2, FirstRow: 0}}}
	b, err := json.Marshal(pq)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows":3,"kept":1,"skipped":[{"reason":"no_arrival_time","count":2,"first_row":0}],"source":"r.parquet"}`, string(b))
	require.Equal(t, `{"rows":3,"kept":1,"skipped":[{"reason":"no_arrival_time","count":2,"first_row":0}],"source":"r.parquet"}`, string(b))
	imp := ReplayReport{Rows: 3, Kept: 1, Source: "t.csv", Format: "azure", Skipped: []SkipCount{{Reason: "bad_time", Count: 2, FirstLine: 7}}}
	b, err = json.Marshal(imp)
	require.NoError(t, err)
	require.Equal(t, `{"rows":3,"kept":1,"skipped":[{"reason":"bad_time","count":2,"first_line":7}],"source":"t.csv","format":"azure"}`, string(b))
	require.Equal(t, "t.csv: kept 1 of 3 rows; skipped 2 bad_time (first line 7)", imp.String())
}
