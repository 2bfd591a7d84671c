package policy

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParsePolicyFile: any bytes give a policy file or an error naming the
// file on one line, never a panic; every section parsed writes and reads
// back to itself, and builds.
func FuzzParsePolicyFile(f *testing.F) {
	for _, seed := range []string{
		"admission: {type: token-bucket, params: {capacity: 500, per_tenant: true}}\n",
		"version: 1\nrouting: {type: weighted, params: {scorers: {prefix-affinity: 3, queue-depth: 2}, prefix_index_capacity: 64}}\n",
		"priority: {type: slo-based, params: {age_weight: 0.5, batch_score: -3}}\nscheduler: {type: priority-fcfs}\n",
		"routing: {type: prefix-affinity, params: {min_match_share: 0.25}}\nautoscale: {type: none}\n",
		"admission: {type: tenant-quota, params: {max_in_flight: 4}}\npriority: {type: deadline-aware, params: {default_budget_ms: 50}}\n",
		"admission: {type: rate-limit, params: {rate: .inf}}", "routing: {type: weighted, params: {scorers: {}}}", "", "version: 2", "a: [",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := ParseFile(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") || strings.Contains(strings.TrimSpace(err.Error()), "\n") {
				t.Fatalf("error does not name the file on one line: %q", err)
			}
			return
		}
		env := Env{Instances: 2}
		for _, s := range pf.Sections {
			if s == nil {
				continue
			}
			out, err := yaml.Marshal(s.Node())
			if err != nil {
				t.Fatal(err)
			}
			var r Raw
			if err := yaml.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			back, err := ParseSection(s.Kind, r)
			if err != nil || !back.Equal(*s) {
				t.Fatalf("%s does not read back: %v\n%s", s.Kind, err, out)
			}
			switch s.Kind {
			case Admission:
				_, err = s.Admission(env)
			case Routing:
				_, err = s.Routing(env)
			case Priority:
				_, err = s.Priority(env)
			case Scheduler:
				_, err = s.Scheduler()
			}
			if err != nil && !strings.Contains(err.Error(), "tenant") {
				t.Fatalf("%s does not build: %v", s.Kind, err)
			}
		}
	})
}
