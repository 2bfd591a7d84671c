package otlpingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/otlpspan"
	"github.com/blis-sim/blis/internal/testsupport/parquettest"
)

type tableRow = parquettest.Row

// readTable reads a Parquet table back with its blis metadata.
func readTable(t *testing.T, path string) (map[string]string, []tableRow) {
	t.Helper()
	return parquettest.Read(t, path, "blis.table", "blis.schema_version")
}

func fixturePaths(set fxSet) []string {
	var paths []string
	for _, f := range set.files {
		paths = append(paths, filepath.Join(fixtureDir, f.name))
	}
	return paths
}

type ingested struct {
	m      *Manifest
	tables map[string][]tableRow
}

func ingestFixture(t *testing.T, set fxSet, opt Options) ingested {
	t.Helper()
	opt.OutDir = t.TempDir()
	m, err := Ingest(FileSources(fixturePaths(set)), opt)
	require.NoError(t, err)
	out := ingested{m: m, tables: map[string][]tableRow{}}
	for _, name := range TableNames {
		md, rows := readTable(t, filepath.Join(opt.OutDir, name+".parquet"))
		require.Equal(t, map[string]string{"blis.table": name, "blis.schema_version": fmt.Sprint(SchemaVersion)}, md, "Parquet key-value metadata")
		out.tables[name] = rows
	}
	return out
}

// valueOf is the table value an attribute value must become.
func valueOf(v Value) any {
	switch v.Type {
	case ValString:
		return v.Str
	case ValInt:
		return v.Int
	case ValDouble:
		return v.Double
	case ValBool:
		return v.Bool
	}
	return fmt.Sprintf("unexpected %s", v.Type)
}

// lostRecords are the records the fixture's issues say could not be read.
func lostRecords(set fxSet) map[string]bool {
	lost := map[string]bool{}
	for _, w := range set.issues {
		if w.kind == IssueMalformedRecord || w.kind == IssueCorruptFraming {
			lost[fmt.Sprintf("%s:%d", w.file, w.record)] = true
		}
	}
	return lost
}

// survivingSpans lists, in input order, the spans the tables must hold:
// neither in a lost record nor a repeat of a span already seen.
type located struct {
	file   string
	record int64
	sp     Span
}

func survivingSpans(set fxSet) []located {
	lost := lostRecords(set)
	seen := map[string]bool{}
	var out []located
	for _, f := range set.files {
		for i, l := range f.lines {
			rec := int64(i + 1)
			if lost[fmt.Sprintf("%s:%d", f.name, rec)] {
				continue
			}
			for _, sp := range l.spans {
				id := sp.TraceID.String() + sp.SpanID.String()
				if strings.HasPrefix(sp.Name, StepSpanPrefix) {
					id += "/" + sp.Instance // step spans of different engines are different spans
				}
				if seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, located{f.name, rec, sp})
			}
		}
	}
	return out
}

