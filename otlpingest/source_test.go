package otlpingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// testLine is a small valid ExportTraceServiceRequest with one span whose
// name carries i, so that order can be checked.
func testLine(i int) string {
	return fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"scope":{"name":"vllm.api"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"01020304050607%02x","name":"s%d","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"i","value":{"intValue":"%d"}}],"events":[{"timeUnixNano":"%d","name":"api.ARRIVED","attributes":[{"key":"event.ts.monotonic","value":{"doubleValue":%d.5}}]}]}]}]}]}`,
		i%256, i, 1000+i, 2000+i, i, 1500+i, i)
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

func gz(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

func zst(t *testing.T, data []byte) []byte {
	w, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	return w.EncodeAll(data, nil)
}

type collected struct {
	spans  []Span
	issues []Issue
	files  []FileInfo
}

func readAll(t *testing.T, opt ReadOptions, files ...string) collected {
	t.Helper()
	var c collected
	require.NoError(t, ReadTraces(files, opt, func(b *Batch) error {
		c.spans = append(c.spans, b.Spans...)
		c.issues = append(c.issues, b.Issues...)
		if b.FileDone != nil {
			c.files = append(c.files, *b.FileDone)
		}
		return nil
	}))
	return c
}

func lines(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(testLine(i))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func TestReadTracesFormatsAgree(t *testing.T) {
	dir := t.TempDir()
	data := lines(50)
	want := readAll(t, ReadOptions{}, writeFile(t, dir, "plain.jsonl", data))
	require.Len(t, want.spans, 50)
	assert.Empty(t, want.issues)
	assert.Equal(t, FormatJSONLines, want.files[0].Format)
	assert.Equal(t, int64(50), want.files[0].Records)
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:]), want.files[0].SHA256)

	for _, tc := range []struct {
		name     string
		data     []byte
		comp     Compression
		plainLen int
	}{
		{"a.gz", gz(t, data), CompressionGzip, len(data)},
		{"no-suffix", zst(t, data), CompressionZstd, len(data)},
		{"b.json", append([]byte("\n\n"), data...), CompressionNone, len(data) + 2}, // leading blank lines
	} {
		got := readAll(t, ReadOptions{ChunkBytes: 700, Workers: 3}, writeFile(t, dir, tc.name, tc.data))
		assert.Empty(t, got.issues, tc.name)
		assert.Equal(t, tc.comp, got.files[0].Compression, tc.name)
		assert.Equal(t, int64(tc.plainLen), got.files[0].DecompressedBytes, tc.name)
		assert.Equal(t, int64(len(tc.data)), got.files[0].Bytes, tc.name)
		require.Len(t, got.spans, 50, tc.name)
		for i := range want.spans {
			w := want.spans[i]
			g := got.spans[i]
			if tc.name == "b.json" {
				w.Record += 2 // two blank lines first
			}
			assert.Equal(t, w, g, "%s span %d", tc.name, i)
		}
	}
}

func TestReadTracesOrderIndependentOfWorkers(t *testing.T) {
	dir := t.TempDir()
	f1 := writeFile(t, dir, "1.jsonl", lines(300))
	f2 := writeFile(t, dir, "2.jsonl.gz", gz(t, lines(200)))
	one := readAll(t, ReadOptions{Workers: 1, ChunkBytes: 1024}, f1, f2)
	many := readAll(t, ReadOptions{Workers: 8, ChunkBytes: 512}, f1, f2)
	require.Len(t, one.spans, 500)
	assert.Equal(t, one, many)
	for i, sp := range one.spans[:300] {
		assert.Equal(t, fmt.Sprintf("s%d", i), sp.Name)
		assert.Equal(t, int64(i+1), sp.Record, "record is the line number")
	}
}

