package pqread

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
)

// BenchmarkReadAll reads every column of a table: BLIS_PQREAD_BENCH (a
// Parquet file of flat int64, double, boolean and string columns, such as
// the fit benchmark's 10M-step table), or else a 1M-row table of the test
// schema written once per run (snappy, in 64K-row groups).
func BenchmarkReadAll(b *testing.B) {
	path := os.Getenv("BLIS_PQREAD_BENCH")
	if path == "" {
		path = filepath.Join(b.TempDir(), "t.parquet")
		writeFile(b, path, makeTable(1<<20), 1<<16, compress.Codecs.Snappy)
	}
	pr, err := file.OpenParquetFile(path, false)
	if err != nil {
		b.Fatal(err)
	}
	sc := pr.MetaData().Schema
	cols := make([]*parquetColumn, 0, sc.NumColumns())
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		cols = append(cols, &parquetColumn{name: c.Name(), typ: c.PhysicalType()})
	}
	pr.Close()
	if st, err := os.Stat(path); err == nil {
		b.SetBytes(st.Size())
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cols {
			var err error
			switch c.typ {
			case parquet.Types.Int64:
				_, err = f.Int64(c.name)
			case parquet.Types.Double:
				_, err = f.Float64(c.name)
			case parquet.Types.Boolean:
				_, err = f.Bool(c.name)
			case parquet.Types.ByteArray:
				_, err = f.String(c.name)
			default:
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

type parquetColumn struct {
	name string
	typ  parquet.Type
}
