package experiment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/plural"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
)

// What a run says on stderr besides its report: the warnings (shown even
// when quiet) and notes, in the order blis run has always printed them.

func (r *runner) warn(format string, args ...any) {
	r.res.Warnings = append(r.res.Warnings, fmt.Sprintf(format, args...))
}

func (r *runner) note(format string, args ...any) {
	r.res.Notes = append(r.res.Notes, fmt.Sprintf(format, args...))
}

// clamped describes the step times the engine clamped (prefix names the
// instance in a cluster).
func (r *runner) clamped(prefix string, c *sim.Clamped) {
	if c == nil {
		return
	}
	if c.ToOneUs > 0 {
		r.warn("%s%d steps had a latency-model time below 1 µs and were clamped to 1 µs (step_times_clamped): the model extrapolates below zero on small steps", prefix, c.ToOneUs)
	}
	if c.ToMaxDuration > 0 {
		r.warn("%s%d steps had a latency-model time above %d µs (2^40) and were clamped to it (step_times_clamped)", prefix, c.ToMaxDuration, sim.MaxDurationUs)
	}
}

// tooLong reports the requests refused as longer than the model's context,
// naming the first by its file and line when a replayed file holds it: the
// workload asked for what the deployment cannot serve.
func (r *runner) tooLong(n int64, first *sim.TooLongRequest, rep *workload.ReplayReport) {
	if n == 0 || first == nil {
		return
	}
	what := fmt.Sprintf("the first, request %d, has %d + %d > %d tokens", first.ID, first.PromptTokens, first.OutputTokens, first.MaxModelLen)
	if rep != nil && rep.TooLong > 0 {
		what = "the first in the --replay file: " + rep.TooLongAt
	}
	r.warn("%s rejected as vLLM rejects them (HTTP 400): prompt + output tokens exceed the model's context, max_model_len; "+
		"%s (counted in requests.rejected_too_long; see --max-model-len)", plural.Of(n, "request"), what)
}

// skipped reports the replayed rows skipped as unreadable: the simulated
// workload is not the whole file.
func (r *runner) skipped(rep *workload.ReplayReport) {
	if rep == nil || len(rep.Skipped) == 0 {
		return
	}
	r.warn("--replay %s (replay.skipped in the output; --strict fails on the first)", rep)
}

// dropped reports requests dropped as unservable, naming the first and
// why: a cache too small for a request is a configuration error the
// summary's count alone hides.
func (r *runner) dropped(prefix string, dropped, offered int64, first *sim.DroppedRequest) {
	if dropped == 0 || first == nil {
		return
	}
	hint := "give the instance more KV blocks (--kv-blocks-gpu, --gpu-memory-utilization) or send shorter requests"
	if !first.NoKV {
		hint = "raise --max-num-batched-tokens or turn chunked prefill on (--enable-chunked-prefill)"
	}
	r.warn("%s%d of %s dropped as unservable (requests.dropped_unservable): the first, request %d, %s; %s",
		prefix, dropped, plural.Of(offered, "request"), first.ID, first.Reason, hint)
}

// raised says how many prompts of a prefix group were raised above the
// prefix (docs/workloads.md), so that a run whose echoed distribution they
// do not follow says so.
func (r *runner) raised(gen *workload.Stream) {
	if gen == nil {
		return
	}
	if raised, grouped := gen.Raised(); raised > 0 {
		p := r.e.Workload.Synthetic.PrefixTokens
		// Name the settings that made it only when someone set them: the
		// main job's first line must not describe flags nobody gave.
		var set []string
		for _, k := range []string{"workload.synthetic.prompt_tokens", "workload.synthetic.prefix_tokens", "workload.synthetic.prefix_groups"} {
			if r.e.draft.isGiven(k) {
				l, _ := r.e.draft.origin(k)
				set = append(set, l)
			}
		}
		why := "the default workload's prompts and prefixes"
		if len(set) > 0 {
			why = strings.Join(set, ", ")
		}
		r.note("workload: %s of the %s that start with a shared %d-token prefix were drawn no longer than it and lengthened to %d tokens (%s; docs/workloads.md)",
			strconv.FormatInt(raised, 10), plural.Of(grouped, "prompt"), p, p+1, why)
	}
}

// tooLongPart is the summary's count of requests rejected as longer than
// the model's context, when there are any.
func tooLongPart(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d rejected as too long", n)
}

func (r *runner) partialNote() {
	if r.res.Partial {
		r.warn("the run was cancelled: the report is partial (\"partial\": true), its metrics those of a horizon where it stopped, and no output file was written")
	}
}

func (r *runner) instanceDiagnostics(m *sim.Result, rep *workload.ReplayReport, gen *workload.Stream, tw *simtrace.Writer) {
	r.partialNote()
	r.skipped(rep)
	r.tooLong(m.Requests.RejectedTooLong, m.FirstTooLong, rep)
	r.dropped("", m.Requests.Dropped, r.res.offered, m.FirstDropped)
	r.raised(gen)
	r.stability(m.Stability, "the instance")
	offered := r.res.offered
	r.res.summary = func(wall float64) string {
		return fmt.Sprintf("%s (%d completed, %d dropped%s), %s, %.1f s simulated in %.2f s wall (%.1f µs per request)",
			plural.Of(offered, "request"), m.Requests.Completed, m.Requests.Dropped, tooLongPart(m.Requests.RejectedTooLong), plural.Of(m.Steps, "step"), m.DurationS, wall, wall*1e6/float64(max(1, offered)))
	}
	r.clamped("", m.StepTimesClamped)
	if tw != nil {
		st := tw.Stats()
		r.note("trace %s: %d spans, %d events (%d dropped by the %d-event limit), %d sampled steps (%d rich)",
			r.e.Run.Outputs.OTLPTrace, st.Spans, st.Events, st.DroppedEvents, r.e.Run.OTLP.MaxEventsPerSpan, st.SampledSteps, st.RichSteps)
	}
}

