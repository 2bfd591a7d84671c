package cluster

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

const sec = 1_000_000 // µs

// scaleEngine is an instance of the scaling tests: a constant 1 ms step,
// 8 running requests at most.
func scaleEngine() sim.Config {
	return sim.Config{
		Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 2048, ChunkedPrefillEnabled: true,
			BlockSizeTokens: 16, TotalKVBlocksGPU: 4000, PrefixCachingEnabled: true}},
		Latency: constLatency{step: 1000, arrive: 100, depart: 50},
	}
}

// steady is n requests at a constant rate (µs between arrivals) from t0,
// each 64 prompt and 20 output tokens.
func steady(t0, gap int64, n int, firstID int64) []sim.RequestSpec {
	reqs := make([]sim.RequestSpec, n)
	for k := range reqs {
		reqs[k] = sim.RequestSpec{ID: firstID + int64(k), ArrivalUs: t0 + int64(k)*gap, PromptTokens: 64, OutputTokens: 20}
	}
	return reqs
}

type scaleRig struct {
	cfg Config
	res *Result
	dec bytes.Buffer
}

// newScaleRig is a cluster of initial instances of pool "p" with the
// given scaling, recording every request.
func newScaleRig(initial int, ps PoolScaling) *scaleRig {
	r := &scaleRig{}
	for i := 0; i < initial; i++ {
		r.cfg.Instances = append(r.cfg.Instances, Instance{ID: ScaledInstanceID(i), Pool: "p", Config: scaleEngine()})
	}
	ps.Name = "p"
	if ps.GPUsPerReplica == 0 {
		ps.GPUsPerReplica, ps.GPUsPerNode = 1, 1
	}
	r.cfg.Scaling = &Scaling{Pools: []PoolScaling{ps}, RNG: sim.NewRNG(7),
		NewInstance: func(pool, index int) (sim.Config, error) { return scaleEngine(), nil }}
	r.cfg.RecordRequests = true
	r.cfg.RouterBlockSize = 16
	r.cfg.Decisions = &r.dec
	r.cfg.CounterfactualK = 1
	r.cfg.WindowUs = 15 * sec
	return r
}

func (r *scaleRig) run(t *testing.T, reqs []sim.RequestSpec) *Result {
	t.Helper()
	c, err := New(r.cfg, NewSliceSource(reqs))
	require.NoError(t, err)
	r.res, err = c.Run()
	require.NoError(t, err)
	return r.res
}

// readyAt is when instance id first took a request (its first routing
// decision), from the per-request records.
func firstRouted(res *Result, id string) int64 {
	first := int64(-1)
	for _, q := range res.PerRequest {
		if q.Instance == id && (first < 0 || q.ArrivalUs < first) {
			first = q.ArrivalUs
		}
	}
	return first
}

