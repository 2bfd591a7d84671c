package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/otlpingest"
)

type ingestOpts struct {
	out        string
	strict     bool
	allowEmpty bool
	workers    int
	maxDetails int
	maxRecord  int // MiB
	quiet      bool
}

func newIngestCmd() *cobra.Command {
	var o ingestOpts
	cmd := &cobra.Command{
		Use:   "ingest INPUT... -o DIR",
		Short: "Turn vLLM OTLP traces and KV-event logs into Parquet tables",
		Long: `ingest reads what a vLLM deployment with journey and step tracing writes and
turns it into five Parquet tables in DIR: requests, journey_events, steps,
request_snapshots and kv_events, plus manifest.json (row counts, input hashes,
schema version, and every record that was skipped or counted, and why).

Each INPUT is a file or a directory (its files are read in name order). The
format is detected from the content, not the name: OpenTelemetry Collector
file-exporter output as JSON lines, a single JSON document or length-prefixed
proto; vLLM's KV events subscriber JSON lines; any of them gzip- or
zstd-compressed. A trace may span several files, in any order.

Damaged or unexpected input (malformed lines, lines longer than
--max-record-mib, truncated compression, wrong attribute types, missing
attributes, unknown events, duplicate spans, events the SDK dropped,
requests missing one of their two spans) is counted and listed with file
and line; --strict makes the first one an error instead.
Inputs that hold neither a span nor a KV event (an empty file, "{}", bytes
that are no trace) are an error, "no spans found", naming them; nothing is
written unless --allow-empty is given.

The tables and the manifest replace earlier ones in DIR only when the
ingest succeeds; an input file that is one of them is refused.

Progress goes to stderr, the summary to stdout. The tables and the manifest
depend only on the inputs and their order.`,
		Example: `  calibrate ingest traces/ -o tables
  calibrate ingest otel-2026-11-20.jsonl.gz otel.jsonl kv_events.jsonl -o tables --strict`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.out == "" {
				return errors.New("ingest: -o DIR is required (where the tables go)")
			}
			if o.workers < 0 || o.workers > maxWorkers {
				return fmt.Errorf("--workers must be in [0, %d] (0: one per core), got %d", maxWorkers, o.workers)
			}
			if o.maxDetails < 1 {
				return fmt.Errorf("--max-issue-details must be >= 1 (issues listed per kind; the counts are always complete), got %d", o.maxDetails)
			}
			if o.maxRecord < 1 || o.maxRecord > 1<<20 {
				return fmt.Errorf("--max-record-mib must be in [1, %d], got %d", 1<<20, o.maxRecord)
			}
			return runIngest(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "output directory for the Parquet tables and manifest.json (created if needed)")
	f.BoolVar(&o.strict, "strict", false, "fail at the first skipped or counted record instead of counting it")
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "write empty tables when the inputs hold neither a span nor a KV event (default: fail with \"no spans found\")")
	f.IntVar(&o.workers, "workers", 0, "decoding goroutines, at most 256 (0: one per core)")
	f.IntVar(&o.maxDetails, "max-issue-details", 100, "issues listed with their location in the manifest, per kind (counts are always complete)")
	f.IntVar(&o.maxRecord, "max-record-mib", otlpingest.DefaultMaxRecordBytes>>20, "longest JSON line or document, or proto message, in MiB: a longer line is skipped and counted as record_too_large after reading at most this much of it")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress or timing on stderr")
	return cmd
}

// maxWorkers bounds --workers: each decoding goroutine holds a chunk
// buffer, so an absurd count is a memory error, not more speed.
const maxWorkers = 256

// expandInputs turns directories into their files, in name order, and
// checks that every input can be read before any work starts.
func expandInputs(args []string) ([]string, int64, error) {
	var files []string
	var total int64
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, 0, fmt.Errorf("input %s: %w", a, err)
		}
		if !st.IsDir() {
			files = append(files, a)
			total += st.Size()
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, 0, fmt.Errorf("input %s: %w", a, err)
		}
		names := []string{}
		for _, e := range entries {
			if e.Type().IsRegular() && e.Name()[0] != '.' {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, 0, fmt.Errorf("input %s: directory has no files", a)
		}
		for _, n := range names {
			p := filepath.Join(a, n)
			st, err := os.Stat(p)
			if err != nil {
				return nil, 0, fmt.Errorf("input %s: %w", p, err)
			}
			files = append(files, p)
			total += st.Size()
		}
	}
	return files, total, nil
}

