package replay

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
	"github.com/blis-sim/blis/validate"
)

// Measured is a measured run, whatever it was read from: its requests
// with their measured latencies, where those were measured, the
// deployment facts it records, and its engine counters. A reader of
// another source (ingested trace tables, say) fills the same fields; Run
// needs nothing else.
type Measured struct {
	// Source names the measured run in messages (a file).
	Source string
	// Records are the requests in arrival order (records.Record: arrival,
	// lengths, measured TTFT, ITL and E2E, -1 where unknown).
	Records []records.Record
	// Read counts the rows read and skipped.
	Read records.Report
	// At is where the latencies were measured: records.AtEngine or
	// records.AtClient.
	At string
	// ArrivalAtEngine says that the arrivals are the engine's own (vLLM's
	// per-request stats of a run that sent token ids to AsyncLLM, no API
	// server: vllm-runs), so the replay leaves the API-side processing
	// out (sim.Pipeline.ArrivalAtEngine). Ingested tables' arrivals are
	// the API server's.
	ArrivalAtEngine bool
	// Meta is what the run records of its deployment (nil: nothing);
	// Run applies it to the experiment under the flags given.
	Meta *records.RunMeta
	// Counters are the run's per-tick engine counters (nil: none).
	Counters *Counters
	// Settings are deployment facts of another source than a meta.json
	// (ingested tables: ReadTables); Run applies each whose flag was not
	// given, and fails with its Missing when it has one.
	Settings []Setting
	// Compare, when not nil, says which records are compared (blis
	// validate --from: the requests a fit held out); the others are
	// replayed but not compared. CompareNote says which, for the report.
	Compare     []bool
	CompareNote string
}

// Setting is a deployment fact with the meaning of an experiment flag.
type Setting struct {
	Flag, Value string
	Source      string // where the value was read, for errors
	// Missing, when set, is the error to give when the flag was not given:
	// the source lacks a fact the replay needs.
	Missing string
}

// Counters are a run's per-tick engine counters (vLLM's prompt and
// generation throughput, running and waiting requests).
type Counters struct {
	Path string
	// Given says the user named the file (--counters); otherwise it was
	// found next to the records.
	Given bool
	Read  records.Report
	Ticks []validate.CounterSecond
	// TickUs is the tick length: the median spacing of the rows, µs.
	TickUs int64
}

// label names where the counters came from: the flag, or the file found
// next to the records.
func (c *Counters) label() string {
	if c.Given {
		return "--counters"
	}
	return "engine counters"
}

// ReadOptions say how to read a per-request records file.
type ReadOptions struct {
	// Format is one of records.Formats() with measured latencies, or
	// auto (or "") to detect it.
	Format string
	// Meta is a vllm-runs meta.json ("": the one next to a vllm-runs
	// file, when there is one).
	Meta string
	// Counters is an engine counters file ("": the timeseries.csv next
	// to a vllm-runs file, when there is one).
	Counters string
	// From and Coefficients are TablesOptions' (Read: for the tables of
	// calibrate ingest only).
	From, Coefficients string
	// Strict fails on the first unreadable row instead of counting it.
	Strict bool
}

// Read reads a measured run: the tables of calibrate ingest (ReadTables)
// when path is one or Format says so, else a per-request records file
// (ReadRecords). Options that belong to the other kind of input are
// refused.
func Read(path string, o ReadOptions) (*Measured, error) {
	// A FIFO or device would block or never end the reading.
	if st, err := os.Stat(path); err == nil {
		if err := inputfile.Special(path, st, "give the file a run was recorded to"); err != nil {
			return nil, err
		}
	}
	if !o.tables(path) {
		if o.From != "" {
			return nil, errors.New("--from compares the requests a fit held out: it needs the tables of calibrate ingest (TABLES), not a RECORDS file")
		}
		return ReadRecords(path, o)
	}
	if o.Meta != "" || o.Counters != "" {
		return nil, errors.New("--meta and --counters describe a per-request RECORDS file; the tables of calibrate ingest carry their own")
	}
	return ReadTables(path, TablesOptions{Coefficients: o.Coefficients, From: o.From, Strict: o.Strict})
}

// tables says whether path is read as the tables of calibrate ingest.
func (o ReadOptions) tables(path string) bool {
	return o.Format == TablesFormat || ((o.Format == "" || o.Format == "auto") && IsTables(path))
}

