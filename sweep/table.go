package sweep

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/columns"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/internal/tracevocab"
)

// Formats are the table formats, by file extension.
var Formats = []string{"csv", "parquet"}

// FormatOf is the table format of path, by its extension.
func FormatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return "csv", nil
	case ".parquet":
		return "parquet", nil
	}
	return "", fmt.Errorf("%s: a table is .csv or .parquet", path)
}

// cells are row's values in column order, as the CSV writes them.
func (p *Plan) cells(row *Row) []string {
	out := make([]string, 0, len(p.Columns))
	out = append(out, fmtInt(int64(p.Point(row.Run))))
	out = append(out, p.Grid.Values(p.Point(row.Run))...)
	out = append(out, fmtInt(p.Seed(row.Run)), row.Status, row.Error)
	return append(out, row.Cells...)
}

// WriteCSV writes rows (sorted by run) as CSV: a header of the column
// names, then one line per row, fields quoted only when they must be
// (RFC 4180), lines ended by \n.
func (p *Plan) WriteCSV(w io.Writer, rows []Row) error {
	return writeCSV(w, p.Columns, p.allCells(rows))
}

func (p *Plan) allCells(rows []Row) [][]string {
	cells := make([][]string, len(rows))
	for i := range rows {
		cells[i] = p.cells(&rows[i])
	}
	return cells
}

