package cluster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// randomFleet is a random fleet run: one to three pools (under P/D, with
// random roles), each with an autoscaler that moves often (an oscillator,
// a threshold on the queue, or none), a random drain policy and drain
// timeout, short provisioning, loading and warm-up, small engines (so
// that requests queue, are preempted, or are unservable), admission and
// routing latencies from none to 200 ms, client timeouts and a random
// wait for capacity; every engine checks every invariant after every
// step.
func randomFleet(seed uint64) (Config, []sim.RequestSpec, string) {
	r := rand.New(rand.NewPCG(seed, 17))
	pick := func(xs ...int64) int64 { return xs[r.IntN(len(xs))] }
	engine := func(kv int64) sim.Config {
		return sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: int64(2 + r.IntN(6)), MaxBatchedTokens: pick(256, 1024, 4096),
				ChunkedPrefillEnabled: true, BlockSizeTokens: 16, TotalKVBlocksGPU: kv, PrefixCachingEnabled: true}},
			Latency: constLatency{step: pick(200, 1000, 3000), arrive: pick(0, 100, 5000), depart: pick(0, 50)},
			Options: sim.Options{Exhaustive: true},
		}
	}
	pd := r.IntN(3) == 0
	nPools := 1 + r.IntN(3)
	if pd {
		nPools = max(nPools, 2)
	}
	var desc string
	cfg := Config{RecordRequests: true, RouterBlockSize: 16, AdmissionLatencyUs: pick(0, 0, 1000, 50_000), RoutingLatencyUs: pick(0, 0, 1000, 200_000)}
	sc := &Scaling{RNG: sim.NewRNG(int64(seed)), WaitTimeoutUs: pick(0, 0, 100_000, 5_000_000), OscillationWindowUs: 1_000_000}
	kvs := make([]int64, nPools)
	var pdPools []PDPool
	n := 0
	for p := range nPools {
		name := fmt.Sprintf("p%d", p)
		kvs[p] = pick(40, 200, 2000)
		lo := r.IntN(2)
		hi := lo + 1 + r.IntN(4)
		initial := lo + r.IntN(hi-lo+1)
		ps := PoolScaling{Name: name, Min: lo, Max: hi, IntervalUs: pick(50_000, 300_000, 1_000_000), GPUsPerReplica: 1, GPUsPerNode: 1 + r.IntN(3),
			ProvisionMinUs: pick(0, 10_000), ProvisionMaxUs: pick(10_000, 200_000), NodeIdleUs: pick(0, 100_000), ImagePullUs: pick(0, 20_000),
			LoadUs: pick(0, 30_000), WarmUs: pick(0, 10_000), Drain: Drain(r.IntN(3)), DrainTimeoutUs: pick(0, 1000, 100_000), PricePerGPUHour: 1}
		switch r.IntN(3) {
		case 0:
			ps.Policy = &autoscale.Oscillator{Step: 1 + r.IntN(2)}
		case 1:
			ps.Policy = autoscale.NewThreshold("queue-depth", autoscale.ThresholdConfig{Metric: autoscale.MetricQueueDepth, Up: 2, Down: 0.5, Step: 1, SustainUs: 100_000})
		}
		if ps.Policy == nil { // a fixed pool serves: without an autoscaler, none would start
			initial = max(initial, 1)
			ps.Min, ps.Max = 0, initial
		}
		sc.Pools = append(sc.Pools, ps)
		for range initial {
			cfg.Instances = append(cfg.Instances, Instance{Pool: name, Config: engine(kvs[p])})
			n++
		}
		role := Role(r.IntN(3))
		if pd && p < 2 {
			role = Role(1 + p) // one prefill pool, one decode pool at least
		}
		pdPools = append(pdPools, PDPool{Name: name, Role: role, KVBytesPerToken: 1 << 17, NetBytesPerSec: float64(pick(1e9, 50e9)), LocalBytesPerSec: 900e9})
		desc += fmt.Sprintf("%s %d in [%d, %d] %T drain %s/%d µs kv %d; ", name, initial, ps.Min, ps.Max, ps.Policy, ps.Drain, ps.DrainTimeoutUs, kvs[p])
	}
	for i := range cfg.Instances {
		cfg.Instances[i].ID = ScaledInstanceID(i)
	}
	sc.NewInstance = func(pool, _ int) (sim.Config, error) { return engine(kvs[pool]), nil }
	cfg.Scaling = sc
	if pd {
		cfg.Disagg = &Disagg{Pools: pdPools, LatencyUs: pick(0, 100), AbortTimeoutUs: pick(0, 1000, 5_000_000), Decider: disagg.Always{}}
		desc += fmt.Sprintf("P/D, abort %d µs; ", cfg.Disagg.AbortTimeoutUs)
	}
	policies := []string{route.RoundRobinName, route.LeastLoadedName, route.WeightedName}
	pol := policies[r.IntN(len(policies))]
	cfg.Routing, _ = route.New(pol, max(n, 1), route.Params{})
	desc += fmt.Sprintf("%s, latencies %d/%d µs, wait %d µs", pol, cfg.AdmissionLatencyUs, cfg.RoutingLatencyUs, sc.WaitTimeoutUs)
	var reqs []sim.RequestSpec
	t := int64(0)
	gap := pick(2000, 20_000, 100_000)
	for id := range int64(150 + r.IntN(200)) {
		t += r.Int64N(2 * gap)
		q := sim.RequestSpec{ID: id, ArrivalUs: t, PromptTokens: 16 + r.Int64N(700), OutputTokens: 1 + r.Int64N(40)}
		if r.IntN(3) == 0 {
			q.PrefixGroup, q.PrefixTokens = int32(1+r.IntN(3)), min(q.PromptTokens, 128)
		}
		if r.IntN(5) == 0 {
			q.TimeoutUs = 1 + r.Int64N(2_000_000)
		}
		reqs = append(reqs, q)
	}
	// Drawn last, so that the draws above make the same fleets with or
	// without them: a horizon that may stop the run with requests still
	// in the system, and under P/D a network slow enough (1 MB/s: a
	// 700-token prompt's 92 MB take 92 s) that transfers outlast it,
	// keeping prefill copies, and the requests queued behind their blocks,
	// at the horizon.
	cfg.HorizonUs = pick(0, 0, 0, 300_000, 3_000_000)
	if pd && r.IntN(3) == 0 {
		for k := range cfg.Disagg.Pools {
			cfg.Disagg.Pools[k].NetBytesPerSec = 1e6
		}
		desc += ", network at 1 MB/s"
	}
	desc += fmt.Sprintf(", horizon %d µs", cfg.HorizonUs)
	return cfg, reqs, desc
}

