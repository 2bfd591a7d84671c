package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// inference-perf (kubernetes-sigs/inference-perf): with the report option
// request_lifecycle.per_request it writes per_request_lifecycle_metrics.json,
// a JSON array with one entry per request (inference_perf/reportgen/base.py,
// build_per_request_lifecycle_entry; the models are in
// inference_perf/apis/base.py):
//
//	{"start_time": s, "end_time": s, "session_id": "...", "request": ..., "response": ...,
//	 "info": {...}, "error": null | {"error_type": ..., "error_msg": ...}}
//
// start_time and end_time are the client's time.perf_counter() when the
// request was sent and when its response ended. info has changed shape
// over versions; all three are read:
//
//	oldest  {"input_tokens", "output_tokens", "output_token_times"}
//	middle  {"input_tokens", "response_info": {"output_tokens", "output_token_times"}}
//	newest  {"request_metrics": {"text": {"input_tokens"}},
//	         "response_metrics": {"output_tokens", "server_usage", "output_token_times", ...},
//	         "input_tokens"}  (the last a deprecated mirror)
//
// Prompt tokens are request_metrics.text.input_tokens, else input_tokens.
// Output tokens are the server's count (server_usage.completion_tokens, or
// output_tokens for the Anthropic API) when reported: it counts decode
// steps, where output_tokens re-tokenizes the streamed text on the client.
// Latencies follow inference-perf's own (compute_request_latency_metrics):
// TTFT = output_token_times[0] − start_time, E2E = end_time − start_time,
// mean ITL = (last − first output token time) / (output tokens − 1), its
// TPOT. A response without token times (not streamed) has no TTFT or ITL.
// Requests with an error are skipped.
type ipEntry struct {
	StartTime json.RawMessage `json:"start_time"`
	EndTime   json.RawMessage `json:"end_time"`
	SessionID *string         `json:"session_id"`
	Info      *ipInfo         `json:"info"`
	Error     json.RawMessage `json:"error"`
}

type ipInfo struct {
	InputTokens      json.RawMessage `json:"input_tokens"`
	OutputTokens     json.RawMessage `json:"output_tokens"`
	OutputTokenTimes json.RawMessage `json:"output_token_times"`
	RequestMetrics   *struct {
		Text *struct {
			InputTokens json.RawMessage `json:"input_tokens"`
		} `json:"text"`
	} `json:"request_metrics"`
	ResponseMetrics *ipResponse `json:"response_metrics"`
	ResponseInfo    *ipResponse `json:"response_info"`
}

type ipResponse struct {
	OutputTokens     json.RawMessage `json:"output_tokens"`
	OutputTokenTimes json.RawMessage `json:"output_token_times"`
	ServerUsage      *struct {
		CompletionTokens json.RawMessage `json:"completion_tokens"`
		OutputTokens     json.RawMessage `json:"output_tokens"`
	} `json:"server_usage"`
}

func readInferencePerf(r *reader, src io.Reader) error {
	dec := json.NewDecoder(src)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("%s: not inference-perf per-request metrics (a JSON array of requests)", r.path)
	}
	for i := int64(1); dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s:%d: %w", r.path, i, err)
		}
		t, rec, e := inferencePerfRow(raw)
		if err := r.add(i, t, rec, e); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: data after the array", r.path)
	}
	return nil
}

// first is the first of raws that holds a value, or nil.
func first(raws ...json.RawMessage) json.RawMessage {
	for _, r := range raws {
		if present(r) {
			return r
		}
	}
	return nil
}

func inferencePerfRow(raw json.RawMessage) (int64, Record, *rowError) {
	var m ipEntry
	if k, ok := dupKey(raw); ok {
		return 0, Record{}, bad(SkipDuplicateKey, k, "named twice in the row")
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, Record{}, typeError(err)
	}
	if present(m.Error) {
		var e struct {
			Type string `json:"error_type"`
			Msg  string `json:"error_msg"`
		}
		_ = json.Unmarshal(m.Error, &e) // any error value fails the request; the text is for the message
		return 0, Record{}, bad(SkipFailedRequest, "error", "the request failed: %s", clipString(e.Type+" "+e.Msg))
	}
	start, e := seconds(m.StartTime, "start_time")
	if e != nil {
		return 0, Record{}, e
	}
	if m.Info == nil {
		return 0, Record{}, bad(SkipMissingField, "info", "missing")
	}
	in := m.Info
	var prompt json.RawMessage
	if in.RequestMetrics != nil && in.RequestMetrics.Text != nil {
		prompt = in.RequestMetrics.Text.InputTokens
	}
	var server, client, times json.RawMessage
	for _, resp := range []*ipResponse{in.ResponseMetrics, in.ResponseInfo} {
		if resp == nil {
			continue
		}
		if resp.ServerUsage != nil {
			server = first(server, resp.ServerUsage.CompletionTokens, resp.ServerUsage.OutputTokens)
		}
		client, times = first(client, resp.OutputTokens), first(times, resp.OutputTokenTimes)
	}
	rec := Record{TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}
	if m.SessionID != nil {
		rec.Session = *m.SessionID
	}
	if rec.PromptTokens, e = count(first(prompt, in.InputTokens), "info.input_tokens", SkipZeroPromptTokens); e != nil {
		return 0, Record{}, e
	}
	if rec.OutputTokens, e = count(first(server, client, in.OutputTokens), "info.output_tokens", SkipZeroOutputTokens); e != nil {
		return 0, Record{}, e
	}
	if present(m.EndTime) {
		end, e := seconds(m.EndTime, "end_time")
		if e != nil {
			return 0, Record{}, e
		}
		d, ok := sub(end, start)
		if !ok || d < 0 {
			return 0, Record{}, bad(SkipNegative, "end_time", "before start_time")
		}
		rec.E2EUs = nsToUs(d)
	}
	if times = first(times, in.OutputTokenTimes); times != nil {
		ts, e := secondsList(times, "info.output_token_times")
		if e != nil {
			return 0, Record{}, e
		}
		if len(ts) > 0 {
			ttft, ok := sub(ts[0], start)
			if !ok || ttft < 0 {
				return 0, Record{}, bad(SkipNegative, "info.output_token_times", "the first is before start_time")
			}
			rec.TTFTUs = nsToUs(ttft)
			d, ok := sub(ts[len(ts)-1], ts[0])
			if !ok || d < 0 {
				return 0, Record{}, bad(SkipNegative, "info.output_token_times", "the last is before the first")
			}
			if len(ts) > 1 && rec.OutputTokens > 1 {
				rec.MeanITLUs = perTokenUs(d, rec.OutputTokens-1)
			}
		}
	}
	return start, rec, nil
}
