package experiment

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
)

// runFleet runs an experiment file and checks that every request is
// accounted for: arrived = rejected + completed + dropped + rejected too
// long + timed out + killed + in the system.
func runFleet(t *testing.T, text string) *cluster.Result {
	t.Helper()
	e, err := parse(t, text)
	require.NoError(t, err)
	res, err := Run(context.Background(), e, &MemSinks{})
	require.NoError(t, err)
	m := res.Cluster
	q := m.Requests
	in := q.AwaitingRouting + q.AwaitingCapacity + q.InTransit + q.StillInAPI + q.StillQueued + q.StillRunning
	require.Equal(t, q.Arrived, q.Rejected+q.Completed+q.DroppedUnservable+q.RejectedTooLong+q.TimedOut+q.Killed+in)
	return m
}

// TestDrainsInEveryState is the hostile pass's drain reproductions: an
// HPA that scales two instances down to one every 2 s, its drain
// immediate (once: CL-3, a killed request still in the API stage), or
// waiting 0.1 s with 200 ms of routing latency (a request routed but not
// yet at its instance), or handing requests back (redirect), or under
// P/D. Every run ends in a report with every request accounted for.
func TestDrainsInEveryState(t *testing.T) {
	const head = `version: 1
deployment:
  router: {routing_latency_us: %d}
  pools:
    - {name: a, replicas: 2, min_replicas: 1, max_replicas: 2, drain: {policy: %s, timeout_s: %g}%s}
%s
workload:
  synthetic: {requests: 600, rate: 60}
policies:
  autoscale: {type: hpa, params: {metric: in_flight, target: 100000, scale_down_window_s: 0, interval_s: 2}}
%s
`
	pd := "    - {name: d, role: decode, replicas: 2, min_replicas: 1, max_replicas: 2, drain: {policy: %s}}"
	for _, c := range []struct {
		name           string
		latency        int
		drain          string
		timeout        float64
		role, pool, dz string
		killed         bool
	}{
		{"immediate", 0, "immediate", 0, "", "", "", true},
		{"wait in transit", 200_000, "wait", 0.1, "", "", "", true},
		{"redirect in transit", 200_000, "redirect", 0, "", "", "", false},
		{"P/D immediate", 1000, "immediate", 0, ", role: prefill", fmt.Sprintf(pd, "immediate"), "  disaggregation: {type: always}", true},
		{"P/D redirect", 1000, "redirect", 0, ", role: prefill", fmt.Sprintf(pd, "redirect"), "  disaggregation: {type: always}", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := runFleet(t, fmt.Sprintf(head, c.latency, c.drain, c.timeout, c.role, c.pool, c.dz))
			require.Positive(t, m.Fleet.Pools[0].ScaleDowns)
			if c.killed {
				require.Positive(t, m.Requests.Killed)
			} else {
				require.Zero(t, m.Requests.Killed)
				require.Positive(t, m.Requests.Redirected)
			}
		})
	}
}

// TestOscillatorFleetIsBounded: an oscillator every millisecond, 4 to 8
// replicas, starts thousands of instances (the hostile pass's
// reproduction, 200 requests, started 27,684 and took 1 GB and a 48 MB
// report); terminated instances beyond the cap are summed per pool, so the
// report lists the live ones and MaxTerminatedEntries others, and every
// instance ever started is counted once.
func TestOscillatorFleetIsBounded(t *testing.T) {
	m := runFleet(t, `version: 1
deployment:
  pools:
    - {replicas: 4, max_replicas: 8}
workload:
  synthetic: {requests: 60, rate: 40}
policies:
  autoscale: {type: oscillator, params: {step: 4, interval_s: 0.001}}
`)
	p := m.Fleet.Pools[0]
	require.Greater(t, p.Created, int64(2*cluster.MaxTerminatedEntries), "the run terminates more instances than the cap")
	require.LessOrEqual(t, len(m.Instances), 8+cluster.MaxTerminatedEntries)
	require.Len(t, m.TerminatedInstances, 1)
	require.Equal(t, 4+p.Created, int64(len(m.Instances))+m.TerminatedInstances[0].Instances, "every instance once")
	var routed int64
	for _, in := range m.Instances {
		routed += in.Routed
	}
	require.Equal(t, m.Requests.Routed, routed+m.TerminatedInstances[0].Routed)
}

// TestMaxReplicasBoundedLikeTheInstanceCount: max_replicas is bounded as
// the instance count is, 4,096 in all pools together, refused at the key
// (an oscillator at 100,000 once reached 3 GB in 28 s).
func TestMaxReplicasBoundedLikeTheInstanceCount(t *testing.T) {
	_, err := parse(t, "version: 1\ndeployment:\n  pools:\n    - {max_replicas: 100000}\npolicies:\n  autoscale: {type: oscillator}\n")
	require.ErrorContains(t, err, "deployment.pools[0].max_replicas: must be within [1, 4096] instances, got 100000")
	_, err = parse(t, "version: 1\ndeployment:\n  pools:\n    - {name: a, max_replicas: 3000}\n    - {name: b, max_replicas: 3000}\npolicies:\n  autoscale: {type: oscillator}\n")
	require.ErrorContains(t, err, "deployment.pools[1].max_replicas: the pools' max_replicas add up to 6000, more than the 4096 instances a deployment may hold")
}
