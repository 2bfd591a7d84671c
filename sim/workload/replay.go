package workload

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
)

// Skip reasons of Parquet replay.
const (
	SkipNoArrivalTime     = "no_arrival_time"
	SkipNoPromptTokens    = "no_prompt_tokens"
	SkipNoOutputTokens    = "no_output_tokens"
	SkipNonpositiveTokens = "nonpositive_tokens"
	SkipTooManyTokens     = records.SkipTooManyTokens // above sim.MaxTokens
	SkipBadSLOClass       = "bad_slo_class"
)

// ReplayReport counts what Replay kept and skipped, by reason, so nothing is dropped silently.
type ReplayReport struct {
	Rows    int64       `json:"rows"`              // data rows read
	Kept    int64       `json:"kept"`              // rows turned into requests
	Skipped []SkipCount `json:"skipped,omitempty"` // sorted by reason; empty for CSV, which fails instead
	Source  string      `json:"source"`            // the file actually read (<dir>/requests.parquet for a directory)
	// Format is the imported trace format (records.Formats), "" for the
	// CSV and Parquet tables (whose JSON predates it).
	Format string `json:"format,omitempty"`
	// TooLong counts the kept rows whose prompt and output tokens exceed
	// ReplayOptions.MaxModelLen, and TooLongAt names the first of them
	// ("file:line", or "file: row N (0-based)" for Parquet) with its
	// lengths. They stay in the workload, for the run to refuse and count
	// as vLLM would; this is so that a diagnostic can point at the file.
	// Not in the JSON: the run's rejected_too_long counts them.
	TooLong   int64  `json:"-"`
	TooLongAt string `json:"-"`
}

// tooLong notes a kept row longer than max (0: no limit) at where.
func (r *ReplayReport) tooLong(max, prompt, output int64, where string) {
	if max <= 0 || prompt+output <= max {
		return
	}
	if r.TooLong == 0 {
		r.TooLongAt = fmt.Sprintf("%s: prompt_tokens %d + output_tokens %d exceed max_model_len %d", where, prompt, output, max)
	}
	r.TooLong++
}

// SkipCount is the number of rows skipped for one reason. A Parquet table
// names the first such row by index, an imported trace by line.
type SkipCount struct {
	Reason    string `json:"reason"`
	Count     int64  `json:"count"`
	FirstRow  int64  `json:"first_row"`            // 0-based index of the first such row in the file (Parquet)
	FirstLine int64  `json:"first_line,omitempty"` // 1-based line (array element for whole-file JSON) of the first such row (imported traces)
}

// MarshalJSON writes first_line instead of first_row for an imported
// trace's skips: a row index there would mislead, and Parquet reports keep
// their JSON.
func (s SkipCount) MarshalJSON() ([]byte, error) {
	if s.FirstLine > 0 {
		return json.Marshal(struct {
			Reason    string `json:"reason"`
			Count     int64  `json:"count"`
			FirstLine int64  `json:"first_line"`
		}{s.Reason, s.Count, s.FirstLine})
	}
	type plain SkipCount
	return json.Marshal(plain(s))
}

// String summarises the report in one line, for logs.
func (r ReplayReport) String() string {
	return fmt.Sprintf("%s: kept %d of %d rows", r.Source, r.Kept, r.Rows) + r.skipSummary()
}

func (r ReplayReport) skipSummary() string {
	var b strings.Builder
	for _, k := range r.Skipped {
		if k.FirstLine > 0 {
			fmt.Fprintf(&b, "; skipped %d %s (first line %d)", k.Count, k.Reason, k.FirstLine)
		} else {
			fmt.Fprintf(&b, "; skipped %d %s (first row %d)", k.Count, k.Reason, k.FirstRow)
		}
	}
	return b.String()
}

