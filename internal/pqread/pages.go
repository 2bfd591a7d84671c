package pqread

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/schema"
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

// Thrift Encoding values (parquet.thrift).
const (
	encPlainDictionary = 2
	encRLE             = 3
	encBitPacked       = 4
	encRLEDictionary   = 8
)

// Dictionary indices are sized by nothing but their bit width either:
// Arrow v17's dictionary converters allocate a Go slice up to the largest
// index a data page holds (Float64DictConverter.ensure: make([]float64,
// idx+1)) before checking it, outside the allocator, so one damaged
// bit-width byte (4 → 32) asked for 16 GiB and ran 35 s zeroing it. A
// snappy page's own length header is believed the same way (snappy.Decode
// allocates it). So each chunk's dictionary is decoded to bound its size
// by its bytes, every dictionary-encoded data page's bit width must fit
// that dictionary, and every snappy page must declare the uncompressed
// size its header does.

// Header windows as in Arrow's page reader: 16 KiB, doubled up to 16 MiB.
const (
	minHeaderWindow = 16 << 10
	maxHeaderWindow = 16 << 20
)

// pageHeader holds the fields of a Parquet PageHeader that frame pages,
// and those the dictionary checks need.
type pageHeader struct {
	typ, uncompressed, compressed int32
	values                        [2]int32 // num_values of the DataPageHeader (field 5) and DataPageHeaderV2 (field 8)
	hasType, hasUncompressed      bool
	hasCompressed                 bool
	hasValues                     [2]bool
	encoding                      [2]int32 // the data pages' value encoding (V1 field 2, V2 field 4)
	defEncoding, repEncoding      int32    // V1 level encodings (fields 3 and 4)
	defLen, repLen                int32    // V2 level byte lengths (fields 5 and 6)
	notCompressed                 bool     // V2 is_compressed (field 7) = false
	dictValues                    int32    // num_values of the DictionaryPageHeader (field 7)
	hasDictValues                 bool
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
			if err := checkChunk(r, size, col, old, rg.NumRows(), md.Schema.Column(c)); err != nil {
				return fmt.Errorf("row group %d, column %s: %w", g, md.Schema.Column(c).Path(), err)
			}
		}
	}
	return nil
}

func checkChunk(r io.ReaderAt, size int64, col *metadata.ColumnChunkMetaData, old bool, rows int64, desc *schema.Column) error {
	flat := desc.MaxRepetitionLevel() == 0
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
	codec, err := compress.GetCodec(col.Compression())
	if err != nil {
		return err
	}
	pc := &pageCheck{r: r, codec: codec, snappy: col.Compression() == compress.Codecs.Snappy, desc: desc, dict: -1}
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
		if err := pc.check(h, start+pos-int64(h.compressed)); err != nil {
			return fmt.Errorf("page at offset %d: %w", start+pos-n-int64(h.compressed), err)
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
		case id == 5 && typ == thrift.STRUCT:
			// DataPageHeader: num_values 1, encoding 2, definition and
			// repetition level encodings 3 and 4. Like Arrow's generated
			// reader, the last of repeated fields wins.
			var f subFields
			if f, err = readSubFields(ctx, p); err == nil {
				h.values[0], h.hasValues[0] = f.i32[1], f.has[1]
				h.encoding[0], h.defEncoding, h.repEncoding = f.i32[2], f.i32[3], f.i32[4]
			}
		case id == 8 && typ == thrift.STRUCT:
			// DataPageHeaderV2: num_values 1, encoding 4, level byte
			// lengths 5 (definition) and 6 (repetition), is_compressed 7.
			var f subFields
			if f, err = readSubFields(ctx, p); err == nil {
				h.values[1], h.hasValues[1] = f.i32[1], f.has[1]
				h.encoding[1], h.defLen, h.repLen = f.i32[4], f.i32[5], f.i32[6]
				h.notCompressed = f.has[7] && !f.b7
			}
		case id == 7 && typ == thrift.STRUCT:
			// DictionaryPageHeader: num_values 1.
			var f subFields
			if f, err = readSubFields(ctx, p); err == nil {
				h.dictValues, h.hasDictValues = f.i32[1], f.has[1]
			}
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

// subFields are the i32 fields 1..7 of a nested struct, and field 7 as a
// bool (DataPageHeaderV2's is_compressed).
type subFields struct {
	i32 [8]int32
	has [8]bool
	b7  bool
}

func readSubFields(ctx context.Context, p thrift.TProtocol) (f subFields, err error) {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return f, err
	}
	for {
		_, typ, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return f, err
		}
		if typ == thrift.STOP {
			break
		}
		switch {
		case id >= 1 && id <= 7 && typ == thrift.I32:
			f.i32[id], err = p.ReadI32(ctx)
			f.has[id] = true
		case id == 7 && typ == thrift.BOOL:
			f.b7, err = p.ReadBool(ctx)
			f.has[7] = true
		default:
			err = thrift.SkipDefaultDepth(ctx, p, typ)
		}
		if err != nil {
			return f, err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return f, err
		}
	}
	return f, p.ReadStructEnd(ctx)
}

