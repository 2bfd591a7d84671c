package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload"
)

// FuzzRunCommand runs `blis run` end to end, in process, on flags and a
// file the fuzzer chooses. The input is three parts:
//
//   - prog: pairs of bytes (flag, value). The first picks a flag of
//     fuzzFlags; the second one of that flag's values, or, one past the
//     table, the next line of raw.
//   - raw: newline-separated strings the fuzzer writes itself (numbers
//     such as NaN, 1e309 or -0, distributions, names).
//   - file: the contents of the file a value "@file.EXT" names: a replay
//     trace, a workload spec, a coefficient file, a hardware or model
//     JSON, a deployment, depending on the flag that takes it.
//
// Every flag is given as --name=value. A run must not panic (the fuzzer
// catches it), must not fail with a *sim.InvariantError (a simulator bug:
// an input's fault must be an ordinary error) nor with an error showing an
// int64 limit no input holds (an overflow), must print JSON when it
// succeeds and, when prog's length is even, print the same bytes and write
// the same files when run again.
//
// Each run is kept to milliseconds: --requests, --num-instances,
// --data-parallel-size and --workers are capped, a workload spec or
// deployment that asks for more is skipped, a built-in scenario runs for
// 2 simulated seconds, and the file is cut to 16 KiB.
func FuzzRunCommand(f *testing.F) {
	for _, s := range fuzzRunSeeds(f) {
		f.Add(s.prog, s.raw, s.file)
	}
	slow := time.Duration(0)
	if ms, err := strconv.Atoi(os.Getenv("BLIS_FUZZ_SLOW_MS")); err == nil && ms > 0 {
		// For whoever fuzzes: an input slower than this is kept as a
		// failure, to find what makes a bounded run slow.
		slow = time.Duration(ms) * time.Millisecond
	}
	f.Fuzz(func(t *testing.T, prog []byte, raw string, file []byte) {
		dir := t.TempDir()
		args, ok := decodeRunArgs(t, dir, prog, raw, file)
		if !ok {
			return
		}
		start := time.Now()
		out, _, err := runFuzzCLI(args)
		if slow > 0 && time.Since(start) > slow {
			t.Fatalf("blis %s took %v", strings.Join(args, " "), time.Since(start))
		}
		t.Logf("blis %s: error %v", strings.Join(args, " "), err)
		if err != nil {
			var inv *sim.InvariantError
			// Also when wrapped as text (%v), not as an error (%w).
			if errors.As(err, &inv) || invariantRE.MatchString(err.Error()) {
				t.Fatalf("blis %s: an input made the simulator fail an invariant (a simulator bug): %v", strings.Join(args, " "), err)
			}
			// A non-finite number reached the JSON encoder: every ±Inf/NaN
			// is refused where it is parsed or written as null (docs/hardening.md,
			// class 1).
			if strings.Contains(err.Error(), "json: unsupported value") {
				t.Fatalf("blis %s: a non-finite number reached the JSON output: %v", strings.Join(args, " "), err)
			}
			// An int64 limit in the message that no argument holds is an
			// overflow reported as if the user had given it.
			for _, lim := range []string{"9223372036854775807", "9223372036854775808"} {
				if strings.Contains(err.Error(), lim) && !strings.Contains(strings.Join(args, " ")+string(file), lim) {
					t.Fatalf("blis %s: the error shows an overflow: %v", strings.Join(args, " "), err)
				}
			}
			return
		}
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--print-spec=") }) && !json.Valid([]byte(out)) {
			t.Fatalf("blis %s: stdout is not JSON:\n%s", strings.Join(args, " "), out)
		}
		if len(prog)%2 == 1 {
			return
		}
		files := readOutputs(t, dir)
		again, _, err := runFuzzCLI(args)
		if err != nil {
			t.Fatalf("blis %s: succeeded, then failed on the same input: %v", strings.Join(args, " "), err)
		}
		if again != out {
			t.Fatalf("blis %s: two runs printed different output:\n%s\n---\n%s", strings.Join(args, " "), out, again)
		}
		for name, b := range readOutputs(t, dir) {
			if !bytes.Equal(files[name], b) {
				t.Fatalf("blis %s: two runs wrote different %s", strings.Join(args, " "), name)
			}
		}
	})
}

