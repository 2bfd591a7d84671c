package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/sim"
)

func parse(t *testing.T, text string) (*Experiment, error) {
	t.Helper()
	d, err := Parse([]byte(text), "x.yaml")
	if err != nil {
		return nil, err
	}
	return d.Resolve()
}

func TestDefaultIsBlisRunsDefault(t *testing.T) {
	e := Default()
	require.Equal(t, ModeInstance, e.Mode)
	require.Len(t, e.Deployment.Pools, 1)
	require.Equal(t, "llama-3.1-8b", e.Deployment.Pools[0].Instance.Model)
	require.Equal(t, Synthetic, e.Workload.Kind)
	require.Equal(t, 1000, e.Workload.Synthetic.Requests)
	require.Equal(t, int64(42), e.Run.Seed)
	require.Equal(t, "fcfs", e.Policies.Scheduler.Type)
}

// TestErrorsNameTheLineAndKey: every error of a file names its line and
// key, and one per key lists the valid keys.
func TestErrorsNameTheLineAndKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "x.yaml: empty file"},
		{"deployment: {}", "x.yaml: the experiment file needs version: 1 at its top"},
		{"version: 2", "x.yaml:1: version: this blis reads version 1 experiment files, got 2"},
		{"version: 1\nruns: {}", `x.yaml:2: unknown key "runs" in the top level; use one of version, deployment, workload, policies, run`},
		{"version: 1\ndeployment:\n  pools:\n    - gpus: 8", `x.yaml:4: unknown key "gpus" in a pool; use one of name, replicas, model, hardware, tp, data_parallel_size, enable_expert_parallel, vllm, latency`},
		{"version: 1\ndeployment:\n  pools:\n    - scheduler: sjf", `x.yaml:4: unknown key "scheduler" in a pool`},
		{"version: 1\ndeployment:\n  pools:\n    - vllm:\n        max_num_seqs: 0", "x.yaml:5: deployment.pools[0].vllm.max_num_seqs: must be >= 1 requests, got 0"},
		{"version: 1\ndeployment:\n  pools:\n    - replicas: 0", "x.yaml:4: deployment.pools[0].replicas: must be in [1, 4096], got 0"},
		{"version: 1\ndeployment:\n  pools:\n    - {name: a}\n    - {name: a}", `x.yaml:5: deployment.pools[1].name: pool name "a" is used twice`},
		{"version: 1\ndeployment: {mode: fleet}", `x.yaml:2: deployment.mode: want one of instance, cluster, got "fleet"`},
		{"version: 1\ndeployment:\n  mode: instance\n  pools: [{replicas: 2}]", "x.yaml:4: deployment.pools[0].replicas: is for cluster runs; deployment.mode is instance"},
		{"version: 1\ndeployment: {mode: instance}\npolicies:\n  routing: {type: weighted}", "x.yaml:4: policies.routing: is for cluster runs"},
		{"version: 1\ndeployment:\n  router: {routing_latency_us: -1}", "x.yaml:3: deployment.router.routing_latency_us: must be within [0, 1099511627776] µs, got -1"},
		{"version: 1\ndeployment:\n  router:\n    snapshot_refresh_us: {queue_depth: -5}", "x.yaml:4: deployment.router.snapshot_refresh_us.queue_depth: must be within [0, 1099511627776] µs"},
		{"version: 1\nworkload:\n  synthetic: {rate: 1}\n  scenario: agentic", "x.yaml:3: workload.synthetic cannot be combined with x.yaml:4: workload.scenario"},
		{"version: 1\nworkload:\n  synthetic:\n    rate: 0", "x.yaml:4: workload.synthetic.rate: must be > 0 requests/s, got 0"},
		{"version: 1\nworkload:\n  synthetic:\n    prompt_tokens: banana", "x.yaml:4: workload.synthetic.prompt_tokens:"},
		{"version: 1\nworkload:\n  scenario: nope", "x.yaml:3: workload.scenario:"},
		{"version: 1\nworkload:\n  synthetic:\n    gamma_cv: 3", "x.yaml:4: workload.synthetic.gamma_cv: has no effect with poisson arrivals"},
		{"version: 1\nworkload:\n  synthetic:\n    prefix_groups: 0\n    prefix_tokens: 64", "x.yaml:5: workload.synthetic.prefix_tokens: has no effect with workload.synthetic.prefix_groups 0"},
		{"version: 1\ndeployment:\n  pools:\n    - vllm: {offload_threshold: 0.5}", "x.yaml:4: deployment.pools[0].vllm.offload_threshold: has no effect without a CPU KV tier"},
		{"version: 1\nworkload:\n  replay: {format: csv}", "x.yaml:3: workload.replay.path: give the trace to replay"},
		{"version: 1\nworkload:\n  replay: {path: x.csv, format: kimi}", `x.yaml:3: workload.replay.format: want one of auto, csv, parquet`},
		{"version: 1\nworkload:\n  spec:\n    rate: 1\n    duration_s: 5\n    tenants:\n      - {id: a, weight: -1}", "x.yaml:7: workload.spec.tenants[0].weight:"},
		{"version: 1\nworkload:\n  spec:\n    rate: 1\n    tenants:\n      - {id: a}", "x.yaml:4: workload.spec.duration_s: give duration_s or requests"},
		{"version: 1\npolicies:\n  admission:\n    type: token-bucket\n    params: {capacity: -1}", "x.yaml:5: policies.admission.params.capacity: must be > 0 input tokens, got -1"},
		{"version: 1\npolicies:\n  routing: {type: random}", `x.yaml:3: policies.routing.type: routing policy "random" is not a template; use one of round-robin`},
		{"version: 1\npolicies:\n  routing: {typ: weighted}", `x.yaml:3: unknown key "typ" in a policy section; use one of type, params`},
		{"version: 1\npolicies:\n  priority: {type: constant, params: {age_weight: 2}}", `x.yaml:3: policies.priority.params.age_weight: priority policy constant has no parameter "age_weight"; use one of base`},
		{"version: 1\nrun: {horizon_s: -1}", "x.yaml:2: run.horizon_s: must be within [0, 2305843009213] s, got -1"},
		{"version: 1\nrun: {horizon_s: 1e-9}", "x.yaml:2: run.horizon_s: 1e-9 s is below 1 µs"},
		{"version: 1\nrun: {trace_level: all}", `x.yaml:2: run.trace_level: want one of none, decisions, detailed, got "all"`},
		{"version: 1\nrun: {trace_level: detailed}", "x.yaml:2: run.trace_level: detailed needs run.outputs.decision_trace FILE"},
		{"version: 1\nrun: {counterfactual_sample: 2}", `x.yaml:2: run.counterfactual_sample: "2" is neither a rate in (0, 1] nor every:N`},
		{"version: 1\nrun: {counterfactual_sample: every:0}", `x.yaml:2: run.counterfactual_sample: "every:0": every:N needs a whole number N >= 1`},
		{"version: 1\nrun: {counterfactual_sample: 0.1, counterfactual_k: 0}", "run.counterfactual_k: must be >= 1 with run.counterfactual_sample"},
		{"version: 1\nrun: {summary_max_tokens: 500}", "x.yaml:2: run.summary_max_tokens: has no effect without run.outputs.summary FILE"},
		{"version: 1\nrun: {summary_max_tokens: 5, outputs: {summary: s.md}}", "x.yaml:2: run.summary_max_tokens: must be within [100, 100000] tokens, got 5"},
		{"version: 1\ndeployment: {mode: instance}\nrun: {counterfactual_sample: 0.1}", "run.counterfactual_sample: is for cluster runs"},
		{"version: 1\nrun: {trace_level: decisions}", "x.yaml:2: run.trace_level: decisions needs run.outputs.decision_trace FILE"},
		{"version: 1\nrun: {counterfactual_k: 2}", "run.counterfactual_k: has no effect without run.trace_level decisions or detailed"},
		{"version: 1\nrun:\n  counterfactual_k: 5", "x.yaml:3: run.counterfactual_k: has no effect without run.trace_level decisions"},
		{"version: 1\nrun:\n  window: 5s", "x.yaml:3: run.window: needs run.outputs.window_out FILE"},
		{"version: 1\nrun:\n  window: 5s\n  outputs: {window_out: w.txt}", "x.yaml:4: run.outputs.window_out: w.txt: the extension must be .csv or .jsonl"},
		{"version: 1\nrun:\n  otlp: {step_sample_rate: 1}", "x.yaml:3: run.otlp: has no effect without run.outputs.otlp_trace FILE"},
		{"version: 1\nrun:\n  otlp: {step_sample_rate: 2}\n  outputs: {otlp_trace: t.jsonl}", "x.yaml:3: run.otlp.step_sample_rate: must be within [0, 1], got 2"},
		{"version: 1\nrun:\n  fitness_weights: {speed: 1}", `x.yaml:3: run.fitness_weights: fitness key "speed" is not a metric`},
		{"version: 1\nrun:\n  workers: 2", "x.yaml:3: run.workers: is for cluster runs"},
		{"version: 1\ndeployment:\n  pools: [{replicas: 2}]\nrun:\n  outputs: {otlp_trace: t.jsonl, kv_events: k.jsonl}", "x.yaml:5: run.outputs.kv_events: is not supported for a cluster run yet"},
		{"version: 1\ndeployment:\n  pools: [{data_parallel_size: 2}]", "x.yaml:3: deployment.pools[0].data_parallel_size, deployment.pools[0].replicas: a data-parallel server of 2 engines is 2 replicas, got 1"},
		{"version: 1\ndeployment:\n  pools: [{data_parallel_size: 2, replicas: 2}]", "x.yaml:3: deployment.pools[0].data_parallel_size, policies.routing.type: a data-parallel server routes with vLLM's own balancer, vllm-dp, got round-robin"},
	} {
		_, err := parse(t, tc.yaml)
		require.Error(t, err, "%q", tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
		require.NotContains(t, strings.TrimSpace(err.Error()), "\n", "one line")
	}
}