// TestScaleUpAfterSustainedQueue is the design's case (docs/autoscaling.md): 2 replicas whose
// queue stays over the threshold for 60 s scale up; the new replica is
// provisioned (30 s), loads (20 s) and warms up (10 s) before it takes a
// request; the queue, which grew until then, shrinks after.
func TestScaleUpAfterSustainedQueue(t *testing.T) {
	r := newScaleRig(2, PoolScaling{Min: 1, Max: 4, IntervalUs: 15 * sec,
		Policy:         autoscale.NewThreshold("queue-depth", autoscale.ThresholdConfig{Metric: autoscale.MetricQueueDepth, Up: 5, Down: 0.5, Step: 1, SustainUs: 60 * sec, CooldownUs: 300 * sec}),
		ProvisionMinUs: 30 * sec, ProvisionMaxUs: 30 * sec, LoadUs: 20 * sec, WarmUs: 10 * sec, NodeIdleUs: 600 * sec, PricePerGPUHour: 2})
	// Each instance serves 8 requests per 21 steps of 1 ms (~380/s); 900
	// per second overload two and not three.
	res := r.run(t, steady(0, 1111, 300*900, 0))
	f := res.Fleet
	require.NotNil(t, f)
	require.Len(t, f.Records, 1, "one scale-up, then the cooldown outlasts the run's need")
	rec := f.Records[0]
	// The queue is over 5 from the first evaluation (15 s) on: sustained
	// for 60 s at 75 s.
	require.Equal(t, int64(75*sec), rec.AtUs)
	require.Equal(t, 2, rec.From)
	require.Equal(t, 3, rec.To)
	require.Greater(t, rec.QueueDepth, 5.0)
	// Provisioned 30 s, loaded 20 s, warmed 10 s: first routed at 135 s.
	first := firstRouted(res, ScaledInstanceID(2))
	require.GreaterOrEqual(t, first, int64(135*sec))
	require.Less(t, first, int64(135*sec+3*1111), "one of the first arrivals once it is ready (round-robin)")
	require.Equal(t, roundMap(map[string]float64{"pending": 30, "loading": 20, "warming": 10, "ready": 2*res.DurationS + (res.DurationS - 135)}),
		roundMap(f.Pools[0].ReplicaSeconds))
	// The queue grows until the third replica is ready, and falls after.
	var before, after int64
	for _, w := range res.Windows {
		if w.EndUs == 135*sec {
			before = w.QueueDepth
		}
		if w.EndUs == 240*sec {
			after = w.QueueDepth
		}
	}
	require.Greater(t, before, after*4, "queue at 135 s %d, at 240 s %d", before, after)
	require.Equal(t, int64(1), f.Pools[0].Created)
	require.Equal(t, 3, f.Pools[0].PeakReplicas)
	require.Equal(t, 3, f.Pools[0].Nodes)
	// Billing: two nodes from 0 and one from 75 s, 2 per GPU-hour.
	wantHours := (2*res.DurationS + (res.DurationS - 75)) / 3600
	require.InDelta(t, wantHours, f.GPUHours, 1e-6)
	require.InDelta(t, 2*wantHours, f.Cost, 1e-6)
	require.Contains(t, r.dec.String(), `"type":"scale","pool":"p","policy":"queue-depth","from":2,"to":3`)
}

func roundMap(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = float64(int64(v*1e6+0.5)) / 1e6
	}
	return out
}

// TestDrainPolicies: a scale-down drains the newest ready instance; wait
// lets its requests finish, immediate kills them, redirect hands those
// that have not started to another instance. Every request ends once,
// and the counts add up (Finish checks CL-1).
func TestDrainPolicies(t *testing.T) {
	for _, tc := range []struct {
		drain            Drain
		killed, redirect bool
	}{{DrainWait, false, false}, {DrainImmediate, true, false}, {DrainRedirect, false, true}} {
		t.Run(tc.drain.String(), func(t *testing.T) {
			// Two instances; at 1 s the oscillator removes one (it starts by
			// adding, capped at max 2: no change, then removes).
			r := newScaleRig(2, PoolScaling{Min: 1, Max: 2, IntervalUs: 500_000, Policy: &autoscale.Oscillator{Step: 1}, Drain: tc.drain,
				NodeIdleUs: sec})
			// A burst that queues on both at 0.9 s.
			res := r.run(t, steady(900_000, 1, 200, 0))
			q := res.Requests
			require.Equal(t, q.Arrived, q.Completed+q.Killed, "every request completed or killed")
			require.Equal(t, tc.killed, q.Killed > 0, "killed %d", q.Killed)
			require.Equal(t, tc.redirect, q.Redirected > 0, "redirected %d", q.Redirected)
			require.Equal(t, q.Killed, res.Fleet.Killed)
			require.Equal(t, q.Redirected, res.Fleet.Redirected)
			require.Positive(t, res.Fleet.Pools[0].Terminated)
			// No request reached the drained instance after the drain.
			drainAt := res.Fleet.Records[0].AtUs
			gone := ScaledInstanceID(1)
			for _, rec := range res.PerRequest {
				if rec.Instance == gone && rec.Outcome == "completed" && tc.drain == DrainRedirect {
					require.LessOrEqual(t, rec.ArrivalUs, drainAt)
				}
			}
		})
	}
}

