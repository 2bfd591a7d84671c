package cluster

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/sim"
)

// TTFT regret by counterfactual simulation (docs/anomalies.md, "TTFT
// regret"). Score regret (decisions.go) says how far the chosen instance
// was from the policy's own best score, which is 0 whenever the policy
// picks its best; TTFT regret says what the request would have gained,
// in milliseconds, had it gone elsewhere. For a sampled routing decision
// the cluster clones the chosen instance's engine and those of the top
// K other candidates by the policy's score (sim.Engine.Clone: the
// requests they hold, in transit ones included, their queues, batches
// and KV caches), sends each clone the request, and runs it alone until
// the request's first token. Regret is the chosen clone's TTFT minus the
// best alternative's, never negative. The clones draw nothing from the
// run's random streams and report to no observer of the run, so the main
// run's output is the same with or without them (tested).
//
// Every clone sees the state at the decision and nothing after it: no
// later arrival reaches it and no other decision is taken, for the
// chosen instance as for the alternatives, so the comparison is like with
// like. The chosen clone's TTFT is therefore the request's TTFT on an
// instance that nothing else joins; when nothing does join it before
// that first token, it equals the run's own (tested).

// Counterfactual configures the sampling of routing decisions for TTFT
// regret: every EveryN-th decision (decisions EveryN, 2·EveryN, …) or,
// with EveryN 0, each decision with probability Rate drawn from RNG.
type Counterfactual struct {
	EveryN int64
	Rate   float64
	RNG    *rand.Rand // for Rate; the stream "counterfactual"
	// K is the number of alternatives simulated beside the chosen
	// instance (0: Config.CounterfactualK).
	K int
	// MaxSteps bounds the engine steps one clone may run before its
	// request's first token (0: DefaultCounterfactualMaxSteps); a clone
	// that reaches it is censored.
	MaxSteps int64
	// Worst is how many decisions the result lists (0: 5).
	Worst int
}

// Label is the sampling as ParseSample reads it ("every:100", "0.01").
func (s *Counterfactual) Label() string {
	if s.EveryN > 0 {
		return fmt.Sprintf("every:%d", s.EveryN)
	}
	return strconv.FormatFloat(s.Rate, 'g', -1, 64)
}

// DefaultCounterfactualMaxSteps is a clone's step budget: 20,000 engine
// steps is minutes of simulated time for the shipped models (a decode
// step takes 5–50 ms), far beyond any TTFT a policy should be ranked on,
// and bounds one sampled decision's cost to ~0.1 s of CPU on an
// overloaded instance.
const DefaultCounterfactualMaxSteps = 20_000

// CounterfactualResult is the report's counterfactual section.
type CounterfactualResult struct {
	Sample string `json:"sample"`
	K      int    `json:"k"`
	// Decisions is every routing decision of the run, Sampled those
	// simulated, Resolved those whose chosen instance and at least one
	// alternative reached the first token (the others: a clone censored
	// at MaxSteps, the request unservable there, or no alternative).
	Decisions int64 `json:"decisions"`
	Sampled   int64 `json:"sampled"`
	Resolved  int64 `json:"resolved"`
	// Improvable counts the resolved decisions with positive regret.
	Improvable int64 `json:"improvable"`
	// The distributions are over the resolved decisions.
	Regret     sim.Distribution `json:"ttft_regret_ms"`
	ChosenTTFT sim.Distribution `json:"chosen_ttft_ms"`
	BestTTFT   sim.Distribution `json:"best_alternative_ttft_ms"`
	// CloneSteps counts the engine steps the clones ran, a measure of
	// the cost.
	CloneSteps int64 `json:"clone_steps"`
	MaxSteps   int64 `json:"max_steps"`
	// Worst are the resolved decisions of largest regret, largest first
	// (earliest first among equals).
	Worst []CounterfactualDecision `json:"worst"`
}

