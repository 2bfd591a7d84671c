package otlpingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blis-sim/blis/internal/atomicfile"
)

// Options configure Ingest; zero values take defaults.
type Options struct {
	OutDir     string
	Workers    int // decoding goroutines; default GOMAXPROCS
	ChunkBytes int // default DefaultChunkBytes
	// MaxRecordBytes bounds one JSON line or document, or proto message;
	// default DefaultMaxRecordBytes (see ReadOptions).
	MaxRecordBytes int
	// Strict makes the first counted issue an error; nothing is written.
	Strict bool
	// AllowEmpty writes the (empty) tables of inputs that hold neither a
	// span nor a KV event; else Ingest returns an *EmptyError and writes
	// nothing.
	AllowEmpty bool
	// MaxIssueDetails caps the issues kept with their location, per kind;
	// counts are always complete. Default 100.
	MaxIssueDetails int
	// Tool names the program in the manifest and the Parquet created_by.
	Tool string
	// Progress is called with the input bytes read so far (compressed).
	Progress func(bytesRead int64)
}

// Manifest describes one ingest run. It holds no wall-clock time, so the
// same inputs give the same manifest.
type Manifest struct {
	SchemaVersion int          `json:"schema_version"`
	Tool          string       `json:"tool"`
	Strict        bool         `json:"strict"`
	Inputs        []FileInfo   `json:"inputs"`
	Tables        []TableInfo  `json:"tables"`
	Issues        IssueSummary `json:"issues"`
}

// TableInfo is one written table.
type TableInfo struct {
	Name    string   `json:"name"`
	File    string   `json:"file"`
	Rows    int64    `json:"rows"`
	Columns []Column `json:"columns"`
}

// IssueCount is the number of issues of one kind.
type IssueCount struct {
	Kind  IssueKind `json:"kind"`
	Count int64     `json:"count"`
}

// IssueSummary counts every issue and keeps the first few of each kind
// with their location, in input order.
type IssueSummary struct {
	Total           int64        `json:"total"`
	ByKind          []IssueCount `json:"by_kind"` // sorted by kind
	MaxDetails      int          `json:"max_details_per_kind"`
	Details         []Issue      `json:"details"`
	DetailsComplete bool         `json:"details_complete"` // false when a cap was hit
}

type issueSink struct {
	max    int
	counts map[IssueKind]int64
	sum    IssueSummary
}

func (s *issueSink) add(is []Issue) {
	for _, i := range is {
		s.counts[i.Kind]++
		s.sum.Total++
		if s.counts[i.Kind] <= int64(s.max) {
			s.sum.Details = append(s.sum.Details, i)
		}
	}
}

func (s *issueSink) summary() IssueSummary {
	out := s.sum
	out.MaxDetails = s.max
	out.ByKind = []IssueCount{}
	out.DetailsComplete = true
	for k, n := range s.counts {
		out.ByKind = append(out.ByKind, IssueCount{k, n})
		if n > int64(s.max) {
			out.DetailsComplete = false
		}
	}
	sort.Slice(out.ByKind, func(a, b int) bool { return out.ByKind[a].Kind < out.ByKind[b].Kind })
	if out.Details == nil {
		out.Details = []Issue{}
	}
	return out
}

// StrictError is returned by a strict run at the first issue.
type StrictError struct{ Issue Issue }

func (e *StrictError) Error() string { return "strict: " + e.Issue.String() }

// OutputFiles are the files Ingest writes into dir: the five tables and
// manifest.json.
func OutputFiles(dir string) []string {
	var out []string
	for _, name := range TableNames {
		out = append(out, filepath.Join(dir, name+".parquet"))
	}
	return append(out, filepath.Join(dir, "manifest.json"))
}