// pageCheck checks the pages of one column chunk against its dictionary.
type pageCheck struct {
	r      io.ReaderAt
	codec  compress.Codec
	snappy bool
	desc   *schema.Column
	dict   int64 // the chunk's dictionary entries, -1 before its dictionary page
	body   []byte
	out    []byte
}

// check checks page h, whose body (compressed bytes) starts at off.
func (c *pageCheck) check(h pageHeader, off int64) error {
	if int64(h.uncompressed) > MemoryBudget || int64(h.compressed) > MemoryBudget {
		return errBudget
	}
	switch h.typ {
	case pageDictionary:
		if !h.hasDictValues || h.dictValues < 0 {
			return errors.New("dictionary page without a valid value count")
		}
		data, err := c.decompress(h, off, 0)
		if err != nil {
			return err
		}
		// Every entry takes at least minBytes of the page.
		if int64(h.dictValues)*c.minBytes() > int64(len(data)) {
			return fmt.Errorf("dictionary of %d values in %d bytes", h.dictValues, len(data))
		}
		c.dict = int64(h.dictValues)
	case pageData, pageDataV2:
		k := 0
		if h.typ == pageDataV2 {
			k = 1
		}
		if e := h.encoding[k]; e != encPlainDictionary && e != encRLEDictionary {
			if c.snappy {
				return c.checkSnappyLength(h, off)
			}
			return nil
		}
		if c.dict < 0 {
			return errors.New("dictionary-encoded page without a dictionary page")
		}
		values, err := c.values(h, off)
		if err != nil {
			return err
		}
		// The indices' bit width; a page of no values may have none.
		if len(values) > 0 {
			if bw := int(values[0]); bw > 32 || bw > max(1, bits.Len64(uint64(c.dict))) {
				return fmt.Errorf("dictionary indices of %d bits for a dictionary of %d values", bw, c.dict)
			}
		}
	}
	return nil
}

// minBytes is the fewest bytes a PLAIN value of the column takes.
func (c *pageCheck) minBytes() int64 {
	switch c.desc.PhysicalType() {
	case parquet.Types.Int32, parquet.Types.Float, parquet.Types.ByteArray:
		return 4 // a byte array's length prefix
	case parquet.Types.Int64, parquet.Types.Double:
		return 8
	case parquet.Types.Int96:
		return 12
	case parquet.Types.FixedLenByteArray:
		return int64(max(1, c.desc.TypeLength()))
	}
	return 1
}

// read returns the n bytes at off.
func (c *pageCheck) read(off int64, n int) ([]byte, error) {
	if cap(c.body) < n {
		c.body = make([]byte, n)
	}
	b := c.body[:n]
	if m, err := c.r.ReadAt(b, off); m != n {
		return nil, fmt.Errorf("reading page: %w", err)
	}
	return b, nil
}

