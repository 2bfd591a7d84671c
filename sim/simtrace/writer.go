// Package simtrace writes a simulation run as vLLM with journey and step
// tracing would trace it: OTLP JSON lines in the OpenTelemetry Collector
// file exporter's format (one ExportTraceServiceRequest per line, written
// with otlpspan.AppendJSON), and optionally the KV events subscriber's
// JSON lines, as docs/vllm-tracing.md describes and otlpingest
// reads them.
//
// A Writer is a sim.Observer. Per journey-sampled request it writes an
// llm_request span (scope vllm.api, service ServiceAPI) when the request
// departs or is refused, and its child llm_core span (scope vllm.scheduler,
// service ServiceEngine) when it finishes. Per closure interval it writes a
// scheduler_steps_<seq> span (scope vllm.scheduler.step) with the sampled
// steps' BATCH_SUMMARY events and, on rich steps, a REQUEST_SNAPSHOT per
// running request. Spans are written in the order they end.
//
// Step spans follow the vLLM fork's scheduler
// (vllm/v1/core/sched/scheduler.py): the first span, scheduler_steps_1,
// starts at step 1, so sequence numbers count from 1. Every ClosureInterval steps the open span
// is closed, with step_range_end the current step, and the next one opened
// with step_range_start the step after, but only if a step was sampled in
// the last ClosureInterval steps; otherwise the open span goes on, so one
// span can cover several intervals. Close ends the open span, as vLLM does
// at shutdown, with step_range_end the last step. A closure happens inside
// schedule(), right after the step's BATCH_SUMMARY: the closed span ends,
// and the next one starts, at that step's step.ts_end_ns. The first span
// starts at step 1's start and the last one ends with the last step's
// cycle. step.duration_us is the scheduler's time (StepSummary.SchedulerUs),
// not the cycle time.
//
// Span events obey the OpenTelemetry SDK's limit: a span keeps its last
// MaxEventsPerSpan events and counts the dropped older ones in
// droppedEventsCount (the SDK's BoundedList is a deque with maxlen).
//
// Journey events carry the simulator's counters and phase, which the engine
// computes as vLLM's _compute_progress_snapshot does.
// A refused request's API span ends with api.ABORTED (reason
// AbortReasonRejected, error the simulator's reason) and has no engine span.
// A request whose client gave up (sim.Engine.Abort) has its API span end
// with api.ABORTED (reason AbortReasonClient) at the time the client left,
// and, if it had reached the scheduler, its engine span end with
// journey.FINISHED, finish.status "aborted", when the engine applied the
// abort (the end of the step in flight, if any); no api.DEPARTED.
//
// Identifiers: the API request id is "cmpl-" ("chatcmpl-" on the chat
// route) and 16 hex digits, the engine id that plus "-0-" and 4 hex digits;
// trace and span ids are hashes of the request id (or the step span's
// sequence number), unique and never zero. KV events name requests by
// their engine id, sampled or not. Options.RunID salts them all, so that
// two runs (blis run derives the id from its whole configuration) give
// different ids and their traces can be ingested together.
//
// Clusters: each engine has its own Writer with its own
// Options.InstanceID, and all may write into one trace (each Write is whole
// lines). Every span then carries the resource attribute
// service.instance.id, and step span ids are salted with the instance, so
// that the engines' step spans, numbered from 1 by each, stay apart.
//
// Everything is deterministic: randomness comes only from the two streams
// the caller passes, and the clocks are fixed bases plus simulated time.
// Requests still in flight at Close (a run cut by its horizon) are not
// written, as vLLM exports a span only when it ends.
package simtrace

import (
	"errors"
	"io"
	"math/rand/v2"
	"strconv"

	"github.com/blis-sim/blis/internal/otlpspan"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/sim"
)

// Service names of the two vLLM processes (resource attribute
// service.name).
const (
	ServiceAPI    = "vllm-api-server"
	ServiceEngine = "vllm-engine-core"
)

// AbortReasonRejected is api.ABORTED's reason for a request the engine
// refused; its error is the simulator's explanation.
const AbortReasonRejected = "rejected"

// AbortReasonClient is api.ABORTED's reason for a request whose client
// gave up; the API server sees it as a closed connection.
const AbortReasonClient = "client_disconnect"

