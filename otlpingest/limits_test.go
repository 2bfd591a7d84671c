package otlpingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A JSON line or document longer than the record limit is counted as
// record_too_large, naming its file and line, and the lines around it are
// read as usual; --strict makes it an error. The limit is small here so
// that the test is cheap; the reader's path (a line longer than a chunk)
// and the decoder's (a long line inside a chunk) give the same issue.
func TestRecordLimit(t *testing.T) {
	dir := t.TempDir()
	const limit = 3000
	long := `{"resourceSpans":[],"pad":"` + strings.Repeat("x", 10_000) + `"}`
	for _, tc := range []struct {
		name  string
		chunk int
	}{{"line longer than a chunk", 512}, {"long line inside a chunk", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			cases := []struct {
				name, content string
				records       int64
				rec           []int64 // records of the issues
				spans         int
			}{
				{"middle.jsonl", testLine(1) + "\n" + long + "\n" + testLine(3) + "\n", 3, []int64{2}, 2},
				{"last-no-newline.jsonl", testLine(1) + "\n" + long, 2, []int64{2}, 1},
				{"two.jsonl", long + "\n" + long + "\n" + testLine(3) + "\n", 3, []int64{1, 2}, 1},
				{"kv.jsonl", `[1.5, [["CacheEviction", "CPU", 1, "lru", 3, null]]]` + "\n[1.6, [[\"" + strings.Repeat("y", 5000) + "\"]]]\n", 2, []int64{2}, 0},
			}
			for _, c := range cases {
				p := writeFile(t, dir, c.name, []byte(c.content))
				got := readAll(t, ReadOptions{ChunkBytes: tc.chunk, MaxRecordBytes: limit}, p)
				var recs []int64
				for _, is := range got.issues {
					require.Equal(t, IssueRecordTooLarge, is.Kind, "%s: %v", c.name, is)
					assert.Equal(t, p, is.File)
					assert.Contains(t, is.Detail, fmt.Sprintf("record limit of %d bytes", limit))
					recs = append(recs, is.Record)
				}
				assert.Equal(t, c.rec, recs, c.name)
				assert.Len(t, got.spans, c.spans, c.name)
				assert.Equal(t, c.records, got.files[0].Records, c.name)
				assert.Equal(t, int64(len(c.content)), got.files[0].DecompressedBytes, c.name)
			}
		})
	}
	// A single JSON document over the limit.
	doc := writeFile(t, dir, "doc.json", []byte("{\n \"resourceSpans\": [],\n \"pad\": \""+strings.Repeat("z", 10_000)+"\"\n}\n"))
	got := readAll(t, ReadOptions{MaxRecordBytes: limit}, doc)
	require.Len(t, got.issues, 1)
	assert.Equal(t, IssueRecordTooLarge, got.issues[0].Kind)
	assert.Equal(t, int64(1), got.issues[0].Record)
	assert.Equal(t, FormatJSONDocument, got.files[0].Format)

	// In a whole ingest: counted, or an error under Strict.
	api := AppendJSON(nil, []Span{apiReq(1, 1, "cmpl-1", "/v1/completions", 10, 5, apiEv("api.ARRIVED", 0), apiEv("api.DEPARTED", 9))})
	core := AppendJSON(nil, []Span{coreReq(1, 2, 1, "cmpl-1-0-ab12",
		jEv("QUEUED", 1, 0, "WAITING", 0, 10, 0, 5, 0), jEv("FINISHED", 8, 3, "DECODE", 10, 10, 5, 5, 0, sv("finish.status", "length")))})
	p := writeFile(t, dir, "ingest.jsonl", []byte(string(api)+"\n"+long+"\n"+string(core)+"\n"))
	m, err := Ingest(FileSources([]string{p}), Options{OutDir: filepath.Join(dir, "out"), MaxRecordBytes: limit})
	require.NoError(t, err)
	require.Len(t, m.Issues.Details, 1)
	assert.Equal(t, Issue{Kind: IssueRecordTooLarge, File: p, Record: 2,
		Detail: fmt.Sprintf("line of %d bytes is longer than the record limit of %d bytes; skipped", len(long), limit)}, m.Issues.Details[0])
	_, err = Ingest(FileSources([]string{p}), Options{OutDir: filepath.Join(dir, "strict"), MaxRecordBytes: limit, Strict: true})
	var se *StrictError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, IssueRecordTooLarge, se.Issue.Kind)
	assert.Equal(t, int64(2), se.Issue.Record)
}

