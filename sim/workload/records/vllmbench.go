package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// vllm bench serve results (vllm-project/vllm, vllm/benchmarks/serve.py:
// benchmark() builds the result dict, main_async() saves it; the request
// timing is vllm/benchmarks/lib/endpoint_request_func.py). With
// --save-result --save-detailed the JSON object holds, besides the run's
// settings and aggregates, one array entry per request, in send order:
//
//	input_lens   prompt tokens (the server's usage.prompt_tokens when it reports them)
//	output_lens  output tokens: the server's usage.completion_tokens, else the
//	             client's tokenization of the text (calculate_metrics); 0 when failed
//	start_times  time.perf_counter() when the request was sent, s
//	ttfts        first streamed chunk − start, s (0 when failed)
//	itls         the gaps between later chunks, s (a chunk may carry several tokens)
//	latencies    last chunk − start, s (newer vLLM only; else ttft + sum(itls), the same)
//	errors       "" for a success, else the error text
//
// (also generated_texts and queue_times, not used here). Without
// --save-detailed the per-request arrays are absent and the file cannot be
// read.
//
// Arrivals: start_times are the only per-request send times in the file.
// vLLM versions before they were saved (benchmarks/benchmark_serving.py and
// early vllm bench serve: input_lens, output_lens, ttfts, itls,
// generated_texts, errors only) give no arrival at all: the gaps were drawn
// from a seeded Poisson or gamma process inside the client and not
// recorded, and re-drawing them would invent arrivals that did not happen.
// Such a file is refused with an error that says so.
//
// With --max-concurrency a request can wait for a client slot before it is
// sent; start_time is when it was sent, so the simulated server sees the
// arrivals the real one saw. Latencies are from start_time: TTFT = ttfts,
// E2E = latencies (or ttft + sum(itls)), mean ITL = (E2E − TTFT) /
// (output_lens − 1), vLLM's TPOT (calculate_metrics). Failed requests are
// skipped.
type vllmBenchFile struct {
	InputLens  []json.RawMessage `json:"input_lens"`
	OutputLens json.RawMessage   `json:"output_lens"`
	StartTimes []json.RawMessage `json:"start_times"`
	TTFTs      []json.RawMessage `json:"ttfts"`
	ITLs       []json.RawMessage `json:"itls"`
	Latencies  []json.RawMessage `json:"latencies"`
	Errors     []json.RawMessage `json:"errors"`
}

func readVLLMBench(r *reader, src io.Reader) error {
	var f vllmBenchFile
	data, err := io.ReadAll(src)
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	// Its arrays are the table's columns: one named twice would leave the
	// other copy unread (docs/hardening.md, class 7).
	if k, ok := dupKey(data); ok {
		return fmt.Errorf("%s: key %s appears twice", r.path, k)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: %s: a JSON %s, want an array with one entry per request", r.path, te.Field, te.Value)
		}
		return fmt.Errorf("%s: not a vllm bench serve result (a JSON object): %w", r.path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: data after the result object", r.path)
	}
	if f.InputLens == nil {
		return fmt.Errorf("%s: no input_lens: vllm bench serve writes the per-request arrays only with --save-result --save-detailed", r.path)
	}
	if f.StartTimes == nil {
		return fmt.Errorf("%s: no start_times: this vllm bench serve result has no per-request send times "+
			"(vLLM saves them with --save-detailed in newer versions only), so its arrivals cannot be replayed", r.path)
	}
	var outputLens []json.RawMessage
	if !present(f.OutputLens) || json.Unmarshal(f.OutputLens, &outputLens) != nil {
		return fmt.Errorf("%s: output_lens is not an array with one entry per request (a pooling benchmark has no output tokens)", r.path)
	}
	n := len(f.InputLens)
	arrays := []struct {
		name string
		a    []json.RawMessage
	}{{"output_lens", outputLens}, {"start_times", f.StartTimes}, {"ttfts", f.TTFTs}, {"itls", f.ITLs}, {"latencies", f.Latencies}, {"errors", f.Errors}}
	for _, a := range arrays {
		if a.a != nil && len(a.a) != n {
			return fmt.Errorf("%s: %s has %d entries, input_lens %d; want one each per request", r.path, a.name, len(a.a), n)
		}
	}
	for i := range n {
		t, rec, e := vllmBenchRow(&f, outputLens, i)
		if err := r.add(int64(i)+1, t, rec, e); err != nil {
			return err
		}
	}
	return nil
}

// vllmBenchRow reads request i.
func vllmBenchRow(f *vllmBenchFile, outputLens []json.RawMessage, i int) (int64, Record, *rowError) {
	if f.Errors != nil && present(f.Errors[i]) {
		var msg string
		if err := json.Unmarshal(f.Errors[i], &msg); err != nil {
			return 0, Record{}, bad(SkipMalformed, "errors", "%s is not a string", clip(f.Errors[i]))
		}
		if msg != "" {
			first, _, _ := strings.Cut(msg, "\n")
			return 0, Record{}, bad(SkipFailedRequest, "errors", "the request failed: %s", clipString(first))
		}
	}
	t, e := seconds(f.StartTimes[i], "start_times")
	if e != nil {
		return 0, Record{}, e
	}
	rec := Record{TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}
	if rec.PromptTokens, e = count(f.InputLens[i], "input_lens", SkipZeroPromptTokens); e != nil {
		return 0, Record{}, e
	}
	if rec.OutputTokens, e = count(outputLens[i], "output_lens", SkipZeroOutputTokens); e != nil {
		return 0, Record{}, e
	}
	if f.TTFTs == nil {
		return t, rec, nil
	}
	ttft, e := seconds(f.TTFTs[i], "ttfts")
	if e != nil {
		return 0, Record{}, e
	}
	if ttft < 0 {
		return 0, Record{}, bad(SkipNegative, "ttfts", "%s is negative", clip(f.TTFTs[i]))
	}
	rec.TTFTUs = nsToUs(ttft)
	var e2e int64
	switch {
	case f.Latencies != nil:
		if e2e, e = seconds(f.Latencies[i], "latencies"); e != nil {
			return 0, Record{}, e
		}
		if e2e < ttft {
			return 0, Record{}, bad(SkipNegative, "latencies", "%s is shorter than the ttft", clip(f.Latencies[i]))
		}
	case f.ITLs != nil:
		gaps, e := secondsList(f.ITLs[i], "itls")
		if e != nil {
			return 0, Record{}, e
		}
		e2e = ttft
		for _, g := range gaps {
			if g < 0 {
				return 0, Record{}, bad(SkipNegative, "itls", "a gap is negative")
			}
			if e2e += g; e2e < 0 {
				return 0, Record{}, bad(SkipBadNumber, "itls", "the sum is out of range")
			}
		}
	default:
		return t, rec, nil
	}
	rec.E2EUs = nsToUs(e2e)
	if rec.OutputTokens > 1 {
		rec.MeanITLUs = perTokenUs(e2e-ttft, rec.OutputTokens-1)
	}
	return t, rec, nil
}