// CounterfactualDecision is one sampled decision: the chosen instance and
// the best alternative, each with its simulated TTFT and the load the
// decision saw (queue depth, in-flight requests, KV utilization).
type CounterfactualDecision struct {
	AtUs         int64   `json:"t_us"`
	Request      int64   `json:"request"`
	Chosen       string  `json:"chosen"`
	ChosenTTFTMs float64 `json:"chosen_ttft_ms"`
	Best         string  `json:"best_alternative"`
	BestTTFTMs   float64 `json:"best_alternative_ttft_ms"`
	RegretMs     float64 `json:"ttft_regret_ms"`
	ChosenLoad   Load    `json:"chosen_load"`
	BestLoad     Load    `json:"best_alternative_load"`
}

// Load is an instance's signals as a routing decision saw them.
type Load struct {
	QueueDepth    int64   `json:"queue_depth"`
	InFlight      int64   `json:"in_flight"`
	KVUtilization float64 `json:"kv_utilization"`
}

type counterfactuals struct {
	cfg                    Counterfactual
	k                      int
	decisions, sampled     int64
	resolved, improvable   int64
	steps                  int64
	regret, chosenH, bestH sim.Histogram
	worst                  []CounterfactualDecision
	scores                 []float64
	order                  []int
	outcome                []cfOutcome
	watch                  firstTokenWatch
	// spare is the last clone, whose memory the next one reuses
	// (sim.Engine.CloneInto).
	spare *sim.Engine
}

type cfOutcome struct {
	inst     int
	ttft     int64
	resolved bool
	censored bool
}

func newCounterfactuals(c *Sim) *counterfactuals {
	cf := &counterfactuals{cfg: *c.cfg.Counterfactual}
	if cf.k = cf.cfg.K; cf.k == 0 {
		cf.k = c.cfg.CounterfactualK
	}
	if cf.cfg.MaxSteps == 0 {
		cf.cfg.MaxSteps = DefaultCounterfactualMaxSteps
	}
	if cf.cfg.Worst == 0 {
		cf.cfg.Worst = 5
	}
	return cf
}

func (s *Counterfactual) validate() error {
	switch {
	case s.EveryN < 0:
		return fmt.Errorf("counterfactual: every must be >= 1, got %d", s.EveryN)
	case s.EveryN == 0 && !(s.Rate > 0 && s.Rate <= 1):
		return fmt.Errorf("counterfactual: rate must be in (0, 1], got %v", s.Rate)
	case s.EveryN == 0 && s.RNG == nil:
		return fmt.Errorf("counterfactual: a rate needs a random stream")
	case s.K < 0 || s.MaxSteps < 0 || s.Worst < 0:
		return fmt.Errorf("counterfactual: k, max steps and worst must be >= 0")
	}
	return nil
}

// sample says whether the decision just made is simulated.
func (cf *counterfactuals) sample() bool {
	cf.decisions++
	if cf.cfg.EveryN > 0 {
		return cf.decisions%cf.cfg.EveryN == 0
	}
	return cf.cfg.RNG.Float64() < cf.cfg.Rate
}

// decide simulates a sampled decision: the request on the chosen instance
// i and on the top K others by the policy's score, each from a clone of
// the instance's engine as it is now. The view and the router's request
// (c.view, c.req) are the decision's.
func (cf *counterfactuals) decide(c *Sim, i int, spec *sim.RequestSpec) {
	if !cf.sample() {
		return
	}
	cf.sampled++
	n := c.view.Len()
	if cap(cf.scores) < n {
		cf.scores, cf.order = make([]float64, n), make([]int, n)
	}
	scores, order := cf.scores[:n], cf.order[:0]
	c.router.Score(&c.req, &c.view, scores)
	for _, j32 := range c.view.Indexes() {
		if j := int(j32); j != i && c.view.OK(j) {
			order = append(order, j)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(scores[b], scores[a]), cmp.Compare(a, b))
	})
	order = order[:min(cf.k, len(order))]
	cf.outcome = cf.outcome[:0]
	cf.outcome = append(cf.outcome, cf.simulate(c, i, spec))
	for _, j := range order {
		cf.outcome = append(cf.outcome, cf.simulate(c, j, spec))
	}
	chosen := cf.outcome[0]
	best := -1
	for k := 1; k < len(cf.outcome); k++ {
		if o := cf.outcome[k]; o.resolved && (best < 0 || o.ttft < cf.outcome[best].ttft) {
			best = k
		}
	}
	var d *CounterfactualDecision
	if chosen.resolved && best > 0 {
		b := cf.outcome[best]
		regret := max(0, chosen.ttft-b.ttft)
		cf.resolved++
		if regret > 0 {
			cf.improvable++
		}
		cf.regret.Add(regret)
		cf.chosenH.Add(chosen.ttft)
		cf.bestH.Add(b.ttft)
		d = &CounterfactualDecision{AtUs: c.now, Request: spec.ID, Chosen: c.ids[i], ChosenTTFTMs: msOf(chosen.ttft), Best: c.ids[b.inst],
			BestTTFTMs: msOf(b.ttft), RegretMs: msOf(regret), ChosenLoad: loadOf(&c.view, i), BestLoad: loadOf(&c.view, b.inst)}
		cf.keep(*d)
	}
	if c.dec != nil {
		cf.record(c, spec, d)
	}
}

