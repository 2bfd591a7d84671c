package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/otlpingest"
)

const traces = "../../testdata/traces"

func TestIngestCleanFixtures(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "ingest", "-q", filepath.Join(traces, "chat_and_completions.jsonl"), filepath.Join(traces, "kv_events.jsonl"), "-o", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "read 2 input file(s)")
	assert.Contains(t, out, "kv-events")
	assert.Contains(t, out, "requests.parquet                    3 rows")
	assert.Contains(t, out, "kv_events.parquet                  13 rows")
	assert.Contains(t, out, "issues: none")
	var m otlpingest.Manifest
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, otlpingest.SchemaVersion, m.SchemaVersion)
	assert.Len(t, m.Inputs, 2)
	for _, tbl := range otlpingest.TableNames {
		_, err := os.Stat(filepath.Join(dir, tbl+".parquet"))
		assert.NoError(t, err, tbl)
	}
}

func TestIngestDirectoryCountsIssues(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "ingest", "-q", traces, "-o", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "... and")
	assert.Contains(t, out, "malformed_record")
	assert.Contains(t, out, "first: ../../testdata/traces/kv_malformed.jsonl:2:")
	assert.Contains(t, out, "listed in "+filepath.Join(dir, "manifest.json"))
}

func TestIngestErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no output", []string{"ingest", filepath.Join(traces, "orphans.jsonl")}, "-o DIR is required"},
		{"no input", []string{"ingest", "-o", t.TempDir()}, "requires at least 1 arg"},
		{"missing input", []string{"ingest", "nope.jsonl", "-o", t.TempDir()}, "input nope.jsonl: "},
		{"strict", []string{"ingest", "-q", "--strict", filepath.Join(traces, "wrong_type.jsonl"), "-o", t.TempDir()},
			"../../testdata/traces/wrong_type.jsonl:1: wrong_attribute_type: span llm_request: attribute \"gen_ai.usage.prompt_tokens\" is double, want int (--strict; nothing written)"},
		{"negative workers", []string{"ingest", "--workers", "-3", filepath.Join(traces, "orphans.jsonl"), "-o", t.TempDir()}, "--workers must be in [0, 256] (0: one per core), got -3"},
		{"absurd workers", []string{"ingest", "--workers", "100000", filepath.Join(traces, "orphans.jsonl"), "-o", t.TempDir()}, "--workers must be in [0, 256]"},
		{"negative issue details", []string{"ingest", "--max-issue-details", "-1", filepath.Join(traces, "orphans.jsonl"), "-o", t.TempDir()}, "--max-issue-details must be >= 1"},
		{"zero issue details", []string{"ingest", "--max-issue-details", "0", filepath.Join(traces, "orphans.jsonl"), "-o", t.TempDir()}, "--max-issue-details must be >= 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, c.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