func TestModeIsInferredFromWhatHasAnEffectOnlyInACluster(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		mode Mode
	}{
		{"version: 1", ModeInstance},
		{"version: 1\ndeployment: {pools: [{replicas: 1}]}", ModeInstance},
		{"version: 1\ndeployment: {pools: [{replicas: 2}]}", ModeCluster},
		{"version: 1\ndeployment: {pools: [{name: a}, {name: b}]}", ModeCluster},
		{"version: 1\ndeployment: {router: {admission_latency_us: 10}}", ModeCluster},
		{"version: 1\npolicies: {admission: {type: reject-all}}", ModeCluster},
		{"version: 1\npolicies: {scheduler: {type: sjf}}", ModeInstance},
		{"version: 1\nworkload: {scenario: mixed-slo}", ModeCluster},
		{"version: 1\ndeployment: {mode: cluster}", ModeCluster},
		{"version: 1\nrun: {fitness_weights: {throughput: 1}}", ModeCluster},
	} {
		e, err := parse(t, tc.yaml)
		require.NoError(t, err, tc.yaml)
		require.Equal(t, tc.mode, e.Mode, tc.yaml)
	}
}

// TestPrecedence: an explicit flag beats a policy file, which beats the
// experiment (or deployment) file, which beats the default.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp.yaml")
	require.NoError(t, os.WriteFile(exp, []byte(`version: 1
deployment:
  pools: [{replicas: 3, vllm: {max_num_seqs: 128}}]
policies:
  routing: {type: least-loaded}
  admission: {type: token-bucket, params: {capacity: 5000}}
  scheduler: {type: sjf}
`), 0o644))
	pol := filepath.Join(dir, "pol.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("routing: {type: weighted}\nscheduler: {type: priority-fcfs}\n"), 0o644))
	d, err := Load(exp)
	require.NoError(t, err)
	require.NoError(t, d.LoadPolicies(pol))
	require.NoError(t, d.SetFlag("scheduler", "fcfs"))
	require.NoError(t, d.SetFlag("max-num-seqs", "64"))
	e, err := d.Resolve()
	require.NoError(t, err)
	require.Equal(t, ModeCluster, e.Mode)
	require.Equal(t, "weighted", e.Policies.Routing.Type, "the policy file beats the experiment file")
	require.Equal(t, "fcfs", e.Policies.Scheduler.Type, "a flag beats the policy file")
	require.Equal(t, 5000.0, e.Policies.Admission.Float("capacity"), "the experiment file beats the default")
	require.Equal(t, 50000.0, e.Policies.Admission.Float("refill_rate"), "the default")
	require.Equal(t, int64(64), e.Deployment.Pools[0].Instance.VLLM.MaxNumSeqs, "a flag beats the file")
	require.Equal(t, 3, e.Deployment.Pools[0].Replicas)

	// A flag naming another template replaces the section: the file's
	// parameters for the old one are dropped; a flag's own are kept.
	d, err = Load(exp)
	require.NoError(t, err)
	require.NoError(t, d.SetFlag("admission-policy", "rate-limit"))
	e, err = d.Resolve()
	require.NoError(t, err)
	require.Equal(t, 100.0, e.Policies.Admission.Float("rate"))
	d, err = Load(exp)
	require.NoError(t, err)
	require.NoError(t, d.SetFlag("token-bucket-refill-rate", "7"))
	require.NoError(t, d.Set("policies.admission.type", "rate-limit", "--set policies.admission.type"))
	_, err = d.Resolve()
	require.EqualError(t, err, `--token-bucket-refill-rate: admission policy rate-limit has no parameter "refill_rate"; use one of rate, burst, per_tenant`)

	// Errors name where the value at fault came from.
	d, err = Load(exp)
	require.NoError(t, err)
	require.EqualError(t, d.SetFlag("block-size", "0"), "--block-size: must be within [1, 1024] tokens, got 0")
	d, err = Load(exp)
	require.NoError(t, err)
	require.NoError(t, d.Set("policies.admission.params.capacity", "-1", "--set policies.admission.params.capacity"))
	_, err = d.Resolve()
	require.EqualError(t, err, "--set policies.admission.params.capacity: must be > 0 input tokens, got -1")
}