func runIngest(stdout, stderr io.Writer, args []string, o ingestOpts) error {
	files, total, err := expandInputs(args)
	if err != nil {
		return err
	}
	// -o may not be a folder given as input: the next ingest of that
	// folder would read the tables and manifest as traces.
	if ot, err := os.Stat(o.out); err == nil && ot.IsDir() {
		for _, a := range args {
			if st, err := os.Stat(a); err == nil && os.SameFile(st, ot) {
				return fmt.Errorf("-o %s is also the input folder %s: the next ingest of it would read the tables as traces; give another folder", o.out, a)
			}
		}
	}
	var ins, outs []atomicfile.Named
	for _, f := range files {
		ins = append(ins, atomicfile.Named{Label: "input", Path: f})
	}
	for _, f := range otlpingest.OutputFiles(o.out) {
		outs = append(outs, atomicfile.Named{Label: "-o", Path: f, MadeDir: true})
	}
	if err := atomicfile.Check(ins, outs); err != nil {
		return err
	}
	var read atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // progress, only for runs long enough to need it
		defer close(done)
		if o.quiet {
			return
		}
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		printed := false
		for {
			select {
			case <-stop:
				if printed {
					fmt.Fprintln(stderr)
				}
				return
			case <-tick.C:
				n, el := read.Load(), time.Since(start).Seconds()
				fmt.Fprintf(stderr, "\ringest: %s of %s read (%.0f%%), %.0f MB/s   ",
					humanBytes(n), humanBytes(total), 100*float64(n)/float64(max(total, 1)), float64(n)/1e6/el)
				printed = true
			}
		}
	}()
	m, err := otlpingest.Ingest(otlpingest.FileSources(files), otlpingest.Options{
		OutDir: o.out, Workers: o.workers, Strict: o.strict, AllowEmpty: o.allowEmpty, MaxIssueDetails: o.maxDetails,
		MaxRecordBytes: o.maxRecord << 20,
		Tool:           "blis calibrate ingest (schema v" + fmt.Sprint(otlpingest.SchemaVersion) + ")",
		Progress:       func(n int64) { read.Store(n) },
	})
	close(stop)
	<-done
	if err != nil {
		var se *otlpingest.StrictError
		if errors.As(err, &se) {
			return fmt.Errorf("%s:%d: %s: %s (--strict; nothing written)", se.Issue.File, se.Issue.Record, se.Issue.Kind, se.Issue.Detail)
		}
		var ee *otlpingest.EmptyError
		if errors.As(err, &ee) {
			return fmt.Errorf("%w (nothing written; --allow-empty writes empty tables)", err)
		}
		return err
	}
	if !o.quiet {
		el := time.Since(start)
		fmt.Fprintf(stderr, "ingest: %s in %.1fs (%.0f MB/s)\n", humanBytes(total), el.Seconds(), float64(total)/1e6/el.Seconds())
	}
	return printIngestSummary(stdout, o.out, m)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// printIngestSummary fits on one screen: the inputs (the first ten), the
// tables, and the issues by kind with the first of each.
func printIngestSummary(w io.Writer, dir string, m *otlpingest.Manifest) error {
	var size, dec int64
	for _, in := range m.Inputs {
		size += in.Bytes
		dec += in.DecompressedBytes
	}
	fmt.Fprintf(w, "read %d input file(s): %s, %s decompressed\n", len(m.Inputs), humanBytes(size), humanBytes(dec))
	const maxFiles = 10
	for i, in := range m.Inputs {
		if i == maxFiles {
			fmt.Fprintf(w, "  ... and %d more (see manifest.json)\n", len(m.Inputs)-maxFiles)
			break
		}
		what := fmt.Sprintf("%d spans", in.Spans)
		if in.Format == otlpingest.FormatKVEvents {
			what = fmt.Sprintf("%d KV events", in.KVEvents)
		}
		fmt.Fprintf(w, "  %-40s %-13s %-5s %8d records  %s\n", in.Path, in.Format, in.Compression, in.Records, what)
	}
	var found int64
	for _, in := range m.Inputs {
		found += in.Spans + in.KVEvents
	}
	if found == 0 {
		fmt.Fprintln(w, "no spans found (nor KV events): the tables are empty (--allow-empty)")
	}
	fmt.Fprintf(w, "wrote %s (schema v%d):\n", dir, m.SchemaVersion)
	for _, t := range m.Tables {
		fmt.Fprintf(w, "  %-26s %10d rows\n", t.File, t.Rows)
	}
	if m.Issues.Total == 0 {
		fmt.Fprintln(w, "issues: none")
		return nil
	}
	fmt.Fprintf(w, "issues: %d (listed in %s)\n", m.Issues.Total, filepath.Join(dir, "manifest.json"))
	for _, c := range m.Issues.ByKind {
		first := ""
		for _, d := range m.Issues.Details {
			if d.Kind == c.Kind {
				first = fmt.Sprintf("%s:%d: %s", d.File, d.Record, d.Detail)
				break
			}
		}
		if len(first) > 100 {
			first = first[:97] + "..."
		}
		fmt.Fprintf(w, "  %-28s %8d  first: %s\n", c.Kind, c.Count, first)
	}
	return nil
}