// Stats counts what a Writer wrote.
type Stats struct {
	Spans           int64 // spans written
	Events          int64 // events written (kept within the limit)
	DroppedEvents   int64 // events dropped by the per-span limit
	Lines           int64 // ExportTraceServiceRequest lines
	SampledRequests int64 // requests chosen for journey tracing
	SampledSteps    int64 // steps with a BATCH_SUMMARY
	RichSteps       int64 // sampled steps that also carry REQUEST_SNAPSHOTs
	KVLines         int64 // KV events lines
}

type reqState struct {
	apiID, engineID string
	api, core       *spanBuf
}

// Writer traces a run; it implements sim.Observer. Call Close at the end.
type Writer struct {
	opt        Options
	trace      io.Writer
	kv         *kvLines
	jrng, srng *rand.Rand
	idPrefix   string
	chat       bool
	salt       uint64 // of the step span ids: instanceSalt(opt.InstanceID)
	run        uint64 // of every id: runSalt(opt.RunID)

	reqs map[int64]*reqState // journey-sampled requests in flight
	ids  map[int64]string    // engine ids of unsampled requests, for snapshots and KV loads

	freeBufs [numKinds][]*spanBuf // by kind, so that reused event slots fit
	freeReqs []*reqState
	pending  []*spanBuf // finished spans not yet written
	spans    []otlpspan.Span
	line     []byte

	// The open step span (nil: none yet, or the last one was just closed).
	step           *spanBuf
	stepSeq        int64
	stepRangeStart int64
	stepStartUs    int64
	nextStartUs    int64 // start of the span opened by a closure
	reopened       bool
	stepsSince     int64
	eventsSince    bool
	last           sim.StepSummary
	snaps          []sim.RequestSnapshot

	stats  Stats
	err    error
	closed bool
}

var _ sim.Observer = (*Writer)(nil)

// NewWriter returns a Writer that writes OTLP JSON lines to trace and, if
// kvEvents is not nil, KV events lines to kvEvents. journeyRNG and stepRNG
// are normally sim.NewRNG(seed).Stream(sim.StreamTraceJourney) and
// .Stream(sim.StreamTraceStep). The Writer draws exactly one journey number
// per arrival, and per step one number to sample it and, only if sampled,
// one to make it rich, so that changing a rate shifts no other draw.
//
// KV events lines name no engine: the subscriber's format, [ts, [event,
// ...], dp_rank], has no resource, and scheduler_step counts per engine,
// so in a cluster (Options.InstanceID set) give each Writer its own
// kvEvents, one file per engine; lines from several engines in one file
// cannot be told apart (they are written whole, so they stay readable).
func NewWriter(trace io.Writer, kvEvents io.Writer, opt Options, journeyRNG, stepRNG *rand.Rand) (*Writer, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if trace == nil {
		return nil, errors.New("simtrace: no trace writer")
	}
	if journeyRNG == nil || stepRNG == nil {
		return nil, errors.New("simtrace: both random streams are required")
	}
	opt = opt.withDefaults()
	w := &Writer{
		opt:      opt,
		trace:    trace,
		jrng:     journeyRNG,
		srng:     stepRNG,
		idPrefix: "cmpl-",
		chat:     opt.Route == RouteChatCompletions,
		salt:     instanceSalt(opt.InstanceID),
		run:      runSalt(opt.RunID),
		reqs:     map[int64]*reqState{},
		ids:      map[int64]string{},
	}
	if w.chat {
		w.idPrefix = "chatcmpl-"
	}
	if kvEvents != nil {
		w.kv = newKVLines(kvEvents)
	}
	return w, nil
}

// Stats reports what has been written so far.
func (w *Writer) Stats() Stats {
	s := w.stats
	if w.kv != nil {
		s.KVLines = w.kv.lines
	}
	return s
}

func (w *Writer) wallNs(us int64) uint64 { return uint64(w.opt.WallBaseNs + us*1000) }
func (w *Writer) monoNs(us int64) int64  { return w.opt.MonoBaseNs + us*1000 }

func (w *Writer) setErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

