package fleet

// Fleet is a run's fleet: what it cost, how big it was, how it scaled.
type Fleet struct {
	Pools []PoolFleet `json:"pools"`
	// GPUHours are the nodes' GPUs × their billed time; Cost that times
	// each pool's price per GPU-hour.
	GPUHours float64 `json:"gpu_hours"`
	Cost     float64 `json:"cost"`
	// CostPerMillionTokens is Cost per million output tokens delivered
	// (null without any).
	CostPerMillionTokens *float64 `json:"cost_per_million_output_tokens"`
	// SLOAttainmentPerReplicaHour is the run's SLO attainment over its
	// ready replica-hours (null without SLO targets or replica-hours).
	SLOAttainmentPerReplicaHour *float64 `json:"slo_attainment_per_replica_hour"`
	// WaitedForCapacity counts the requests held at the router for want
	// of a ready instance; TimedOutWaiting those that gave up there.
	WaitedForCapacity int64 `json:"waited_for_capacity"`
	TimedOutWaiting   int64 `json:"timed_out_waiting"`
	// Killed counts the requests a scale-down ended, Redirected those it
	// handed back to the router.
	Killed     int64 `json:"killed_by_scale_down"`
	Redirected int64 `json:"redirected_by_scale_down"`
	// Records are the scale actions in time order (at most
	// MaxScaleRecords).
	Records []ScaleRecord `json:"scale_records,omitempty"`
}

// PoolFleet is one pool's fleet.
type PoolFleet struct {
	Name   string `json:"name"`
	Policy string `json:"policy"`
	Min    int    `json:"min"`
	Max    int    `json:"max"`
	// ReplicaSeconds is the time its instances spent in each state.
	ReplicaSeconds map[string]float64 `json:"replica_seconds"`
	// MeanReplicas is the time-average of its size (instances not
	// draining or terminated) over the run's span (to the fleet's last
	// change, if later: Core.Result), MeanReady of its ready instances,
	// Peak the largest size.
	MeanReplicas float64 `json:"mean_replicas"`
	MeanReady    float64 `json:"mean_ready"`
	PeakReplicas int     `json:"peak_replicas"`
	Nodes        int     `json:"nodes_provisioned"`
	GPUHours     float64 `json:"gpu_hours"`
	Cost         float64 `json:"cost"`
	ScaleUps     int64   `json:"scale_ups"`
	ScaleDowns   int64   `json:"scale_downs"`
	// Oscillations counts scale actions that reversed the previous one's
	// direction within the oscillation window.
	Oscillations int64 `json:"oscillations"`
	// Created and Terminated count instances started by the autoscaler
	// and instances it ended.
	Created    int64 `json:"instances_created"`
	Terminated int64 `json:"instances_terminated"`
}

// Outcome is what the caller knows of the run for the fleet's result: the
// output tokens delivered, the run's SLO attainment (nil without
// targets), and the requests scale-downs killed and redirected.
type Outcome struct {
	OutputTokens       int64
	SLOAttainment      *float64
	Killed, Redirected int64
}

// Result closes the accounting at end (µs), the run's span, and reports
// the fleet. When the fleet changed after end (an autoscaler acting while
// requests wait past the run's last activity, say held by an admission
// latency beyond the horizon), the accounting reaches its last change
// instead: every replica-second and GPU-hour counted lies within the span
// its means divide by, so a mean never exceeds the peak.
func (f *Core) Result(end int64, o Outcome) *Fleet {
	end = max(end, f.lastChange)
	out := &Fleet{WaitedForCapacity: f.heldN, TimedOutWaiting: f.timedOut, Killed: o.Killed, Redirected: o.Redirected, Records: f.records}
	dur := float64(end) * 1e-6
	var readyHours float64
	for p := range f.pools {
		pr := &f.pools[p]
		r := &pr.res
		var sizeUs, readyUs float64
		for i := range f.life {
			l := &f.life[i]
			if l.pool != p {
				continue
			}
			spent := l.stateUs
			if l.state != StateTerminated && end > l.since {
				spent[l.state] += end - l.since
			}
			for s := StatePending; s < StateTerminated; s++ {
				if spent[s] > 0 {
					r.ReplicaSeconds[s.String()] += float64(spent[s]) * 1e-6
				}
			}
			sizeUs += float64(spent[StatePending] + spent[StateLoading] + spent[StateWarming] + spent[StateReady])
			readyUs += float64(spent[StateReady])
		}
		if dur > 0 {
			r.MeanReplicas = sizeUs * 1e-6 / dur
			r.MeanReady = readyUs * 1e-6 / dur
		}
		readyHours += readyUs * 1e-6 / 3600
		r.PeakReplicas = pr.peak
		for _, n := range pr.nodes {
			r.GPUHours += f.nodeHours(pr, n, end)
		}
		r.Cost = r.GPUHours * pr.cfg.PricePerGPUHour
		out.GPUHours += r.GPUHours
		out.Cost += r.Cost
		out.Pools = append(out.Pools, *r)
	}
	if o.OutputTokens > 0 {
		v := out.Cost / (float64(o.OutputTokens) / 1e6)
		out.CostPerMillionTokens = &v
	}
	if o.SLOAttainment != nil && readyHours > 0 {
		v := *o.SLOAttainment / readyHours
		out.SLOAttainmentPerReplicaHour = &v
	}
	return out
}

// Billed is the GPU-hours and cost the nodes billed up to at (no later
// than the caller's clock: a node's release is known by then).
func (f *Core) Billed(at int64) (gpuHours, cost float64) {
	for p := range f.pools {
		pr := &f.pools[p]
		for _, n := range pr.nodes {
			if h := f.nodeHours(pr, n, at); h > 0 {
				gpuHours += h
				cost += h * pr.cfg.PricePerGPUHour
			}
		}
	}
	return
}

// nodeHours is node n's GPU-hours up to at.
func (f *Core) nodeHours(pr *poolRun, n int, at int64) float64 {
	nd := &f.nodes[n]
	stop := nd.end
	if stop < 0 || stop > at {
		stop = at
	}
	if stop > nd.start {
		return float64(pr.cfg.GPUsPerNode) * float64(stop-nd.start) * 1e-6 / 3600
	}
	return 0
}