func TestReadTracesMalformedAndTruncated(t *testing.T) {
	dir := t.TempDir()
	data := lines(5)
	ls := bytes.Split(data, []byte("\n"))
	ls[2] = []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`)
	bad := writeFile(t, dir, "bad.jsonl", bytes.Join(ls, []byte("\n")))
	c := readAll(t, ReadOptions{}, bad)
	require.Len(t, c.spans, 4)
	require.Len(t, c.issues, 1)
	assert.Equal(t, Issue{Kind: IssueMalformedRecord, File: bad, Record: 3, Detail: c.issues[0].Detail}, c.issues[0])
	assert.Contains(t, c.issues[0].Detail, "traceId")

	// A file cut inside its last line: the cut line is malformed.
	cut := writeFile(t, dir, "cut.jsonl", data[:len(data)-40])
	c = readAll(t, ReadOptions{}, cut)
	require.Len(t, c.spans, 4)
	require.Len(t, c.issues, 1)
	assert.Equal(t, int64(5), c.issues[0].Record)

	// A truncated gzip stream: complete lines are kept, the damage counted.
	z := gz(t, lines(200))
	tgz := writeFile(t, dir, "t.gz", z[:len(z)/2])
	c = readAll(t, ReadOptions{ChunkBytes: 4096}, tgz)
	kinds := map[IssueKind]int{}
	for _, is := range c.issues {
		kinds[is.Kind]++
	}
	assert.Equal(t, 1, kinds[IssueTruncatedCompression], "%v", c.issues)
	assert.LessOrEqual(t, kinds[IssueMalformedRecord], 1)
	assert.Greater(t, len(c.spans), 10)
	assert.Less(t, len(c.spans), 200)

	z2 := zst(t, lines(200))
	c = readAll(t, ReadOptions{}, writeFile(t, dir, "t.zst", z2[:len(z2)/2]))
	assert.NotEmpty(t, c.issues)
	for _, is := range c.issues {
		assert.Contains(t, []IssueKind{IssueTruncatedCompression, IssueMalformedRecord}, is.Kind)
	}
}

func toProto(spans []Span) []byte {
	req := &coltracepb.ExportTraceServiceRequest{}
	for _, sp := range spans {
		ps := &tracepb.Span{TraceId: sp.TraceID[:], SpanId: sp.SpanID[:], Name: sp.Name, Kind: tracepb.Span_SpanKind(sp.Kind),
			StartTimeUnixNano: sp.StartUnixNano, EndTimeUnixNano: sp.EndUnixNano, DroppedEventsCount: sp.DroppedEventsCount}
		if !sp.ParentSpanID.IsZero() {
			ps.ParentSpanId = sp.ParentSpanID[:]
		}
		conv := func(kvs []KeyValue) (out []*commonpb.KeyValue) {
			for _, kv := range kvs {
				pv := &commonpb.AnyValue{}
				switch kv.Value.Type {
				case ValString:
					pv.Value = &commonpb.AnyValue_StringValue{StringValue: kv.Value.Str}
				case ValInt:
					pv.Value = &commonpb.AnyValue_IntValue{IntValue: kv.Value.Int}
				case ValDouble:
					pv.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: kv.Value.Double}
				case ValBool:
					pv.Value = &commonpb.AnyValue_BoolValue{BoolValue: kv.Value.Bool}
				}
				out = append(out, &commonpb.KeyValue{Key: kv.Key, Value: pv})
			}
			return out
		}
		ps.Attributes = conv(sp.Attrs)
		for _, ev := range sp.Events {
			ps.Events = append(ps.Events, &tracepb.Span_Event{TimeUnixNano: ev.TimeUnixNano, Name: ev.Name, Attributes: conv(ev.Attrs)})
		}
		res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: sp.Service}}}}}
		if sp.Instance != "" {
			res.Attributes = append(res.Attributes, &commonpb.KeyValue{Key: "service.instance.id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: sp.Instance}}})
		}
		req.ResourceSpans = append(req.ResourceSpans, &tracepb.ResourceSpans{
			Resource:   res,
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: sp.Scope}, Spans: []*tracepb.Span{ps}}},
		})
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

func framed(msgs ...[]byte) []byte {
	var b bytes.Buffer
	for _, m := range msgs {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(m)))
		b.Write(hdr[:])
		b.Write(m)
	}
	return b.Bytes()
}

func TestReadTracesProto(t *testing.T) {
	dir := t.TempDir()
	want := readAll(t, ReadOptions{}, writeFile(t, dir, "a.jsonl", lines(20))).spans
	var msgs [][]byte
	for _, sp := range want {
		msgs = append(msgs, toProto([]Span{sp}))
	}
	data := framed(msgs...)
	for _, name := range []string{"p.bin", "p.bin.gz"} {
		content := data
		if strings.HasSuffix(name, ".gz") {
			content = gz(t, data)
		}
		c := readAll(t, ReadOptions{ChunkBytes: 300, Workers: 4}, writeFile(t, dir, name, content))
		assert.Empty(t, c.issues)
		assert.Equal(t, FormatProto, c.files[0].Format)
		require.Len(t, c.spans, 20)
		for i := range want {
			assert.Equal(t, want[i], c.spans[i], "span %d: record is the message number, which equals the line here", i)
		}
	}
	// Cut inside the last message.
	c := readAll(t, ReadOptions{}, writeFile(t, dir, "cut.bin", data[:len(data)-5]))
	require.Len(t, c.spans, 19)
	require.Len(t, c.issues, 1)
	assert.Equal(t, IssueCorruptFraming, c.issues[0].Kind)
	assert.Equal(t, int64(20), c.issues[0].Record)
	// A garbage message between good ones is skipped and located.
	mixed := framed(msgs[0], []byte{0xff, 0xff, 0xff}, msgs[1])
	c = readAll(t, ReadOptions{}, writeFile(t, dir, "mixed.bin", mixed))
	require.Len(t, c.spans, 2)
	require.Len(t, c.issues, 1)
	assert.Equal(t, Issue{Kind: IssueMalformedRecord, File: filepath.Join(dir, "mixed.bin"), Record: 2, Detail: c.issues[0].Detail}, c.issues[0])
}

func TestReadTracesDocumentAndEmpty(t *testing.T) {
	dir := t.TempDir()
	doc := "{\n  \"resourceSpans\": [\n" + strings.TrimSuffix(strings.TrimPrefix(testLine(3), `{"resourceSpans":[`), `]}`) + "\n  ]\n}\n"
	c := readAll(t, ReadOptions{}, writeFile(t, dir, "doc.json", []byte(doc)))
	assert.Empty(t, c.issues)
	assert.Equal(t, FormatJSONDocument, c.files[0].Format)
	require.Len(t, c.spans, 1)
	assert.Equal(t, "s3", c.spans[0].Name)

	c = readAll(t, ReadOptions{}, writeFile(t, dir, "empty.jsonl", nil))
	assert.Equal(t, FormatEmpty, c.files[0].Format)
	assert.Empty(t, c.spans)

	// One line longer than the chunk size.
	long := testLine(1)
	c = readAll(t, ReadOptions{ChunkBytes: 64}, writeFile(t, dir, "long.jsonl", []byte(long+"\n"+long)))
	assert.Empty(t, c.issues)
	assert.Len(t, c.spans, 2)
	assert.Equal(t, int64(2), c.files[0].Records)

	err := ReadTraces([]string{filepath.Join(dir, "missing")}, ReadOptions{}, func(*Batch) error { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}

// Every reader takes the instance from the resource: JSON lines, a JSON
// document and proto messages give the same spans.
func TestReadTracesInstanceInEveryFormat(t *testing.T) {
	var want []Span
	for _, set := range fixtureSets() {
		if set.name == "instances" {
			for _, l := range set.files[0].lines[:2] {
				want = append(want, l.spans...)
			}
		}
	}
	require.Len(t, want, 6)
	line := AppendJSON(nil, want)
	var doc bytes.Buffer
	require.NoError(t, json.Indent(&doc, line, "", "  "))
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		data   []byte
		format Format
	}{
		{"lines.jsonl", append(line, '\n'), FormatJSONLines},
		{"doc.json", doc.Bytes(), FormatJSONDocument},
		{"msgs.binpb", framed(toProto(want)), FormatProto},
	} {
		c := readAll(t, ReadOptions{}, writeFile(t, dir, tc.name, tc.data))
		assert.Empty(t, c.issues, tc.name)
		assert.Equal(t, tc.format, c.files[0].Format, tc.name)
		require.Len(t, c.spans, len(want), tc.name)
		for i := range want {
			assert.Equal(t, want[i].Instance, c.spans[i].Instance, "%s: span %d", tc.name, i)
			assert.Equal(t, want[i].Service, c.spans[i].Service, "%s: span %d", tc.name, i)
			assert.Equal(t, want[i].SpanID, c.spans[i].SpanID, "%s: span %d", tc.name, i)
		}
	}
}

// FuzzReadTraces feeds arbitrary file content through detection, framing
// and decoding: no panic, no run-stopping error for damaged content, the
// same result with one worker or three, and every issue located.
func FuzzReadTraces(f *testing.F) {
	f.Add(lines(3), false)
	f.Add(framed(toProto(nil)), false)
	f.Add([]byte("{\n \"resourceSpans\": []\n}"), false)
	f.Add(lines(2), true)
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0}, false)
	f.Fuzz(func(t *testing.T, data []byte, compress bool) {
		if compress {
			data = gz(t, data)
		}
		const p = "fuzz-input"
		src := []Source{{Name: p, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
		read := func(workers int) collected {
			var c collected
			err := ReadSources(src, ReadOptions{Workers: workers, ChunkBytes: 97}, func(b *Batch) error {
				c.spans = append(c.spans, b.Spans...)
				c.issues = append(c.issues, b.Issues...)
				if b.FileDone != nil {
					c.files = append(c.files, *b.FileDone)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("damaged content must be counted, not stop the run: %v", err)
			}
			return c
		}
		a, b := read(1), read(3)
		if len(a.spans) != len(b.spans) || len(a.issues) != len(b.issues) {
			t.Fatalf("worker count changed the result")
		}
		for _, is := range a.issues {
			if is.Record < 0 || is.File != p || is.Detail == "" {
				t.Fatalf("issue not located: %+v", is)
			}
		}
		if len(a.files) != 1 || a.files[0].Bytes != int64(len(data)) {
			t.Fatalf("file info: %+v", a.files)
		}
	})
}

// A compressed file whose header or frame is corrupt is counted, not an
// error that stops the run; the files after it are still read.
func TestReadTracesCorruptCompressionHeaders(t *testing.T) {
	dir := t.TempDir()
	badGzip := writeFile(t, dir, "bad.gz", []byte{0x1f, 0x8b, 0x99, 0x00, 0x00})
	badZstd := writeFile(t, dir, "bad.zst", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff, 0xff, 0x00})
	good := writeFile(t, dir, "good.jsonl", []byte(testLine(1)+"\n"))
	c := readAll(t, ReadOptions{}, badGzip, badZstd, good)
	require.Len(t, c.files, 3)
	require.Len(t, c.spans, 1, "the good file after the damaged ones is read")
	var kinds []IssueKind
	for _, i := range c.issues {
		kinds = append(kinds, i.Kind)
		assert.Equal(t, int64(1), i.Record)
	}
	assert.Equal(t, []IssueKind{IssueTruncatedCompression, IssueTruncatedCompression}, kinds)
}
