package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim/workload"
	"github.com/blis-sim/blis/summary"
)

// cfRun runs text with run.counterfactual_sample sample ("" for none) and
// returns the report and the output files, by key.
func cfRun(t *testing.T, text, sample string, workers int) (string, map[string]string) {
	t.Helper()
	d, err := Parse([]byte(text), "x.yaml")
	require.NoError(t, err)
	if sample != "" {
		require.NoError(t, d.Set("run.counterfactual_sample", sample, "test"))
	}
	require.NoError(t, d.Set("run.workers", fmt.Sprint(workers), "test"))
	e, err := d.Resolve()
	require.NoError(t, err)
	s := &MemSinks{}
	res, err := Run(context.Background(), e, s)
	require.NoError(t, err)
	require.True(t, s.Committed)
	var b bytes.Buffer
	require.NoError(t, res.WriteJSON(&b))
	files := map[string]string{}
	for k, f := range s.Files {
		files[k] = f.String()
	}
	return b.String(), files
}

// withoutCounterfactual drops the report's counterfactual section and the
// decision trace's counterfactual records: what sampling adds.
func withoutCounterfactual(t *testing.T, report string, files map[string]string) (string, map[string]string) {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(report), &doc))
	delete(doc["metrics"].(map[string]any), "counterfactual")
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	out := map[string]string{}
	for k, f := range files {
		if k == "run.outputs.decision_trace" {
			var keep []string
			for _, l := range strings.SplitAfter(f, "\n") {
				if !strings.Contains(l, `"type":"counterfactual"`) {
					keep = append(keep, l)
				}
			}
			f = strings.Join(keep, "")
		}
		out[k] = f
	}
	return string(b), out
}

// cfExperiment is a loaded cluster (4 instances at 40 requests/s, queues
// form) with every output a cluster run writes but the summary, which
// reports the counterfactual.
const cfExperiment = `version: 1
deployment: {pools: [{replicas: 4, vllm: {total_kv_blocks_gpu: 3000}}]}
workload: {synthetic: {requests: 1500, rate: 40}}
policies: {routing: {type: weighted}}
run:
  trace_level: detailed
  window: 10s
  outputs: {decision_trace: d.jsonl, window_out: w.csv}
`

