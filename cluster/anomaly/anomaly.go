// Package anomaly counts what went wrong in a run, by written definitions
// with named thresholds (docs/anomalies.md): priority inversions,
// head-of-line blocking, KV thrashing, preemption storms, scale
// oscillations (from the fleet's scale actions) and P/D backpressure
// (decode pulls that waited for KV blocks). Each counter reports its count, the thresholds
// it was counted with and its first few examples (times, instances,
// request ids), for a person or a policy-search loop to read (docs/anomalies.md).
//
// Detector is one instance's part: a sim.Observer that sees the engine's
// journey, preemption and KV events and keeps O(1) work per event (plus a
// map lookup per request waiting for its first scheduling), so that the
// counters cost nothing measurable and a detector never looks beyond its
// own instance (instances may run on different goroutines). The cluster
// counts the fleet-level anomalies (head-of-line blocking at routing,
// scale oscillations from its fleet) and Merge puts the instances' parts
// together in instance order, the same for any number of workers.
package anomaly

import (
	"cmp"
	"slices"

	"github.com/blis-sim/blis/sim"
)

// The anomalies' names: the report's JSON keys.
const (
	PriorityInversion = "priority_inversion"
	HOLBlocking       = "hol_blocking"
	KVThrashing       = "kv_thrashing"
	PreemptionStorm   = "preemption_storm"
	ScaleOscillation  = "scale_oscillation"
	PDBackpressure    = "pd_backpressure"
)

// Thresholds are the anomalies' named thresholds (docs/anomalies.md gives
// each one's reason).
type Thresholds struct {
	// HOLMinWaitUs: a request routed behind a line (its instance had a
	// request waiting) while another instance's queue was empty is
	// head-of-line blocked when it then waited at least this long for its
	// first scheduling.
	HOLMinWaitUs int64
	// StormPreemptions within StormWindowUs on one instance make a
	// preemption storm.
	StormPreemptions int
	StormWindowUs    int64
	// KVThrashWindowUs is the engine's thrashing window
	// (sim.KVThrashWindowUs): reported, not chosen here.
	KVThrashWindowUs int64
	// OscillationWindowUs is the fleet's scale-oscillation window
	// (cluster.Scaling.OscillationWindowUs): reported, not chosen here.
	OscillationWindowUs int64
}

// Defaults of the thresholds chosen here (docs/anomalies.md).
const (
	DefaultHOLMinWaitUs     = 1_000_000
	DefaultStormPreemptions = 10
	DefaultStormWindowUs    = 1_000_000
)

// DefaultThresholds are the thresholds every run uses.
func DefaultThresholds() Thresholds {
	return Thresholds{HOLMinWaitUs: DefaultHOLMinWaitUs, StormPreemptions: DefaultStormPreemptions, StormWindowUs: DefaultStormWindowUs,
		KVThrashWindowUs: sim.KVThrashWindowUs, OscillationWindowUs: 300_000_000}
}

// MaxExamples is how many examples a counter keeps: the first, by time
// (then instance index).
const MaxExamples = 3

// Example is one occurrence: when, where, which requests, and a sentence
// that says what happened.
type Example struct {
	AtUs     int64   `json:"t_us"`
	Instance string  `json:"instance,omitempty"`
	Pool     string  `json:"pool,omitempty"`
	Requests []int64 `json:"requests,omitempty"`
	Detail   string  `json:"detail"`
	// inst orders examples of equal times (instance index).
	inst int
}

// Counter is one anomaly's count, in Unit, with the thresholds it was
// counted with.
type Counter struct {
	Count      int64            `json:"count"`
	Unit       string           `json:"unit"`
	Thresholds map[string]int64 `json:"thresholds,omitempty"`
	// Note says why a counter cannot count anything yet.
	Note     string    `json:"note,omitempty"`
	Examples []Example `json:"examples"`
}

// Report is the run's anomalies (the report's "anomalies" section).
type Report struct {
	PriorityInversion Counter `json:"priority_inversion"`
	HOLBlocking       Counter `json:"hol_blocking"`
	KVThrashing       Counter `json:"kv_thrashing"`
	PreemptionStorm   Counter `json:"preemption_storm"`
	ScaleOscillation  Counter `json:"scale_oscillation"`
	PDBackpressure    Counter `json:"pd_backpressure"`
}

// Named is a counter and its name.
type Named struct {
	Name string
	*Counter
}

// Counters are the report's counters in its order.
func (r *Report) Counters() []Named {
	return []Named{{PriorityInversion, &r.PriorityInversion}, {HOLBlocking, &r.HOLBlocking}, {KVThrashing, &r.KVThrashing},
		{PreemptionStorm, &r.PreemptionStorm}, {ScaleOscillation, &r.ScaleOscillation}, {PDBackpressure, &r.PDBackpressure}}
}

// NewReport is an empty report with every counter's unit and thresholds.
func NewReport(th Thresholds) *Report {
	r := &Report{
		PriorityInversion: Counter{Unit: "schedulings"},
		HOLBlocking:       Counter{Unit: "requests", Thresholds: map[string]int64{"min_wait_us": th.HOLMinWaitUs}},
		KVThrashing:       Counter{Unit: "blocks", Thresholds: map[string]int64{"window_us": th.KVThrashWindowUs}},
		PreemptionStorm: Counter{Unit: "storms", Thresholds: map[string]int64{"min_preemptions": int64(th.StormPreemptions),
			"window_us": th.StormWindowUs}},
		ScaleOscillation: Counter{Unit: "reversals", Thresholds: map[string]int64{"window_us": th.OscillationWindowUs}},
		PDBackpressure:   Counter{Unit: "pulls"},
	}
	for _, c := range r.Counters() {
		c.Examples = []Example{}
	}
	return r
}

// Add counts n occurrences and keeps ex if it is among the first
// MaxExamples by (time, instance index).
func (c *Counter) Add(n int64, ex Example, inst int) {
	c.Count += n
	ex.inst = inst
	c.keep(ex)
}

func (c *Counter) keep(ex Example) {
	if len(c.Examples) == MaxExamples && !exampleLess(&ex, &c.Examples[MaxExamples-1]) {
		return
	}
	// After every example not later than ex: equal keys keep the order
	// they were added in.
	i, _ := slices.BinarySearchFunc(c.Examples, ex, func(a, b Example) int {
		if exampleLess(&b, &a) {
			return 1
		}
		return -1
	})
	c.Examples = slices.Insert(c.Examples, i, ex)
	if len(c.Examples) > MaxExamples {
		c.Examples = c.Examples[:MaxExamples]
	}
}

func exampleLess(a, b *Example) bool {
	return cmp.Or(cmp.Compare(a.AtUs, b.AtUs), cmp.Compare(a.inst, b.inst)) < 0
}

// Merge adds o's counts and examples into r (o's examples kept by the
// same rule).
func (r *Report) Merge(o *Report) {
	mine, theirs := r.Counters(), o.Counters()
	for k := range mine {
		mine[k].Count += theirs[k].Count
		for _, ex := range theirs[k].Examples {
			mine[k].keep(ex)
		}
	}
}
