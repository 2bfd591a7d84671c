package replay

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
)

// The tables calibrate ingest writes from a vLLM trace (docs/ingest.md) are
// a measured run too: the requests table holds each request's arrival at
// the API server (api.ARRIVED) and its first token and end at the engine
// core (journey.FIRST_TOKEN, journey.FINISHED), on the wall clock every
// process shares. So a request's TTFT is first token − arrival, its E2E
// finished − arrival and its ITL (finished − first token) / (output − 1):
// vLLM's own per-request figures (records.AtEngine), measured where
// vllm-runs' RequestStateStats measure them.

// TablesFormat names the ingested tables among the formats blis validate
// reads.
const TablesFormat = "calibrate-ingest"

// TablesOptions say how to read ingested tables.
type TablesOptions struct {
	// Coefficients is the coefficient file the run is replayed with (""
	// none): the deployment it applies to stands in for what the trace
	// does not record, and its provenance.holdout is what From "holdout"
	// names.
	Coefficients string
	// From, when set, compares only the requests held out by a fit's
	// split (coefficients.Holdout.HeldOut): an RFC 3339 time, Unix
	// nanoseconds, or "holdout" for the coefficient file's. Every request
	// is still replayed, so that the engine is as loaded at the split as
	// the run was.
	From string
	// Strict fails on the first unusable row instead of counting it.
	Strict bool
}

// IsTables reports whether path is what calibrate ingest writes: a
// directory with a requests.parquet, or a Parquet file.
func IsTables(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		_, err := os.Stat(filepath.Join(path, tracevocab.TableRequests+".parquet"))
		return err == nil
	}
	if !st.Mode().IsRegular() { // a FIFO would block the read below
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	n, _ := f.Read(magic)
	return string(magic[:n]) == "PAR1"
}

// tablesPaths are the requests table and the steps table beside it.
func tablesPaths(path string) (requests, steps string) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, tracevocab.TableRequests+".parquet"), filepath.Join(path, tracevocab.TableSteps+".parquet")
	}
	return path, filepath.Join(filepath.Dir(path), tracevocab.TableSteps+".parquet")
}

// TablesInputs are the files ReadTables may read for path, labelled for
// errors: an output must be none of them (atomicfile.Check).
func TablesInputs(path string) []atomicfile.Named {
	req, steps := tablesPaths(path)
	return []atomicfile.Named{{Label: "TABLES", Path: req}, {Label: "steps table of TABLES", Path: steps}}
}

