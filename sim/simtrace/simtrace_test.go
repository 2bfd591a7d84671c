package simtrace

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/testsupport/parquettest"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// workload gives n requests with varied prompts (some longer than the
// 512-token budget, so chunked prefill; a few that can never fit the
// cache, so dropped), shared prefix groups and bursty arrivals.
func workload(n int, seed uint64, meanGapUs float64) []sim.RequestSpec {
	r := rand.New(rand.NewPCG(seed, 7))
	reqs := make([]sim.RequestSpec, n)
	var at float64
	for i := range reqs {
		at += r.ExpFloat64() * meanGapUs
		prompt := int64(20 + r.IntN(400))
		switch u := r.Float64(); {
		case u < 0.15:
			prompt = int64(600 + r.IntN(1800)) // longer than the token budget
		case u < 0.16 && i > 10:
			prompt = 7000 // more than the whole KV cache: dropped
		}
		spec := sim.RequestSpec{ID: int64(i), ArrivalUs: int64(at), PromptTokens: prompt, OutputTokens: int64(1 + r.IntN(120))}
		if g := r.IntN(6); g > 0 && prompt > 300 {
			spec.PrefixGroup = int32(g)
			spec.PrefixTokens = min(prompt, int64(64*g))
		}
		reqs[i] = spec
	}
	return reqs
}

func baseConfig() sim.Config {
	return sim.Config{
		Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{
			MaxNumSeqs:            24,
			MaxBatchedTokens:      512,
			ChunkedPrefillEnabled: true,
			BlockSizeTokens:       16,
			TotalKVBlocksGPU:      400, // small: forces preemptions
			PrefixCachingEnabled:  true,
		}},
		Latency: &sim.Blackbox{Alpha: [3]float64{1000, 0.1, 2}, Beta: [3]float64{5000, 20, 100}},
		Options: sim.Options{RecordRequests: true},
	}
}

func offloadConfig() sim.Config {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading = 300, true
	cfg.Engine.OffloadThreshold = 0.5
	return cfg
}

// recorder wraps the Writer and keeps what the simulator reported of each
// step (indexed by step id - 1) and its running requests' engine ids.
type recorder struct {
	inner   sim.Observer
	steps   []sim.StepSummary
	running [][]int64
	buf     []sim.RequestSnapshot
	kv      []sim.KVEvent
}

func (r *recorder) Arrived(s *sim.RequestSpec)           { r.inner.Arrived(s) }
func (r *recorder) Journey(ev *sim.JourneyEvent)         { r.inner.Journey(ev) }
func (r *recorder) Departed(req, at int64)               { r.inner.Departed(req, at) }
func (r *recorder) Dropped(req, at int64, reason string) { r.inner.Dropped(req, at, reason) }
func (r *recorder) Aborted(req, at int64)                { r.inner.Aborted(req, at) }
func (r *recorder) KV(ev *sim.KVEvent)                   { r.kv = append(r.kv, *ev); r.inner.KV(ev) }
func (r *recorder) Step(s *sim.StepSummary, snaps sim.SnapshotSource) {
	if s.ID != int64(len(r.steps)+1) {
		panic("step ids are not consecutive from 1")
	}
	r.steps = append(r.steps, *s)
	r.buf = snaps.Snapshots(r.buf[:0])
	ids := make([]int64, len(r.buf))
	for i, sn := range r.buf {
		ids[i] = sn.Req
	}
	r.running = append(r.running, ids)
	r.inner.Step(s, snaps)
}

type run struct {
	dir       string
	tracePath string
	kvPath    string
	res       *sim.Result
	reqs      []sim.RequestSpec
	rec       *recorder
	stats     Stats
	opt       Options
}

// simulate runs the workload with a Writer, writing trace.jsonl and
// kv.jsonl into a temporary directory.
func simulate(t testing.TB, cfg sim.Config, reqs []sim.RequestSpec, opt Options, seed int64) *run {
	t.Helper()
	dir := t.TempDir()
	r := &run{dir: dir, tracePath: filepath.Join(dir, "trace.jsonl"), kvPath: filepath.Join(dir, "kv.jsonl"), reqs: reqs, opt: opt}
	tf, err := os.Create(r.tracePath)
	require.NoError(t, err)
	kf, err := os.Create(r.kvPath)
	require.NoError(t, err)
	rng := sim.NewRNG(seed)
	w, err := NewWriter(tf, kf, opt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
	require.NoError(t, err)
	r.rec = &recorder{inner: w}
	cfg.Observer = r.rec
	s, err := sim.New(cfg, reqs)
	require.NoError(t, err)
	r.res, err = s.Run()
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, tf.Close())
	require.NoError(t, kf.Close())
	r.stats = w.Stats()
	return r
}