func msOf(us int64) float64 { return float64(us) / 1e3 }

func loadOf(v *route.View, i int) Load {
	return Load{QueueDepth: v.QueueDepth[i], InFlight: v.InFlight[i], KVUtilization: v.KVUtilization[i]}
}

// keep adds d to the worst decisions if it is among them.
func (cf *counterfactuals) keep(d CounterfactualDecision) {
	less := func(a, b *CounterfactualDecision) bool { // a is worse than b
		if a.RegretMs != b.RegretMs {
			return a.RegretMs > b.RegretMs
		}
		return a.AtUs < b.AtUs || (a.AtUs == b.AtUs && a.Request < b.Request)
	}
	w := cf.worst
	if len(w) == cf.cfg.Worst && !less(&d, &w[len(w)-1]) {
		return
	}
	k := len(w)
	for k > 0 && less(&d, &w[k-1]) {
		k--
	}
	w = slices.Insert(w, k, d)
	if len(w) > cf.cfg.Worst {
		w = w[:cf.cfg.Worst]
	}
	cf.worst = w
}

// simulate clones instance j's engine, sends it the request as the run
// would have (after the routing latency) and runs the clone until the
// request's first token, the request's refusal, or MaxSteps steps.
func (cf *counterfactuals) simulate(c *Sim, j int, spec *sim.RequestSpec) cfOutcome {
	out := cfOutcome{inst: j}
	w := &cf.watch
	*w = firstTokenWatch{id: spec.ID}
	e, err := c.eng[j].CloneInto(cf.spare, w)
	cf.spare = nil
	if err != nil {
		c.err = fmt.Errorf("counterfactual of request %d on instance %s: %w", spec.ID, c.ids[j], err)
		return out
	}
	if err := e.Inject(*spec, c.now+c.cfg.RoutingLatencyUs); err != nil {
		c.err = fmt.Errorf("counterfactual of request %d on instance %s: %w", spec.ID, c.ids[j], err)
		return out
	}
	for !w.first && !w.gone {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		if w.steps >= cf.cfg.MaxSteps {
			out.censored = true
			break
		}
		if err := e.Advance(); err != nil {
			c.err = fmt.Errorf("counterfactual of request %d on instance %s: %w", spec.ID, c.ids[j], err)
			return out
		}
		if dt, ok := e.PlannedStepUs(); ok {
			// A data-parallel member steps alone here: the other
			// members are not cloned (docs/anomalies.md).
			if err := e.CommitStep(e.Now(), dt); err != nil {
				c.err = fmt.Errorf("counterfactual of request %d on instance %s: %w", spec.ID, c.ids[j], err)
				return out
			}
		}
	}
	cf.steps += w.steps
	cf.spare = e
	if w.first {
		out.resolved = true
		out.ttft = w.at + e.OutputDelayUs() - spec.ArrivalUs
	}
	return out
}