// TestNothingLostOnRandomFleets: on random fleets, autoscalers, drain
// policies, latencies, P/D layouts, horizons and slow networks, every run
// ends with every request accounted for (arrived = rejected + completed +
// dropped + rejected too long + timed out + killed + in the system, CL-1,
// with the cluster's other invariants and every engine's), one record per
// request that left, and the same bytes again; a run without a horizon
// ends with nothing in the system and every in-flight count back at zero,
// unless instances that both prefill and decode deadlock on copies no
// abort timeout frees (pdDeadlocked).
func TestNothingLostOnRandomFleets(t *testing.T) {
	var killed, redirected, held, lost, pdStopped int64
	defer func() {
		if !t.Failed() {
			require.Positive(t, killed, "the runs exercise kills")
			require.Positive(t, redirected, "and redirects")
			require.Positive(t, held, "and requests waiting for capacity")
			require.Positive(t, lost, "and prefill copies freed before their pull")
			require.Positive(t, pdStopped, "and P/D runs stopped by a horizon with requests in the system")
		}
	}()
	for seed := uint64(1); seed <= 100; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var out [2]string
			var res *Result
			var desc string
			for k := range out {
				cfg, reqs, d := randomFleet(seed)
				desc = d
				c, err := New(cfg, NewSliceSource(reqs))
				require.NoError(t, err, desc)
				res, err = c.Run()
				require.NoError(t, err, desc)
				if cfg.HorizonUs == 0 && !c.pdDeadlocked() {
					for i, f := range c.inflight {
						require.Zero(t, f, "%s: in-flight of %s", desc, c.ids[i])
					}
				}
				b, err := json.Marshal(res)
				require.NoError(t, err)
				out[k] = string(b)
			}
			require.Equal(t, out[0], out[1], "%s: deterministic", desc)
			q := res.Requests
			in := q.AwaitingRouting + q.AwaitingCapacity + q.InTransit + q.StillInAPI + q.StillQueued + q.StillRunning
			if !strings.HasSuffix(desc, "horizon 0 µs") {
				if res.Disaggregation != nil && in > 0 {
					pdStopped++
				}
			} else if !strings.Contains(desc, "abort 0 µs") {
				require.Zero(t, in, "%s: every request left", desc)
			}
			require.Equal(t, q.Arrived, q.Rejected+q.Completed+q.DroppedUnservable+q.RejectedTooLong+q.TimedOut+q.Killed+in, desc)
			require.Len(t, res.PerRequest, int(q.Arrived-in), desc)
			killed += q.Killed
			redirected += q.Redirected
			held += res.Fleet.WaitedForCapacity
			if d := res.Disaggregation; d != nil {
				lost += d.KVLost
			}
		})
	}
}