// ReadRecords reads a per-request records file (vllm-runs, vllm-bench,
// inference-perf), with the meta.json and engine counters that go with
// it. Rows skipped are counted in Read and Counters.Read.
func ReadRecords(path string, o ReadOptions) (*Measured, error) {
	format := o.Format
	if format == "" {
		format = "auto"
	}
	recs, rep, err := records.Read(path, format, records.Options{Strict: o.Strict})
	if err != nil {
		return nil, err
	}
	m := &Measured{Source: path, Records: recs, Read: rep, At: records.MeasuredAt(rep.Format), ArrivalAtEngine: rep.Format == records.VLLMRuns}
	if m.At == "" {
		return nil, fmt.Errorf("%s: %s records carry no measured latencies to compare with; use %s", path, rep.Format,
			strings.Join([]string{records.VLLMRuns, records.VLLMBench, records.InferencePerf}, ", "))
	}
	metaPath := o.Meta
	if metaPath == "" && rep.Format == records.VLLMRuns && exists(records.MetaPath(path)) {
		metaPath = records.MetaPath(path)
	}
	if metaPath != "" {
		if m.Meta, err = records.ReadRunMeta(metaPath); err != nil {
			return nil, fmt.Errorf("--meta: %w", err)
		}
	}
	c := &Counters{Path: o.Counters, Given: o.Counters != ""}
	if c.Path == "" && rep.Format == records.VLLMRuns && exists(records.CountersPath(path)) {
		c.Path = records.CountersPath(path)
	}
	if c.Path != "" {
		if err := c.read(o.Strict); err != nil {
			return nil, err
		}
		m.Counters = c
	}
	return m, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// read reads the counters file and finds the tick length: the median
// spacing of the ticks, rounded to the µs.
func (c *Counters) read(strict bool) error {
	rows, rep, err := records.ReadCounters(c.Path, records.Options{Strict: strict})
	if err != nil {
		return fmt.Errorf("%s: %w", c.label(), err)
	}
	c.Read = rep
	if len(rows) < 2 {
		return fmt.Errorf("%s %s: %d usable row; the tick length needs two", c.label(), c.Path, len(rows))
	}
	gaps := make([]float64, len(rows)-1)
	for i := range gaps {
		gaps[i] = rows[i+1].T - rows[i].T
	}
	slices.Sort(gaps)
	tick := gaps[(len(gaps)-1)/2]
	c.TickUs = int64(math.Round(tick * 1e6))
	if c.TickUs <= 0 || c.TickUs > sim.MaxDurationUs {
		return fmt.Errorf("%s %s: ticks %v s apart (the median spacing of column t) is not a usable window", c.label(), c.Path, tick)
	}
	c.Ticks = make([]validate.CounterSecond, len(rows))
	for i, r := range rows {
		c.Ticks[i] = validate.CounterSecond{PromptPerS: r.PromptPerS, GenerationPerS: r.GenerationPerS, Running: r.Running, Waiting: r.Waiting}
	}
	return nil
}

// Skips are the rows the reading skipped, one line each ("FILE: skipped
// N rows: REASON (first at line L)"), records first, then counters.
func (m *Measured) Skips() []string {
	var out []string
	add := func(path string, rep records.Report) {
		for _, s := range rep.Skipped {
			out = append(out, fmt.Sprintf("%s: skipped %d rows: %s (first at line %d)", path, s.Count, s.Reason, s.FirstLine))
		}
	}
	add(m.Source, m.Read)
	if c := m.Counters; c != nil {
		add(c.Path, c.Read)
	}
	return out
}

// Inputs are the files ReadRecords may read for path, labelled for
// errors: an output must be none of them (atomicfile.Check).
func (o ReadOptions) Inputs(path string) []atomicfile.Named {
	if o.tables(path) {
		return TablesInputs(path)
	}
	return []atomicfile.Named{{Label: "RECORDS", Path: path}, {Label: "--meta", Path: o.Meta},
		{Label: "meta.json of RECORDS", Path: records.MetaPath(path)}, {Label: "--counters", Path: o.Counters},
		{Label: "timeseries.csv of RECORDS", Path: records.CountersPath(path)}}
}
