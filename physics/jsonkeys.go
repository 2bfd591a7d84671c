package physics

import (
	"bytes"
	"encoding/json"
	"strings"
)

// duplicateKey reports the first key that a JSON object names twice at
// its top level, comparing keys as encoding/json matches them to struct
// fields (case-insensitively): encoding/json keeps the last copy of a key
// without a word, so {"gemm_tflops": 726.4, "gemm_tflops": 1} would run
// at 1 TFLOP/s. It returns the second spelling and true; false when no
// key repeats or data is not a JSON object (the decoder then says what is
// wrong). Keys of nested objects are not compared: no loader here reads
// one by name.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	var seen []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, ok := t.(string)
		if !ok {
			return "", false
		}
		for _, s := range seen {
			if strings.EqualFold(s, k) {
				return k, true
			}
		}
		seen = append(seen, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
