package summary

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/anomaly"
)

// busyResult is a run where everything went wrong: every anomaly fired
// with examples, requests were rejected and lost, a class misses its SLO,
// and the counterfactual found regret.
func busyResult() *cluster.Result {
	res := &cluster.Result{DurationS: 300, RequestsPerS: 9.5, OutputTokensPerS: 2400, Preemptions: 812}
	res.Requests = cluster.Counts{Arrived: 3000, Admitted: 2800, Rejected: 200, Completed: 2700, DroppedUnservable: 30, TimedOut: 70,
		RejectedBy: []cluster.ReasonCount{{Reason: "token bucket empty", Count: 200}}}
	res.TTFT.P50, res.TTFT.P99, res.ITL.P99, res.E2E.P99 = 120.5, 4100.25, 45, 39000
	res.SLO = &cluster.Attainment{Finished: 2700, Met: 2000, Attainment: 0.74}
	for k, c := range []string{"realtime", "interactive", "batch"} {
		cr := cluster.ClassResult{Class: c, Arrived: 1000, Completed: 900, SLO: &cluster.Attainment{Finished: 900, Met: int64(500 + 150*k)}}
		cr.SLO.Attainment = float64(cr.SLO.Met) / 900
		cr.TTFT.P99 = 3000 - 1000*float64(k)
		res.PerSLOClass = append(res.PerSLOClass, cr)
	}
	rep := anomaly.NewReport(anomaly.DefaultThresholds())
	for k, c := range rep.Counters() {
		for j := range 5 {
			c.Add(int64(10*k+1), anomaly.Example{AtUs: int64(1_000_000*j + 7), Instance: fmt.Sprintf("instance_%d", j%4), Requests: []int64{int64(j), int64(j + 100)},
				Detail: fmt.Sprintf("a sentence that says what %s example %d was, long enough to cost tokens", c.Name, j)}, j%4)
		}
	}
	res.Anomalies = rep
	cf := &cluster.CounterfactualResult{Sample: "every:10", K: 3, Decisions: 3000, Sampled: 300, Resolved: 290, Improvable: 150}
	cf.Regret.Mean, cf.Regret.P50, cf.Regret.P90, cf.Regret.Max = 52.5, 10, 130, 2900
	cf.ChosenTTFT.Mean, cf.BestTTFT.Mean = 400, 347.5
	for j := range 5 {
		cf.Worst = append(cf.Worst, cluster.CounterfactualDecision{AtUs: int64(j) * 3_000_000, Request: int64(40 * j), Chosen: "instance_1", ChosenTTFTMs: 3000 - float64(j),
			Best: "instance_2", BestTTFTMs: 100, RegretMs: 2900 - float64(j), ChosenLoad: cluster.Load{QueueDepth: 30, InFlight: 60, KVUtilization: 0.9}})
	}
	res.Counterfactual = cf
	return res
}

var busyCtx = Context{Admission: "token-bucket", Priority: "inverted-slo", Routing: "always-busiest", Scheduler: "priority-fcfs", Autoscale: "oscillator",
	Instances: 4, Workload: "spec scenario mixed-slo: 3 tenants"}

// markdownLine is what a summary's lines look like: a header, a bullet
// (perhaps indented under a numbered item), a numbered item, the
// truncation note, or a sentence.
var markdownLine = regexp.MustCompile(`^(# Run summary|## [A-Z][^\n]*|- \S.*|   - \S.*|\d+\. \S.*|_Truncated: \d+ lines left out to stay within \d+ tokens\._|[A-Z][^\n]*)$`)

// checkMarkdown: the text is made of whole lines of those forms, starts
// with the title, has a blank line before each header, and no header
// without lines under it.
func checkMarkdown(t *testing.T, s string) {
	t.Helper()
	require.True(t, strings.HasPrefix(s, "# Run summary\n"), "%q", s)
	require.True(t, strings.HasSuffix(s, "\n"))
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l == "" {
			continue
		}
		require.Regexp(t, markdownLine, l, "line %d", i+1)
		if strings.HasPrefix(l, "## ") {
			require.Equal(t, "", lines[i-1], "a blank line before %q", l)
			require.Less(t, i+2, len(lines), "%q ends the text", l)
			require.Equal(t, "", lines[i+1])
			require.NotEqual(t, "", lines[i+2], "%q has lines under it", l)
			require.False(t, strings.HasPrefix(lines[i+2], "## "))
		}
	}
}

