// Package records reads the request traces users already have, one reader
// per format, into Records: a request's arrival and lengths for replay, and
// the latencies measured for it when the format has them, for comparing
// simulated with measured requests.
//
// Formats (each reader's file cites where its schema was confirmed):
//
//	azure           Azure LLM inference trace CSV, 2023 and 2024:
//	                TIMESTAMP,ContextTokens,GeneratedTokens
//	mooncake        Mooncake (Kimi) trace, JSON lines: timestamp (ms),
//	                input_length, output_length, hash_ids (512-token blocks)
//	vllm-bench      the result JSON of vllm bench serve --save-result
//	                --save-detailed: per-request start_times, input_lens,
//	                output_lens, ttfts, itls, latencies, errors
//	inference-perf  per_request_lifecycle_metrics.json of
//	                kubernetes-sigs/inference-perf: start_time, end_time,
//	                info (tokens, output token times), error
//	vllm-runs       requests.jsonl of shared/data/vllm-runs: vLLM's
//	                per-request RequestStateStats
//
// Guarantees, for every reader:
//   - every data row is counted: Report.Rows = Report.Read + the rows
//     skipped, each skip under a reason with the first line it occurred on;
//     no row is dropped silently;
//   - with Options.Strict the first unreadable row is an error naming
//     file:line and the field at fault;
//   - times are read from their decimal text exactly to the nanosecond and
//     rounded once to the microsecond, never through a float;
//   - records are sorted stably by arrival (ties keep file order) and
//     arrivals rebased so that the earliest is 0;
//   - measured latencies are -1 when the format does not give them.
//
// A problem with the file as a whole (not JSON at all, a missing column,
// arrays of different lengths) is always an error, and so is a file with no
// usable row.
package records

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/blis-sim/blis/sim"
)

// Record is one request of a trace.
type Record struct {
	// Line is the record's 1-based line in the source (for whole-file JSON,
	// its array index + 1), for messages.
	Line int64
	// ArrivalUs is the arrival relative to the trace's first arrival (the
	// first record's is 0 after sorting), µs.
	ArrivalUs                  int64
	PromptTokens, OutputTokens int64
	// Tenant, SLOClass and Session are "" when the format gives none.
	Tenant, SLOClass, Session string
	// Content are the prompt's block hash ids (Mooncake), nil otherwise;
	// ContentTokens the tokens per id (Mooncake: 512), 0 when none.
	Content       []uint64
	ContentTokens int64
	// Measured latencies, µs, from the request's send (client-side; for
	// vllm-runs from the frontend's acceptance); -1 when the format does not
	// give them. MeanITLUs is the mean time per output token after the
	// first (vLLM's TPOT), -1 for a one-token output.
	TTFTUs, E2EUs, MeanITLUs int64
}

// SkipCount is the number of rows skipped for one reason.
type SkipCount struct {
	Reason    string
	Count     int64
	FirstLine int64 // line of the first such row (array index + 1 for whole-file JSON)
}

// Report counts what a reader read and skipped.
type Report struct {
	Path, Format string
	Rows         int64       // data rows seen: Read + the sum of Skipped
	Read         int64       // rows turned into records
	Skipped      []SkipCount // sorted by reason
}

// Options change how a reader treats unreadable rows.
type Options struct {
	// Strict makes the first unreadable row an error naming file:line and
	// field, instead of a skip.
	Strict bool
}

// Skip reasons.
const (
	SkipMalformed        = "malformed"          // not JSON, or not the format's shape
	SkipMissingField     = "missing_field"      // a required field is absent or null
	SkipBadNumber        = "bad_number"         // not a number, not an integer where one is due, or out of range
	SkipBadTime          = "bad_time"           // a timestamp that is not a date and time
	SkipNegative         = "negative"           // a negative count, or a latency that comes out negative
	SkipZeroPromptTokens = "zero_prompt_tokens" // the simulator needs a prompt
	SkipZeroOutputTokens = "zero_output_tokens" // and at least one output token
	SkipTooManyTokens    = "too_many_tokens"    // a count above sim.MaxTokens, which no model's context comes near
	SkipFailedRequest    = "failed_request"     // the trace says the request failed
	SkipDuplicateKey     = "duplicate_key"      // a field named twice in the row: which one holds is not for the reader to guess
)

