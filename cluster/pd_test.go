package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// llama8BKV is Llama-3.1-8B's KV per token: 32 layers × 8 KV heads × 128 ×
// K and V × 2 bytes.
const llama8BKV = 32 * 8 * 128 * 2 * 2

// pdRig is a cluster of nP prefill and nD decode instances of a constant
// 1000 µs step (100 µs of API time before queueing, 50 after finishing),
// a 4,096-token budget, a 10 GB/s network and 100 µs of transfer latency.
func pdRig(nP, nD int, kvBlocksD int64, decider disagg.Decider) (*Config, *bytes.Buffer) {
	engine := func(kv int64) sim.Config {
		return sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 4096, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: kv, PrefixCachingEnabled: true}},
			Latency: constLatency{step: 1000, arrive: 100, depart: 50},
			Options: sim.Options{Exhaustive: true},
		}
	}
	cfg := &Config{RecordRequests: true, CounterfactualK: 2}
	n := nP + nD
	for i := 0; i < n; i++ {
		in := Instance{ID: InstanceID(i, n), Pool: "p", Config: engine(1000)}
		if i >= nP {
			in.Pool, in.Config = "d", engine(kvBlocksD)
		}
		cfg.Instances = append(cfg.Instances, in)
	}
	cfg.Disagg = &Disagg{Decider: decider, LatencyUs: 100, AbortTimeoutUs: 480_000_000, Pools: []PDPool{
		{Name: "p", Role: RolePrefill, KVBytesPerToken: llama8BKV, NetBytesPerSec: 10e9, LocalBytesPerSec: 100e9},
		{Name: "d", Role: RoleDecode, KVBytesPerToken: llama8BKV, NetBytesPerSec: 10e9, LocalBytesPerSec: 100e9},
	}}
	var dec bytes.Buffer
	cfg.Decisions = &dec
	return cfg, &dec
}

func runPD(t *testing.T, cfg *Config, reqs []sim.RequestSpec) *Result {
	t.Helper()
	c, err := New(*cfg, NewSliceSource(reqs))
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	for i, n := range c.inflight {
		require.Zero(t, n, "in-flight of %s", c.ids[i])
	}
	return res
}

// TestPDRequestByHand follows one 2,000-token request: prefilled on the
// prefill instance (queued at 100, token at 1,100, response at 1,150),
// handed to the decode instance (queued at 1,250, its 125 blocks taken
// and the pull started), its 262,144,000 bytes of KV moved at 10 GB/s
// (26,215 µs) plus 100 µs of latency (arrived at 27,565), its last prompt
// token recomputed in one step (first token at 28,565: the TTFT, from
// the client's send), three more tokens, gone at 31,615.
func TestPDRequestByHand(t *testing.T) {
	cfg, dec := pdRig(1, 1, 1000, disagg.Always{})
	cfg.TraceDetailed = true
	res := runPD(t, cfg, []sim.RequestSpec{{ID: 0, PromptTokens: 2000, OutputTokens: 4}})
	q := res.Requests
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{q.Arrived, q.Routed, q.Completed})
	rec := res.PerRequest[0]
	require.Equal(t, int64(28_565), rec.TTFT)
	require.Equal(t, int64(31_615), rec.E2E)
	require.Equal(t, "instance_1", rec.Instance)
	pd := res.Disaggregation
	require.NotNil(t, pd)
	require.Equal(t, int64(1), pd.Disaggregated)
	require.Equal(t, int64(1), pd.Transfers)
	require.Equal(t, float64(2000*llama8BKV), pd.Bytes)
	require.Equal(t, 26.315, pd.TransferMs.Max)
	require.Equal(t, int64(4), res.OutputTokens, "the prefill's token is the decode's first again")
	require.Equal(t, "prefill", res.Instances[0].Role)
	require.Equal(t, int64(1), res.Instances[0].Metrics.Requests.HandedOff)
	require.Equal(t, int64(1), res.Instances[1].Metrics.Requests.Completed)
	require.Contains(t, dec.String(), `"type":"disaggregation","request":0,"tenant":0,"policy":"always","decode":"instance_1","prefill":"instance_0","prompt_tokens":2000,"non_cached_tokens":2000}`)
	require.Contains(t, dec.String(), `"type":"transfer","request":0,"tenant":0,"policy":"kv","from":"instance_0","to":"instance_1","start_us":1250,"duration_us":26315,"bytes":262144000}`)
}

