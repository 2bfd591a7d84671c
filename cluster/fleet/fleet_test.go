package fleet

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/sim"
)

const sec = 1_000_000 // µs

// script is a policy that recommends the sizes it is given, one per
// evaluation (the last one after that), and records what it was told.
type script struct {
	sizes   []int
	k       int
	applied []string
}

func (s *script) Name() string { return "script" }
func (s *script) Evaluate(sig *autoscale.Signals) autoscale.Decision {
	d := s.sizes[min(s.k, len(s.sizes)-1)]
	s.k++
	return autoscale.Decision{Desired: d, Reason: fmt.Sprintf("script %d", d)}
}
func (s *script) Applied(now int64, from, to int) {
	s.applied = append(s.applied, fmt.Sprintf("%d: %d->%d", now/sec, from, to))
}

// host drives a core as the cluster would, with instances that hold
// requests only as the test says, and logs every action in a line.
type host struct {
	t    *testing.T
	f    *Core
	now  int64
	busy map[int]int // requests an instance holds
	log  []string
}

func newHost(t *testing.T, cfg Config, initial []int) *host {
	f, err := New(cfg, initial)
	require.NoError(t, err)
	return &host{t: t, f: f, busy: map[int]int{}}
}

func (h *host) apply(acts []Action) {
	for _, a := range acts {
		at := fmt.Sprintf("%g s", float64(h.now)/sec)
		switch a.Kind {
		case ActStart:
			h.log = append(h.log, fmt.Sprintf("%s start %d (pool %d)", at, a.Inst, a.Pool))
		case ActReady:
			h.log = append(h.log, fmt.Sprintf("%s ready %d", at, a.Inst))
		case ActRoute:
			h.log = append(h.log, fmt.Sprintf("%s route request %d", at, a.Spec.ID))
		case ActTimedOut:
			h.log = append(h.log, fmt.Sprintf("%s timed out request %d", at, a.Spec.ID))
		case ActDrain:
			h.log = append(h.log, fmt.Sprintf("%s drain %d (%s)", at, a.Inst, a.Drain))
			if a.Drain == DrainImmediate {
				h.busy[a.Inst] = 0
			}
			if h.busy[a.Inst] == 0 {
				h.apply(h.f.Idle(a.Inst, h.now))
			}
		case ActKill:
			h.log = append(h.log, fmt.Sprintf("%s kill %d", at, a.Inst))
			h.busy[a.Inst] = 0
			h.apply(h.f.Idle(a.Inst, h.now))
		case ActTerminated:
			h.log = append(h.log, fmt.Sprintf("%s terminated %d", at, a.Inst))
		case ActEvaluate:
			s := h.f.Signals(a.Pool, h.now)
			acts, rec, err := h.f.Evaluate(a.Pool, &s, h.now)
			require.NoError(h.t, err)
			h.apply(acts)
			if rec != nil {
				h.log = append(h.log, fmt.Sprintf("%s scale %d->%d", at, rec.From, rec.To))
			}
		}
	}
}

// until processes every event at or before t.
func (h *host) until(t int64) {
	for {
		at, ok := h.f.Next()
		if !ok || at > t {
			h.now = max(h.now, t)
			return
		}
		require.GreaterOrEqual(h.t, at, h.now, "the clock goes back")
		h.now = at
		acts, _ := h.f.Pop(at)
		h.apply(acts)
	}
}

func pool(pol autoscale.Policy) Pool {
	return Pool{Name: "p", Min: 0, Max: 4, Policy: pol, IntervalUs: 10 * sec, GPUsPerReplica: 1, GPUsPerNode: 2,
		ProvisionMinUs: 30 * sec, ProvisionMaxUs: 30 * sec, NodeIdleUs: 60 * sec, ImagePullUs: 5 * sec, LoadUs: 20 * sec, WarmUs: 10 * sec,
		DrainTimeoutUs: 15 * sec, PricePerGPUHour: 3.6}
}