// spansOf decodes every span of the trace file, in file order.
func spansOf(t *testing.T, path string) []otlpingest.Span {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<30)
	var out []otlpingest.Span
	for sc.Scan() {
		spans, err := otlpingest.DecodeJSON(sc.Bytes())
		require.NoError(t, err)
		out = append(out, spans...)
	}
	require.NoError(t, sc.Err())
	return out
}

type tableRow = parquettest.Row

func readTable(t *testing.T, path string) []tableRow {
	t.Helper()
	_, rows := parquettest.Read(t, path)
	return rows
}

func ingest(t *testing.T, r *run) (*otlpingest.Manifest, map[string][]tableRow) {
	t.Helper()
	out := filepath.Join(r.dir, "tables")
	m, err := otlpingest.Ingest(otlpingest.FileSources([]string{r.tracePath, r.kvPath}), otlpingest.Options{OutDir: out, Workers: 2})
	require.NoError(t, err)
	tables := map[string][]tableRow{}
	for _, name := range otlpingest.TableNames {
		tables[name] = readTable(t, filepath.Join(out, name+".parquet"))
	}
	return m, tables
}

func issueCounts(m *otlpingest.Manifest) map[otlpingest.IssueKind]int64 {
	out := map[otlpingest.IssueKind]int64{}
	for _, c := range m.Issues.ByKind {
		out[c.Kind] = c.Count
	}
	return out
}

func TestSchemaRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		cfg  sim.Config
		opt  func(*Options)
	}{
		{"completions", baseConfig(), func(*Options) {}},
		{"chat_offload", offloadConfig(), func(o *Options) { o.Route = RouteChatCompletions }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.Model = "meta-llama/Llama-3.1-8B-Instruct"
			opt.StepSampleRate, opt.RichSubsampleRate = 0.5, 0.2
			opt.ClosureInterval = 10
			opt.MaxEventsPerSpan = 1 << 20 // no drops: every sampled step must come back
			opt.SpansPerLine = 64
			tc.opt(&opt)
			reqs := workload(400, 11, 30_000)
			r := simulate(t, tc.cfg, reqs, opt, 42)
			res := r.res
			require.Greater(t, res.Preemptions, int64(0), "the small cache must force preemptions")
			require.Greater(t, res.Requests.Dropped, int64(0), "some requests must not fit the cache")
			require.Equal(t, res.Requests.Offered, res.Requests.Completed+res.Requests.Dropped)
			if tc.cfg.Engine.TotalKVBlocksCPU > 0 {
				require.NotNil(t, res.KVOffload)
				require.Greater(t, res.KVOffload.StoredBlocks, int64(0))
				require.Greater(t, res.KVOffload.ReloadedBlocks, int64(0))
			}

			m, tables := ingest(t, r)
			t.Logf("%d requests (%d dropped), %d steps, %d preemptions, stats %+v, kv rows %d, snapshot rows %d",
				len(reqs), res.Requests.Dropped, res.Steps, res.Preemptions, r.stats, len(tables[otlpingest.TableKVEvents]), len(tables[otlpingest.TableRequestSnapshots]))
			issues := issueCounts(m)
			assert.Equal(t, map[otlpingest.IssueKind]int64{otlpingest.IssueOrphanAPISpan: res.Requests.Dropped}, issues,
				"only the dropped requests (API span, no engine span) may be reported: %+v", m.Issues.Details)

			checkRequests(t, r, tables[otlpingest.TableRequests])
			checkJourney(t, r, tables[otlpingest.TableJourneyEvents])
			checkSteps(t, r, tables[otlpingest.TableSteps], tables[otlpingest.TableRequestSnapshots])
			checkKV(t, r, tables[otlpingest.TableKVEvents])
		})
	}
}

// simID maps API request ids back to the simulator's ids.
func simIDs(r *run) map[string]int64 {
	prefix := "cmpl-"
	if r.opt.Route == RouteChatCompletions {
		prefix = "chatcmpl-"
	}
	out := map[string]int64{}
	for i := range r.reqs {
		api, _ := requestIDs(prefix, int64(i), 0)
		out[api] = int64(i)
	}
	return out
}