// TestPDTransfersShareTheLink: two requests prefilled in one step are
// handed off together and their pulls share the 10 GB/s: both take twice
// as long, ending together.
func TestPDTransfersShareTheLink(t *testing.T) {
	cfg, _ := pdRig(1, 1, 1000, disagg.Always{})
	res := runPD(t, cfg, []sim.RequestSpec{{ID: 0, PromptTokens: 2000, OutputTokens: 2}, {ID: 1, PromptTokens: 2000, OutputTokens: 2}})
	pd := res.Disaggregation
	require.Equal(t, 2, pd.MaxConcurrent)
	// 524,288,000 bytes at 10 GB/s: 52,429 µs, + 100.
	require.Equal(t, 52.529, pd.TransferMs.Max)
	require.Equal(t, 52.529, pd.TransferMs.Min)
}

// TestPDDecodeWithoutRoomWaits: a decode instance with room for one
// prompt's KV (150 blocks; a 2,000-token prompt takes 125) pulls the
// second request only after the first has left: the second waits in its
// queue, is counted as backpressure, and is served; nothing is dropped.
func TestPDDecodeWithoutRoomWaits(t *testing.T) {
	cfg, _ := pdRig(1, 1, 150, disagg.Always{})
	res := runPD(t, cfg, []sim.RequestSpec{{ID: 0, PromptTokens: 2000, OutputTokens: 3}, {ID: 1, PromptTokens: 2000, OutputTokens: 3}})
	q := res.Requests
	require.Equal(t, int64(2), q.Completed)
	require.Zero(t, q.DroppedUnservable)
	pd := res.Disaggregation
	require.Equal(t, int64(1), pd.PullsWaited)
	require.Equal(t, 1, pd.MaxConcurrent)
	first, second := res.PerRequest[0], res.PerRequest[1]
	require.Greater(t, second.TTFT, first.E2E, "the second's pull started after the first left")
}

// TestPDPrefixThreshold: llm-d's decider prefills a prompt elsewhere only
// when its decode instance lacks more than 16 of its tokens: the second
// request of a group, whose 1,990-token prefix the decode instance now
// holds, is served there whole.
func TestPDPrefixThreshold(t *testing.T) {
	cfg, _ := pdRig(1, 1, 1000, disagg.PrefixThreshold{Tokens: disagg.DefaultPrefixThreshold})
	res := runPD(t, cfg, []sim.RequestSpec{
		{ID: 0, PromptTokens: 2000, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 1990},
		{ID: 1, ArrivalUs: 100_000, PromptTokens: 2000, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 1990},
	})
	pd := res.Disaggregation
	require.Equal(t, int64(1), pd.Disaggregated)
	require.Equal(t, int64(1), pd.Local)
	require.Equal(t, int64(2), res.Instances[1].Metrics.Requests.Completed)
	require.Equal(t, int64(1), res.Instances[0].Routed, "only the first was prefilled there")
}

// TestPDTimeoutDuringPrefill: a client that gives up before its request
// is prefilled (here during its API time on the prefill instance) ends it
// there; the decode instance never sees it. (One that gives up after its
// prefill step started is handed off first, as vLLM finishes the step
// before it reads the abort, and times out on its decode instance.)
func TestPDTimeoutDuringPrefill(t *testing.T) {
	cfg, _ := pdRig(1, 1, 1000, disagg.Always{})
	res := runPD(t, cfg, []sim.RequestSpec{{ID: 0, PromptTokens: 2000, OutputTokens: 4, TimeoutUs: 50}})
	q := res.Requests
	require.Equal(t, int64(1), q.TimedOut)
	require.Zero(t, res.Instances[1].Routed)
	require.Zero(t, res.Disaggregation.Transfers)
}

