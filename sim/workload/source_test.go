package workload

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func mustSpec(t testing.TB, body string) *WorkloadSpec {
	t.Helper()
	s, err := ParseSpec([]byte(body), "test.yaml")
	require.NoError(t, err)
	return s
}

// doneHeap orders mock completions by time, then id.
type doneHeap [][2]int64

func (h doneHeap) Len() int { return len(h) }
func (h doneHeap) Less(i, j int) bool {
	return h[i][0] < h[j][0] || h[i][0] == h[j][0] && h[i][1] < h[j][1]
}
func (h doneHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *doneHeap) Push(x any)   { *h = append(*h, x.([2]int64)) }
func (h *doneHeap) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}

// serve drives a source as the cluster does, with a mock service that
// completes each request latency(req) after it is sent: at each instant,
// completions first, then arrivals. It returns the requests in send order
// and calls inSystem after every change with the number of requests sent
// and not yet done.
func serve(t testing.TB, src *Source, latency func(*sim.RequestSpec) int64, inSystem func(int)) []sim.RequestSpec {
	var out []sim.RequestSpec
	var done doneHeap
	for {
		at, ok := src.Peek()
		if len(done) > 0 && (!ok || done[0][0] <= at) {
			d := heap.Pop(&done).([2]int64)
			src.RequestDone(d[1], d[0], sim.Completed)
			if inSystem != nil {
				inSystem(len(done))
			}
			continue
		}
		if !ok {
			return out
		}
		r := src.Next()
		require.Equal(t, at, r.ArrivalUs)
		require.NoError(t, r.Validate())
		if n := len(out); n > 0 {
			require.GreaterOrEqual(t, r.ArrivalUs, out[n-1].ArrivalUs, "arrivals never go back")
			require.Equal(t, out[n-1].ID+1, r.ID)
		}
		out = append(out, r)
		heap.Push(&done, [2]int64{r.ArrivalUs + latency(&r), r.ID})
		if inSystem != nil {
			inSystem(len(done))
		}
	}
}

func constLatency(us int64) func(*sim.RequestSpec) int64 {
	return func(*sim.RequestSpec) int64 { return us }
}

// chiSquareCritical is the upper 0.001 quantile of chi-square with k
// degrees of freedom (Wilson–Hilferty).
func chiSquareCritical(k float64) float64 {
	const z = 3.0902 // standard normal 0.999 quantile
	return k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
}

// chiSquare of observed window counts against expected ones.
func chiSquare(obs []int, exp []float64) float64 {
	var x float64
	for i := range obs {
		d := float64(obs[i]) - exp[i]
		x += d * d / exp[i]
	}
	return x
}

// A diurnal profile's windowed arrival counts follow the sinusoid: a
// chi-square test against the integral of the rate over each window
// passes, and the same counts fail it against a flat rate (so the test can
// fail).
func TestDiurnalFollowsTheSinusoid(t *testing.T) {
	const rate, periodS, ratio, windows = 40.0, 100.0, 5.0, 200
	s := mustSpec(t, fmt.Sprintf(`version: 1
duration_s: 1000
rate: %g
arrival: {process: diurnal, period_s: 8640, peak_to_trough: %g, time_compression: 86.4}
tenants: [{id: a}]
`, rate, ratio))
	reqs := serve(t, NewSource(s, sim.NewRNG(7)), constLatency(1000), nil)
	w := 1000.0 / windows
	obs := make([]int, windows)
	for _, r := range reqs {
		obs[int(float64(r.ArrivalUs)/1e6/w)]++
	}
	amp := (ratio - 1) / (ratio + 1)
	exp, flat := make([]float64, windows), make([]float64, windows)
	for i := range exp {
		a, b := float64(i)*w, float64(i+1)*w
		// ∫ rate·(1 + amp·sin(2πt/P)) dt over [a, b].
		exp[i] = rate * ((b - a) + amp*periodS/(2*math.Pi)*(math.Cos(2*math.Pi*a/periodS)-math.Cos(2*math.Pi*b/periodS)))
		flat[i] = float64(len(reqs)) / windows
	}
	crit := chiSquareCritical(windows)
	require.Less(t, chiSquare(obs, exp), crit, "counts follow the sinusoid")
	require.Greater(t, chiSquare(obs, flat), 10*crit, "and are far from flat")
}

