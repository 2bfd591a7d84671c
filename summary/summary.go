// Package summary writes a cluster run as a short Markdown text for a
// person or an LLM-driven policy search to read (docs/anomalies.md;
// blis run --summarize-trace): the outcome, the key issues (the
// anomaly counters with examples, rejections, drops, SLO classes short
// of their targets), the worst routing decisions by TTFT regret, the
// counterfactual findings, and what to change first. It is a pure
// function of the run's result, so identical runs give identical bytes,
// and it stays within a token budget counted by Tokens: lines of lesser
// importance are left out first, and a note says how many.
package summary

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/anomaly"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/plural"
	"github.com/blis-sim/blis/steady"
)

// The token budget: its default and bounds.
const (
	DefaultMaxTokens = 1000
	MinMaxTokens     = 100
	MaxMaxTokens     = 100_000
)

// SLOConcern is the SLO attainment below which a class is a key issue.
const SLOConcern = 0.9

// Context is what the summary says of the run besides its result: the
// policy bundle's templates, the number of instances and the workload.
type Context struct {
	Admission, Priority, Routing, Scheduler, Autoscale string
	Instances                                          int
	Workload                                           string
}

// line is one line of the document: its section and importance (0 kept
// longest).
type line struct {
	text    string
	section int
	rank    int
	// numbered lines are items of their section's ordered list, numbered
	// as they are kept (render).
	numbered bool
}

const (
	secTitle = iota
	secOutcome
	secIssues
	secWorst
	secCounterfactual
	secFocus
	numSections
)

var headers = [numSections]string{"", "## Outcome", "## Key issues", "## Worst decisions (TTFT regret)", "## Counterfactual findings", "## Suggested focus"}

type doc struct{ lines []line }

func (d *doc) add(section, rank int, format string, args ...any) {
	d.lines = append(d.lines, line{text: ascii(fmt.Sprintf(format, args...)), section: section, rank: rank})
}

// item adds an item of the section's ordered list.
func (d *doc) item(section, rank int, format string, args ...any) {
	d.add(section, rank, format, args...)
	d.lines[len(d.lines)-1].numbered = true
}

// ascii replaces what the token rule would count dearly (and what some
// readers render badly) by ASCII.
func ascii(s string) string {
	r := strings.NewReplacer("µs", "us", "→", "->", "≥", ">=", "≤", "<=", "—", "-", "–", "-", "×", "x")
	s = r.Replace(s)
	if strings.IndexFunc(s, func(c rune) bool { return c >= 0x80 }) < 0 {
		return s
	}
	return strings.Map(func(c rune) rune {
		if c >= 0x80 {
			return '?'
		}
		return c
	}, s)
}