// runFuzzCLI is runCLI without a *testing.T to report to.
func runFuzzCLI(args []string) (stdout, stderr string, err error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

// invariantRE matches sim.InvariantError's text.
var invariantRE = regexp.MustCompile(`invariant \S+ violated at t=`)

// readOutputs reads every file a run wrote in dir (the outputs: their
// names start with "out", or "raw-" when the fuzzer wrote the name).
func readOutputs(t *testing.T, dir string) map[string][]byte {
	m := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "out") && !strings.HasPrefix(e.Name(), "raw-") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

// fuzzFlag is a flag the fuzzer may give and the values it picks from.
// capAt, when > 0, caps an integer value (so that a run stays small);
// values beyond it run as capAt.
type fuzzFlag struct {
	name   string
	values []string
	capAt  int64
	path   pathKind
}

// pathKind says whether a flag names a file, so that the fuzzer's own
// strings for it stay inside the run's directory: written outputs must
// not land in the package (or anywhere else), and an input must not be a
// device that never ends.
type pathKind int

const (
	notPath   pathKind = iota
	isPath             // always a path
	maybePath          // a shipped name, or a path when it has a / or starts with .
)

// Tables of values. "@file.EXT" is the fuzzer's file, written with that
// extension; "@out.EXT" a fresh output path; "@dir" the run's directory
// and "@missing" a path under a directory that does not exist.
var (
	fzInts   = []string{"0", "1", "-1", "2", "3", "16", "100", "4096", "1000000", "2147483647", "2147483648", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1e3", "", "x"}
	fzFloats = []string{"0", "1", "-1", "0.5", "2", "1e-300", "1e300", "4.9e-324", "1.7976931348623157e308", "NaN", "Inf", "-Inf", "-0", "0x1p-2", "", "x"}
	fzRates  = []string{"8", "1", "100", "0.001", "1e-300", "1e300", "0", "-1", "NaN", "Inf"}
	fzDists  = []string{
		"const:40", "const:1", "const:0", "const:2000", "const:3000", "40", "uniform:1,100", "uniform:100,1",
		"uniform:0,9223372036854775807", "normal:mean=100,cv=0.5", "normal:mean=100,cv=0.5,min=1,max=300",
		"lognormal:mean=1024,cv=0.6,max=16384", "lognormal:mean=200,cv=1,max=1000", "lognormal:mean=1e300,cv=1e300",
		"lognormal:mean=NaN,cv=1", "exponential:mean=50", "exponential:mean=50,max=100000",
		"histogram:1-128=3,4096=1,max=5000", "histogram:5=0,6=1e308,7=1e308", "const:NaN", "", "banana",
	}
	fzBools   = []string{"true", "false", "1", "0", "maybe"}
	fzModels  = []string{"llama-3.1-8b", "gpt2", "qwen2.5-7b", "mixtral-8x7b", "llama-2-7b", "llama-2-70b", "codellama-34b", "qwen3-32b", "qwen3-30b-a3b-instruct-2507", "../../physics/data/models/gpt2.json", "@file.json", "no-such-model", ""}
	fzHW      = []string{"h100-sxm", "a100-80gb", "l40s", "rtx-4090", "rtx-pro-6000", "../../physics/data/hardware/l40s.json", "@file.json", "tpu", ""}
	fzTriples = []string{"1200,0.08,1.5", "6000,0.2,30", "0,0,0", "1,0,0", "0.001,0,0", "1e12,1e6,1e6", "1e19,0,0", "0,0,1e30", "-1,0,0", "NaN,0,0", "Inf,0,0", "1,2", "1,2,3,4", ""}
	fzDur     = []string{"1s", "100ms", "10s", "1us", "0s", "-1s", "1h", "1.5us", "9999999h", "x", ""}
)

var fuzzFlags = []fuzzFlag{
	// The workload.
	{"requests", append([]string{"1", "5", "20", "50", "9999999999999"}, fzInts...), 50, notPath},
	{"rate", fzRates, 0, notPath},
	{"arrival", []string{"poisson", "gamma", "uniform", ""}, 0, notPath},
	{"gamma-cv", append([]string{"1e-3", "1000", "1e-4"}, fzFloats...), 0, notPath},
	{"prompt-tokens", fzDists, 0, notPath},
	{"output-tokens", fzDists, 0, notPath},
	{"prefix-groups", fzInts, 0, notPath},
	{"prefix-tokens", append([]string{"512", "39", "40"}, fzInts...), 0, notPath},
	{"prefix-fraction", fzFloats, 0, notPath},
	{"seed", append([]string{"42", "7"}, fzInts...), 0, notPath},
	{"horizon", append([]string{"0.001", "2", "1e9", "9.3e12"}, fzFloats...), 0, notPath},
	{"per-request", fzBools, 0, notPath},
	{"replay", []string{"@file.csv", "@file.parquet", "@file.jsonl", "@file.json", "testdata/replay/requests.parquet", "/nonexistent.csv", "testdata", ""}, 0, isPath},
	{"replay-format", append(workload.ReplayFormats(), "bogus"), 0, notPath},
	{"strict", fzBools, 0, notPath},
	{"workload-spec", []string{"@file.yaml", "/nonexistent.yaml", ""}, 0, isPath},
	{"scenario", append(workload.Scenarios(), "nope"), 0, notPath},
	{"print-spec", fzBools, 0, notPath},
	// The instance.
	{"model", fzModels, 0, maybePath},
	{"hardware", fzHW, 0, maybePath},
	{"tp", []string{"1", "2", "4", "8", "0", "-1", "3", "1000000", "9223372036854775807"}, 0, notPath},
	{"max-num-seqs", append([]string{"256", "4"}, fzInts...), 0, notPath},
	{"max-num-batched-tokens", append([]string{"8192", "64", "17"}, fzInts...), 0, notPath},
	{"long-prefill-token-threshold", fzInts, 0, notPath},
	{"max-model-len", append([]string{"0", "64", "512", "1024", "4096", "131072"}, fzInts...), 0, notPath},
	{"data-parallel-size", []string{"1", "2", "3", "0", "-1", "100000"}, 4, notPath},
	{"enable-expert-parallel", fzBools, 0, notPath},
	{"async-scheduling", fzBools, 0, notPath},
	{"output-delay-us", fzInts, 0, notPath},
	{"enable-chunked-prefill", fzBools, 0, notPath},
	{"enable-prefix-caching", fzBools, 0, notPath},
	{"block-size", append([]string{"16", "1", "1024", "1025", "3", "32"}, fzInts...), 0, notPath},
	{"kv-blocks-gpu", append([]string{"auto", "1", "2", "10", "100", "67108864"}, fzInts...), 0, notPath},
	{"gpu-memory-utilization", append([]string{"0.9", "0.1", "0.99"}, fzFloats...), 0, notPath},
	{"kv-blocks-cpu", append([]string{"100", "2000", "16777216"}, fzInts...), 0, notPath},
	{"kv-offload-threshold", fzFloats, 0, notPath},
	{"scheduler", []string{"fcfs", "priority-fcfs", "sjf", "reverse-priority", "lifo", ""}, 0, notPath},
	{"priority", []string{"constant", "slo-based", "inverted-slo", "vip", ""}, 0, notPath},
	{"priority-base", fzFloats, 0, notPath},
	{"priority-age-weight", fzFloats, 0, notPath},
	{"latency", []string{"physics", "roofline", "blackbox", "magic", ""}, 0, notPath},
	{"coefficients", []string{"@file.yaml", "../../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml", "/nonexistent.yaml", ""}, 0, isPath},
	{"alpha-coeffs", fzTriples, 0, notPath},
	{"beta-coeffs", fzTriples, 0, notPath},
	{"roofline-compute-eff", fzFloats, 0, notPath},
	{"roofline-bandwidth-eff", fzFloats, 0, notPath},
	{"roofline-step-overhead-us", fzFloats, 0, notPath},
	{"latency-noise", append([]string{"0.05", "0.5", "10"}, fzFloats...), 0, notPath},
	// Outputs.
	{"otlp-trace", []string{"@out.jsonl", "@file.csv", "@dir", "@missing", ""}, 0, isPath},
	{"kv-events", []string{"@out.kv.jsonl", "@out.jsonl", "@dir", "@missing", ""}, 0, isPath},
	{"trace-journey-sample-rate", fzFloats, 0, notPath},
	{"trace-step-sample-rate", fzFloats, 0, notPath},
	{"trace-rich-subsample-rate", fzFloats, 0, notPath},
	{"trace-closure-interval", append([]string{"10", "10000", "10001"}, fzInts...), 0, notPath},
	{"trace-max-events-per-span", fzInts, 0, notPath},
	{"trace-route", []string{"/v1/completions", "/v1/chat/completions", "/x", ""}, 0, notPath},
	// The cluster.
	{"num-instances", []string{"1", "2", "3", "4", "0", "-1", "5000", "x"}, 4, notPath},
	{"deployment", []string{"@file.yaml", "/nonexistent.yaml", ""}, 0, isPath},
	{"admission-policy", []string{"always-admit", "token-bucket", "reject-all", "x"}, 0, notPath},
	{"token-bucket-capacity", fzFloats, 0, notPath},
	{"token-bucket-refill-rate", fzFloats, 0, notPath},
	{"admission-latency", fzInts, 0, notPath},
	{"routing-policy", []string{"round-robin", "least-loaded", "always-busiest", "weighted", "vllm-dp", "random"}, 0, notPath},
	{"routing-scorers", []string{"prefix-affinity:3,queue-depth:2,kv-utilization:2", "prefix-affinity:1", "queue-depth:0", "load-balance:1,kv-utilization:NaN", "load-balance:1e308,queue-depth:1e308", "x:1", ""}, 0, notPath},
	{"routing-latency", fzInts, 0, notPath},
	{"prefix-index-capacity", append([]string{"1", "10000"}, fzInts...), 0, notPath},
	{"snapshot-refresh-interval", append([]string{"100000", "1000"}, fzInts...), 0, notPath},
	{"trace-level", []string{"none", "decisions", "detailed", "x"}, 0, notPath},
	{"decision-trace", []string{"@out.decisions.jsonl", "@file.yaml", "@dir", "@missing", ""}, 0, isPath},
	{"counterfactual-sample", []string{"every:3", "0.5", "1", "0", "every:0", "2", "NaN", "x", ""}, 0, notPath},
	{"summarize-trace", []string{"@out.md", "@file.md", "@dir", "@missing", ""}, 0, isPath},
	{"summary-max-tokens", append([]string{"1000", "100", "99"}, fzInts...), 0, notPath},
	{"counterfactual-k", append([]string{"3", "0"}, fzInts...), 0, notPath},
	{"workers", []string{"0", "1", "2", "-1", "1000000"}, 4, notPath},
	{"fitness-weights", []string{"throughput:1", "p99_ttft:1,mean_itl:2", "throughput:NaN", "tokens_per_sec:1e308,max_e2e:1e308", "bad", ""}, 0, notPath},
	{"window", fzDur, 0, notPath},
	{"window-out", []string{"@out.csv", "@out.jsonl", "@out.txt", "@file.csv", "@dir", "@missing", ""}, 0, isPath},
	{"window-plot", []string{"@out.svg", "@out.png", "@out.gif", "@dir", "@missing", ""}, 0, isPath},
	// The output analysis (a run sized by precision gets --max-requests
	// 200 unless given: decodeRunArgs).
	{"warmup", []string{"auto", "none", "30s", "0s", "1ns", "-1s", "1e300s", "x", ""}, 0, notPath},
	{"precision", []string{"0.5", "0.2", "0", "1e-15", "-1", "NaN", "Inf", "2"}, 0, notPath},
	{"precision-metric", []string{"e2e_mean_ms", "ttft_p99_ms", "requests_per_s", "slo_attainment", "x", ""}, 0, notPath},
	{"max-requests", append([]string{"100", "1", "0", "-1"}, fzInts...), 200, notPath},
	{"max-sim-time", []string{"10s", "1us", "0s", "-1s", "1e300h", "x", ""}, 0, notPath},
	// The rest.
	{"debug-invariants", fzBools, 0, notPath},
	{"quiet", fzBools, 0, notPath},
	{"no-such-flag", []string{"1"}, 0, notPath},
}

// decodeRunArgs turns the fuzzer's bytes into blis's arguments, writing
// the file it names into dir. It is false for an input too big to run in
// a fuzz iteration.
func decodeRunArgs(t *testing.T, dir string, prog []byte, raw string, file []byte) ([]string, bool) {
	const maxFlags, maxFile = 24, 16 << 10
	if len(file) > maxFile {
		file = file[:maxFile]
	}
	lines := strings.Split(raw, "\n")
	given := map[string]string{}
	args := []string{"run"}
	nOut := 0
	fileUse := map[string]bool{} // the flags that read the file
	for i := 0; i+1 < len(prog) && i/2 < maxFlags; i += 2 {
		fl := fuzzFlags[int(prog[i])%len(fuzzFlags)]
		var v string
		if k := int(prog[i+1]) % (len(fl.values) + 1); k < len(fl.values) {
			v = fl.values[k]
		} else if len(lines) > 0 {
			v, lines = lines[0], lines[1:]
			if fl.path == isPath || fl.path == maybePath && (strings.Contains(v, "/") || strings.HasPrefix(v, ".")) {
				// One name in dir, whatever v holds ("/", "..").
				v = filepath.Join(dir, "raw-"+url.PathEscape(v[:min(len(v), 100)]))
			}
		}
		if fl.capAt > 0 {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > fl.capAt {
				v = strconv.FormatInt(fl.capAt, 10)
			}
		}
		switch {
		case strings.HasPrefix(v, "@file"):
			path := filepath.Join(dir, "in"+strings.TrimPrefix(v, "@file"))
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			v = path
			fileUse[fl.name] = true
		case v == "@dir":
			v = dir
		case v == "@missing":
			v = filepath.Join(dir, "missing", "out.jsonl")
		case strings.HasPrefix(v, "@out"):
			nOut++
			v = filepath.Join(dir, fmt.Sprintf("out%d%s", nOut, strings.TrimPrefix(v, "@out")))
		}
		given[fl.name] = v
		args = append(args, "--"+fl.name+"="+v)
	}
	// Keep the run small: what the flags cannot bound is checked here.
	if fileUse["workload-spec"] {
		if s, err := workload.ParseSpec(file, "fuzz.yaml"); err == nil {
			clients := 0
			for _, tn := range s.Tenants {
				clients += tn.Clients
			}
			if s.Requests == 0 || s.Requests > 50 || clients > 50 {
				return nil, false
			}
		}
	}
	if fileUse["deployment"] {
		d := experiment.NewDraft()
		if err := d.ParseDeployment(file, "fuzz.yaml"); err == nil {
			if e, err := d.Resolve(); err == nil && e.Deployment.NumInstances() > 4 {
				return nil, false
			}
		}
	}
	spec, scenario := given["workload-spec"] != "", given["scenario"] != ""
	if _, ok := given["requests"]; !ok && !spec && !scenario {
		args = append(args, "--requests=20")
	}
	if scenario {
		args = append(args, "--horizon=2") // scenarios last minutes
	}
	if _, ok := given["max-requests"]; !ok && given["precision"] != "" {
		args = append(args, "--max-requests=200") // a run sized by precision is as long as its cap
	}
	return args, true
}

type fuzzRunSeed struct {
	prog []byte
	raw  string
	file []byte
}

// fuzzRunSeeds are meaningful runs, written as flag=value pairs and
// encoded into prog: a value in the flag's table by its index, any other
// through raw.
func fuzzRunSeeds(f testing.TB) []fuzzRunSeed {
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	chat, err := workload.ScenarioText("multi-turn-chat")
	if err != nil {
		f.Fatal(err)
	}
	chat = bytes.Replace(chat, []byte("duration_s: 300\n"), []byte("duration_s: 300\nrequests: 30\n"), 1)
	agents, err := workload.ScenarioText("agentic")
	if err != nil {
		f.Fatal(err)
	}
	agents = bytes.Replace(agents, []byte("duration_s: 300\n"), []byte("duration_s: 300\nrequests: 40\n"), 1)
	csv := []byte("arrival_us,prompt_tokens,output_tokens\n0,100,5\n1000,200,10\n1000,50,1\n")
	csvFull := []byte("priority,output_tokens,prefix_tokens,arrival_us,prefix_group,prompt_tokens,slo_class,tenant_id,session_id\n-2,5,8,10,3,12,batch,a,s\n,6,,20,,7,,b,\n3,40,32,500,1,64,realtime,a,s\n")
	dep := []byte("pools:\n  - name: a\n    replicas: 2\n    vllm:\n      max_num_seqs: 64\n      total_kv_blocks_gpu: auto\n  - name: b\n    hardware: a100-80gb\nrouting:\n  policy: weighted\n  scorers: prefix-affinity:3,queue-depth:2\n  snapshot_refresh_interval_us: 10000\n")
	depBB := []byte("pools:\n  - replicas: 2\n    latency:\n      model: blackbox\n      blackbox: {alpha: [1, 2, 3], beta: [4, 5, 6]}\nadmission:\n  policy: token-bucket\n  token_bucket_capacity: 1000\n")
	var seeds []fuzzRunSeed
	add := func(file []byte, pairs ...string) {
		var s fuzzRunSeed
		s.file = file
		var raw []string
		for _, p := range pairs {
			name, v, _ := strings.Cut(p, "=")
			fi := -1
			for i, fl := range fuzzFlags {
				if fl.name == name {
					fi = i
				}
			}
			if fi < 0 {
				f.Fatalf("seed: no flag %s", name)
			}
			vi := len(fuzzFlags[fi].values) // raw
			for i, x := range fuzzFlags[fi].values {
				if x == v {
					vi = i
					break
				}
			}
			if vi == len(fuzzFlags[fi].values) {
				raw = append(raw, v)
			}
			s.prog = append(s.prog, byte(fi), byte(vi))
		}
		s.raw = strings.Join(raw, "\n")
		seeds = append(seeds, s)
	}
	// Every seed's prog has an even length: the run is repeated and compared.
	add(nil, "requests=20")
	add(nil, "rate=100", "requests=50", "prompt-tokens=const:40", "output-tokens=const:40", "prefix-groups=0")
	add(nil, "requests=20", "latency=blackbox", "beta-coeffs=6000,0.2,30", "alpha-coeffs=1200,0.08,1.5", "scheduler=priority-fcfs", "priority=slo-based", "horizon=2")
	add(nil, "requests=50", "kv-blocks-gpu=100", "kv-blocks-cpu=2000", "kv-offload-threshold=0.5", "otlp-trace=@out.jsonl", "kv-events=@out.kv.jsonl", "trace-step-sample-rate=1")
	add(nil, "requests=30", "model=gpt2", "hardware=l40s", "prompt-tokens=const:2000", "max-model-len=1024")
	add(nil, "requests=20", "model=mixtral-8x7b", "tp=4", "hardware=a100-80gb", "scheduler=sjf", "enable-chunked-prefill=false")
	add(nil, "num-instances=3", "routing-policy=weighted", "requests=50", "rate=100", "window=1s", "window-out=@out.csv", "fitness-weights=p99_ttft:1,mean_itl:2")
	add(nil, "num-instances=2", "trace-level=decisions", "decision-trace=@out.decisions.jsonl", "admission-policy=token-bucket", "token-bucket-capacity=1000")
	add(nil, "data-parallel-size=2", "requests=20", "routing-policy=vllm-dp")
	add(nil, "scenario=prefix-heavy", "num-instances=2")
	add(nil, "rate=1e-300", "requests=9999999999999", "horizon=2")
	add(csv, "replay=@file.csv", "latency=roofline", "per-request=true")
	add(csvFull, "replay=@file.csv", "num-instances=2", "strict=true")
	add(smallRequestsParquet(f), "replay=@file.parquet", "max-num-seqs=4")
	rec := func(name string) []byte { return read("../../sim/workload/records/testdata/" + name) }
	add(rec("azure_2023.csv"), "replay=@file.csv", "replay-format=azure", "num-instances=2")
	add(rec("mooncake.jsonl"), "replay=@file.jsonl", "enable-prefix-caching=false")
	add(rec("vllm_runs.jsonl"), "replay=@file.jsonl", "replay-format=vllm-runs", "strict=true")
	add(rec("vllm_bench.json"), "replay=@file.json", "model=gpt2")
	add(rec("inference_perf.json"), "replay=@file.json", "scheduler=sjf")
	add(chat, "workload-spec=@file.yaml", "num-instances=2", "routing-policy=least-loaded")
	add(agents, "workload-spec=@file.yaml")
	add(read("../../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml"), "coefficients=@file.yaml", "requests=20", "tp=2")
	add(read("../../physics/data/hardware/h100-sxm.json"), "hardware=@file.json", "requests=10")
	add(read("../../physics/data/models/qwen2.5-7b.json"), "model=@file.json", "requests=10", "kv-blocks-gpu=10")
	add(dep, "deployment=@file.yaml", "requests=30")
	add(depBB, "deployment=@file.yaml", "requests=30", "max-num-seqs=4", "debug-invariants=true")
	add(nil, "requests=20", "latency=blackbox", "beta-coeffs=1e-9,0,0", "alpha-coeffs=0,0,0", "output-delay-us=0", "async-scheduling=false")
	add(nil, "requests=20", "priority-base=Inf", "rate=NaN", "tp=0", "horizon=-1")
	// Found by this target (TestFuzzFoundInputsAreRefused).
	add(nil, "num-instances=2", "admission-latency=9223372036854775807")
	add(nil, "num-instances=2", "routing-policy=weighted", "prefix-index-capacity=2147483648")
	add(nil, "horizon=1e300")
	return seeds
}

// smallRequestsParquet is calibrate ingest's requests table of a 4-request
// run (14 KB; testdata/replay/requests.parquet is 63 KB, too big to
// mutate quickly).
func smallRequestsParquet(f testing.TB) []byte {
	dir := f.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if _, _, err := runFuzzCLI([]string{"run", "-q", "--requests", "4", "--otlp-trace", trace}); err != nil {
		f.Fatal(err)
	}
	if _, err := otlpingest.Ingest(otlpingest.FileSources([]string{trace}), otlpingest.Options{OutDir: filepath.Join(dir, "tables")}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tables", "requests.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	return b
}
