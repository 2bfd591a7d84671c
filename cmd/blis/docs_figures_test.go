package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/docs"
)

// The figures the README and the guides quote from blis run, recomputed:
// a stale one fails naming the command that regenerates it
// (scripts/regen-docs.sh runs them all).
const docsRegen = "go test ./cmd/blis -run Docs -update"

func docsRoot(t *testing.T) string {
	t.Helper()
	root, err := docs.Root()
	require.NoError(t, err)
	return root
}

// jsonAt is the value at a dotted path of a decoded JSON object.
func jsonAt(t *testing.T, v any, path string) any {
	t.Helper()
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%s: %s is not an object", path, k)
		v, ok = m[k]
		require.True(t, ok, "%s: no %s", path, k)
	}
	return v
}

// sig3 writes x with three significant digits, thousands separated
// (44.2, 9.04, 2,340, 0.240), and a whole number whole (8,192).
func sig3(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return commas(x)
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(x))))
	if digits < 0 {
		p := math.Pow(10, float64(-digits))
		x = math.Round(x/p) * p
		digits = 0
	}
	s := strconv.FormatFloat(x, 'f', digits, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	for i := len(intPart) - 3; i > 0; i -= 3 {
		intPart = intPart[:i] + "," + intPart[i:]
	}
	if neg {
		intPart = "-" + intPart
	}
	if frac != "" {
		return intPart + "." + frac
	}
	return intPart
}

// TestDocsOutputFields: the README's table of the main job's output
// fields, with their values in the main job (go run ./cmd/blis run).
func TestDocsOutputFields(t *testing.T) {
	out, _, err := runCLI(t, "run")
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	num := func(path string) float64 { return jsonAt(t, r, path).(float64) }
	str := func(path string) string { return jsonAt(t, r, path).(string) }
	dist := func(path string) string {
		return "mean " + sig3(num(path+".mean")) + ", p50 " + sig3(num(path+".p50")) + ", p99 " + sig3(num(path+".p99"))
	}
	interval := func(path string) string {
		return sig3(num(path+".estimate")) + " (95 % interval " + sig3(num(path+".ci_low")) + " to " + sig3(num(path+".ci_high")) + ")"
	}
	rows := [][3]string{
		{"`config`", fmt.Sprintf("%s on %s, TP %.0f, latency model %s", str("config.model"), str("config.hardware"), num("config.tp"), str("config.latency")),
			"the run as resolved: model, GPU, TP, vLLM settings (`config.vllm`), latency model, workload, seed; `--print-config` writes it as an experiment file"},
		{"`metrics.requests`", sig3(num("metrics.requests.offered")) + " offered, " + sig3(num("metrics.requests.completed")) + " completed",
			"what became of every request: offered, injected, completed, dropped, still waiting or running when the run ended"},
		{"`metrics.ttft_ms`", dist("metrics.ttft_ms"), "time to first token, ms, from the request's arrival: count, mean, min, p50, p90, p95, p99, max"},
		{"`metrics.itl_ms`", dist("metrics.itl_ms"), "inter-token latency, ms: the gaps between a request's consecutive output tokens"},
		{"`metrics.e2e_ms`", dist("metrics.e2e_ms"), "arrival to last token, ms"},
		{"`metrics.scheduling_delay_ms`", dist("metrics.scheduling_delay_ms"), "arrival to the first step that schedules the request, ms: time queued"},
		{"`metrics.requests_per_s`, `output_tokens_per_s`", sig3(num("metrics.requests_per_s")) + ", " + sig3(num("metrics.output_tokens_per_s")),
			"throughput over the whole run"},
		{"`metrics.preemptions`", sig3(num("metrics.preemptions")), "requests evicted to free KV blocks and recomputed later, as vLLM preempts"},
		{"`metrics.prefix_cache_hit_rate`", sig3(num("metrics.prefix_cache_hit_rate")), "the share of prompt tokens found in the prefix cache"},
		{"`metrics.stability.verdict`", "`" + str("metrics.stability.verdict") + "`",
			"`stable`: the number of requests in the system does not grow; `unstable`: it grows, and `cause` says why (`capacity`: more load than the fleet serves; `imbalance`: the router overloads some instances while others keep up); `indeterminate`: the run is too short to tell, `needed_s` says how long would"},
		{"`metrics.steady_state.warmup`", sig3(num("metrics.steady_state.warmup.removed_s")) + " s removed",
			"the warm-up left out of the steady-state estimates (found by the MSER-5 rule; `--warmup` sets it)"},
		{"`metrics.steady_state.ttft_ms.mean`", interval("metrics.steady_state.ttft_ms.mean"),
			"an estimate after the warm-up with its 95 % interval (`ci_low`, `ci_high`); likewise E2E, ITL, scheduling delay, throughput and SLO attainment ([docs/statistics.md](docs/statistics.md))"},
	}
	var b strings.Builder
	b.WriteString("| field | the main job | what it is |\n|---|---|---|\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "output-fields", b.String(), "README.md")
}

// TestDocsDefaultRun: what docs/getting-started.md says the main job
// simulates, from its config.
func TestDocsDefaultRun(t *testing.T) {
	out, _, err := runCLI(t, "run", "--print-config")
	require.NoError(t, err)
	require.Contains(t, out, "replicas: 1") // the main job is one instance
	run, _, err := runCLI(t, "run")
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(run), &r))
	num := func(path string) string { return sig3(jsonAt(t, r, path).(float64)) }
	str := func(path string) string { return fmt.Sprint(jsonAt(t, r, path)) }
	yes := func(path string, what string) string {
		if jsonAt(t, r, path).(bool) {
			return what + " on"
		}
		return what + " off"
	}
	text := fmt.Sprintf("It simulates %s on one %s at TP %s with vLLM's default settings (at most %s sequences and %s batched tokens a step, %s, %s, "+
		"%s KV blocks of %s tokens in %s %% of the GPU's memory), with step times from the %s latency model (`%s`), serving this workload: `%s`.\n",
		str("config.model"), str("config.hardware"), num("config.tp"), num("config.vllm.max_num_seqs"), num("config.vllm.max_batched_tokens"),
		yes("config.vllm.chunked_prefill_enabled", "chunked prefill"), yes("config.vllm.prefix_caching_enabled", "prefix caching"),
		num("config.vllm.total_kv_blocks_gpu"), num("config.vllm.block_size_tokens"), sig3(100*jsonAt(t, r, "config.vllm.gpu_memory_utilization").(float64)),
		str("config.latency"), str("config.coefficients"), str("config.workload"))
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "default-run", text, "docs/getting-started.md")
}

