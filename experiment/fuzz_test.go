package experiment

import (
	"strings"
	"testing"
)

// FuzzParseExperiment: any bytes give an experiment or an error that names
// the file, on one line, never a panic; a resolved experiment marshals to
// a file that resolves again and marshals to the same bytes.
func FuzzParseExperiment(f *testing.F) {
	for _, seed := range []string{
		"version: 1",
		"version: 1\ndeployment:\n  pools:\n    - {name: a, replicas: 2, vllm: {max_num_seqs: 64}}\n    - {name: b, hardware: a100-80gb, latency: {model: roofline, roofline: {compute_eff: 0.5}}}\n  router: {admission_latency_us: 10, snapshot_refresh_us: {queue_depth: 5000}}\n",
		"version: 1\nworkload:\n  synthetic: {requests: 10, rate: 2, arrival: gamma, prompt_tokens: 'const:100'}\npolicies:\n  routing: {type: weighted, params: {scorers: {queue-depth: 1}}}\n",
		"version: 1\nworkload:\n  spec:\n    rate: 1\n    duration_s: 10\n    tenants: [{id: a, slo_class: realtime}]\npolicies:\n  priority: {type: tenant-priority, params: {tenants: {a: 3}}}\n",
		"version: 1\nworkload: {scenario: mixed-slo}\nrun: {trace_level: decisions, outputs: {decision_trace: d.jsonl}, window: 5s}\n",
		"version: 1\ndeployment: {mode: instance}\npolicies: {routing: {type: weighted}}\n",
		"version: 1\nrun: {fitness_weights: {throughput: 1}}\n", "version: 2", "", "version: 1\nruns: 1",
		"version: 1\ndeployment:\n  pools:\n    - {name: a, replicas: 2, vllm: {total_kv_blocks_cpu: 1000}, kv_tiers: {disk: {capacity_gb: 100, read_gb_per_s: 7}}}\n    - {name: b, kv_tiers: {store: false}}\n  kv_store: {capacity_gb: 500, high_watermark: 0.9, eviction_ratio: 0.1, get_gb_per_s: 10, latency_us: 500, sync_us: 2000}\n",
		"version: 1\ndeployment:\n  pools: [{kv_tiers: {store: true}}]\n", "version: 1\ndeployment:\n  kv_store: {capacity_gb: -1}\n",
		"version: 1\ndeployment:\n  pools: [{kv_tiers: {disk: {capacity_gb: 1}}}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, "fuzz.yaml")
		var e *Experiment
		if err == nil {
			e, err = d.Resolve()
		}
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "fuzz.yaml") && !strings.Contains(msg, "workload.") && !strings.Contains(msg, "deployment.") {
				t.Fatalf("error names neither the file nor a key: %v", err)
			}
			if strings.Contains(strings.TrimSpace(msg), "\n") {
				t.Fatalf("error on several lines: %q", msg)
			}
			return
		}
		out, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		d2, err := Parse(out, "printed.yaml")
		if err != nil {
			t.Fatalf("printed config does not parse: %v\n%s", err, out)
		}
		e2, err := d2.Resolve()
		if err != nil {
			t.Fatalf("printed config does not resolve: %v\n%s", err, out)
		}
		out2, err := e2.Marshal()
		if err != nil || string(out) != string(out2) {
			t.Fatalf("printed twice, differently:\n%s\n%s", out, out2)
		}
	})
}

// FuzzParseDeployment: any bytes read as a deployment file (--deployment)
// give an experiment or an error naming the file, never a panic; a
// resolved one has 1 to 4096 instances with unique pool names.
func FuzzParseDeployment(f *testing.F) {
	for _, seed := range []string{
		"pools:\n  - replicas: 2\n",
		"pools:\n  - name: a\n    replicas: 3\n    vllm:\n      max_num_seqs: 64\n      total_kv_blocks_gpu: auto\n  - name: b\n    hardware: a100-80gb\n",
		"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: prefix-affinity:3,queue-depth:2\n  snapshot_refresh_interval_us: 10000\nobservability:\n  cache_hit_rate: immediate\n",
		"pools:\n  - latency:\n      model: blackbox\n      blackbox: {alpha: [1, 2, 3], beta: [4, 5, 6]}\nadmission:\n  policy: token-bucket\n  token_bucket_capacity: 100\n",
		"pools:\n  - {scheduler: sjf, priority: slo-based, priority_age_weight: 2}\n  - {scheduler: sjf, priority: slo-based, priority_age_weight: 2}\n",
		"pools: []", "pools:\n  - replicas: -1", "pools:\n  - tp: x", "a: b\n---\nc: d", "", "pools:\n  - name: a\n  - name: a",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDraft()
		err := d.ParseDeployment(data, "fuzz.yaml")
		var e *Experiment
		if err == nil {
			e, err = d.Resolve()
		}
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if n := e.Deployment.NumInstances(); n < 1 || n > 4096 {
			t.Fatalf("%d instances", n)
		}
		seen := map[string]bool{}
		for _, p := range e.Deployment.Pools {
			if seen[p.Name] || p.Replicas < 1 {
				t.Fatalf("pool %+v", p)
			}
			seen[p.Name] = true
		}
		if err := e.Deployment.Router.Freshness.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