// Markdown is the run's summary within maxTokens tokens (Tokens), at
// least MinMaxTokens.
func Markdown(ctx Context, res *cluster.Result, maxTokens int) string {
	maxTokens = max(maxTokens, MinMaxTokens)
	var d doc
	d.add(secTitle, 0, "# Run summary")
	outcome(&d, ctx, res)
	focus := issues(&d, ctx, res)
	worst(&d, res)
	counterfactual(&d, res)
	for k, f := range focus {
		d.add(secFocus, min(k, 2), "- %s", f)
	}
	return fit(d.lines, maxTokens)
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func outcome(d *doc, ctx Context, res *cluster.Result) {
	q := res.Requests
	d.add(secOutcome, 1, "- Policies: admission %s, priority %s, routing %s, scheduler %s, autoscale %s; %s.",
		ctx.Admission, ctx.Priority, ctx.Routing, ctx.Scheduler, ctx.Autoscale, plural.Of(ctx.Instances, "instance"))
	if ctx.Workload != "" {
		d.add(secOutcome, 3, "- Workload: %s.", ctx.Workload)
	}
	d.add(secOutcome, 0, "- Requests: %d arrived, %d completed (%.1f %%), %d rejected, %d dropped, %d timed out, %d still in the system.",
		q.Arrived, q.Completed, pct(q.Completed, q.Arrived), q.Rejected, q.DroppedUnservable+q.RejectedTooLong, q.TimedOut,
		q.AwaitingRouting+q.AwaitingCapacity+q.InTransit+q.StillInAPI+q.StillQueued+q.StillRunning)
	if st := res.Stability; st != nil {
		v := st.Verdict
		if st.Cause != "" {
			v += " (likely cause: " + st.Cause + ")"
		}
		d.add(secOutcome, 0, "- Stability: %s: %s.", v, st.Why)
	}
	d.add(secOutcome, 0, "- Latency (ms): TTFT p50 %.1f, p99 %.1f; ITL p99 %.1f; E2E p99 %.1f.", res.TTFT.P50, res.TTFT.P99, res.ITL.P99, res.E2E.P99)
	if ss := res.SteadyState; ss != nil {
		d.add(secOutcome, 1, "- Steady state (%.1f s of warm-up removed, %s; 95 %% intervals): TTFT p99 %s ms, E2E mean %s ms, %s requests/s.",
			ss.Warmup.RemovedS, ss.Warmup.Rule, ivText(ss.TTFT.P99), ivText(&ss.E2E.Mean), ivText(&ss.RequestsPerS))
	}
	d.add(secOutcome, 1, "- Throughput: %.2f requests/s, %.0f output tokens/s over %.1f s.", res.RequestsPerS, res.OutputTokensPerS, res.DurationS)
	if s := res.SLO; s != nil {
		var per []string
		for _, c := range res.PerSLOClass {
			if c.SLO != nil {
				per = append(per, fmt.Sprintf("%s %.1f %%", c.Class, 100*c.SLO.Attainment))
			}
		}
		d.add(secOutcome, 1, "- SLO attainment: %.1f %% overall (%s).", 100*s.Attainment, strings.Join(per, ", "))
	}
	if f := res.Fairness; f != nil {
		d.add(secOutcome, 3, "- Fairness: Jain's index %.3f over %s.", f.JainIndex, plural.Of(len(f.Tenants), "tenant"))
	}
	d.add(secOutcome, 3, "- Preemptions: %d; prefix cache hit rate %.1f %%.", res.Preemptions, 100*res.PrefixCacheHitRate)
	if f := res.Fleet; f != nil {
		var ups, downs, osc int64
		var mean float64
		for _, p := range f.Pools {
			ups, downs, osc, mean = ups+p.ScaleUps, downs+p.ScaleDowns, osc+p.Oscillations, mean+p.MeanReplicas
		}
		d.add(secOutcome, 2, "- Fleet: %.1f replicas on average, %d scale-ups and %d scale-downs, %.1f GPU-hours, cost %s.", mean, ups, downs, f.GPUHours, deploy.FormatCost(f.Cost))
	}
}

// what each anomaly is, in a few words.
var meaning = map[string]string{
	anomaly.PriorityInversion: "a lower-class request was scheduled while an older higher-class one waited in the same queue",
	anomaly.HOLBlocking:       "a request routed behind a queue while another instance's queue was empty waited too long",
	anomaly.KVThrashing:       "KV blocks offloaded to the CPU were reloaded almost at once",
	anomaly.PreemptionStorm:   "an instance preempted many requests within a short window",
	anomaly.ScaleOscillation:  "the autoscaler reversed its previous action within the window",
	anomaly.PDBackpressure:    "a decode handoff waited at the head of its decode queue for free KV blocks before pulling its KV",
}

// issues writes the key issues and returns the suggestions, most urgent
// first.
func issues(d *doc, ctx Context, res *cluster.Result) []string {
	var focus []string
	q := res.Requests
	n := 0
	issue := func(rank int, format string, args ...any) {
		n++
		d.item(secIssues, rank, format, args...)
	}
	if q.Rejected > 0 {
		var why []string
		for _, r := range q.RejectedBy {
			why = append(why, fmt.Sprintf("%d %s", r.Count, r.Reason))
		}
		issue(0, "ADMISSION: %.1f %% of requests rejected (%s).", pct(q.Rejected, q.Arrived), strings.Join(why, "; "))
		if ctx.Admission == "reject-all" {
			focus = append(focus, "Admission reject-all refuses every request: use always-admit, or a rate-limit or token-bucket sized to the capacity.")
		} else if pct(q.Rejected, q.Arrived) > 5 {
			fix := "raise its capacity or admit by tenant (tenant-quota)"
			if ctx.Admission == "tenant-quota" {
				fix = "raise the tenants' quotas or add capacity"
			}
			focus = append(focus, fmt.Sprintf("Admission %s rejects %.1f %% of requests: %s.", ctx.Admission, pct(q.Rejected, q.Arrived), fix))
		}
	}
	if lost := q.DroppedUnservable + q.RejectedTooLong + q.TimedOut; lost > 0 {
		issue(1, "LOST: %d dropped as unservable, %d too long for the model's context, %d timed out.", q.DroppedUnservable, q.RejectedTooLong, q.TimedOut)
	}
	if a := res.Anomalies; a != nil {
		for _, c := range a.Counters() {
			if c.Count == 0 {
				continue
			}
			issue(0, "%s: %d %s (%s%s).", strings.ToUpper(c.Name), c.Count, c.Unit, meaning[c.Name], thresholds(c.Counter))
			for k, ex := range c.Examples {
				where := ex.Instance
				if where == "" {
					where = ex.Pool
				}
				d.add(secIssues, 2+min(k, 1), "   - t=%.3f s, %s: %s", float64(ex.AtUs)/1e6, where, ex.Detail)
			}
			if s := suggestion(ctx, c.Name); s != "" {
				focus = append(focus, s)
			}
		}
	}
	for _, c := range res.PerSLOClass {
		if c.SLO != nil && c.SLO.Attainment < SLOConcern {
			issue(1, "SLO: class %s attains %.1f %% of its targets (TTFT p99 %.1f ms, %d of %d finished met them).", c.Class, 100*c.SLO.Attainment,
				c.TTFT.P99, c.SLO.Met, c.SLO.Finished)
			focus = append(focus, fmt.Sprintf("Class %s misses its SLO (%.1f %%): %s.", c.Class, 100*c.SLO.Attainment, serveFirst(ctx)))
		}
	}
	if cf := res.Counterfactual; cf != nil && cf.Resolved > 0 {
		share := pct(cf.Improvable, cf.Resolved)
		if share >= 20 && cf.Regret.Mean >= 10 {
			focus = append(focus, fmt.Sprintf("Routing %s: %.0f %% of sampled decisions had a faster alternative (mean TTFT regret %.1f ms): weigh queue depth and KV load more.",
				ctx.Routing, share, cf.Regret.Mean))
		}
	}
	if n == 0 {
		d.add(secIssues, 0, "No anomaly counter fired, nothing was rejected or lost, and every SLO class meets its targets.")
	}
	if len(focus) == 0 {
		focus = append(focus, "Nothing stands out: compare cost (fewer replicas) or tail latency against another bundle.")
	}
	return dedupe(focus)
}

func thresholds(c *anomaly.Counter) string {
	if len(c.Thresholds) == 0 {
		return ""
	}
	var keys []string
	for k := range c.Thresholds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.Thresholds[k]))
	}
	return "; " + strings.Join(parts, ", ")
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// suggestion is what to change for an anomaly, given the bundle.
func suggestion(ctx Context, name string) string {
	switch name {
	case anomaly.PriorityInversion:
		switch {
		case ctx.Priority == "inverted-slo":
			return "Priority inverted-slo ranks batch above realtime: use slo-based."
		case ctx.Scheduler == "reverse-priority":
			return "Scheduler reverse-priority serves the lowest priority first: use priority-fcfs."
		case ctx.Scheduler == "sjf":
			return "Scheduler sjf lets short low-class requests overtake older high-class ones: use priority-fcfs with priority slo-based."
		}
		if ctx.Priority == "slo-based" && ctx.Scheduler == "priority-fcfs" {
			return "Inversions remain with the queue already ordered by SLO class (priority slo-based, scheduler priority-fcfs): higher classes find the batch full of earlier lower-class requests; add capacity, or admit less batch work."
		}
		return "Order the queue by SLO class: " + orderBy(ctx) + "."
	case anomaly.HOLBlocking:
		switch ctx.Routing {
		case "always-busiest":
			return "Routing always-busiest piles requests on one instance while others sit idle: use least-loaded or weighted with queue-depth."
		case "round-robin":
			return "Routing round-robin ignores queue lengths: use least-loaded, or weighted with a queue-depth scorer."
		case "least-loaded":
			return "Routing least-loaded already picks the shortest queue, from signals as stale as the snapshot refresh: refresh them more often (--snapshot-refresh-interval, deployment.router.snapshot_refresh_us) or add capacity."
		}
		return fmt.Sprintf("Routing %s sends requests behind queues while others are empty: weigh the queue-depth scorer more.", ctx.Routing)
	case anomaly.PreemptionStorm:
		return "Instances run out of KV blocks and preempt in bursts: lower max_num_seqs, keep scheduler_reserve_full_isl on, add KV memory, or admit less."
	case anomaly.KVThrashing:
		return "Offloaded KV blocks come straight back: raise the GPU cache or the offload threshold, or route shared prefixes to where they are cached."
	case anomaly.ScaleOscillation:
		return fmt.Sprintf("Autoscaler %s reverses itself within the oscillation window: lengthen its stabilization window or cooldown.", ctx.Autoscale)
	case anomaly.PDBackpressure:
		return "Decode instances lack free KV blocks for the handoffs: add decode replicas or KV memory, or prefill fewer requests remotely (a higher prefix threshold)."
	}
	return ""
}

