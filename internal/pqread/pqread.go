// Package pqread reads whole columns of a Parquet file into Go slices.
//
// Every read runs on the caller's goroutine: the Arrow reader panics on some
// corrupt files (nil column chunk metadata, for example), and only a panic on
// the caller's goroutine can be recovered and turned into an error that names
// the file and column. Nulls come back as a validity slice.
//
// A damaged file must not take the machine's memory either: the Arrow reader
// allocates what page headers claim (and, in v17, keeps every buffer of the
// pages it skips until the column chunk ends), so all its allocations go
// through an allocator with a budget; a footer row count is checked
// against the row groups, and columns are sized from it only up to
// MaxPrealloc rows, beyond which they grow with the values actually read:
// counts that agree can still be damaged (or crafted) together.
package pqread

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// File is an open Parquet file.
type File struct {
	Path   string
	f      *os.File
	pr     *file.Reader
	fr     *pqarrow.FileReader
	schema *arrow.Schema
	rows   int64
	mem    *budget
}

// MemoryBudget bounds the bytes the Arrow reader may hold at once while
// reading one file. A valid file needs a few pages and one batch (tens of
// MiB); only a damaged page header asks for more.
const MemoryBudget = 1 << 30

var errBudget = errors.New("page sizes exceed the reader's memory budget")

// budget is a memory.Allocator that panics with errBudget when the bytes
// outstanding would exceed limit; the panic is recovered by Open and read.
type budget struct {
	mem   memory.GoAllocator
	used  int
	limit int
}

func (b *budget) charge(n int) {
	if n < 0 || n > b.limit-b.used {
		panic(errBudget)
	}
	b.used += n
}

func (b *budget) Allocate(size int) []byte {
	b.charge(size)
	return b.mem.Allocate(size)
}

func (b *budget) Reallocate(size int, old []byte) []byte {
	if size < 0 {
		panic(errBudget)
	}
	if d := size - len(old); d > 0 {
		b.charge(d)
	} else {
		b.used += d
	}
	return b.mem.Reallocate(size, old)
}

func (b *budget) Free(buf []byte) { b.used -= len(buf) }

