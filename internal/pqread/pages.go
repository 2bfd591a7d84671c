package pqread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/thrift/lib/go/thrift"
)

// Page header framing is checked before the Arrow reader sees a column chunk.
// Arrow v17 trusts it: a chunk whose pages hold fewer values than the chunk
// claims, or a page of a type it does not know (it skips the header but not
// the body), sends its page reader past the end of the chunk, where its
// buffered reader keeps returning stale bytes as new page headers: an endless
// loop that allocates on every turn. It also allocates the chunk's claimed
// size before reading it. So every chunk must lie inside the file, and its
// pages must tile it, be of a known type, and hold exactly its values.

// Thrift PageType values (parquet.thrift).
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3
)

// Header windows as in Arrow's page reader: 16 KiB, doubled up to 16 MiB.
const (
	minHeaderWindow = 16 << 10
	maxHeaderWindow = 16 << 20
)

// pageHeader holds the fields of a Parquet PageHeader that frame pages.
type pageHeader struct {
	typ, uncompressed, compressed int32
	values                        [2]int32 // num_values of the DataPageHeader (field 5) and DataPageHeaderV2 (field 8)
	hasType, hasUncompressed      bool
	hasCompressed                 bool
	hasValues                     [2]bool
}

var errHeader = errors.New("unreadable page header")

// checkChunks checks the page framing of every column chunk of pr, whose
// source file r has size bytes.
func checkChunks(r io.ReaderAt, size int64, pr *file.Reader) error {
	md := pr.MetaData()
	old := md.WriterVersion().LessThan(metadata.Parquet816FixedVersion)
	for g := range pr.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			col, err := rg.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d, column %d: %w", g, c, err)
			}
			if err := checkChunk(r, size, col, old, rg.NumRows(), md.Schema.Column(c).MaxRepetitionLevel() == 0); err != nil {
				return fmt.Errorf("row group %d, column %s: %w", g, md.Schema.Column(c).Path(), err)
			}
		}
	}
	return nil
}

func checkChunk(r io.ReaderAt, size int64, col *metadata.ColumnChunkMetaData, old bool, rows int64, flat bool) error {
	if col.CryptoMetadata() != nil {
		return errors.New("encrypted column chunks are not supported")
	}
	// The chunk's extent, as Arrow's RowGroupReader.GetColumnPageReader
	// computes it.
	start := col.DataPageOffset()
	if col.HasDictionaryPage() && col.DictionaryPageOffset() > 0 && start > col.DictionaryPageOffset() {
		start = col.DictionaryPageOffset()
	}
	length := col.TotalCompressedSize()
	if start < 0 || length < 0 || start > size || length > size-start {
		return fmt.Errorf("column chunk at offset %d, %d bytes, lies outside the %d-byte file", start, length, size)
	}
	if old {
		// PARQUET-816: old parquet-mr left the dictionary header out of
		// the size; Arrow pads the chunk by up to 100 bytes.
		length += min(100, size-start-length)
	}
	want := col.NumValues()
	if want < 0 || (flat && want != rows) {
		return fmt.Errorf("column chunk holds %d values, its row group %d rows", want, rows)
	}
	var seen, pos int64
	buf := make([]byte, 0, minHeaderWindow)
	for seen < want {
		h, n, err := readPageHeader(r, start+pos, length-pos, &buf)
		if err != nil {
			return fmt.Errorf("page at offset %d: %w", start+pos, err)
		}
		if h.compressed < 0 || h.uncompressed < 0 {
			return fmt.Errorf("page at offset %d: negative page size", start+pos)
		}
		switch h.typ {
		case pageData, pageDataV2:
			k := 0
			if h.typ == pageDataV2 {
				k = 1
			}
			if !h.hasValues[k] || h.values[k] < 0 {
				return fmt.Errorf("page at offset %d: data page without a valid value count", start+pos)
			}
			seen += int64(h.values[k])
		case pageDictionary:
		default:
			return fmt.Errorf("page at offset %d: page type %d is not supported", start+pos, h.typ)
		}
		pos += n + int64(h.compressed)
		if pos > length {
			return fmt.Errorf("page at offset %d runs past the column chunk's end", start+pos-n-int64(h.compressed))
		}
	}
	if seen != want {
		return fmt.Errorf("pages hold %d values, the column chunk %d", seen, want)
	}
	return nil
}

