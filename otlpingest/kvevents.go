package otlpingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// KV offload events are not OTLP: vLLM's KV events subscriber writes one
// JSON array per line, [ts, [event, ...], dp_rank?], and each event is an
// array whose first element is its type (docs/vllm-tracing.md).

// KVEventSpec lists one event type's positional fields after the type.
type KVEventSpec struct {
	Type   string
	Fields []AttrSpec
	// Raw types have fields this schema does not name; the event's JSON is
	// kept whole in the raw column.
	Raw bool
}

// KVEventTypes is the subscriber's event vocabulary.
var KVEventTypes = []KVEventSpec{
	{Type: tracevocab.KVTransferInitiated, Fields: []AttrSpec{req("transfer_id", ValInt), req("request_id", ValString),
		req("source_medium", ValString), req("dest_medium", ValString), req("block_count", ValInt), req("scheduler_step", ValInt)}},
	{Type: tracevocab.KVTransferCompleted, Fields: []AttrSpec{req("transfer_id", ValInt), req("request_id", ValString),
		req("source_medium", ValString), req("dest_medium", ValString), req("block_count", ValInt), req("success", ValBool),
		req("scheduler_step", ValInt)}},
	{Type: tracevocab.KVCacheStoreCommitted, Fields: []AttrSpec{req("request_id", ValString), req("medium", ValString),
		req("block_count", ValInt), req("scheduler_step", ValInt)}},
	{Type: tracevocab.KVCacheLoadCommitted, Fields: []AttrSpec{req("request_id", ValString), req("medium", ValString),
		req("block_count", ValInt), req("scheduler_step", ValInt)}},
	{Type: tracevocab.KVCacheEviction, Fields: []AttrSpec{req("medium", ValString), req("blocks_evicted", ValInt),
		req("eviction_reason", ValString), req("scheduler_step", ValInt), opt("block_hashes", ValArray)}},
	{Type: tracevocab.KVRemoteTransferInitiated, Fields: []AttrSpec{req("transfer_id", ValInt), req("request_id", ValString),
		req("connector_type", ValString), req("source_rank", ValInt), req("dest_rank", ValInt), req("block_count", ValInt)}},
	{Type: tracevocab.KVRemoteTransferCompleted, Fields: []AttrSpec{req("transfer_id", ValInt), req("request_id", ValString),
		req("connector_type", ValString), req("source_rank", ValInt), req("dest_rank", ValInt), req("block_count", ValInt),
		opt("success", ValBool)}},
	{Type: tracevocab.KVBlockStored, Raw: true},
	{Type: tracevocab.KVBlockRemoved, Raw: true},
	{Type: tracevocab.KVAllBlocksCleared, Raw: true},
}

// KVEventRow is one KV event. BlockCount holds block_count, or
// blocks_evicted for CacheEviction.
type KVEventRow struct {
	At
	BatchTS        float64 // the line's wall-clock seconds; events have no time of their own
	DPRank         Opt[int64]
	Type           string
	TransferID     Opt[int64]
	RequestID      Opt[string]
	SourceMedium   Opt[string]
	DestMedium     Opt[string]
	Medium         Opt[string]
	BlockCount     Opt[int64]
	Success        Opt[bool]
	SchedulerStep  Opt[int64]
	EvictionReason Opt[string]
	BlockHashes    Opt[string] // JSON array text
	ConnectorType  Opt[string]
	SourceRank     Opt[int64]
	DestRank       Opt[int64]
	Raw            Opt[string] // the whole event, for types with unnamed fields
}

func kvSpec(typ string) *KVEventSpec {
	for i := range KVEventTypes {
		if KVEventTypes[i].Type == typ {
			return &KVEventTypes[i]
		}
	}
	return nil
}

// jsonValue classifies one raw JSON element as an attribute value; null is
// reported as absent. Integers stay exact; arrays and objects keep their text.
func jsonValue(raw json.RawMessage) (Value, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return Value{}, false, fmt.Errorf("empty element")
	}
	switch c := raw[0]; {
	case c == 'n':
		return Value{}, false, nil
	case c == 't' || c == 'f':
		return Value{Type: ValBool, Bool: c == 't'}, true, nil
	case c == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return Value{Type: ValString, Str: s}, err == nil, err
	case c == '[':
		return Value{Type: ValArray, Str: string(raw)}, true, nil
	case c == '{':
		return Value{Type: ValKVList, Str: string(raw)}, true, nil
	default:
		txt := string(raw)
		if !strings.ContainsAny(txt, ".eE") {
			if i, err := strconv.ParseInt(txt, 10, 64); err == nil {
				return Value{Type: ValInt, Int: i}, true, nil
			}
		}
		f, err := strconv.ParseFloat(txt, 64)
		if err != nil {
			return Value{}, false, fmt.Errorf("bad number %q", txt)
		}
		return Value{Type: ValDouble, Double: f}, true, nil
	}
}

