package pqread

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/stretchr/testify/require"
)

// table is what a test file holds: row i of every column, with nulls where
// the validity slice says so.
type table struct {
	i64   []int64
	i64ok []bool
	f64   []float64
	b     []bool
	s     []string
}

func makeTable(n int) table {
	var t table
	for i := range n {
		t.i64 = append(t.i64, int64(i*i-7))
		t.i64ok = append(t.i64ok, i%3 != 1)
		t.f64 = append(t.f64, float64(i)/4)
		t.b = append(t.b, i%2 == 0)
		t.s = append(t.s, strings.Repeat("x", i%4))
	}
	return t
}

// writeFile writes t to a Parquet file in row groups of rowGroup rows.
func writeFile(tb testing.TB, path string, t table, rowGroup int64, codec compress.Compression, opts ...parquet.WriterProperty) {
	tb.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	mem := memory.DefaultAllocator
	bi := array.NewInt64Builder(mem)
	bi.AppendValues(t.i64, t.i64ok)
	bf := array.NewFloat64Builder(mem)
	bf.AppendValues(t.f64, nil)
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues(t.b, nil)
	bs := array.NewStringBuilder(mem)
	bs.AppendValues(t.s, nil)
	rec := array.NewRecord(schema, []arrow.Array{bi.NewArray(), bf.NewArray(), bb.NewArray(), bs.NewArray()}, int64(len(t.f64)))
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithCompression(codec), parquet.WithMaxRowGroupLength(rowGroup)}, opts...)...)
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.DefaultWriterProps())
	require.NoError(tb, err)
	require.NoError(tb, w.Write(rec))
	require.NoError(tb, w.Close())
	require.NoError(tb, os.WriteFile(path, buf.Bytes(), 0o644))
}

// readAll reads every column of the test schema and checks the invariants
// of a successful read: one value per row, validity nil or one per row.
func readAll(tb testing.TB, path string) (table, error) {
	f, err := Open(path)
	if err != nil {
		return table{}, err
	}
	defer f.Close()
	n := int(f.NumRows())
	var t table
	check := func(vals, valid int) {
		if vals != n || (valid != 0 && valid != n) {
			tb.Fatalf("%s: read %d values and %d validity flags for %d rows", path, vals, valid, n)
		}
	}
	i, err := f.Int64("i64")
	if err != nil {
		return t, err
	}
	check(len(i.V), len(i.Valid))
	t.i64 = i.V
	t.i64ok = make([]bool, n)
	for r := range n {
		t.i64ok[r] = i.OK(r)
	}
	fl, err := f.Float64("f64")
	if err != nil {
		return t, err
	}
	check(len(fl.V), len(fl.Valid))
	t.f64 = fl.V
	b, err := f.Bool("b")
	if err != nil {
		return t, err
	}
	check(len(b.V), len(b.Valid))
	t.b = b.V
	s, err := f.String("s")
	if err != nil {
		return t, err
	}
	check(len(s.V), len(s.Valid))
	t.s = s.V
	if f.mem.used > 64<<20 {
		tb.Fatalf("%s: %d bytes still held by the Arrow reader after reading", path, f.mem.used)
	}
	return t, nil
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     int
		rowGroup int64
		codec    compress.Compression
		opts     []parquet.WriterProperty
	}{
		{"one group", 10, 64, compress.Codecs.Uncompressed, nil},
		{"three groups snappy", 10, 4, compress.Codecs.Snappy, nil},
		{"zstd", 50, 7, compress.Codecs.Zstd, nil},
		{"one row", 1, 1, compress.Codecs.Snappy, nil},
		{"data pages v2", 50, 7, compress.Codecs.Snappy, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"plain, small pages", 3000, 1000, compress.Codecs.Uncompressed, []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(512), parquet.WithBatchSize(128)}},
		{"plain v2", 3000, 1000, compress.Codecs.Snappy, []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(512), parquet.WithBatchSize(128), parquet.WithDataPageVersion(parquet.DataPageV2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.parquet")
			want := makeTable(tc.rows)
			writeFile(t, path, want, tc.rowGroup, tc.codec, tc.opts...)
			got, err := readAll(t, path)
			require.NoError(t, err)
			for r := range tc.rows {
				require.Equal(t, want.i64ok[r], got.i64ok[r], "row %d", r)
				if want.i64ok[r] {
					require.Equal(t, want.i64[r], got.i64[r], "row %d", r)
				}
			}
			require.Equal(t, want.f64, got.f64)
			require.Equal(t, want.b, got.b)
			require.Equal(t, want.s, got.s)
		})
	}
}

