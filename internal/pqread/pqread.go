// Package pqread reads whole columns of a Parquet file into Go slices.
//
// It reads flat (top-level, non-repeated) columns of four types with the
// Parquet reader's typed column chunk readers, one row group after another;
// it does not go through Arrow arrays (parquet/pqarrow pulls Arrow Flight and
// gRPC into every binary that links it). Nulls come back as a validity slice.
//
// Every read runs on the caller's goroutine: the Parquet reader panics on
// some corrupt files (nil column chunk metadata, for example), and only a
// panic on the caller's goroutine can be recovered and turned into an error
// that names the file and column.
//
// A damaged file must not take the machine's memory or hang the reader
// either: the Parquet reader allocates what page headers claim, so all its
// allocations go through an allocator with a budget; page framing is
// checked when the file is opened (pages.go), and every data page's
// definition levels are checked to hold its values before the column
// reader decodes them (its batch loop never ends when they do not); a
// footer row count is checked against the row groups, and columns are
// sized from it only up to MaxPrealloc rows, beyond which they grow with
// the values actually read: counts that agree can still be damaged (or
// crafted) together.
package pqread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/blis-sim/blis/internal/columns"
)

// File is an open Parquet file.
type File struct {
	Path string
	f    *os.File
	pr   *file.Reader
	rows int64
	mem  *budget
}

