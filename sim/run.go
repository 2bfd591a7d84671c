package sim

// Sim runs a closed workload, known up front, on one Engine: the thin
// shell around the state machine (as etcd-io/raft's Node is around
// RawNode). Create it with New, then call Run once.
type Sim struct {
	e    *Engine
	reqs []RequestSpec
}

// New prepares a run of reqs (validated with ValidateWorkload) under cfg.
func New(cfg Config, reqs []RequestSpec) (*Sim, error) {
	if err := ValidateWorkload(reqs); err != nil {
		return nil, err
	}
	e, err := NewEngine(cfg)
	if err != nil {
		return nil, err
	}
	return &Sim{e: e, reqs: reqs}, nil
}

// Engine is the state machine the run drives.
func (s *Sim) Engine() *Engine { return s.e }

// Run simulates until every request has left (or Options.HorizonUs) and
// returns the metrics. Each request is injected at its arrival time, just
// before the engine processes any event at that time, and only the next
// one is ever pending, so the engine's memory follows its concurrency. It
// returns an *InvariantError if an invariant is violated.
func (s *Sim) Run() (*Result, error) {
	e := s.e
	horizon := e.cfg.Options.HorizonUs
	next := 0
	for {
		t, ok := e.NextEventUs()
		// Every request arriving no later than the next event joins first.
		for next < len(s.reqs) && (!ok || s.reqs[next].ArrivalUs <= t) {
			if err := e.Inject(s.reqs[next], s.reqs[next].ArrivalUs); err != nil {
				return nil, err
			}
			next++
			t, ok = e.NextEventUs()
		}
		if !ok || (horizon > 0 && t > horizon) {
			break
		}
		if err := e.Advance(); err != nil {
			return nil, err
		}
	}
	res, err := e.Finish()
	if err != nil {
		return nil, err
	}
	// Requests never injected were offered but had not arrived.
	res.Requests.Offered += int64(len(s.reqs) - next)
	return res, nil
}
