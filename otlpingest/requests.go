package otlpingest

import (
	"fmt"
	"sort"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// EventTime is one lifecycle event's time: monotonic seconds (both
// processes' monotonic clocks are comparable on one host), monotonic
// nanoseconds where the event carries them, and wall-clock nanoseconds.
type EventTime struct {
	MonoS  Opt[float64]
	MonoNs Opt[int64]
	WallNs Opt[uint64]
}

// RequestRow is one request: its API span joined to its engine span.
type RequestRow struct {
	TraceID         string
	Instance        string // service.instance.id of the engine span, else of the API span ("" when neither has one)
	APISpanID       Opt[string]
	CoreSpanID      Opt[string]
	APIWhere        Opt[Where]
	CoreWhere       Opt[Where]
	APIRequestID    Opt[string]
	EngineRequestID Opt[string]
	Model           Opt[string]
	Route           Opt[string]
	PromptTokens    Opt[int64]
	MaxTokens       Opt[int64]
	N               Opt[int64]
	Temperature     Opt[float64]
	TopP            Opt[float64]

	Arrived, HandoffToCore, FirstResponse, Departed, Aborted EventTime // API events
	Queued, FirstScheduled, FirstToken, Finished             EventTime // journey events

	AbortReason  Opt[string]
	OutputTokens Opt[int64] // decode.done_tokens at FINISHED
	Preemptions  Opt[int64] // num_preemptions at FINISHED, else the PREEMPTED events seen
	FinishStatus Opt[string]
}

type joinKey struct {
	trace TraceID
	span  SpanID // the API span's id
}

type half struct {
	row     RequestRow
	api     bool // which halves are filled
	core    bool
	arrival int64
}

// Joiner pairs llm_request and llm_core spans through traceId and the core
// span's parentSpanId, in whatever order and file they arrive. Memory holds
// only requests whose second half has not arrived yet, plus an 8-byte hash
// per completed request for duplicate detection.
type Joiner struct {
	pending map[joinKey]*half
	done    map[uint64]struct{}
	seq     int64
	Rows    []RequestRow // completed, in completion order
	Issues  []Issue
	attrs   Attrs   // scratch
	free    []*half // completed halves, reused
}

// NewJoiner returns an empty joiner.
func NewJoiner() *Joiner {
	return &Joiner{pending: map[joinKey]*half{}, done: map[uint64]struct{}{}}
}

func keyHash(k joinKey) uint64 {
	return fnv1a(fnv1a(fnvOffset, k.trace[:]), k.span[:])
}

// FNV-1a, 64 bits, without hash.Hash's allocation.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// AddSpan takes llm_request and llm_core spans and ignores the rest. It
// returns false for a span seen before, which is counted and must not be
// turned into rows a second time.
func (j *Joiner) AddSpan(file string, sp *Span) bool {
	w := Where{File: file, Record: sp.Record}
	var k joinKey
	isAPI := sp.Name == SpanRequest
	switch {
	case isAPI:
		k = joinKey{sp.TraceID, sp.SpanID}
	case sp.Name == SpanCore:
		k = joinKey{sp.TraceID, sp.ParentSpanID}
	default:
		return true
	}
	kh := keyHash(k)
	if _, dup := j.done[kh]; dup {
		j.issue(w, IssueDuplicateSpan, fmt.Sprintf("%s span %s of trace %s after its request was complete", sp.Name, sp.SpanID, sp.TraceID))
		return false
	}
	h := j.pending[k]
	if h == nil {
		if n := len(j.free); n > 0 {
			h, j.free = j.free[n-1], j.free[:n-1]
		} else {
			h = new(half)
		}
		*h = half{arrival: j.seq, row: RequestRow{TraceID: sp.TraceID.String()}}
		j.seq++
		j.pending[k] = h
	}
	if (isAPI && h.api) || (!isAPI && h.core) {
		j.issue(w, IssueDuplicateSpan, fmt.Sprintf("%s span %s of trace %s seen twice", sp.Name, sp.SpanID, sp.TraceID))
		return false
	}
	if isAPI {
		h.api = true
		j.fillAPI(&h.row, w, sp)
	} else {
		h.core = true
		fillCore(&h.row, w, sp)
	}
	if h.api && h.core {
		j.Rows = append(j.Rows, h.row)
		delete(j.pending, k)
		j.done[kh] = struct{}{}
		j.free = append(j.free, h)
	}
	return true
}

func (j *Joiner) issue(w Where, kind IssueKind, detail string) {
	j.Issues = append(j.Issues, Issue{Kind: kind, File: w.File, Record: w.Record, Detail: detail})
}

// Finish emits the requests that never found their other half, in the
// order their first half arrived, and counts them.
func (j *Joiner) Finish() {
	left := make([]*half, 0, len(j.pending))
	for _, h := range j.pending {
		left = append(left, h)
	}
	sort.Slice(left, func(a, b int) bool { return left[a].arrival < left[b].arrival })
	for _, h := range left {
		if h.api {
			w := h.row.APIWhere.V
			j.issue(w, IssueOrphanAPISpan, fmt.Sprintf("llm_request %s (%s) of trace %s has no llm_core span", h.row.APISpanID.V, h.row.APIRequestID.V, h.row.TraceID))
		} else {
			w := h.row.CoreWhere.V
			j.issue(w, IssueOrphanCoreSpan, fmt.Sprintf("llm_core %s (%s) of trace %s has no llm_request span", h.row.CoreSpanID.V, h.row.EngineRequestID.V, h.row.TraceID))
		}
		j.Rows = append(j.Rows, h.row)
	}
	j.pending = map[joinKey]*half{}
}

// Pending is the number of requests waiting for their other half.
func (j *Joiner) Pending() int { return len(j.pending) }

func (j *Joiner) fillAPI(r *RequestRow, w Where, sp *Span) {
	a := &j.attrs
	checkAttrsInto(a, RequestSpanAttrs, sp.Attrs, "", "", func(IssueKind, string) {}) // Rows reports the issues
	// An engine span that came first has set its instance, which wins.
	if r.Instance == "" {
		r.Instance = sp.Instance
	}
	r.APISpanID = some(sp.SpanID.String(), true)
	r.APIWhere = some(w, true)
	r.APIRequestID = some(a.Str(tracevocab.RequestID))
	r.Model = some(a.Str(tracevocab.ResponseModel))
	r.Route = some(a.Str(tracevocab.HTTPRoute))
	r.PromptTokens = some(a.Int(tracevocab.UsagePromptTokens))
	r.MaxTokens = some(a.Int(tracevocab.RequestMaxTokens))
	r.N = some(a.Int(tracevocab.RequestN))
	r.Temperature = some(a.Double(tracevocab.RequestTemperature))
	r.TopP = some(a.Double(tracevocab.RequestTopP))
	for i := range sp.Events {
		ev := &sp.Events[i]
		var t *EventTime
		switch ev.Name {
		case tracevocab.APIArrived:
			t = &r.Arrived
		case tracevocab.APIHandoffToCore:
			t = &r.HandoffToCore
		case tracevocab.APIFirstResponseFromCore:
			t = &r.FirstResponse
		case tracevocab.APIDeparted:
			t = &r.Departed
		case tracevocab.APIAborted:
			t = &r.Aborted
			if v, ok := ev.Attr(tracevocab.AbortReason); ok && v.Type == ValString {
				r.AbortReason = some(v.Str, true)
			}
		default:
			continue
		}
		stamp(t, ev, tracevocab.EventTSMonotonic, "")
	}
}

// stamp records an event's times unless an earlier occurrence did: the
// first SCHEDULED is the first schedule, not a RESUME.
func stamp(t *EventTime, ev *Event, monoKey, nsKey string) {
	if t.WallNs.OK {
		return
	}
	t.WallNs = some(ev.TimeUnixNano, true)
	if v, ok := ev.Attr(monoKey); ok && v.Type == ValDouble {
		t.MonoS = some(v.Double, true)
	}
	if v, ok := ev.Attr(nsKey); ok && nsKey != "" && v.Type == ValInt {
		t.MonoNs = some(v.Int, true)
	}
}

func fillCore(r *RequestRow, w Where, sp *Span) {
	if sp.Instance != "" {
		r.Instance = sp.Instance
	}
	r.CoreSpanID = some(sp.SpanID.String(), true)
	r.CoreWhere = some(w, true)
	if v, ok := sp.Attr(tracevocab.RequestID); ok && v.Type == ValString {
		r.EngineRequestID = some(v.Str, true)
	}
	preempted := int64(0)
	for i := range sp.Events {
		ev := &sp.Events[i]
		var t *EventTime
		switch ev.Name {
		case tracevocab.JourneyQueued:
			t = &r.Queued
		case tracevocab.JourneyScheduled:
			t = &r.FirstScheduled
		case tracevocab.JourneyFirstToken:
			t = &r.FirstToken
		case tracevocab.JourneyPreempted:
			preempted++
			continue
		case tracevocab.JourneyFinished:
			t = &r.Finished
			if v, ok := ev.Attr(tracevocab.DecodeDoneTokens); ok && v.Type == ValInt {
				r.OutputTokens = some(v.Int, true)
			}
			if v, ok := ev.Attr(tracevocab.NumPreemptions); ok && v.Type == ValInt {
				r.Preemptions = some(v.Int, true)
			}
			if v, ok := ev.Attr(tracevocab.FinishStatus); ok && v.Type == ValString {
				r.FinishStatus = some(v.Str, true)
			}
		default:
			continue
		}
		stamp(t, ev, tracevocab.TSMonotonic, tracevocab.TSMonotonicNs)
	}
	if !r.Preemptions.OK {
		r.Preemptions = some(preempted, true)
	}
}