// readPageHeader decodes the page header at off, with at most avail bytes
// left in its chunk, and returns it with its encoded length.
func readPageHeader(r io.ReaderAt, off, avail int64, buf *[]byte) (pageHeader, int64, error) {
	for w := int64(minHeaderWindow); ; w *= 2 {
		n := min(w, avail, maxHeaderWindow)
		if n <= 0 {
			return pageHeader{}, 0, errors.New("no page header before the column chunk's end")
		}
		b := (*buf)[:0]
		if int64(cap(b)) < n {
			b = make([]byte, n)
		}
		b = b[:n]
		*buf = b
		if m, err := r.ReadAt(b, off); int64(m) != n {
			return pageHeader{}, 0, fmt.Errorf("reading page header: %w", err)
		}
		h, used, err := decodePageHeader(b)
		if err == nil {
			return h, used, nil
		}
		if n == avail || n == maxHeaderWindow {
			return pageHeader{}, 0, err
		}
	}
}

var compact = thrift.NewTCompactProtocolFactoryConf(&thrift.TConfiguration{})

// decodePageHeader decodes the framing fields of a thrift PageHeader in b
// and returns the number of bytes it took. Fields of an unexpected wire type
// are skipped, as thrift-generated readers (Arrow's) skip them.
func decodePageHeader(b []byte) (pageHeader, int64, error) {
	ctx := context.Background()
	mb := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(b)}
	p := compact.GetProtocol(mb)
	var h pageHeader
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return h, 0, errHeader
	}
	for {
		_, typ, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return h, 0, errHeader
		}
		if typ == thrift.STOP {
			break
		}
		switch {
		case id == 1 && typ == thrift.I32:
			h.typ, err = p.ReadI32(ctx)
			h.hasType = true
		case id == 2 && typ == thrift.I32:
			h.uncompressed, err = p.ReadI32(ctx)
			h.hasUncompressed = true
		case id == 3 && typ == thrift.I32:
			h.compressed, err = p.ReadI32(ctx)
			h.hasCompressed = true
		case (id == 5 || id == 8) && typ == thrift.STRUCT:
			// DataPageHeader and DataPageHeaderV2: num_values is field 1.
			// Like Arrow's generated reader, the last of repeated fields wins.
			k := 0
			if id == 8 {
				k = 1
			}
			h.values[k], h.hasValues[k], err = readNumValues(ctx, p)
		default:
			err = thrift.SkipDefaultDepth(ctx, p, typ)
		}
		if err != nil {
			return h, 0, errHeader
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return h, 0, errHeader
		}
	}
	if err := p.ReadStructEnd(ctx); err != nil {
		return h, 0, errHeader
	}
	if !h.hasType || !h.hasUncompressed || !h.hasCompressed {
		return h, 0, errHeader
	}
	return h, int64(len(b) - mb.Len()), nil
}

func readNumValues(ctx context.Context, p thrift.TProtocol) (v int32, ok bool, err error) {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return 0, false, err
	}
	for {
		_, typ, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return 0, false, err
		}
		if typ == thrift.STOP {
			break
		}
		if id == 1 && typ == thrift.I32 {
			v, err = p.ReadI32(ctx)
			ok = true
		} else {
			err = thrift.SkipDefaultDepth(ctx, p, typ)
		}
		if err != nil {
			return 0, false, err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return 0, false, err
		}
	}
	return v, ok, p.ReadStructEnd(ctx)
}