// ReadTables reads the requests table of calibrate ingest (path: its
// directory, or the file) as a measured run. Rows that cannot be replayed
// are skipped and counted by reason (records' skip reasons); an aborted or
// failed request is skipped as failed_request. The trace records the
// served model and, in its steps table, the GPU KV cache's size: these
// become the deployment's --model (when it names a model blis knows and no
// coefficient file gives one) and --kv-blocks-gpu, under the flags given.
// The GPU is not in a trace: without a coefficient file (whose applies_to
// names it) --hardware must be given.
func ReadTables(path string, o TablesOptions) (*Measured, error) {
	reqPath, stepsPath := tablesPaths(path)
	f, err := pqread.Open(reqPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if v := f.Meta(tracevocab.MetaTable); v != "" && v != tracevocab.TableRequests {
		return nil, fmt.Errorf("%s is the %q table of calibrate ingest; blis validate reads the %q table (or the directory)", reqPath, v, tracevocab.TableRequests)
	}
	cols := []string{"arrived_wall_ns", "queued_wall_ns", "first_token_wall_ns", "finished_wall_ns", "aborted_wall_ns", "prompt_tokens", "output_tokens", "finish_status", "instance"}
	var missing []string
	for _, c := range cols {
		if !f.Has(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing column(s) %s of calibrate ingest's requests table (schema version %d)", reqPath, strings.Join(missing, ", "), tracevocab.TablesSchemaVersion)
	}
	i64 := map[string]pqread.Column[int64]{}
	for _, c := range []string{"arrived_wall_ns", "queued_wall_ns", "first_token_wall_ns", "finished_wall_ns", "aborted_wall_ns", "prompt_tokens", "output_tokens"} {
		if i64[c], err = f.Int64(c); err != nil {
			return nil, err
		}
	}
	status, err := f.String("finish_status")
	if err != nil {
		return nil, err
	}
	inst, err := f.String("instance")
	if err != nil {
		return nil, err
	}
	var engineID pqread.Column[string]
	if f.Has("engine_request_id") {
		if engineID, err = f.String("engine_request_id"); err != nil {
			return nil, err
		}
	}
	var model pqread.Column[string]
	if f.Has("model") {
		if model, err = f.String("model"); err != nil {
			return nil, err
		}
	}
	get := func(c string, i int) int64 {
		col := i64[c]
		if !col.OK(i) {
			return -1
		}
		return col.V[i]
	}

	m := &Measured{Source: reqPath, At: records.AtEngine}
	m.Read.Path, m.Read.Format = reqPath, TablesFormat
	skip := func(reason string, line int64, field, detail string) error {
		if o.Strict {
			return fmt.Errorf("%s: row %d: %s: %s", reqPath, line, field, detail)
		}
		for k := range m.Read.Skipped {
			if m.Read.Skipped[k].Reason == reason {
				m.Read.Skipped[k].Count++
				return nil
			}
		}
		m.Read.Skipped = append(m.Read.Skipped, records.SkipCount{Reason: reason, Count: 1, FirstLine: line})
		return nil
	}
	type row struct {
		at, arrivedWall, queuedWall int64
		engineID                    string
		rec                         records.Record
	}
	var rows []row
	instances, models := map[string]bool{}, map[string]bool{}
	n := len(i64["prompt_tokens"].V)
	for i := range n {
		line := int64(i + 1) // 1-based row of the table
		m.Read.Rows++
		arrived, queued := get("arrived_wall_ns", i), get("queued_wall_ns", i)
		at := arrived
		if at < 0 {
			at = queued
		}
		prompt, output := get("prompt_tokens", i), get("output_tokens", i)
		st := ""
		if status.OK(i) {
			st = status.V[i]
		}
		var e error
		switch {
		case at < 0:
			e = skip(records.SkipMissingField, line, "arrived_wall_ns", "no arrival (nor queued_wall_ns)")
		case get("aborted_wall_ns", i) >= 0 || st == tracevocab.FinishAborted || st == tracevocab.FinishError:
			e = skip(records.SkipFailedRequest, line, "finish_status", fmt.Sprintf("the request was aborted or failed (%q)", st))
		case prompt < 0:
			e = skip(records.SkipMissingField, line, "prompt_tokens", "null")
		case output < 0:
			e = skip(records.SkipMissingField, line, "output_tokens", "null (no journey.FINISHED)")
		case prompt == 0:
			e = skip(records.SkipZeroPromptTokens, line, "prompt_tokens", "0")
		case output == 0:
			e = skip(records.SkipZeroOutputTokens, line, "output_tokens", "0")
		case prompt > sim.MaxTokens || output > sim.MaxTokens:
			e = skip(records.SkipTooManyTokens, line, "prompt_tokens", fmt.Sprintf("%d + %d tokens", prompt, output))
		default:
			rec := records.Record{Line: line, PromptTokens: prompt, OutputTokens: output, TTFTUs: -1, E2EUs: -1, MeanITLUs: -1}
			first, fin := get("first_token_wall_ns", i), get("finished_wall_ns", i)
			if first >= 0 && fin >= 0 {
				if first < at || fin < first {
					e = skip(records.SkipNegative, line, "first_token_wall_ns", "the request's times run backwards")
					break
				}
				rec.TTFTUs, rec.E2EUs = roundUs(first-at), roundUs(fin-at)
				if output > 1 {
					rec.MeanITLUs = roundUs((fin - first) / (output - 1))
				}
			}
			r := row{at: at, arrivedWall: arrived, queuedWall: queued, rec: rec}
			if engineID.V != nil && engineID.OK(i) {
				r.engineID = engineID.V[i]
			}
			rows = append(rows, r)
			m.Read.Read++
			if inst.OK(i) {
				instances[inst.V[i]] = true
			}
			if model.V != nil && model.OK(i) && model.V[i] != "" {
				models[model.V[i]] = true
			}
		}
		if e != nil {
			return nil, e
		}
	}
	slices.SortFunc(m.Read.Skipped, func(a, b records.SkipCount) int { return strings.Compare(a.Reason, b.Reason) })
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no request can be replayed (%d rows)", reqPath, m.Read.Rows)
	}
	if len(instances) > 1 {
		return nil, fmt.Errorf("%s: the trace holds %d engines (instances %s): blis validate replays one vLLM server; validate each engine's trace apart",
			reqPath, len(instances), strings.Join(slices.Sorted(maps.Keys(instances)), ", "))
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.at, b.at) })
	var coeff *coefficients.File
	if o.Coefficients != "" {
		if coeff, err = coefficients.Load(o.Coefficients); err != nil {
			return nil, fmt.Errorf("--coefficients: %w", err)
		}
	}
	blockSize := physics.DefaultVLLMKnobs().BlockSizeTokens
	if coeff != nil {
		blockSize = coeff.AppliesTo.VLLM.BlockSizeTokens
	}
	cached, err := cachedBlocks(filepath.Join(filepath.Dir(reqPath), tracevocab.TableRequestSnapshots+".parquet"))
	if err != nil {
		return nil, err
	}
	first := rows[0].at
	m.Records = make([]records.Record, len(rows))
	for i := range rows {
		r := &rows[i].rec
		r.ArrivalUs = roundUs(rows[i].at - first)
		// Prefix-cache hits: the trace does not say which requests share a
		// prompt prefix, but a rich step's snapshot says how many of a
		// request's blocks were hits. Every such request is given a prefix
		// of that many blocks from one shared chain, so that the replay
		// hits the cache for as much of it as an earlier request has
		// computed (never past the prompt's last token, which vLLM always
		// computes).
		if k := min(cached[rows[i].engineID], (r.PromptTokens-1)/blockSize); k > 0 {
			r.Content, r.ContentTokens = make([]uint64, k), blockSize
			for j := range r.Content {
				r.Content[j] = uint64(j + 1)
			}
		}
		m.Records[i] = *r
	}
	if err := m.tablesDeployment(stepsPath, slices.Sorted(maps.Keys(models)), coeff); err != nil {
		return nil, err
	}
	if o.From != "" {
		h, err := holdoutOf(o.From, coeff)
		if err != nil {
			return nil, err
		}
		m.Compare = make([]bool, len(rows))
		var k int
		for i, r := range rows {
			if m.Compare[i] = h.HeldOut(r.arrivedWall, r.queuedWall); m.Compare[i] {
				k++
			}
		}
		if k == 0 {
			return nil, fmt.Errorf("--from %s: no request of %s arrived after it (the last arrived at %s)", o.From, reqPath, coefficients.FormatInstant(rows[len(rows)-1].at))
		}
		m.CompareNote = fmt.Sprintf("the %d requests that arrived after %s (of %d replayed)", k, h.After, len(rows))
	}
	return m, nil
}

