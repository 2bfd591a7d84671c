package records

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/columns"
	"github.com/blis-sim/blis/internal/inputfile"
)

// CounterRow is one tick of a vllm-runs timeseries.csv: what vLLM's stat
// logger reported for it (LLMServingSim's runner, bench/core/runner.py,
// one row per tick_seconds of meta.json). Throughputs are the prompt and
// generated tokens vLLM counted in the tick divided by its length; Running
// and Waiting are the requests at the tick's last engine iteration. All
// are summed over data-parallel engines.
type CounterRow struct {
	Line                       int64   // 1-based line in the file
	T                          float64 // end of the tick, s, on the runner's own clock
	PromptPerS, GenerationPerS float64 // tokens per second
	Running, Waiting           int64
}

// CountersFormat names the timeseries.csv format in reports.
const CountersFormat = "vllm-runs-timeseries"

// counterColumns are the columns ReadCounters needs; others (kv_cache_pct)
// are ignored.
var counterColumns = [5]string{"t", "prompt_throughput", "gen_throughput", "running", "waiting"}

// CountersPath is the timeseries.csv that belongs to a vllm-runs requests
// file.
func CountersPath(requestsPath string) string {
	return filepath.Join(filepath.Dir(requestsPath), "timeseries.csv")
}

// ReadCounters reads a vllm-runs timeseries.csv. As for the request
// readers, every data row is read or counted as skipped with its reason
// (Strict: the first unusable row is an error naming file:line and
// column): a missing cell, a value that is not a finite number (counts:
// not a whole number), a negative one, or a tick not after the previous
// one. A missing column or a file with no usable row is an error. Rows
// come back in file order.
func ReadCounters(path string, opt Options) ([]CounterRow, Report, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, Report{Path: path, Format: CountersFormat}, err
	}
	defer f.Close()
	return readCounters(path, f, opt)
}

func readCounters(path string, src io.Reader, opt Options) ([]CounterRow, Report, error) {
	r := &reader{path: path, opt: opt, rep: Report{Path: path, Format: CountersFormat}}
	cr := csv.NewReader(src)
	cr.FieldsPerRecord = -1 // short rows are skips, not file errors
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, r.rep, fmt.Errorf("%s: empty file; want the header %s", path, strings.Join(counterColumns[:], ","))
	}
	if err != nil {
		return nil, r.rep, fmt.Errorf("%s: %w", path, err)
	}
	if err := columns.Duplicate(header, func(h string) string { return strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) }); err != nil {
		return nil, r.rep, fmt.Errorf("%s:1: %w", path, err)
	}
	var where [5]int
	for c, name := range counterColumns {
		where[c] = slices.IndexFunc(header, func(h string) bool {
			return strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) == name
		})
		if where[c] < 0 {
			return nil, r.rep, fmt.Errorf("%s:1: missing column %s; a vllm-runs timeseries.csv has %s", path, name, strings.Join(counterColumns[:], ","))
		}
	}
	var rows []CounterRow
	last := math.Inf(-1)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, r.rep, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		r.rep.Rows++
		row, e := counterRow(rec, where, last)
		if e != nil {
			if err := r.reject(int64(line), e); err != nil {
				return nil, r.rep, err
			}
			continue
		}
		row.Line = int64(line)
		last = row.T
		rows = append(rows, row)
	}
	slices.SortFunc(r.rep.Skipped, func(a, b SkipCount) int { return strings.Compare(a.Reason, b.Reason) })
	r.rep.Read = int64(len(rows))
	if len(rows) == 0 {
		if r.rep.Rows == 0 {
			return nil, r.rep, fmt.Errorf("%s: no rows in the file", path)
		}
		return nil, r.rep, fmt.Errorf("%s: none of %d rows is usable%s", path, r.rep.Rows, r.rep.skipSummary())
	}
	return rows, r.rep, nil
}

// SkipTickOrder is the reason for a timeseries row whose tick is not after
// the previous usable one.
const SkipTickOrder = "tick_order"

func counterRow(rec []string, where [5]int, last float64) (CounterRow, *rowError) {
	var cells [5]string
	for c, i := range where {
		if i >= len(rec) || strings.TrimSpace(rec[i]) == "" {
			return CounterRow{}, bad(SkipMissingField, counterColumns[c], "missing")
		}
		cells[c] = strings.TrimSpace(rec[i])
	}
	var v [3]float64
	for c := range v {
		x, err := strconv.ParseFloat(cells[c], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return CounterRow{}, bad(SkipBadNumber, counterColumns[c], "%q is not a finite number", clipString(cells[c]))
		}
		if x < 0 {
			return CounterRow{}, bad(SkipNegative, counterColumns[c], "%v is negative", x)
		}
		v[c] = x
	}
	if !(v[0] > last) {
		return CounterRow{}, bad(SkipTickOrder, counterColumns[0], "tick %v is not after the previous row's %v", v[0], last)
	}
	var n [2]int64
	for c := range n {
		x, err := strconv.ParseInt(cells[3+c], 10, 64)
		if err != nil {
			return CounterRow{}, bad(SkipBadNumber, counterColumns[3+c], "%q is not a whole number", clipString(cells[3+c]))
		}
		if x < 0 {
			return CounterRow{}, bad(SkipNegative, counterColumns[3+c], "%d is negative", x)
		}
		n[c] = x
	}
	return CounterRow{T: v[0], PromptPerS: v[1], GenerationPerS: v[2], Running: n[0], Waiting: n[1]}, nil
}