func checkRequests(t *testing.T, r *run, rows []tableRow) {
	res := r.res
	ids := simIDs(r)
	records := map[int64]sim.RequestRecord{}
	for _, rec := range res.PerRequest {
		records[rec.ID] = rec
	}
	require.Len(t, rows, int(res.Requests.Completed+res.Requests.Dropped))
	chat := r.opt.Route == RouteChatCompletions
	var completed, dropped int64
	for _, row := range rows {
		id, ok := ids[row["api_request_id"].(string)]
		require.True(t, ok, "unknown API id %v", row["api_request_id"])
		spec := r.reqs[id]
		assert.Equal(t, spec.PromptTokens, row["prompt_tokens"])
		assert.Equal(t, spec.OutputTokens, row["max_tokens"])
		assert.Equal(t, r.opt.Route, row["route"])
		assert.Equal(t, r.opt.Model, row["model"])
		assert.Equal(t, 1.0, row["temperature"])
		assert.Equal(t, int64(1), row["n"])
		arrived := row["arrived_wall_ns"].(int64)
		assert.Equal(t, DefaultWallBaseNs+spec.ArrivalUs*1000, arrived)
		if row["aborted_wall_ns"] != nil {
			dropped++
			assert.Nil(t, row["core_span_id"])
			assert.Equal(t, AbortReasonRejected, row["abort_reason"])
			continue
		}
		completed++
		rec, ok := records[id]
		require.True(t, ok, "request %d completed in the trace but not in the simulation", id)
		require.NotNil(t, row["engine_request_id"])
		assert.True(t, strings.HasPrefix(row["engine_request_id"].(string), row["api_request_id"].(string)+"-0-"))
		assert.Equal(t, spec.OutputTokens, row["output_tokens"])
		assert.Equal(t, rec.Preemptions, row["preemptions"])
		assert.Equal(t, "length", row["finish_status"])
		assert.Equal(t, rec.TTFT*1000, row["first_token_wall_ns"].(int64)-arrived, "request %d: TTFT", id)
		assert.Equal(t, rec.E2E*1000, row["departed_wall_ns"].(int64)-arrived, "request %d: E2E", id)
		assert.Equal(t, rec.SchedulingDelay*1000, row["first_scheduled_wall_ns"].(int64)-arrived, "request %d: scheduling delay", id)
		// Both clocks agree: monotonic ns and wall ns are the same offset.
		assert.Equal(t, row["first_token_wall_ns"].(int64)-DefaultWallBaseNs, row["first_token_mono_ns"].(int64)-DefaultMonoBaseNs)
		if chat {
			assert.Equal(t, row["queued_wall_ns"], row["handoff_to_core_wall_ns"])
			assert.Equal(t, row["first_token_wall_ns"], row["first_response_wall_ns"])
		} else {
			assert.Nil(t, row["handoff_to_core_wall_ns"])
			assert.Nil(t, row["first_response_wall_ns"])
		}
	}
	assert.Equal(t, res.Requests.Completed, completed)
	assert.Equal(t, res.Requests.Dropped, dropped)
}

func checkJourney(t *testing.T, r *run, rows []tableRow) {
	kinds := map[string]int{}
	for _, row := range rows {
		kinds[row["event"].(string)]++
		if strings.HasPrefix(row["event"].(string), "journey.") {
			assert.Equal(t, float64(row["ts_monotonic_ns"].(int64))/1e9, row["ts_monotonic"])
			want := "DECODE"
			switch {
			case row["event"] == "journey.QUEUED":
				want = "WAITING"
			case row["decode_done_tokens"] == int64(0):
				want = "PREFILL"
			}
			assert.Equal(t, want, row["phase"], "%s", row["event"])
		}
	}
	n := int(r.res.Requests.Completed)
	assert.Equal(t, n+int(r.res.Requests.Dropped), kinds["api.ARRIVED"])
	assert.Equal(t, n, kinds["api.DEPARTED"])
	assert.Equal(t, int(r.res.Requests.Dropped), kinds["api.ABORTED"])
	assert.Equal(t, n, kinds["journey.QUEUED"])
	assert.Equal(t, n, kinds["journey.FIRST_TOKEN"])
	assert.Equal(t, n, kinds["journey.FINISHED"])
	assert.Equal(t, int(r.res.Preemptions), kinds["journey.PREEMPTED"])
	assert.Equal(t, n+int(r.res.Preemptions), kinds["journey.SCHEDULED"])
	if r.opt.Route == RouteChatCompletions {
		assert.Equal(t, n, kinds["api.HANDOFF_TO_CORE"])
		assert.Equal(t, n, kinds["api.FIRST_RESPONSE_FROM_CORE"])
	} else {
		assert.Zero(t, kinds["api.HANDOFF_TO_CORE"])
	}
}

