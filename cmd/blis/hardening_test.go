package main

// docs/hardening.md (its classes): one test per defect example, and per
// class a check beyond it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"
)

// writeZeroLatencyBench writes a vllm bench serve result whose measured
// latencies are all 0.
func writeZeroLatencyBench(t *testing.T, dir string) string {
	t.Helper()
	n := 6
	zeros := strings.TrimSuffix(strings.Repeat("0.0,", n), ",")
	var itls, starts, lens, outs, errs []string
	for i := 0; i < n; i++ {
		itls = append(itls, "[0.0, 0.0]")
		starts = append(starts, fmt.Sprintf("%g", 1000+0.1*float64(i)))
		lens, outs, errs = append(lens, "100"), append(outs, "3"), append(errs, `""`)
	}
	doc := fmt.Sprintf(`{"date": "x", "num_prompts": %d, "input_lens": [%s], "output_lens": [%s], "ttfts": [%s], "itls": [%s], "latencies": [%s], "start_times": [%s], "errors": [%s]}`,
		n, strings.Join(lens, ","), strings.Join(outs, ","), zeros, strings.Join(itls, ","), zeros, strings.Join(starts, ","), strings.Join(errs, ","))
	p := filepath.Join(dir, "bench.json")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o644))
	return p
}

// Class 1, example: validate --calibrate --json on records whose measured
// latencies are all 0 failed after the search with "json: unsupported
// value: +Inf"; it is refused naming --calibrate and the file, and
// without --calibrate the JSON has null errors, never ±Inf/NaN.
func TestValidateCalibrateAllZeroLatencies(t *testing.T) {
	dir := t.TempDir()
	p := writeZeroLatencyBench(t, dir)
	args := []string{"validate", p, "--format", "vllm-bench", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--json"}
	_, _, err := runCLI(t, append(args, "--calibrate")...)
	require.ErrorContains(t, err, "--calibrate: "+p+": no metric")
	require.NotContains(t, err.Error(), "unsupported value")
	out, _, err := runCLI(t, args...)
	require.NoError(t, err)
	require.True(t, json.Valid([]byte(out)))
	require.Contains(t, out, `"err_mean": null`)
}

// Class 2, example: a run that rejects every request got the best fitness
// (a latency with no samples counted as 0 ms); it now scores 0, with null
// latencies and their sample counts.
func TestFitnessOfARunThatRejectsEverything(t *testing.T) {
	args := []string{"run", "-q", "--num-instances", "2", "--requests", "20", "--fitness-weights", "p99_ttft:1,throughput:1"}
	out, _, err := runCLI(t, append(args, "--admission-policy", "reject-all")...)
	require.NoError(t, err)
	var rej struct {
		Fitness struct {
			Score      float64
			Components []map[string]any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rej))
	require.Zero(t, rej.Fitness.Score)
	require.Nil(t, rej.Fitness.Components[0]["raw"])
	require.EqualValues(t, 0, rej.Fitness.Components[0]["samples"])
	out, _, err = runCLI(t, args...)
	require.NoError(t, err)
	var ok struct{ Fitness struct{ Score float64 } }
	require.NoError(t, json.Unmarshal([]byte(out), &ok))
	require.Greater(t, ok.Fitness.Score, rej.Fitness.Score)
}

// Class 3, examples: a spec of closed-loop tenants only accepted and
// ignored rate, arrival and load_profile (the echo stated the ignored
// rate); a sub-microsecond timeout_s rounded to 0, no timeout.
func TestSpecIgnoredInputRefused(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"rate: applies to open-loop tenants only":      "version: 1\nduration_s: 10\nrate: 50\ntenants:\n  - id: c\n    closed_loop: {clients: 2}\n",
		"tenants[0].timeout_s: 4e-07 s rounds to 0 µs": "version: 1\nduration_s: 10\ntenants:\n  - {id: a, timeout_s: 4e-7}\n",
	} {
		p := filepath.Join(dir, "w.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, _, err := runCLI(t, "run", "-q", "--workload-spec", p)
		require.ErrorContains(t, err, "--workload-spec: "+p)
		require.ErrorContains(t, err, name)
	}
}

// Class 3, example: --data-parallel-size with --deployment was dropped
// silently; it takes effect on a one-pool file (the flag beats the file:
// N engines behind vllm-dp) and is refused by name on more pools.
func TestDataParallelWithDeployment(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one.yaml")
	require.NoError(t, os.WriteFile(one, []byte("pools:\n  - name: a\n    replicas: 2\n"), 0o644))
	out, _, err := runCLI(t, "run", "-q", "--deployment", one, "--data-parallel-size", "4", "--requests", "20")
	require.NoError(t, err)
	var r struct {
		Config struct {
			Routing struct{ Policy string }
			Pools   []struct{ Replicas int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, "vllm-dp", r.Config.Routing.Policy)
	require.Equal(t, 4, r.Config.Pools[0].Replicas)
	two := filepath.Join(dir, "two.yaml")
	require.NoError(t, os.WriteFile(two, []byte("pools:\n  - {name: a, replicas: 2}\n  - {name: b, replicas: 1}\n"), 0o644))
	_, _, err = runCLI(t, "run", "-q", "--deployment", two, "--data-parallel-size", "4", "--requests", "20")
	require.ErrorContains(t, err, "--data-parallel-size cannot be combined with a deployment of 2 pools")
}

// Class 6, examples: errors name the file and key the user can change.
func TestErrorsNameTheRightThing(t *testing.T) {
	dir := t.TempDir()
	// A huge think_time_ms failed mid-run as "request 3: arrival_us ...
	// beyond the simulator's ...", without the spec or the key.
	spec := filepath.Join(dir, "think.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("version: 1\nrequests: 10\ntenants:\n  - id: c\n    closed_loop: {clients: 2, think_time_ms: \"1125899906842624\"}\n"), 0o644))
	_, _, err := runCLI(t, "run", "-q", "--workload-spec", spec)
	require.ErrorContains(t, err, "--workload-spec: "+spec+": tenants[0].closed_loop.think_time_ms: the times it draws put a request at")

	// Counter ticks 1 µs apart gave "--window: too many time windows ...
	// use a longer window" in a command without --window, naming no file.
	run := filepath.Join(dir, "run")
	require.NoError(t, os.MkdirAll(run, 0o755))
	src := filepath.Join("..", "..", "testdata", "vllm-runs", "RTX4090", "Llama-3.1-8B")
	for _, f := range []string{"requests.jsonl", "meta.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(run, f), b, 0o644))
	}
	ts, err := os.ReadFile(filepath.Join(src, "timeseries.csv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(ts)), "\n")
	for i := 1; i < len(lines); i++ {
		_, rest, _ := strings.Cut(lines[i], ",")
		lines[i] = fmt.Sprintf("%.6f,%s", 1+float64(i)*1e-6, rest)
	}
	counters := filepath.Join(run, "timeseries.csv")
	require.NoError(t, os.WriteFile(counters, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	_, _, err = runCLI(t, "validate", "-q", filepath.Join(run, "requests.jsonl"))
	require.ErrorContains(t, err, "engine counters "+counters+": ticks 1e-06 s apart")
	require.NotContains(t, err.Error(), "--window")

	// An unknown model in a run's meta.json names the meta.json, not a
	// --model the user never gave (fixed before; pinned here).
	meta, err := os.ReadFile(filepath.Join(run, "meta.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(run, "meta.json"), []byte(strings.Replace(string(meta), `"model": "meta-llama/Llama-3.1-8B"`, `"model": "acme/NoSuchModel"`, -1)), 0o644))
	require.NoError(t, os.Remove(counters))
	_, _, err = runCLI(t, "validate", "-q", filepath.Join(run, "requests.jsonl"))
	require.ErrorContains(t, err, filepath.Join(run, "meta.json")+`: model "acme/NoSuchModel" is neither a file nor a shipped model`)
	require.NotContains(t, err.Error(), "--model")
}

// Class 4, example: a CSV replay error quoted a whole 400 MB cell (3.7 GB
// RSS); every quoted input is clipped. Property over the readers a run
// takes: an error about one huge cell, value or name stays short.
func TestHugeInputsAreClippedInErrors(t *testing.T) {
	dir := t.TempDir()
	huge := strings.Repeat("9", 1<<20)
	cases := map[string]string{
		"replay.csv":   "arrival_us,prompt_tokens,output_tokens\n0,10,5\n1," + huge + ",5\n",
		"header.csv":   "arrival_us,prompt_tokens,output_tokens," + huge + "\n0,10,5\n",
		"slo.csv":      "arrival_us,prompt_tokens,output_tokens,slo_class\n0,10,5," + huge + "\n",
		"spec.yaml":    "version: 1\nduration_s: 1\ntenants:\n  - id: a\n    prompt_tokens: \"" + huge + "x\"\n",
		"process.yaml": "version: 1\nduration_s: 1\narrival: {process: \"" + huge + "\"}\ntenants: [{id: a}]\n",
	}
	for name, body := range cases {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		flag := "--replay"
		if strings.HasSuffix(name, ".yaml") {
			flag = "--workload-spec"
		}
		_, _, err := runCLI(t, "run", "-q", flag, p)
		require.Error(t, err, name)
		require.Less(t, len(err.Error()), 1000, "%s: %.300s", name, err.Error())
	}
}

// UX: an unstable run is said on stderr (the stability verdict, which
// replaced a heuristic on the served share and the queueing delay), with
// how much was served and the likely cause; a run that keeps up says
// nothing (the default rate, a short run whose drain is most of it, a
// cluster at its capacity).
func TestUnstableIsSaid(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "30"}, `warning: unstable: requests arrived at 28.9 per second but the instance served 24.6 per second (85 %); the number in the system grew by 5.15 per second`},
		{[]string{"--num-instances", "2", "--rate", "60", "--requests", "2000"}, "but the 2 instances served"},
		{[]string{"--num-instances", "2", "--rate", "60", "--requests", "2000"}, "likely cause: capacity: lower the rate or add instances"},
		{[]string{"--requests", "300"}, ""},
		{[]string{"--requests", "10"}, ""},
		{[]string{"--num-instances", "2", "--rate", "30", "--requests", "1000"}, ""},
	} {
		_, stderr, err := runCLI(t, append([]string{"run", "-q"}, tc.args...)...)
		require.NoError(t, err)
		if tc.want == "" {
			require.NotContains(t, stderr, "unstable", "%v", tc.args)
		} else {
			require.Contains(t, stderr, tc.want, "%v", tc.args)
		}
	}
}

// UX: a model without fitted coefficients falls back to the roofline and
// says so once, whatever the instance count; a named model or a shipped
// configuration says nothing. The summary counts the requests rejected as
// too long.
func TestRooflineFallbackNoteAndTooLongSummary(t *testing.T) {
	_, stderr, err := runCLI(t, "run", "--model", "llama-2-7b", "--requests", "50", "--num-instances", "3")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(stderr, "the latency model is the roofline: no shipped coefficients were fitted for llama-2-7b on H100-SXM at TP 1"), stderr)
	for _, args := range [][]string{{"--model", "llama-2-7b", "--latency", "roofline"}, {}} {
		_, stderr, err := runCLI(t, append([]string{"run", "--requests", "50"}, args...)...)
		require.NoError(t, err)
		require.NotContains(t, stderr, "the latency model is the roofline", "%v", args)
	}
	_, stderr, err = runCLI(t, "run", "--requests", "50", "--max-model-len", "600")
	require.NoError(t, err)
	require.Regexp(t, `blis: 50 requests \(\d+ completed, 0 dropped, \d+ rejected as too long\)`, stderr)
	_, stderr, err = runCLI(t, "run", "--requests", "50", "--max-model-len", "600", "--num-instances", "2")
	require.NoError(t, err)
	require.Regexp(t, `\d+ rejected, 0 dropped, \d+ rejected as too long\)`, stderr)
}

// UX: blis run --help lists its flags in sections (experiment.FlagGroups,
// the one table of flags): every flag once, under its section.
func TestRunHelpGroupsEveryFlag(t *testing.T) {
	out, _, err := runCLI(t, "run", "--help")
	require.NoError(t, err)
	_, usage, ok := strings.Cut(out, "\nUsage:\n")
	require.True(t, ok)
	section := ""
	seen := map[string]string{}
	for _, line := range strings.Split(usage, "\n") {
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			section = strings.TrimSuffix(line, ":")
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || section == "Examples" {
			continue
		}
		// A flag's line starts within 6 columns ("  -q, --quiet",
		// "      --rate"); a description wrapped onto the next line starts
		// at the descriptions' column, even with a flag's name.
		if len(line)-len(strings.TrimLeft(line, " ")) > 6 {
			continue
		}
		name := f[0]
		if strings.HasPrefix(name, "-") && len(name) == 3 && len(f) > 1 { // "-q, --quiet"
			name = f[1]
		}
		if strings.HasPrefix(name, "--") {
			name = strings.TrimPrefix(name, "--")
			_, dup := seen[name]
			require.False(t, dup, "--%s listed twice", name)
			seen[name] = section
		}
	}
	for _, fl := range experiment.Flags {
		require.Equal(t, experiment.GroupOf(fl.Name), seen[fl.Name], "--%s", fl.Name)
	}
	for _, g := range experiment.FlagGroups {
		require.Contains(t, usage, "\n"+g.Title+":\n")
	}
	require.Equal(t, "Run and outputs", seen["window-out"])
	require.Equal(t, "Cluster (any of these makes the run a cluster run)", seen["routing-policy"])
	require.Equal(t, "Experiment files and printing", seen["config"])
}

// UX: blis validate --help points at the runs the repository ships
// (testdata/vllm-runs), not a folder a user does not have; every
// repository path its help names exists.
func TestValidateHelpNamesShippedRuns(t *testing.T) {
	out, _, err := runCLI(t, "validate", "--help")
	require.NoError(t, err)
	require.NotContains(t, out, "shared/data")
	require.Contains(t, out, "blis validate testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl")
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "testdata/") {
			_, err := os.Stat(filepath.Join("..", "..", strings.TrimRight(f, ",.;)")))
			require.NoError(t, err, f)
		}
	}
}

// UX: a long run shows a progress line on a terminal (never in a pipe,
// so outputs and tests see none): the requests sent and the simulated
// time, erased when the run ends.
func TestProgressLine(t *testing.T) {
	p := &experiment.Progress{}
	p.Total.Store(1000)
	p.Sent.Store(250)
	p.LastArrivalUs.Store(31_500_000)
	var mu sync.Mutex
	var b bytes.Buffer
	w := writerFunc(func(x []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return b.Write(x) })
	stop := showProgress(w, p, 0, 5*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	stop()
	mu.Lock()
	out := b.String()
	mu.Unlock()
	require.Contains(t, out, "\r\033[Kblis: 250 of 1000 (25 %) requests sent, 31.5 s simulated")
	require.True(t, strings.HasSuffix(out, "\r\033[K"), "the line is erased: %q", out)
	stop2 := showProgress(w, p, time.Hour, time.Hour)
	stop2() // a run shorter than the delay writes nothing
	require.Equal(t, out, b.String())
	require.False(t, isTerminal(&b))

	// The run reports its progress to the end.
	e, err := experiment.NewDraft().Resolve()
	require.NoError(t, err)
	q := &experiment.Progress{}
	_, err = experiment.Run(experiment.WithProgress(context.Background(), q), e, &experiment.MemSinks{})
	require.NoError(t, err)
	require.EqualValues(t, 1000, q.Sent.Load())
	require.EqualValues(t, 1000, q.Total.Load())
	require.Greater(t, q.LastArrivalUs.Load(), int64(100e6))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// README commands run as written, in order, from a fresh clone: every
// file a command reads is in the repository or written by an earlier
// command of the page (-o, --out, --otlp-trace, "> FILE", ...; a folder
// written covers the files in it). The README named /tmp/tables before
// the section that writes it, and deploy.yaml that no one has.
func TestREADMECommandsRunInOrder(t *testing.T) {
	total := 0
	for _, page := range tourPages(t) {
		t.Run(page, func(t *testing.T) { total += commandsRunInOrder(t, page) })
	}
	require.Greater(t, total, 30)
}

// commandsRunInOrder checks page's commands and returns how many it
// checked.
func commandsRunInOrder(t *testing.T, page string) int {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	var cmds [][]string
	inSh := false
	cont := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(line, "```"):
			inSh = false
			continue
		}
		if !inSh {
			continue
		}
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		for _, part := range strings.Split(line, ";") {
			if f := strings.Fields(part); len(f) > 0 {
				cmds = append(cmds, f)
			}
		}
	}
	written := []string{}
	producedBy := map[string]bool{"-o": true, "--out": true, "--otlp-trace": true, "--kv-events": true, "--decision-trace": true,
		"--window-out": true, "--window-plot": true, "--plot": true, "--report": true, ">": true}
	readBy := map[string]bool{"--replay": true, "--deployment": true, "--config": true, "--policy-config": true, "--workload-spec": true,
		"--coefficients": true, "--tables": true, "--counters": true, "--meta": true, "--configs": true}
	isWritten := func(p string) bool {
		for _, w := range written {
			if p == w || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/") {
				return true
			}
		}
		return false
	}
	check := func(c []string, p string) {
		p = strings.Trim(p, `'"`)
		if p == "" || strings.HasPrefix(p, "-") || strings.Contains(p, "$") {
			return
		}
		if isWritten(p) {
			return
		}
		_, err := os.Stat(filepath.Join(root, p))
		require.NoError(t, err, "%s: reads %s, which neither the repository nor an earlier command of %s has", strings.Join(c, " "), p, page)
	}
	for _, c := range cmds {
		// Positional inputs of the commands that take files.
		sub := ""
		for i, a := range c {
			if (a == "./cmd/calibrate" || a == "./cmd/blis") && i+1 < len(c) {
				sub = c[i+1]
				for _, a := range c[i+2:] {
					if strings.HasPrefix(a, "-") || a == ">" {
						break
					}
					if sub == "ingest" || sub == "fit" || sub == "validate" {
						check(c, a)
					}
				}
			}
		}
		for i := 0; i+1 < len(c); i++ {
			if readBy[c[i]] {
				check(c, c[i+1])
			}
		}
		for i := 0; i+1 < len(c); i++ {
			if producedBy[c[i]] {
				written = append(written, strings.Trim(c[i+1], `'"`))
			}
		}
		if strings.HasPrefix(c[len(c)-1], ">") && len(c[len(c)-1]) > 1 {
			written = append(written, strings.TrimPrefix(c[len(c)-1], ">"))
		}
	}
	return len(cmds)
}

// A deployment file's relative coefficients path is read from the file's
// folder (the documented rule): it was opened from the working directory
// first, so examples/deploy.yaml ran only from examples/. The README's
// example file runs from the repository's root.
func TestDeploymentPathsFromItsFolder(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "co.yaml"), b, 0o644))
	dep := filepath.Join(dir, "d.yaml")
	require.NoError(t, os.WriteFile(dep, []byte("pools:\n  - name: a\n    replicas: 1\n    latency: {model: physics, coefficients: co.yaml}\n"), 0o644))
	_, _, err = runCLI(t, "run", "-q", "--deployment", dep, "--requests", "10")
	require.NoError(t, err)
	_, _, err = runCLI(t, "run", "-q", "--deployment", filepath.Join("..", "..", "examples", "deploy.yaml"), "--requests", "20")
	require.NoError(t, err)
}

