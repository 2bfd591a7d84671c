package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// importedDir holds hand-written fixtures of each imported trace format
// (the records package's tests use them too).
const importedDir = "../../sim/workload/records/testdata"

// replayJSON is the replay report as blis run prints it.
type replayJSON struct {
	Rows    int64             `json:"rows"`
	Kept    int64             `json:"kept"`
	Skipped []json.RawMessage `json:"skipped"`
	Source  string            `json:"source"`
	Format  string            `json:"format"`
}

// TestRunReplaysImportedTraces runs each imported format through blis run,
// once with the format named and once detected, single instance and
// cluster: both paths read the file the same way and report what they
// kept and skipped.
func TestRunReplaysImportedTraces(t *testing.T) {
	tests := []struct {
		file, format string
		rows, kept   int64
		skipped      string // the first skip's JSON, "" for none
	}{
		{"azure_2023.csv", "azure", 5, 4, `{"reason":"zero_output_tokens","count":1,"first_line":5}`},
		{"azure_2024.csv", "azure", 4, 4, ""},
		{"mooncake.jsonl", "mooncake", 5, 4, `{"reason":"zero_output_tokens","count":1,"first_line":4}`},
		{"vllm_bench.json", "vllm-bench", 4, 3, `{"reason":"failed_request","count":1,"first_line":2}`},
		{"inference_perf.json", "inference-perf", 4, 3, `{"reason":"failed_request","count":1,"first_line":3}`},
		{"vllm_runs.jsonl", "vllm-runs", 4, 3, `{"reason":"zero_output_tokens","count":1,"first_line":4}`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(importedDir, tt.file)
			for _, args := range [][]string{
				{"--replay-format", tt.format},
				{},
				{"--num-instances", "2"},
			} {
				out, errOut, err := runCLI(t, append([]string{"run", "-q", "--replay", path}, args...)...)
				require.NoError(t, err, "%v", args)
				var got struct {
					Replay  replayJSON `json:"replay"`
					Metrics struct {
						Requests struct {
							Completed int64 `json:"completed"`
						} `json:"requests"`
					} `json:"metrics"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &got))
				r := got.Replay
				require.Equal(t, replayJSON{Rows: tt.rows, Kept: tt.kept, Source: path, Format: tt.format, Skipped: r.Skipped}, r)
				// Skips are said on stderr too, even under -q.
				if tt.skipped == "" {
					require.Empty(t, r.Skipped)
					require.NotContains(t, errOut, "--replay")
				} else {
					require.JSONEq(t, tt.skipped, string(r.Skipped[0]))
					require.Contains(t, errOut, fmt.Sprintf("warning: --replay %s: kept %d of %d rows; skipped 1 ", path, tt.kept, tt.rows))
				}
				require.Equal(t, tt.kept, got.Metrics.Requests.Completed, "%v", args)
			}

			_, _, err := runCLI(t, "run", "-q", "--replay", path, "--strict")
			if tt.skipped == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, "--replay: "+path+":")
			}
		})
	}
}

func TestRunReplayFlagErrors(t *testing.T) {
	mooncake := filepath.Join(importedDir, "mooncake.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replay-format", "azure"}, "--replay-format and --strict apply to --replay FILE"},
		{[]string{"--strict"}, "--replay-format and --strict apply to --replay FILE"},
		{[]string{"--strict", "--num-instances", "2"}, "--replay-format and --strict apply to --replay FILE"},
		{[]string{"--replay", mooncake, "--replay-format", "kimi"}, `--replay-format: want one of auto, csv, parquet, azure, mooncake, vllm-bench, inference-perf, vllm-runs, got "kimi"`},
		{[]string{"--replay", mooncake, "--replay-format", "vllm-bench"}, "--replay: " + mooncake + ": data after the result object"},
		{[]string{"--replay", mooncake, "--strict"}, "--replay: " + mooncake + ":4: output_length: 0 must be > 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "-q"}, tc.args...)...)
			require.EqualError(t, err, tc.want)
		})
	}
}
