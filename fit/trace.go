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
	"strconv"
	"strings"

	"github.com/blis-sim/blis/internal/pqread"
	"github.com/blis-sim/blis/internal/tracevocab"
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
	Rich                             bool  // the span had REQUEST_SNAPSHOTs of this step
	Inst                             int32 // the engine: an index into Trace.Instances
}

// SnapshotRow is one step.REQUEST_SNAPSHOT.
type SnapshotRow struct {
	StepID                        int64
	Request                       string
	Prefill                       bool  // request.phase == PREFILL
	Inst                          int32 // index into Trace.Instances
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
	Inst                                    int32   // index into Trace.Instances
	// Wall-clock Unix ns of ARRIVED and QUEUED (-1 when missing, or in
	// tables without the columns): what a held-out split is placed by
	// (holdout.go).
	ArrivedWallNs, QueuedWallNs int64
}

// ScheduledRow is one journey.SCHEDULED event: its step and monotonic time.
type ScheduledRow struct {
	Step, TsNs int64
	Inst       int32 // index into Trace.Instances
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
//
// A trace of a cluster holds several engines, told apart by the tables'
// instance column (service.instance.id). Each engine counts its steps from
// 1 and has its own monotonic timeline, so steps are ordered, paired and
// joined to snapshots, journey events and requests within one engine only:
// the fit takes each engine of a trace as a trace of its own (engines).
type Trace struct {
	Dir string
	// Instances are the distinct instance ids of the tables, sorted; a
	// row's Inst indexes them. A trace without instance ids (or from an
	// ingest older than the column) has the one instance "".
	Instances []string
	Steps     []StepRow
	Snapshots []SnapshotRow
	Requests  []RequestRow
	Scheduled []ScheduledRow
	KV        []KVRow
	HasKV     bool // a kv_events table with at least one row was found
	// Models are the distinct model names the requests table gives
	// (gen_ai.response.model), sorted.
	Models []string
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
	if t := f.Meta(tracevocab.MetaTable); t != "" && t != name {
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
	ins := &instances{index: map[string]int32{}}
	if err := tr.loadSteps(ins); err != nil {
		return nil, err
	}
	for _, load := range []func(*instances) error{tr.loadSnapshots, tr.loadRequests, tr.loadScheduled, tr.loadKV} {
		if err := load(ins); err != nil {
			return nil, err
		}
	}
	tr.setInstances(ins)
	return tr, nil
}

// instances numbers the instance ids of a trace in the order first seen.
type instances struct {
	names []string
	index map[string]int32
}

// column reads f's instance column (when it has one) for at.
func (in *instances) column(f *pqread.File) (*instanceColumn, error) {
	c := &instanceColumn{in: in, k: -1, has: f.Has("instance")}
	if !c.has {
		return c, nil
	}
	var err error
	c.c, err = f.String("instance")
	return c, err
}

// instanceColumn gives the instance index of the rows a loader keeps, so
// that only kept rows make an engine.
type instanceColumn struct {
	in   *instances
	has  bool // the table has an instance column, read into c
	c    pqread.Column[string]
	last string
	k    int32
}

func (c *instanceColumn) at(i int) int32 {
	s := ""
	if c.has {
		s = c.c.V[i]
	}
	if c.k < 0 || s != c.last { // rows come in runs of one instance
		c.last, c.k = s, c.in.lookup(s)
	}
	return c.k
}

func (in *instances) lookup(s string) int32 {
	k, ok := in.index[s]
	if !ok {
		name := strings.Clone(s) // not the column's buffer
		k = int32(len(in.names))
		in.index[name] = k
		in.names = append(in.names, name)
	}
	return k
}

// setInstances sorts the instance ids and renumbers the rows to match, so
// that the engines' order does not depend on the tables' row order.
func (tr *Trace) setInstances(in *instances) {
	if len(in.names) == 0 {
		in.lookup("")
	}
	tr.Instances = slices.Sorted(slices.Values(in.names))
	if len(tr.Instances) == 1 {
		return
	}
	remap := make([]int32, len(in.names))
	for i, name := range in.names {
		remap[i] = int32(slices.Index(tr.Instances, name))
	}
	for i := range tr.Steps {
		tr.Steps[i].Inst = remap[tr.Steps[i].Inst]
	}
	for i := range tr.Snapshots {
		tr.Snapshots[i].Inst = remap[tr.Snapshots[i].Inst]
	}
	for i := range tr.Requests {
		tr.Requests[i].Inst = remap[tr.Requests[i].Inst]
	}
	for i := range tr.Scheduled {
		tr.Scheduled[i].Inst = remap[tr.Scheduled[i].Inst]
	}
	slices.SortFunc(tr.Scheduled, compareScheduled)
}

// engines returns one trace per instance of tr, each with its own rows in
// table order (tr itself when it has one instance). KV events lines name
// no engine and their scheduler_step counts per engine: they go to the
// engine with steps when only one has any (the others hold only requests,
// such as those an API server without an instance id refused), and a
// trace of several engines with steps and KV events that enter the
// features is refused.
func (tr *Trace) engines() ([]*Trace, error) {
	if len(tr.Instances) <= 1 {
		return []*Trace{tr}, nil
	}
	withSteps := make([]bool, len(tr.Instances))
	var stepEngines []string
	for _, s := range tr.Steps {
		withSteps[s.Inst] = true
	}
	for k, ok := range withSteps {
		if ok {
			stepEngines = append(stepEngines, tr.Instances[k])
		}
	}
	if len(tr.KV) > 0 && len(stepEngines) > 1 {
		return nil, fmt.Errorf("%s: the steps come from %d engines (instances %s) and kv_events has %d transfer or CPU-load events, "+
			"but KV events lines name no engine and count scheduler_step per engine, so they cannot be matched to steps; "+
			"ingest the trace without its KV events (the transfer features are then 0)",
			tr.Dir, len(stepEngines), quoteList(stepEngines), len(tr.KV))
	}
	out := make([]*Trace, len(tr.Instances))
	for k, name := range tr.Instances {
		out[k] = &Trace{Dir: tr.Dir, Instances: []string{name}, HasKV: tr.HasKV}
		if withSteps[k] {
			out[k].KV = tr.KV
		}
	}
	for _, s := range tr.Steps {
		e := out[s.Inst]
		s.Inst = 0
		e.Steps = append(e.Steps, s)
	}
	for _, s := range tr.Snapshots {
		e := out[s.Inst]
		s.Inst = 0
		e.Snapshots = append(e.Snapshots, s)
	}
	for _, r := range tr.Requests {
		e := out[r.Inst]
		r.Inst = 0
		e.Requests = append(e.Requests, r)
	}
	for _, s := range tr.Scheduled {
		e := out[s.Inst]
		s.Inst = 0
		e.Scheduled = append(e.Scheduled, s)
	}
	return out, nil
}

// engineName names an engine in messages: its instance id, if any.
func (tr *Trace) engineName() string {
	if len(tr.Instances) == 1 && tr.Instances[0] != "" {
		return fmt.Sprintf("%s (instance %q)", tr.Dir, tr.Instances[0])
	}
	return tr.Dir
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func (tr *Trace) loadSteps(ins *instances) error {
	f, in, err := table(tr.Dir, tracevocab.TableSteps, true)
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
	inst, err := ins.column(f)
	if err != nil {
		return err
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
			KVTotal: tot[i], KVFree: free[i], KVUsage: usage.V[i], Rich: rich.OK(i) && rich.V[i], Inst: inst.at(i),
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

func (tr *Trace) loadSnapshots(ins *instances) error {
	f, in, err := table(tr.Dir, tracevocab.TableRequestSnapshots, false)
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
	inst, err := ins.column(f)
	if err != nil {
		return err
	}
	for i := range step.V {
		if !(phase.OK(i) && prompt.OK(i) && computed.OK(i) && sched.OK(i) && alloc.OK(i) && cached.OK(i)) ||
			(phase.V[i] != tracevocab.PhasePrefill && phase.V[i] != tracevocab.PhaseDecode) {
			// The step then has fewer snapshots than running requests and
			// is treated as non-rich.
			addCount(&tr.Dropped, "snapshot without a phase, token or block count", 1)
			continue
		}
		tr.Snapshots = append(tr.Snapshots, SnapshotRow{
			StepID: step.V[i], Request: req.V[i], Prefill: phase.V[i] == tracevocab.PhasePrefill,
			Prompt: prompt.V[i], Computed: computed.V[i], Scheduled: sched.V[i],
			BlocksAllocated: alloc.V[i], BlocksCached: cached.V[i], Inst: inst.at(i),
		})
	}
	return nil
}

func (tr *Trace) loadRequests(ins *instances) error {
	f, in, err := table(tr.Dir, tracevocab.TableRequests, false)
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
	var arrivedWall, queuedWall pqread.Column[int64]
	if f.Has("arrived_wall_ns") && f.Has("queued_wall_ns") {
		arrivedWall, queuedWall = r.i64("arrived_wall_ns"), r.i64("queued_wall_ns")
	}
	if r.err != nil {
		return r.err
	}
	inst, err := ins.column(f)
	if err != nil {
		return err
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
			Inst: inst.at(i), ArrivedWallNs: -1, QueuedWallNs: -1,
		}
		if arrivedWall.V != nil {
			rr.ArrivedWallNs, rr.QueuedWallNs = i64(arrivedWall, i), i64(queuedWall, i)
		}
		if id.OK(i) {
			rr.EngineID = id.V[i]
		}
		tr.Requests[i] = rr
	}
	if f.Has("model") {
		m := r.str("model")
		if r.err != nil {
			return r.err
		}
		seen := map[string]bool{}
		for i, v := range m.V {
			if m.OK(i) && v != "" && !seen[v] {
				seen[v] = true
				tr.Models = append(tr.Models, v)
			}
		}
		slices.Sort(tr.Models)
	}
	return nil
}

func (tr *Trace) loadScheduled(ins *instances) error {
	f, in, err := table(tr.Dir, tracevocab.TableJourneyEvents, false)
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
	inst, err := ins.column(f)
	if err != nil {
		return err
	}
	for i := range ev.V {
		if ev.V[i] == tracevocab.JourneyScheduled && step.OK(i) && ts.OK(i) {
			tr.Scheduled = append(tr.Scheduled, ScheduledRow{Step: step.V[i], TsNs: ts.V[i], Inst: inst.at(i)})
		}
	}
	slices.SortFunc(tr.Scheduled, compareScheduled)
	return nil
}

// compareScheduled orders SCHEDULED events by engine, step and time.
func compareScheduled(a, b ScheduledRow) int {
	return cmp.Or(cmp.Compare(a.Inst, b.Inst), cmp.Compare(a.Step, b.Step), cmp.Compare(a.TsNs, b.TsNs))
}

func (tr *Trace) loadKV(*instances) error {
	f, in, err := table(tr.Dir, tracevocab.TableKVEvents, false)
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
		if t != tracevocab.KVTransferCompleted && t != tracevocab.KVCacheLoadCommitted {
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
