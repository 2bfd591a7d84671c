package otlpingest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// manySpanFiles writes the first n spans of a generated trace twice: each
// span as a one-line file of its own (dir/files/), and all of them, one
// per line, in one file (dir/one.jsonl). It returns the file lists.
func manySpanFiles(tb testing.TB, dir string, n int) (many []string, one string) {
	var gen bytes.Buffer
	w := bufio.NewWriter(&gen)
	if err := genTrace(w, int64(n)*5000); err != nil { // ~4 KB a span on average
		tb.Fatal(err)
	}
	var spans []Span
	for _, line := range bytes.Split(gen.Bytes(), []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		sp, err := DecodeJSON(line)
		if err != nil {
			tb.Fatal(err)
		}
		spans = append(spans, sp...)
		if len(spans) >= n {
			break
		}
	}
	if len(spans) < n {
		tb.Fatalf("generated %d spans, want %d", len(spans), n)
	}
	spans = spans[:n]
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		tb.Fatal(err)
	}
	var all []byte
	for i := range spans {
		line := append(AppendJSON(nil, spans[i:i+1]), '\n')
		all = append(all, line...)
		p := filepath.Join(dir, "files", fmt.Sprintf("span-%06d.jsonl", i))
		if err := os.WriteFile(p, line, 0o644); err != nil {
			tb.Fatal(err)
		}
		many = append(many, p)
	}
	one = filepath.Join(dir, "one.jsonl")
	if err := os.WriteFile(one, all, 0o644); err != nil {
		tb.Fatal(err)
	}
	return many, one
}

// BenchmarkIngestManyFiles ingests N one-span files (BLIS_BENCH_FILES,
// default 20000) and the same spans in one file, and reports both times:
//
//	go test ./otlpingest -run '^$' -bench IngestManyFiles -benchtime 1x
func BenchmarkIngestManyFiles(b *testing.B) {
	n := 20000
	if v := os.Getenv("BLIS_BENCH_FILES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BLIS_BENCH_FILES=%q: %v", v, err)
		}
	}
	dir := b.TempDir()
	many, one := manySpanFiles(b, dir, n)
	b.ResetTimer()
	var tMany, tOne time.Duration
	var cpuMany, cpuOne float64
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), cpuSeconds()
		if _, err := Ingest(FileSources(many), Options{OutDir: filepath.Join(dir, "out-many")}); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), cpuSeconds()
		if _, err := Ingest(FileSources([]string{one}), Options{OutDir: filepath.Join(dir, "out-one")}); err != nil {
			b.Fatal(err)
		}
		tMany += t1.Sub(t0)
		tOne += time.Since(t1)
		cpuMany += c1 - c0
		cpuOne += cpuSeconds() - c1
	}
	b.StopTimer()
	nb := float64(b.N)
	b.ReportMetric(tMany.Seconds()/nb, "s-many-files")
	b.ReportMetric(tOne.Seconds()/nb, "s-one-file")
	b.ReportMetric(cpuMany/nb, "cpu-s-many-files")
	b.ReportMetric(cpuOne/nb, "cpu-s-one-file")
	b.ReportMetric(tMany.Seconds()/nb/float64(n)*1e6, "us/file")
}
