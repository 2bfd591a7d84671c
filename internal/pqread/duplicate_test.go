package pqread

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/stretchr/testify/require"
)

// docs/hardening.md, class 7: a Parquet table with a column name twice is refused
// when opened, naming the column, whichever columns the reader takes.
func TestDuplicateColumnRefused(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	var cols []arrow.Array
	for range 3 {
		bi := array.NewInt64Builder(memory.DefaultAllocator)
		bi.AppendValues([]int64{1, 2}, nil)
		cols = append(cols, bi.NewArray())
	}
	rec := array.NewRecord(schema, cols, 2)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())
	p := filepath.Join(t.TempDir(), "dup.parquet")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	_, err = Open(p)
	require.ErrorContains(t, err, p+": column a appears twice (columns 1 and 3)")
}