// A batch boundary inside a row group, and the reader's buffers released.
func TestLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.parquet")
	n := batchRows + batchRows/2 + 3
	want := makeTable(n)
	writeFile(t, path, want, int64(n/2), compress.Codecs.Snappy)
	got, err := readAll(t, path)
	require.NoError(t, err)
	require.Equal(t, want.f64, got.f64)
	require.Equal(t, want.s, got.s)
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, good, makeTable(10), 64, compress.Codecs.Snappy)
	f, err := Open(good)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Int64("nope")
	require.ErrorContains(t, err, "no column nope")
	_, err = f.Float64("i64")
	require.ErrorContains(t, err, "column i64 has type int64, want float64")
	_, err = f.Bool("s")
	require.ErrorContains(t, err, "column s has type utf8, want bool")
	_, err = f.String("b")
	require.ErrorContains(t, err, "column b has type bool, want utf8")
	_, err = f.Int64("f64")
	require.ErrorContains(t, err, "column f64 has type float64, want int64")
	require.True(t, f.Has("s"))
	require.False(t, f.Has("t"))

	_, err = Open(filepath.Join(dir, "missing.parquet"))
	require.Error(t, err)
	notPQ := filepath.Join(dir, "x.parquet")
	require.NoError(t, os.WriteFile(notPQ, []byte("PAR1 not really"), 0o644))
	_, err = Open(notPQ)
	require.ErrorContains(t, err, notPQ)
}

// setFooterRows rewrites the footer's num_rows (a one-byte varint for
// small tables) to v, which must also encode in one byte.
func setFooterRows(tb testing.TB, data []byte, rows, v int64) []byte {
	tb.Helper()
	n := len(data)
	flen := int(binary.LittleEndian.Uint32(data[n-8 : n-4]))
	footer := data[n-8-flen : n-8]
	zz := func(x int64) byte { return byte(uint64(x<<1) ^ uint64(x>>63)) }
	// Field 3 (num_rows, i64) follows field 2 (schema): header byte 0x16.
	i := bytes.Index(footer, []byte{0x16, zz(rows)})
	require.GreaterOrEqual(tb, i, 0, "num_rows not found in footer")
	out := bytes.Clone(data)
	out[n-8-flen+i+1] = zz(v)
	return out
}

// A footer row count of -1 panicked with "makeslice: cap
// out of range"; a count that disagrees with the row groups would size
// (and read) columns wrongly.
func TestDamagedFooterRowCount(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, good, makeTable(10), 64, compress.Codecs.Snappy)
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	for _, tc := range []struct {
		rows int64
		want string
	}{
		{-1, "footer says -1 rows, row groups hold 10"},
		{11, "footer says 11 rows, row groups hold 10"},
		{0, "footer says 0 rows, row groups hold 10"},
	} {
		path := filepath.Join(dir, "bad.parquet")
		require.NoError(t, os.WriteFile(path, setFooterRows(t, data, 10, tc.rows), 0o644))
		// The damage is what it should be: Arrow itself reads the count.
		pr, err := file.OpenParquetFile(path, false)
		require.NoError(t, err)
		require.Equal(t, tc.rows, pr.NumRows())
		pr.Close()
		_, err = readAll(t, path)
		require.ErrorContains(t, err, path)
		require.ErrorContains(t, err, tc.want)
	}
}

// A file found by fuzzing sim/workload's replay reader: a column chunk of a
// page type Arrow does not know, whose pages hold fewer values than the chunk
// claims. Arrow v17's page reader then loops forever on stale buffer bytes,
// allocating each turn (12 GB in 60 s).
func TestUnknownPageTypeDoesNotHang(t *testing.T) {
	path := filepath.Join("testdata", "unknown-page-type.parquet")
	f, err := Open(path)
	if err == nil {
		// Without the page checks, Open succeeds and this read never ends.
		_, err = f.Float64("arrived_mono_s")
		f.Close()
	}
	require.ErrorContains(t, err, path)
	// Caught by the page checks, before the Arrow reader allocates: the
	// memory budget alone ends the loop too, but only after 18 s and 5 GB.
	require.ErrorContains(t, err, "corrupt Parquet file: row group 0, column trace_id: page at offset 4: unreadable page header")
}