func checkSteps(t *testing.T, r *run, steps, snaps []tableRow) {
	rec := r.rec
	require.Len(t, steps, int(r.stats.SampledSteps))
	require.Greater(t, len(rec.steps), 1000, "the run must have many steps")
	C := r.opt.ClosureInterval
	byID := map[int64]tableRow{}
	var prevEnd, prevSeq int64
	for _, row := range steps {
		id := row["step_id"].(int64)
		byID[id] = row
		s := rec.steps[id-1]
		assert.Equal(t, DefaultMonoBaseNs+s.StartUs*1000, row["step_ts_start_ns"])
		assert.Equal(t, s.SchedulerUs, row["step_duration_us"])
		assert.Less(t, row["step_duration_us"].(int64), s.CycleUs, "duration_us is scheduler time, below the cycle")
		assert.Equal(t, s.SchedulerUs*1000, row["step_ts_end_ns"].(int64)-row["step_ts_start_ns"].(int64))
		assert.Equal(t, s.Running, row["queue_running_depth"])
		assert.Equal(t, s.Scheduled, row["batch_scheduled_tokens"])
		assert.Equal(t, s.KVFree, row["kv_blocks_free_gpu"])
		assert.Equal(t, C, row["scheduler_closure_interval"])
		from, to, seq := row["scheduler_step_range_start"].(int64), row["scheduler_step_range_end"].(int64), row["scheduler_span_sequence"].(int64)
		assert.True(t, from <= id && id <= to, "step %d outside its span's range %d..%d", id, from, to)
		if seq != prevSeq {
			assert.Equal(t, prevSeq+1, seq, "span sequence numbers count up from 1")
			assert.Equal(t, prevEnd+1, from, "span ranges are contiguous")
			assert.True(t, to%C == 0 || to == int64(len(rec.steps)), "a span closes at a multiple of the interval or at the end: %d", to)
			prevSeq, prevEnd = seq, to
		}
	}
	assert.Equal(t, int64(len(rec.steps)), prevEnd, "the last span ends at the last step")
	// Consecutive sampled steps: their start difference is the cycle time.
	pairs := 0
	for id, row := range byID {
		if next, ok := byID[id+1]; ok {
			pairs++
			assert.Equal(t, rec.steps[id-1].CycleUs*1000, next["step_ts_start_ns"].(int64)-row["step_ts_start_ns"].(int64), "step %d", id)
		}
	}
	assert.Greater(t, pairs, 100)

	// Snapshots: only on rich steps, one per running request.
	ids := simIDs(r)
	rich := map[int64]int{}
	for _, row := range snaps {
		id := row["step_id"].(int64)
		rich[id]++
		s, ok := byID[id]
		require.True(t, ok, "snapshot of unsampled step %d", id)
		assert.Equal(t, true, s["has_rich_snapshots"])
		reqID := row["request_id"].(string)
		api := reqID[:strings.LastIndex(reqID, "-0-")]
		_, known := ids[api]
		assert.True(t, known, "snapshot of unknown request %s", reqID)
		assert.Nil(t, row["request_effective_prompt_len"])
	}
	assert.Equal(t, int(r.stats.RichSteps), len(rich))
	for id, n := range rich {
		assert.Equal(t, len(rec.running[id-1]), n, "step %d: a snapshot per running request", id)
	}
	for id, row := range byID {
		if row["has_rich_snapshots"] == true {
			assert.Contains(t, rich, id)
		}
	}
}