func TestSet(t *testing.T) {
	d := NewDraft()
	require.NoError(t, d.Set("deployment.pools[*].tp", "2", "s"))
	require.NoError(t, d.Set("deployment.pools[0].replicas", "4", "s"))
	require.NoError(t, d.Set("policies.routing.type", "weighted", "s"))
	require.NoError(t, d.Set("policies.routing.params.scorers", "{queue-depth: 1, load-balance: 2}", "s"))
	require.NoError(t, d.Set("workload.synthetic.prompt_tokens", "const:1000", "s"))
	require.NoError(t, d.Set("deployment.pools[0].latency.blackbox.alpha", "[1, 2, 3]", "s"))
	require.NoError(t, d.Set("deployment.pools[0].latency.model", "blackbox", "s"))
	e, err := d.Resolve()
	require.NoError(t, err)
	require.Equal(t, 2, e.Deployment.Pools[0].Instance.TP)
	require.Equal(t, 4, e.Deployment.Pools[0].Replicas)
	require.Equal(t, ModeCluster, e.Mode)
	require.Equal(t, "queue-depth", e.Policies.Routing.Map("scorers")[0].Key)
	require.Equal(t, [3]float64{1, 2, 3}, e.Deployment.Pools[0].Instance.Latency.Blackbox.Alpha)
	v, ok := e.Get("policies.routing.params.prefix_index_capacity")
	require.True(t, ok)
	require.Equal(t, "0", v) // sized from the instances
	v, ok = e.Get("deployment.pools[0].replicas")
	require.True(t, ok)
	require.Equal(t, "4", v)
	_, ok = e.Get("deployment.pools[3].replicas")
	require.False(t, ok)

	for _, tc := range []struct{ key, value, want string }{
		{"deployment.pools[1].tp", "2", "deployment.pools[1]: there are 1 (indices from 0)"},
		{"deployment.pools.tp", "2", "deployment.pools: a list; give an index"},
		{"deployment.pool[0].tp", "2", "deployment.pool: no such key; deployment takes mode, pools, router"},
		{"run.seed", "many", `s: want a whole number, got "many"`},
		{"run", "1", "run: a mapping; give one of its keys"},
		{"run.seed.x", "1", "run.seed: a value, not a mapping"},
		{"deployment.pools[x].tp", "2", "[x] is not an index"},
		{"", "1", "empty key"},
	} {
		err := d.Set(tc.key, tc.value, "s")
		require.ErrorContains(t, err, tc.want, tc.key)
	}
}