// TestScaleFromZero: a pool at zero replicas holds the requests at the
// router; the first one makes the pool evaluate at once and start an
// instance, which takes them all once ready; one whose wait exceeds the
// timeout gives up there.
func TestScaleFromZero(t *testing.T) {
	r := newScaleRig(0, PoolScaling{Min: 0, Max: 2, IntervalUs: 15 * sec,
		Policy:         autoscale.NewHPA(autoscale.DefaultHPA(autoscale.MetricInFlight, 4)),
		ProvisionMinUs: 5 * sec, ProvisionMaxUs: 5 * sec, LoadUs: 3 * sec, WarmUs: 2 * sec})
	r.cfg.Scaling.WaitTimeoutUs = 30 * sec
	reqs := steady(sec, 100_000, 20, 0) // 1 s .. 2.9 s
	reqs[0].TimeoutUs = 4 * sec         // gives up at 5 s, before any instance is ready
	res := r.run(t, reqs)
	q := res.Requests
	require.Equal(t, int64(1), q.TimedOut)
	require.Equal(t, int64(19), q.Completed)
	f := res.Fleet
	require.Equal(t, int64(20), f.WaitedForCapacity)
	require.Equal(t, int64(1), f.TimedOutWaiting)
	require.Equal(t, int64(1*sec), f.Records[0].AtUs, "the first held request triggers an evaluation at once")
	require.Equal(t, 0, f.Records[0].From)
	require.Equal(t, 1, f.Records[0].To)
	// Ready at 1 + 5 + 3 + 2 = 11 s: every held request is routed then.
	for _, rec := range res.PerRequest {
		if rec.Outcome == "completed" {
			require.GreaterOrEqual(t, rec.TTFT+rec.ArrivalUs, int64(11*sec))
		}
	}
}

// TestOscillationsAreCounted: the oscillator reverses at every
// evaluation; an HPA on a steady load does not reverse.
func TestOscillationsAreCounted(t *testing.T) {
	r := newScaleRig(2, PoolScaling{Min: 1, Max: 3, IntervalUs: 5 * sec, Policy: &autoscale.Oscillator{Step: 1}})
	res := r.run(t, steady(0, 20_000, 20*300, 0))
	require.Greater(t, res.Fleet.Pools[0].Oscillations, int64(10))
	osc := res.Anomalies.ScaleOscillation // the anomaly counter, with its examples
	require.Equal(t, res.Fleet.Pools[0].Oscillations, osc.Count)
	require.Empty(t, osc.Note)
	require.Len(t, osc.Examples, 3)
	require.Equal(t, res.Fleet.Records[1].AtUs, osc.Examples[0].AtUs, "the first reversal is the second action")
	require.Contains(t, osc.Examples[0].Detail, "after scaling the other way")
	r = newScaleRig(2, PoolScaling{Min: 1, Max: 8, IntervalUs: 15 * sec, Policy: autoscale.NewHPA(autoscale.DefaultHPA(autoscale.MetricInFlight, 4))})
	res = r.run(t, steady(0, 20_000, 20*300, 0))
	require.Zero(t, res.Fleet.Pools[0].Oscillations)
	require.Zero(t, res.Anomalies.ScaleOscillation.Count)
	require.Empty(t, res.Anomalies.ScaleOscillation.Examples)
}

// TestScalingIsDeterministic: the same run twice, and with two workers,
// gives the same result; a new instance's streams are its own.
func TestScalingIsDeterministic(t *testing.T) {
	out := func(workers int) string {
		r := newScaleRig(2, PoolScaling{Min: 1, Max: 6, IntervalUs: 5 * sec, Policy: autoscale.NewKPA(autoscale.DefaultKPA()),
			ProvisionMinUs: sec, ProvisionMaxUs: 20 * sec, LoadUs: sec, WarmUs: sec, NodeIdleUs: 10 * sec, Drain: DrainRedirect})
		r.cfg.Workers = workers
		res := r.run(t, append(steady(0, 500, 40_000, 0), steady(60*sec, 5_000, 2_000, 40_000)...))
		b, err := json.Marshal(res)
		require.NoError(t, err)
		return string(b) + r.dec.String()
	}
	a := out(1)
	require.Equal(t, a, out(1))
	require.Equal(t, a, out(2))
}