func checkKV(t *testing.T, r *run, rows []tableRow) {
	off := r.res.KVOffload
	if off == nil {
		assert.Empty(t, rows)
		return
	}
	sums := map[string]int64{}
	steps := map[string][]int64{}
	transfers := map[int64][]tableRow{}
	for _, row := range rows {
		typ := row["type"].(string)
		sums[typ] += row["block_count"].(int64)
		steps[typ] = append(steps[typ], row["scheduler_step"].(int64))
		if id := row["transfer_id"]; id != nil {
			transfers[id.(int64)] = append(transfers[id.(int64)], row)
		}
	}
	assert.Equal(t, off.StoredBlocks, sums["CacheStoreCommitted"])
	assert.Equal(t, off.ReloadedBlocks, sums["CacheLoadCommitted"])
	assert.Equal(t, off.CPUEvictions, sums["CacheEviction"])
	assert.Equal(t, off.StoredBlocks+off.ReloadedBlocks, sums["TransferInitiated"])
	assert.Equal(t, sums["TransferInitiated"], sums["TransferCompleted"])
	// Transfer ids count up from 1, each with one start and one completion.
	for id := int64(1); id <= int64(len(transfers)); id++ {
		pair := transfers[id]
		require.Len(t, pair, 2, "transfer %d", id)
		assert.Equal(t, "TransferInitiated", pair[0]["type"])
		assert.Equal(t, "TransferCompleted", pair[1]["type"])
		assert.Equal(t, true, pair[1]["success"])
	}
	// A store at step S transfers GPU→CPU at S+1.
	stores := map[int64]int64{}
	for _, row := range rows {
		if row["type"] == "CacheStoreCommitted" {
			stores[row["scheduler_step"].(int64)+1] += row["block_count"].(int64)
		}
	}
	gpuToCPU := map[int64]int64{}
	for _, row := range rows {
		if row["type"] == "TransferInitiated" && row["source_medium"] == "GPU" {
			gpuToCPU[row["scheduler_step"].(int64)] += row["block_count"].(int64)
		}
	}
	assert.Equal(t, stores, gpuToCPU)
	// Every line is at its step's end; the simulator's own events agree.
	var stored int64
	for _, ev := range r.rec.kv {
		if ev.Kind == sim.KVStore {
			stored += ev.Blocks
		}
	}
	assert.Equal(t, off.StoredBlocks, stored)
	for _, row := range rows {
		step := row["scheduler_step"].(int64)
		if step > int64(len(r.rec.steps)) {
			continue // the transfer of a store at the very last step
		}
		s := r.rec.steps[step-1]
		want := float64(DefaultWallBaseNs+(s.StartUs+s.CycleUs)*1000) / 1e9
		assert.Equal(t, want, row["batch_ts"], "KV event of step %d", step)
	}
}

func TestSamplingRates(t *testing.T) {
	reqs := workload(1500, 3, 30_000)
	opt := DefaultOptions()
	opt.JourneySampleRate, opt.StepSampleRate, opt.RichSubsampleRate = 0.5, 0.3, 0.5
	opt.MaxEventsPerSpan = 1 << 20 // keep every BATCH_SUMMARY to compare sampled step ids
	r := simulate(t, baseConfig(), reqs, opt, 9)
	steps := float64(len(r.rec.steps))
	require.Greater(t, steps, 5000.0)
	within := func(what string, got, n, p float64) {
		t.Helper()
		sd := math.Sqrt(n * p * (1 - p))
		assert.InDelta(t, n*p, got, 4*sd, "%s: %v of %v, want share %v", what, got, n, p)
	}
	within("sampled steps", float64(r.stats.SampledSteps), steps, 0.3)
	within("rich steps", float64(r.stats.RichSteps), float64(r.stats.SampledSteps), 0.5)
	within("sampled requests", float64(r.stats.SampledRequests), float64(len(reqs)), 0.5)

	// The trace holds exactly the sampled requests.
	spans := spansOf(t, r.tracePath)
	var api, core int64
	for _, sp := range spans {
		switch sp.Name {
		case otlpingest.SpanRequest:
			api++
		case otlpingest.SpanCore:
			core++
		}
	}
	assert.Equal(t, r.stats.SampledRequests, api)
	assert.Less(t, core, api) // the dropped ones have no engine span

	// Rates shift no other draw: without rich sampling the same steps are
	// sampled, and without step sampling the same requests.
	opt2 := opt
	opt2.RichSubsampleRate = 0
	opt2.JourneySampleRate = 0.5
	r2 := simulate(t, baseConfig(), reqs, opt2, 9)
	assert.Equal(t, r.stats.SampledSteps, r2.stats.SampledSteps)
	assert.Equal(t, sampledStepIDs(t, r.tracePath), sampledStepIDs(t, r2.tracePath))
	opt3 := opt
	opt3.StepSampleRate = 0
	r3 := simulate(t, baseConfig(), reqs, opt3, 9)
	assert.Equal(t, r.stats.SampledRequests, r3.stats.SampledRequests)
	assert.Zero(t, r3.stats.SampledSteps)
	for _, sp := range spansOf(t, r3.tracePath) {
		assert.NotEqual(t, otlpingest.ScopeStep, sp.Scope, "step rate 0: no step spans")
	}
}