// orderBy is what is missing, of priority slo-based and scheduler
// priority-fcfs, to serve requests by SLO class.
func orderBy(ctx Context) string {
	switch {
	case ctx.Priority == "slo-based" && ctx.Scheduler != "priority-fcfs":
		return "scheduler priority-fcfs (priority slo-based is set, but the scheduler " + ctx.Scheduler + " ignores it)"
	case ctx.Priority != "slo-based" && ctx.Scheduler == "priority-fcfs":
		return "priority slo-based (the scheduler priority-fcfs is set, but priority " + ctx.Priority + " does not rank by class)"
	}
	return "scheduler priority-fcfs with priority slo-based"
}

// serveFirst is what to do for a class that misses its SLO, given what
// the bundle already does.
func serveFirst(ctx Context) string {
	if ctx.Priority == "slo-based" && ctx.Scheduler == "priority-fcfs" {
		return "it is already served first (priority slo-based, scheduler priority-fcfs): add capacity, or admit less of the other classes"
	}
	return "serve it first (" + orderBy(ctx) + ") or add capacity"
}

func worst(d *doc, res *cluster.Result) {
	cf := res.Counterfactual
	if cf == nil {
		d.add(secWorst, 1, "No decision was simulated: run with --counterfactual-sample (a rate such as 0.05, or every:N) to rank routing decisions by TTFT regret.")
		return
	}
	if len(cf.Worst) == 0 {
		d.add(secWorst, 1, "No sampled decision could be resolved (%d sampled).", cf.Sampled)
		return
	}
	for k, w := range cf.Worst {
		d.item(secWorst, 1+min(k, 2), "t=%.3f s, request %d -> %s (%s): TTFT %.1f ms; %s (%s) would have given %.1f ms: regret %.1f ms.",
			float64(w.AtUs)/1e6, w.Request, w.Chosen, load(w.ChosenLoad), w.ChosenTTFTMs, w.Best, load(w.BestLoad), w.BestTTFTMs, w.RegretMs)
	}
}