// TestBudgetIsObeyed: at every budget from the smallest up, the summary
// is within it, valid, says when it was truncated, and keeps the most
// important lines longest.
func TestBudgetIsObeyed(t *testing.T) {
	res := busyResult()
	full := Markdown(busyCtx, res, MaxMaxTokens)
	require.NotContains(t, full, "Truncated")
	checkMarkdown(t, full)
	prev := ""
	for budget := MinMaxTokens; budget <= Tokens(full)+10; budget += 7 {
		s := Markdown(busyCtx, res, budget)
		require.LessOrEqual(t, Tokens(s), budget, "budget %d:\n%s", budget, s)
		checkMarkdown(t, s)
		if Tokens(full) > budget {
			require.Contains(t, s, "_Truncated: ", "budget %d", budget)
			require.Contains(t, s, fmt.Sprintf("within %d tokens._", budget))
		} else {
			require.Equal(t, full, s)
		}
		require.Contains(t, s, "- Requests: 3000 arrived", "the outcome stays at budget %d", budget)
		require.GreaterOrEqual(t, len(s), len(prev)-80, "a larger budget keeps about as much")
		prev = s
	}
	// Below the smallest budget, the smallest is used.
	require.Equal(t, Markdown(busyCtx, res, MinMaxTokens), Markdown(busyCtx, res, 1))
	require.Equal(t, Markdown(busyCtx, res, MinMaxTokens), Markdown(busyCtx, res, -5))
}

// TestFullSummary: every section and every anomaly is there when the
// budget allows, with its examples and thresholds.
func TestFullSummary(t *testing.T) {
	s := Markdown(busyCtx, busyResult(), MaxMaxTokens)
	for _, want := range []string{"## Outcome", "## Key issues", "## Worst decisions (TTFT regret)", "## Counterfactual findings", "## Suggested focus",
		"PRIORITY_INVERSION: 5 schedulings", "HOL_BLOCKING: 55 requests", "min_wait_us 1000000", "KV_THRASHING", "PREEMPTION_STORM",
		"min_preemptions 10, window_us 1000000", "SCALE_OSCILLATION", "PD_BACKPRESSURE", "ADMISSION: 6.7 % of requests rejected",
		"request 0 -> instance_1", "regret 2900.0 ms", "Priority inverted-slo ranks batch above realtime", "Routing always-busiest",
		"Autoscaler oscillator", "4 instances", "Decode instances lack free KV blocks"} {
		require.Contains(t, s, want)
	}
	require.Equal(t, s, Markdown(busyCtx, busyResult(), MaxMaxTokens), "deterministic")
	require.Equal(t, -1, strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 }), "ASCII only")
}

// TestQuietRun: a run where nothing went wrong says so.
func TestQuietRun(t *testing.T) {
	res := &cluster.Result{Requests: cluster.Counts{Arrived: 10, Completed: 10}, Anomalies: anomaly.NewReport(anomaly.DefaultThresholds())}
	s := Markdown(Context{Admission: "always-admit", Priority: "constant", Routing: "least-loaded", Scheduler: "fcfs", Autoscale: "none", Instances: 1}, res, DefaultMaxTokens)
	checkMarkdown(t, s)
	require.Contains(t, s, "No anomaly counter fired")
	require.Contains(t, s, "run with --counterfactual-sample")
	require.Contains(t, s, "1 instance.")
}

// TestListsStayNumbered: an ordered list whose middle items were left out
// is numbered 1, 2, … as kept.
func TestListsStayNumbered(t *testing.T) {
	for budget := MinMaxTokens; budget < 2000; budget += 13 {
		s := Markdown(busyCtx, busyResult(), budget)
		want := 1
		for _, l := range strings.Split(s, "\n") {
			switch {
			case strings.HasPrefix(l, "## "):
				want = 1
			case regexp.MustCompile(`^\d+\. `).MatchString(l):
				require.True(t, strings.HasPrefix(l, fmt.Sprintf("%d. ", want)), "budget %d: %q", budget, l)
				want++
			}
		}
	}
}