func sampledStepIDs(t *testing.T, path string) []int64 {
	var ids []int64
	for _, sp := range spansOf(t, path) {
		for _, ev := range sp.Events {
			if ev.Name == "step.BATCH_SUMMARY" {
				v, _ := ev.Attr("step.id")
				ids = append(ids, v.Int)
			}
		}
	}
	return ids
}

func TestEventLimit(t *testing.T) {
	opt := DefaultOptions()
	opt.StepSampleRate, opt.RichSubsampleRate = 1, 1
	opt.ClosureInterval = 100
	r := simulate(t, baseConfig(), workload(300, 5, 30_000), opt, 1)
	rec := r.rec
	type key struct {
		name string
		step int64
		req  string
	}
	var stepSpans []otlpingest.Span
	for _, sp := range spansOf(t, r.tracePath) {
		if sp.Scope == otlpingest.ScopeStep {
			stepSpans = append(stepSpans, sp)
		}
	}
	require.Len(t, stepSpans, (len(rec.steps)+99)/100)
	var dropped int64
	for i, sp := range stepSpans {
		from, to := int64(i*100+1), min(int64(i*100+100), int64(len(rec.steps)))
		v, _ := sp.Attr("scheduler.step_range_start")
		assert.Equal(t, from, v.Int)
		v, _ = sp.Attr("scheduler.step_range_end")
		assert.Equal(t, to, v.Int)
		assert.Equal(t, "scheduler_steps_"+strconv.Itoa(i+1), sp.Name)
		// Every event the scheduler emitted, in order.
		var want []key
		for id := from; id <= to; id++ {
			want = append(want, key{"step.BATCH_SUMMARY", id, ""})
			for _, req := range rec.running[id-1] {
				_, eng := requestIDs("cmpl-", req, 0)
				want = append(want, key{"step.REQUEST_SNAPSHOT", id, eng})
			}
		}
		var got []key
		for _, ev := range sp.Events {
			id, _ := ev.Attr("step.id")
			req, _ := ev.Attr("request.id")
			got = append(got, key{ev.Name, id.Int, req.Str})
		}
		if len(want) <= 128 {
			assert.Equal(t, want, got)
			assert.Zero(t, sp.DroppedEventsCount)
			continue
		}
		assert.Len(t, sp.Events, 128, "span %s keeps exactly the limit", sp.Name)
		assert.Equal(t, uint32(len(want)-128), sp.DroppedEventsCount, "span %s counts the surplus", sp.Name)
		assert.Equal(t, want[len(want)-128:], got, "span %s keeps the last events", sp.Name)
		dropped += int64(sp.DroppedEventsCount)
	}
	require.Greater(t, dropped, int64(0), "the test must overflow spans")
	assert.Equal(t, dropped, r.stats.DroppedEvents)

	m, _ := ingest(t, r)
	issues := issueCounts(m)
	assert.Greater(t, issues[otlpingest.IssueDroppedEvents], int64(0))
	delete(issues, otlpingest.IssueDroppedEvents)
	delete(issues, otlpingest.IssueOrphanAPISpan)
	assert.Empty(t, issues)
}

