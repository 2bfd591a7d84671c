package sim

import (
	"context"
	"fmt"

	"github.com/blis-sim/blis/steady"
)

// Source yields a closed workload's requests in arrival order, one at a
// time, so that a run holds one request of its workload, not all of them
// (a synthetic workload of 10^13 requests costs what one of 10 does).
type Source interface {
	// Peek is the next request's arrival time, false when none is left.
	Peek() (int64, bool)
	// Next returns that request and moves on; it is called only after
	// Peek returned true.
	Next() RequestSpec
	// Remaining is the number of requests Next has not returned yet.
	Remaining() int64
}

// SliceSource is a Source over reqs, which must be in arrival order with
// increasing ids (New checks them all first with ValidateWorkload; a run
// of NewStream checks each as it comes).
func SliceSource(reqs []RequestSpec) Source { return &sliceSource{reqs: reqs} }

// sliceSource is a Source over a slice.
type sliceSource struct {
	reqs []RequestSpec
	next int
}

func (s *sliceSource) Peek() (int64, bool) {
	if s.next < len(s.reqs) {
		return s.reqs[s.next].ArrivalUs, true
	}
	return 0, false
}

func (s *sliceSource) Next() RequestSpec {
	s.next++
	return s.reqs[s.next-1]
}

func (s *sliceSource) Remaining() int64 { return int64(len(s.reqs) - s.next) }

// Sim runs a closed workload on one Engine: the thin shell around the
// state machine (as etcd-io/raft's Node is around RawNode). Create it with
// New or NewStream, then call Run once.
type Sim struct {
	e   *Engine
	src Source
	// col analyzes the run (Analyze): nil for none.
	col *steady.Collector
}

// Analyze has the run report to c what the output analysis needs (its
// arrivals, departures and completed requests), and stop when c's
// stopping rule says so at one of its checkpoints; Run then adds c's
// report to the result (Result.Stability, Result.SteadyState).
func (s *Sim) Analyze(c *steady.Collector) { s.col = c }

// New prepares a run of reqs (validated with ValidateWorkload) under cfg.
func New(cfg Config, reqs []RequestSpec) (*Sim, error) {
	if err := ValidateWorkload(reqs); err != nil {
		return nil, err
	}
	return NewStream(cfg, &sliceSource{reqs: reqs})
}

// NewStream prepares a run of the requests src yields under cfg. Each is
// validated as it is injected, as ValidateWorkload would: Run fails on the
// first invalid one.
func NewStream(cfg Config, src Source) (*Sim, error) {
	e, err := NewEngine(cfg)
	if err != nil {
		return nil, err
	}
	return &Sim{e: e, src: src}, nil
}

// Engine is the state machine the run drives.
func (s *Sim) Engine() *Engine { return s.e }

// Run simulates until every request has left (or Options.HorizonUs) and
// returns the metrics. Each request is injected at its arrival time, just
// before the engine processes any event at that time, and only the next
// one is ever pending, so the engine's memory follows its concurrency. It
// returns an *InvariantError if an invariant is violated. It is
// RunContext(context.Background()).
func (s *Sim) Run() (*Result, error) { return s.RunContext(context.Background()) }

// ctxCheckEvery is how many instants RunContext processes between two
// looks at its context (a power of two; the look is a mask and a branch).
const ctxCheckEvery = 1024

// RunContext is Run, stopped early when ctx is done. It looks at ctx
// before the first instant and then once every ctxCheckEvery instants (so
// it stops within 1024 instants of the cancellation, and a context done
// before it starts stops it before any event is processed), always
// between two instants, never inside one. A stopped run finishes exactly
// as a run with Options.HorizonUs = Engine().Now() would: the engine is
// finished (Engine.Finish), requests in it are counted as still_* (or, if
// their arrival is not yet processed, as offered but not injected), as are
// requests the source still holds. It returns that result and ctx.Err(),
// both non-nil. Any other error returns a nil result, as Run does. A
// context that is never done (context.Background) costs nothing.
func (s *Sim) RunContext(ctx context.Context) (*Result, error) {
	e := s.e
	horizon := e.cfg.Options.HorizonUs
	done := ctx.Done() // nil for context.Background: never cancelled
	var prevID, prevAt int64
	injected := false
	var stopped error
	col := s.col
	for iter := uint(0); ; iter++ {
		t, ok := e.NextEventUs()
		// A checkpoint of the stopping rule: every event before the next
		// one (the engine's, or an arrival) has been processed and none
		// at or after it, so that a stop here is a horizon at Now.
		if col != nil && col.Due() {
			next, more := s.src.Peek()
			if !more || (ok && t < next) {
				next = t
			}
			if (ok || more) && col.Check(next) {
				break
			}
		}
		// Every request arriving no later than the next event joins first.
		for {
			at, more := s.src.Peek()
			if !more || (ok && at > t) {
				break
			}
			r := s.src.Next()
			if injected && r.ID <= prevID {
				return nil, fmt.Errorf("request %d follows request %d; ids must increase in arrival order", r.ID, prevID)
			}
			if injected && r.ArrivalUs < prevAt {
				return nil, fmt.Errorf("request %d: arrival_us %d is before request %d's %d; sort by arrival", r.ID, r.ArrivalUs, prevID, prevAt)
			}
			if err := e.Inject(r, r.ArrivalUs); err != nil {
				return nil, err
			}
			if col != nil {
				col.Arrive(r.ArrivalUs)
			}
			prevID, prevAt, injected = r.ID, r.ArrivalUs, true
			t, ok = e.NextEventUs()
		}
		if !ok || (horizon > 0 && t > horizon) {
			break
		}
		// Checked where the horizon is, so that a stop is a horizon at Now.
		if done != nil && iter%ctxCheckEvery == 0 {
			if stopped = ctx.Err(); stopped != nil {
				break
			}
		}
		if err := e.Advance(); err != nil {
			return nil, err
		}
		if col != nil {
			for k := range e.done {
				served(col, &e.done[k], e.now)
			}
		}
	}
	res, err := e.Finish()
	if err != nil {
		return nil, err
	}
	if col != nil {
		rep := col.Report(e.now)
		if rep != nil {
			res.Stability, res.SteadyState = rep.Stability, rep.SteadyState
		}
	}
	// Requests never injected were offered but had not arrived; a run
	// sized by its precision offers what arrived (its source is a cap).
	if col == nil || !col.Sized() {
		res.Requests.Offered += s.src.Remaining()
	}
	return res, stopped
}

// served reports a request that left the engine at now to the analysis:
// its departure, and its latencies when it completed.
func served(col *steady.Collector, d *Completion, now int64) {
	col.Depart(d.DepartedUs, -1)
	if d.Dropped || d.TooLong || d.TimedOut || d.Killed || d.HandedOff {
		return
	}
	r := steady.Request{At: now, TTFTUs: d.FirstTokenUs - d.ArrivalUs, E2EUs: d.DepartedUs - d.ArrivalUs,
		SchedUs: d.FirstScheduledUs - d.ArrivalUs, OutputTokens: d.OutputTokens}
	if d.OutputTokens > 1 {
		r.ITLSumUs, r.ITLGaps = d.FinishedUs-d.FirstTokenUs, d.OutputTokens-1
	}
	col.Served(&r)
}