// TestPDIsDeterministic: the same run twice gives the same report.
func TestPDIsDeterministic(t *testing.T) {
	var outs []string
	for range 2 {
		cfg, dec := pdRig(2, 2, 400, disagg.PrefixThreshold{Tokens: 16})
		var reqs []sim.RequestSpec
		for k := int64(0); k < 200; k++ {
			r := sim.RequestSpec{ID: k, ArrivalUs: k * 3000, PromptTokens: 200 + (k*97)%1800, OutputTokens: 1 + k%9}
			if k%3 == 0 { // a group whose prompts the decode instances come to hold: served there
				r.PromptTokens, r.PrefixGroup, r.PrefixTokens = 1010, 1, 1008
			}
			reqs = append(reqs, r)
		}
		res := runPD(t, cfg, reqs)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		outs = append(outs, string(b)+dec.String())
		q := res.Requests
		require.Equal(t, q.Arrived, q.Completed)
		require.Positive(t, res.Disaggregation.Disaggregated)
		require.Positive(t, res.Disaggregation.Local)
	}
	require.Equal(t, outs[0], outs[1])
	require.True(t, strings.Contains(outs[0], `"type":"disaggregation"`))
}

// TestPDWorkersAgree: any worker count gives the same result and
// decision trace (a disaggregated run advances its instances on one
// goroutine: parallelOK), for several splits. The 3:1 split keeps
// requests whose KV arrived waiting in the decode instance's queue with
// their blocks (INV-1 and INV-4 count them).
func TestPDWorkersAgree(t *testing.T) {
	for _, tc := range []struct {
		nP, nD  int
		kvD     int64
		decider disagg.Decider
	}{{2, 2, 400, disagg.PrefixThreshold{Tokens: 16}}, {3, 1, 1000, disagg.Always{}}, {1, 3, 200, disagg.Always{}}} {
		var outs []string
		for _, workers := range []int{1, 2, 3} {
			cfg, dec := pdRig(tc.nP, tc.nD, tc.kvD, tc.decider)
			cfg.Workers = workers
			var reqs []sim.RequestSpec
			for k := int64(0); k < 400; k++ {
				r := sim.RequestSpec{ID: k, ArrivalUs: k * 1500, PromptTokens: 200 + (k*97)%1800, OutputTokens: 1 + k%23}
				if k%3 == 0 {
					r.PromptTokens, r.PrefixGroup, r.PrefixTokens = 1010, 1, 1008
				}
				reqs = append(reqs, r)
			}
			res := runPD(t, cfg, reqs)
			b, err := json.Marshal(res)
			require.NoError(t, err)
			outs = append(outs, string(b)+dec.String())
			require.Equal(t, res.Requests.Arrived, res.Requests.Completed)
		}
		require.Equal(t, outs[0], outs[1], "%d:%d, 2 workers", tc.nP, tc.nD)
		require.Equal(t, outs[0], outs[2], "%d:%d, 3 workers", tc.nP, tc.nD)
	}
}