// TestStepSpanClosure: a span closes at an interval boundary only if a step
// was sampled in that interval; otherwise it goes on.
func TestStepSpanClosure(t *testing.T) {
	var buf bytes.Buffer
	opt := DefaultOptions()
	opt.StepSampleRate, opt.ClosureInterval = 1, 10
	w, err := NewWriter(&buf, nil, opt, rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(3, 4)))
	require.NoError(t, err)
	// Sample only steps 5, 35 and 41 by driving the writer with rate 1 and
	// a step span: easier with a scripted rate per step.
	sampled := map[int64]bool{5: true, 35: true, 41: true}
	for id := int64(1); id <= 45; id++ {
		if sampled[id] {
			w.opt.StepSampleRate = 1
		} else {
			w.opt.StepSampleRate = 1e-300 // on, but never sampled
		}
		w.Step(&sim.StepSummary{ID: id, StartUs: id * 1000, CycleUs: 1000, SchedulerUs: 50}, nil)
	}
	require.NoError(t, w.Close())
	spans := spansOf2(t, buf.Bytes())
	require.Len(t, spans, 3)
	type rng struct{ seq, from, to int64 }
	var got []rng
	for _, sp := range spans {
		a, _ := sp.Attr("scheduler.span_sequence")
		b, _ := sp.Attr("scheduler.step_range_start")
		c, _ := sp.Attr("scheduler.step_range_end")
		got = append(got, rng{a.Int, b.Int, c.Int})
	}
	// 1..10 has step 5: closed at 10. 11..20 and 21..30 have none: the span
	// goes on to 40. 41..45 is ended by Close.
	assert.Equal(t, []rng{{1, 1, 10}, {2, 11, 40}, {3, 41, 45}}, got)
	assert.Equal(t, uint64(DefaultWallBaseNs+1000*1000), spans[0].StartUnixNano)
	assert.Equal(t, uint64(DefaultWallBaseNs+(10*1000+50)*1000), spans[0].EndUnixNano)
	assert.Equal(t, spans[0].EndUnixNano, spans[1].StartUnixNano)
	assert.Equal(t, uint64(DefaultWallBaseNs+(45*1000+1000)*1000), spans[2].EndUnixNano)
}

func spansOf2(t *testing.T, data []byte) []otlpingest.Span {
	var out []otlpingest.Span
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		spans, err := otlpingest.DecodeJSON(line)
		require.NoError(t, err)
		out = append(out, spans...)
	}
	return out
}

func TestDeterministic(t *testing.T) {
	reqs := workload(300, 8, 25_000)
	opt := DefaultOptions()
	opt.StepSampleRate, opt.RichSubsampleRate, opt.JourneySampleRate = 0.4, 0.3, 0.7
	a := simulate(t, offloadConfig(), reqs, opt, 77)
	b := simulate(t, offloadConfig(), reqs, opt, 77)
	for _, p := range [][2]string{{a.tracePath, b.tracePath}, {a.kvPath, b.kvPath}} {
		x, err := os.ReadFile(p[0])
		require.NoError(t, err)
		y, err := os.ReadFile(p[1])
		require.NoError(t, err)
		require.NotEmpty(t, x)
		require.True(t, bytes.Equal(x, y), "%s and %s differ", p[0], p[1])
	}
	assert.Equal(t, a.stats, b.stats)
	// Buffers are reused once their line is written: one span per line
	// reuses them at once, and must give the same spans.
	one := opt
	one.SpansPerLine = 1
	d := simulate(t, offloadConfig(), reqs, one, 77)
	sa, sd := spansOf(t, a.tracePath), spansOf(t, d.tracePath)
	require.Len(t, sd, len(sa))
	for i := range sa {
		sa[i].Record, sd[i].Record = 0, 0
	}
	assert.Equal(t, sa, sd)
	assert.Equal(t, int64(len(sa)), d.stats.Lines)
	c := simulate(t, offloadConfig(), reqs, opt, 78)
	assert.NotEqual(t, a.stats.SampledSteps, c.stats.SampledSteps, "another seed samples other steps")
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		err  string
	}{
		{"defaults", func(*Options) {}, ""},
		{"zero values take defaults", func(o *Options) { *o = Options{} }, ""},
		{"journey rate", func(o *Options) { o.JourneySampleRate = -0.1 }, "trace option JourneySampleRate: must be in [0, 1], got -0.1"},
		{"step rate", func(o *Options) { o.StepSampleRate = 2 }, "trace option StepSampleRate: must be in [0, 1], got 2"},
		{"step rate NaN", func(o *Options) { o.StepSampleRate = math.NaN() }, "trace option StepSampleRate: must be in [0, 1], got NaN"},
		{"rich rate", func(o *Options) { o.RichSubsampleRate = 1.5 }, "trace option RichSubsampleRate: must be in [0, 1], got 1.5"},
		{"closure low", func(o *Options) { o.ClosureInterval = 9 }, "trace option ClosureInterval: must be in [10, 10000] steps, got 9"},
		{"closure high", func(o *Options) { o.ClosureInterval = 10001 }, "trace option ClosureInterval: must be in [10, 10000] steps, got 10001"},
		{"closure bounds", func(o *Options) { o.ClosureInterval = 10 }, ""},
		{"route", func(o *Options) { o.Route = "/v1/embeddings" }, `trace option Route: must be /v1/completions or /v1/chat/completions, got "/v1/embeddings"`},
		{"chat route", func(o *Options) { o.Route = RouteChatCompletions }, ""},
		{"events", func(o *Options) { o.MaxEventsPerSpan = -1 }, "trace option MaxEventsPerSpan: must be > 0, got -1"},
		{"spans per line", func(o *Options) { o.SpansPerLine = -5 }, "trace option SpansPerLine: must be > 0, got -5"},
		{"mono base", func(o *Options) { o.MonoBaseNs = -1 }, "trace option MonoBaseNs: must be >= 0 ns, got -1"},
		{"wall base", func(o *Options) { o.WallBaseNs = -1 }, "trace option WallBaseNs: must be >= 0 ns, got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			err := o.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.err)
			_, err = NewWriter(&bytes.Buffer{}, nil, o, rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(1, 1)))
			require.EqualError(t, err, tc.err)
		})
	}
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	traces := map[otlpingest.TraceID]bool{}
	for i := int64(0); i < 10000; i++ {
		api, eng := requestIDs("cmpl-", i, 0)
		require.Len(t, api, 5+16)
		require.Equal(t, api, eng[:len(api)])
		require.Len(t, eng, len(api)+3+4)
		require.False(t, seen[api])
		seen[api] = true
		for _, d := range []byte{domainRequest, domainStep} {
			tid := traceID(d, i, 0)
			require.NotEqual(t, otlpingest.TraceID{}, tid)
			require.False(t, traces[tid])
			traces[tid] = true
		}
		require.NotEqual(t, spanID(saltAPISpan, i), spanID(saltCoreSpan, i))
		require.False(t, spanID(saltAPISpan, i).IsZero())
	}
}

