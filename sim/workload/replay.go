package workload

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/sim"
)

// Skip reasons of Parquet replay.
const (
	SkipNoArrivalTime     = "no_arrival_time"
	SkipNoPromptTokens    = "no_prompt_tokens"
	SkipNoOutputTokens    = "no_output_tokens"
	SkipNonpositiveTokens = "nonpositive_tokens"
)

// ReplayReport counts what Replay kept and skipped, by reason, so nothing is dropped silently.
type ReplayReport struct {
	Rows    int64       `json:"rows"`              // data rows read
	Kept    int64       `json:"kept"`              // rows turned into requests
	Skipped []SkipCount `json:"skipped,omitempty"` // sorted by reason; empty for CSV, which fails instead
	Source  string      `json:"source"`            // the file actually read (<dir>/requests.parquet for a directory)
}

// SkipCount is the number of rows skipped for one reason.
type SkipCount struct {
	Reason   string `json:"reason"`
	Count    int64  `json:"count"`
	FirstRow int64  `json:"first_row"` // 0-based index of the first such row in the file
}

// String summarises the report in one line, for logs.
func (r ReplayReport) String() string {
	return fmt.Sprintf("%s: kept %d of %d rows", r.Source, r.Kept, r.Rows) + r.skipSummary()
}

func (r ReplayReport) skipSummary() string {
	var b strings.Builder
	for _, k := range r.Skipped {
		fmt.Fprintf(&b, "; skipped %d %s (first row %d)", k.Count, k.Reason, k.FirstRow)
	}
	return b.String()
}

