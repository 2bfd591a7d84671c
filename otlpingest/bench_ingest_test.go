package otlpingest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The end-to-end ingest benchmark runs on a generated trace of a
// step-traced calibration run (every step sampled, 5% rich, 64 running
// requests), 1.1 GB by default:
//
//	go test ./otlpingest -run '^$' -bench IngestLarge -benchtime 1x -timeout 30m
//
// BLIS_BENCH_TRACE_MB sets the size and BLIS_BENCH_DIR where the trace is
// kept between runs (default: the system temp directory), so that the CLI
// can be measured on the same file:
//
//	/usr/bin/time -v go run ./cmd/calibrate ingest $TMPDIR/blis-bench/trace-1100mb-v1.jsonl -o /tmp/tables

// genTrace writes about size bytes of JSON lines: API spans and engine
// spans in batches of 64 (as the SDK's batch processor exports them), and
// one step span per 100 steps with a BATCH_SUMMARY per step, snapshots on
// every 20th step, and the SDK's 128-event limit applied.
func genTrace(w *bufio.Writer, size int64) error {
	rng := rand.New(rand.NewPCG(1, 2))
	type req struct {
		id                   int
		prompt, out, done    int
		queued, sched, first float64 // ms
		sent                 bool
	}
	var written int64
	var line []byte
	emit := func(spans []Span) error {
		line = AppendJSON(line[:0], spans)
		line = append(line, '\n')
		written += int64(len(line))
		_, err := w.Write(line)
		return err
	}
	const slots = 64
	running := make([]*req, 0, slots)
	nextID := 0
	var apiBatch, coreBatch []Span
	var stepEvents []Event
	dropped := uint32(0)
	ms := 0.0
	for step := int64(1); written < size; step++ {
		for len(running) < slots {
			r := &req{id: nextID, prompt: 200 + rng.IntN(1800), out: 50 + rng.IntN(350), queued: ms}
			nextID++
			r.sched = ms
			running = append(running, r)
		}
		prefill, decode, nPrefill := 0, 0, 0
		for _, r := range running {
			if !r.sent {
				prefill += r.prompt
				nPrefill++
			} else {
				decode++
			}
		}
		stepMs := 8 + float64(prefill)/2000 + float64(decode)/50
		// The step's events: a summary, and snapshots on rich steps, up to
		// the SDK's 128 events per span.
		add := func(e Event) {
			if len(stepEvents) < 128 {
				stepEvents = append(stepEvents, e)
			} else {
				dropped++
			}
		}
		add(summary(step, ms, int64(len(running)), int64(rng.IntN(5)), int64(nPrefill), int64(decode), int64(prefill), int64(decode), 0, 0, int64(4096-len(running)*20)))
		if step%20 == 0 {
			for _, r := range running {
				add(snap(step, ms, fmt.Sprintf("cmpl-%d-0-ab12", r.id), "DECODE", int64(r.prompt), int64(r.prompt+r.done), int64(r.done), 0, 1, int64((r.prompt+r.done)/16+1), 0))
			}
		}
		ms += stepMs
		next := running[:0]
		for _, r := range running {
			if !r.sent {
				r.sent, r.first = true, ms
			}
			r.done++
			if r.done < r.out {
				next = append(next, r)
				continue
			}
			id := fmt.Sprintf("cmpl-%d", r.id)
			tr, sp := byte(r.id), byte(r.id>>8)
			api := apiReq(tr, sp, id, "/v1/completions", int64(r.prompt), int64(r.out), apiEv("api.ARRIVED", r.queued-1), apiEv("api.DEPARTED", ms+0.5))
			core := coreReq(tr, sp+1, sp, id+"-0-ab12",
				jEv("QUEUED", r.queued, step, "WAITING", 0, int64(r.prompt), 0, int64(r.out), 0),
				jEv("SCHEDULED", r.sched, step, "PREFILL", 0, int64(r.prompt), 0, int64(r.out), 0, sv("schedule.kind", "FIRST")),
				jEv("FIRST_TOKEN", r.first, step, "DECODE", int64(r.prompt), int64(r.prompt), 1, int64(r.out), 0),
				jEv("FINISHED", ms, step, "DECODE", int64(r.prompt), int64(r.prompt), int64(r.out), int64(r.out), 0, sv("finish.status", "length")))
			binary.BigEndian.PutUint64(api.TraceID[:8], uint64(r.id))
			binary.BigEndian.PutUint64(api.SpanID[:], uint64(2*r.id+1))
			core.TraceID, core.ParentSpanID = api.TraceID, api.SpanID
			binary.BigEndian.PutUint64(core.SpanID[:], uint64(2*r.id+2))
			apiBatch, coreBatch = append(apiBatch, api), append(coreBatch, core)
		}
		running = next
		if len(apiBatch) >= 64 {
			if err := emit(apiBatch); err != nil {
				return err
			}
			if err := emit(coreBatch); err != nil {
				return err
			}
			apiBatch, coreBatch = apiBatch[:0], coreBatch[:0]
		}
		if step%100 == 0 {
			s := stepSpan(byte(step/100), byte(step/100), step/100-1, step-99, step, stepEvents...)
			binary.BigEndian.PutUint64(s.TraceID[8:], uint64(step))
			binary.BigEndian.PutUint64(s.SpanID[:], uint64(step)|1<<62)
			s.DroppedEventsCount = dropped
			if err := emit([]Span{s}); err != nil {
				return err
			}
			stepEvents, dropped = stepEvents[:0], 0
		}
	}
	return w.Flush()
}

// benchTrace returns the path of a generated trace of sizeMB, writing it
// once per machine.
func benchTrace(b *testing.B, sizeMB int) string {
	dir := os.Getenv("BLIS_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "blis-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("trace-%dmb-v1.jsonl", sizeMB))
	if st, err := os.Stat(path); err == nil && st.Size() >= int64(sizeMB)*1e6 {
		return path
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		b.Fatal(err)
	}
	if err := genTrace(bufio.NewWriterSize(f, 1<<20), int64(sizeMB)*1e6); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return -1
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func BenchmarkIngestLarge(b *testing.B) {
	sizeMB := 1100
	if v := os.Getenv("BLIS_BENCH_TRACE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BLIS_BENCH_TRACE_MB=%q: %v", v, err)
		}
		sizeMB = n
	}
	path := benchTrace(b, sizeMB)
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	out := b.TempDir()
	b.ResetTimer()
	cpu0 := cpuSeconds()
	var m *Manifest
	for i := 0; i < b.N; i++ {
		var err error
		if m, err = Ingest(FileSources([]string{path}), Options{OutDir: out}); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (cpuSeconds() - cpu0) / float64(b.N)
	b.StopTimer()
	b.ReportMetric(float64(st.Size())/1e6/cpu, "MB/cpu-s")
	b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
	b.Logf("%s: %d bytes; rows %v; issues %d", path, st.Size(), func() []int64 {
		var r []int64
		for _, t := range m.Tables {
			r = append(r, t.Rows)
		}
		return r
	}(), m.Issues.Total)
}