// BenchmarkTrace10k measures a 10,000-request run with and without the
// writer (output discarded), to isolate the tracing cost.
func BenchmarkTrace10k(b *testing.B) {
	reqs := workload(10_000, 21, 30_000)
	all := DefaultOptions()
	all.StepSampleRate, all.RichSubsampleRate = 1, 1
	cases := []struct {
		name string
		opt  *Options
	}{
		{"sim_only", nil},
		{"vllm_defaults", func() *Options { o := DefaultOptions(); return &o }()},
		{"every_step_rich", &all},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var st Stats
			for b.Loop() {
				cfg := offloadConfig()
				cfg.Options.RecordRequests = false
				var w *Writer
				if tc.opt != nil {
					rng := sim.NewRNG(1)
					var err error
					w, err = NewWriter(io.Discard, io.Discard, *tc.opt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
					if err != nil {
						b.Fatal(err)
					}
					cfg.Observer = w
				}
				s, err := sim.New(cfg, reqs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Run(); err != nil {
					b.Fatal(err)
				}
				if w != nil {
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
					st = w.Stats()
				}
			}
			b.ReportMetric(float64(st.Spans), "spans")
			b.ReportMetric(float64(st.Events), "events")
		})
	}
}

// TestHorizon: requests in flight when the run stops are not written, so
// every written request is whole.
func TestHorizon(t *testing.T) {
	cfg := baseConfig()
	cfg.Options.HorizonUs = 3_000_000
	opt := DefaultOptions()
	opt.StepSampleRate = 0.2
	r := simulate(t, cfg, workload(400, 11, 30_000), opt, 5)
	require.Greater(t, r.res.Requests.StillRunning+r.res.Requests.StillQueued, int64(0), "the horizon must cut requests")
	m, tables := ingest(t, r)
	assert.Equal(t, map[otlpingest.IssueKind]int64{otlpingest.IssueOrphanAPISpan: r.res.Requests.Dropped}, issueCounts(m))
	assert.Len(t, tables[otlpingest.TableRequests], int(r.res.Requests.Completed+r.res.Requests.Dropped))
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, os.ErrClosed
}

func TestWriteError(t *testing.T) {
	fw := &failWriter{}
	opt := DefaultOptions()
	opt.SpansPerLine = 2
	w, err := NewWriter(fw, nil, opt, rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(3, 4)))
	require.NoError(t, err)
	cfg := baseConfig()
	cfg.Observer = w
	s, err := sim.New(cfg, workload(50, 1, 30_000))
	require.NoError(t, err)
	_, err = s.Run()
	require.NoError(t, err, "a failing trace writer must not stop the simulation")
	require.ErrorIs(t, w.Close(), os.ErrClosed)
	require.Equal(t, 1, fw.n, "nothing is written after the first error")
	require.ErrorIs(t, w.Close(), os.ErrClosed)
}
