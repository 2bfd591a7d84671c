package fit

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/blis-sim/blis/internal/pqread"
)

// StepRow is one step.BATCH_SUMMARY (a row of the steps table).
type StepRow struct {
	ID, TsStartNs                    int64
	Running, Waiting                 int64
	NumPrefill, NumDecode            int64
	Scheduled, PrefillTok, DecodeTok int64
	NumFinished, NumPreempted        int64
	KVTotal, KVFree                  int64
	KVUsage                          float64
	Rich                             bool // the span had REQUEST_SNAPSHOTs of this step
}

// SnapshotRow is one step.REQUEST_SNAPSHOT.
type SnapshotRow struct {
	StepID                        int64
	Request                       string
	Prefill                       bool // request.phase == PREFILL
	Prompt, Computed, Scheduled   int64
	BlocksAllocated, BlocksCached int64
}

// RequestRow is one request of the requests table. Missing times are NaN,
// missing nanosecond times and counts -1.
type RequestRow struct {
	EngineID                                string
	Prompt, Output                          int64
	ArrivedS, QueuedS, FinishedS, DepartedS float64
	QueuedNs, FirstScheduledNs              int64
	FirstScheduledS                         float64 // seconds fallback of FirstScheduledNs
}

// ScheduledRow is one journey.SCHEDULED event: its step and monotonic time.
type ScheduledRow struct {
	Step, TsNs int64
}

// KVRow is one KV event that enters the features.
type KVRow struct {
	Type, Medium string
	Blocks, Step int64
	Success      bool
}

// Trace is what calibrate fit reads from one calibrate ingest output
// directory. Rows whose required values are null are left out and counted
// in Dropped.
type Trace struct {
	Dir       string
	Steps     []StepRow
	Snapshots []SnapshotRow
	Requests  []RequestRow
	Scheduled []ScheduledRow
	KV        []KVRow
	HasKV     bool // a kv_events table with at least one row was found
	// Inputs are the files read, with their hashes and row counts.
	Inputs  []InputFile
	Dropped []Count
}

// InputFile is one table file read.
type InputFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Rows   int64  `json:"rows"`
}

// Count is a number of rows or samples with a reason.
type Count struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

func addCount(cs *[]Count, reason string, n int64) {
	if n == 0 {
		return
	}
	for i := range *cs {
		if (*cs)[i].Reason == reason {
			(*cs)[i].Count += n
			return
		}
	}
	*cs = append(*cs, Count{reason, n})
}

// table opens dir/name.parquet and checks that it is that ingest table.
func table(dir, name string, required bool) (*pqread.File, InputFile, error) {
	path := filepath.Join(dir, name+".parquet")
	if _, err := os.Stat(path); err != nil {
		if !required && os.IsNotExist(err) {
			return nil, InputFile{}, nil
		}
		return nil, InputFile{}, fmt.Errorf("%s: %w (is %s a calibrate ingest output directory?)", path, err, dir)
	}
	sum, err := fileSHA256(path)
	if err != nil {
		return nil, InputFile{}, err
	}
	f, err := pqread.Open(path)
	if err != nil {
		return nil, InputFile{}, err
	}
	if t := f.Meta("blis.table"); t != "" && t != name {
		f.Close()
		return nil, InputFile{}, fmt.Errorf("%s holds the %q table, want %q", path, t, name)
	}
	return f, InputFile{Path: path, SHA256: sum, Rows: f.NumRows()}, nil
}

// colReader reads columns of one file, keeping the first error.
type colReader struct {
	f   *pqread.File
	err error
}

// read is one column read through r, keeping r's first error.
func read[T any](r *colReader, get func(string) (pqread.Column[T], error), name string) pqread.Column[T] {
	if r.err != nil {
		return pqread.Column[T]{}
	}
	c, err := get(name)
	r.err = err
	return c
}

func (r *colReader) i64(name string) pqread.Column[int64]    { return read(r, r.f.Int64, name) }
func (r *colReader) f64(name string) pqread.Column[float64]  { return read(r, r.f.Float64, name) }
func (r *colReader) str(name string) pqread.Column[string]   { return read(r, r.f.String, name) }
func (r *colReader) boolean(name string) pqread.Column[bool] { return read(r, r.f.Bool, name) }

