package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/sim"
)

// Source streams a WorkloadSpec's requests in arrival order while the
// simulation runs: it is the cluster's request source (Peek, Next) and
// observes how each request ends (RequestDone), because the next turn of
// a conversation and the next request of a closed-loop client are sent a
// think time after the previous one completes in the simulation. Nothing
// is precomputed: memory follows the conversations in flight.
//
// Randomness. Each tenant draws from its own streams, named after its id
// ("workload/tenant/<id>/arrivals", ".../conversations", ".../bursts",
// ".../prefix", ".../clients"), so adding a tenant or changing a policy
// never changes another tenant's open-loop arrival times. Every
// conversation draws its type, lengths and think times from its own
// generator, seeded from its tenant's conversation stream in order of
// conversation start, so the order in which requests complete never
// changes what a conversation contains.
//
// Request ids are 0, 1, ... in the order requests are sent. Requests at
// the same time are sent by tenant index, then in the order they were
// scheduled.
type Source struct {
	spec    *WorkloadSpec
	tenants []tenantState
	pend    pendHeap
	seq     uint64
	nextID  int64
	session int64
	horizon float64 // seconds; +Inf without duration_s
	limit   int64
	sent    int64
	waiting map[int64]*conv // requests whose end the source must see
	free    []*conv
	stats   []TenantStats
	err     error // a time beyond the simulator's clock (Err)
	arr     Arrivals
	prog    *Progress
}

// Arrivals is what Next has sent so far.
func (s *Source) Arrivals() Arrivals { return s.arr }

// Watch reports every request Next sends to p.
func (s *Source) Watch(p *Progress) { s.prog = p }

// TenantStats is what a tenant's clients did.
type TenantStats struct {
	Tenant        string `json:"tenant"`
	Conversations int64  `json:"conversations"`
	Requests      int64  `json:"requests"`
	// Unsent are turns (or closed-loop conversations) that were due at or
	// after the end of the workload (duration_s or the request cap) and
	// were not sent; Abandoned are conversations cut short because a turn
	// was rejected, dropped or timed out.
	Unsent    int64 `json:"unsent"`
	Abandoned int64 `json:"abandoned"`
}

type tenantState struct {
	t        *Tenant
	arr      *arrivals
	conv     *rand.Rand // conversation seeds, open loop
	burst    *rand.Rand
	clients  []*rand.Rand // closed loop: per client
	group0   int32        // this tenant's first prefix group id
	groupTok []int64
	zipfCum  []float64
}

type pendKind uint8

const (
	pendArrival pendKind = iota // an open-loop conversation start; draws the next
	pendBurst                   // a burst's extra conversation start
	pendTurn                    // a conversation's next turn
	pendClient                  // a closed-loop client starts a conversation
)

type pending struct {
	at     int64
	tenant int32
	kind   pendKind
	client int32
	seq    uint64
	c      *conv
}

// pendHeap is a binary min-heap of pending sends by (at, tenant, seq),
// typed so that pushing allocates nothing once it has grown.
type pendHeap []pending

func (h pendHeap) less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tenant != b.tenant {
		return a.tenant < b.tenant
	}
	return a.seq < b.seq
}

func (h *pendHeap) push(p pending) {
	*h = append(*h, p)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *pendHeap) pop() pending {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < n && q.less(l, small) {
			small = l
		}
		if r := l + 1; r < n && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}

// conv is a conversation in progress: one request for a completion, the
// turns of a chat, the calls of an agent.
type conv struct {
	pcg     rand.PCG
	r       *rand.Rand
	tenant  int32
	client  int32 // -1: open loop
	typ     *RequestType
	turn    int64 // turns sent
	turns   int64
	group   int32
	prefix  int64
	session int64
	prompt  int64 // the last turn's prompt and output
	output  int64
}