// writeCSV writes a table: the columns' names, then the cells' lines.
func writeCSV(w io.Writer, cols []Column, cells [][]string) error {
	cw := csv.NewWriter(w)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if err := cw.Write(names); err != nil {
		return err
	}
	for i := range cells {
		if err := cw.Write(cells[i]); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Parquet metadata keys: the table's kind (the key otlpingest's tables
// carry) and its column names, checked when a table is read back.
const (
	metaTable   = tracevocab.MetaTable
	metaColumns = "blis.sweep.columns"
)

// WriteParquet writes rows (sorted by run) as one Parquet row group:
// Int columns INT64, Float DOUBLE, String UTF-8 byte arrays; the swept
// keys and the fixed columns required, the metrics optional (null where
// the CSV is empty). Plain encoding, Snappy pages, fixed created_by: the
// same rows give the same bytes.
func (p *Plan) WriteParquet(w io.Writer, rows []Row) error {
	return writeParquet(w, "sweep", p.Columns, p.allCells(rows))
}

// writeParquet writes a table of kind table (the blis.table metadata).
func writeParquet(w io.Writer, table string, cols []Column, cells [][]string) error {
	var fields schema.FieldList
	for _, c := range cols {
		rep := parquet.Repetitions.Required
		if c.Metric {
			rep = parquet.Repetitions.Optional
		}
		var n schema.Node
		var err error
		switch c.Kind {
		case Int:
			n, err = schema.NewPrimitiveNode(c.Name, rep, parquet.Types.Int64, -1, -1)
		case Float:
			n, err = schema.NewPrimitiveNode(c.Name, rep, parquet.Types.Double, -1, -1)
		default:
			n, err = schema.NewPrimitiveNodeLogical(c.Name, rep, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		fields = append(fields, n)
	}
	root, err := schema.NewGroupNode(table, parquet.Repetitions.Required, fields, -1)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy("blis sweep"),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(math.MaxInt64),
	)
	fw := file.NewParquetWriter(w, root, file.WithWriterProps(props))
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if err := fw.AppendKeyValueMetadata(metaTable, table); err != nil {
		return err
	}
	if err := fw.AppendKeyValueMetadata(metaColumns, strings.Join(names, "\n")); err != nil {
		return err
	}
	rg := fw.AppendRowGroup()
	for j, c := range cols {
		cw, err := rg.NextColumn()
		if err != nil {
			return err
		}
		if err := writeColumn(cw, c, cells, j); err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		if err := cw.Close(); err != nil {
			return err
		}
	}
	if err := rg.Close(); err != nil {
		return err
	}
	return fw.Close()
}

// writeColumn writes column j of cells; "" is null in a metric column.
func writeColumn(cw file.ColumnChunkWriter, c Column, cells [][]string, j int) error {
	var def []int16
	if c.Metric {
		def = make([]int16, len(cells))
	}
	present := func(i int) bool {
		ok := !c.Metric || cells[i][j] != ""
		if ok && def != nil {
			def[i] = 1
		}
		return ok
	}
	var err error
	switch w := cw.(type) {
	case *file.Int64ColumnChunkWriter:
		var v []int64
		for i := range cells {
			if present(i) {
				n, perr := strconv.ParseInt(cells[i][j], 10, 64)
				if perr != nil {
					return perr
				}
				v = append(v, n)
			}
		}
		_, err = w.WriteBatch(v, def, nil)
	case *file.Float64ColumnChunkWriter:
		var v []float64
		for i := range cells {
			if present(i) {
				x, perr := strconv.ParseFloat(cells[i][j], 64)
				if perr != nil {
					return perr
				}
				v = append(v, x)
			}
		}
		_, err = w.WriteBatch(v, def, nil)
	case *file.ByteArrayColumnChunkWriter:
		var v []parquet.ByteArray
		for i := range cells {
			if present(i) {
				v = append(v, parquet.ByteArray(cells[i][j]))
			}
		}
		_, err = w.WriteBatch(v, def, nil)
	default:
		return fmt.Errorf("unexpected column writer %T", cw)
	}
	return err
}

// Write writes rows in format ("csv" or "parquet").
func (p *Plan) Write(w io.Writer, rows []Row, format string) error {
	if format == "parquet" {
		return p.WriteParquet(w, rows)
	}
	return p.WriteCSV(w, rows)
}

// ReadFile reads the rows of a table this plan's sweep wrote (CSV or
// Parquet, told by content), for resuming or merging shards: every row
// must be one of the plan's runs with its swept values, and the columns
// the plan's. Rows come back sorted by run; a run given twice must be
// the same row twice.
func (p *Plan) ReadFile(path string) ([]Row, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	var rows []Row
	if bytes.HasPrefix(data, []byte("PAR1")) {
		rows, err = p.readParquet(path)
	} else {
		rows, err = p.ReadCSV(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// ReadCSV reads rows written by WriteCSV (see ReadFile).
func (p *Plan) ReadCSV(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // the header's count, checked against the plan's columns
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty: not a table of blis sweep")
	}
	if err != nil {
		return nil, p.columnsErr(err)
	}
	columns.TrimBOM(header)
	if err := p.checkColumns(header); err != nil {
		return nil, err
	}
	var rows []Row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		row, err := p.parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", line-1, err)
		}
		rows = append(rows, row)
	}
	return dedupe(rows)
}

func (p *Plan) columnsErr(err error) error {
	return fmt.Errorf("%w (not a table of this sweep? its columns would be %s)", err, clipNames(p.names()))
}

// clipNames lists names for an error: each clipped, at most 64 of them.
func clipNames(names []string) string {
	var out []string
	for i, n := range names {
		if i == 64 {
			out = append(out, fmt.Sprintf("... (%d more)", len(names)-i))
			break
		}
		out = append(out, clip.String(n))
	}
	return strings.Join(out, ",")
}

func (p *Plan) names() []string {
	out := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		out[i] = c.Name
	}
	return out
}

func (p *Plan) checkColumns(got []string) error {
	want := p.names()
	if strings.Join(got, "\x00") == strings.Join(want, "\x00") {
		return nil
	}
	// The first column that differs, and the lists around it.
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	name := func(s []string) string {
		if i < len(s) {
			return fmt.Sprintf("%q", clip.String(s[i]))
		}
		return "none"
	}
	from := max(0, i-2)
	return fmt.Errorf("its columns are not this sweep's (another sweep's table?): column %d is %s where this sweep's is %s (%d columns, this sweep %d): got %s, want %s",
		i+1, name(got), name(want), len(got), len(want), clipNames(got[from:min(len(got), from+16)]), clipNames(want[from:min(len(want), from+16)]))
}

// parseRow checks one record (cells in column order) against the plan.
func (p *Plan) parseRow(rec []string) (Row, error) {
	point, err := strconv.ParseInt(rec[0], 10, 64)
	if err != nil || point < 0 || point >= int64(p.Points) {
		return Row{}, fmt.Errorf("point %q is not a point of this sweep (0 to %d)", clip.String(rec[0]), p.Points-1)
	}
	na := len(p.Grid.Axes)
	want := p.Grid.Values(int(point))
	for j := range na {
		if !sameValue(p.Kinds[j], rec[1+j], want[j]) {
			return Row{}, fmt.Errorf("point %d has %s = %s in the table but %s in this sweep (another sweep's table?)", point, clip.String(p.Grid.Axes[j].Key), clip.String(rec[1+j]), clip.String(want[j]))
		}
	}
	// A point that does not resolve has no run.seed: its seeds are 0 to K-1.
	seed, err := strconv.ParseInt(rec[1+na], 10, 64)
	k := seed - p.seed[point]
	if err != nil || k < 0 || k >= int64(p.Seeds) {
		return Row{}, fmt.Errorf("point %d: seed %q is not one of this sweep's (%d to %d)", point, clip.String(rec[1+na]), p.seed[point], p.seed[point]+int64(p.Seeds)-1)
	}
	row := Row{Run: int(point)*p.Seeds + int(k), Status: rec[2+na], Error: rec[3+na], Cells: make([]string, len(p.metrics))}
	switch row.Status {
	case StatusOK:
		if row.Error != "" {
			return Row{}, fmt.Errorf("run %d: status ok with an error", row.Run)
		}
	case StatusError:
		if row.Error == "" {
			return Row{}, fmt.Errorf("run %d: status error without its error", row.Run)
		}
		for _, c := range rec[4+na:] {
			if c != "" {
				return Row{}, fmt.Errorf("run %d: status error with metrics", row.Run)
			}
		}
	default:
		return Row{}, fmt.Errorf("run %d: status %q is neither %s nor %s", row.Run, clip.String(row.Status), StatusOK, StatusError)
	}
	for j, m := range p.metrics {
		s := rec[4+na+j]
		if s == "" {
			continue
		}
		switch m.Kind {
		case Int:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return Row{}, fmt.Errorf("run %d: %s = %q is not a whole number", row.Run, m.Name, clip.String(s))
			}
			s = fmtInt(n)
		case Float:
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return Row{}, fmt.Errorf("run %d: %s = %q is not a number", row.Run, m.Name, clip.String(s))
			}
			s = fmtFloat(x)
		}
		row.Cells[j] = s
	}
	return row, nil
}