// Every single-byte change of a small valid file gives an error or a
// consistent read: never a panic, a hang or a read of the wrong length.
func TestEveryByteDamaged(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, good, makeTable(6), 4, compress.Codecs.Snappy)
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	path := filepath.Join(dir, "bad.parquet")
	errs := 0
	for i := range data {
		for _, v := range []byte{data[i] ^ 0xff, data[i] + 1, 0} {
			if v == data[i] {
				continue
			}
			bad := bytes.Clone(data)
			bad[i] = v
			require.NoError(t, os.WriteFile(path, bad, 0o644))
			if _, err := readAll(t, path); err != nil {
				errs++
				require.ErrorContains(t, err, path, "byte %d = %#x", i, v)
			}
		}
	}
	// Most damage is caught (values inside pages are not checksummed).
	require.Greater(t, errs, len(data))
}

func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	for _, tc := range []struct {
		rows     int
		rowGroup int64
		codec    compress.Compression
	}{{6, 4, compress.Codecs.Snappy}, {3, 8, compress.Codecs.Uncompressed}} {
		p := filepath.Join(dir, "seed.parquet")
		writeFile(f, p, makeTable(tc.rows), tc.rowGroup, tc.codec)
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "unknown-page-type.parquet")); err == nil {
		f.Add(b)
	}
	path := filepath.Join(dir, "f.parquet") // one per worker process
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		if _, err := readAll(t, path); err != nil {
			require.ErrorContains(t, err, path)
		}
	})
}

func TestBudget(t *testing.T) {
	b := &budget{limit: 100}
	x := b.Allocate(60)
	require.Len(t, x, 60)
	require.PanicsWithValue(t, errBudget, func() { b.Allocate(41) })
	x = b.Reallocate(90, x)
	require.Len(t, x, 90)
	require.Equal(t, 90, b.used)
	b.Free(x)
	require.Equal(t, 0, b.used)
	require.PanicsWithValue(t, errBudget, func() { b.Allocate(-1) })
}

// Columns were sized from the row count before any
// value was read, so a count that passes the footer checks but that no
// page holds (damaged or crafted consistently: footer, row groups, column
// chunks and page headers) allocated what it claimed: 2^50 rows panicked
// in makeslice outside any recover, 2^31 took 16 GiB per column. Columns
// now start at MaxPrealloc rows at most and grow with the values read, so
// such a file fails with an error naming it.
func TestRowCountDoesNotSizeColumns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.parquet")
	writeFile(t, path, makeTable(10), 64, compress.Codecs.Snappy)
	for _, rows := range []int64{1 << 50, 1 << 31, 1<<24 + 1} { // 1<<24 is MaxPrealloc
		f, err := Open(path)
		require.NoError(t, err)
		f.rows = rows // as if every count in the file said so
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, read := range []func() error{
			func() error { _, err := f.Int64("i64"); return err },
			func() error { _, err := f.Float64("f64"); return err },
			func() error { _, err := f.Bool("b"); return err },
			func() error { _, err := f.String("s"); return err },
		} {
			err := read()
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, "corrupt Parquet file: read ")
		}
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2<<30), "bytes allocated for %d rows", rows)
		f.Close()
	}
}

// damage applies edits to data: each group of four bytes is (mode, offset
// low, offset high, value); mode bit 0 counts the offset back from the
// end of the file (its footer), bit 1 adds the value instead of setting
// it. At most 8 groups are used.
func damage(data, edits []byte) []byte {
	out := bytes.Clone(data)
	for k := 0; k+4 <= len(edits) && k < 32; k += 4 {
		mode, v := edits[k], edits[k+3]
		off := int(binary.LittleEndian.Uint16(edits[k+1:k+3])) % len(out)
		if mode&1 != 0 {
			off = len(out) - 1 - off
		}
		if mode&2 != 0 {
			out[off] += v
		} else {
			out[off] = v
		}
	}
	return out
}

