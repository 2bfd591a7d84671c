package records

import (
	"encoding/json"
	"io"
)

// MooncakeBlockTokens is the tokens per hash id of a Mooncake trace.
const MooncakeBlockTokens = 512

// Mooncake traces (github.com/kvcache-ai/Mooncake, FAST25-release/README.md
// and FAST25-release/traces/*.jsonl; the format as NVIDIA dynamo's
// benchmarks/data_generator/README.md describes it): one JSON object a line,
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
//
// timestamp is the arrival in ms since the trace's first request (equal for
// requests arriving together), input_length and output_length the prompt
// and output tokens, hash_ids the remapped hashes of the prompt's 512-token
// blocks (ceil(input_length/512) of them; requests sharing leading ids
// share that prefix). Other keys are ignored. The format has no latencies.
type mooncakeLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  json.RawMessage `json:"input_length"`
	OutputLength json.RawMessage `json:"output_length"`
	HashIDs      json.RawMessage `json:"hash_ids"`
}

func readMooncake(r *reader, src io.Reader) error {
	return eachLine(src, func(line int64, b []byte) error {
		t, rec, e := mooncakeRow(b)
		return r.add(line, t, rec, e)
	})
}

func mooncakeRow(b []byte) (int64, Record, *rowError) {
	var m mooncakeLine
	if k, ok := dupKey(b); ok {
		return 0, Record{}, bad(SkipDuplicateKey, k, "named twice in the row")
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, Record{}, typeError(err)
	}
	t, e := scaled(m.Timestamp, "timestamp", 6) // ms to ns
	if e != nil {
		return 0, Record{}, e
	}
	prompt, e := count(m.InputLength, "input_length", SkipZeroPromptTokens)
	if e != nil {
		return 0, Record{}, e
	}
	output, e := count(m.OutputLength, "output_length", SkipZeroOutputTokens)
	if e != nil {
		return 0, Record{}, e
	}
	rec := Record{PromptTokens: prompt, OutputTokens: output, TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}
	if present(m.HashIDs) {
		if err := json.Unmarshal(m.HashIDs, &rec.Content); err != nil {
			return 0, Record{}, bad(SkipBadNumber, "hash_ids", "not an array of integers >= 0")
		}
	}
	if len(rec.Content) == 0 {
		rec.Content = nil
	} else {
		rec.ContentTokens = MooncakeBlockTokens
	}
	return t, rec, nil
}