// Replay formats besides the imported traces of package records.
const (
	FormatAuto    = "auto"
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// ReplayFormats are the formats Replay reads: auto, csv, parquet and the
// imported trace formats of package records.
func ReplayFormats() []string {
	return append([]string{FormatAuto, FormatCSV, FormatParquet}, records.Formats()...)
}

// ReplayOptions choose how ReplayWith reads a file.
type ReplayOptions struct {
	// Format is one of ReplayFormats; "" is auto.
	Format string
	// Strict fails on the first unreadable row instead of skipping it
	// (CSV always fails).
	Strict bool
	// MaxModelLen, when > 0, is the context of the model the workload will
	// run on: rows whose prompt and output tokens exceed it are counted in
	// the report (TooLong, TooLongAt) and kept, for the run to refuse as
	// vLLM does; with Strict the first is an error naming its file and
	// line (or row).
	MaxModelLen int64
}

// Replay reads a recorded workload, its format detected (ReplayWith with
// the zero options).
func Replay(path string) ([]sim.RequestSpec, ReplayReport, error) {
	return ReplayWith(path, ReplayOptions{})
}

// ReplayWith reads a recorded workload and returns it as requests with IDs
// 0..n-1 in arrival order (a stable sort: ties keep file order).
//
// Format auto chooses by content: a file starting with the Parquet magic
// "PAR1" (or named *.parquet) is read as the requests table of
// `calibrate ingest`; a file records.Detect recognizes as an imported trace
// (Azure, Mooncake, vllm bench serve, inference-perf, vllm-runs) is read by
// package records and converted with records.ToRequests; anything else is
// CSV. A directory means <dir>/requests.parquet.
//
// Parquet: the arrival is arrived_mono_s, or queued_mono_s when that is
// null, in seconds, rebased so the earliest kept arrival is 0 µs. Rows
// without an arrival, prompt_tokens or output_tokens, or with a token
// count <= 0, are skipped and counted in the report (traces hold aborted
// and partial requests); with Strict the first is an error. Optional
// string columns tenant_id, slo_class and session_id are read as the CSV's
// (a null is ""; a bad slo_class is skipped). Replay fails if no row is
// usable.
//
// CSV: a header row names the columns arrival_us, prompt_tokens and
// output_tokens (required) and prefix_group, prefix_tokens, priority,
// tenant_id, slo_class and session_id (optional), in any order. The first
// six are integers, empty optional cells 0; arrival_us is used as is, not
// rebased. tenant_id and session_id are names: as in records.ToRequests,
// tenants number 1, 2, … and sessions 1, 2, … in order of first appearance
// in arrival order, an empty cell being the default tenant 0 or no session.
// slo_class is realtime, interactive, batch or empty. CSV is written by
// hand, so every bad value is an error naming file:line and column, never a
// skip. Lines starting with # are comments.
func ReplayWith(path string, opt ReplayOptions) ([]sim.RequestSpec, ReplayReport, error) {
	format := opt.Format
	if format == "" {
		format = FormatAuto
	}
	if !slices.Contains(ReplayFormats(), format) {
		return nil, ReplayReport{Source: path}, fmt.Errorf("unknown replay format %q; want one of %s", format, strings.Join(ReplayFormats(), ", "))
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() && (format == FormatAuto || format == FormatParquet) {
		path = filepath.Join(path, "requests.parquet")
	}
	rep := ReplayReport{Source: path}
	f, err := inputfile.Open(path) // a device has no end (--replay /dev/zero filled 11 GB)
	if err != nil {
		return nil, rep, err
	}
	defer f.Close()
	magic := make([]byte, 4)
	n, err := io.ReadFull(f, magic)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, rep, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, rep, fmt.Errorf("%s: %w", path, err)
	}
	if format == FormatAuto {
		switch {
		case string(magic[:n]) == "PAR1" || strings.EqualFold(filepath.Ext(path), ".parquet"):
			format = FormatParquet
		default:
			if format, err = records.Detect(path); err != nil {
				return nil, rep, err
			}
			if format == "" {
				format = FormatCSV
			}
		}
	}
	var reqs []sim.RequestSpec
	switch format {
	case FormatParquet:
		reqs, err = replayParquet(&rep, opt)
	case FormatCSV:
		reqs, err = replayCSV(f, &rep, opt)
	default:
		reqs, err = replayRecords(path, format, opt, &rep)
	}
	if err != nil {
		return nil, rep, err
	}
	for i := range reqs {
		reqs[i].ID = int64(i)
	}
	// Both readers check every field; this guards the contract with sim.
	if err := sim.ValidateWorkload(reqs); err != nil {
		return nil, rep, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, rep, nil
}

// replayRecords reads an imported trace with package records.
func replayRecords(path, format string, opt ReplayOptions, rep *ReplayReport) ([]sim.RequestSpec, error) {
	recs, rr, err := records.Read(path, format, records.Options{Strict: opt.Strict})
	rep.Rows, rep.Kept, rep.Format = rr.Rows, rr.Read, rr.Format
	for _, s := range rr.Skipped {
		rep.Skipped = append(rep.Skipped, SkipCount{Reason: s.Reason, Count: s.Count, FirstLine: s.FirstLine})
	}
	if err != nil {
		return nil, err
	}
	for i := range recs {
		r := &recs[i]
		if rep.tooLong(opt.MaxModelLen, r.PromptTokens, r.OutputTokens, fmt.Sprintf("%s:%d", path, r.Line)); opt.Strict && rep.TooLong > 0 {
			return nil, fmt.Errorf("%s, which vLLM refuses", rep.TooLongAt)
		}
	}
	reqs, _, err := records.ToRequests(recs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, nil
}

// replayParquet reads the requests table written by calibrate ingest.
func replayParquet(rep *ReplayReport, opt ReplayOptions) ([]sim.RequestSpec, error) {
	strict := opt.Strict
	path := rep.Source
	f, err := pqread.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Catch another ingest table passed by mistake (steps.parquet, ...).
	if v := f.Meta(tracevocab.MetaTable); v != "" && v != tracevocab.TableRequests {
		return nil, fmt.Errorf("%s is the %q table of calibrate ingest; replay needs the \"requests\" table", path, v)
	}
	var missing []string
	for _, c := range []string{"arrived_mono_s", "queued_mono_s", "prompt_tokens", "output_tokens"} {
		if !f.Has(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing column(s) %s of the requests table", path, strings.Join(missing, ", "))
	}
	arrived, err := f.Float64("arrived_mono_s")
	if err != nil {
		return nil, err
	}
	queued, err := f.Float64("queued_mono_s")
	if err != nil {
		return nil, err
	}
	prompt, err := f.Int64("prompt_tokens")
	if err != nil {
		return nil, err
	}
	output, err := f.Int64("output_tokens")
	if err != nil {
		return nil, err
	}

	// Optional name columns; a null is "".
	var names [3]pqread.Column[string]
	var has [3]bool
	for c, name := range [3]string{"tenant_id", "slo_class", "session_id"} {
		if has[c] = f.Has(name); has[c] {
			if names[c], err = f.String(name); err != nil {
				return nil, err
			}
		}
	}
	name := func(c, i int) string {
		if !has[c] || !names[c].OK(i) {
			return ""
		}
		return names[c].V[i]
	}

	type timed struct {
		t               float64
		s               sim.RequestSpec
		tenant, session string
	}
	var kept []timed
	skip := func(reason string, row int64, field, format string, a ...any) error {
		if strict {
			return fmt.Errorf("%s: row %d (0-based): %s: %s", path, row, field, fmt.Sprintf(format, a...))
		}
		for i := range rep.Skipped {
			if rep.Skipped[i].Reason == reason {
				rep.Skipped[i].Count++
				return nil
			}
		}
		rep.Skipped = append(rep.Skipped, SkipCount{Reason: reason, Count: 1, FirstRow: row})
		return nil
	}
	for i := range prompt.V {
		row := rep.Rows
		rep.Rows++
		var t float64
		switch {
		case arrived.OK(i) && isFinite(arrived.V[i]):
			t = arrived.V[i]
		case queued.OK(i) && isFinite(queued.V[i]):
			t = queued.V[i]
		default:
			err = skip(SkipNoArrivalTime, row, "arrived_mono_s", "no finite value here or in queued_mono_s")
			if err != nil {
				return nil, err
			}
			continue
		}
		slo, sloErr := sim.ParseSLOClass(name(1, i))
		switch {
		case !prompt.OK(i):
			err = skip(SkipNoPromptTokens, row, "prompt_tokens", "null")
		case !output.OK(i):
			err = skip(SkipNoOutputTokens, row, "output_tokens", "null")
		case prompt.V[i] <= 0:
			err = skip(SkipNonpositiveTokens, row, "prompt_tokens", "%d must be > 0", prompt.V[i])
		case output.V[i] <= 0:
			err = skip(SkipNonpositiveTokens, row, "output_tokens", "%d must be > 0", output.V[i])
		case prompt.V[i] > sim.MaxTokens:
			err = skip(SkipTooManyTokens, row, "prompt_tokens", "%d is more than the simulator takes (%d)", prompt.V[i], int64(sim.MaxTokens))
		case output.V[i] > sim.MaxTokens:
			err = skip(SkipTooManyTokens, row, "output_tokens", "%d is more than the simulator takes (%d)", output.V[i], int64(sim.MaxTokens))
		case sloErr != nil:
			err = skip(SkipBadSLOClass, row, "slo_class", "%q is not a class; use realtime, interactive or batch", clip.String(name(1, i)))
		default:
			kept = append(kept, timed{t, sim.RequestSpec{PromptTokens: prompt.V[i], OutputTokens: output.V[i], SLOClass: slo}, name(0, i), name(2, i)})
			if rep.tooLong(opt.MaxModelLen, prompt.V[i], output.V[i], fmt.Sprintf("%s: row %d (0-based)", path, row)); strict && rep.TooLong > 0 {
				return nil, fmt.Errorf("%s, which vLLM refuses", rep.TooLongAt)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(rep.Skipped, func(a, b SkipCount) int { return strings.Compare(a.Reason, b.Reason) })
	rep.Kept = int64(len(kept))
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s: none of %d rows is usable%s", path, rep.Rows, rep.skipSummary())
	}

	slices.SortStableFunc(kept, func(a, b timed) int { return cmp.Compare(a.t, b.t) })
	t0 := kept[0].t
	out := make([]sim.RequestSpec, len(kept))
	var tenants, sessions records.Names
	for i, k := range kept {
		// Rounding is monotone, so sorted seconds give sorted microseconds.
		us := math.Round((k.t - t0) * 1e6)
		if us > math.MaxInt64/2 {
			return nil, fmt.Errorf("%s: arrival %g s is too far after the first (%g s)", path, k.t, t0)
		}
		k.s.ArrivalUs = int64(us)
		if k.s.Tenant, err = tenantIndex(&tenants, k.tenant); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		k.s.Session = sessions.ID(k.session)
		out[i] = k.s
	}
	return out, nil
}

// tenantIndex numbers a tenant name as records.ToRequests does.
func tenantIndex(n *records.Names, name string) (int32, error) {
	id := n.ID(name)
	if id > math.MaxInt32 {
		return 0, fmt.Errorf("more than %d tenants", math.MaxInt32)
	}
	return int32(id), nil
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// CSV columns, required first, integers before names.
const (
	colArrival = iota
	colPrompt
	colOutput
	colPrefixGroup
	colPrefixTokens
	colPriority
	colTenant
	colSLOClass
	colSession
	numCols
	numRequired = colOutput + 1
	numInts     = colPriority + 1
)

var csvNames = [numCols]string{"arrival_us", "prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens", "priority",
	"tenant_id", "slo_class", "session_id"}

// CSVColumns describes a replay CSV's header, for help texts and errors.
const CSVColumns = "arrival_us,prompt_tokens,output_tokens[,prefix_group][,prefix_tokens][,priority][,tenant_id][,slo_class][,session_id] in any order"

// csvRow is a CSV request before tenants and sessions are numbered.
type csvRow struct {
	spec            sim.RequestSpec
	tenant, session string
	line            int
}

func replayCSV(f io.Reader, rep *ReplayReport, opt ReplayOptions) ([]sim.RequestSpec, error) {
	path := rep.Source
	r := csv.NewReader(bufio.NewReader(f))
	r.FieldsPerRecord = -1 // checked below, with a clearer message
	r.Comment = '#'
	r.ReuseRecord = true
	readErr := func(err error) error {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s:%d: %w", path, pe.Line, pe.Err)
		}
		return fmt.Errorf("%s: %w", path, err)
	}

	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty file; want a CSV header row: %s", path, CSVColumns)
	}
	if err != nil {
		return nil, readErr(err)
	}
	headerLine, _ := r.FieldPos(0)
	// where[c] is the field index of column c, or -1.
	var where [numCols]int
	for c := range where {
		where[c] = -1
	}
	var unknown []string
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) // BOM from spreadsheet exports
		c := slices.Index(csvNames[:], h)
		switch {
		case c < 0:
			unknown = append(unknown, strconv.Quote(clip.String(h)))
		case where[c] >= 0:
			return nil, fmt.Errorf("%s:%d: column %s appears twice", path, headerLine, clip.String(h))
		default:
			where[c] = i
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s:%d: unknown column(s) %s; want %s", path, headerLine, strings.Join(unknown, ", "), CSVColumns)
	}
	for c := range numRequired {
		if where[c] < 0 {
			return nil, fmt.Errorf("%s:%d: missing column %s; want %s", path, headerLine, csvNames[c], CSVColumns)
		}
	}
	nFields := len(header)

	var rows []csvRow
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readErr(err)
		}
		rep.Rows++
		line, _ := r.FieldPos(0)
		if len(rec) != nFields {
			return nil, fmt.Errorf("%s:%d: %d fields, but the header has %d", path, line, len(rec), nFields)
		}
		var v [numInts]int64
		for c, i := range where[:numInts] {
			if i < 0 {
				continue
			}
			cell := strings.TrimSpace(rec[i])
			if cell == "" && c >= numRequired {
				continue // optional column left blank
			}
			x, err := strconv.ParseInt(cell, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %q is not an integer", path, line, csvNames[c], clip.String(cell))
			}
			v[c] = x
		}
		bad := func(c int, format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s: %s", path, line, csvNames[c], fmt.Sprintf(format, a...))
		}
		switch {
		case v[colArrival] < 0:
			return nil, bad(colArrival, "%d is negative", v[colArrival])
		case v[colPrompt] <= 0:
			return nil, bad(colPrompt, "%d must be > 0", v[colPrompt])
		case v[colPrompt] > sim.MaxTokens:
			return nil, bad(colPrompt, "%d is more than the simulator takes (%d)", v[colPrompt], int64(sim.MaxTokens))
		case v[colOutput] <= 0:
			return nil, bad(colOutput, "%d must be > 0", v[colOutput])
		case v[colOutput] > sim.MaxTokens:
			return nil, bad(colOutput, "%d is more than the simulator takes (%d)", v[colOutput], int64(sim.MaxTokens))
		case v[colPrefixGroup] < 0 || v[colPrefixGroup] > math.MaxInt32:
			return nil, bad(colPrefixGroup, "%d must be within [0, %d]", v[colPrefixGroup], math.MaxInt32)
		case v[colPrefixTokens] < 0 || v[colPrefixTokens] > v[colPrompt]:
			return nil, bad(colPrefixTokens, "%d must be within [0, prompt_tokens %d]", v[colPrefixTokens], v[colPrompt])
		case v[colPrefixTokens] > 0 && v[colPrefixGroup] == 0:
			return nil, bad(colPrefixTokens, "%d without a prefix_group", v[colPrefixTokens])
		case v[colPriority] < math.MinInt32 || v[colPriority] > math.MaxInt32:
			return nil, bad(colPriority, "%d must fit in 32 bits", v[colPriority])
		}
		var str [numCols]string
		for c := numInts; c < numCols; c++ {
			if i := where[c]; i >= 0 {
				str[c] = strings.TrimSpace(rec[i])
			}
		}
		slo, err := sim.ParseSLOClass(str[colSLOClass])
		if err != nil {
			return nil, bad(colSLOClass, "%q is not a class; use realtime, interactive or batch, or leave it empty", clip.String(str[colSLOClass]))
		}
		if rep.tooLong(opt.MaxModelLen, v[colPrompt], v[colOutput], fmt.Sprintf("%s:%d", path, line)); opt.Strict && rep.TooLong > 0 {
			return nil, fmt.Errorf("%s, which vLLM refuses", rep.TooLongAt)
		}
		rows = append(rows, csvRow{spec: sim.RequestSpec{
			ArrivalUs:    v[colArrival],
			PromptTokens: v[colPrompt],
			OutputTokens: v[colOutput],
			PrefixGroup:  int32(v[colPrefixGroup]),
			PrefixTokens: v[colPrefixTokens],
			Priority:     int32(v[colPriority]),
			SLOClass:     slo,
		}, tenant: str[colTenant], session: str[colSession], line: line})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no requests after the header", path)
	}
	rep.Kept = rep.Rows
	// Hand-written files need not be in order; a stable sort keeps the
	// file order of equal arrivals.
	slices.SortStableFunc(rows, func(a, b csvRow) int { return cmp.Compare(a.spec.ArrivalUs, b.spec.ArrivalUs) })
	// Names are numbered in arrival order, as records.ToRequests does.
	var tenants, sessions records.Names
	out := make([]sim.RequestSpec, len(rows))
	for i, r := range rows {
		var err error
		if r.spec.Tenant, err = tenantIndex(&tenants, r.tenant); err != nil {
			return nil, fmt.Errorf("%s:%d: tenant_id: %w", path, r.line, err)
		}
		r.spec.Session = sessions.ID(r.session)
		out[i] = r.spec
	}
	return out, nil
}
