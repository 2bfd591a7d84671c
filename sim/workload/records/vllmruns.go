package records

import (
	"encoding/json"
	"io"
)

// vllm-runs (shared/data/vllm-runs/README.md, from casys-kaist/LLMServingSim
// bench/examples): vllm/requests.jsonl holds one JSON object a request,
//
//	{"request_id": "bench-0", "input_toks": 2358, "output_toks": 531,
//	 "arrival_time": 1787267980.0827403, "queued_ts": 27536.660701067,
//	 "scheduled_ts": 27536.660721646, "first_token_ts": 27537.350135653,
//	 "last_token_ts": 27554.231018618}
//
// vLLM's RequestStateStats of the request's last output. arrival_time is
// the frontend's wall clock (time.time()); the four *_ts are the engine
// core's monotonic clock (CLOCK_MONOTONIC). The two clocks differ by a
// constant that was not recorded.
//
// What is sound to derive:
//   - arrival: arrival_time differences (one clock: the spacing vLLM saw);
//   - ITL: (last_token_ts − first_token_ts) / (output_toks − 1), one clock;
//   - TTFT and E2E need arrival on the monotonic clock. Following the
//     README, the offset is C = max over the file's usable requests of
//     (arrival_time − queued_ts): a request cannot be queued before it
//     arrives, and the least delayed one, arriving at an idle engine, paid
//     only the frontend-to-engine hop (under a millisecond on these runs,
//     where several requests lie within 1 ms of the maximum and runs on the
//     same host agree on C to 1.5 ms). So TTFT = first_token_ts −
//     (arrival_time − C) and E2E = last_token_ts − (arrival_time − C),
//     understated by that hop at most. The engine-only first_token_ts −
//     queued_ts would leave out the wait for the running step (15–113 ms
//     median on these runs), so it is not used.
//
// A request without the three engine timestamps is still replayed, with
// latencies -1; one whose timestamps run backwards is skipped (negative).
// request_id and scheduled_ts are not used.
type vllmRunsLine struct {
	InputToks    json.RawMessage `json:"input_toks"`
	OutputToks   json.RawMessage `json:"output_toks"`
	ArrivalTime  json.RawMessage `json:"arrival_time"`
	QueuedTs     json.RawMessage `json:"queued_ts"`
	FirstTokenTs json.RawMessage `json:"first_token_ts"`
	LastTokenTs  json.RawMessage `json:"last_token_ts"`
}

// vllmRun is a usable row before the clock offset is known.
type vllmRun struct {
	line                  int64
	arrival               int64 // wall clock, ns
	rec                   Record
	timed                 bool // has the engine timestamps
	queued, first, latest int64
}

func readVLLMRuns(r *reader, src io.Reader) error {
	var runs []vllmRun
	err := eachLine(src, func(line int64, b []byte) error {
		v, e := vllmRunsRow(b)
		if e != nil {
			return r.add(line, 0, Record{}, e)
		}
		v.line = line
		runs = append(runs, v)
		return nil
	})
	if err != nil {
		return err
	}
	// The clock offset, from the usable requests only.
	var offset int64
	seen := false
	for _, v := range runs {
		if d := v.arrival - v.queued; v.timed && (!seen || d > offset) {
			offset, seen = d, true
		}
	}
	for _, v := range runs {
		var e *rowError
		if v.timed {
			// arrivalMono <= queued, by the choice of offset.
			arrivalMono, ok1 := sub(v.arrival, offset)
			ttft, ok2 := sub(v.first, arrivalMono)
			e2e, ok3 := sub(v.latest, arrivalMono)
			if ok1 && ok2 && ok3 {
				v.rec.TTFTUs, v.rec.E2EUs = nsToUs(ttft), nsToUs(e2e)
				if v.rec.OutputTokens > 1 {
					v.rec.MeanITLUs = perTokenUs(v.latest-v.first, v.rec.OutputTokens-1)
				}
			} else {
				e = bad(SkipBadNumber, "arrival_time", "too far from the other requests' clock offset")
			}
		}
		// Usable rows are counted here, in file order, after the skips of
		// the first pass: the totals are the same.
		if err := r.add(v.line, v.arrival, v.rec, e); err != nil {
			return err
		}
	}
	return nil
}

// sub is a − b and whether it did not overflow.
func sub(a, b int64) (int64, bool) {
	c := a - b
	return c, (b >= 0) == (c <= a)
}

func vllmRunsRow(b []byte) (vllmRun, *rowError) {
	var m vllmRunsLine
	if k, ok := dupKey(b); ok {
		return vllmRun{}, bad(SkipDuplicateKey, k, "named twice in the row")
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return vllmRun{}, typeError(err)
	}
	var v vllmRun
	var e *rowError
	if v.arrival, e = seconds(m.ArrivalTime, "arrival_time"); e != nil {
		return v, e
	}
	if v.rec.PromptTokens, e = count(m.InputToks, "input_toks", SkipZeroPromptTokens); e != nil {
		return v, e
	}
	if v.rec.OutputTokens, e = count(m.OutputToks, "output_toks", SkipZeroOutputTokens); e != nil {
		return v, e
	}
	v.rec.TTFTUs, v.rec.E2EUs, v.rec.MeanITLUs = -1, -1, -1
	if !present(m.QueuedTs) && !present(m.FirstTokenTs) && !present(m.LastTokenTs) {
		return v, nil
	}
	if v.queued, e = seconds(m.QueuedTs, "queued_ts"); e != nil {
		return v, e
	}
	if v.first, e = seconds(m.FirstTokenTs, "first_token_ts"); e != nil {
		return v, e
	}
	if v.latest, e = seconds(m.LastTokenTs, "last_token_ts"); e != nil {
		return v, e
	}
	switch {
	case v.first < v.queued:
		return v, bad(SkipNegative, "first_token_ts", "before queued_ts")
	case v.latest < v.first:
		return v, bad(SkipNegative, "last_token_ts", "before first_token_ts")
	}
	if _, ok := sub(v.arrival, v.queued); !ok {
		return v, bad(SkipBadNumber, "queued_ts", "too far from arrival_time")
	}
	if _, ok := sub(v.latest, v.queued); !ok { // then no difference of the three overflows
		return v, bad(SkipBadNumber, "last_token_ts", "too far from queued_ts")
	}
	v.timed = true
	return v, nil
}