// record writes the decision's counterfactual record to the decision
// trace, after its routing record:
//
//	{"t_us":..,"type":"counterfactual","request":..,"tenant":..,"policy":..,"chosen":"instance_1",
//	 "chosen_ttft_ms":412.3,"best_alternative":"instance_2","best_alternative_ttft_ms":130.9,
//	 "ttft_regret_ms":281.4,"candidates":[{"instance":"instance_1","ttft_ms":412.3},
//	 {"instance":"instance_2","ttft_ms":130.9},{"instance":"instance_0","ttft_ms":null,"censored":true}]}
//
// The candidates are the chosen instance, then the alternatives by the
// policy's score; ttft_ms is null for a clone that never produced the
// first token (censored at the step budget, or the request unservable
// there). The chosen and best fields are absent when the decision is not
// resolved.
func (cf *counterfactuals) record(c *Sim, spec *sim.RequestSpec, d *CounterfactualDecision) {
	b := appendHead(c.dec.buf[:0], c.now, "counterfactual", spec, c.router.Name())
	if d != nil {
		b = append(b, `,"chosen":`...)
		b = strconv.AppendQuote(b, d.Chosen)
		b = appendFloat(b, "chosen_ttft_ms", d.ChosenTTFTMs)
		b = append(b, `,"best_alternative":`...)
		b = strconv.AppendQuote(b, d.Best)
		b = appendFloat(b, "best_alternative_ttft_ms", d.BestTTFTMs)
		b = appendFloat(b, "ttft_regret_ms", d.RegretMs)
	}
	b = append(b, `,"candidates":[`...)
	for k, o := range cf.outcome {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"instance":`...)
		b = strconv.AppendQuote(b, c.ids[o.inst])
		if o.resolved {
			b = appendFloat(b, "ttft_ms", msOf(o.ttft))
		} else {
			b = append(b, `,"ttft_ms":null`...)
		}
		if o.censored {
			b = append(b, `,"censored":true`...)
		}
		b = append(b, '}')
	}
	c.dec.buf = append(b, "]}"...)
	c.dec.write()
}

// result is the report's section.
func (cf *counterfactuals) result() *CounterfactualResult {
	r := &CounterfactualResult{Sample: cf.cfg.Label(), K: cf.k, Decisions: cf.decisions, Sampled: cf.sampled, Resolved: cf.resolved,
		Improvable: cf.improvable, Regret: cf.regret.Summarize(), ChosenTTFT: cf.chosenH.Summarize(), BestTTFT: cf.bestH.Summarize(),
		CloneSteps: cf.steps, MaxSteps: cf.cfg.MaxSteps, Worst: cf.worst}
	if r.Worst == nil {
		r.Worst = []CounterfactualDecision{}
	}
	return r
}

// firstTokenWatch is a clone's observer: it waits for request id's first
// token, or its refusal, and counts the clone's steps.
type firstTokenWatch struct {
	id          int64
	first, gone bool
	at          int64
	steps       int64
}

func (w *firstTokenWatch) Arrived(*sim.RequestSpec) {}
func (w *firstTokenWatch) Journey(ev *sim.JourneyEvent) {
	if ev.Req == w.id && ev.Kind == sim.JourneyFirstToken {
		w.first, w.at = true, ev.AtUs
	}
}
func (w *firstTokenWatch) Departed(int64, int64) {}
func (w *firstTokenWatch) Dropped(req, _ int64, _ string) {
	if req == w.id {
		w.gone = true
	}
}
func (w *firstTokenWatch) Aborted(int64, int64)                      {}
func (w *firstTokenWatch) Step(*sim.StepSummary, sim.SnapshotSource) { w.steps++ }
func (w *firstTokenWatch) KV(*sim.KVEvent)                           {}

// ParseSample reads a counterfactual sampling: "every:N" (every N-th
// routing decision, N >= 1), a rate in (0, 1] (each decision with that
// probability), or "0" or "" (none: ok false). Surrounding spaces are
// ignored.
func ParseSample(s string) (c Counterfactual, ok bool, err error) {
	t := strings.TrimSpace(s)
	if t == "" || t == "0" {
		return c, false, nil
	}
	if n, isEvery := strings.CutPrefix(t, "every:"); isEvery {
		v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err != nil || v < 1 {
			return c, false, fmt.Errorf("%q: every:N needs a whole number N >= 1 of decisions", clip.String(s))
		}
		c.EveryN = v
		return c, true, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0 && v <= 1) {
		return c, false, fmt.Errorf("%q is neither a rate in (0, 1] nor every:N (every N-th decision)", clip.String(s))
	}
	c.Rate = v
	return c, true, nil
}