func (w *Writer) newBuf(k spanKind) *spanBuf {
	free := w.freeBufs[k]
	if n := len(free); n > 0 {
		b := free[n-1]
		w.freeBufs[k] = free[:n-1]
		return b
	}
	return &spanBuf{kind: k}
}

func (w *Writer) release(b *spanBuf) {
	b.reset()
	w.freeBufs[b.kind] = append(w.freeBufs[b.kind], b)
}

// engineID is a request's engine id, sampled or not.
func (w *Writer) engineID(req int64) string {
	if st := w.reqs[req]; st != nil {
		return st.engineID
	}
	if id, ok := w.ids[req]; ok {
		return id
	}
	_, id := requestIDs(w.idPrefix, req, w.run)
	w.ids[req] = id
	return id
}

// emit finishes a span and queues it for the next line.
func (w *Writer) emit(b *spanBuf) {
	b.finish()
	w.stats.Spans++
	w.stats.Events += int64(b.n)
	w.stats.DroppedEvents += b.dropped
	w.pending = append(w.pending, b)
	if len(w.pending) >= w.opt.SpansPerLine {
		w.flushLine()
	}
}

// flushLine writes the queued spans as one ExportTraceServiceRequest.
func (w *Writer) flushLine() {
	if len(w.pending) == 0 {
		return
	}
	w.spans = w.spans[:0]
	for _, b := range w.pending {
		w.spans = append(w.spans, b.sp)
	}
	if w.err == nil {
		w.line = otlpspan.AppendJSON(w.line[:0], w.spans)
		w.line = append(w.line, '\n')
		n, err := w.trace.Write(w.line)
		if err == nil && n < len(w.line) {
			err = io.ErrShortWrite
		}
		w.setErr(err)
		w.stats.Lines++
	}
	clear(w.spans) // drop references to the reused buffers
	for _, b := range w.pending {
		w.release(b)
	}
	clear(w.pending)
	w.pending = w.pending[:0]
}

func (w *Writer) apiEvent(b *spanBuf, name string, us int64) *otlpspan.Event {
	e := b.add(w.opt.MaxEventsPerSpan, w.wallNs(us), name)
	e.Attrs = append(e.Attrs, dv(tracevocab.EventTSMonotonic, float64(w.monoNs(us))/1e9))
	return e
}

// Arrived implements sim.Observer: the journey sampling decision.
func (w *Writer) Arrived(spec *sim.RequestSpec) {
	if !(w.jrng.Float64() < w.opt.JourneySampleRate) {
		return
	}
	w.stats.SampledRequests++
	var st *reqState
	if n := len(w.freeReqs); n > 0 {
		st = w.freeReqs[n-1]
		w.freeReqs = w.freeReqs[:n-1]
	} else {
		st = &reqState{}
	}
	st.apiID, st.engineID = requestIDs(w.idPrefix, spec.ID, w.run)
	tid := traceID(domainRequest, spec.ID, w.run)

	api := w.newBuf(kindAPI)
	sp := &api.sp
	sp.Service, sp.Instance, sp.Scope, sp.Name, sp.Kind = ServiceAPI, w.opt.InstanceID, tracevocab.ScopeAPI, tracevocab.SpanRequest, 2
	sp.TraceID, sp.SpanID = tid, spanID(saltAPISpan^w.run, spec.ID)
	sp.StartUnixNano = w.wallNs(spec.ArrivalUs)
	sp.Attrs = append(sp.Attrs, sv(tracevocab.RequestID, st.apiID), sv(tracevocab.HTTPRoute, w.opt.Route))
	if w.opt.Model != "" {
		sp.Attrs = append(sp.Attrs, sv(tracevocab.ResponseModel, w.opt.Model))
	}
	sp.Attrs = append(sp.Attrs, iv(tracevocab.UsagePromptTokens, spec.PromptTokens),
		dv(tracevocab.RequestTemperature, 1), dv(tracevocab.RequestTopP, 1),
		iv(tracevocab.RequestMaxTokens, spec.OutputTokens), iv(tracevocab.RequestN, 1))
	w.apiEvent(api, tracevocab.APIArrived, spec.ArrivalUs)

	core := w.newBuf(kindCore)
	sp = &core.sp
	sp.Service, sp.Instance, sp.Scope, sp.Name, sp.Kind = ServiceEngine, w.opt.InstanceID, tracevocab.ScopeScheduler, tracevocab.SpanCore, 1
	sp.TraceID, sp.SpanID, sp.ParentSpanID = tid, spanID(saltCoreSpan^w.run, spec.ID), api.sp.SpanID
	sp.Attrs = append(sp.Attrs, sv(tracevocab.RequestID, st.engineID))

	st.api, st.core = api, core
	w.reqs[spec.ID] = st
}