// TestLifecycle: a pool of one instance on a 2-GPU node, scaled to 3 at
// 10 s and back to 1 at 100 s. The second instance takes the free GPU of
// the initial node (which has the image): loading at once, 20 s, warming
// 10 s, ready at 40 s. The third needs a new node (30 s), then pulls the
// image (5 s), loads (20 s) and warms (10 s): ready at 75 s. At 100 s the
// newest ready instances drain (wait, holding a request: killed at the
// 15 s timeout, then terminated); the new node empties at 115 s and is
// released 60 s later, billed from 10 s to 175 s.
func TestLifecycle(t *testing.T) {
	pol := &script{sizes: []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 1}}
	h := newHost(t, Config{Pools: []Pool{pool(pol)}, RNG: sim.NewRNG(1)}, []int{0})
	h.busy[2] = 1
	h.until(200 * sec)
	require.Equal(t, []string{
		"10 s start 1 (pool 0)",
		"10 s start 2 (pool 0)",
		"10 s scale 1->3",
		"40 s ready 1",
		"75 s ready 2",
		"100 s drain 2 (wait)",
		"100 s drain 1 (wait)",
		"100 s terminated 1",
		"100 s scale 3->1",
		"115 s kill 2",
		"115 s terminated 2",
	}, h.log)
	require.Equal(t, []string{"10: 1->3", "100: 3->1"}, pol.applied)
	res := h.f.Result(200*sec, Outcome{})
	p := res.Pools[0]
	require.Equal(t, 2, p.Nodes)
	require.Equal(t, int64(2), p.Created)
	require.Equal(t, int64(2), p.Terminated)
	require.Equal(t, 3, p.PeakReplicas)
	require.Equal(t, map[string]float64{"pending": 30, "loading": 20 + 25, "warming": 20, "ready": 200 + 60 + 25, "draining": 15}, p.ReplicaSeconds)
	// Two GPUs from 0 to 200 s, two from 10 s to 175 s.
	require.InDelta(t, (2*200.0+2*165)/3600, res.GPUHours, 1e-12)
	require.InDelta(t, 3.6*res.GPUHours, res.Cost, 1e-12)
	ready, starting, draining := h.f.Sample()
	require.Equal(t, [3]int64{1, 0, 0}, [3]int64{ready, starting, draining})
}

// TestScaleDownTakesStartingInstancesFirst: a scale-down removes the
// instances not yet ready first (terminated at once), the newest first,
// before any ready one.
func TestScaleDownTakesStartingInstancesFirst(t *testing.T) {
	pol := &script{sizes: []int{4, 2}}
	h := newHost(t, Config{Pools: []Pool{pool(pol)}, RNG: sim.NewRNG(1)}, []int{0, 0})
	h.until(20 * sec)
	require.Equal(t, []string{
		"10 s start 2 (pool 0)", "10 s start 3 (pool 0)", "10 s scale 2->4",
		"20 s terminated 3", "20 s terminated 2", "20 s scale 4->2",
	}, h.log)
	require.Equal(t, int64(2), h.f.byState[StateReady])
	require.Equal(t, int64(2), h.f.byState[StateTerminated])
}

// TestHeldRequests: with no instance at all (scaled to zero), held
// requests make the pool evaluate at once (once for the three) and grow to
// one, on a node ready at once: the image (5 s), the weights (20 s) and the
// warm-up (10 s) make it ready at 36 s. The requests wait until then, in
// order, but request 2, whose own timeout (5 s) comes before the wait's
// (40 s), gives up.
func TestHeldRequests(t *testing.T) {
	pol := &script{sizes: []int{0, 1}}
	p := pool(pol)
	p.ProvisionMinUs, p.ProvisionMaxUs = 0, 0
	h := newHost(t, Config{Pools: []Pool{p}, RNG: sim.NewRNG(1), WaitTimeoutUs: 40 * sec}, nil)
	require.False(t, h.f.AnyReady())
	h.until(1 * sec)
	for id := int64(1); id <= 3; id++ {
		spec := sim.RequestSpec{ID: id, ArrivalUs: h.now, PromptTokens: 10, OutputTokens: 1}
		if id == 2 {
			spec.TimeoutUs = 5 * sec
		}
		h.f.Hold(&spec, h.now)
	}
	require.Equal(t, int64(3), h.f.Waiting())
	h.until(100 * sec)
	require.Equal(t, []string{
		"1 s start 0 (pool 0)", "1 s scale 0->1",
		"6 s timed out request 2",
		"36 s ready 0", "36 s route request 1", "36 s route request 3",
	}, h.log)
	require.Zero(t, h.f.Waiting())
	res := h.f.Result(100*sec, Outcome{})
	require.Equal(t, int64(3), res.WaitedForCapacity)
	require.Equal(t, int64(1), res.TimedOutWaiting)
}