// MemoryBudget bounds the bytes the Parquet reader may hold at once while
// reading one file. A valid file needs a column chunk and a few pages (tens
// of MiB); only a damaged page header asks for more.
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
	// A table reader takes a column by name: a name twice would leave one
	// copy unread.
	root := pr.MetaData().Schema.Root()
	names := make([]string, root.NumFields())
	for i := range names {
		names[i] = root.Field(i).Name()
	}
	if err := columns.Duplicate(names, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkChunks(f, st.Size(), pr); err != nil {
		return nil, fmt.Errorf("%s: corrupt Parquet file: %w", path, err)
	}
	return &File{Path: path, f: f, pr: pr, rows: rows, mem: mem}, nil
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
func (f *File) Has(col string) bool { return len(f.fields(col)) > 0 }

// fields returns the top-level schema fields named col.
func (f *File) fields(col string) []schema.Node {
	root := f.pr.MetaData().Schema.Root()
	var out []schema.Node
	for i := range root.NumFields() {
		if n := root.Field(i); n.Name() == col {
			out = append(out, n)
		}
	}
	return out
}

// Column is one column read whole. Valid is nil when no value is null.
type Column[T any] struct {
	V     []T
	Valid []bool
}

// OK reports whether row i is not null.
func (c *Column[T]) OK(i int) bool { return c.Valid == nil || c.Valid[i] }

// Type names, as Arrow names the types the columns are read as.
const (
	typeInt64   = "int64"
	typeFloat64 = "float64"
	typeBool    = "bool"
	typeString  = "utf8"
)

// Int64 reads an int64 column.
func (f *File) Int64(col string) (Column[int64], error) {
	return read(f, col, typeInt64, copyValues[int64])
}

// Float64 reads a double column.
func (f *File) Float64(col string) (Column[float64], error) {
	return read(f, col, typeFloat64, copyValues[float64])
}

// Bool reads a boolean column.
func (f *File) Bool(col string) (Column[bool], error) {
	return read(f, col, typeBool, copyValues[bool])
}

// String reads a string column.
func (f *File) String(col string) (Column[string], error) {
	return read(f, col, typeString, appendStrings)
}

func copyValues[T any](dst []T, src []T) []T { return append(dst, src...) }

// appendStrings appends src as strings that share one allocation per call
// (the byte arrays point into the reader's page buffers).
func appendStrings(dst []string, src []parquet.ByteArray) []string {
	n := 0
	for _, b := range src {
		n += len(b)
	}
	buf := make([]byte, 0, n)
	for _, b := range src {
		buf = append(buf, b...)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf))
	off := 0
	for _, b := range src {
		dst = append(dst, all[off:off+len(b)])
		off += len(b)
	}
	return dst
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

// batchReader is a typed column chunk reader (file.Int64ColumnChunkReader
// and its kind) reading values of physical type P.
type batchReader[P any] interface {
	ReadBatch(batchSize int64, values []P, defLvls, repLvls []int16) (total int64, valuesRead int, err error)
	Err() error
}

// typeName names the type a top-level schema field is read as, as Arrow
// (pqarrow) names it, or describes it when no reader here reads it.
func typeName(n schema.Node) string {
	p, ok := n.(*schema.PrimitiveNode)
	if !ok {
		return "struct"
	}
	if n.RepetitionType() == parquet.Repetitions.Repeated {
		return "list"
	}
	lt := p.LogicalType()
	if lt == nil || !lt.IsValid() {
		return "invalid"
	}
	if lt.Equals(schema.NullLogicalType{}) {
		return "null"
	}
	intName := func(def string) string {
		if lt.IsNone() {
			return def
		}
		if it, ok := lt.(*schema.IntLogicalType); ok {
			if it.IsSigned() {
				return fmt.Sprintf("int%d", it.BitWidth())
			}
			return fmt.Sprintf("uint%d", it.BitWidth())
		}
		return fmt.Sprintf("%s (%s)", p.PhysicalType(), lt)
	}
	switch p.PhysicalType() {
	case parquet.Types.Boolean:
		return typeBool
	case parquet.Types.Int32:
		return intName("int32")
	case parquet.Types.Int64:
		return intName(typeInt64)
	case parquet.Types.Float:
		return "float32"
	case parquet.Types.Double:
		return typeFloat64
	case parquet.Types.ByteArray:
		if _, ok := lt.(schema.StringLogicalType); ok {
			return typeString
		}
		if lt.IsNone() {
			return "binary"
		}
	}
	if lt.IsNone() {
		return p.PhysicalType().String()
	}
	return fmt.Sprintf("%s (%s)", p.PhysicalType(), lt)
}

// read reads column col, whose type must be want, appending values of
// physical type P to the column with add.
func read[T, P any](f *File, col, want string, add func([]T, []P) []T) (c Column[T], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: column %s: corrupt Parquet file: %v", f.Path, col, p)
			if p == errBudget {
				err = fmt.Errorf("%s: column %s: corrupt Parquet file: %w (%d MiB)", f.Path, col, errBudget, MemoryBudget>>20)
			}
			c = Column[T]{}
		}
	}()
	fs := f.fields(col)
	if len(fs) == 0 {
		return c, fmt.Errorf("%s: no column %s", f.Path, col)
	}
	if len(fs) > 1 {
		return c, fmt.Errorf("%s: column %s appears %d times", f.Path, col, len(fs))
	}
	if got := typeName(fs[0]); got != want {
		return c, fmt.Errorf("%s: column %s has type %s, want %s", f.Path, col, got, want)
	}
	md := f.pr.MetaData()
	idx := md.Schema.ColumnIndexByNode(fs[0])
	if idx < 0 {
		return c, fmt.Errorf("%s: no column %s", f.Path, col)
	}
	desc := md.Schema.Column(idx)
	maxDef := desc.MaxDefinitionLevel()
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("%s: column %s: corrupt Parquet file: "+format, append([]any{f.Path, col}, a...)...)
	}

	total := f.NumRows()
	c.V = make([]T, 0, prealloc(total))
	vals := make([]P, min(batchRows, max(total, 1)))
	var defs []int16
	if maxDef > 0 {
		defs = make([]int16, len(vals))
	}
	var valid []bool
	anyNull := false
	for g := range f.pr.NumRowGroups() {
		rg := f.pr.RowGroup(g)
		pages, err := rg.GetColumnPageReader(idx)
		if err != nil {
			return c, corrupt("row group %d: %w", g, err)
		}
		lc := &levelCheck{PageReader: pages, maxDef: maxDef}
		br, ok := file.NewColumnReader(desc, lc, f.mem, f.pr.BufferPool()).(batchReader[P])
		if !ok {
			return c, fmt.Errorf("%s: column %s: no %s reader for physical type %s", f.Path, col, want, desc.PhysicalType())
		}
		rows := rg.NumRows()
		for got := int64(0); got < rows; {
			k := min(rows-got, int64(len(vals)))
			var d []int16
			if defs != nil {
				d = defs[:k]
			}
			n, nv, err := br.ReadBatch(k, vals[:k], d, nil)
			if err == nil {
				err = br.Err()
			}
			if err != nil {
				return c, corrupt("row group %d: %w", g, err)
			}
			if n <= 0 || n > k {
				return c, corrupt("row group %d: read %d values, want %d", g, got+max(n, 0), rows)
			}
			v := vals[:n]
			if int64(nv) != n {
				// Nulls: spread the nv values over the rows whose
				// definition level is the maximum, from the back.
				j := nv - 1
				var zero P
				for i := n - 1; i >= 0; i-- {
					if defs[i] == maxDef {
						if j < 0 {
							return c, corrupt("row group %d: more definition levels than values", g)
						}
						v[i] = v[j]
						j--
					} else {
						v[i] = zero
					}
				}
				if j != -1 {
					return c, corrupt("row group %d: %d values for %d defined rows", g, nv, nv-j-1)
				}
				if !anyNull {
					// Validity is materialized from the first null on.
					anyNull = true
					valid = make([]bool, len(c.V), max(int64(len(c.V)), prealloc(total)))
					for i := range valid {
						valid[i] = true
					}
				}
			}
			if anyNull {
				for i := range v {
					valid = append(valid, defs == nil || defs[i] == maxDef)
				}
			}
			c.V = add(c.V, v)
			got += n
		}
	}
	if int64(len(c.V)) != total {
		return Column[T]{}, corrupt("read %d values, want %d", len(c.V), total)
	}
	if anyNull {
		c.Valid = valid
	}
	return c, nil
}

