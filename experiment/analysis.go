package experiment

import (
	"io"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/summary"
)

// analysis sets the cluster's detailed trace and counterfactual sampling
// (docs/anomalies.md); the anomaly counters need no setting.
func (r *runner) analysis(cfg *cluster.Config) error {
	e := r.e
	cfg.TraceDetailed = e.Run.TraceLevel == TraceDetailed
	cf, on, err := cluster.ParseSample(e.Run.CounterfactualSample)
	if err != nil {
		return e.errAt(err, "run.counterfactual_sample")
	}
	if on {
		if cf.EveryN == 0 {
			cf.RNG = r.rng.Stream(sim.StreamCounterfactual)
		}
		cfg.Counterfactual = &cf
	}
	return nil
}

// writeSummary writes the run's Markdown summary (run.outputs.summary),
// within run.summary_max_tokens, into the output clusterOutputs opened
// before the run (committed with the others only if the run succeeds).
func (r *runner) writeSummary(m *cluster.Result) error {
	e := r.e
	b := r.summary
	if b == nil {
		return nil
	}
	p := &e.Policies
	ctx := summary.Context{Admission: p.Admission.Type, Priority: p.Priority.Type, Routing: p.Routing.Type, Scheduler: p.Scheduler.Type,
		Autoscale: p.Autoscale.Type, Instances: e.Deployment.NumInstances(), Workload: e.describeWorkload()}
	if _, err := io.WriteString(b, summary.Markdown(ctx, m, e.Run.SummaryMaxTokens)); err != nil {
		return err
	}
	return flushAs(b, e.label("run.outputs.summary"))()
}