// NewSource starts the spec's workload under the run's seed.
func NewSource(spec *WorkloadSpec, rng sim.RNG) *Source {
	s := &Source{spec: spec, horizon: math.Inf(1), limit: spec.Requests, waiting: map[int64]*conv{}}
	if spec.DurationUs > 0 {
		s.horizon = float64(spec.DurationUs) / 1e6
	}
	var group int32 = 1
	for i := range spec.Tenants {
		t := &spec.Tenants[i]
		name := "workload/tenant/" + t.ID
		ts := tenantState{t: t, conv: rng.Stream(name + "/conversations"), burst: rng.Stream(name + "/bursts"), group0: group}
		if t.Prefix.Groups > 0 {
			pr := rng.Stream(name + "/prefix")
			ts.groupTok = make([]int64, t.Prefix.Groups)
			for g := range ts.groupTok {
				ts.groupTok[g] = t.Prefix.Tokens.Sample(pr)
			}
			if t.Prefix.zipfS > 0 {
				ts.zipfCum = make([]float64, t.Prefix.Groups)
				var c float64
				for g := range ts.zipfCum {
					c += math.Pow(float64(g+1), -t.Prefix.zipfS)
					ts.zipfCum[g] = c
				}
				for g := range ts.zipfCum {
					ts.zipfCum[g] /= c
				}
			}
			group += int32(t.Prefix.Groups)
		}
		s.stats = append(s.stats, TenantStats{Tenant: t.ID})
		if t.Clients > 0 {
			cr := rng.Stream(name + "/clients")
			for c := 0; c < t.Clients; c++ {
				r := rand.New(rand.NewPCG(cr.Uint64(), cr.Uint64()))
				ts.clients = append(ts.clients, r)
				// Clients start staggered, each one think time in.
				s.push(pending{at: msToUs(t.ThinkMs.Sample(r)), tenant: int32(i), kind: pendClient, client: int32(c)})
			}
		} else {
			rate := spec.Rate * t.Weight / spec.totalWeight * max(t.Abuse.RateMultiplier, 1)
			ts.arr = newArrivals(t.Arrival, rate, spec.Profile, rng.Stream(name+"/arrivals"))
			if at, ok := ts.arr.next(s.horizon); ok {
				s.push(pending{at: secToUs(at), tenant: int32(i), kind: pendArrival})
			}
		}
		s.tenants = append(s.tenants, ts)
	}
	return s
}

func msToUs(ms int64) int64 { return ms * 1000 }

func secToUs(s float64) int64 { return units.SecondsToUs(s) }

func (s *Source) push(p pending) {
	if p.at > sim.MaxTimeUs || p.at < 0 {
		// Beyond the simulator's clock: the stream ends here, and Err
		// names the key whose times put it there.
		if s.err == nil {
			s.err = fmt.Errorf("%s: %s: the times it draws put a request at %d µs, beyond the simulator's %d µs (2^61, about 73,000 years); give shorter times",
				s.spec.Source, s.timeKey(p), p.at, sim.MaxTimeUs)
		}
		s.pend = s.pend[:0]
		return
	}
	p.seq = s.seq
	s.seq++
	s.pend.push(p)
}

// due reports whether a pending send still happens: before the end of the
// workload and within the request cap.
func (s *Source) due(p *pending) bool {
	return (s.spec.DurationUs == 0 || p.at < s.spec.DurationUs) && (s.limit == 0 || s.sent < s.limit)
}

// Peek is the next request's send time, or false when none is scheduled
// for now (a completion may schedule more).
func (s *Source) Peek() (int64, bool) {
	for len(s.pend) > 0 {
		if p := &s.pend[0]; s.due(p) {
			return p.at, true
		}
		p := s.pend.pop()
		s.drop(&p)
	}
	return 0, false
}

// drop discards a pending send that falls after the end of the workload.
func (s *Source) drop(p *pending) {
	st := &s.stats[p.tenant]
	switch p.kind {
	case pendTurn:
		st.Unsent++
		s.release(p.c)
	case pendClient:
		st.Unsent++
	}
}

