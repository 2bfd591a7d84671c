package otlpingest

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// realisticStepLine is one ExportTraceServiceRequest holding a step span
// with n BATCH_SUMMARY events, the bulk of a step-traced vLLM run.
func realisticStepLine(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm-engine"}}]},"scopeSpans":[{"scope":{"name":"vllm.scheduler.step"},"spans":[{"traceId":"5b8aa5a2d2c872e8321cf37308d69df2","spanId":"051581bf3cb55c13","parentSpanId":"","name":"scheduler_steps_7","kind":1,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000","attributes":[{"key":"scheduler.span_sequence","value":{"intValue":"7"}},{"key":"scheduler.step_range_start","value":{"intValue":"700"}},{"key":"scheduler.step_range_end","value":{"intValue":"799"}},{"key":"scheduler.closure_interval","value":{"intValue":"100"}}],"events":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"timeUnixNano":"17000000000%08d","name":"step.BATCH_SUMMARY","attributes":[{"key":"step.id","value":{"intValue":"%d"}},{"key":"step.ts_start_ns","value":{"intValue":"%d"}},{"key":"step.ts_end_ns","value":{"intValue":"%d"}},{"key":"step.duration_us","value":{"intValue":"143"}},{"key":"queue.running_depth","value":{"intValue":"57"}},{"key":"queue.waiting_depth","value":{"intValue":"3"}},{"key":"batch.num_prefill_reqs","value":{"intValue":"1"}},{"key":"batch.num_decode_reqs","value":{"intValue":"56"}},{"key":"batch.scheduled_tokens","value":{"intValue":"568"}},{"key":"batch.prefill_tokens","value":{"intValue":"512"}},{"key":"batch.decode_tokens","value":{"intValue":"56"}},{"key":"batch.num_finished","value":{"intValue":"2"}},{"key":"batch.num_preempted","value":{"intValue":"0"}},{"key":"kv.blocks_total_gpu","value":{"intValue":"28279"}},{"key":"kv.blocks_free_gpu","value":{"intValue":"20111"}},{"key":"kv.usage_gpu_ratio","value":{"doubleValue":0.28884331129106405}}]}`,
			i, 700+i, 9000000000+i*25000000, 9000000143+i*25000000)
	}
	b.WriteString(`],"droppedEventsCount":0,"status":{}}]}]}]}`)
	return []byte(b.String())
}

func BenchmarkDecodeJSONStepLine(b *testing.B) {
	line := realisticStepLine(100)
	d := newJSONDecoder()
	var out []Span
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		out, err = d.decode(line, 1, out[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSONTrace decodes 20 MB of the generated trace of
// BenchmarkIngestLarge (API, engine and step spans) and reports MB per
// CPU-second as well, which a shared machine does not distort.
func BenchmarkDecodeJSONTrace(b *testing.B) {
	var buf bytes.Buffer
	if err := genTrace(bufio.NewWriter(&buf), 20e6); err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte{'\n'})
	d := newJSONDecoder()
	var out []Span
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for i := 0; i < b.N; i++ {
		for j, line := range lines {
			var err error
			if out, err = d.decode(line, int64(j+1), out[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(buf.Len())/1e6*float64(b.N)/(cpuSeconds()-cpu0), "MB/cpu-s")
}