// TestDocsMixtralOffload: the Mixtral run of docs/getting-started.md
// offloads to its CPU tier.
func TestDocsMixtralOffload(t *testing.T) {
	out, _, err := runCLI(t, "run", "--model", "mixtral-8x7b", "--hardware", "a100-80gb", "--tp", "4", "--kv-blocks-gpu", "3000", "--kv-blocks-cpu", "50000")
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	stored := jsonAt(t, r, "metrics.kv_offload.stored_blocks").(float64)
	require.Greater(t, stored, 0.0, "the Mixtral example must offload")
	text := fmt.Sprintf("The Mixtral run's GPU cache of 3,000 blocks is too small for its batch, so vLLM's CPU offloading keeps what it evicts: "+
		"`metrics.kv_offload` shows %s blocks stored to the CPU tier, %s reloaded from it and %s evicted from it.\n",
		commas(stored), commas(jsonAt(t, r, "metrics.kv_offload.reloaded_blocks").(float64)), commas(jsonAt(t, r, "metrics.kv_offload.cpu_evictions").(float64)))
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "mixtral-offload", text, "docs/getting-started.md")
}

// commas writes a whole number with thousands separated: 16,832.
func commas(x float64) string {
	s := strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// runJSON runs blis with args and decodes its report.
func runJSON(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	out, stderr, err := runCLI(t, args...)
	require.NoError(t, err, stderr)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return r, stderr
}

func f64(t *testing.T, r any, path string) float64 {
	t.Helper()
	v, ok := jsonAt(t, r, path).(float64)
	require.True(t, ok, "%s is not a number", path)
	return v
}

// TestDocsRoutingTable: docs/guides/routing.md's prefix-aware routing
// table and the figures under it, from its three runs.
func TestDocsRoutingTable(t *testing.T) {
	policies := []string{"round-robin", "least-loaded", "weighted"}
	reports := map[string]map[string]any{}
	var b strings.Builder
	b.WriteString("| `--routing-policy` | prefix-cache hit rate | TTFT mean | TTFT p99 | E2E mean | preemptions | stability |\n|---|---|---|---|---|---|---|\n")
	for _, p := range policies {
		r, _ := runJSON(t, "run", "-q", "--num-instances", "4", "--routing-policy", p, "--rate", "20", "--requests", "4000", "--kv-blocks-gpu", "6000",
			"--prefix-groups", "48", "--prefix-tokens", "3072", "--prefix-fraction", "0.9", "--prompt-tokens", "lognormal:mean=4000,cv=0.3,max=16384")
		reports[p] = r
		label := p
		if p == "weighted" {
			cfg, _, err := runCLI(t, "run", "--num-instances", "4", "--routing-policy", p, "--print-config")
			require.NoError(t, err)
			require.Contains(t, cfg, "scorers: {prefix-affinity: 3, queue-depth: 2, kv-utilization: 2}")
			label = "weighted (`prefix-affinity:3,queue-depth:2,kv-utilization:2`)"
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s ms | %s ms | %s s | %s | `%s` |\n", label, f64(t, r, "metrics.prefix_cache_hit_rate"),
			commas(f64(t, r, "metrics.ttft_ms.mean")), commas(f64(t, r, "metrics.ttft_ms.p99")), strconv.FormatFloat(f64(t, r, "metrics.e2e_ms.mean")/1e3, 'f', 2, 64),
			commas(f64(t, r, "metrics.preemptions")), jsonAt(t, r, "metrics.stability.verdict"))
	}
	root := docsRoot(t)
	docs.CheckBlock(t, root, *update, docsRegen, "routing-table", b.String(), "docs/guides/routing.md")

	rr, w := reports["round-robin"], reports["weighted"]
	ratio := func(path string) string {
		lo, hi := f64(t, w, path), math.Min(f64(t, rr, path), f64(t, reports["least-loaded"], path))
		return strconv.FormatFloat(hi/lo, 'f', 0, 64)
	}
	minMax := func(path string) (lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, in := range jsonAt(t, w, "metrics.instances").([]any) {
			v := f64(t, in, path)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		return lo, hi
	}
	nLo, nHi := minMax("routed")
	hLo, hHi := minMax("metrics.prefix_cache_hit_rate")
	figures := fmt.Sprintf("Prefix-aware routing raises the hit rate from %.3f (round-robin) to %.3f, cuts the mean TTFT at least %s-fold and its p99 at least %s-fold, "+
		"and preemptions fall from %s to %s. Behind `weighted` each instance got %s to %s requests, with hit rates %.3f to %.3f.\n",
		f64(t, rr, "metrics.prefix_cache_hit_rate"), f64(t, w, "metrics.prefix_cache_hit_rate"), ratio("metrics.ttft_ms.mean"), ratio("metrics.ttft_ms.p99"),
		commas(f64(t, rr, "metrics.preemptions")), commas(f64(t, w, "metrics.preemptions")), commas(nLo), commas(nHi), hLo, hHi)
	docs.CheckBlock(t, root, *update, docsRegen, "routing-figures", figures, "docs/guides/routing.md")
}

// TestDocsAlwaysBusiest: docs/guides/routing.md's unstable run is an
// imbalance, and the warning says so; the same load behind least-loaded
// is stable.
func TestDocsAlwaysBusiest(t *testing.T) {
	args := []string{"run", "--num-instances", "4", "--rate", "40", "--requests", "8000"}
	r, stderr := runJSON(t, append(args, "--routing-policy", "always-busiest")...)
	require.Equal(t, "unstable", jsonAt(t, r, "metrics.stability.verdict"))
	require.Equal(t, "imbalance", jsonAt(t, r, "metrics.stability.cause"))
	i := strings.Index(stderr, "likely cause: ")
	require.True(t, i >= 0, stderr)
	cause, _, _ := strings.Cut(stderr[i:], "\n")
	require.NotContains(t, cause, "add instances;")
	var routed []string
	for _, in := range jsonAt(t, r, "metrics.instances").([]any) {
		routed = append(routed, commas(f64(t, in, "routed")))
	}
	ll, _ := runJSON(t, append(args, "--routing-policy", "least-loaded")...)
	require.Equal(t, "stable", jsonAt(t, ll, "metrics.stability.verdict"))
	text := fmt.Sprintf("The instances got %s requests. `metrics.stability` says `%s` with `cause: %s`, and stderr's warning ends: \"%s\".\n",
		strings.Join(routed, ", "), jsonAt(t, r, "metrics.stability.verdict"), jsonAt(t, r, "metrics.stability.cause"), cause)
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "busiest-figures", text, "docs/guides/routing.md")
}

// TestDocsWindows: docs/guides/routing.md's run over time, from its
// windows file.
func TestDocsWindows(t *testing.T) {
	csvPath := t.TempDir() + "/windows.csv"
	_, _, err := runCLI(t, "run", "-q", "--num-instances", "4", "--routing-policy", "weighted", "--rate", "40", "--requests", "6000", "--arrival", "gamma", "--gamma-cv", "4",
		"--max-num-seqs", "32", "--window", "5s", "--window-out", csvPath)
	require.NoError(t, err)
	rows := readCSV(t, csvPath)
	require.Greater(t, len(rows), 2)
	col := func(name string) int {
		for i, c := range rows[0] {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	q, p99 := col("queue_depth"), col("ttft_p99_ms")
	maxQ, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for _, row := range rows[1:] {
		v, err := strconv.ParseFloat(row[q], 64)
		require.NoError(t, err)
		maxQ = math.Max(maxQ, v)
		if row[p99] == "" {
			continue
		}
		x, err := strconv.ParseFloat(row[p99], 64)
		require.NoError(t, err)
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	text := fmt.Sprintf("The %d rows show each burst: up to %s requests waiting at a window's end, and a TTFT p99 from %s to %s s across the windows, the highest where a burst's requests finish.\n",
		len(rows)-1, commas(maxQ), strconv.FormatFloat(lo/1e3, 'f', 2, 64), strconv.FormatFloat(hi/1e3, 'f', 1, 64))
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "window-figures", text, "docs/guides/routing.md")
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	return rows
}

// sloClass is the per_slo_class entry of class name.
func sloClass(t *testing.T, r any, name string) any {
	t.Helper()
	for _, c := range jsonAt(t, r, "metrics.per_slo_class").([]any) {
		if c.(map[string]any)["slo_class"] == name {
			return c
		}
	}
	t.Fatalf("no SLO class %s", name)
	return nil
}

// TestDocsMixedSLO: docs/guides/capacity-planning.md's table of the
// mixed-slo scenario on 1, 2 and 3 instances, and its figures.
func TestDocsMixedSLO(t *testing.T) {
	var b strings.Builder
	b.WriteString("| instances | SLO attainment (all) | realtime | interactive | batch | realtime TPOT p50 / p99 | goodput | stability |\n|---|---|---|---|---|---|---|---|\n")
	var realtime []float64
	var tpot50 []float64
	var target float64
	for n := 1; n <= 3; n++ {
		r, _ := runJSON(t, "run", "-q", "--scenario", "mixed-slo", "--num-instances", strconv.Itoa(n), "--routing-policy", "least-loaded")
		rt := sloClass(t, r, "realtime")
		realtime = append(realtime, f64(t, rt, "slo.attainment"))
		tpot50 = append(tpot50, f64(t, rt, "tpot_ms.p50"))
		target = f64(t, rt, "slo.tpot_target_ms")
		fmt.Fprintf(&b, "| %d | %.3f | %.3f | %.3f | %.3f | %.1f / %.1f ms | %.2f req/s | `%s` |\n", n, f64(t, r, "metrics.slo.attainment"),
			f64(t, rt, "slo.attainment"), f64(t, sloClass(t, r, "interactive"), "slo.attainment"), f64(t, sloClass(t, r, "batch"), "slo.attainment"),
			f64(t, rt, "tpot_ms.p50"), f64(t, rt, "tpot_ms.p99"), f64(t, r, "metrics.slo.goodput_rps"), jsonAt(t, r, "metrics.stability.verdict"))
	}
	root := docsRoot(t)
	docs.CheckBlock(t, root, *update, docsRegen, "mixed-slo-table", b.String(), "docs/guides/capacity-planning.md")
	text := fmt.Sprintf("On one instance the realtime tenant's median TPOT is %.1f ms against its %s ms target, and %.0f %% of its requests miss; "+
		"a second instance brings its median TPOT to %.1f ms and its attainment to %.0f %%, a third to %.0f %%.\n",
		tpot50[0], sig3(target), 100*(1-realtime[0]), tpot50[1], 100*realtime[1], 100*realtime[2])
	docs.CheckBlock(t, root, *update, docsRegen, "mixed-slo-figures", text, "docs/guides/capacity-planning.md")
}

// TestDocsMultiTurnChat: the multi-turn-chat scenario's prefix-cache
// hit rate that docs/guides/capacity-planning.md quotes.
func TestDocsMultiTurnChat(t *testing.T) {
	r, _ := runJSON(t, "run", "-q", "--scenario", "multi-turn-chat")
	text := fmt.Sprintf("In `multi-turn-chat` each turn re-sends its session's history, so %.0f %% of the prompt tokens are found in the prefix cache (`metrics.prefix_cache_hit_rate` %.3f).\n",
		100*f64(t, r, "metrics.prefix_cache_hit_rate"), f64(t, r, "metrics.prefix_cache_hit_rate"))
	docs.CheckBlock(t, docsRoot(t), *update, docsRegen, "chat-figures", text, "docs/guides/capacity-planning.md")
}