// Format names.
const (
	Azure         = "azure"
	Mooncake      = "mooncake"
	VLLMBench     = "vllm-bench"
	InferencePerf = "inference-perf"
	VLLMRuns      = "vllm-runs"
)

// readers are the format readers; each reads src and hands rows to r.
var readers = map[string]func(r *reader, src io.Reader) error{
	Azure:         readAzure,
	Mooncake:      readMooncake,
	VLLMBench:     readVLLMBench,
	InferencePerf: readInferencePerf,
	VLLMRuns:      readVLLMRuns,
}

// Formats are the formats Read knows, in a fixed order.
func Formats() []string {
	return []string{Azure, Mooncake, VLLMBench, InferencePerf, VLLMRuns}
}

// Read reads the trace at path in format ("" or "auto": detected from the
// content, see Detect) and returns its records sorted by arrival.
func Read(path, format string, opt Options) ([]Record, Report, error) {
	if format == "" || format == "auto" {
		f, err := Detect(path)
		if err != nil {
			return nil, Report{Path: path}, err
		}
		if f == "" {
			return nil, Report{Path: path}, fmt.Errorf("%s: not a trace of a known format; name one of %s", path, strings.Join(Formats(), ", "))
		}
		format = f
	}
	if readers[format] == nil {
		return nil, Report{Path: path}, fmt.Errorf("unknown trace format %q; want one of %s", format, strings.Join(Formats(), ", "))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, Report{Path: path, Format: format}, err
	}
	defer f.Close()
	return read(path, f, format, opt)
}

// read is Read on an open source.
func read(path string, src io.Reader, format string, opt Options) ([]Record, Report, error) {
	r := &reader{path: path, opt: opt, rep: Report{Path: path, Format: format}}
	if err := readers[format](r, bufio.NewReaderSize(src, 1<<16)); err != nil {
		return nil, r.rep, err
	}
	return r.finish()
}

// reader collects one file's rows and skips.
type reader struct {
	path string
	opt  Options
	rep  Report
	recs []Record // ArrivalUs on the trace's clock until finish rebases it
}

// rowError is why a row is unusable: a skip reason, the field at fault and
// what is wrong with it.
type rowError struct {
	reason, field, msg string
}

func bad(reason, field, format string, a ...any) *rowError {
	return &rowError{reason, field, fmt.Sprintf(format, a...)}
}

// add counts one data row, arriving at t ns on the trace's clock: kept
// when e is nil, else skipped, or with Strict an error naming file:line and
// field.
func (r *reader) add(line int64, t int64, rec Record, e *rowError) error {
	r.rep.Rows++
	if e == nil {
		rec.Line = line
		rec.ArrivalUs = nsToUs(t)
		r.recs = append(r.recs, rec)
		return nil
	}
	return r.reject(line, e)
}

// reject counts the row at line as skipped for e's reason, or with Strict
// returns an error naming file:line and field.
func (r *reader) reject(line int64, e *rowError) error {
	if r.opt.Strict {
		if e.field == "" {
			return fmt.Errorf("%s:%d: %s", r.path, line, e.msg)
		}
		return fmt.Errorf("%s:%d: %s: %s", r.path, line, e.field, e.msg)
	}
	for i := range r.rep.Skipped {
		if r.rep.Skipped[i].Reason == e.reason {
			r.rep.Skipped[i].Count++
			return nil
		}
	}
	r.rep.Skipped = append(r.rep.Skipped, SkipCount{Reason: e.reason, Count: 1, FirstLine: line})
	return nil
}

// finish sorts and rebases the rows.
func (r *reader) finish() ([]Record, Report, error) {
	rep := &r.rep
	slices.SortFunc(rep.Skipped, func(a, b SkipCount) int { return strings.Compare(a.Reason, b.Reason) })
	recs := r.recs
	rep.Read = int64(len(recs))
	if len(recs) == 0 {
		if rep.Rows == 0 {
			return nil, *rep, fmt.Errorf("%s: no requests in the file", r.path)
		}
		return nil, *rep, fmt.Errorf("%s: none of %d rows is usable%s", r.path, rep.Rows, rep.skipSummary())
	}
	// Rounding is monotone, so the µs sort as the ns do; ties at the µs
	// keep file order.
	slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.ArrivalUs, b.ArrivalUs) })
	t0 := recs[0].ArrivalUs
	for i := range recs {
		// |ns| < 2^63, so µs values are within ±2^53 and no difference overflows.
		recs[i].ArrivalUs -= t0
	}
	return recs, *rep, nil
}

