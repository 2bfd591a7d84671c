package otlpingest

import (
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// SchemaVersion versions the tables' columns (tracevocab.TablesSchemaVersion,
// where its history is).
const SchemaVersion = tracevocab.TablesSchemaVersion

// Table names, which are also the Parquet file names without ".parquet".
const (
	TableRequests         = tracevocab.TableRequests
	TableJourneyEvents    = tracevocab.TableJourneyEvents
	TableSteps            = tracevocab.TableSteps
	TableRequestSnapshots = tracevocab.TableRequestSnapshots
	TableKVEvents         = tracevocab.TableKVEvents
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

// colDef binds a column to the row field it is filled from.
type colDef[R any] struct {
	Column
	typ  arrow.DataType
	bind func(b array.Builder) func(r *R)
}

func cStr[R any](name, doc string, get func(*R) string) colDef[R] {
	return colDef[R]{Column{name, "string", false, doc}, arrow.BinaryTypes.String, func(b array.Builder) func(*R) {
		sb := b.(*array.StringBuilder)
		return func(r *R) { sb.Append(get(r)) }
	}}
}

func cOptStr[R any](name, doc string, get func(*R) Opt[string]) colDef[R] {
	return colDef[R]{Column{name, "string", true, doc}, arrow.BinaryTypes.String, func(b array.Builder) func(*R) {
		sb := b.(*array.StringBuilder)
		return func(r *R) {
			if v := get(r); v.OK {
				sb.Append(v.V)
			} else {
				sb.AppendNull()
			}
		}
	}}
}

func cI64[R any](name, doc string, get func(*R) int64) colDef[R] {
	return colDef[R]{Column{name, "int64", false, doc}, arrow.PrimitiveTypes.Int64, func(b array.Builder) func(*R) {
		ib := b.(*array.Int64Builder)
		return func(r *R) { ib.Append(get(r)) }
	}}
}

func cOptI64[R any](name, doc string, get func(*R) Opt[int64]) colDef[R] {
	return colDef[R]{Column{name, "int64", true, doc}, arrow.PrimitiveTypes.Int64, func(b array.Builder) func(*R) {
		ib := b.(*array.Int64Builder)
		return func(r *R) {
			if v := get(r); v.OK {
				ib.Append(v.V)
			} else {
				ib.AppendNull()
			}
		}
	}}
}

func cI32[R any](name, doc string, get func(*R) int32) colDef[R] {
	return colDef[R]{Column{name, "int32", false, doc}, arrow.PrimitiveTypes.Int32, func(b array.Builder) func(*R) {
		ib := b.(*array.Int32Builder)
		return func(r *R) { ib.Append(get(r)) }
	}}
}

func cF64[R any](name, doc string, get func(*R) float64) colDef[R] {
	return colDef[R]{Column{name, "double", false, doc}, arrow.PrimitiveTypes.Float64, func(b array.Builder) func(*R) {
		fb := b.(*array.Float64Builder)
		return func(r *R) { fb.Append(get(r)) }
	}}
}

func cOptF64[R any](name, doc string, get func(*R) Opt[float64]) colDef[R] {
	return colDef[R]{Column{name, "double", true, doc}, arrow.PrimitiveTypes.Float64, func(b array.Builder) func(*R) {
		fb := b.(*array.Float64Builder)
		return func(r *R) {
			if v := get(r); v.OK {
				fb.Append(v.V)
			} else {
				fb.AppendNull()
			}
		}
	}}
}

func cBool[R any](name, doc string, get func(*R) bool) colDef[R] {
	return colDef[R]{Column{name, "bool", false, doc}, arrow.FixedWidthTypes.Boolean, func(b array.Builder) func(*R) {
		bb := b.(*array.BooleanBuilder)
		return func(r *R) { bb.Append(get(r)) }
	}}
}

func cOptBool[R any](name, doc string, get func(*R) Opt[bool]) colDef[R] {
	return colDef[R]{Column{name, "bool", true, doc}, arrow.FixedWidthTypes.Boolean, func(b array.Builder) func(*R) {
		bb := b.(*array.BooleanBuilder)
		return func(r *R) {
			if v := get(r); v.OK {
				bb.Append(v.V)
			} else {
				bb.AppendNull()
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
		cOptStr("model", tracevocab.ResponseModel, func(r *RequestRow) Opt[string] { return r.Model }),
		cOptStr("route", tracevocab.HTTPRoute, func(r *RequestRow) Opt[string] { return r.Route }),
		cOptI64("prompt_tokens", tracevocab.UsagePromptTokens, func(r *RequestRow) Opt[int64] { return r.PromptTokens }),
		cOptI64("max_tokens", tracevocab.RequestMaxTokens, func(r *RequestRow) Opt[int64] { return r.MaxTokens }),
		cOptI64("n", tracevocab.RequestN, func(r *RequestRow) Opt[int64] { return r.N }),
		cOptF64("temperature", tracevocab.RequestTemperature, func(r *RequestRow) Opt[float64] { return r.Temperature }),
		cOptF64("top_p", tracevocab.RequestTopP, func(r *RequestRow) Opt[float64] { return r.TopP }),
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
		jAttrStr(tracevocab.EventType, func(r *JourneyEventRow) Opt[string] { return r.EventType }),
		cOptF64("ts_monotonic", "event attribute ts.monotonic (journey.* events)", func(r *JourneyEventRow) Opt[float64] { return r.TSMonotonic }),
		jAttrI64(tracevocab.TSMonotonicNs, func(r *JourneyEventRow) Opt[int64] { return r.TSMonotonicNs }),
		jAttrI64(tracevocab.SchedulerStep, func(r *JourneyEventRow) Opt[int64] { return r.SchedulerStep }),
		jAttrStr(tracevocab.Phase, func(r *JourneyEventRow) Opt[string] { return r.Phase }),
		jAttrI64(tracevocab.PrefillDoneTokens, func(r *JourneyEventRow) Opt[int64] { return r.PrefillDone }),
		jAttrI64(tracevocab.PrefillTotalTokens, func(r *JourneyEventRow) Opt[int64] { return r.PrefillTotal }),
		jAttrI64(tracevocab.DecodeDoneTokens, func(r *JourneyEventRow) Opt[int64] { return r.DecodeDone }),
		jAttrI64(tracevocab.DecodeMaxTokens, func(r *JourneyEventRow) Opt[int64] { return r.DecodeMax }),
		jAttrI64(tracevocab.NumPreemptions, func(r *JourneyEventRow) Opt[int64] { return r.NumPreemptions }),
		jAttrStr(tracevocab.ScheduleKind, func(r *JourneyEventRow) Opt[string] { return r.ScheduleKind }),
		jAttrStr(tracevocab.FinishStatus, func(r *JourneyEventRow) Opt[string] { return r.FinishStatus }),
		jAttrStr(tracevocab.AbortReason, func(r *JourneyEventRow) Opt[string] { return r.Reason }),
		jAttrStr(tracevocab.AbortError, func(r *JourneyEventRow) Opt[string] { return r.Error }),
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
		sAttr(tracevocab.StepTSEndNs, func(r *StepRow) Opt[int64] { return r.TSEndNs }),
		cOptI64("step_duration_us", "event attribute step.duration_us: scheduler CPU time only, NOT the step time", func(r *StepRow) Opt[int64] { return r.DurationUs }),
		sAttr(tracevocab.QueueRunningDepth, func(r *StepRow) Opt[int64] { return r.RunningDepth }),
		sAttr(tracevocab.QueueWaitingDepth, func(r *StepRow) Opt[int64] { return r.WaitingDepth }),
		sAttr(tracevocab.BatchNumPrefillReqs, func(r *StepRow) Opt[int64] { return r.NumPrefillReqs }),
		sAttr(tracevocab.BatchNumDecodeReqs, func(r *StepRow) Opt[int64] { return r.NumDecodeReqs }),
		sAttr(tracevocab.BatchScheduledTokens, func(r *StepRow) Opt[int64] { return r.ScheduledTokens }),
		sAttr(tracevocab.BatchPrefillTokens, func(r *StepRow) Opt[int64] { return r.PrefillTokens }),
		sAttr(tracevocab.BatchDecodeTokens, func(r *StepRow) Opt[int64] { return r.DecodeTokens }),
		sAttr(tracevocab.BatchNumFinished, func(r *StepRow) Opt[int64] { return r.NumFinished }),
		sAttr(tracevocab.BatchNumPreempted, func(r *StepRow) Opt[int64] { return r.NumPreempted }),
		sAttr(tracevocab.KVBlocksTotalGPU, func(r *StepRow) Opt[int64] { return r.KVBlocksTotalGPU }),
		sAttr(tracevocab.KVBlocksFreeGPU, func(r *StepRow) Opt[int64] { return r.KVBlocksFreeGPU }),
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
		snAttr(tracevocab.SnapshotPromptTokens, func(r *SnapshotRow) Opt[int64] { return r.NumPromptTokens }),
		snAttr(tracevocab.SnapshotComputedTokens, func(r *SnapshotRow) Opt[int64] { return r.NumComputedTokens }),
		snAttr(tracevocab.SnapshotOutputTokens, func(r *SnapshotRow) Opt[int64] { return r.NumOutputTokens }),
		snAttr(tracevocab.SnapshotPreemptions, func(r *SnapshotRow) Opt[int64] { return r.NumPreemptions }),
		snAttr(tracevocab.SnapshotScheduledTokens, func(r *SnapshotRow) Opt[int64] { return r.ScheduledTokensThisStep }),
		snAttr(tracevocab.SnapshotBlocksAllocated, func(r *SnapshotRow) Opt[int64] { return r.KVBlocksAllocatedGPU }),
		snAttr(tracevocab.SnapshotBlocksCached, func(r *SnapshotRow) Opt[int64] { return r.KVBlocksCachedGPU }),
		snAttr(tracevocab.SnapshotEffectivePromptLen, func(r *SnapshotRow) Opt[int64] { return r.EffectivePromptLen }),
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

func arrowSchema[R any](table string, defs []colDef[R]) *arrow.Schema {
	fields := make([]arrow.Field, len(defs))
	for i, d := range defs {
		fields[i] = arrow.Field{Name: d.Name, Type: d.typ, Nullable: d.Nullable}
	}
	md := arrow.NewMetadata([]string{tracevocab.MetaTable, tracevocab.MetaSchemaVersion}, []string{table, fmt.Sprint(SchemaVersion)})
	return arrow.NewSchema(fields, &md)
}

// batchRows is the rows per Arrow record, and so per Parquet row group.
// Measured on a 1.1 GB trace: 64K rows held 321 MB at peak (the builders
// of four tables fill at once), 16K rows 196 MB but ~15% slower, 32K rows
// 238 MB at full speed.
const batchRows = 32 * 1024

// tableWriter streams rows of one table into a Parquet file.
type tableWriter[R any] struct {
	name string
	rb   *array.RecordBuilder
	app  []func(*R)
	fw   *pqarrow.FileWriter
	rows int64
	open int // rows in the builder
	// dataLen is each string column's bytes in the last batch: a new batch
	// reserves that much, and batchRows values in every column, up front,
	// rather than growing its buffers by doubling and copying.
	dataLen []int
}

func newTableWriter[R any](name string, defs []colDef[R], w io.Writer, createdBy string) (*tableWriter[R], error) {
	schema := arrowSchema(name, defs)
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy(createdBy),
		parquet.WithMaxRowGroupLength(batchRows),
		// A column chunk whose dictionary outgrows the limit falls back to
		// plain pages, and then the writer lists its two page encodings in
		// the footer in map order, which changes from run to run. Without
		// the fallback the file is the same every time; the dictionary is
		// at most the column chunk's own values, which the record batch
		// holds anyway. (Chunks under the default 1 MiB limit are written
		// exactly as before.)
		parquet.WithDictionaryPageSizeLimit(math.MaxInt32),
	)
	fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Parquet-level metadata too, for readers that do not restore the Arrow schema's.
	if err := fw.AppendKeyValueMetadata(tracevocab.MetaTable, name); err != nil {
		return nil, err
	}
	if err := fw.AppendKeyValueMetadata(tracevocab.MetaSchemaVersion, fmt.Sprint(SchemaVersion)); err != nil {
		return nil, err
	}
	t := &tableWriter[R]{name: name, rb: array.NewRecordBuilder(memory.DefaultAllocator, schema), fw: fw}
	for i, d := range defs {
		t.app = append(t.app, d.bind(t.rb.Field(i)))
	}
	return t, nil
}

func (t *tableWriter[R]) append(rows []R) error {
	for i := range rows {
		if t.open == 0 {
			t.reserve()
		}
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

// reserve sizes the builders for a whole batch. It changes no output:
// the values appended are the same, only their buffers are allocated once.
func (t *tableWriter[R]) reserve() {
	fields := t.rb.Fields()
	if t.dataLen == nil {
		t.dataLen = make([]int, len(fields))
	}
	for i, b := range fields {
		b.Reserve(batchRows)
		if sb, ok := b.(*array.StringBuilder); ok && t.dataLen[i] > 0 {
			sb.ReserveData(t.dataLen[i] + t.dataLen[i]/8)
		}
	}
}

func (t *tableWriter[R]) flush() error {
	if t.open == 0 {
		return nil
	}
	for i, b := range t.rb.Fields() {
		if sb, ok := b.(*array.StringBuilder); ok {
			t.dataLen[i] = sb.DataLen()
		}
	}
	rec := t.rb.NewRecord()
	defer rec.Release()
	t.open = 0
	if err := t.fw.Write(rec); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	return nil
}

// close flushes the last rows and writes the footer.
func (t *tableWriter[R]) close() error {
	err := t.flush()
	t.rb.Release()
	if cerr := t.fw.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", t.name, cerr)
	}
	return err
}