func load(l cluster.Load) string {
	return fmt.Sprintf("queue %d, in flight %d, KV %.0f %%", l.QueueDepth, l.InFlight, 100*l.KVUtilization)
}

func counterfactual(d *doc, res *cluster.Result) {
	cf := res.Counterfactual
	if cf == nil {
		return
	}
	d.add(secCounterfactual, 1, "- Sampled %d of %d routing decisions (%s, %d alternatives each); %d resolved.", cf.Sampled, cf.Decisions, cf.Sample, cf.K, cf.Resolved)
	if cf.Resolved == 0 {
		return
	}
	d.add(secCounterfactual, 1, "- TTFT regret (ms): mean %.1f, p50 %.1f, p90 %.1f, max %.1f; %.1f %% of resolved decisions had a faster alternative.",
		cf.Regret.Mean, cf.Regret.P50, cf.Regret.P90, cf.Regret.Max, pct(cf.Improvable, cf.Resolved))
	d.add(secCounterfactual, 2, "- Mean TTFT (ms): chosen %.1f, best alternative %.1f (each simulated from the decision's state, no later arrivals).",
		cf.ChosenTTFT.Mean, cf.BestTTFT.Mean)
}

// render writes the kept lines, each section under its header.
func render(lines []line, keep []bool) string {
	var b strings.Builder
	sec, num := -1, 0
	for i, l := range lines {
		if !keep[i] {
			continue
		}
		if l.section != sec {
			sec, num = l.section, 0
			if h := headers[sec]; h != "" {
				b.WriteString("\n" + h + "\n\n")
			}
		}
		if l.numbered {
			num++
			b.WriteString(strconv.Itoa(num))
			b.WriteString(". ")
		}
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// fit keeps as many lines as the budget allows: the least important
// (highest rank) go first, the last of them first, and a closing note
// says the summary was truncated and how many lines were left out. Whole
// lines go, so what is kept is valid Markdown: a section whose lines all
// went loses its header too. The title and the note alone fit any budget
// of at least MinMaxTokens.
func fit(lines []line, budget int) string {
	keep := make([]bool, len(lines))
	for i := range keep {
		keep[i] = true
	}
	out := render(lines, keep)
	if Tokens(out) <= budget {
		return out
	}
	dropped := 0
	note := func() string {
		return fmt.Sprintf("\n_Truncated: %d lines left out to stay within %d tokens._\n", dropped, budget)
	}
	for Tokens(out)+Tokens(note()) > budget {
		victim := -1
		for i := len(lines) - 1; i > 0; i-- { // the title stays
			if keep[i] && (victim < 0 || lines[i].rank > lines[victim].rank) {
				victim = i
			}
		}
		if victim < 0 {
			break
		}
		keep[victim] = false
		dropped++
		out = render(lines, keep)
	}
	return out + note()
}

// ivText is an estimate with its interval, "120.5 [110.2, 130.8]", or
// the estimate alone without one ("–" when absent).
func ivText(iv *steady.Interval) string {
	if iv == nil {
		return "–"
	}
	if !iv.Has() {
		return fmt.Sprintf("%.4g (no interval: too few requests)", iv.Estimate)
	}
	return fmt.Sprintf("%.4g [%.4g, %.4g]", iv.Estimate, iv.Low, iv.High)
}