// LoadTrace reads the tables of one calibrate ingest output directory:
// steps (required), request_snapshots, requests, journey_events and
// kv_events (each optional).
func LoadTrace(dir string) (*Trace, error) {
	tr := &Trace{Dir: dir}
	if err := tr.loadSteps(); err != nil {
		return nil, err
	}
	for _, load := range []func() error{tr.loadSnapshots, tr.loadRequests, tr.loadScheduled, tr.loadKV} {
		if err := load(); err != nil {
			return nil, err
		}
	}
	return tr, nil
}

func (tr *Trace) loadSteps() error {
	f, in, err := table(tr.Dir, "steps", true)
	if err != nil {
		return err
	}
	defer f.Close()
	tr.Inputs = append(tr.Inputs, in)
	names := []string{"step_id", "step_ts_start_ns", "queue_running_depth", "queue_waiting_depth",
		"batch_num_prefill_reqs", "batch_num_decode_reqs", "batch_scheduled_tokens", "batch_prefill_tokens",
		"batch_decode_tokens", "batch_num_finished", "batch_num_preempted", "kv_blocks_total_gpu", "kv_blocks_free_gpu"}
	// The columns are decoded in parallel (each read recovers its own
	// panics), then copied into rows in one pass.
	cols := make([]pqread.Column[int64], len(names))
	errs := make([]error, len(names))
	parallel(len(names), func(j int) { cols[j], errs[j] = f.Int64(names[j]) })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r := &colReader{f: f}
	usage := r.f64("kv_usage_gpu_ratio")
	rich := r.boolean("has_rich_snapshots")
	if r.err != nil {
		return r.err
	}
	var missing []Count
	n := int(f.NumRows())
	rows := make([]StepRow, 0, n)
	v := func(j int) []int64 { return cols[j].V[:n] }
	id, ts, run, wait, np, nd, sc, pt, dt, fin, pre, tot, free :=
		v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7), v(8), v(9), v(10), v(11), v(12)
	for i := range n {
		if !rowValid(cols, i, names, &missing) {
			continue
		}
		if !usage.OK(i) || math.IsNaN(usage.V[i]) || math.IsInf(usage.V[i], 0) {
			addCount(&missing, "step row without a finite kv_usage_gpu_ratio", 1)
			continue
		}
		rows = append(rows, StepRow{
			ID: id[i], TsStartNs: ts[i], Running: run[i], Waiting: wait[i], NumPrefill: np[i], NumDecode: nd[i],
			Scheduled: sc[i], PrefillTok: pt[i], DecodeTok: dt[i], NumFinished: fin[i], NumPreempted: pre[i],
			KVTotal: tot[i], KVFree: free[i], KVUsage: usage.V[i], Rich: rich.OK(i) && rich.V[i],
		})
	}
	tr.Steps = slices.Clip(rows)
	for _, m := range missing {
		addCount(&tr.Dropped, m.Reason, m.Count)
	}
	return nil
}

// rowValid reports whether row i has a value in every column; if not, the
// first missing column is counted in missing.
func rowValid(cols []pqread.Column[int64], i int, names []string, missing *[]Count) bool {
	for j := range cols {
		if !cols[j].OK(i) {
			addCount(missing, "step row without "+names[j], 1)
			return false
		}
	}
	return true
}