// Replay reads a recorded workload and returns it as requests with IDs
// 0..n-1 in arrival order (a stable sort: ties keep file order).
//
// The format is chosen by content: a file starting with the Parquet magic
// "PAR1" (or named *.parquet) is read as the requests table of
// `calibrate ingest`; anything else is CSV. A directory means
// <dir>/requests.parquet.
//
// Parquet: the arrival is arrived_mono_s, or queued_mono_s when that is
// null, in seconds, rebased so the earliest kept arrival is 0 µs. Rows
// without an arrival, prompt_tokens or output_tokens, or with a token
// count <= 0, are skipped and counted in the report (traces hold aborted
// and partial requests). Replay fails if no row is usable.
//
// CSV: a header row names the columns arrival_us, prompt_tokens and
// output_tokens (required) and prefix_group, prefix_tokens and priority
// (optional, empty cells mean 0), in any order. Values are integers and
// arrival_us is used as is, not rebased. CSV is written by hand, so every
// bad value is an error naming file:line and column, never a skip. Lines
// starting with # are comments.
func Replay(path string) ([]sim.RequestSpec, ReplayReport, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "requests.parquet")
	}
	rep := ReplayReport{Source: path}
	f, err := os.Open(path)
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
	var reqs []sim.RequestSpec
	if string(magic[:n]) == "PAR1" || strings.EqualFold(filepath.Ext(path), ".parquet") {
		reqs, err = replayParquet(&rep)
	} else {
		reqs, err = replayCSV(f, &rep)
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

// replayParquet reads the requests table written by calibrate ingest.
func replayParquet(rep *ReplayReport) ([]sim.RequestSpec, error) {
	path := rep.Source
	f, err := pqread.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Catch another ingest table passed by mistake (steps.parquet, ...).
	if v := f.Meta("blis.table"); v != "" && v != "requests" {
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

	type timed struct {
		t float64
		s sim.RequestSpec
	}
	var kept []timed
	skip := func(reason string, row int64) {
		for i := range rep.Skipped {
			if rep.Skipped[i].Reason == reason {
				rep.Skipped[i].Count++
				return
			}
		}
		rep.Skipped = append(rep.Skipped, SkipCount{Reason: reason, Count: 1, FirstRow: row})
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
			skip(SkipNoArrivalTime, row)
			continue
		}
		switch {
		case !prompt.OK(i):
			skip(SkipNoPromptTokens, row)
		case !output.OK(i):
			skip(SkipNoOutputTokens, row)
		case prompt.V[i] <= 0 || output.V[i] <= 0:
			skip(SkipNonpositiveTokens, row)
		default:
			kept = append(kept, timed{t, sim.RequestSpec{PromptTokens: prompt.V[i], OutputTokens: output.V[i]}})
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
	for i, k := range kept {
		// Rounding is monotone, so sorted seconds give sorted microseconds.
		us := math.Round((k.t - t0) * 1e6)
		if us > math.MaxInt64/2 {
			return nil, fmt.Errorf("%s: arrival %g s is too far after the first (%g s)", path, k.t, t0)
		}
		k.s.ArrivalUs = int64(us)
		out[i] = k.s
	}
	return out, nil
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// CSV columns, required first.
const (
	colArrival = iota
	colPrompt
	colOutput
	colPrefixGroup
	colPrefixTokens
	colPriority
	numCols
	numRequired = colOutput + 1
)

var csvNames = [numCols]string{"arrival_us", "prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens", "priority"}

const csvForm = "arrival_us,prompt_tokens,output_tokens[,prefix_group][,prefix_tokens][,priority] in any order"

func replayCSV(f io.Reader, rep *ReplayReport) ([]sim.RequestSpec, error) {
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
		return nil, fmt.Errorf("%s: empty file; want a CSV header row: %s", path, csvForm)
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
			unknown = append(unknown, strconv.Quote(h))
		case where[c] >= 0:
			return nil, fmt.Errorf("%s:%d: column %s appears twice", path, headerLine, h)
		default:
			where[c] = i
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s:%d: unknown column(s) %s; want %s", path, headerLine, strings.Join(unknown, ", "), csvForm)
	}
	for c := range numRequired {
		if where[c] < 0 {
			return nil, fmt.Errorf("%s:%d: missing column %s; want %s", path, headerLine, csvNames[c], csvForm)
		}
	}
	nFields := len(header)

	var out []sim.RequestSpec
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
		var v [numCols]int64
		for c, i := range where {
			if i < 0 {
				continue
			}
			cell := strings.TrimSpace(rec[i])
			if cell == "" && c >= numRequired {
				continue // optional column left blank
			}
			x, err := strconv.ParseInt(cell, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %q is not an integer", path, line, csvNames[c], cell)
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
		case v[colOutput] <= 0:
			return nil, bad(colOutput, "%d must be > 0", v[colOutput])
		case v[colPrefixGroup] < 0 || v[colPrefixGroup] > math.MaxInt32:
			return nil, bad(colPrefixGroup, "%d must be within [0, %d]", v[colPrefixGroup], math.MaxInt32)
		case v[colPrefixTokens] < 0 || v[colPrefixTokens] > v[colPrompt]:
			return nil, bad(colPrefixTokens, "%d must be within [0, prompt_tokens %d]", v[colPrefixTokens], v[colPrompt])
		case v[colPrefixTokens] > 0 && v[colPrefixGroup] == 0:
			return nil, bad(colPrefixTokens, "%d without a prefix_group", v[colPrefixTokens])
		case v[colPriority] < math.MinInt32 || v[colPriority] > math.MaxInt32:
			return nil, bad(colPriority, "%d must fit in 32 bits", v[colPriority])
		}
		out = append(out, sim.RequestSpec{
			ArrivalUs:    v[colArrival],
			PromptTokens: v[colPrompt],
			OutputTokens: v[colOutput],
			PrefixGroup:  int32(v[colPrefixGroup]),
			PrefixTokens: v[colPrefixTokens],
			Priority:     int32(v[colPriority]),
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no requests after the header", path)
	}
	rep.Kept = rep.Rows
	// Hand-written files need not be in order; a stable sort keeps the
	// file order of equal arrivals.
	slices.SortStableFunc(out, func(a, b sim.RequestSpec) int { return cmp.Compare(a.ArrivalUs, b.ArrivalUs) })
	return out, nil
}