func (r *runner) clusterDiagnostics(m *cluster.Result, rep *workload.ReplayReport, gen *workload.Stream, n int) {
	r.partialNote()
	for _, in := range m.Instances {
		r.clamped("instance "+in.ID+": ", in.Metrics.StepTimesClamped)
		r.dropped("instance "+in.ID+": ", in.Metrics.Requests.Dropped, in.Metrics.Requests.Offered, in.Metrics.FirstDropped)
	}
	rq := m.Requests
	var first *sim.TooLongRequest
	for _, in := range m.Instances {
		if f := in.Metrics.FirstTooLong; f != nil && (first == nil || f.ID < first.ID) {
			first = f
		}
	}
	if pd := m.Disaggregation; pd != nil && pd.Disaggregated == 0 && pd.Local > 0 && r.e.Policies.Disaggregation.Type == disagg.AlwaysName {
		// Every pool prefills and decodes, and the prefill router picked
		// each request's decode instance: always split nothing.
		r.warn("disaggregation %s split none of the %d requests: the prefill instance picked was always the decode instance (with every pool's role both, the prefill router, %s, moves in step with the router); give pools the roles prefill and decode, or policies.disaggregation.params.prefill_scorers (docs/disaggregation.md)",
			disagg.AlwaysName, pd.Local, r.prefillRouter())
	}
	if pd := m.Disaggregation; pd != nil && pd.TransfersClamped > 0 {
		r.warn("%d KV transfers would have taken longer than %d µs (2^40) and were cut to it (disaggregation.transfers_clamped): a link of almost no bandwidth (deployment.network)", pd.TransfersClamped, sim.MaxDurationUs)
	}
	if in := rq.AwaitingRouting + rq.AwaitingCapacity + rq.InTransit + rq.StillInAPI + rq.StillQueued + rq.StillRunning; in > 0 && m.Disaggregation != nil && !r.res.Partial && r.e.horizonUs() == 0 {
		// Only a deadlock of kept prefill copies ends a run without a
		// horizon with requests in it (cluster's pdDeadlocked).
		r.warn("%s could not move when the run ended (counted in the system): instances that both prefill and decode keep each other's prefill copies, which no abort timeout frees, and their decode parts wait for the blocks those copies hold; set deployment.network.abort_timeout_s (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s) or give the pools the roles prefill and decode (docs/disaggregation.md)",
			plural.Of(in, "request"))
	}
	r.skipped(rep)
	r.tooLong(rq.RejectedTooLong, first, rep)
	r.raised(gen)
	what := "the " + plural.Of(n, "instance")
	if n == 1 {
		what = "the instance"
	}
	r.stability(m.Stability, what)
	offered, windows, win := r.res.offered, len(m.Windows), r.e.Run.WindowUs
	fleet, cost := plural.Of(n, "instance"), ""
	if f := m.Fleet; f != nil {
		if len(f.Records) > 0 || f.Killed > 0 || f.WaitedForCapacity > 0 {
			var mean float64
			peak := 0
			for _, p := range f.Pools {
				mean += p.MeanReplicas
				peak += p.PeakReplicas
			}
			fleet = fmt.Sprintf("%s at start (%.1f on average, %d at peak)", plural.Of(n, "instance"), mean, peak)
			if k := f.Killed; k > 0 {
				r.note("%s killed by scale-downs (drain immediate, or a drain timeout)", plural.Verb(k, "request", "was", "were"))
			}
			if w := f.TimedOutWaiting; w > 0 {
				r.note("%d of the %s that waited at the router for a ready instance timed out (deployment.router.capacity_wait_timeout_s)", w, plural.Of(f.WaitedForCapacity, "request"))
			}
		}
		cost = fmt.Sprintf("; %.2f GPU-hours, cost %s", f.GPUHours, deploy.FormatCost(f.Cost))
	}
	r.res.summary = func(wall float64) string {
		return fmt.Sprintf("%s, %d of %s arrived (%d completed, %d rejected, %d dropped%s), %.1f s simulated in %.2f s wall (%.1f µs per request)%s",
			fleet, rq.Arrived, plural.Of(offered, "request"), rq.Completed, rq.Rejected, rq.DroppedUnservable, tooLongPart(rq.RejectedTooLong), m.DurationS, wall, wall*1e6/float64(max(1, rq.Arrived)), cost)
	}
	if win > 0 {
		r.note("%s of %s", plural.Of(windows, "time window"), time.Duration(win)*time.Microsecond)
	}
}

// prefillRouter names the policy that picks a request's prefill instance.
func (r *runner) prefillRouter() string {
	if len(r.e.Policies.Disaggregation.Map("prefill_scorers")) > 0 {
		return "weighted with the prefill scorers"
	}
	return "the routing section's " + r.e.Policies.Routing.Type + " run again"
}