// TestRateScale: rate_scale multiplies the synthetic rate, a spec's
// rate and a replayed trace's (dividing its arrival times).
func TestRateScale(t *testing.T) {
	e, err := parse(t, "version: 1\nworkload:\n  rate_scale: 2.5\n  synthetic: {rate: 4}\n")
	require.NoError(t, err)
	require.Equal(t, 10.0, e.Workload.Synthetic.Rate)
	out, err := e.Marshal()
	require.NoError(t, err)
	require.Contains(t, string(out), "rate_scale: 2.5")
	require.Contains(t, string(out), "rate: 4\n", "the rate as written")
	e, err = parse(t, "version: 1\nworkload:\n  rate_scale: 2\n  scenario: mixed-slo\n")
	require.NoError(t, err)
	base, err := parse(t, "version: 1\nworkload:\n  scenario: mixed-slo\n")
	require.NoError(t, err)
	require.Equal(t, 2*base.Workload.Spec.Rate, e.Workload.Spec.Rate)
	reqs := []sim.RequestSpec{{ID: 0, ArrivalUs: 0, PromptTokens: 10, OutputTokens: 2}, {ID: 1, ArrivalUs: 1_000_001, PromptTokens: 10, OutputTokens: 2}}
	require.NoError(t, scaleArrivals(reqs, 2))
	require.Equal(t, int64(500_001), reqs[1].ArrivalUs, "rounded to the µs")
	require.ErrorContains(t, scaleArrivals([]sim.RequestSpec{{ArrivalUs: 1 << 60}}, 1e-6), "beyond the clock's range")
	_, err = parse(t, "version: 1\nworkload: {rate_scale: 0}\n")
	require.ErrorContains(t, err, "x.yaml:2: workload.rate_scale: must be within (0, 1000000], got 0")
}

