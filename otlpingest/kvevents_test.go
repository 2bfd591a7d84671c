package otlpingest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeKVLineValues(t *testing.T) {
	w := Where{"kv.jsonl", 7}
	rows, issues := decodeKVLine([]byte(`[1763700000.5, [["TransferCompleted", 17, "r-1", "GPU", "CPU", 3, true, 5], ["CacheEviction", "CPU", 8, "lru", 6]], 2]`), w, nil, nil)
	require.Empty(t, issues)
	require.Len(t, rows, 2)
	assert.Equal(t, KVEventRow{At: At{w, 0}, BatchTS: 1763700000.5, DPRank: Opt[int64]{2, true}, Type: "TransferCompleted",
		TransferID: Opt[int64]{17, true}, RequestID: Opt[string]{"r-1", true}, SourceMedium: Opt[string]{"GPU", true},
		DestMedium: Opt[string]{"CPU", true}, BlockCount: Opt[int64]{3, true}, Success: Opt[bool]{true, true},
		SchedulerStep: Opt[int64]{5, true}}, rows[0])
	// block_hashes is optional and omitted as a trailing default.
	assert.Equal(t, KVEventRow{At: At{w, 1}, BatchTS: 1763700000.5, DPRank: Opt[int64]{2, true}, Type: "CacheEviction",
		Medium: Opt[string]{"CPU", true}, BlockCount: Opt[int64]{8, true}, EvictionReason: Opt[string]{"lru", true},
		SchedulerStep: Opt[int64]{6, true}}, rows[1])
}

func TestDecodeKVLineIssues(t *testing.T) {
	cases := []struct {
		line string
		rows int
		want []IssueKind
	}{
		{`[]`, 0, []IssueKind{IssueMalformedRecord}},
		{`{"ts": 1}`, 0, []IssueKind{IssueMalformedRecord}},
		{`[1, 2]`, 0, []IssueKind{IssueMalformedRecord}},
		{`[null, []]`, 0, []IssueKind{IssueMalformedRecord}},
		{`[1, [], 0, 5]`, 0, []IssueKind{IssueUnknownAttribute}},
		{`[1, [[]]]`, 0, []IssueKind{IssueMalformedRecord}},
		{`[1, [[7]]]`, 0, []IssueKind{IssueMalformedRecord}},
		{`[1, [["CacheStoreCommitted", "r", "GPU", 1.5, 3]]]`, 1, []IssueKind{IssueWrongType}},
		{`[1, [["CacheStoreCommitted", "r", "GPU", 99999999999999999999, 3]]]`, 1, []IssueKind{IssueWrongType}},
		{`[1, [["CacheStoreCommitted", "r", "GPU", 2]]]`, 1, []IssueKind{IssueMissingAttribute}},
		{`[1, [["CacheStoreCommitted", "r", "GPU", 2, null]]]`, 1, []IssueKind{IssueMissingAttribute}},
	}
	for _, c := range cases {
		rows, issues := decodeKVLine([]byte(c.line), Where{"f", 1}, nil, nil)
		assert.Len(t, rows, c.rows, c.line)
		var kinds []IssueKind
		for _, i := range issues {
			kinds = append(kinds, i.Kind)
			assert.Equal(t, Where{"f", 1}, Where{i.File, i.Record}, c.line)
		}
		assert.Equal(t, c.want, kinds, c.line)
	}
}

// Every field of every KV event type lands in a column: set must not
// panic for any field the spec names.
func TestKVSpecFieldsHaveColumns(t *testing.T) {
	for _, s := range KVEventTypes {
		var r KVEventRow
		for _, f := range s.Fields {
			assert.NotPanics(t, func() { r.set(f.Key, Value{Type: f.Type}) }, "%s.%s", s.Type, f.Key)
		}
	}
}

// FuzzDecodeKVLine: any input gives rows and issues without panicking, a
// line either yields rows or says why not, and every row is typed.
func FuzzDecodeKVLine(f *testing.F) {
	f.Add([]byte(`[1763700000.5, [["TransferCompleted", 17, "r-1", "GPU", "CPU", 3, true, 5]], 2]`))
	f.Add([]byte(`[1, [["CacheEviction", "GPU", 3, "preemption", 5, ["h1"]], ["BlockStored", [1], null]]]`))
	f.Add([]byte(`[1, [["RemoteTransferCompleted", 19, "r", "nixl", 0, 1, 2, true]]]`))
	f.Add([]byte(`[1e400, [[`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rows, issues := decodeKVLine(line, Where{"fuzz", 1}, nil, nil)
		if !json.Valid(line) && (len(rows) > 0 || len(issues) == 0) {
			t.Fatalf("invalid JSON gave %d rows and %d issues", len(rows), len(issues))
		}
		for _, r := range rows {
			if kvSpec(r.Type) == nil {
				t.Fatalf("row of unknown type %q", r.Type)
			}
			if r.Raw.OK != kvSpec(r.Type).Raw {
				t.Fatalf("raw column set wrongly for %s", r.Type)
			}
		}
		for _, i := range issues {
			if i.File != "fuzz" || i.Record != 1 || i.Detail == "" {
				t.Fatalf("issue without location or detail: %v", i)
			}
		}
		_ = fmt.Sprint(rows)
	})
}