// A load profile's segments get their rates: each segment's arrival count
// is within 3 sigma of the rate's integral over it, gaps included.
func TestLoadProfileSegmentRates(t *testing.T) {
	s := mustSpec(t, `version: 1
duration_s: 400
rate: 50
load_profile:
  - {type: constant, start_s: 0, end_s: 100, multiplier: 1}
  - {type: step, start_s: 100, end_s: 150, multiplier: 3}
  - {type: ramp, start_s: 150, end_s: 250, from: 0.5, to: 2.5}
  - {type: spike, start_s: 260, end_s: 265, multiplier: 10}
  - {type: step, start_s: 300, end_s: 350, multiplier: 0}
tenants: [{id: a}]
`)
	reqs := serve(t, NewSource(s, sim.NewRNG(3)), constLatency(1000), nil)
	pieces := []struct {
		a, b, expected float64
	}{
		{0, 100, 50 * 100},
		{100, 150, 150 * 50},
		{150, 250, 50 * 1.5 * 100}, // the ramp's mean multiplier
		{250, 260, 50 * 10},        // a gap: multiplier 1
		{260, 265, 500 * 5},
		{265, 300, 50 * 35},
		{300, 350, 0},
		{350, 400, 50 * 50},
	}
	for _, p := range pieces {
		n := 0
		for _, r := range reqs {
			if at := float64(r.ArrivalUs) / 1e6; at >= p.a && at < p.b {
				n++
			}
		}
		require.InDelta(t, p.expected, float64(n), 3*math.Sqrt(max(p.expected, 1)), "[%g, %g) s", p.a, p.b)
	}
	// Within the ramp, the second half gets more than the first:
	// multipliers 1 and 2 on average.
	var first, second int
	for _, r := range reqs {
		switch at := float64(r.ArrivalUs) / 1e6; {
		case at >= 150 && at < 200:
			first++
		case at >= 200 && at < 250:
			second++
		}
	}
	require.InDelta(t, 50*50*1.0, float64(first), 3*math.Sqrt(2500))
	require.InDelta(t, 50*50*2.0, float64(second), 3*math.Sqrt(5000))
}

// The bursty process multiplies the rate by 10 during each spike.
func TestBurstyProcessSpikes(t *testing.T) {
	s := mustSpec(t, `version: 1
duration_s: 600
rate: 20
arrival: {process: bursty, burst_interval_s: 60, burst_duration_s: 6, burst_multiplier: 10}
tenants: [{id: a}]
`)
	reqs := serve(t, NewSource(s, sim.NewRNG(5)), constLatency(1000), nil)
	var in, out int
	for _, r := range reqs {
		if math.Mod(float64(r.ArrivalUs)/1e6, 60) < 6 {
			in++
		} else {
			out++
		}
	}
	require.InDelta(t, 200.0*6*10, float64(in), 3*math.Sqrt(12000))
	require.InDelta(t, 20.0*54*10, float64(out), 3*math.Sqrt(10800))
}

// streamHash hashes one tenant's first-turn arrivals and lengths.
func streamHash(reqs []sim.RequestSpec, tenant int32) uint64 {
	h := fnv.New64a()
	for _, r := range reqs {
		if r.Tenant == tenant {
			fmt.Fprintf(h, "%d %d %d %d %d;", r.ArrivalUs, r.PromptTokens, r.OutputTokens, r.PrefixTokens, r.Priority)
		}
	}
	return h.Sum64()
}

