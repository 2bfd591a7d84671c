package records

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const countersHeader = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n"

func TestReadCounters(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		rows       []CounterRow
		skipped    []SkipCount
		strict     string // the strict read's error, "" when it succeeds
		err        string // the lenient read's error
	}{
		{name: "good", data: countersHeader + "1.0,3392.0,2.0,5,2,13.22\n2.0,0,79.5,16,0,39.7\n",
			rows: []CounterRow{{Line: 2, T: 1, PromptPerS: 3392, GenerationPerS: 2, Running: 5, Waiting: 2},
				{Line: 3, T: 2, GenerationPerS: 79.5, Running: 16}}},
		{name: "columns in any order, extra ignored", data: "waiting,running,x,gen_throughput,prompt_throughput,t\n3,4,zz,5,6,7\n",
			rows: []CounterRow{{Line: 2, T: 7, PromptPerS: 6, GenerationPerS: 5, Running: 4, Waiting: 3}}},
		{name: "skips, by reason with the first line", data: countersHeader +
			"1,10,10,1,0,0\n" + // kept
			"1,10,10,1,0,0\n" + // same tick
			"2,-1,10,1,0,0\n" + // negative
			"3,10,NaN,1,0,0\n" + // not finite
			"4,10,10,1.5,0,0\n" + // not whole
			"5,10,10\n" + // short
			"6,10,10,2,0,0\n", // kept
			rows: []CounterRow{{Line: 2, T: 1, PromptPerS: 10, GenerationPerS: 10, Running: 1}, {Line: 8, T: 6, PromptPerS: 10, GenerationPerS: 10, Running: 2}},
			skipped: []SkipCount{{Reason: SkipBadNumber, Count: 2, FirstLine: 5}, {Reason: SkipMissingField, Count: 1, FirstLine: 7},
				{Reason: SkipNegative, Count: 1, FirstLine: 4}, {Reason: SkipTickOrder, Count: 1, FirstLine: 3}},
			strict: "f:3: t: tick 1 is not after the previous row's 1"},
		{name: "missing column", data: "t,prompt_throughput,gen_throughput,running\n1,1,1,1\n",
			err: "f:1: missing column waiting", strict: "f:1: missing column waiting"},
		{name: "empty", data: "", err: "f: empty file", strict: "f: empty file"},
		{name: "header only", data: countersHeader, err: "f: no rows in the file", strict: "f: no rows in the file"},
		{name: "nothing usable", data: countersHeader + "1,x,1,1,1,0\n", err: "f: none of 1 rows is usable; skipped 1 bad_number (first line 2)",
			strict: `f:2: prompt_throughput: "x" is not a finite number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, rep, err := readCounters("f", bytes.NewReader([]byte(tc.data)), Options{})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.rows, rows)
				require.Equal(t, tc.skipped, rep.Skipped)
				checkCounterReport(t, rows, rep)
			}
			_, _, serr := readCounters("f", bytes.NewReader([]byte(tc.data)), Options{Strict: true})
			if tc.strict == "" {
				require.NoError(t, serr)
			} else {
				require.ErrorContains(t, serr, tc.strict)
			}
		})
	}
}

// The four runs' files read whole: one row per second, ticks from 1 s.
func TestReadCountersOfTheRuns(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/vllm-runs/*/*/timeseries.csv")
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, p := range files {
		rows, rep, err := ReadCounters(p, Options{Strict: true})
		require.NoError(t, err, p)
		require.Equal(t, rep.Rows, rep.Read)
		require.Greater(t, len(rows), 60, p)
		for i, r := range rows {
			require.InDelta(t, rows[0].T+float64(i), r.T, 1e-9, "%s line %d", p, r.Line)
		}
	}
	require.Equal(t, filepath.Join("a", "timeseries.csv"), CountersPath(filepath.Join("a", "requests.jsonl")))
}

// checkCounterReport checks a read's guarantees: every row counted, the
// kept ones in strictly increasing ticks with non-negative values.
func checkCounterReport(t *testing.T, rows []CounterRow, rep Report) {
	var skipped int64
	for _, k := range rep.Skipped {
		require.Positive(t, k.Count)
		skipped += k.Count
	}
	require.Equal(t, rep.Rows, rep.Read+skipped)
	require.Equal(t, int64(len(rows)), rep.Read)
	for i, r := range rows {
		require.True(t, r.PromptPerS >= 0 && r.GenerationPerS >= 0 && r.Running >= 0 && r.Waiting >= 0)
		if i > 0 {
			require.Greater(t, r.T, rows[i-1].T)
			require.Greater(t, r.Line, rows[i-1].Line)
		}
	}
}

func FuzzReadCounters(f *testing.F) {
	for _, s := range []string{countersHeader + "1.0,3392.0,2.0,5,2,13.22\n2.0,0,79.5,16,0,39.7\n", countersHeader + "1,-1,1,1,1\n2,1e400,1,1,1\n", "t\n1\n"} {
		f.Add([]byte(s))
	}
	files, err := filepath.Glob("../../../testdata/vllm-runs/*/*/timeseries.csv")
	require.NoError(f, err)
	for _, p := range files {
		f.Add(mustRead(f, p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, rep, err := readCounters("f", bytes.NewReader(data), Options{})
		srows, _, serr := readCounters("f", bytes.NewReader(data), Options{Strict: true})
		if strictAgrees(t, rows, rep, err, srows, serr) {
			checkCounterReport(t, rows, rep)
		}
	})
}