// findRow finds the one row of table at file, record and event index.
// spanID is empty for KV events, which have no span.
func findRow(t *testing.T, rows []tableRow, file string, rec int64, spanID string, idx int) tableRow {
	t.Helper()
	var found []tableRow
	for _, r := range rows {
		if filepath.Base(r["file"].(string)) == file && r["record"] == rec && r["event_index"] == int32(idx) &&
			(spanID == "" || r["span_id"] == spanID) {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "rows at %s:%d span %q event %d", file, rec, spanID, idx)
	return found[0]
}

// checkAttrColumns asserts that every attribute of kvs known to spec sits
// in its column, and that a value of the wrong type left the column null.
// It returns false when a locating attribute is missing (no row expected).
func expectRow(spec []AttrSpec, kvs []KeyValue) bool {
	for _, s := range spec {
		if !s.Locates {
			continue
		}
		v, ok := otlpspan.Lookup(kvs, s.Key)
		if !ok || v.Type != s.Type {
			return false
		}
	}
	return true
}

func checkAttrColumns(t *testing.T, row tableRow, spec []AttrSpec, kvs []KeyValue, where string) {
	t.Helper()
	for _, s := range spec {
		col := ColumnName(s.Key)
		got, has := row[col]
		require.True(t, has, "%s: no column %s for attribute %s", where, col, s.Key)
		v, ok := otlpspan.Lookup(kvs, s.Key)
		switch {
		case ok && v.Type == s.Type:
			assert.Equal(t, valueOf(v), got, "%s: attribute %s → column %s", where, s.Key, col)
		default:
			assert.Nil(t, got, "%s: absent or mistyped attribute %s must leave column %s null", where, s.Key, col)
		}
	}
}

func checkEventTables(t *testing.T, set fxSet, got ingested) {
	wantJourney, wantSteps, wantSnaps := 0, 0, 0
	for _, l := range survivingSpans(set) {
		sp := l.sp
		where := func(i int) string { return fmt.Sprintf("%s:%d span %s event %d", l.file, l.record, sp.Name, i) }
		switch {
		case sp.Name == SpanRequest || sp.Name == SpanCore:
			specs := APIEvents
			if sp.Name == SpanCore {
				specs = JourneyEvents
			}
			reqID, _ := sp.Attr("gen_ai.request.id")
			for i, ev := range sp.Events {
				es := eventSpec(specs, ev.Name)
				if es == nil || !expectRow(es.Attrs, ev.Attrs) {
					continue
				}
				wantJourney++
				row := findRow(t, got.tables[TableJourneyEvents], l.file, l.record, sp.SpanID.String(), i)
				assert.Equal(t, sp.TraceID.String(), row["trace_id"], where(i))
				assert.Equal(t, sp.SpanID.String(), row["span_id"], where(i))
				assert.Equal(t, sp.Instance, row["instance"], where(i))
				assert.Equal(t, sp.Name, row["span_name"], where(i))
				assert.Equal(t, reqID.Str, row["request_id"], where(i))
				assert.Equal(t, ev.Name, row["event"], where(i))
				assert.Equal(t, int64(ev.TimeUnixNano), row["time_unix_nano"], where(i))
				checkAttrColumns(t, row, es.Attrs, ev.Attrs, where(i))
			}
		case strings.HasPrefix(sp.Name, StepSpanPrefix):
			rich := map[int64]bool{}
			for _, ev := range sp.Events {
				if id, ok := ev.Attr("step.id"); ok && ev.Name == "step.REQUEST_SNAPSHOT" && expectRow(RequestSnapshotAttrs, ev.Attrs) {
					rich[id.Int] = true
				}
			}
			for i, ev := range sp.Events {
				table, spec := TableSteps, BatchSummaryAttrs
				if ev.Name == "step.REQUEST_SNAPSHOT" {
					table, spec = TableRequestSnapshots, RequestSnapshotAttrs
				}
				if !expectRow(spec, ev.Attrs) {
					continue
				}
				row := findRow(t, got.tables[table], l.file, l.record, sp.SpanID.String(), i)
				if table == TableSteps {
					wantSteps++
					id, _ := ev.Attr("step.id")
					assert.Equal(t, rich[id.Int], row["has_rich_snapshots"], where(i))
				} else {
					wantSnaps++
				}
				assert.Equal(t, sp.TraceID.String(), row["trace_id"], where(i))
				assert.Equal(t, sp.SpanID.String(), row["span_id"], where(i))
				assert.Equal(t, sp.Instance, row["instance"], where(i))
				assert.Equal(t, int64(ev.TimeUnixNano), row["time_unix_nano"], where(i))
				assert.Equal(t, int64(sp.DroppedEventsCount), row["dropped_events_count"], where(i))
				checkAttrColumns(t, row, StepSpanAttrs, sp.Attrs, where(i))
				checkAttrColumns(t, row, spec, ev.Attrs, where(i))
			}
		}
	}
	assert.Len(t, got.tables[TableJourneyEvents], wantJourney, "journey_events rows")
	assert.Len(t, got.tables[TableSteps], wantSteps, "steps rows")
	assert.Len(t, got.tables[TableRequestSnapshots], wantSnaps, "request_snapshots rows")
}

var apiTimeCols = map[string]string{"api.ARRIVED": "arrived", "api.HANDOFF_TO_CORE": "handoff_to_core",
	"api.FIRST_RESPONSE_FROM_CORE": "first_response", "api.DEPARTED": "departed", "api.ABORTED": "aborted"}
var coreTimeCols = map[string]string{"journey.QUEUED": "queued", "journey.SCHEDULED": "first_scheduled",
	"journey.FIRST_TOKEN": "first_token", "journey.FINISHED": "finished"}

func checkRequests(t *testing.T, set fxSet, got ingested) {
	type pair struct{ api, core *Span }
	byKey := map[string]*pair{}
	var order []string
	for _, l := range survivingSpans(set) {
		sp := l.sp
		var key string
		switch sp.Name {
		case SpanRequest:
			key = sp.TraceID.String() + sp.SpanID.String()
		case SpanCore:
			key = sp.TraceID.String() + sp.ParentSpanID.String()
		default:
			continue
		}
		if byKey[key] == nil {
			byKey[key] = &pair{}
			order = append(order, key)
		}
		if sp.Name == SpanRequest {
			byKey[key].api = &sp
		} else {
			byKey[key].core = &sp
		}
	}
	rows := got.tables[TableRequests]
	require.Len(t, rows, len(order), "one requests row per API/engine pair")
	for _, key := range order {
		p := byKey[key]
		var row tableRow
		for _, r := range rows {
			if (p.api != nil && r["api_span_id"] == p.api.SpanID.String()) || (p.api == nil && r["core_span_id"] == p.core.SpanID.String()) {
				row = r
			}
		}
		require.NotNil(t, row, "request %s", key)
		attr := func(sp *Span, k string, typ ValueType) any {
			if sp == nil {
				return nil
			}
			if v, ok := sp.Attr(k); ok && v.Type == typ {
				return valueOf(v)
			}
			return nil
		}
		instance := "" // the engine span's, else the API span's
		for _, sp := range []*Span{p.core, p.api} {
			if sp != nil && instance == "" {
				instance = sp.Instance
			}
		}
		assert.Equal(t, instance, row["instance"], key)
		assert.Equal(t, attr(p.api, "gen_ai.request.id", ValString), row["api_request_id"])
		assert.Equal(t, attr(p.core, "gen_ai.request.id", ValString), row["engine_request_id"])
		assert.Equal(t, attr(p.api, "gen_ai.response.model", ValString), row["model"])
		assert.Equal(t, attr(p.api, "http.route", ValString), row["route"])
		assert.Equal(t, attr(p.api, "gen_ai.usage.prompt_tokens", ValInt), row["prompt_tokens"])
		assert.Equal(t, attr(p.api, "gen_ai.request.max_tokens", ValInt), row["max_tokens"])
		assert.Equal(t, attr(p.api, "gen_ai.request.n", ValInt), row["n"])
		assert.Equal(t, attr(p.api, "gen_ai.request.temperature", ValDouble), row["temperature"])
		assert.Equal(t, attr(p.api, "gen_ai.request.top_p", ValDouble), row["top_p"])
		// Every lifecycle column holds its event's first occurrence, or null.
		checkTimes := func(sp *Span, cols map[string]string, monoKey string) {
			names := make([]string, 0, len(cols))
			for n := range cols {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, name := range names {
				prefix := cols[name]
				var first *Event
				if sp != nil {
					for i := range sp.Events {
						if sp.Events[i].Name == name {
							first = &sp.Events[i]
							break
						}
					}
				}
				if first == nil {
					assert.Nil(t, row[prefix+"_wall_ns"], "%s %s", key, prefix)
					assert.Nil(t, row[prefix+"_mono_s"], "%s %s", key, prefix)
					continue
				}
				assert.Equal(t, int64(first.TimeUnixNano), row[prefix+"_wall_ns"], "%s %s", key, prefix)
				mono, _ := first.Attr(monoKey)
				assert.Equal(t, mono.Double, row[prefix+"_mono_s"], "%s %s", key, prefix)
				if monoKey == "ts.monotonic" {
					ns, _ := first.Attr("ts.monotonic_ns")
					assert.Equal(t, ns.Int, row[prefix+"_mono_ns"], "%s %s", key, prefix)
				}
			}
		}
		checkTimes(p.api, apiTimeCols, "event.ts.monotonic")
		checkTimes(p.core, coreTimeCols, "ts.monotonic")
		if p.core != nil {
			var fin *Event
			preempted := int64(0)
			for i := range p.core.Events {
				switch p.core.Events[i].Name {
				case "journey.FINISHED":
					fin = &p.core.Events[i]
				case "journey.PREEMPTED":
					preempted++
				}
			}
			require.NotNil(t, fin, "fixtures finish every engine span")
			done, _ := fin.Attr("decode.done_tokens")
			np, _ := fin.Attr("num_preemptions")
			st, _ := fin.Attr("finish.status")
			assert.Equal(t, done.Int, row["output_tokens"], key)
			assert.Equal(t, np.Int, row["preemptions"], key)
			assert.Equal(t, preempted, np.Int, "fixture consistency: num_preemptions counts the PREEMPTED events")
			assert.Equal(t, st.Str, row["finish_status"], key)
		}
	}
}

// kvFieldColumn is where a KV event field lands.
func kvFieldColumn(field string) string {
	if field == "blocks_evicted" {
		return "block_count"
	}
	return field
}

func checkKVEvents(t *testing.T, set fxSet, got ingested) {
	lost := lostRecords(set)
	want := 0
	for _, f := range set.files {
		for li, l := range f.lines {
			rec := int64(li + 1)
			if l.kv == nil || lost[fmt.Sprintf("%s:%d", f.name, rec)] {
				continue
			}
			for i, e := range l.kv[1].([]any) {
				evt := e.([]any)
				spec := kvSpec(evt[0].(string))
				if spec == nil {
					continue
				}
				want++
				row := findRow(t, got.tables[TableKVEvents], f.name, rec, "", i)
				where := fmt.Sprintf("%s:%d KV event %d", f.name, rec, i)
				assert.Equal(t, l.kv[0], row["batch_ts"], where)
				if len(l.kv) > 2 {
					if r, ok := l.kv[2].(int); ok {
						assert.Equal(t, int64(r), row["dp_rank"], where)
					} else {
						assert.Nil(t, row["dp_rank"], where)
					}
				} else {
					assert.Nil(t, row["dp_rank"], where)
				}
				assert.Equal(t, spec.Type, row["type"], where)
				if spec.Raw {
					raw, _ := json.Marshal(evt)
					assert.Equal(t, string(raw), row["raw"], where)
					continue
				}
				assert.Nil(t, row["raw"], where)
				for fi, fs := range spec.Fields {
					col := kvFieldColumn(fs.Key)
					var v any
					if fi+1 < len(evt) {
						v = evt[fi+1]
					}
					switch x := v.(type) {
					case int:
						if fs.Type == ValInt {
							assert.Equal(t, int64(x), row[col], "%s field %s", where, fs.Key)
						} else {
							assert.Nil(t, row[col], "%s field %s", where, fs.Key)
						}
					case string:
						if fs.Type == ValString {
							assert.Equal(t, x, row[col], "%s field %s", where, fs.Key)
						} else {
							assert.Nil(t, row[col], "%s field %s", where, fs.Key)
						}
					case bool:
						assert.Equal(t, x, row[col], "%s field %s", where, fs.Key)
					case []any:
						raw, _ := json.Marshal(x)
						assert.Equal(t, string(raw), row[col], "%s field %s", where, fs.Key)
					case nil:
						assert.Nil(t, row[col], "%s field %s", where, fs.Key)
					default:
						t.Fatalf("%s: fixture value %T not handled", where, v)
					}
				}
			}
		}
	}
	assert.Len(t, got.tables[TableKVEvents], want, "kv_events rows")
}

func TestIngestFixtures(t *testing.T) {
	for _, set := range fixtureSets() {
		t.Run(set.name, func(t *testing.T) {
			got := ingestFixture(t, set, Options{})
			checkEventTables(t, set, got)
			checkRequests(t, set, got)
			checkKVEvents(t, set, got)

			var issues []wantIssue
			for _, i := range got.m.Issues.Details {
				issues = append(issues, wantIssue{i.Kind, filepath.Base(i.File), i.Record})
			}
			assert.Equal(t, set.issues, issues, "issues, in input order")
			assert.Equal(t, int64(len(set.issues)), got.m.Issues.Total)
			sum := int64(0)
			for _, c := range got.m.Issues.ByKind {
				sum += c.Count
			}
			assert.Equal(t, got.m.Issues.Total, sum, "by-kind counts add up")

			require.Len(t, got.m.Inputs, len(set.files))
			for i, in := range got.m.Inputs {
				assert.Equal(t, set.files[i].name, filepath.Base(in.Path))
				assert.Len(t, in.SHA256, 64)
			}
			for i, tbl := range got.m.Tables {
				assert.Equal(t, TableNames[i], tbl.Name)
				assert.Equal(t, int64(len(got.tables[tbl.Name])), tbl.Rows, "manifest row count of %s", tbl.Name)
			}

			// Strict mode: a clean fixture passes, any issue stops the run at
			// the first one and leaves no tables behind.
			dir := t.TempDir()
			_, err := Ingest(FileSources(fixturePaths(set)), Options{OutDir: dir, Strict: true})
			if len(set.issues) == 0 {
				require.NoError(t, err)
				return
			}
			var se *StrictError
			require.True(t, errors.As(err, &se), "strict run must fail with a StrictError, got %v", err)
			assert.Equal(t, set.issues[0].kind, se.Issue.Kind)
			assert.Equal(t, set.issues[0].record, se.Issue.Record)
			left, _ := os.ReadDir(dir)
			assert.Empty(t, left, "a failed strict run writes nothing")
		})
	}
}

// The same content in proto, gzip and zstd files gives the same rows as
// plain JSON lines, apart from the file column.
func TestIngestFormatsGiveSameRows(t *testing.T) {
	sets := map[string]fxSet{}
	for _, s := range fixtureSets() {
		sets[s.name] = s
	}
	strip := func(rows []tableRow) []tableRow {
		for _, r := range rows {
			for _, c := range []string{"file", "api_file", "core_file"} {
				if _, ok := r[c]; ok {
					r[c] = "-"
				}
			}
		}
		return rows
	}
	for _, tc := range []struct {
		ref      string
		variants []string
	}{
		{"chat_and_completions", []string{"proto", "gzip", "zstd"}},
		{"instances", []string{"instances_proto"}},
	} {
		want := ingestFixture(t, sets[tc.ref], Options{})
		for _, name := range tc.variants {
			got := ingestFixture(t, sets[name], Options{})
			for _, tbl := range TableNames {
				assert.Equal(t, strip(want.tables[tbl]), strip(got.tables[tbl]), "%s: table %s", name, tbl)
			}
		}
	}
}

// Two engines' spans in one file: each engine's steps are all there, apart
// from the other's, though both count steps from 1 and even share step span
// ids; only the span repeated within one engine is a duplicate. A trace
// without instance ids has an empty instance column everywhere.
func TestIngestInstancesKeepStepsApart(t *testing.T) {
	sets := map[string]fxSet{}
	for _, s := range fixtureSets() {
		sets[s.name] = s
	}
	for _, tc := range []struct {
		set       string
		steps     map[string][]int64 // step ids per instance, in table order
		snapshots map[string][]int64
		requests  map[string]int
		journey   map[string]int
	}{
		{"instances", map[string][]int64{"instance_0": {1, 2, 3}, "instance_1": {1, 2, 3}},
			map[string][]int64{"instance_0": {1}, "instance_1": {2}},
			map[string]int{"instance_0": 1, "instance_1": 1},
			map[string]int{"instance_0": 6, "instance_1": 4, "": 2}},
		{"instances_proto", map[string][]int64{"instance_0": {1, 2, 3}, "instance_1": {1, 2, 3}},
			map[string][]int64{"instance_0": {1}, "instance_1": {2}},
			map[string]int{"instance_0": 1, "instance_1": 1},
			map[string]int{"instance_0": 6, "instance_1": 4, "": 2}},
		{"chat_and_completions", map[string][]int64{"": {1, 2, 4}}, map[string][]int64{"": {2, 2, 2}},
			map[string]int{"": 3}, map[string]int{"": 22}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			got := ingestFixture(t, sets[tc.set], Options{})
			ids := func(table string) map[string][]int64 {
				out := map[string][]int64{}
				for _, r := range got.tables[table] {
					in := r["instance"].(string)
					out[in] = append(out[in], r["step_id"].(int64))
				}
				return out
			}
			count := func(table string) map[string]int {
				out := map[string]int{}
				for _, r := range got.tables[table] {
					out[r["instance"].(string)]++
				}
				return out
			}
			assert.Equal(t, tc.steps, ids(TableSteps), "steps per instance")
			assert.Equal(t, tc.snapshots, ids(TableRequestSnapshots), "snapshots per instance")
			assert.Equal(t, tc.requests, count(TableRequests), "requests per instance")
			assert.Equal(t, tc.journey, count(TableJourneyEvents), "journey events per instance")
			dups := int64(0)
			for _, c := range got.m.Issues.ByKind {
				if c.Kind == IssueDuplicateSpan {
					dups = c.Count
				}
			}
			assert.Equal(t, int64(len(sets[tc.set].issues)), dups, "duplicate spans: only the repeat within one instance")
		})
	}
}

func TestIngestDeterministicAcrossWorkers(t *testing.T) {
	var paths []string
	for _, s := range fixtureSets() {
		paths = append(paths, fixturePaths(s)...)
	}
	run := func(workers, chunk int) map[string][]byte {
		dir := t.TempDir()
		_, err := Ingest(FileSources(paths), Options{OutDir: dir, Workers: workers, ChunkBytes: chunk})
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, n := range append(append([]string{}, TableNames...), "manifest") {
			name := n + ".parquet"
			if n == "manifest" {
				name = "manifest.json"
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			out[name] = b
		}
		return out
	}
	a := run(1, 0)
	b := run(4, 1024) // many small chunks decoded out of order
	for name := range a {
		assert.True(t, string(a[name]) == string(b[name]), "%s differs between 1 and 4 workers", name)
	}
}

// The fixtures exercise every span, event, attribute and KV event type the
// schema defines, and every issue kind.
func TestFixturesCoverSchema(t *testing.T) {
	keys, events, kinds, kvTypes := map[string]bool{}, map[string]bool{}, map[IssueKind]bool{}, map[string]bool{}
	for _, set := range fixtureSets() {
		for _, w := range set.issues {
			kinds[w.kind] = true
		}
		for _, f := range set.files {
			for _, l := range f.lines {
				for _, sp := range l.spans {
					for _, kv := range sp.Attrs {
						keys[kv.Key] = true
					}
					for _, ev := range sp.Events {
						events[ev.Name] = true
						for _, kv := range ev.Attrs {
							keys[kv.Key] = true
						}
					}
				}
				if l.kv != nil {
					for _, e := range l.kv[1].([]any) {
						kvTypes[e.([]any)[0].(string)] = true
					}
				}
			}
		}
	}
	for _, k := range SchemaKeys() {
		assert.True(t, keys[k], "no fixture carries attribute %s", k)
	}
	for _, list := range [][]EventSpec{APIEvents, JourneyEvents, StepEvents} {
		for _, e := range list {
			assert.True(t, events[e.Name], "no fixture carries event %s", e.Name)
		}
	}
	for _, s := range KVEventTypes {
		assert.True(t, kvTypes[s.Type], "no fixture carries KV event %s", s.Type)
	}
	for _, k := range []IssueKind{IssueMalformedRecord, IssueTruncatedCompression, IssueCorruptFraming, IssueUnknownEvent,
		IssueUnknownSpan, IssueUnknownAttribute, IssueWrongType, IssueMissingAttribute, IssueMissingKey, IssueDroppedEvents,
		IssueDuplicateSpan, IssueOrphanAPISpan, IssueOrphanCoreSpan} {
		assert.True(t, kinds[k], "no fixture produces issue %s", k)
	}
}

// TestIngestEmpty: inputs with neither a span nor a KV event (an empty
// file, "{}", bytes that are no trace) are an *EmptyError naming every
// input, and nothing is written (earlier tables stay); AllowEmpty writes
// the empty tables.
func TestIngestEmpty(t *testing.T) {
	dir := t.TempDir()
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i/13) // deterministic noise
	}
	for _, c := range []struct {
		name    string
		content []byte
	}{
		{"empty file", nil},
		{"empty object", []byte("{}\n")},
		{"empty resource spans", []byte(`{"resourceSpans":[]}` + "\n")},
		{"random bytes", random},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".bin")
			require.NoError(t, os.WriteFile(in, c.content, 0o644))
			out := filepath.Join(t.TempDir(), "tables")
			require.NoError(t, os.MkdirAll(out, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(out, "manifest.json"), []byte("earlier"), 0o644))
			_, err := Ingest(FileSources([]string{in}), Options{OutDir: out})
			var ee *EmptyError
			require.ErrorAs(t, err, &ee)
			require.ErrorContains(t, err, "no spans found")
			require.ErrorContains(t, err, in)
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			require.Len(t, entries, 1, "nothing written, no temporary file left")
			require.Equal(t, "earlier", string(must(os.ReadFile(filepath.Join(out, "manifest.json")))))

			m, err := Ingest(FileSources([]string{in}), Options{OutDir: out, AllowEmpty: true})
			require.NoError(t, err)
			for _, tb := range m.Tables {
				require.Zero(t, tb.Rows, tb.Name)
			}
			require.Len(t, must(os.ReadDir(out)), len(TableNames)+1)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSimulatedFixtureIngests: the realistic fixture (256 requests written
// by blis run --otlp-trace and --kv-events) ingests without an issue,
// every request joined, in lifecycle order, with the counts of what the
// simulator traced.
func TestSimulatedFixtureIngests(t *testing.T) {
	dir := t.TempDir()
	m, err := Ingest(FileSources([]string{fixtureDir + "/simulated_run.jsonl.gz", fixtureDir + "/simulated_run.kv.jsonl.gz"}),
		Options{OutDir: dir, Strict: true})
	require.NoError(t, err)
	require.Equal(t, int64(0), m.Issues.Total)
	rows := map[string]int64{}
	for _, tb := range m.Tables {
		rows[tb.Name] = tb.Rows
	}
	assert.Equal(t, int64(256), rows[TableRequests])
	assert.Equal(t, 6*rows[TableRequests], rows[TableJourneyEvents], "ARRIVED, DEPARTED and four journey events per request without preemption")
	assert.Greater(t, rows[TableSteps], int64(300))
	assert.Greater(t, rows[TableRequestSnapshots], rows[TableSteps], "rich steps carry a snapshot per running request")
	assert.Greater(t, rows[TableKVEvents], int64(1000))

	_, reqs := parquettest.Read(t, filepath.Join(dir, TableRequests+".parquet"))
	for _, r := range reqs {
		require.NotNil(t, r["api_span_id"], "joined: %v", r["trace_id"])
		require.NotNil(t, r["core_span_id"], "joined: %v", r["trace_id"])
		times := []string{"arrived_mono_s", "queued_mono_s", "first_scheduled_mono_s", "first_token_mono_s", "finished_mono_s", "departed_mono_s"}
		for i := 1; i < len(times); i++ {
			require.LessOrEqual(t, r[times[i-1]].(float64), r[times[i]].(float64), "%s before %s for %v", times[i-1], times[i], r["api_request_id"])
		}
		require.Positive(t, r["output_tokens"].(int64))
		require.Contains(t, []any{"stopped", "length"}, r["finish_status"])
	}
	_, kv := parquettest.Read(t, filepath.Join(dir, TableKVEvents+".parquet"))
	types := map[any]int{}
	for _, r := range kv {
		types[r["type"]]++
	}
	for _, typ := range []string{"TransferInitiated", "TransferCompleted", "CacheStoreCommitted"} {
		assert.Positive(t, types[typ], "KV events of type %s", typ)
	}
}