// TestPDDecodeAbortFreesTheCopy: a client that gives up while its decode
// part waits in the decode instance's queue (its pull not started: the
// instance's 150 blocks hold request 0's 2,000-token prompt) has its
// prefill copy freed then, as vLLM's NIXL connector does (request_finished
// on the decode side, do_remote_prefill still set: it sends the prefill
// instance an empty read's notification); one that gives up in the decode
// instance's API stage (at 1,200 µs: queued at 1,250) never reached its
// engine core, and its copy waits for the abort timeout, past the run's
// end (the timer is no activity).
func TestPDDecodeAbortFreesTheCopy(t *testing.T) {
	for _, tc := range []struct {
		timeoutUs, kept int64
	}{{100_000, 0}, {1200, 125}} {
		cfg, _ := pdRig(1, 1, 150, disagg.Always{})
		c, err := New(*cfg, NewSliceSource([]sim.RequestSpec{
			{ID: 0, PromptTokens: 2000, OutputTokens: 200},
			{ID: 1, PromptTokens: 2000, OutputTokens: 3, TimeoutUs: tc.timeoutUs},
		}))
		require.NoError(t, err)
		res, err := c.Run()
		require.NoError(t, err)
		q := res.Requests
		require.Equal(t, [2]int64{1, 1}, [2]int64{q.Completed, q.TimedOut}, "timeout %d µs", tc.timeoutUs)
		require.Equal(t, int64(1), res.Disaggregation.Transfers)
		st := c.eng[0].Status()
		require.Equal(t, tc.kept, st.TotalKVBlocks-st.FreeKVBlocks, "the prefill instance's blocks, timeout %d µs", tc.timeoutUs)
	}
}

// TestPDDeadlockEnds: two instances that both prefill and decode, 20
// blocks each, and copies that no abort timeout frees (0: never). Request
// 0 decodes on instance 0 and is prefilled on instance 1, request 1 the
// other way round: each instance keeps the other's 13-block copy, and the
// 7 blocks left cannot take its own decode part's pull. Nothing can move:
// the run ends there with both requests in the system (still queued),
// instead of failing CL-2 ("no event is left but 2 requests are in
// flight") or, with an autoscaler, evaluating it forever.
func TestPDDeadlockEnds(t *testing.T) {
	for _, scaled := range []bool{false, true} {
		cfg, _ := pdRig(2, 0, 20, disagg.Always{})
		for i := range cfg.Instances {
			cfg.Instances[i].Config.Engine.TotalKVBlocksGPU = 20
		}
		cfg.Disagg.AbortTimeoutUs = 0
		cfg.Disagg.Pools[0].Role = RoleBoth
		cfg.Disagg.Pools = cfg.Disagg.Pools[:1]
		cfg.Routing = &route.RoundRobin{}
		cfg.Disagg.Prefill = otherHalf{&route.RoundRobin{}}
		if scaled {
			cfg.Scaling = &Scaling{RNG: sim.NewRNG(1), Pools: []PoolScaling{{Name: "p", Min: 2, Max: 2, IntervalUs: 1_000_000,
				GPUsPerReplica: 1, GPUsPerNode: 8, PricePerGPUHour: 1,
				Policy: autoscale.NewThreshold("queue-depth", autoscale.ThresholdConfig{Metric: autoscale.MetricQueueDepth, Up: 2, Down: 0.5, Step: 1, SustainUs: 1})}},
				NewInstance: func(int, int) (sim.Config, error) { return cfg.Instances[0].Config, nil }}
		}
		c, err := New(*cfg, NewSliceSource([]sim.RequestSpec{
			{ID: 0, PromptTokens: 200, OutputTokens: 5},
			{ID: 1, ArrivalUs: 10, PromptTokens: 200, OutputTokens: 5},
		}))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := c.RunContext(ctx)
		cancel()
		require.NoError(t, err, "scaled %v", scaled)
		q := res.Requests
		require.Equal(t, [2]int64{2, 0}, [2]int64{q.StillQueued, q.Completed}, "scaled %v", scaled)
		require.Equal(t, int64(2), res.Disaggregation.Disaggregated)
		require.Less(t, res.DurationS, 1.0, "scaled %v: the run ends where nothing moves", scaled)
	}
}

// otherHalf routes request k to instance (k+1) mod 2: with round-robin
// decode routing, always the other instance.
type otherHalf struct{ *route.RoundRobin }

func (otherHalf) Route(req *route.Request, _ *route.View) int { return int(req.Spec.ID+1) % 2 }
