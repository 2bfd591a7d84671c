package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
)

// sniffBytes is how much of a file Detect reads.
const sniffBytes = 64 << 10

// objectKeys are keys that only one format's top-level object (or first
// JSON line) has.
var objectKeys = map[string]string{
	"input_length": Mooncake, "output_length": Mooncake, "hash_ids": Mooncake,
	"input_toks": VLLMRuns, "output_toks": VLLMRuns, "arrival_time": VLLMRuns, "queued_ts": VLLMRuns,
	"first_token_ts": VLLMRuns, "last_token_ts": VLLMRuns,
	"input_lens": VLLMBench, "output_lens": VLLMBench, "start_times": VLLMBench, "ttfts": VLLMBench, "itls": VLLMBench,
	"endpoint_type": VLLMBench, "num_prompts": VLLMBench, "request_rate": VLLMBench, "burstiness": VLLMBench,
	"max_concurrency": VLLMBench,
}

// elementKeys are the keys of an inference-perf array element.
var elementKeys = map[string]string{"start_time": InferencePerf, "end_time": InferencePerf, "info": InferencePerf}

// Detect names the format of the file at path from its first 64 KiB: a CSV
// whose header has TIMESTAMP, ContextTokens and GeneratedTokens is azure; a
// JSON object (the file's, or its first line's) is mooncake, vllm-runs or
// vllm-bench by the first key only one of them has; a JSON array whose
// first element has start_time, end_time or info is inference-perf. It
// returns "" when the file is none of these.
func Detect(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	return detect(buf[:n]), nil
}

func detect(b []byte) string {
	b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\ufeff")), " \t\r\n")
	if len(b) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	switch b[0] {
	case '{':
		_, _ = dec.Token()
		return sniffKeys(dec, objectKeys)
	case '[':
		_, _ = dec.Token()
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return ""
		}
		return sniffKeys(dec, elementKeys)
	}
	header, _, _ := bytes.Cut(b, []byte("\n"))
	found := 0
	for _, h := range strings.Split(string(header), ",") {
		h = strings.Trim(strings.TrimSpace(h), `"`)
		for _, c := range azureColumns {
			if strings.EqualFold(h, c) {
				found++
			}
		}
	}
	if found == len(azureColumns) {
		return Azure
	}
	return ""
}

// sniffKeys reads an object's keys (its '{' already read) until one names a
// format; the sniffed prefix may end inside the object.
func sniffKeys(dec *json.Decoder, keys map[string]string) string {
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, ok := t.(string)
		if !ok {
			return ""
		}
		if f := keys[k]; f != "" {
			return f
		}
		if skipValue(dec) != nil {
			return ""
		}
	}
	return ""
}

// skipValue reads one JSON value's tokens.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