// decodeKVLine appends one subscriber line's events to rows and its
// problems to issues. A line that is not [ts, [events...]] is malformed and
// skipped whole; a bad event is counted and skipped alone.
func decodeKVLine(line []byte, w Where, rows []KVEventRow, issues []Issue) ([]KVEventRow, []Issue) {
	issue := func(k IssueKind, d string) {
		issues = append(issues, Issue{Kind: k, File: w.File, Record: w.Record, Detail: d})
	}
	var top []json.RawMessage
	if err := json.Unmarshal(line, &top); err != nil {
		issue(IssueMalformedRecord, "KV events line: "+err.Error())
		return rows, issues
	}
	if len(top) < 2 {
		issue(IssueMalformedRecord, fmt.Sprintf("KV events line has %d elements, want [ts, [events...]] and an optional dp_rank", len(top)))
		return rows, issues
	}
	ts, ok, err := jsonValue(top[0])
	if err != nil || !ok || (ts.Type != ValDouble && ts.Type != ValInt) {
		issue(IssueMalformedRecord, fmt.Sprintf("KV events line: ts is %s, want a number", bytes.TrimSpace(top[0])))
		return rows, issues
	}
	if ts.Type == ValInt {
		ts.Double = float64(ts.Int)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(top[1], &events); err != nil {
		issue(IssueMalformedRecord, "KV events line: events are not an array: "+err.Error())
		return rows, issues
	}
	var dp Opt[int64]
	if len(top) >= 3 {
		v, ok, err := jsonValue(top[2])
		switch {
		case err != nil || (ok && v.Type != ValInt):
			issue(IssueWrongType, fmt.Sprintf("KV events line: dp_rank is %s, want an int", bytes.TrimSpace(top[2])))
		case ok:
			dp = some(v.Int, true)
		}
	}
	if len(top) > 3 {
		issue(IssueUnknownAttribute, fmt.Sprintf("KV events line: %d elements after dp_rank", len(top)-3))
	}
	for i, raw := range events {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil || len(elems) == 0 {
			issue(IssueMalformedRecord, fmt.Sprintf("KV event %d is not a non-empty array", i))
			continue
		}
		var typ string
		if err := json.Unmarshal(elems[0], &typ); err != nil {
			issue(IssueMalformedRecord, fmt.Sprintf("KV event %d: type %s is not a string", i, bytes.TrimSpace(elems[0])))
			continue
		}
		spec := kvSpec(typ)
		if spec == nil {
			issue(IssueUnknownEvent, fmt.Sprintf("KV event %d: unknown type %q", i, typ))
			continue
		}
		row := KVEventRow{At: At{w, int32(i)}, BatchTS: ts.Double, DPRank: dp, Type: typ}
		if spec.Raw {
			row.Raw = some(string(bytes.TrimSpace(raw)), true)
			rows = append(rows, row)
			continue
		}
		where := fmt.Sprintf("KV event %d (%s)", i, typ)
		var missing []string
		for f, fs := range spec.Fields {
			var v Value
			present := false
			if f+1 < len(elems) {
				var err error
				v, present, err = jsonValue(elems[f+1])
				if err != nil {
					issue(IssueWrongType, fmt.Sprintf("%s: field %s: %v", where, fs.Key, err))
					continue
				}
			}
			if !present {
				if fs.Required {
					missing = append(missing, fs.Key)
				}
				continue
			}
			if v.Type != fs.Type {
				issue(IssueWrongType, fmt.Sprintf("%s: field %s is %s, want %s", where, fs.Key, v.Type, fs.Type))
				continue
			}
			row.set(fs.Key, v)
		}
		if len(missing) > 0 {
			issue(IssueMissingAttribute, fmt.Sprintf("%s: missing %s", where, strings.Join(missing, ", ")))
		}
		if extra := len(elems) - 1 - len(spec.Fields); extra > 0 {
			issue(IssueUnknownAttribute, fmt.Sprintf("%s: %d fields beyond the schema's %d", where, extra, len(spec.Fields)))
		}
		rows = append(rows, row)
	}
	return rows, issues
}

func (r *KVEventRow) set(key string, v Value) {
	switch key {
	case "transfer_id":
		r.TransferID = some(v.Int, true)
	case "request_id":
		r.RequestID = some(v.Str, true)
	case "source_medium":
		r.SourceMedium = some(v.Str, true)
	case "dest_medium":
		r.DestMedium = some(v.Str, true)
	case "medium":
		r.Medium = some(v.Str, true)
	case "block_count", "blocks_evicted":
		r.BlockCount = some(v.Int, true)
	case "success":
		r.Success = some(v.Bool, true)
	case "scheduler_step":
		r.SchedulerStep = some(v.Int, true)
	case "eviction_reason":
		r.EvictionReason = some(v.Str, true)
	case "block_hashes":
		r.BlockHashes = some(v.Str, true)
	case "connector_type":
		r.ConnectorType = some(v.Str, true)
	case "source_rank":
		r.SourceRank = some(v.Int, true)
	case "dest_rank":
		r.DestRank = some(v.Int, true)
	default:
		panic("otlpingest: KV field without a column: " + key) // the spec and this switch disagree
	}
}