// cachedBlocks are the prefix-cache hits, in GPU blocks, that the rich
// steps' snapshots show for each request (by its engine id); none when
// the trace has no snapshots.
func cachedBlocks(path string) (map[string]int64, error) {
	out := map[string]int64{}
	if _, err := os.Stat(path); err != nil {
		return out, nil
	}
	f, err := pqread.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !f.Has("request_id") || !f.Has("kv_blocks_cached_gpu") {
		return out, nil
	}
	ids, err := f.String("request_id")
	if err != nil {
		return nil, err
	}
	blocks, err := f.Int64("kv_blocks_cached_gpu")
	if err != nil {
		return nil, err
	}
	for i := range ids.V {
		if ids.OK(i) && blocks.OK(i) && blocks.V[i] > out[ids.V[i]] {
			out[ids.V[i]] = blocks.V[i]
		}
	}
	return out, nil
}

// holdoutOf reads --from: RFC 3339, Unix nanoseconds, or "holdout" for
// the coefficient file's split.
func holdoutOf(from string, coeff *coefficients.File) (*coefficients.Holdout, error) {
	if from == "holdout" {
		if coeff == nil || coeff.Provenance.Holdout == nil {
			return nil, errors.New("--from holdout: give --coefficients with a file that calibrate fit --holdout-after wrote (its provenance.holdout)")
		}
		return coeff.Provenance.Holdout, nil
	}
	if ns, err := strconv.ParseInt(from, 10, 64); err == nil && ns > 0 {
		return coefficients.NewHoldout(ns, 0, 0), nil
	}
	t, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		return nil, fmt.Errorf("--from %q: give the instant calibrate fit --holdout-after recorded (RFC 3339, e.g. 2026-01-01T00:05:10Z, or Unix nanoseconds), or holdout to take it from --coefficients", from)
	}
	h := coefficients.NewHoldout(t.UnixNano(), 0, 0)
	if coeff != nil && coeff.Provenance.Holdout != nil && coeff.Provenance.Holdout.AfterUnixNs != h.AfterUnixNs {
		return nil, fmt.Errorf("--from %s is not the split the coefficient file was fitted with (%s): the comparison would include requests the fit saw, or leave out some it did not",
			h.After, coeff.Provenance.Holdout.After)
	}
	return h, nil
}