// TestCounterfactualLeavesTheRunAlone: sampling routing decisions for
// TTFT regret (every 5th, or each with probability 0.3 from its own
// random stream) changes nothing of the run but the counterfactual
// section and records: the report's every other byte, the detailed
// decision trace and the windows are those of the run without it. And
// the counterfactual is deterministic: the same run twice, or with
// another number of workers, gives the same bytes.
func TestCounterfactualLeavesTheRunAlone(t *testing.T) {
	plainRep, plainFiles := cfRun(t, cfExperiment, "", 1)
	require.NotContains(t, plainRep, `"counterfactual"`)
	for _, sample := range []string{"every:5", "0.3"} {
		rep, files := cfRun(t, cfExperiment, sample, 1)
		var doc struct {
			Metrics struct {
				Counterfactual struct {
					Sampled, Resolved, Improvable int64
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(rep), &doc))
		cf := doc.Metrics.Counterfactual
		require.Positive(t, cf.Resolved, sample)
		require.Positive(t, cf.Improvable, sample)
		require.Equal(t, int(cf.Sampled), strings.Count(files["run.outputs.decision_trace"], `"type":"counterfactual"`))
		r, f := withoutCounterfactual(t, rep, files)
		pr, pf := withoutCounterfactual(t, plainRep, plainFiles)
		require.Equal(t, pr, r, "%s: the report", sample)
		require.Equal(t, len(pf), len(f))
		for k := range pf {
			require.Equal(t, pf[k], f[k], "%s: %s", sample, k)
		}
		again, againFiles := cfRun(t, cfExperiment, sample, 2)
		require.Equal(t, rep, again, "%s: deterministic", sample)
		require.Equal(t, files, againFiles, "%s: deterministic", sample)
	}
}

// scenarioRuns are every built-in scenario (--scenario's workload
// scenarios and built-in experiments) as summaries are tested on them:
// as shipped, and on 3 instances at twice the rate with every 50th routing decision
// simulated (so that the worst decisions and counterfactual sections
// have content). diurnal-autoscale stops after 10 of its 120 minutes
// (its ramp up and first scale-ups) and samples every 200th decision, to
// keep the test short.
func scenarioRuns(t *testing.T) map[string]string {
	runs := map[string]string{}
	for _, s := range workload.Scenarios() {
		runs[s] = "version: 1\nworkload: {scenario: " + s + "}\nrun: {outputs: {summary: s.md}}\n"
		runs[s+"/3-instances"] = "version: 1\ndeployment: {pools: [{replicas: 3}]}\nworkload: {scenario: " + s + ", rate_scale: 2}\nrun: {counterfactual_sample: \"every:50\", outputs: {summary: s.md}}\n"
	}
	for _, s := range Scenarios() {
		data, err := ScenarioText(s)
		require.NoError(t, err)
		sample := `counterfactual_sample: "every:200", `
		if strings.Contains(string(data), "\n  disaggregation:") {
			sample = "" // counterfactuals are refused under disaggregation
		}
		runs[s] = string(data) + "run: {horizon_s: 600, " + sample + "outputs: {summary: s.md}}\n"
	}
	return runs
}

// TestSummaryOnEveryScenario: on every built-in scenario the summary the
// run writes is within its budget (the default, 250, and the smallest allowed,
// 100), valid Markdown that says when it was truncated, and
// the same bytes across two runs and for 1 or 2 workers.
func TestSummaryOnEveryScenario(t *testing.T) {
	runs := scenarioRuns(t)
	require.Len(t, runs, 2*len(workload.Scenarios())+len(Scenarios()))
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		text := runs[name]
		t.Run(name, func(t *testing.T) {
			var sums []string
			for _, workers := range []int{1, 2} {
				_, files := cfRun(t, text, "", workers)
				sums = append(sums, files["run.outputs.summary"])
			}
			s := sums[0]
			require.Equal(t, s, sums[1], "byte-identical across runs and workers")
			require.LessOrEqual(t, summary.Tokens(s), summary.DefaultMaxTokens)
			require.True(t, strings.HasPrefix(s, "# Run summary\n\n## Outcome\n"), s)
			for _, budget := range []int{summary.MinMaxTokens, 250} {
				d, err := Parse([]byte(text), "x.yaml")
				require.NoError(t, err)
				require.NoError(t, d.Set("run.summary_max_tokens", fmt.Sprint(budget), "test"))
				e, err := d.Resolve()
				require.NoError(t, err)
				ms := &MemSinks{}
				_, err = Run(context.Background(), e, ms)
				require.NoError(t, err)
				got := ms.Files["run.outputs.summary"].String()
				require.LessOrEqual(t, summary.Tokens(got), budget, "budget %d:\n%s", budget, got)
				require.True(t, strings.HasPrefix(got, "# Run summary\n"))
				if summary.Tokens(s) > budget {
					require.Contains(t, got, "_Truncated: ", "budget %d", budget)
				}
			}
		})
	}
}

// TestSummaryFileOnlyOnSuccess: the summary is written to a temporary
// file and renamed into place when the run succeeds; a cancelled run
// leaves neither it nor a temporary file.
func TestSummaryFileOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "s.md")
	text := "version: 1\ndeployment: {pools: [{replicas: 2}]}\nworkload: {synthetic: {requests: 100000, rate: 1000}}\nrun: {outputs: {summary: " + out + "}}\n"
	e, err := parse(t, text)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Run(ctx, e, nil)
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no summary, no temporary file")

	e, err = parse(t, strings.Replace(text, "requests: 100000", "requests: 200", 1))
	require.NoError(t, err)
	_, err = Run(context.Background(), e, nil)
	require.NoError(t, err)
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "# Run summary\n"))
}