// FuzzDamagedFile damages a valid file a few bytes at a time, preferring
// its footer (row counts, column chunk offsets and sizes, page header
// positions): every read must end in an error naming the file or in a
// consistent table, never in a panic, a hang or an allocation the file
// cannot back.
func FuzzDamagedFile(f *testing.F) {
	dir := f.TempDir()
	var files [][]byte
	for i, tc := range []struct {
		rows     int
		rowGroup int64
		codec    compress.Compression
	}{{10, 64, compress.Codecs.Snappy}, {7, 3, compress.Codecs.Uncompressed}, {5, 5, compress.Codecs.Zstd}} {
		p := filepath.Join(dir, "seed.parquet")
		writeFile(f, p, makeTable(tc.rows), tc.rowGroup, tc.codec)
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		files = append(files, b)
		// The footer's row count read as -1 and as a large number (the
		// damage a hardening review reported), and random bytes of the footer.
		n := len(b)
		flen := int(binary.LittleEndian.Uint32(b[n-8 : n-4]))
		footer := b[n-8-flen : n-8]
		if j := bytes.Index(footer, []byte{0x16, byte(tc.rows << 1)}); j >= 0 {
			back := uint16(flen + 8 - (j + 1) - 1) // offset of the count from the end
			for _, v := range []byte{0x01, 0x7f, 0xff} {
				f.Add(uint8(i), []byte{1, byte(back), byte(back >> 8), v})
			}
		}
		f.Add(uint8(i), []byte{1, 20, 0, 0xff, 1, 40, 0, 3, 0, 4, 0, 0x80})
	}
	path := filepath.Join(dir, "damaged.parquet") // one per worker process
	f.Fuzz(func(t *testing.T, which uint8, edits []byte) {
		data := damage(files[int(which)%len(files)], edits)
		require.NoError(t, os.WriteFile(path, data, 0o644))
		if _, err := readAll(t, path); err != nil {
			require.ErrorContains(t, err, path)
		}
	})
}

// Found by FuzzDamagedFile: one byte of a data page, the bit width of its
// dictionary indices, raised from 4 to 32 made Arrow v17 allocate 16 GiB
// (its dictionary converter sizes a slice by the largest index before
// checking it) and spend 35 s zeroing it. The width must fit the chunk's
// dictionary. (27 bits here: 1 GiB, were the check gone.)
func TestDamagedDictionaryIndexWidth(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, good, makeTable(10), 64, compress.Codecs.Snappy)
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	path := filepath.Join(dir, "bad.parquet")
	found := 0
	for i := range data {
		if data[i] != 4 {
			continue
		}
		bad := bytes.Clone(data)
		bad[i] = 27
		require.NoError(t, os.WriteFile(path, bad, 0o644))
		_, err := readAll(t, path)
		if err != nil && strings.Contains(err.Error(), "dictionary indices of 27 bits for a dictionary of 10 values") {
			found++
			require.ErrorContains(t, err, path)
		}
	}
	require.Positive(t, found, "no index width byte was found and refused")
}

// The typed column chunk reader (v17) loops forever, without allocating,
// on a data page whose definition levels end before its values do: its
// batch loop makes no progress and does not stop. (pqarrow's record
// reader stopped there.) Here the levels of an all-null page, one RLE run
// of 10 zeros with nothing after it, get a run length of 0.
func TestShortDefinitionLevelsDoNotHang(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	tb := makeTable(10)
	for i := range tb.i64ok {
		tb.i64ok[i] = false
	}
	writeFile(t, good, tb, 64, compress.Codecs.Uncompressed)
	got, err := readAll(t, good)
	require.NoError(t, err)
	require.Equal(t, make([]bool, 10), got.i64ok)

	data, err := os.ReadFile(good)
	require.NoError(t, err)
	// Levels of 2 bytes: run header 10<<1, level 0.
	i := bytes.Index(data, []byte{2, 0, 0, 0, 10 << 1, 0})
	require.GreaterOrEqual(t, i, 0, "definition levels not found")
	require.Equal(t, -1, bytes.Index(data[i+1:], []byte{2, 0, 0, 0, 10 << 1, 0}), "definition levels found twice")
	bad := bytes.Clone(data)
	bad[i+4] = 0
	path := filepath.Join(dir, "bad.parquet")
	require.NoError(t, os.WriteFile(path, bad, 0o644))
	_, err = readAll(t, path)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "column i64: corrupt Parquet file: row group 0: definition levels: run of 0 values")
}