// tablesDeployment sets what the trace records of its deployment: the GPU
// KV cache's size from the steps table, and the served model when no
// coefficient file names one; and requires --hardware when nothing names
// the GPU.
func (m *Measured) tablesDeployment(stepsPath string, models []string, coeff *coefficients.File) error {
	if _, err := os.Stat(stepsPath); err == nil {
		f, err := pqread.Open(stepsPath)
		if err != nil {
			return err
		}
		defer f.Close()
		if f.Has("kv_blocks_total_gpu") {
			kv, err := f.Int64("kv_blocks_total_gpu")
			if err != nil {
				return err
			}
			for i := range kv.V {
				if kv.OK(i) && kv.V[i] > 0 {
					m.Settings = append(m.Settings, Setting{Flag: "kv-blocks-gpu", Value: fmt.Sprint(kv.V[i]), Source: stepsPath + " (kv.blocks_total_gpu)"})
					break
				}
			}
		}
	}
	if coeff != nil {
		return nil // the file's applies_to gives the model, GPU, TP and settings (experiment)
	}
	m.Settings = append(m.Settings, Setting{Flag: "hardware", Source: m.Source,
		Missing: fmt.Sprintf("%s: a trace does not record the GPU: give --hardware (shipped: %s), or --coefficients with the file calibrate fit wrote for this deployment",
			m.Source, strings.Join(physics.BuiltinHardware(), ", "))})
	switch name := servedModel(models); {
	case len(models) > 1:
		m.Settings = append(m.Settings, Setting{Flag: "model", Missing: fmt.Sprintf("%s serves %d models (%s): give --model", m.Source, len(models), strings.Join(models, ", "))})
	case name != "":
		m.Settings = append(m.Settings, Setting{Flag: "model", Value: name, Source: m.Source + " (gen_ai.response.model)"})
	case len(models) == 1:
		m.Settings = append(m.Settings, Setting{Flag: "model", Missing: fmt.Sprintf("%s: the served model %q is no model blis ships: give --model (a shipped name or the model's config.json)", m.Source, models[0])})
	default:
		m.Settings = append(m.Settings, Setting{Flag: "model", Missing: m.Source + " names no model: give --model"})
	}
	return nil
}

// servedModel is the shipped model a served name names: the name itself,
// or its last path element in lower case (meta-llama/Llama-3.1-8B is
// llama-3.1-8b); "" for none.
func servedModel(models []string) string {
	if len(models) != 1 {
		return ""
	}
	name := models[0]
	for _, c := range []string{name, strings.ToLower(name[strings.LastIndex(name, "/")+1:])} {
		if slices.Contains(physics.BuiltinModels(), c) {
			return c
		}
	}
	return ""
}

// roundUs rounds nanoseconds to the nearest microsecond.
func roundUs(ns int64) int64 {
	if ns < 0 {
		return -((-ns + 500) / 1000)
	}
	return (ns + 500) / 1000
}