// Open opens the Parquet file at path.
func Open(path string) (_ *File, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: corrupt Parquet file: %v", path, p)
		}
		if err != nil {
			f.Close()
		}
	}()
	mem := &budget{limit: MemoryBudget}
	pr, err := file.NewParquetReader(f, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file: %w", path, err)
	}
	// Sizes are taken from the row count: it must match the row groups'.
	var rows int64
	for i := range pr.NumRowGroups() {
		n := pr.MetaData().RowGroup(i).NumRows()
		if n < 0 || rows+n < rows {
			return nil, fmt.Errorf("%s: corrupt Parquet file: row group %d has %d rows", path, i, n)
		}
		rows += n
	}
	if rows != pr.NumRows() {
		return nil, fmt.Errorf("%s: corrupt Parquet file: footer says %d rows, row groups hold %d", path, pr.NumRows(), rows)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkChunks(f, st.Size(), pr); err != nil {
		return nil, fmt.Errorf("%s: corrupt Parquet file: %w", path, err)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Path: path, f: f, pr: pr, fr: fr, schema: sc, rows: rows, mem: mem}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// NumRows is the number of rows in the file.
func (f *File) NumRows() int64 { return f.rows }

// Meta returns the file's key-value metadata value for key, or "" when the
// key is absent.
func (f *File) Meta(key string) string {
	if v := f.pr.MetaData().KeyValueMetadata().FindValue(key); v != nil {
		return *v
	}
	return ""
}

// Has reports whether the file has a column named col.
func (f *File) Has(col string) bool { return len(f.schema.FieldIndices(col)) > 0 }

// Column is one column read whole. Valid is nil when no value is null.
type Column[T any] struct {
	V     []T
	Valid []bool
}

// OK reports whether row i is not null.
func (c *Column[T]) OK(i int) bool { return c.Valid == nil || c.Valid[i] }

// Int64 reads an int64 column.
func (f *File) Int64(col string) (Column[int64], error) {
	c := Column[int64]{V: make([]int64, 0, prealloc(f.NumRows()))}
	err := f.read(col, arrow.PrimitiveTypes.Int64, func(a arrow.Array) {
		c.V = append(c.V, a.(*array.Int64).Int64Values()...)
	}, &c.Valid)
	return c, err
}

// Float64 reads a double column.
func (f *File) Float64(col string) (Column[float64], error) {
	c := Column[float64]{V: make([]float64, 0, prealloc(f.NumRows()))}
	err := f.read(col, arrow.PrimitiveTypes.Float64, func(a arrow.Array) {
		c.V = append(c.V, a.(*array.Float64).Float64Values()...)
	}, &c.Valid)
	return c, err
}

// Bool reads a boolean column.
func (f *File) Bool(col string) (Column[bool], error) {
	c := Column[bool]{V: make([]bool, 0, prealloc(f.NumRows()))}
	err := f.read(col, arrow.FixedWidthTypes.Boolean, func(a arrow.Array) {
		b := a.(*array.Boolean)
		for i := range b.Len() {
			c.V = append(c.V, b.Value(i))
		}
	}, &c.Valid)
	return c, err
}

// String reads a string column.
func (f *File) String(col string) (Column[string], error) {
	c := Column[string]{V: make([]string, 0, prealloc(f.NumRows()))}
	err := f.read(col, arrow.BinaryTypes.String, func(a arrow.Array) {
		s := a.(*array.String)
		for i := range s.Len() {
			c.V = append(c.V, s.Value(i))
		}
	}, &c.Valid)
	return c, err
}

// MaxPrealloc is the most rows a column is sized for before it is read
// (128 MiB of int64): a valid table of more rows (the fit benchmark reads
// 10M) grows past it as its values come, while a row count no page holds
// cannot allocate what it claims (2^50 rows would panic in makeslice).
const MaxPrealloc = 1 << 24

// prealloc is the capacity a column of rows rows starts with.
func prealloc(rows int64) int64 { return min(max(rows, 0), MaxPrealloc) }

// batchRows is the rows read per column at a time.
const batchRows = 256 * 1024

func (f *File) read(col string, typ arrow.DataType, add func(arrow.Array), valid *[]bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: column %s: corrupt Parquet file: %v", f.Path, col, p)
			if p == errBudget {
				err = fmt.Errorf("%s: column %s: corrupt Parquet file: %w (%d MiB)", f.Path, col, errBudget, MemoryBudget>>20)
			}
		}
	}()
	fi := f.schema.FieldIndices(col)
	if len(fi) == 0 {
		return fmt.Errorf("%s: no column %s", f.Path, col)
	}
	if got := f.schema.Field(fi[0]).Type; len(fi) > 1 || !arrow.TypeEqual(got, typ) {
		return fmt.Errorf("%s: column %s has type %s, want %s", f.Path, col, got, typ)
	}
	// GetColumn starts no goroutines (unlike GetRecordReader), so the
	// recover above sees every panic of the reader.
	cr, err := f.fr.GetColumn(context.Background(), fi[0])
	if err != nil {
		return fmt.Errorf("%s: column %s: %w", f.Path, col, err)
	}
	defer cr.Release()
	total := f.NumRows()
	var nulls []bool
	anyNull := false
	var rows int64
	for read := int64(0); read < total; {
		n := min(total-read, batchRows)
		ch, err := cr.NextBatch(n)
		if err != nil {
			return fmt.Errorf("%s: column %s: %w", f.Path, col, err)
		}
		if int64(ch.Len()) != n {
			ch.Release()
			return fmt.Errorf("%s: column %s: corrupt Parquet file: read %d values, want %d", f.Path, col, ch.Len(), n)
		}
		for _, a := range ch.Chunks() {
			add(a)
			if a.NullN() > 0 && !anyNull {
				// Validity is materialized from the first null on.
				anyNull = true
				nulls = make([]bool, rows, max(rows, prealloc(total)))
				for i := range nulls {
					nulls[i] = true
				}
			}
			if anyNull {
				for i := range a.Len() {
					nulls = append(nulls, a.IsValid(i))
				}
			}
			rows += int64(a.Len())
		}
		ch.Release()
		read += n
	}
	if anyNull {
		*valid = nulls
	}
	return nil
}