// TestBounds: a scale-up stops at the last node MaxNodes allows, and one
// past MaxInstances is an error naming the pool.
func TestBounds(t *testing.T) {
	p := pool(&script{sizes: []int{4}})
	p.MaxNodes = 1
	h := newHost(t, Config{Pools: []Pool{p}, RNG: sim.NewRNG(1)}, []int{0})
	h.until(10 * sec)
	require.Equal(t, []string{"10 s start 1 (pool 0)", "10 s scale 1->2"}, h.log, "the one node holds two")

	f, err := New(Config{Pools: []Pool{pool(&script{sizes: []int{4}})}, RNG: sim.NewRNG(1), MaxInstances: 2}, []int{0})
	require.NoError(t, err)
	_, _ = f.Pop(10 * sec)
	s := f.Signals(0, 10*sec)
	_, _, err = f.Evaluate(0, &s, 10*sec)
	require.ErrorContains(t, err, "pool p: the autoscaler created more than 2 instances in all")

	_, err = New(Config{Pools: []Pool{{Name: "p", Max: 2, GPUsPerReplica: 1, GPUsPerNode: 1, MaxNodes: 1}}}, []int{0, 0})
	require.ErrorContains(t, err, "finds no GPU")
}

// TestConfigErrors: New refuses what it cannot run, naming the pool.
func TestConfigErrors(t *testing.T) {
	ok := Pool{Name: "p", Max: 2, GPUsPerReplica: 1, GPUsPerNode: 1}
	for _, c := range []struct {
		edit func(*Pool)
		want string
	}{
		{func(p *Pool) { p.GPUsPerNode = 0 }, "1 GPUs per replica on nodes of 0"},
		{func(p *Pool) { p.Min = 3 }, "bounds [3, 2]"},
		{func(p *Pool) { p.Policy = &script{sizes: []int{1}} }, "evaluation interval 0"},
		{func(p *Pool) { p.LoadUs = -1 }, "negative or inverted"},
		{func(p *Pool) { p.PricePerGPUHour = -1 }, "price -1"},
	} {
		p := ok
		c.edit(&p)
		_, err := New(Config{Pools: []Pool{p}}, nil)
		require.ErrorContains(t, err, c.want)
		require.True(t, strings.HasPrefix(err.Error(), "scaling: pool p"), err.Error())
	}
	_, err := New(Config{Pools: []Pool{ok, ok}}, nil)
	require.ErrorContains(t, err, `pool "p" listed twice`)
	_, err = New(Config{Pools: []Pool{ok}}, []int{0, 0, 0})
	require.ErrorContains(t, err, "starts with 3 instances, outside [0, 2]")
}

// TestOscillationsCounted: a scale action reversing the previous one's
// direction within the window is an oscillation.
func TestOscillationsCounted(t *testing.T) {
	p := pool(&script{sizes: []int{2, 1, 2, 1}})
	p.Min = 1
	h := newHost(t, Config{Pools: []Pool{p}, RNG: sim.NewRNG(1), OscillationWindowUs: 15 * sec}, []int{0})
	h.until(40 * sec)
	r := h.f.Result(40*sec, Outcome{}).Pools[0]
	require.Equal(t, int64(2), r.ScaleUps)
	require.Equal(t, int64(2), r.ScaleDowns)
	require.Equal(t, int64(3), r.Oscillations, "each reversal 10 s after the last")
}

// TestMeanNeverAbovePeak: an oscillator between 1 and 2 replicas that
// keeps acting for 600 s after the run's last activity at 0.5 s (requests
// held past it) is accounted to its last change, not to 0.5 s: the mean
// lies between the bounds, never above the peak (summing 600 s of
// replica-time over a 0.5 s span reported a mean of about 540 replicas).
func TestMeanNeverAbovePeak(t *testing.T) {
	p := pool(&autoscale.Oscillator{Step: 1})
	p.Min, p.Max, p.IntervalUs = 1, 2, sec
	p.ProvisionMinUs, p.ProvisionMaxUs, p.ImagePullUs, p.LoadUs, p.WarmUs, p.DrainTimeoutUs = 0, 0, 0, 0, 0, 0
	h := newHost(t, Config{Pools: []Pool{p}, RNG: sim.NewRNG(1)}, []int{0})
	h.until(600 * sec)
	r := h.f.Result(sec/2, Outcome{}).Pools[0]
	require.Equal(t, 2, r.PeakReplicas)
	require.GreaterOrEqual(t, r.MeanReplicas, 1.0)
	require.LessOrEqual(t, r.MeanReplicas, 2.0)
	var states float64
	for _, s := range r.ReplicaSeconds {
		states += s
	}
	require.InDelta(t, 600*r.MeanReplicas, states, 1e-6, "the span is the fleet's last change, at 600 s")
}