// checkSnappyLength checks that a snappy page declares the uncompressed
// size its header does (snappy.Decode allocates what the page declares).
func (c *pageCheck) checkSnappyLength(h pageHeader, off int64) error {
	skip := int64(0)
	if h.typ == pageDataV2 {
		if h.notCompressed {
			return nil
		}
		skip = int64(h.defLen) + int64(h.repLen)
	}
	n := min(int64(binary.MaxVarintLen32), int64(h.compressed)-skip)
	if skip < 0 || n <= 0 {
		return nil // an empty page; Arrow checks the lengths
	}
	b, err := c.read(off+skip, int(n))
	if err != nil {
		return err
	}
	if v, k := binary.Uvarint(b); k <= 0 || int64(v) != int64(h.uncompressed)-skip {
		return fmt.Errorf("snappy block of %d bytes in a page of %d", v, int64(h.uncompressed)-skip)
	}
	return nil
}

// decompress returns the uncompressed bytes of page h from byte skip of
// its body on (the levels of a V2 page are not compressed).
func (c *pageCheck) decompress(h pageHeader, off, skip int64) ([]byte, error) {
	if skip < 0 || skip > int64(h.compressed) || skip > int64(h.uncompressed) {
		return nil, errors.New("levels longer than the page")
	}
	body, err := c.read(off+skip, int(int64(h.compressed)-skip))
	if err != nil {
		return nil, err
	}
	want := int(int64(h.uncompressed) - skip)
	if h.typ == pageDataV2 && h.notCompressed {
		if len(body) != want {
			return nil, fmt.Errorf("uncompressed page of %d bytes, header says %d", len(body), want)
		}
		return body, nil
	}
	if c.snappy {
		// A snappy element of 3 bytes expands to 64 at most: a page that
		// claims more than 22 times its size is damaged, and is refused
		// before anything is allocated for it.
		if v, k := binary.Uvarint(body); k <= 0 || v != uint64(want) || int64(want) > 22*int64(len(body))+64 {
			return nil, fmt.Errorf("snappy block of %d bytes declares %d, header says %d", len(body), v, want)
		}
		if cap(c.out) < want {
			c.out = make([]byte, want)
		}
		out := c.codec.Decode(c.out[:want], body) // panics on corrupt data: Open recovers
		if len(out) != want {
			return nil, fmt.Errorf("page decompresses to %d bytes, header says %d", len(out), want)
		}
		return out, nil
	}
	// Other codecs are read as streams, so that memory follows the bytes
	// that actually come out, whatever the header says.
	zr := c.codec.NewReader(bytes.NewReader(body))
	defer zr.Close()
	var out bytes.Buffer
	if n, err := out.ReadFrom(io.LimitReader(zr, int64(want)+1)); err != nil || n != int64(want) {
		return nil, fmt.Errorf("page decompresses to %d bytes, header says %d (%v)", n, want, err)
	}
	return out.Bytes(), nil
}

// values returns the values section of data page h: its uncompressed body
// after the repetition and definition levels.
func (c *pageCheck) values(h pageHeader, off int64) ([]byte, error) {
	if h.typ == pageDataV2 {
		return c.decompress(h, off, int64(h.defLen)+int64(h.repLen))
	}
	data, err := c.decompress(h, off, 0)
	if err != nil {
		return nil, err
	}
	for _, lv := range []struct {
		max int16
		enc int32
	}{{c.desc.MaxRepetitionLevel(), h.repEncoding}, {c.desc.MaxDefinitionLevel(), h.defEncoding}} {
		if lv.max == 0 {
			continue
		}
		var n int64
		switch lv.enc {
		case encRLE:
			if len(data) < 4 {
				return nil, errors.New("levels shorter than their length")
			}
			n = 4 + int64(binary.LittleEndian.Uint32(data))
		case encBitPacked:
			n = (int64(h.values[0])*int64(bits.Len16(uint16(lv.max))) + 7) / 8
		default:
			return nil, fmt.Errorf("level encoding %d is not supported", lv.enc)
		}
		if n > int64(len(data)) {
			return nil, errors.New("levels longer than the page")
		}
		data = data[n:]
	}
	return data, nil
}