func TestFlagsTable(t *testing.T) {
	def := Default()
	seen := map[string]bool{}
	for _, f := range Flags {
		require.False(t, seen[f.Name], "--%s listed twice", f.Name)
		seen[f.Name] = true
		require.NotEmpty(t, f.Help, f.Name)
		require.Contains(t, []string{"bool", "int", "float", "string"}, f.Type, f.Name)
		if f.Key == "" {
			continue
		}
		// Every key a flag names exists: setting its default is accepted.
		d := NewDraft()
		if f.Default != "" {
			require.NoError(t, d.SetFlag(f.Name, f.Default), f.Name)
		}
		if v, ok := def.Get(strings.ReplaceAll(f.Key, "[*]", "[0]")); ok && f.Default != "" {
			require.Equal(t, f.Default, v, "--%s's default is not the experiment's", f.Name)
		}
	}
	require.Equal(t, "--max-num-seqs", PoolFlag("vllm.max_num_seqs"))
	require.Equal(t, "--max-num-seqs", flagOf("deployment.pools[3].vllm.max_num_seqs"))
	require.Equal(t, "", flagOf("no.such.key"))
}

// TestMarshalRoundTrips: --print-config's file resolves to the same
// experiment, which marshals to the same bytes.
func TestMarshalRoundTrips(t *testing.T) {
	for _, text := range []string{
		"version: 1",
		`version: 1
deployment:
  pools:
    - {name: a, replicas: 2, vllm: {max_num_seqs: 64, total_kv_blocks_gpu: "5000"}, latency: {model: roofline, roofline: {compute_eff: 0.5}}}
    - {name: b, hardware: a100-80gb, latency: {model: blackbox, noise: 0.05}}
  router:
    admission_latency_us: 20
    snapshot_refresh_us: {cache_hit_rate: 10000}
workload:
  synthetic: {requests: 50, arrival: gamma, gamma_cv: 3}
policies:
  admission: {type: rate-limit, params: {rate: 12.5, per_tenant: true}}
  priority: {type: slo-based, params: {batch_score: -1}}
  routing: {type: weighted, params: {scorers: {load-balance: 1, prefix-affinity: 0.1}}}
  scheduler: {type: priority-fcfs}
run:
  seed: 7
  horizon_s: 12.5
  trace_level: decisions
  counterfactual_k: 5
  fitness_weights: {throughput: 1, p99_ttft: 0.5}
  window: 2s
  outputs: {decision_trace: d.jsonl, window_out: w.csv}
`,
		"version: 1\nworkload:\n  scenario: unfair-tenants\npolicies:\n  priority: {type: tenant-priority, params: {tenants: {high-priority-realtime: 10}}}\n",
		"version: 1\nworkload:\n  spec:\n    rate: 3\n    duration_s: 60\n    tenants:\n      - {id: a, slo_class: realtime}\n",
		"version: 1\nworkload:\n  replay: {path: trace.csv, strict: true}\nrun:\n  outputs: {otlp_trace: t.jsonl}\n  otlp: {step_sample_rate: 1}\n",
		"version: 1\ndeployment:\n  pools: [{name: p, role: prefill}, {name: d, role: decode, replicas: 2}]\n  network: {nic_gb_per_s: 25, latency_us: 50}\npolicies:\n  disaggregation: {type: prefix-threshold, params: {threshold: 64, prefill_scorers: {queue-depth: 1}}}\n",
	} {
		e, err := parse(t, text)
		require.NoError(t, err, text)
		out, err := e.Marshal()
		require.NoError(t, err)
		e2, err := parse(t, string(out))
		require.NoError(t, err, "%s", out)
		out2, err := e2.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2))
		if e.Workload.Kind == Replay {
			continue
		}
		// The same run: the same report.
		var reports [2]bytes.Buffer
		for i, x := range []*Experiment{e, e2} {
			x.Workload.Synthetic.Requests = min(x.Workload.Synthetic.Requests, 200)
			x.Run.HorizonS = min(x.Run.HorizonS, 20)
			if x.Run.HorizonS == 0 {
				x.Run.HorizonS = 20
			}
			res, err := Run(context.Background(), x, &MemSinks{})
			require.NoError(t, err, "%s", out)
			require.NoError(t, res.WriteJSON(&reports[i]))
		}
		require.Equal(t, reports[0].String(), reports[1].String())
	}
}

