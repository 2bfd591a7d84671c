package cluster

import (
	"fmt"
	"io"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
	ss "github.com/blis-sim/blis/steady"
)

// Instance is one instance of the cluster.
type Instance struct {
	// ID names the instance in results and traces; IDs are unique and
	// sort in index order (InstanceID zero-pads).
	ID     string
	Pool   string
	Config sim.Config
	// Lockstep names the data-parallel group the instance steps with
	// (cluster/lockstep.go); instances with the same non-empty name step
	// together. Empty: it steps alone.
	Lockstep string
}

// InstanceID is the ID of instance index among n: "instance_" and the
// index, zero-padded to n's width, so that lexicographic order is index
// order (docs/cluster.md).
func InstanceID(index, n int) string {
	w := len(fmt.Sprint(max(1, n-1)))
	return fmt.Sprintf("instance_%0*d", w, index)
}

// Config is a cluster: its instances and the policies in front of them.
type Config struct {
	Instances []Instance
	Admission admit.Policy // nil: always-admit
	Routing   route.Policy // nil: round-robin
	// AdmissionLatencyUs delays the routing decision after admission;
	// RoutingLatencyUs delays the request's arrival at the instance after
	// the routing decision.
	AdmissionLatencyUs, RoutingLatencyUs int64
	Freshness                            Freshness
	// RouterBlockSize is the block size, in tokens, at which the router
	// hashes prompts for its prefix index (0: instance 0's block size).
	RouterBlockSize int64
	// HorizonUs stops Run at this time (0: run until every request has
	// left).
	HorizonUs int64
	// Decisions, when not nil, receives the decision trace: one JSON line
	// per admission and routing decision, with the top CounterfactualK
	// candidates of each routing decision and its regret.
	Decisions       io.Writer
	CounterfactualK int
	// TraceDetailed adds each instance's batch formations, preemptions
	// and KV offload/reload records to the decision trace (detail.go);
	// it needs Decisions, and runs the instances on one goroutine.
	TraceDetailed bool
	// Counterfactual, when not nil, samples routing decisions and
	// reports their TTFT regret by counterfactual simulation
	// (counterfactual.go): in Result.Counterfactual, and in the decision
	// trace when there is one.
	Counterfactual *Counterfactual
	// RecordRequests keeps one record per request that left the cluster
	// (completed, rejected or dropped).
	RecordRequests bool
	// SLOTargets are each SLO class's targets (indexed by sim.SLOClass);
	// a class with targets reports its attainment and goodput.
	SLOTargets [4]SLOTarget
	// TenantNames names the tenants (a request's Tenant indexes it); with
	// names, the result reports every tenant's outcomes, latencies and
	// SLO attainment, even a tenant that sent nothing.
	TenantNames []string
	// Workers is how many goroutines Run may use to advance instances
	// between cluster events (0 or 1: the caller's only). The output is the
	// same for every value; see parallel.go for when they are used.
	Workers int
	// WindowUs > 0 cuts the run into time windows of this many µs,
	// aligned at time 0, and reports each one in Result.Windows: requests
	// that arrived and left in it, TTFT of those completed, and the state
	// sampled at its end (windows.go). 0: no windows.
	WindowUs int64
	// Scaling, when not nil, gives each pool bounds, an autoscaler, nodes
	// and an instance lifecycle, and reports the fleet's size and cost
	// (scaling.go). Nil: a fixed fleet, no cost.
	Scaling *Scaling
	// Disagg, when not nil, splits requests between prefill and decode
	// instances and moves their KV between them (pd.go).
	Disagg *Disagg
	// KVStore, when not nil, is a KV store the instances with a store
	// link share (kvstore.go).
	KVStore *KVStore
	// Analysis, when not nil, is told of every arrival, routing, departure
	// and completed request, stops the run where its stopping rule says
	// (at a checkpoint: a horizon), and its report is the result's
	// Stability and SteadyState (package steady; steady.go).
	Analysis *ss.Collector
}

// Source supplies the requests. Arrival times must not decrease and never
// lie before the cluster's clock; request IDs must be unique.
type Source interface {
	// Peek is the next request's arrival time, or false when there is none
	// for now (a closed-loop source may have more after a completion).
	Peek() (int64, bool)
	// Next returns that request and moves on.
	Next() sim.RequestSpec
}

// Outcome is how a request left the cluster (sim.Outcome, so that a
// workload source outside this package can observe it).
type Outcome = sim.Outcome

const (
	Completed = sim.Completed
	Rejected  = sim.Rejected
	Dropped   = sim.Dropped // unservable at its instance
	TimedOut  = sim.TimedOut
	TooLong   = sim.TooLong // refused by its instance: longer than the model's context
	Killed    = sim.Killed  // ended by a scale-down
)

// CompletionObserver is implemented by a Source that needs to know when
// its requests leave (a closed-loop workload sends its next request a
// think time after the previous one completes): RequestDone is called at
// the request's departure, or at its rejection.
type CompletionObserver interface {
	RequestDone(id int64, atUs int64, out Outcome)
}

// OpenLoopSource is implemented by a CompletionObserver that can tell
// that RequestDone never creates a request (an open-loop workload that
// only counts): its departures cannot create an arrival inside a window,
// so the instances may be advanced in parallel windows (Config.Workers).
type OpenLoopSource interface {
	OpenLoop() bool
}

// SliceSource is a Source over a slice sorted by arrival.
type SliceSource struct {
	reqs []sim.RequestSpec
	next int
}

// NewSliceSource returns a source over reqs (not copied).
func NewSliceSource(reqs []sim.RequestSpec) *SliceSource { return &SliceSource{reqs: reqs} }

func (s *SliceSource) Peek() (int64, bool) {
	if s.next >= len(s.reqs) {
		return 0, false
	}
	return s.reqs[s.next].ArrivalUs, true
}

func (s *SliceSource) Next() sim.RequestSpec {
	s.next++
	return s.reqs[s.next-1]
}

// Remaining is the number of requests not yet taken.
func (s *SliceSource) Remaining() int { return len(s.reqs) - s.next }
