package records

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/blis-sim/blis/internal/columns"
)

// Azure LLM inference traces (github.com/Azure/AzurePublicDataset,
// AzureLLMInferenceDataset2023.md and AzureLLMInferenceDataset2024.md):
// a CSV with the header TIMESTAMP,ContextTokens,GeneratedTokens, one row
// per request; TIMESTAMP is the invocation time, ContextTokens the prompt
// and GeneratedTokens the output tokens. The datasets' notebooks
// (analysis/AzureLLMInferenceDataset2023.ipynb, ...2024.ipynb) show the
// timestamps: the 2023 files (AzureLLMInferenceTrace_{code,conv}.csv) write
// 7 fractional digits and no zone ("2023-11-16 18:15:46.6805900"), the 2024
// files (..._1week.csv) up to 6 digits and a UTC offset, and no fraction at
// all on whole seconds ("2024-05-12 00:00:00.001163+00:00",
// "2024-05-12 00:00:00+00:00"). Both are read exactly to the ns, then
// rounded to the µs. The format has no latencies.
var azureColumns = [3]string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}

func readAzure(r *reader, src io.Reader) error {
	cr := csv.NewReader(src)
	cr.FieldsPerRecord = -1 // short rows are skips, not file errors
	cr.LazyQuotes = true    // the traces have no quotes; don't fail a row on a stray one
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty file; want the header %s", r.path, strings.Join(azureColumns[:], ","))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	if err := columns.Duplicate(header, func(h string) string { return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) }); err != nil {
		return fmt.Errorf("%s:1: %w", r.path, err)
	}
	var where [3]int
	for c, name := range azureColumns {
		where[c] = -1
		for i, h := range header {
			h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
			if strings.EqualFold(h, name) {
				where[c] = i
				break
			}
		}
		if where[c] < 0 {
			return fmt.Errorf("%s:1: missing column %s; the Azure trace header is %s", r.path, name, strings.Join(azureColumns[:], ","))
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r.path, err)
		}
		line, _ := cr.FieldPos(0)
		t, out, e := azureRow(rec, where)
		if err := r.add(int64(line), t, out, e); err != nil {
			return err
		}
	}
}

func azureRow(rec []string, where [3]int) (int64, Record, *rowError) {
	var cells [3]string
	for c, i := range where {
		if i >= len(rec) || strings.TrimSpace(rec[i]) == "" {
			return 0, Record{}, bad(SkipMissingField, azureColumns[c], "missing")
		}
		cells[c] = strings.TrimSpace(rec[i])
	}
	t, ok := parseDateTime(cells[0])
	if !ok {
		return 0, Record{}, bad(SkipBadTime, azureColumns[0], "%q is not a date and time (YYYY-MM-DD HH:MM:SS[.fraction][zone])", clipString(cells[0]))
	}
	prompt, e := checkCount(cells[1], azureColumns[1], SkipZeroPromptTokens)
	if e != nil {
		return 0, Record{}, e
	}
	output, e := checkCount(cells[2], azureColumns[2], SkipZeroOutputTokens)
	if e != nil {
		return 0, Record{}, e
	}
	return t, Record{PromptTokens: prompt, OutputTokens: output, TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}, nil
}