// ExampleRun runs an experiment written in YAML in-process.
func ExampleRun() {
	d, err := Parse([]byte(`version: 1
deployment:
  pools: [{replicas: 2}]
workload:
  synthetic: {requests: 200, rate: 20}
policies:
  routing: {type: least-loaded}
run:
  seed: 1
`), "example.yaml")
	if err != nil {
		panic(err)
	}
	e, err := d.Resolve()
	if err != nil {
		panic(err)
	}
	res, err := Run(context.Background(), e, nil)
	if err != nil {
		panic(err)
	}
	m := res.Cluster
	fmt.Printf("%s mode: %d of %d requests completed on %d instances\n", res.Mode, m.Requests.Completed, m.Requests.Arrived, len(m.Instances))
	// Output: cluster mode: 200 of 200 requests completed on 2 instances
}

// TestRunCancelled: a run whose context ends early returns the metrics so
// far marked partial, with the context's error, and writes no output.
func TestRunCancelled(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []string{"instance", "cluster"} {
		out := filepath.Join(dir, mode+".jsonl")
		e, err := parse(t, "version: 1\ndeployment: {mode: "+mode+"}\nworkload: {synthetic: {requests: 100000, rate: 1000}}\nrun:\n  outputs: {otlp_trace: "+out+"}\n")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := Run(ctx, e, &FileSinks{})
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, res)
		require.True(t, res.Partial)
		var rep struct {
			Partial bool `json:"partial"`
		}
		var b bytes.Buffer
		require.NoError(t, res.WriteJSON(&b))
		require.NoError(t, json.Unmarshal(b.Bytes(), &rep))
		require.True(t, rep.Partial)
		_, err = os.Stat(out)
		require.True(t, errors.Is(err, os.ErrNotExist), "no partial output file")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "no temporary file left either")
	}
}

// TestMemSinks: outputs can go to memory; they are kept only when the run
// finished.
func TestMemSinks(t *testing.T) {
	e, err := parse(t, "version: 1\ndeployment: {pools: [{replicas: 2}]}\nworkload: {synthetic: {requests: 20}}\nrun:\n  trace_level: decisions\n  outputs: {decision_trace: d.jsonl}\n")
	require.NoError(t, err)
	s := &MemSinks{}
	res, err := Run(context.Background(), e, s)
	require.NoError(t, err)
	require.True(t, s.Committed)
	lines := strings.Count(s.Files["run.outputs.decision_trace"].String(), "\n")
	require.Equal(t, int(2*res.Cluster.Requests.Arrived), lines, "one admission and one routing line per request")
}