// outputs holds the five table writers and the group of temporary files
// they and the manifest are written to (internal/atomicfile): nothing
// replaces an earlier table until every output is complete.
type outputs struct {
	dir string
	// made are the folders openOutputs created, deepest first.
	made      []string
	files     atomicfile.Group
	requests  *tableWriter[RequestRow]
	journey   *tableWriter[JourneyEventRow]
	steps     *tableWriter[StepRow]
	snapshots *tableWriter[SnapshotRow]
	kv        *tableWriter[KVEventRow]
}

func create[R any](o *outputs, name string, defs []colDef[R], tool string) (*tableWriter[R], error) {
	f, err := o.files.Create(filepath.Join(o.dir, name+".parquet"), "table "+name)
	if err != nil {
		return nil, err
	}
	// The Parquet writer closes a sink that is an io.Closer; the file is
	// closed by its commit instead.
	return newTableWriter(name, defs, struct{ io.Writer }{f}, tool)
}

func openOutputs(dir, tool string) (*outputs, error) {
	o := &outputs{dir: dir}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		o.made = append(o.made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var err error
	if o.requests, err = create(o, TableRequests, requestCols, tool); err != nil {
		return o, err
	}
	if o.journey, err = create(o, TableJourneyEvents, journeyCols, tool); err != nil {
		return o, err
	}
	if o.steps, err = create(o, TableSteps, stepCols, tool); err != nil {
		return o, err
	}
	if o.snapshots, err = create(o, TableRequestSnapshots, snapshotCols, tool); err != nil {
		return o, err
	}
	o.kv, err = create(o, TableKVEvents, kvCols, tool)
	return o, err
}

// abort removes the temporary files, and the folders openOutputs made
// that are still empty: a run that fails leaves nothing behind.
func (o *outputs) abort() {
	o.files.Abort()
	for _, d := range o.made {
		os.Remove(d) // only an empty folder goes
	}
}

// close finishes every table (still under its temporary name) and
// describes them.
func (o *outputs) close() ([]TableInfo, error) {
	type tbl struct {
		name string
		rows int64
		cl   func() error
	}
	tbls := []tbl{
		{TableRequests, o.requests.rows, o.requests.close},
		{TableJourneyEvents, o.journey.rows, o.journey.close},
		{TableSteps, o.steps.rows, o.steps.close},
		{TableRequestSnapshots, o.snapshots.rows, o.snapshots.close},
		{TableKVEvents, o.kv.rows, o.kv.close},
	}
	var infos []TableInfo
	var errs []error
	for _, t := range tbls {
		if err := t.cl(); err != nil {
			errs = append(errs, err)
		}
		infos = append(infos, TableInfo{Name: t.name, File: t.name + ".parquet", Rows: t.rows, Columns: TableColumns(t.name)})
	}
	return infos, errors.Join(errs...)
}

// EmptyError is returned when the inputs hold neither a span nor a KV
// event, so that every table would be empty (Options.AllowEmpty accepts
// them): an empty file, "{}" or random bytes would otherwise look like a
// successful ingest. Nothing is written. (A KV events log alone is not
// empty: its events fill the kv_events table.)
type EmptyError struct {
	Inputs []FileInfo
	Issues IssueSummary
}

func (e *EmptyError) Error() string {
	var b strings.Builder
	b.WriteString("no spans found (nor KV events) in ")
	for i, in := range e.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 10 {
			fmt.Fprintf(&b, "and %d more", len(e.Inputs)-i)
			break
		}
		fmt.Fprintf(&b, "%s (%s, %d records, %d KV events)", in.Path, in.Format, in.Records, in.KVEvents)
	}
	if len(e.Inputs) == 0 {
		b.WriteString("the inputs (none read)")
	}
	if e.Issues.Total > 0 {
		fmt.Fprintf(&b, "; %d records skipped or counted", e.Issues.Total)
		if len(e.Issues.Details) > 0 {
			fmt.Fprintf(&b, ", the first %s", e.Issues.Details[0])
		}
	}
	return b.String()
}