// TestFixedFleetAccounting: without a policy the pool keeps its size and
// only the cost is accounted; nothing else changes.
func TestFixedFleetAccounting(t *testing.T) {
	r := newScaleRig(3, PoolScaling{Min: 3, Max: 3, PricePerGPUHour: 10, GPUsPerReplica: 2, GPUsPerNode: 8})
	res := r.run(t, steady(0, 10_000, 1000, 0))
	f := res.Fleet
	require.Empty(t, f.Records)
	require.Equal(t, 1, f.Pools[0].Nodes, "three 2-GPU replicas share one 8-GPU node")
	require.InDelta(t, 8*res.DurationS/3600, f.GPUHours, 1e-9)
	require.InDelta(t, 80*res.DurationS/3600, f.Cost, 1e-9)
	require.InDelta(t, 3, f.Pools[0].MeanReplicas, 1e-9)
}

// target is a test policy that always wants n replicas.
type target struct{ n int }

func (p target) Name() string { return "target" }
func (p target) Evaluate(*autoscale.Signals) autoscale.Decision {
	return autoscale.Decision{Desired: p.n, Reason: "test"}
}
func (p target) Applied(int64, int, int) {}

// TestImagePulledOncePerNode: an instance on a node that has the image
// (an initial node) only loads its weights; the instances on a new node
// wait for its provisioning and for one image pull, which they share.
func TestImagePulledOncePerNode(t *testing.T) {
	r := newScaleRig(1, PoolScaling{Min: 1, Max: 4, IntervalUs: 5 * sec, Policy: target{4}, GPUsPerReplica: 1, GPUsPerNode: 2,
		ProvisionMinUs: 40 * sec, ProvisionMaxUs: 40 * sec, ImagePullUs: 30 * sec, LoadUs: 10 * sec, WarmUs: 2 * sec, NodeIdleUs: 600 * sec})
	res := r.run(t, steady(0, 10_000, 12_000, 0)) // 120 s
	p := res.Fleet.Pools[0]
	require.Equal(t, 2, p.Nodes)
	// Instance 1 (node 0): 10 s. Instances 2 and 3 (node 1, from 5 s):
	// pending 40 s, then 30 s of image and 10 s of weights each.
	require.Equal(t, roundMap(map[string]float64{"pending": 80, "loading": 10 + 2*40, "warming": 6, "ready": res.DurationS + (res.DurationS - 17) + 2*(res.DurationS-87)}),
		roundMap(p.ReplicaSeconds))
	require.GreaterOrEqual(t, firstRouted(res, ScaledInstanceID(3)), int64(87*sec))
}

// TestTerminatedEnginesAreRetired: an instance the autoscaler ended gives
// its engine's caches back (sim.Engine.Retire) at the next evaluation,
// and its results stay in the report.
func TestTerminatedEnginesAreRetired(t *testing.T) {
	r := newScaleRig(2, PoolScaling{Min: 1, Max: 3, IntervalUs: 5 * sec, Policy: &autoscale.Oscillator{Step: 1}})
	c, err := New(r.cfg, NewSliceSource(steady(0, 20_000, 20*300, 0)))
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	p := res.Fleet.Pools[0]
	require.Positive(t, p.Terminated)
	retired := 0
	for i, e := range c.eng {
		if e.Retired() {
			retired++
			require.Equal(t, StateTerminated, c.fl.State(i))
		}
	}
	require.GreaterOrEqual(t, int64(retired), p.Terminated-1, "all but one terminated after the last evaluation")
	require.Len(t, res.Instances, len(c.eng), "retired instances keep their results")
}
