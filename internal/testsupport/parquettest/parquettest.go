// Package parquettest reads a Parquet file back into rows of plain Go
// values for tests, independently of the code that wrote it.
package parquettest

import (
	"context"
	"os"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// Row maps a column name to its value: string, int64, int32, float64, bool,
// or nil for null.
type Row = map[string]any

// Read returns the file's key-value metadata (only the keys asked for) and
// its rows. It fails the test on any error or unexpected column type.
func Read(tb testing.TB, path string, metaKeys ...string) (map[string]string, []Row) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	defer pr.Close()
	md := map[string]string{}
	for _, k := range metaKeys {
		if v := pr.MetaData().KeyValueMetadata().FindValue(k); v != nil {
			md[k] = *v
		}
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1024}, memory.DefaultAllocator)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1024)
	defer tr.Release()
	var rows []Row
	for tr.Next() {
		rec := tr.Record()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := Row{}
			for c, col := range rec.Columns() {
				name := rec.ColumnName(c)
				if col.IsNull(i) {
					row[name] = nil
					continue
				}
				switch a := col.(type) {
				case *array.String:
					row[name] = a.Value(i)
				case *array.Int64:
					row[name] = a.Value(i)
				case *array.Int32:
					row[name] = a.Value(i)
				case *array.Float64:
					row[name] = a.Value(i)
				case *array.Boolean:
					row[name] = a.Value(i)
				default:
					tb.Fatalf("%s: column %s has unexpected type %s", path, name, col.DataType())
				}
			}
			rows = append(rows, row)
		}
	}
	return md, rows
}