// Ingest reads trace and KV-event files and writes the five tables and
// manifest.json into opt.OutDir. Inputs are read in the order given; the
// output depends only on their content and order, not on the number of
// workers. Memory holds the chunks being decoded, one Arrow record batch
// per table, and the requests whose other half has not arrived yet.
func Ingest(inputs []Source, opt Options) (*Manifest, error) {
	if opt.MaxIssueDetails <= 0 {
		opt.MaxIssueDetails = 100
	}
	if opt.Tool == "" {
		opt.Tool = "blis calibrate ingest"
	}
	out, err := openOutputs(opt.OutDir, opt.Tool)
	if err != nil {
		if out != nil {
			out.abort()
		}
		return nil, err
	}
	sink := &issueSink{max: opt.MaxIssueDetails, counts: map[IssueKind]int64{}}
	m := &Manifest{SchemaVersion: SchemaVersion, Tool: opt.Tool, Strict: opt.Strict, Inputs: []FileInfo{}}
	rows := &Rows{}
	join := NewJoiner()

	// flushIssues moves the collected issues to the sink, or stops a strict run.
	flushIssues := func(is ...[]Issue) error {
		for _, list := range is {
			if opt.Strict && len(list) > 0 {
				return &StrictError{list[0]}
			}
			sink.add(list)
		}
		return nil
	}
	drain := func() error {
		if err := out.journey.append(rows.Journey); err != nil {
			return err
		}
		if err := out.steps.append(rows.Steps); err != nil {
			return err
		}
		if err := out.snapshots.append(rows.Snapshots); err != nil {
			return err
		}
		if err := out.requests.append(join.Rows); err != nil {
			return err
		}
		err := flushIssues(rows.Issues, join.Issues)
		rows.Journey, rows.Steps, rows.Snapshots, rows.Issues = rows.Journey[:0], rows.Steps[:0], rows.Snapshots[:0], rows.Issues[:0]
		join.Rows, join.Issues = join.Rows[:0], join.Issues[:0]
		return err
	}

	err = ReadSources(inputs, ReadOptions{Workers: opt.Workers, ChunkBytes: opt.ChunkBytes, Progress: opt.Progress,
		MaxRecordBytes: opt.MaxRecordBytes, recycle: true}, func(b *Batch) error {
		// Issues are passed on in input (record) order, whatever the chunking:
		// the reader's own issues interleaved with those of the spans.
		k := 0
		for i := range b.Spans {
			j := k
			for j < len(b.Issues) && b.Issues[j].Record < b.Spans[i].Record {
				j++
			}
			if err := flushIssues(b.Issues[k:j]); err != nil {
				return err
			}
			k = j
			if join.AddSpan(b.File, &b.Spans[i]) {
				rows.AddSpan(b.File, &b.Spans[i])
			}
			if err := flushIssues(join.Issues, rows.Issues); err != nil {
				return err
			}
			join.Issues, rows.Issues = join.Issues[:0], rows.Issues[:0]
		}
		if err := flushIssues(b.Issues[k:]); err != nil {
			return err
		}
		if err := out.kv.append(b.KVEvents); err != nil {
			return err
		}
		if b.FileDone != nil {
			m.Inputs = append(m.Inputs, *b.FileDone)
		}
		return drain()
	})
	if err == nil {
		join.Finish()
		err = drain()
	}
	defer out.abort()
	if err != nil {
		return nil, err
	}
	if m.Tables, err = out.close(); err != nil {
		return nil, err
	}
	m.Issues = sink.summary()
	var found int64
	for _, in := range m.Inputs {
		found += in.Spans + in.KVEvents
	}
	if found == 0 && !opt.AllowEmpty {
		return nil, &EmptyError{Inputs: m.Inputs, Issues: m.Issues}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := out.files.WriteFile(filepath.Join(opt.OutDir, "manifest.json"), "manifest", append(data, '\n')); err != nil {
		return nil, err
	}
	if err := out.files.Commit(); err != nil {
		return nil, err
	}
	return m, nil
}
