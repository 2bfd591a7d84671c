package workload

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// A replayed length near 2^63 overflowed prompt +
// output − 1 in the engine and panicked. Every reader refuses a length
// above sim.MaxTokens naming its file and line (CSV, imported traces) or
// row (Parquet, skipped and counted unless strict), before any arithmetic.
func TestReplayRefusesLengthsAboveMaxTokens(t *testing.T) {
	const huge = "4611686018427387904" // 2^62: prompt + output overflowed
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, text string
		strict           bool   // an imported trace skips the row unless strict; CSV always fails
		want             string // the error's file and line
	}{
		{"csv prompt", "w.csv", "arrival_us,prompt_tokens,output_tokens\n0,10,5\n1," + huge + "," + huge + "\n", false,
			"w.csv:3: prompt_tokens: 4611686018427387904 is more than the simulator takes (1125899906842624)"},
		{"csv output", "w.csv", "arrival_us,prompt_tokens,output_tokens\n0,10,9223372036854775807\n", false,
			"w.csv:2: output_tokens: 9223372036854775807 is more than the simulator takes"},
		{"azure", "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,10,5\n2023-11-16 18:15:47.6805900," + huge + ",5\n", true,
			"azure.csv:3"},
		{"mooncake", "m.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}` + "\n" +
			`{"timestamp": 5, "input_length": ` + huge + `, "output_length": 5, "hash_ids": [1]}` + "\n", true,
			"m.jsonl:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
			_, _, err := ReplayWith(path, ReplayOptions{Strict: tc.strict})
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "is more than the simulator takes")
			if tc.strict {
				// Without --strict an imported trace skips and counts it.
				reqs, rep, err := ReplayWith(path, ReplayOptions{})
				require.NoError(t, err)
				require.Len(t, reqs, 1)
				require.Equal(t, []SkipCount{{Reason: SkipTooManyTokens, Count: 1, FirstLine: rep.Skipped[0].FirstLine}}, rep.Skipped)
			}
		})
	}
	t.Run("parquet", func(t *testing.T) {
		path := filepath.Join(dir, "requests.parquet")
		writeParquet(t, path, "requests", allColumns, []pqRow{
			{arrived: f64(1), prompt: i64(10), output: i64(5)},
			{arrived: f64(2), prompt: i64(1 << 62), output: i64(1 << 62)},
			{arrived: f64(3), prompt: i64(10), output: i64(sim.MaxTokens + 1)},
			{arrived: f64(4), prompt: i64(sim.MaxTokens), output: i64(sim.MaxTokens)},
		})
		reqs, rep, err := Replay(path)
		require.NoError(t, err)
		require.Len(t, reqs, 2)
		require.Equal(t, []SkipCount{{Reason: SkipTooManyTokens, Count: 2, FirstRow: 1}}, rep.Skipped)
		_, _, err = ReplayWith(path, ReplayOptions{Strict: true})
		require.ErrorContains(t, err, path+": row 1 (0-based): prompt_tokens: 4611686018427387904 is more than the simulator takes")
	})
}

// Rows longer than the model's context are
// kept, for the run to refuse as vLLM does, and the first is named by its
// file and line (row for Parquet); with Strict it is an error there.
func TestReplayNotesRowsLongerThanTheModel(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "w.csv")
	require.NoError(t, os.WriteFile(csv, []byte("arrival_us,prompt_tokens,output_tokens\n0,1000,24\n5,1000,25\n9,2000,1\n"), 0o644))
	pq := filepath.Join(dir, "requests.parquet")
	writeParquet(t, pq, "requests", allColumns, []pqRow{
		{arrived: f64(1), prompt: i64(1000), output: i64(24)},
		{arrived: f64(2), prompt: i64(1000), output: i64(25)},
		{arrived: f64(3), prompt: i64(2000), output: i64(1)},
	})
	for _, tc := range []struct {
		path, at string
	}{
		{csv, csv + ":3: prompt_tokens 1000 + output_tokens 25 exceed max_model_len 1024"},
		{pq, pq + ": row 1 (0-based): prompt_tokens 1000 + output_tokens 25 exceed max_model_len 1024"},
	} {
		reqs, rep, err := ReplayWith(tc.path, ReplayOptions{MaxModelLen: 1024})
		require.NoError(t, err)
		require.Len(t, reqs, 3, "the rows stay, for the run to refuse")
		require.Equal(t, int64(2), rep.TooLong)
		require.Equal(t, tc.at, rep.TooLongAt)
		_, rep, err = ReplayWith(tc.path, ReplayOptions{})
		require.NoError(t, err)
		require.Zero(t, rep.TooLong, "no limit given")
		_, _, err = ReplayWith(tc.path, ReplayOptions{MaxModelLen: 1024, Strict: true})
		require.EqualError(t, err, tc.at+", which vLLM refuses")
	}
}