// levelCheck checks the definition levels of every data page before the
// column reader decodes them. The reader's batch loop (v17) makes no
// progress on a page whose levels end before its values do, and never
// ends: they must hold the page's value count, and no level may exceed
// the column's maximum. Levels must also lie within the length the page
// gives them (the reader would read on into the values). Once a page
// fails, no further page is read.
type levelCheck struct {
	file.PageReader
	maxDef int16
	err    error
}

func (p *levelCheck) Next() bool {
	if p.err != nil || !p.PageReader.Next() {
		return false
	}
	if p.maxDef > 0 {
		if err := checkLevels(p.Page(), p.maxDef); err != nil {
			p.err = err
			return false
		}
	}
	return true
}

func (p *levelCheck) Err() error {
	if p.err != nil {
		return p.err
	}
	return p.PageReader.Err()
}

// checkLevels checks the definition levels of a data page of a flat column.
func checkLevels(pg file.Page, maxDef int16) error {
	var levels []byte
	switch pg := pg.(type) {
	case *file.DataPageV1:
		if pg.DefinitionLevelEncoding() != parquet.Encodings.RLE {
			return nil // bit-packed levels are length-checked by the reader
		}
		data := pg.Data()
		if len(data) < 4 {
			return errors.New("definition levels shorter than their length")
		}
		n := binary.LittleEndian.Uint32(data)
		if uint64(n) > uint64(len(data)-4) {
			return errors.New("definition levels longer than the page")
		}
		levels = data[4 : 4+n]
	case *file.DataPageV2:
		data := pg.Data()
		rep, def := int64(pg.RepetitionLevelByteLen()), int64(pg.DefinitionLevelByteLen())
		if rep < 0 || def < 0 || rep+def > int64(len(data)) {
			return errors.New("levels longer than the page")
		}
		levels = data[rep : rep+def]
	default:
		return nil
	}
	return checkRLE(levels, bits.Len16(uint16(maxDef)), uint64(maxDef), int64(pg.NumValues()))
}

// checkRLE checks that the RLE / bit-packed hybrid runs in b hold at least
// n values of width bits, each at most maxVal, in runs the Arrow decoder
// accepts (no empty runs).
func checkRLE(b []byte, width int, maxVal uint64, n int64) error {
	valueBytes := (width + 7) / 8
	for have := int64(0); have < n; {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("definition levels end after %d of %d values", have, n)
		}
		b = b[k:]
		count := h >> 1
		if h&1 != 0 {
			// Bit-packed groups of 8 values. Values of one bit cannot
			// exceed a maximum level of 1; wider ones are not checked.
			if count == 0 || count > math.MaxInt32/8 {
				return fmt.Errorf("definition levels: bit-packed run of %d groups", count)
			}
			nb := count * uint64(width)
			if nb > uint64(len(b)) {
				return fmt.Errorf("definition levels end after %d of %d values", have, n)
			}
			b = b[nb:]
			have += int64(count) * 8
			continue
		}
		if count == 0 || count > math.MaxInt32 {
			return fmt.Errorf("definition levels: run of %d values", count)
		}
		if len(b) < valueBytes {
			return fmt.Errorf("definition levels end after %d of %d values", have, n)
		}
		var v uint64
		for i := range valueBytes {
			v |= uint64(b[i]) << (8 * i)
		}
		if v > maxVal {
			return fmt.Errorf("definition level %d above the column's %d", v, maxVal)
		}
		b = b[valueBytes:]
		have += int64(count)
	}
	return nil
}