// String summarises the report in one line, for logs.
func (rep Report) String() string {
	return fmt.Sprintf("%s (%s): read %d of %d rows", rep.Path, rep.Format, rep.Read, rep.Rows) + rep.skipSummary()
}

func (rep Report) skipSummary() string {
	var b strings.Builder
	for _, k := range rep.Skipped {
		fmt.Fprintf(&b, "; skipped %d %s (first line %d)", k.Count, k.Reason, k.FirstLine)
	}
	return b.String()
}

// nsToUs rounds ns to the nearest µs, halves away from zero.
func nsToUs(ns int64) int64 {
	q, rem := ns/1000, ns%1000
	switch {
	case rem >= 500:
		q++
	case rem <= -500:
		q--
	}
	return q
}

// perTokenUs is a duration of n ns spread over k tokens, in µs rounded to
// the nearest (n >= 0, k > 0).
func perTokenUs(n, k int64) int64 {
	if k > math.MaxInt64/1000 {
		return 0 // below a nanosecond per token
	}
	d := k * 1000
	q, rem := n/d, n%d
	if rem >= d-rem {
		q++
	}
	return q
}

// Names numbers the distinct names of a column (tenants, sessions) in order
// of first appearance: "" (none given) is 0 and the other names take 1, 2, …
// The zero value is ready to use.
type Names struct {
	ids  map[string]int64
	list []string
}

// ID is name's number.
func (n *Names) ID(name string) int64 {
	if name == "" {
		return 0
	}
	if id, ok := n.ids[name]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = map[string]int64{}
	}
	n.list = append(n.list, name)
	id := int64(len(n.list))
	n.ids[name] = id
	return id
}

// List is the names by number: List()[i] is named i, so List()[0] is "".
func (n *Names) List() []string { return append([]string{""}, n.list...) }

// ToRequests turns records into request specs with ids 0..n-1 in arrival
// order (a stable sort, so records from Read keep their order): tenants and
// sessions map to indices/ids in order of first appearance (returned names
// in that order), Content copied. A record without a tenant is the default
// tenant 0 (tenants[0] is ""), one without a session is in none (0), so the
// named tenants and sessions number from 1. SLOClass is read with
// sim.ParseSLOClass.
func ToRequests(recs []Record) (reqs []sim.RequestSpec, tenants []string, err error) {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(recs[a].ArrivalUs, recs[b].ArrivalUs) })
	var tn, sn Names
	reqs = make([]sim.RequestSpec, len(recs))
	for i, k := range order {
		r := &recs[k]
		slo, err := sim.ParseSLOClass(r.SLOClass)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", r.Line, err)
		}
		t := tn.ID(r.Tenant)
		if t > math.MaxInt32 {
			return nil, nil, fmt.Errorf("line %d: more than %d tenants", r.Line, math.MaxInt32)
		}
		reqs[i] = sim.RequestSpec{
			ID: int64(i), ArrivalUs: r.ArrivalUs, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			Tenant: int32(t), SLOClass: slo, Session: sn.ID(r.Session),
			Content: slices.Clone(r.Content), ContentTokens: r.ContentTokens,
		}
		if err := reqs[i].Validate(); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", r.Line, err)
		}
	}
	if err := sim.ValidateWorkload(reqs); err != nil {
		return nil, nil, err
	}
	return reqs, tn.List(), nil
}

// Where a format's latencies are measured.
const (
	// AtClient: by the benchmark client, from sending the request to
	// receiving a token over HTTP: the whole request pipeline.
	AtClient = "client"
	// AtEngine: vLLM's own per-request stats, from the frontend accepting
	// the request to the engine core's output batch carrying the token: no
	// detokenization, HTTP or client on the way back.
	AtEngine = "engine"
)

// MeasuredAt says where format's TTFT, ITL and E2E are measured (AtClient
// or AtEngine), "" for a format without latencies. A comparison with the
// simulator must measure at the same point: at the engine, the output
// delay is not part of the latency.
func MeasuredAt(format string) string {
	switch format {
	case VLLMBench, InferencePerf:
		return AtClient
	case VLLMRuns:
		return AtEngine
	}
	return ""
}