func (tr *Trace) loadSnapshots() error {
	f, in, err := table(tr.Dir, "request_snapshots", false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	tr.Inputs = append(tr.Inputs, in)
	r := &colReader{f: f}
	step, req, phase := r.i64("step_id"), r.str("request_id"), r.str("request_phase")
	prompt, computed := r.i64("request_num_prompt_tokens"), r.i64("request_num_computed_tokens")
	sched := r.i64("request_scheduled_tokens_this_step")
	alloc, cached := r.i64("kv_blocks_allocated_gpu"), r.i64("kv_blocks_cached_gpu")
	if r.err != nil {
		return r.err
	}
	for i := range step.V {
		if !(phase.OK(i) && prompt.OK(i) && computed.OK(i) && sched.OK(i) && alloc.OK(i) && cached.OK(i)) ||
			(phase.V[i] != "PREFILL" && phase.V[i] != "DECODE") {
			// The step then has fewer snapshots than running requests and
			// is treated as non-rich.
			addCount(&tr.Dropped, "snapshot without a phase, token or block count", 1)
			continue
		}
		tr.Snapshots = append(tr.Snapshots, SnapshotRow{
			StepID: step.V[i], Request: req.V[i], Prefill: phase.V[i] == "PREFILL",
			Prompt: prompt.V[i], Computed: computed.V[i], Scheduled: sched.V[i],
			BlocksAllocated: alloc.V[i], BlocksCached: cached.V[i],
		})
	}
	return nil
}

func (tr *Trace) loadRequests() error {
	f, in, err := table(tr.Dir, "requests", false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	tr.Inputs = append(tr.Inputs, in)
	r := &colReader{f: f}
	id := r.str("engine_request_id")
	prompt, output := r.i64("prompt_tokens"), r.i64("output_tokens")
	arrived, queued := r.f64("arrived_mono_s"), r.f64("queued_mono_s")
	finished, departed := r.f64("finished_mono_s"), r.f64("departed_mono_s")
	firstS := r.f64("first_scheduled_mono_s")
	queuedNs, firstNs := r.i64("queued_mono_ns"), r.i64("first_scheduled_mono_ns")
	if r.err != nil {
		return r.err
	}
	f64 := func(c pqread.Column[float64], i int) float64 {
		if !c.OK(i) {
			return math.NaN()
		}
		return c.V[i]
	}
	i64 := func(c pqread.Column[int64], i int) int64 {
		if !c.OK(i) {
			return -1
		}
		return c.V[i]
	}
	tr.Requests = make([]RequestRow, len(prompt.V))
	for i := range tr.Requests {
		rr := RequestRow{
			Prompt: i64(prompt, i), Output: i64(output, i),
			ArrivedS: f64(arrived, i), QueuedS: f64(queued, i), FinishedS: f64(finished, i), DepartedS: f64(departed, i),
			FirstScheduledS: f64(firstS, i), QueuedNs: i64(queuedNs, i), FirstScheduledNs: i64(firstNs, i),
		}
		if id.OK(i) {
			rr.EngineID = id.V[i]
		}
		tr.Requests[i] = rr
	}
	return nil
}

func (tr *Trace) loadScheduled() error {
	f, in, err := table(tr.Dir, "journey_events", false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	tr.Inputs = append(tr.Inputs, in)
	r := &colReader{f: f}
	ev, step, ts := r.str("event"), r.i64("scheduler_step"), r.i64("ts_monotonic_ns")
	if r.err != nil {
		return r.err
	}
	for i := range ev.V {
		if ev.V[i] == "journey.SCHEDULED" && step.OK(i) && ts.OK(i) {
			tr.Scheduled = append(tr.Scheduled, ScheduledRow{Step: step.V[i], TsNs: ts.V[i]})
		}
	}
	slices.SortFunc(tr.Scheduled, func(a, b ScheduledRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.TsNs, b.TsNs))
	})
	return nil
}

func (tr *Trace) loadKV() error {
	f, in, err := table(tr.Dir, "kv_events", false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	tr.Inputs = append(tr.Inputs, in)
	r := &colReader{f: f}
	typ, medium, blocks := r.str("type"), r.str("medium"), r.i64("block_count")
	success, step := r.boolean("success"), r.i64("scheduler_step")
	if r.err != nil {
		return r.err
	}
	tr.HasKV = len(typ.V) > 0
	for i := range typ.V {
		t := typ.V[i]
		if t != "TransferCompleted" && t != "CacheLoadCommitted" {
			continue
		}
		if !blocks.OK(i) || !step.OK(i) {
			addCount(&tr.Dropped, t+" without block_count or scheduler_step", 1)
			continue
		}
		k := KVRow{Type: t, Blocks: blocks.V[i], Step: step.V[i], Success: success.OK(i) && success.V[i]}
		if medium.OK(i) {
			k.Medium = medium.V[i]
		}
		tr.KV = append(tr.KV, k)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
