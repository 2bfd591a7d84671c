package deploy

import (
	"strings"
	"testing"
)

// FuzzParseDeployment: any bytes give a deployment or an error naming the
// file, never a panic; a parsed deployment has at least one instance, at
// most MaxInstances, and pool names that are unique and well-formed.
func FuzzParseDeployment(f *testing.F) {
	for _, seed := range []string{
		"pools:\n  - replicas: 2\n",
		"pools:\n  - name: a\n    replicas: 3\n    vllm:\n      max_num_seqs: 64\n      total_kv_blocks_gpu: auto\n  - name: b\n    hardware: a100-80gb\n",
		"pools:\n  - {}\nrouting:\n  policy: weighted\n  scorers: prefix-affinity:3,queue-depth:2\n  snapshot_refresh_interval_us: 10000\nobservability:\n  cache_hit_rate: immediate\n",
		"pools:\n  - latency:\n      model: blackbox\n      blackbox: {alpha: [1, 2, 3], beta: [4, 5, 6]}\nadmission:\n  policy: token-bucket\n  token_bucket_capacity: 100\n",
		"pools: []", "pools:\n  - replicas: -1", "pools:\n  - tp: x", "a: b\n---\nc: d", "", "pools:\n  - name: a\n  - name: a",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDeployment(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if n := d.NumInstances(); n < 1 || n > MaxInstances {
			t.Fatalf("%d instances", n)
		}
		seen := map[string]bool{}
		for _, p := range d.Pools {
			if seen[p.Name] || !poolNameRE.MatchString(p.Name) || p.Replicas < 1 {
				t.Fatalf("pool %+v", p)
			}
			seen[p.Name] = true
		}
		if err := d.Freshness.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