var journeyNames = [...]string{
	sim.JourneyQueued:     tracevocab.JourneyQueued,
	sim.JourneyScheduled:  tracevocab.JourneyScheduled,
	sim.JourneyFirstToken: tracevocab.JourneyFirstToken,
	sim.JourneyPreempted:  tracevocab.JourneyPreempted,
	sim.JourneyFinished:   tracevocab.JourneyFinished,
}

// Journey implements sim.Observer.
func (w *Writer) Journey(ev *sim.JourneyEvent) {
	st := w.reqs[ev.Req]
	if st == nil || st.core == nil {
		return
	}
	core := st.core
	if ev.Kind == sim.JourneyQueued && core.n == 0 {
		core.sp.StartUnixNano = w.wallNs(ev.AtUs)
	}
	mono := w.monoNs(ev.AtUs)
	e := core.add(w.opt.MaxEventsPerSpan, w.wallNs(ev.AtUs), journeyNames[ev.Kind])
	e.Attrs = append(e.Attrs,
		sv(tracevocab.EventType, ev.Kind.String()),
		dv(tracevocab.TSMonotonic, float64(mono)/1e9),
		iv(tracevocab.TSMonotonicNs, mono),
		iv(tracevocab.SchedulerStep, ev.Step),
		sv(tracevocab.Phase, phaseName(ev.Phase)),
		iv(tracevocab.PrefillDoneTokens, ev.PrefillDone),
		iv(tracevocab.PrefillTotalTokens, ev.PrefillTotal),
		iv(tracevocab.DecodeDoneTokens, ev.DecodeDone),
		iv(tracevocab.DecodeMaxTokens, ev.DecodeMax),
		iv(tracevocab.NumPreemptions, ev.NumPreemptions))
	switch ev.Kind {
	case sim.JourneyQueued:
		if w.chat && st.api != nil {
			w.apiEvent(st.api, tracevocab.APIHandoffToCore, ev.AtUs)
		}
	case sim.JourneyScheduled:
		kind := tracevocab.ScheduleFirst
		if ev.Resume {
			kind = tracevocab.ScheduleResume
		}
		e.Attrs = append(e.Attrs, sv(tracevocab.ScheduleKind, kind))
	case sim.JourneyFirstToken:
		if w.chat && st.api != nil {
			w.apiEvent(st.api, tracevocab.APIFirstResponseFromCore, ev.AtUs)
		}
	case sim.JourneyFinished:
		e.Attrs = append(e.Attrs, sv(tracevocab.FinishStatus, ev.FinishStatus))
		core.sp.EndUnixNano = w.wallNs(ev.AtUs)
		st.core = nil
		w.emit(core)
		if st.api == nil { // aborted: its API span is already written
			delete(w.reqs, ev.Req)
			w.recycle(st)
		}
	}
}

func (w *Writer) endRequest(req int64) *reqState {
	delete(w.ids, req)
	st := w.reqs[req]
	if st != nil {
		delete(w.reqs, req)
	}
	return st
}

func (w *Writer) recycle(st *reqState) {
	*st = reqState{}
	w.freeReqs = append(w.freeReqs, st)
}

// Departed implements sim.Observer: the request's spans are written.
func (w *Writer) Departed(req int64, atUs int64) {
	st := w.endRequest(req)
	if st == nil {
		return
	}
	if st.core != nil { // no FINISHED was seen; end the engine span here
		st.core.sp.EndUnixNano = w.wallNs(atUs)
		w.emit(st.core)
	}
	w.apiEvent(st.api, tracevocab.APIDeparted, atUs)
	st.api.sp.EndUnixNano = w.wallNs(atUs)
	w.emit(st.api)
	w.recycle(st)
}

