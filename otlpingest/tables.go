package otlpingest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/schema"
)

// SchemaVersion versions the tables' columns. Bump it when a column is
// added, removed, renamed or changes meaning; readers check it.
//
// 2: the instance column (resource attribute service.instance.id) in
// requests, journey_events, steps and request_snapshots.
const SchemaVersion = 2

// Table names, which are also the Parquet file names without ".parquet".
const (
	TableRequests         = "requests"
	TableJourneyEvents    = "journey_events"
	TableSteps            = "steps"
	TableRequestSnapshots = "request_snapshots"
	TableKVEvents         = "kv_events"
)

// TableNames lists the tables in the order they are written and reported.
var TableNames = []string{TableRequests, TableJourneyEvents, TableSteps, TableRequestSnapshots, TableKVEvents}

// Column describes one table column. Attribute columns are named after the
// attribute key with '.' replaced by '_', so that a reader of the schema
// document finds them without a mapping table.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
	Doc      string `json:"doc"`
}

// ColumnName is the column an attribute key lands in.
func ColumnName(attrKey string) string {
	b := []byte(attrKey)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// colKind is the type of a column's values.
type colKind uint8

const (
	kindString colKind = iota
	kindInt64
	kindInt32
	kindFloat64
	kindBool
)

// colDef binds a column to the row field it is filled from.
type colDef[R any] struct {
	Column
	kind colKind
	bind func(c *colBuf) func(r *R)
}

// colBuf holds the values of one column for the rows of one row group:
// those of its kind, and for a nullable column a definition level per row
// (1: a value, 0: null), nulls taking no value.
type colBuf struct {
	def  []int16
	i64  []int64
	i32  []int32
	f64  []float64
	b    []bool
	str  []byte // the strings' bytes, one after another
	ends []int  // where each string ends in str
}

// has records whether a nullable column's row has a value.
func (c *colBuf) has(ok bool) bool {
	if ok {
		c.def = append(c.def, 1)
	} else {
		c.def = append(c.def, 0)
	}
	return ok
}

func (c *colBuf) addString(s string) {
	c.str = append(c.str, s...)
	c.ends = append(c.ends, len(c.str))
}

// reset empties c for the next row group, keeping its memory.
func (c *colBuf) reset() {
	c.def, c.i64, c.i32, c.f64, c.b, c.str, c.ends = c.def[:0], c.i64[:0], c.i32[:0], c.f64[:0], c.b[:0], c.str[:0], c.ends[:0]
}

func cStr[R any](name, doc string, get func(*R) string) colDef[R] {
	return colDef[R]{Column{name, "string", false, doc}, kindString, func(c *colBuf) func(*R) {
		return func(r *R) { c.addString(get(r)) }
	}}
}

func cOptStr[R any](name, doc string, get func(*R) Opt[string]) colDef[R] {
	return colDef[R]{Column{name, "string", true, doc}, kindString, func(c *colBuf) func(*R) {
		return func(r *R) {
			if v := get(r); c.has(v.OK) {
				c.addString(v.V)
			}
		}
	}}
}

func cI64[R any](name, doc string, get func(*R) int64) colDef[R] {
	return colDef[R]{Column{name, "int64", false, doc}, kindInt64, func(c *colBuf) func(*R) {
		return func(r *R) { c.i64 = append(c.i64, get(r)) }
	}}
}

func cOptI64[R any](name, doc string, get func(*R) Opt[int64]) colDef[R] {
	return colDef[R]{Column{name, "int64", true, doc}, kindInt64, func(c *colBuf) func(*R) {
		return func(r *R) {
			if v := get(r); c.has(v.OK) {
				c.i64 = append(c.i64, v.V)
			}
		}
	}}
}

func cI32[R any](name, doc string, get func(*R) int32) colDef[R] {
	return colDef[R]{Column{name, "int32", false, doc}, kindInt32, func(c *colBuf) func(*R) {
		return func(r *R) { c.i32 = append(c.i32, get(r)) }
	}}
}

func cF64[R any](name, doc string, get func(*R) float64) colDef[R] {
	return colDef[R]{Column{name, "double", false, doc}, kindFloat64, func(c *colBuf) func(*R) {
		return func(r *R) { c.f64 = append(c.f64, get(r)) }
	}}
}

func cOptF64[R any](name, doc string, get func(*R) Opt[float64]) colDef[R] {
	return colDef[R]{Column{name, "double", true, doc}, kindFloat64, func(c *colBuf) func(*R) {
		return func(r *R) {
			if v := get(r); c.has(v.OK) {
				c.f64 = append(c.f64, v.V)
			}
		}
	}}
}

func cBool[R any](name, doc string, get func(*R) bool) colDef[R] {
	return colDef[R]{Column{name, "bool", false, doc}, kindBool, func(c *colBuf) func(*R) {
		return func(r *R) { c.b = append(c.b, get(r)) }
	}}
}

func cOptBool[R any](name, doc string, get func(*R) Opt[bool]) colDef[R] {
	return colDef[R]{Column{name, "bool", true, doc}, kindBool, func(c *colBuf) func(*R) {
		return func(r *R) {
			if v := get(r); c.has(v.OK) {
				c.b = append(c.b, v.V)
			}
		}
	}}
}

// wallNs stores OTLP's uint64 nanoseconds as int64, which is exact until 2262.
func wallNs(v uint64) int64 { return int64(v) }

func atCols[R any](at func(*R) *At) []colDef[R] {
	return []colDef[R]{
		cStr("file", "input file the row came from", func(r *R) string { return at(r).File }),
		cI64("record", "1-based line (JSON lines) or message number (proto) in that file", func(r *R) int64 { return at(r).Record }),
		cI32("event_index", "0-based position of the event in its span (or KV events line)", func(r *R) int32 { return at(r).EventIndex }),
	}
}

func stepSpanCols[R any](info func(*R) *StepSpanInfo) []colDef[R] {
	return []colDef[R]{
		cStr("trace_id", "hex trace id of the step span", func(r *R) string { return info(r).TraceID }),
		cStr("span_id", "hex span id of the step span", func(r *R) string { return info(r).SpanID }),
		cStr("instance", instanceDoc("step span")+"; step ids and span sequences count per instance", func(r *R) string { return info(r).Instance }),
		cOptI64("scheduler_span_sequence", "step span attribute scheduler.span_sequence", func(r *R) Opt[int64] { return info(r).SpanSequence }),
		cOptI64("scheduler_step_range_start", "step span attribute scheduler.step_range_start", func(r *R) Opt[int64] { return info(r).StepRangeStart }),
		cOptI64("scheduler_step_range_end", "step span attribute scheduler.step_range_end", func(r *R) Opt[int64] { return info(r).StepRangeEnd }),
		cOptI64("scheduler_closure_interval", "step span attribute scheduler.closure_interval", func(r *R) Opt[int64] { return info(r).ClosureInterval }),
		cI64("dropped_events_count", "events the SDK dropped from this step span (> 0: the span is incomplete)", func(r *R) int64 { return int64(info(r).DroppedEventsCount) }),
	}
}

// instanceDoc documents an instance column.
func instanceDoc(of string) string {
	return "resource attribute service.instance.id of the " + of + ", naming the engine of a cluster (empty when absent)"
}

func concat[R any](parts ...[]colDef[R]) []colDef[R] {
	var out []colDef[R]
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func eventTimeCols(prefix string, withNs bool, get func(*RequestRow) *EventTime) []colDef[RequestRow] {
	cols := []colDef[RequestRow]{
		cOptF64(prefix+"_mono_s", prefix+": monotonic seconds (event.ts.monotonic or ts.monotonic)", func(r *RequestRow) Opt[float64] { return get(r).MonoS }),
	}
	if withNs {
		cols = append(cols, cOptI64(prefix+"_mono_ns", prefix+": monotonic nanoseconds (ts.monotonic_ns)", func(r *RequestRow) Opt[int64] { return get(r).MonoNs }))
	}
	return append(cols, cOptI64(prefix+"_wall_ns", prefix+": wall-clock Unix nanoseconds (the event's timeUnixNano)", func(r *RequestRow) Opt[int64] {
		t := get(r).WallNs
		return Opt[int64]{wallNs(t.V), t.OK}
	}))
}

var requestCols = concat(
	[]colDef[RequestRow]{
		cStr("trace_id", "hex trace id shared by the API and engine spans", func(r *RequestRow) string { return r.TraceID }),
		cStr("instance", instanceDoc("llm_core span, else of the llm_request span"), func(r *RequestRow) string { return r.Instance }),
		cOptStr("api_span_id", "llm_request span id (null: no API span was found)", func(r *RequestRow) Opt[string] { return r.APISpanID }),
		cOptStr("core_span_id", "llm_core span id (null: no engine span was found)", func(r *RequestRow) Opt[string] { return r.CoreSpanID }),
		cOptStr("api_file", "file of the llm_request span", func(r *RequestRow) Opt[string] { return Opt[string]{r.APIWhere.V.File, r.APIWhere.OK} }),
		cOptI64("api_record", "record of the llm_request span", func(r *RequestRow) Opt[int64] { return Opt[int64]{r.APIWhere.V.Record, r.APIWhere.OK} }),
		cOptStr("core_file", "file of the llm_core span", func(r *RequestRow) Opt[string] { return Opt[string]{r.CoreWhere.V.File, r.CoreWhere.OK} }),
		cOptI64("core_record", "record of the llm_core span", func(r *RequestRow) Opt[int64] { return Opt[int64]{r.CoreWhere.V.Record, r.CoreWhere.OK} }),
		cOptStr("api_request_id", "gen_ai.request.id of the llm_request span (the API id)", func(r *RequestRow) Opt[string] { return r.APIRequestID }),
		cOptStr("engine_request_id", "gen_ai.request.id of the llm_core span (the engine id)", func(r *RequestRow) Opt[string] { return r.EngineRequestID }),
		cOptStr("model", "gen_ai.response.model", func(r *RequestRow) Opt[string] { return r.Model }),
		cOptStr("route", "http.route", func(r *RequestRow) Opt[string] { return r.Route }),
		cOptI64("prompt_tokens", "gen_ai.usage.prompt_tokens", func(r *RequestRow) Opt[int64] { return r.PromptTokens }),
		cOptI64("max_tokens", "gen_ai.request.max_tokens", func(r *RequestRow) Opt[int64] { return r.MaxTokens }),
		cOptI64("n", "gen_ai.request.n", func(r *RequestRow) Opt[int64] { return r.N }),
		cOptF64("temperature", "gen_ai.request.temperature", func(r *RequestRow) Opt[float64] { return r.Temperature }),
		cOptF64("top_p", "gen_ai.request.top_p", func(r *RequestRow) Opt[float64] { return r.TopP }),
	},
	eventTimeCols("arrived", false, func(r *RequestRow) *EventTime { return &r.Arrived }),
	eventTimeCols("handoff_to_core", false, func(r *RequestRow) *EventTime { return &r.HandoffToCore }),
	eventTimeCols("first_response", false, func(r *RequestRow) *EventTime { return &r.FirstResponse }),
	eventTimeCols("queued", true, func(r *RequestRow) *EventTime { return &r.Queued }),
	eventTimeCols("first_scheduled", true, func(r *RequestRow) *EventTime { return &r.FirstScheduled }),
	eventTimeCols("first_token", true, func(r *RequestRow) *EventTime { return &r.FirstToken }),
	eventTimeCols("finished", true, func(r *RequestRow) *EventTime { return &r.Finished }),
	eventTimeCols("departed", false, func(r *RequestRow) *EventTime { return &r.Departed }),
	eventTimeCols("aborted", false, func(r *RequestRow) *EventTime { return &r.Aborted }),
	[]colDef[RequestRow]{
		cOptStr("abort_reason", "reason on api.ABORTED", func(r *RequestRow) Opt[string] { return r.AbortReason }),
		cOptI64("output_tokens", "decode.done_tokens on journey.FINISHED", func(r *RequestRow) Opt[int64] { return r.OutputTokens }),
		cOptI64("preemptions", "num_preemptions on journey.FINISHED, else the number of journey.PREEMPTED events", func(r *RequestRow) Opt[int64] { return r.Preemptions }),
		cOptStr("finish_status", "finish.status on journey.FINISHED", func(r *RequestRow) Opt[string] { return r.FinishStatus }),
	},
)

func jAttrStr(key string, get func(*JourneyEventRow) Opt[string]) colDef[JourneyEventRow] {
	return cOptStr(ColumnName(key), "event attribute "+key, get)
}
func jAttrI64(key string, get func(*JourneyEventRow) Opt[int64]) colDef[JourneyEventRow] {
	return cOptI64(ColumnName(key), "event attribute "+key, get)
}

var journeyCols = concat(
	atCols(func(r *JourneyEventRow) *At { return &r.At }),
	[]colDef[JourneyEventRow]{
		cStr("trace_id", "hex trace id", func(r *JourneyEventRow) string { return r.TraceID }),
		cStr("span_id", "hex span id of the llm_request or llm_core span", func(r *JourneyEventRow) string { return r.SpanID }),
		cStr("instance", instanceDoc("span"), func(r *JourneyEventRow) string { return r.Instance }),
		cStr("span_name", "llm_request (api.* events) or llm_core (journey.* events)", func(r *JourneyEventRow) string { return r.SpanName }),
		cStr("request_id", "the span's gen_ai.request.id: API id on api.* events, engine id on journey.* events", func(r *JourneyEventRow) string { return r.RequestID }),
		cStr("event", "event name", func(r *JourneyEventRow) string { return r.Event }),
		cI64("time_unix_nano", "event wall-clock time, Unix nanoseconds", func(r *JourneyEventRow) int64 { return wallNs(r.TimeUnixNano) }),
		cOptF64("event_ts_monotonic", "event attribute event.ts.monotonic (api.* events)", func(r *JourneyEventRow) Opt[float64] { return r.EventTSMono }),
		jAttrStr("event.type", func(r *JourneyEventRow) Opt[string] { return r.EventType }),
		cOptF64("ts_monotonic", "event attribute ts.monotonic (journey.* events)", func(r *JourneyEventRow) Opt[float64] { return r.TSMonotonic }),
		jAttrI64("ts.monotonic_ns", func(r *JourneyEventRow) Opt[int64] { return r.TSMonotonicNs }),
		jAttrI64("scheduler.step", func(r *JourneyEventRow) Opt[int64] { return r.SchedulerStep }),
		jAttrStr("phase", func(r *JourneyEventRow) Opt[string] { return r.Phase }),
		jAttrI64("prefill.done_tokens", func(r *JourneyEventRow) Opt[int64] { return r.PrefillDone }),
		jAttrI64("prefill.total_tokens", func(r *JourneyEventRow) Opt[int64] { return r.PrefillTotal }),
		jAttrI64("decode.done_tokens", func(r *JourneyEventRow) Opt[int64] { return r.DecodeDone }),
		jAttrI64("decode.max_tokens", func(r *JourneyEventRow) Opt[int64] { return r.DecodeMax }),
		jAttrI64("num_preemptions", func(r *JourneyEventRow) Opt[int64] { return r.NumPreemptions }),
		jAttrStr("schedule.kind", func(r *JourneyEventRow) Opt[string] { return r.ScheduleKind }),
		jAttrStr("finish.status", func(r *JourneyEventRow) Opt[string] { return r.FinishStatus }),
		jAttrStr("reason", func(r *JourneyEventRow) Opt[string] { return r.Reason }),
		jAttrStr("error", func(r *JourneyEventRow) Opt[string] { return r.Error }),
	},
)

func sAttr(key string, get func(*StepRow) Opt[int64]) colDef[StepRow] {
	return cOptI64(ColumnName(key), "event attribute "+key, get)
}

var stepCols = concat(
	atCols(func(r *StepRow) *At { return &r.At }),
	stepSpanCols(func(r *StepRow) *StepSpanInfo { return &r.StepSpanInfo }),
	[]colDef[StepRow]{
		cI64("time_unix_nano", "event wall-clock time, Unix nanoseconds", func(r *StepRow) int64 { return wallNs(r.TimeUnixNano) }),
		cI64("step_id", "event attribute step.id", func(r *StepRow) int64 { return r.StepID }),
		cI64("step_ts_start_ns", "event attribute step.ts_start_ns (monotonic); consecutive differences are the step cycle time", func(r *StepRow) int64 { return r.TSStartNs }),
		sAttr("step.ts_end_ns", func(r *StepRow) Opt[int64] { return r.TSEndNs }),
		cOptI64("step_duration_us", "event attribute step.duration_us: scheduler CPU time only, NOT the step time", func(r *StepRow) Opt[int64] { return r.DurationUs }),
		sAttr("queue.running_depth", func(r *StepRow) Opt[int64] { return r.RunningDepth }),
		sAttr("queue.waiting_depth", func(r *StepRow) Opt[int64] { return r.WaitingDepth }),
		sAttr("batch.num_prefill_reqs", func(r *StepRow) Opt[int64] { return r.NumPrefillReqs }),
		sAttr("batch.num_decode_reqs", func(r *StepRow) Opt[int64] { return r.NumDecodeReqs }),
		sAttr("batch.scheduled_tokens", func(r *StepRow) Opt[int64] { return r.ScheduledTokens }),
		sAttr("batch.prefill_tokens", func(r *StepRow) Opt[int64] { return r.PrefillTokens }),
		sAttr("batch.decode_tokens", func(r *StepRow) Opt[int64] { return r.DecodeTokens }),
		sAttr("batch.num_finished", func(r *StepRow) Opt[int64] { return r.NumFinished }),
		sAttr("batch.num_preempted", func(r *StepRow) Opt[int64] { return r.NumPreempted }),
		sAttr("kv.blocks_total_gpu", func(r *StepRow) Opt[int64] { return r.KVBlocksTotalGPU }),
		sAttr("kv.blocks_free_gpu", func(r *StepRow) Opt[int64] { return r.KVBlocksFreeGPU }),
		cOptF64("kv_usage_gpu_ratio", "event attribute kv.usage_gpu_ratio", func(r *StepRow) Opt[float64] { return r.KVUsageGPURatio }),
		cBool("has_rich_snapshots", "a step.REQUEST_SNAPSHOT with this step id is in the same span", func(r *StepRow) bool { return r.HasRichSnapshots }),
	},
)

func snAttr(key string, get func(*SnapshotRow) Opt[int64]) colDef[SnapshotRow] {
	return cOptI64(ColumnName(key), "event attribute "+key, get)
}

var snapshotCols = concat(
	atCols(func(r *SnapshotRow) *At { return &r.At }),
	stepSpanCols(func(r *SnapshotRow) *StepSpanInfo { return &r.StepSpanInfo }),
	[]colDef[SnapshotRow]{
		cI64("time_unix_nano", "event wall-clock time, Unix nanoseconds", func(r *SnapshotRow) int64 { return wallNs(r.TimeUnixNano) }),
		cI64("step_id", "event attribute step.id", func(r *SnapshotRow) int64 { return r.StepID }),
		cStr("request_id", "event attribute request.id (engine id)", func(r *SnapshotRow) string { return r.RequestID }),
		cOptStr("request_phase", "event attribute request.phase (PREFILL or DECODE)", func(r *SnapshotRow) Opt[string] { return r.Phase }),
		snAttr("request.num_prompt_tokens", func(r *SnapshotRow) Opt[int64] { return r.NumPromptTokens }),
		snAttr("request.num_computed_tokens", func(r *SnapshotRow) Opt[int64] { return r.NumComputedTokens }),
		snAttr("request.num_output_tokens", func(r *SnapshotRow) Opt[int64] { return r.NumOutputTokens }),
		snAttr("request.num_preemptions", func(r *SnapshotRow) Opt[int64] { return r.NumPreemptions }),
		snAttr("request.scheduled_tokens_this_step", func(r *SnapshotRow) Opt[int64] { return r.ScheduledTokensThisStep }),
		snAttr("kv.blocks_allocated_gpu", func(r *SnapshotRow) Opt[int64] { return r.KVBlocksAllocatedGPU }),
		snAttr("kv.blocks_cached_gpu", func(r *SnapshotRow) Opt[int64] { return r.KVBlocksCachedGPU }),
		snAttr("request.effective_prompt_len", func(r *SnapshotRow) Opt[int64] { return r.EffectivePromptLen }),
	},
)

var kvCols = concat(
	atCols(func(r *KVEventRow) *At { return &r.At }),
	[]colDef[KVEventRow]{
		cF64("batch_ts", "the line's wall-clock seconds (events carry no time of their own)", func(r *KVEventRow) float64 { return r.BatchTS }),
		cOptI64("dp_rank", "data-parallel rank, when the line carries one", func(r *KVEventRow) Opt[int64] { return r.DPRank }),
		cStr("type", "event type, e.g. TransferCompleted", func(r *KVEventRow) string { return r.Type }),
		cOptI64("transfer_id", "transfer_id", func(r *KVEventRow) Opt[int64] { return r.TransferID }),
		cOptStr("request_id", "request_id", func(r *KVEventRow) Opt[string] { return r.RequestID }),
		cOptStr("source_medium", "source_medium (GPU, CPU, DISK, LMCACHE)", func(r *KVEventRow) Opt[string] { return r.SourceMedium }),
		cOptStr("dest_medium", "dest_medium", func(r *KVEventRow) Opt[string] { return r.DestMedium }),
		cOptStr("medium", "medium (Cache*Committed, CacheEviction)", func(r *KVEventRow) Opt[string] { return r.Medium }),
		cOptI64("block_count", "block_count, or blocks_evicted for CacheEviction", func(r *KVEventRow) Opt[int64] { return r.BlockCount }),
		cOptBool("success", "success (TransferCompleted, RemoteTransferCompleted)", func(r *KVEventRow) Opt[bool] { return r.Success }),
		cOptI64("scheduler_step", "scheduler_step; a store committed at step S starts its transfer at S+1", func(r *KVEventRow) Opt[int64] { return r.SchedulerStep }),
		cOptStr("eviction_reason", "eviction_reason (lru, capacity, preemption)", func(r *KVEventRow) Opt[string] { return r.EvictionReason }),
		cOptStr("block_hashes", "block_hashes as JSON array text", func(r *KVEventRow) Opt[string] { return r.BlockHashes }),
		cOptStr("connector_type", "connector_type (Remote*)", func(r *KVEventRow) Opt[string] { return r.ConnectorType }),
		cOptI64("source_rank", "source_rank (Remote*)", func(r *KVEventRow) Opt[int64] { return r.SourceRank }),
		cOptI64("dest_rank", "dest_rank (Remote*)", func(r *KVEventRow) Opt[int64] { return r.DestRank }),
		cOptStr("raw", "the whole event as JSON, for GPU block-state events whose fields are not named here", func(r *KVEventRow) Opt[string] { return r.Raw }),
	},
)

// TableColumns returns a table's columns, for documentation and manifests.
func TableColumns(table string) []Column {
	switch table {
	case TableRequests:
		return columns(requestCols)
	case TableJourneyEvents:
		return columns(journeyCols)
	case TableSteps:
		return columns(stepCols)
	case TableRequestSnapshots:
		return columns(snapshotCols)
	case TableKVEvents:
		return columns(kvCols)
	}
	return nil
}

func columns[R any](defs []colDef[R]) []Column {
	out := make([]Column, len(defs))
	for i, d := range defs {
		out[i] = d.Column
	}
	return out
}

// Columns are written as pqarrow wrote them from Arrow arrays before
// (pqarrow links Arrow Flight and gRPC into every binary that imports this
// package): the same Parquet types (strings annotated String, integers
// Int(bits, signed)), the same column writers, and the same key-value
// metadata, the Arrow schema under ARROW:schema included, so that the
// files are byte for byte what they were.

// kindTypes are the Parquet physical and logical types, and the Arrow type,
// of each kind.
var kindTypes = [...]struct {
	physical parquet.Type
	logical  schema.LogicalType
	arrow    arrow.DataType
}{
	kindString:  {parquet.Types.ByteArray, schema.StringLogicalType{}, arrow.BinaryTypes.String},
	kindInt64:   {parquet.Types.Int64, schema.NewIntLogicalType(64, true), arrow.PrimitiveTypes.Int64},
	kindInt32:   {parquet.Types.Int32, schema.NewIntLogicalType(32, true), arrow.PrimitiveTypes.Int32},
	kindFloat64: {parquet.Types.Double, schema.NoLogicalType{}, arrow.PrimitiveTypes.Float64},
	kindBool:    {parquet.Types.Boolean, schema.NoLogicalType{}, arrow.FixedWidthTypes.Boolean},
}

// parquetSchema is the Parquet schema of a table of columns defs.
func parquetSchema[R any](defs []colDef[R], props *parquet.WriterProperties) (*schema.GroupNode, error) {
	fields := make(schema.FieldList, len(defs))
	for i, d := range defs {
		rep := parquet.Repetitions.Required
		if d.Nullable {
			rep = parquet.Repetitions.Optional
		}
		t := kindTypes[d.kind]
		n, err := schema.NewPrimitiveNodeLogical(d.Name, rep, t.logical, t.physical, -1, -1)
		if err != nil {
			return nil, err
		}
		fields[i] = n
	}
	return schema.NewGroupNode(props.RootName(), props.RootRepetition(), fields, -1)
}

// arrowSchema is the Arrow schema of a table, serialized as Arrow's
// Parquet writer stores it (an IPC stream of the schema and no batch,
// base64-encoded).
func arrowSchema[R any](table string, defs []colDef[R]) string {
	fields := make([]arrow.Field, len(defs))
	for i, d := range defs {
		fields[i] = arrow.Field{Name: d.Name, Type: kindTypes[d.kind].arrow, Nullable: d.Nullable}
	}
	md := arrow.NewMetadata([]string{"blis.table", "blis.schema_version"}, []string{table, fmt.Sprint(SchemaVersion)})
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(arrow.NewSchema(fields, &md)))
	w.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// batchRows is the rows per Parquet row group, buffered before they are
// written. Measured (with Arrow builders, which held as much) on a 1.1 GB
// trace: 64K rows held 321 MB at peak (the buffers of four tables fill at
// once), 16K rows 196 MB but ~15% slower, 32K rows 238 MB at full speed.
const batchRows = 32 * 1024

// tableWriter streams rows of one table into a Parquet file.
type tableWriter[R any] struct {
	name     string
	nullable []bool
	bufs     []colBuf
	app      []func(*R)
	fw       *file.Writer
	rows     int64
	open     int // rows in the buffers
	strs     []parquet.ByteArray
}

func newTableWriter[R any](name string, defs []colDef[R], w io.Writer, createdBy string) (*tableWriter[R], error) {
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy(createdBy),
		parquet.WithMaxRowGroupLength(batchRows),
	)
	root, err := parquetSchema(defs, props)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	version := fmt.Sprint(SchemaVersion)
	md := metadata.KeyValueMetadata{}
	md.Append("blis.table", name)
	md.Append("blis.schema_version", version)
	md.Append("ARROW:schema", arrowSchema(name, defs))
	fw := file.NewParquetWriter(w, root, file.WithWriterProps(props), file.WithWriteMetadata(md))
	// The Parquet-level keys once more, as pqarrow's writer had them.
	if err := fw.AppendKeyValueMetadata("blis.table", name); err != nil {
		return nil, err
	}
	if err := fw.AppendKeyValueMetadata("blis.schema_version", version); err != nil {
		return nil, err
	}
	t := &tableWriter[R]{name: name, bufs: make([]colBuf, len(defs)), fw: fw}
	for i, d := range defs {
		t.nullable = append(t.nullable, d.Nullable)
		t.app = append(t.app, d.bind(&t.bufs[i]))
	}
	return t, nil
}

func (t *tableWriter[R]) append(rows []R) error {
	for i := range rows {
		for _, a := range t.app {
			a(&rows[i])
		}
		t.rows++
		t.open++
		if t.open == batchRows {
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the buffered rows as a row group.
func (t *tableWriter[R]) flush() error {
	if t.open == 0 {
		return nil
	}
	t.open = 0
	rg := t.fw.AppendRowGroup()
	for i := range t.bufs {
		if err := t.writeColumn(rg, i); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.bufs[i].reset()
	}
	if err := rg.Close(); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	return nil
}

func (t *tableWriter[R]) writeColumn(rg file.SerialRowGroupWriter, i int) error {
	cw, err := rg.NextColumn()
	if err != nil {
		return err
	}
	c := &t.bufs[i]
	var def []int16 // nil: a required column
	if t.nullable[i] {
		def = c.def
	}
	switch w := cw.(type) {
	case *file.ByteArrayColumnChunkWriter:
		t.strs = t.strs[:0]
		start := 0
		for _, end := range c.ends {
			t.strs = append(t.strs, c.str[start:end:end])
			start = end
		}
		_, err = w.WriteBatch(t.strs, def, nil)
	case *file.Int64ColumnChunkWriter:
		_, err = w.WriteBatch(c.i64, def, nil)
	case *file.Int32ColumnChunkWriter:
		_, err = w.WriteBatch(c.i32, def, nil)
	case *file.Float64ColumnChunkWriter:
		_, err = w.WriteBatch(c.f64, def, nil)
	case *file.BooleanColumnChunkWriter:
		_, err = w.WriteBatch(c.b, def, nil)
	default:
		err = fmt.Errorf("column %d: no writer for %T", i, cw)
	}
	return err
}

// close flushes the last rows and writes the footer.
func (t *tableWriter[R]) close() error {
	err := t.flush()
	if cerr := t.fw.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", t.name, cerr)
	}
	return err
}