// sameValue compares a swept value as read with the plan's: numerically
// for number columns (a Parquet double reads back as 0.5 for "0.50").
func sameValue(k Kind, got, want string) bool {
	if k == String || got == want {
		return got == want
	}
	a, err1 := strconv.ParseFloat(got, 64)
	b, err2 := strconv.ParseFloat(want, 64)
	return err1 == nil && err2 == nil && a == b
}

// dedupe sorts rows by run and drops a run's repeats, refusing repeats
// that differ.
func dedupe(rows []Row) ([]Row, error) {
	sortRows(rows)
	out := rows[:0]
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Run == r.Run {
			if !sameRow(&out[n-1], &r) {
				return nil, fmt.Errorf("run %d is given twice, with different values", r.Run)
			}
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

func sameRow(a, b *Row) bool {
	return a.Run == b.Run && a.Status == b.Status && a.Error == b.Error && strings.Join(a.Cells, "\x00") == strings.Join(b.Cells, "\x00")
}

// readParquet reads a table WriteParquet wrote.
func (p *Plan) readParquet(path string) ([]Row, error) {
	f, err := pqread.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Meta(metaTable) != "sweep" {
		return nil, errors.New("not a table of blis sweep (no blis.table metadata)")
	}
	if err := p.checkColumns(strings.Split(f.Meta(metaColumns), "\n")); err != nil {
		return nil, err
	}
	n := int(f.NumRows())
	recs := make([][]string, n)
	for i := range recs {
		recs[i] = make([]string, len(p.Columns))
	}
	for j, c := range p.Columns {
		switch c.Kind {
		case Int:
			col, err := f.Int64(c.Name)
			if err != nil {
				return nil, err
			}
			err = fill(recs, j, col, func(v int64) string { return fmtInt(v) })
			if err != nil {
				return nil, err
			}
		case Float:
			col, err := f.Float64(c.Name)
			if err != nil {
				return nil, err
			}
			if err := fill(recs, j, col, func(v float64) string { return fmtFloat(v) }); err != nil {
				return nil, err
			}
		default:
			col, err := f.String(c.Name)
			if err != nil {
				return nil, err
			}
			if err := fill(recs, j, col, func(v string) string { return v }); err != nil {
				return nil, err
			}
		}
	}
	rows := make([]Row, 0, n)
	for i, rec := range recs {
		row, err := p.parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i+1, err)
		}
		rows = append(rows, row)
	}
	return dedupe(rows)
}

func fill[T any](recs [][]string, j int, col pqread.Column[T], f func(T) string) error {
	if len(col.V) != len(recs) {
		return fmt.Errorf("a column of %d values in a table of %d rows", len(col.V), len(recs))
	}
	for i := range recs {
		if col.OK(i) {
			recs[i][j] = f(col.V[i])
		}
	}
	return nil
}