// Dropped implements sim.Observer: a refused request has an API span that
// ends with api.ABORTED, and no engine span.
func (w *Writer) Dropped(req int64, atUs int64, reason string) {
	st := w.endRequest(req)
	if st == nil {
		return
	}
	e := w.apiEvent(st.api, tracevocab.APIAborted, atUs)
	e.Attrs = append(e.Attrs, sv(tracevocab.AbortReason, AbortReasonRejected), sv(tracevocab.AbortError, reason))
	st.api.sp.EndUnixNano = w.wallNs(atUs)
	w.emit(st.api)
	if st.core != nil {
		w.release(st.core)
	}
	w.recycle(st)
}

// Aborted implements sim.Observer: the client gave up at atUs, so the API
// span ends there with api.ABORTED. A request the scheduler holds keeps its
// engine span open for the journey.FINISHED (aborted) that follows; one
// still in API processing never reached the engine and has no engine span.
func (w *Writer) Aborted(req int64, atUs int64) {
	delete(w.ids, req)
	st := w.reqs[req]
	if st == nil {
		return
	}
	// The engine computes a step's tokens when the step starts, so a first
	// token due at the end of the step in flight may already be recorded;
	// the API server never sent it to the gone client.
	if w.chat {
		st.api.dropLastAfter(w.wallNs(atUs), tracevocab.APIFirstResponseFromCore)
	}
	e := w.apiEvent(st.api, tracevocab.APIAborted, atUs)
	e.Attrs = append(e.Attrs, sv(tracevocab.AbortReason, AbortReasonClient), sv(tracevocab.AbortError, "client disconnected"))
	st.api.sp.EndUnixNano = w.wallNs(atUs)
	w.emit(st.api)
	st.api = nil
	if st.core != nil && st.core.n > 0 {
		return // queued or running: journey.FINISHED ends the engine span
	}
	if st.core != nil {
		w.release(st.core)
	}
	delete(w.reqs, req)
	w.recycle(st)
}

// Step implements sim.Observer: the sampling decisions, the step span's
// events and closure, and the step's KV events line.
func (w *Writer) Step(s *sim.StepSummary, snaps sim.SnapshotSource) {
	sampled := w.srng.Float64() < w.opt.StepSampleRate
	rich := sampled && w.srng.Float64() < w.opt.RichSubsampleRate
	if w.kv != nil {
		w.setErr(w.kv.endStep(s.ID, w.opt.WallBaseNs+(s.StartUs+s.CycleUs)*1000))
	}
	w.last = *s
	if w.opt.StepSampleRate == 0 {
		return
	}
	if w.step == nil {
		w.openStep(s)
	}
	if sampled {
		w.stats.SampledSteps++
		w.summary(s)
		if rich {
			w.stats.RichSteps++
			w.snapshots(s, snaps)
		}
		w.eventsSince = true
	}
	w.stepsSince++
	if w.stepsSince >= w.opt.ClosureInterval {
		if w.eventsSince {
			endUs := s.StartUs + s.SchedulerUs
			w.closeStep(s.ID, endUs)
			w.nextStartUs, w.reopened = endUs, true
		}
		w.stepsSince, w.eventsSince = 0, false
	}
}

func (w *Writer) openStep(s *sim.StepSummary) {
	w.stepSeq++
	w.stepRangeStart = s.ID
	w.stepStartUs = s.StartUs
	if w.reopened {
		w.stepStartUs = w.nextStartUs
	}
	w.step = w.newBuf(kindStep)
}

func (w *Writer) closeStep(rangeEnd, endUs int64) {
	b := w.step
	w.step = nil
	sp := &b.sp
	sp.Service, sp.Instance, sp.Scope, sp.Kind = ServiceEngine, w.opt.InstanceID, tracevocab.ScopeStep, 1
	sp.Name = tracevocab.StepSpanPrefix + strconv.FormatInt(w.stepSeq, 10)
	sp.TraceID, sp.SpanID = traceID(domainStep, w.stepSeq, w.salt^w.run), spanID(saltStepSpan^w.salt^w.run, w.stepSeq)
	sp.StartUnixNano, sp.EndUnixNano = w.wallNs(w.stepStartUs), w.wallNs(endUs)
	// Attribute order as the SDK keeps it: set at start, then at closure.
	sp.Attrs = append(sp.Attrs[:0],
		iv(tracevocab.SpanSequence, w.stepSeq),
		iv(tracevocab.StepRangeStart, w.stepRangeStart),
		iv(tracevocab.ClosureInterval, w.opt.ClosureInterval),
		iv(tracevocab.StepRangeEnd, rangeEnd))
	w.emit(b)
}