// TestOutputMustNotBeAnInput: a run refuses to write over its inputs.
func TestOutputMustNotBeAnInput(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("version: 1\nrate: 1\nduration_s: 5\ntenants: [{id: a}]\n"), 0o644))
	e, err := parse(t, "version: 1\nworkload: {spec_file: "+spec+"}\nrun:\n  trace_level: decisions\n  outputs: {decision_trace: "+spec+"}\n")
	require.NoError(t, err)
	_, err = Run(context.Background(), e, nil)
	require.ErrorContains(t, err, "is also")
}

// TestEveryKeyIsDocumented: docs/experiment.md names every key of the
// file.
func TestEveryKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "experiment.md"))
	require.NoError(t, err)
	var keys []string
	var walk func(tp reflect.Type, at string)
	walk = func(tp reflect.Type, at string) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || tp == reflect.TypeOf(yaml.Node{}) {
			return
		}
		for i := 0; i < tp.NumField(); i++ {
			tag := strings.Split(tp.Field(i).Tag.Get("yaml"), ",")
			if len(tag) > 1 && tag[1] == "inline" {
				walk(tp.Field(i).Type, at)
				continue
			}
			k := join(at, tag[0])
			keys = append(keys, k)
			walk(tp.Field(i).Type, k)
		}
	}
	walk(reflect.TypeOf(fileYAML{}), "")
	require.Greater(t, len(keys), 60)
	for _, k := range keys {
		last := k[strings.LastIndex(k, ".")+1:]
		require.True(t, strings.Contains(string(doc), "`"+last+"`"), "docs/experiment.md does not describe %s", k)
	}
}

func TestClusterResultIsTheSameForAnyWorkers(t *testing.T) {
	var outs []string
	for _, w := range []string{"1", "3"} {
		e, err := parse(t, "version: 1\ndeployment: {pools: [{replicas: 3, latency: {model: roofline}}]}\nworkload: {synthetic: {requests: 300, rate: 30}}\npolicies: {routing: {type: prefix-affinity}}\nrun: {workers: "+w+"}\n")
		require.NoError(t, err)
		res, err := Run(context.Background(), e, nil)
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, res.WriteJSON(&b))
		outs = append(outs, b.String())
		require.IsType(t, &cluster.Result{}, res.Cluster)
	}
	require.Equal(t, outs[0], outs[1])
}

// A workload spec's source hears of every departure, but an open-loop one
// sends nothing then, so its runs advance instances in parallel windows:
// the result is the same for any number of workers, through the
// autoscaler's scale-ups and -downs (fleet-day, scaled down).
func TestSpecWorkloadResultIsTheSameForAnyWorkers(t *testing.T) {
	var outs []string
	for _, w := range []int{1, 2} {
		d, err := LoadScenario("fleet-day")
		require.NoError(t, err)
		for _, kv := range [][2]string{{"workload.spec.duration_s", "60"}, {"workload.spec.rate", "150"},
			{"workload.spec.arrival.period_s", "30"}, {"deployment.pools[0].replicas", "2"},
			{"deployment.pools[0].min_replicas", "1"}, {"deployment.pools[0].max_replicas", "12"},
			{"deployment.pools[0].nodes.provision_s", "[1,2]"}, {"deployment.pools[0].startup.image_pull_s", "1"},
			{"deployment.pools[0].startup.compile_s", "1"}, {"deployment.pools[0].startup.graph_capture_s", "1"},
			{"policies.autoscale.params.scale_down_window_s", "2"}, {"policies.autoscale.params.scale_down_percent", "100"}} {
			require.NoError(t, d.Set(kv[0], kv[1], "test"))
		}
		e, err := d.Resolve()
		require.NoError(t, err)
		e.Run.Workers = w
		res, err := Run(context.Background(), e, nil)
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, res.WriteJSON(&b))
		outs = append(outs, b.String())
		m := res.Cluster
		require.Greater(t, m.Requests.Completed, int64(8000))
		p := m.Fleet.Pools[0]
		require.Positive(t, p.ScaleUps, "instances joined the workers")
		require.Positive(t, p.Terminated, "instances left them")
	}
	require.Equal(t, outs[0], outs[1])
}