// A line far over the limit is skipped after reading at most limit+1
// bytes of it: memory stays near the limit (buffers double up to it), not
// a multiple of the line (a 1.29 GB line took 4.2 GB).
func TestRecordLimitBoundsMemory(t *testing.T) {
	dir := t.TempDir()
	const limit, lineMB = 1 << 20, 48
	f, err := os.Create(filepath.Join(dir, "huge.jsonl"))
	require.NoError(t, err)
	_, err = f.WriteString(testLine(1) + "\n{\"pad\":\"")
	require.NoError(t, err)
	chunk := []byte(strings.Repeat("x", 1<<20))
	for i := 0; i < lineMB; i++ {
		_, err = f.Write(chunk)
		require.NoError(t, err)
	}
	_, err = f.WriteString("\"}\n" + testLine(3) + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := readAll(t, ReadOptions{ChunkBytes: 64 << 10, MaxRecordBytes: limit, Workers: 1}, f.Name())
	runtime.ReadMemStats(&after)
	require.Len(t, got.issues, 1)
	assert.Equal(t, int64(2), got.issues[0].Record)
	assert.Len(t, got.spans, 2)
	// Everything allocated while reading, not just what was live at once.
	alloc := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, alloc, uint64(4*limit+4<<20), "allocated %d MB to skip a %d MB line with a 1 MB limit", alloc>>20, lineMB)
}

// Many small files cost little more than their bytes: no fresh chunk
// buffer per file (100,788 one-span files took 54 s against
// 1.5 s for the same spans in one file).
func TestManySmallFilesAllocateLittle(t *testing.T) {
	dir := t.TempDir()
	const n = 1000
	many, one := manySpanFiles(t, dir, n)
	measure := func(paths []string, out string) (uint64, *Manifest) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, err := Ingest(FileSources(paths), Options{OutDir: filepath.Join(dir, out), Workers: 2})
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, m
	}
	allocMany, mMany := measure(many, "many")
	allocOne, mOne := measure([]string{one}, "one")
	for i := range mOne.Tables {
		assert.Equal(t, mOne.Tables[i].Rows, mMany.Tables[i].Rows, mOne.Tables[i].Name)
	}
	perFile := (int64(allocMany) - int64(allocOne)) / n
	t.Logf("one file: %d MB allocated; %d files: %d MB, %d KB more per file", allocOne>>20, n, allocMany>>20, perFile>>10)
	// A file costs its FileInfo, hash and reader state: a few KB, not the
	// 4 MB chunk buffer it used to.
	assert.Less(t, perFile, int64(64<<10))
}

// No column chunk mixes dictionary and plain data pages: the Parquet
// writer lists the page encodings of such a chunk in map order, so the
// file would differ from run to run. Unique 300-byte request ids in 5000
// rows make a 1.5 MB dictionary, past the writer's default 1 MiB limit.
func TestTablesNeverMixPageEncodings(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "[%d.5, [[\"CacheStoreCommitted\", \"req-%05d-%s\", \"CPU\", 4, %d]]]\n", i, i, strings.Repeat("r", 290), i)
	}
	p := writeFile(t, dir, "kv.jsonl", []byte(b.String()))
	read := func(out string) []byte {
		_, err := Ingest(FileSources([]string{p}), Options{OutDir: filepath.Join(dir, out)})
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(dir, out, TableKVEvents+".parquet"))
		require.NoError(t, err)
		return data
	}
	first := read("a")
	r, err := file.OpenParquetFile(filepath.Join(dir, "a", TableKVEvents+".parquet"), false)
	require.NoError(t, err)
	defer r.Close()
	for g := 0; g < r.NumRowGroups(); g++ {
		rg := r.MetaData().RowGroup(g)
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			require.NoError(t, err)
			data := 0
			for _, s := range cc.EncodingStats() {
				if s.PageType == 0 { // DATA_PAGE (the thrift enum is internal to arrow)
					data++
				}
			}
			assert.LessOrEqual(t, data, 1, "row group %d column %s: data pages of %d encodings", g, cc.PathInSchema(), data)
		}
	}
	for i := 0; i < 4; i++ {
		require.Equal(t, first, read(fmt.Sprint("again", i)), "a second ingest wrote different bytes")
	}
}

// Buffers for a long record double from the chunk size, and past
// bigRecordBytes take the whole limit at once (its pages are backed only
// as they fill), so a record never holds an old buffer and a doubled copy
// near the limit; they never exceed limit+1.
func TestRecordBufferGrowth(t *testing.T) {
	fr := fileReader{chunkBytes: 1 << 20, limit: DefaultMaxRecordBytes}
	assert.Equal(t, 2<<20, fr.grow(1<<20))
	assert.Equal(t, 64<<20, fr.grow(32<<20))
	assert.Equal(t, DefaultMaxRecordBytes+1, fr.grow(32<<20+1))
	assert.Equal(t, DefaultMaxRecordBytes+1, fr.grow(DefaultMaxRecordBytes))
	small := fileReader{chunkBytes: 1 << 20, limit: 3000}
	assert.Equal(t, 3001, small.grow(2000))
	assert.Equal(t, 3001, small.grow(3000))
	for n := 1; n <= DefaultMaxRecordBytes; n = n*3 + 1 {
		g := fr.grow(n)
		assert.True(t, g > n && g <= DefaultMaxRecordBytes+1, "grow(%d) = %d", n, g)
	}
}