// Class 2: SLO attainment with nothing finished is 0 beside finished: 0,
// never 1 (docs/workloads.md), as the fitness of an empty run is 0.
func TestAttainmentOfNothingFinished(t *testing.T) {
	out, _, err := runCLI(t, "run", "-q", "--scenario", "mixed-slo", "--horizon", "0.2")
	require.NoError(t, err)
	var r struct {
		Metrics struct {
			SLO struct {
				Finished   int64
				Attainment float64
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Zero(t, r.Metrics.SLO.Finished)
	require.Zero(t, r.Metrics.SLO.Attainment)
}

// UX: a replayed trace that arrives faster than it is served says so too
// (its offered rate from the trace's arrivals); one that keeps up does not.
func TestOverloadOfAReplay(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, gapUs, n int) string {
		var b strings.Builder
		b.WriteString("arrival_us,prompt_tokens,output_tokens\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%d,600,200\n", i*gapUs)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		return p
	}
	_, stderr, err := runCLI(t, "run", "-q", "--replay", write("fast.csv", 20000, 2000))
	require.NoError(t, err)
	require.Contains(t, stderr, "warning: unstable: requests arrived at 50.0 per second but the instance served")
	require.Contains(t, stderr, "a replayed trace's arrivals follow the trace: no steady state is expected")
	_, stderr, err = runCLI(t, "run", "-q", "--replay", write("slow.csv", 200000, 300))
	require.NoError(t, err)
	require.NotContains(t, stderr, "unstable")
}
