package cluster_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

// countingSource wraps a workload source and tracks how many of its
// requests are in the system (sent, not yet ended).
type countingSource struct {
	*workload.Source
	in, peak int
}

func (s *countingSource) Next() sim.RequestSpec {
	s.in++
	s.peak = max(s.peak, s.in)
	return s.Source.Next()
}

func (s *countingSource) RequestDone(id, at int64, out cluster.Outcome) {
	s.in--
	s.Source.RequestDone(id, at, out)
}

func specCluster(t *testing.T, n int, body string) (*cluster.Result, *countingSource) {
	t.Helper()
	spec, err := workload.ParseSpec([]byte(body), "test.yaml")
	require.NoError(t, err)
	inst := deploy.DefaultInstanceSpec()
	var ins []cluster.Instance
	for i := 0; i < n; i++ {
		b, err := inst.Build(sim.NewRNG(1), i)
		require.NoError(t, err)
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, n), Config: b.Config})
	}
	src := &countingSource{Source: workload.NewSource(spec, sim.NewRNG(1))}
	cfg := cluster.Config{Instances: ins, TenantNames: spec.TenantIDs()}
	for cl, t := range spec.SLO {
		cfg.SLOTargets[cl] = cluster.SLOTarget{TTFTUs: int64(t.TTFTMs * 1e3), TPOTUs: int64(t.TPOTMs * 1e3), E2EUs: int64(t.E2EMs * 1e3)}
	}
	c, err := cluster.New(cfg, src)
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	require.Zero(t, src.in, "every request sent has ended")
	return res, src
}

// A multi-turn chat re-sends its history, which the prefix cache holds:
// its hit rate is far above the same traffic sent as single turns.
func TestMultiTurnHitsThePrefixCache(t *testing.T) {
	const body = `version: 1
duration_s: 120
rate: 2
tenants:
  - id: chat
    prompt_tokens: "lognormal:mean=700,cv=0.5"
    output_tokens: "lognormal:mean=200,cv=0.5"
    request_types: [{type: %s}]
`
	multi, _ := specCluster(t, 1, fmt.Sprintf(body, `chat, turns: "4", think_time_ms: "exponential:mean=3000"`))
	single, _ := specCluster(t, 1, fmt.Sprintf(body, "completion"))
	require.Less(t, single.PrefixCacheHitRate, 0.01, "single turns share nothing")
	require.Greater(t, multi.PrefixCacheHitRate, 0.5, "later turns find their history cached")
	require.Greater(t, multi.Requests.Completed, 2*single.Requests.Completed, "four turns per session")
}

// A closed loop with C clients never has more than C requests in the
// system, whatever the instances do, and reaches that bound.
func TestClosedLoopNeverExceedsItsClients(t *testing.T) {
	res, src := specCluster(t, 2, `version: 1
duration_s: 60
tenants:
  - id: agents
    closed_loop: {clients: 12, think_time_ms: "exponential:mean=200"}
    request_types: [{type: agentic, calls: "uniform:2,5", tool_latency_ms: "const:100"}]
  - id: bulk
    closed_loop: {clients: 3, think_time_ms: "1"}
    prompt_tokens: "4000"
    output_tokens: "500"
`)
	require.Equal(t, 15, src.peak, "12 + 3 clients")
	require.Greater(t, res.Requests.Completed, int64(200))
	f := res.Fairness
	require.NotNil(t, f)
	require.Equal(t, "agents", f.Tenants[0].Name)
	require.Equal(t, "bulk", f.Tenants[1].Name)
	require.NotNil(t, f.Tenants[0].Detail)
	require.Equal(t, f.Tenants[0].Completed, f.Tenants[0].Detail.TTFT.Count)
}

// Clients that give up: under overload, requests past their deadline are
// aborted and counted as timed out, per class and per tenant, as SLO
// misses; the accounting (CL-1, checked by Finish) still adds up, and a
// closed-loop client whose request timed out moves on.
func TestTimeoutsAbortAndCount(t *testing.T) {
	res, src := specCluster(t, 1, `version: 1
duration_s: 60
rate: 40
tenants:
  - id: impatient
    timeout_s: 2
    prompt_tokens: "3000"
    output_tokens: "300"
  - id: agents
    closed_loop: {clients: 4, think_time_ms: "100"}
    timeout_s: 1
    output_tokens: "200"
`)
	q := res.Requests
	require.Greater(t, q.TimedOut, int64(100), "an overloaded instance makes clients give up")
	require.Equal(t, q.Arrived, q.Completed+q.TimedOut+q.Rejected+q.DroppedUnservable)
	var classTimedOut int64
	for _, c := range res.PerSLOClass {
		classTimedOut += c.TimedOut
	}
	require.Equal(t, q.TimedOut, classTimedOut)
	var tenantTimedOut int64
	for _, tr := range res.Fairness.Tenants {
		tenantTimedOut += tr.Detail.TimedOut
		require.LessOrEqual(t, tr.Detail.SLO.Met, tr.Completed)
		require.Equal(t, tr.Arrived, tr.Detail.SLO.Finished, "every request ended, and all count")
	}
	require.Equal(t, q.TimedOut, tenantTimedOut)
	require.Greater(t, src.Stats()[1].Requests, int64(4), "the agents kept sending after timeouts")
	for _, in := range res.Instances {
		require.Equal(t, in.Metrics.Requests.Offered, in.Metrics.Requests.Completed+in.Metrics.Requests.TimedOut+in.Metrics.Requests.Dropped)
	}
}