// Adding a tenant never changes another tenant's open-loop arrivals, and
// neither does the service (a different policy or cluster): each tenant
// draws from its own named streams.
func TestTenantStreamsAreIndependent(t *testing.T) {
	two := `version: 1
duration_s: 120
rate: 20
tenants:
  - {id: alpha, weight: 1, prefix: {groups: 4}}
  - {id: beta, weight: 1, slo_class: batch}
`
	three := `version: 1
duration_s: 120
rate: 30
tenants:
  - {id: alpha, weight: 1, prefix: {groups: 4}}
  - {id: gamma, weight: 1, request_types: [{type: reasoning}]}
  - {id: beta, weight: 1, slo_class: batch}
`
	a := serve(t, NewSource(mustSpec(t, two), sim.NewRNG(11)), constLatency(5000), nil)
	b := serve(t, NewSource(mustSpec(t, three), sim.NewRNG(11)), constLatency(90000), nil)
	require.Equal(t, streamHash(a, 0), streamHash(b, 0), "alpha unchanged")
	require.Equal(t, streamHash(a, 1), streamHash(b, 2), "beta unchanged")
	require.NotEqual(t, streamHash(a, 0), streamHash(a, 1))
	c := serve(t, NewSource(mustSpec(t, two), sim.NewRNG(12)), constLatency(5000), nil)
	require.NotEqual(t, streamHash(a, 0), streamHash(c, 0), "another seed, another stream")
}