// Next sends the request Peek announced; it panics if there is none, as
// that is the caller's error.
func (s *Source) Next() sim.RequestSpec {
	if _, ok := s.Peek(); !ok {
		panic("workload: Next without a request (check Peek)")
	}
	p := s.pend.pop()
	ts := &s.tenants[p.tenant]
	c := p.c
	switch p.kind {
	case pendArrival:
		// The tenant's next arrival, then possibly a burst.
		if at, ok := ts.arr.next(s.horizon); ok {
			s.push(pending{at: secToUs(at), tenant: p.tenant, kind: pendArrival})
		}
		if t := ts.t; t.Behavior == BehaviorBursty && ts.burst.Float64() < t.Burst.Prob {
			at := p.at
			for n := t.Burst.Size.Sample(ts.burst) - 1; n > 0; n-- {
				at += msToUs(t.Burst.IntervalMs.Sample(ts.burst))
				s.push(pending{at: at, tenant: p.tenant, kind: pendBurst})
			}
		}
		c = s.start(p.tenant, -1, ts.conv.Uint64())
	case pendBurst:
		c = s.start(p.tenant, -1, ts.conv.Uint64())
	case pendClient:
		c = s.start(p.tenant, p.client, ts.clients[p.client].Uint64())
	}
	s.arr.add(p.at)
	s.prog.add(s.arr)
	return s.send(c, p.at)
}

// start begins a conversation from its seed.
func (s *Source) start(tenant, client int32, seed uint64) *conv {
	var c *conv
	if n := len(s.free); n > 0 {
		c, s.free = s.free[n-1], s.free[:n-1]
	} else {
		c = &conv{}
		c.r = rand.New(&c.pcg)
	}
	ts := &s.tenants[tenant]
	t := ts.t
	c.pcg.Seed(seed, 0x6a09e667f3bcc909)
	r := c.r
	*c = conv{pcg: c.pcg, r: r, tenant: tenant, client: client}
	u := r.Float64()
	i, _ := slices.BinarySearch(t.typeCum, u)
	if i < len(t.typeCum) && t.typeCum[i] == u {
		i++ // [cum[i-1], cum[i]) belongs to type i
	}
	c.typ = &t.Types[min(i, len(t.Types)-1)]
	c.turns = c.typ.Turns.Sample(r)
	member, which := r.Float64(), r.Float64()
	if t.Prefix.Groups > 0 && member < t.Prefix.Reuse {
		g := int(which * float64(t.Prefix.Groups))
		if ts.zipfCum != nil {
			g, _ = slices.BinarySearch(ts.zipfCum, which)
		}
		g = min(g, t.Prefix.Groups-1)
		c.group, c.prefix = ts.group0+int32(g), ts.groupTok[g]
	}
	if c.typ.multiTurn {
		s.session++
		c.session = s.session
	}
	s.stats[tenant].Conversations++
	return c
}

// send builds the conversation's next turn, sent at at.
func (s *Source) send(c *conv, at int64) sim.RequestSpec {
	t := s.tenants[c.tenant].t
	rt := c.typ
	r := c.r
	out := rt.Output.Sample(r)
	if rt.Type == TypeReasoning {
		out += rt.Reasoning.Sample(r)
	}
	var prompt int64
	if c.turn == 0 {
		own := rt.Prompt.Sample(r)
		if t.Abuse.PromptMultiplier > 1 {
			own = int64(math.Min(float64(own)*t.Abuse.PromptMultiplier, maxTokens))
		}
		prompt = c.prefix + own
	} else {
		// The whole history is re-sent, then the new text.
		prompt = c.prompt + c.output + rt.NewTokens.Sample(r)
		if rt.Context == "bounded" && prompt+out > rt.MaxContext {
			// The client drops the oldest turns but keeps the system
			// prompt: what follows it no longer matches the cached
			// history, so the session's content starts anew.
			prompt = max(rt.MaxContext-out, c.prefix+1)
			s.session++
			c.session = s.session
		}
	}
	// Lengths saturate at the most a request may have (sim.MaxTokens): a
	// reasoning turn adds two samples, and a history grows turn by turn.
	prompt, out = min(prompt, maxTokens), min(out, maxTokens)
	c.prompt, c.output = prompt, out
	c.turn++
	req := sim.RequestSpec{
		ID: s.nextID, ArrivalUs: at, PromptTokens: prompt, OutputTokens: out,
		Priority: t.Priority, Tenant: c.tenant, SLOClass: t.SLOClass, Session: c.session,
		TimeoutUs: t.TimeoutUs,
	}
	if c.group > 0 {
		req.PrefixGroup, req.PrefixTokens = c.group, c.prefix
	}
	s.nextID++
	s.sent++
	s.stats[c.tenant].Requests++
	if c.turn < c.turns || c.client >= 0 {
		s.waiting[req.ID] = c
	} else {
		s.release(c)
	}
	return req
}