func (w *Writer) summary(s *sim.StepSummary) {
	endUs := s.StartUs + s.SchedulerUs
	e := w.step.add(w.opt.MaxEventsPerSpan, w.wallNs(endUs), tracevocab.StepBatchSummary)
	e.Attrs = append(e.Attrs,
		iv(tracevocab.StepID, s.ID),
		iv(tracevocab.StepTSStartNs, w.monoNs(s.StartUs)),
		iv(tracevocab.StepTSEndNs, w.monoNs(endUs)),
		iv(tracevocab.StepDurationUs, s.SchedulerUs),
		iv(tracevocab.QueueRunningDepth, s.Running),
		iv(tracevocab.QueueWaitingDepth, s.Waiting),
		iv(tracevocab.BatchNumPrefillReqs, s.NumPrefill),
		iv(tracevocab.BatchNumDecodeReqs, s.NumDecode),
		iv(tracevocab.BatchScheduledTokens, s.Scheduled),
		iv(tracevocab.BatchPrefillTokens, s.PrefillTok),
		iv(tracevocab.BatchDecodeTokens, s.DecodeTok),
		iv(tracevocab.BatchNumFinished, s.NumFinished),
		iv(tracevocab.BatchNumPreempted, s.NumPreempted),
		dv(tracevocab.KVUsageGPURatio, s.KVUsage),
		iv(tracevocab.KVBlocksTotalGPU, s.KVTotal),
		iv(tracevocab.KVBlocksFreeGPU, s.KVFree))
}

func (w *Writer) snapshots(s *sim.StepSummary, src sim.SnapshotSource) {
	if src == nil {
		return
	}
	w.snaps = src.Snapshots(w.snaps[:0])
	t := w.wallNs(s.StartUs + s.SchedulerUs)
	for i := range w.snaps {
		r := &w.snaps[i]
		e := w.step.add(w.opt.MaxEventsPerSpan, t, tracevocab.StepRequestSnapshot)
		e.Attrs = append(e.Attrs,
			iv(tracevocab.StepID, s.ID),
			sv(tracevocab.SnapshotRequestID, w.engineID(r.Req)),
			sv(tracevocab.SnapshotPhase, phaseName(r.Phase)),
			iv(tracevocab.SnapshotPromptTokens, r.PromptTokens),
			iv(tracevocab.SnapshotComputedTokens, r.ComputedTokens),
			iv(tracevocab.SnapshotOutputTokens, r.OutputTokens),
			iv(tracevocab.SnapshotPreemptions, r.Preemptions),
			iv(tracevocab.SnapshotScheduledTokens, r.ScheduledThisStep),
			iv(tracevocab.SnapshotBlocksAllocated, r.BlocksAllocated),
			iv(tracevocab.SnapshotBlocksCached, r.BlocksCached))
	}
}

// KV implements sim.Observer.
func (w *Writer) KV(ev *sim.KVEvent) {
	if w.kv == nil {
		return
	}
	switch ev.Kind {
	case sim.KVStore:
		w.kv.store(ev.Blocks, ev.Step)
	case sim.KVLoad:
		w.kv.load(w.engineID(ev.Req), ev.Blocks, ev.Step)
	case sim.KVCPUEviction:
		w.kv.cpuEviction(ev.Blocks, ev.Step)
	}
}

// Close ends the open step span, writes every buffered span and KV event,
// and returns the first write error. The Writer must not be used after.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	lastEndUs := w.last.StartUs + w.last.CycleUs
	if w.step != nil {
		w.closeStep(w.last.ID, lastEndUs)
	}
	w.flushLine()
	if w.kv != nil {
		w.setErr(w.kv.close(w.opt.WallBaseNs + lastEndUs*1000))
	}
	return w.err
}