// Turn k+1 re-sends turn k's prompt and output plus new text, in the same
// session, a think time after turn k completed; a bounded context
// truncates and starts the session's content anew.
func TestSessionTurns(t *testing.T) {
	s := mustSpec(t, `version: 1
duration_s: 5
rate: 1
tenants:
  - id: a
    prompt_tokens: "100"
    output_tokens: "50"
    request_types:
      - {type: chat, turns: "4", new_tokens: "10", think_time_ms: "250", context: bounded, max_context_tokens: 300}
`)
	const lat = 40_000
	reqs := serve(t, NewSource(s, sim.NewRNG(1)), constLatency(lat), nil)
	bySession := map[int64][]sim.RequestSpec{}
	var order []int64
	for _, r := range reqs {
		if len(bySession[r.Session]) == 0 {
			order = append(order, r.Session)
		}
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	require.NotEmpty(t, order)
	// 100 → 160 → 220, then 280+50 > 300: truncated to 250 in a new session.
	first := bySession[order[0]]
	require.Len(t, first, 3)
	for k, want := range []int64{100, 160, 220} {
		require.Equal(t, want, first[k].PromptTokens)
		require.Equal(t, int64(50), first[k].OutputTokens)
		if k > 0 {
			require.Equal(t, first[k-1].ArrivalUs+lat+250_000, first[k].ArrivalUs, "think time after completion")
		}
	}
	fourth := bySession[order[1]]
	require.Equal(t, int64(250), fourth[0].PromptTokens)
	require.Equal(t, first[2].ArrivalUs+lat+250_000, fourth[0].ArrivalUs)
	// The turns' block hashes chain: turn 2's leading blocks are turn 1's.
	h1 := sim.AppendBlockHashes(nil, &first[0], 16, (100+50)/16)
	h2 := sim.AppendBlockHashes(nil, &first[1], 16, 160/16)
	require.Equal(t, h1, h2[:len(h1)])
}

// A closed loop of C clients never has more than C requests in the
// system, and sends again only after completions.
func TestClosedLoopBound(t *testing.T) {
	s := mustSpec(t, `version: 1
duration_s: 200
tenants:
  - id: agents
    closed_loop: {clients: 5, think_time_ms: "exponential:mean=300"}
    request_types:
      - {type: agentic, calls: "uniform:1,4", tool_latency_ms: "const:50"}
`)
	peak := 0
	reqs := serve(t, NewSource(s, sim.NewRNG(9)), func(r *sim.RequestSpec) int64 { return 100_000 + r.OutputTokens*1000 }, func(n int) { peak = max(peak, n) })
	require.Equal(t, 5, peak, "five clients, five requests at most, and the bound is reached")
	require.Greater(t, len(reqs), 100)
}

// A bursty tenant's arrivals bring bursts; an abusive one sends longer
// prompts, faster.
func TestBehaviours(t *testing.T) {
	bursty := mustSpec(t, `version: 1
requests: 40
rate: 0.1
tenants:
  - id: a
    behavior: bursty
    burst: {probability: 1, size: "4", interval_ms: "10"}
`)
	reqs := serve(t, NewSource(bursty, sim.NewRNG(2)), constLatency(1), nil)
	require.Len(t, reqs, 40)
	for i := 0; i < 40; i += 4 {
		for k := 1; k < 4; k++ {
			require.Equal(t, reqs[i].ArrivalUs+int64(k)*10_000, reqs[i+k].ArrivalUs)
		}
	}
	normal := mustSpec(t, "version: 1\nduration_s: 100\nrate: 5\ntenants:\n  - {id: a, prompt_tokens: \"100\"}\n")
	abusive := mustSpec(t, "version: 1\nduration_s: 100\nrate: 5\ntenants:\n  - {id: a, prompt_tokens: \"100\", behavior: abusive, abusive: {prompt_multiplier: 8, rate_multiplier: 10}}\n")
	n := serve(t, NewSource(normal, sim.NewRNG(2)), constLatency(1), nil)
	a := serve(t, NewSource(abusive, sim.NewRNG(2)), constLatency(1), nil)
	require.Equal(t, int64(800), a[0].PromptTokens)
	require.InDelta(t, 10*float64(len(n)), float64(len(a)), 3*math.Sqrt(5000))
}

// Prefix groups: reuse probability and Zipf popularity.
func TestSpecPrefixGroups(t *testing.T) {
	s := mustSpec(t, `version: 1
requests: 20000
rate: 100
tenants:
  - {id: a, prefix: {groups: 3, tokens: "64"}}
  - {id: b, prompt_tokens: "10", prefix: {groups: 8, tokens: "128", reuse_probability: 0.25, popularity: "zipf:1.5"}}
`)
	reqs := serve(t, NewSource(s, sim.NewRNG(4)), constLatency(1), nil)
	counts := map[int32]int{}
	var bTotal, bMember int
	for _, r := range reqs {
		if r.Tenant == 0 {
			require.True(t, r.PrefixGroup >= 1 && r.PrefixGroup <= 3, "tenant a reuses always")
			require.Equal(t, int64(64), r.PrefixTokens)
			continue
		}
		bTotal++
		if r.PrefixGroup > 0 {
			bMember++
			require.True(t, r.PrefixGroup >= 4 && r.PrefixGroup <= 11, "tenant b's groups follow a's")
			require.Equal(t, int64(138), r.PromptTokens, "the prefix comes on top of the request's own tokens")
			counts[r.PrefixGroup]++
		}
	}
	require.InDelta(t, 0.25, float64(bMember)/float64(bTotal), 3*math.Sqrt(0.25*0.75/float64(bTotal)))
	require.Greater(t, counts[4], 2*counts[5], "zipf: the first group is the most popular")
	require.Greater(t, counts[5], counts[11])
}

// The request cap ends the workload exactly; timeouts and classes reach
// the requests.
func TestRequestCapAndFields(t *testing.T) {
	s := mustSpec(t, "version: 1\nrequests: 123\nrate: 50\ntenants:\n  - {id: a, slo_class: realtime, priority: 7, timeout_s: 2.5}\n  - {id: b, weight: 2}\n")
	src := NewSource(s, sim.NewRNG(1))
	reqs := serve(t, src, constLatency(1), nil)
	require.Len(t, reqs, 123)
	for _, r := range reqs {
		if r.Tenant == 0 {
			require.Equal(t, sim.SLORealtime, r.SLOClass)
			require.Equal(t, int32(7), r.Priority)
			require.Equal(t, int64(2_500_000), r.TimeoutUs)
		} else {
			require.Equal(t, sim.SLOInteractive, r.SLOClass)
			require.Zero(t, r.TimeoutUs)
		}
	}
	st := src.Stats()
	require.Equal(t, int64(123), st[0].Requests+st[1].Requests)
	require.InDelta(t, 2.0, float64(st[1].Requests)/float64(st[0].Requests), 0.8)
}

// A turn that fails ends its conversation, counted as abandoned.
func TestFailedTurnAbandonsTheConversation(t *testing.T) {
	s := mustSpec(t, "version: 1\nrequests: 1000\nrate: 1\ntenants:\n  - {id: a, request_types: [{type: chat, turns: \"5\"}]}\n")
	src := NewSource(s, sim.NewRNG(1))
	r := src.Next()
	src.RequestDone(r.ID, r.ArrivalUs+10, sim.TimedOut)
	next := src.Next()
	require.NotEqual(t, r.Session, next.Session, "the next request starts another session")
	require.Equal(t, int64(1), src.Stats()[0].Abandoned)
}

// Generating a million requests from a spec streams them: run with
// go test ./sim/workload -run '^$' -bench Source -benchmem.
func BenchmarkSource(b *testing.B) {
	s := mustSpec(b, `version: 1
requests: 1000000
rate: 1000
arrival: {process: diurnal, period_s: 600, peak_to_trough: 4}
tenants:
  - {id: chat, weight: 2, prefix: {groups: 16, popularity: "zipf:1.1"}, request_types: [{type: chat}, {type: completion, weight: 3}]}
  - {id: batch, weight: 1, slo_class: batch, behavior: bursty}
  - {id: agents, closed_loop: {clients: 64}, request_types: [{type: agentic}]}
`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		src := NewSource(s, sim.NewRNG(int64(i)))
		// Every request completes 2 s after it is sent, so completions
		// come in send order: a FIFO holds the requests in flight.
		done := make([][2]int64, 0, 1<<16)
		head, n := 0, 0
		for {
			at, ok := src.Peek()
			if head < len(done) && (!ok || done[head][0] <= at) {
				src.RequestDone(done[head][1], done[head][0], sim.Completed)
				if head++; head > 1<<15 {
					done = done[:copy(done, done[head:])]
					head = 0
				}
				continue
			}
			if !ok {
				break
			}
			r := src.Next()
			n++
			done = append(done, [2]int64{r.ArrivalUs + 2_000_000, r.ID})
		}
		if n != 1_000_000 {
			b.Fatalf("%d requests", n)
		}
	}
}

// OpenLoop is true exactly for the specs whose RequestDone sends nothing:
// for those, the requests sent are the same whether or not the source is
// told of departures, and when (a cluster's parallel windows tell it
// late); a closed loop or a conversation is refused.
func TestOpenLoop(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		open       bool
	}{
		{"completion", `version: 1
duration_s: 30
rate: 40
tenants:
  - {id: a, prompt_tokens: "lognormal:mean=300,cv=0.5", output_tokens: "const:20", timeout_s: 5}
  - {id: b, weight: 2, arrival: {process: diurnal, period_s: 20}, prefix: {groups: 3, tokens: "const:64"}}
`, true},
		{"reasoning", `version: 1
duration_s: 30
rate: 40
tenants:
  - id: r
    request_types: [{type: reasoning}]
`, true},
		{"chat", `version: 1
duration_s: 30
rate: 40
tenants:
  - id: a
  - id: c
    request_types: [{type: completion, weight: 9}, {type: chat, turns: "const:1"}]
`, false},
		{"closed loop", `version: 1
duration_s: 30
tenants:
  - id: agents
    closed_loop: {clients: 3, think_time_ms: "const:10"}
`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, tc.body)
			require.Equal(t, tc.open, NewSource(s, sim.NewRNG(5)).OpenLoop())
			if !tc.open {
				return
			}
			told := serve(t, NewSource(s, sim.NewRNG(5)), func(r *sim.RequestSpec) int64 { return 1 + r.OutputTokens*997 }, nil)
			var untold []sim.RequestSpec
			for src := NewSource(s, sim.NewRNG(5)); ; {
				if _, ok := src.Peek(); !ok {
					break
				}
				untold = append(untold, src.Next())
			}
			require.Greater(t, len(told), 100)
			require.Equal(t, untold, told)
		})
	}
}