func (s *Source) release(c *conv) { s.free = append(s.free, c) }

// RequestDone tells the source how request id ended, at atUs: a
// conversation's next turn is sent a think time after a completion; a
// closed-loop client starts its next conversation a think time after its
// conversation ends. A rejected, dropped or timed-out turn ends its
// conversation (the client gives up on it).
func (s *Source) RequestDone(id int64, atUs int64, out sim.Outcome) {
	c, ok := s.waiting[id]
	if !ok {
		return
	}
	delete(s.waiting, id)
	if c.turn < c.turns {
		if out == sim.Completed {
			s.push(pending{at: atUs + msToUs(c.typ.ThinkMs.Sample(c.r)), tenant: c.tenant, kind: pendTurn, c: c})
			return
		}
		s.stats[c.tenant].Abandoned++
	}
	if c.client >= 0 {
		ts := &s.tenants[c.tenant]
		s.push(pending{at: atUs + msToUs(ts.t.ThinkMs.Sample(ts.clients[c.client])), tenant: c.tenant, kind: pendClient, client: c.client})
	}
	s.release(c)
}

// OpenLoop reports whether RequestDone never sends a request: no tenant
// has closed-loop clients and no request type continues a conversation
// (chat and agentic types may, whatever their turns). A simulator may
// then run past departures without telling the source at once (the
// cluster's parallel windows).
func (s *Source) OpenLoop() bool {
	for i := range s.tenants {
		if len(s.tenants[i].clients) > 0 {
			return false
		}
		for j := range s.tenants[i].t.Types {
			if s.tenants[i].t.Types[j].multiTurn {
				return false
			}
		}
	}
	return true
}

// Err is why the stream ended early: a time beyond the simulator's clock,
// naming the spec and key (nil otherwise).
func (s *Source) Err() error { return s.err }

// timeKey is the spec key whose times scheduled p.
func (s *Source) timeKey(p pending) string {
	t := fmt.Sprintf("tenants[%d]", p.tenant)
	switch p.kind {
	case pendClient:
		return t + ".closed_loop.think_time_ms"
	case pendTurn:
		types := s.tenants[p.tenant].t.Types
		for i := range types {
			if &types[i] == p.c.typ {
				return fmt.Sprintf("%s.request_types[%d].think_time_ms", t, i)
			}
		}
		return t + ".request_types[*].think_time_ms"
	case pendBurst:
		return t + ".burst.interval_ms"
	}
	return "rate, arrival and load_profile of " + t
}

// Stats is what each tenant sent, in spec order.
func (s *Source) Stats() []TenantStats { return slices.Clone(s.stats) }

// Sent is the number of requests sent so far.
func (s *Source) Sent() int64 { return s.sent }

// String describes the spec in one line.
func (s *WorkloadSpec) String() string {
	lim := ""
	if s.DurationUs > 0 {
		lim = fmt.Sprintf(" for %g s", float64(s.DurationUs)/1e6)
	}
	if s.Requests > 0 {
		lim += fmt.Sprintf(", at most %d requests", s.Requests)
	}
	return fmt.Sprintf("spec %s: %d tenants, %g conversations/s (%s)%s", s.Source, len(s.Tenants), s.Rate, s.Arrival.Process, lim)
}

// Scaled is s with its open-loop rate multiplied by scale (> 0), every
// tenant's share with it; s itself is left as it is. Closed-loop clients,
// think times and bursts are not rates and do not change.
func (s *WorkloadSpec) Scaled(scale float64) *WorkloadSpec {
	if scale == 1 {
		return s
	}
	c := *s
	c.Rate *= scale
	return &c
}
