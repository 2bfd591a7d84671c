package policy

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

var update = flag.Bool("update", false, "record the schema's additions and regenerate docs/policies.md (go test ./policy -update)")

// TestSchemaOnlyGrows: every template and parameter of the frozen schema
// is still there with the same type, unit, default and range (so a
// policy file that worked keeps working the same); what was added since
// must be recorded with -update. -update cannot record a removal: the
// first check runs before it writes.
func TestSchemaOnlyGrows(t *testing.T) {
	path := filepath.Join("testdata", "schema.golden.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err, "regenerate with go test ./policy -update")
	var frozen []SchemaEntry
	require.NoError(t, json.Unmarshal(data, &frozen))
	cur := Schema()
	for _, f := range frozen {
		var found *SchemaEntry
		for i := range cur {
			if cur[i].Kind == f.Kind && cur[i].Name == f.Name {
				found = &cur[i]
			}
		}
		require.NotNil(t, found, "%s template %s was removed or renamed; the schema only grows", f.Kind, f.Name)
		for _, fp := range f.Params {
			var got *SchemaParam
			for i := range found.Params {
				if found.Params[i].Name == fp.Name {
					got = &found.Params[i]
				}
			}
			require.NotNil(t, got, "%s %s: parameter %s was removed or renamed", f.Kind, f.Name, fp.Name)
			require.Equal(t, fp, *got, "%s %s: parameter %s changed its type, unit, default or range", f.Kind, f.Name, fp.Name)
		}
	}
	if *update {
		require.NoError(t, os.WriteFile(path, SchemaJSON(), 0o644))
		return
	}
	require.Equal(t, string(data), string(SchemaJSON()), "the schema grew: record the additions with go test ./policy -update")
}

// TestPoliciesDocIsCurrent: docs/policies.md is generated from the schema.
func TestPoliciesDocIsCurrent(t *testing.T) {
	path := filepath.Join("..", "docs", "policies.md")
	if *update {
		require.NoError(t, os.WriteFile(path, Markdown(), 0o644))
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(Markdown()), string(data), "docs/policies.md is stale: go test ./policy -update")
}

// TestTemplatesNamesMatchTheirPackages: every template of the issue's
// list exists, and the admission, routing, scheduler and priority names
// are the ones their packages accept.
func TestTemplatesNamesMatchTheirPackages(t *testing.T) {
	for kind, names := range map[Kind][]string{
		Admission: {"always-admit", "token-bucket", "rate-limit", "tenant-quota", "reject-all"},
		Priority:  {"constant", "slo-based", "tenant-priority", "deadline-aware", "inverted-slo"},
		Routing:   {"round-robin", "least-loaded", "weighted", "prefix-affinity", "always-busiest"},
		Scheduler: {"fcfs", "priority-fcfs", "sjf", "reverse-priority"},
		Autoscale: {"none"},
	} {
		for _, n := range names {
			_, err := Lookup(kind, n)
			require.NoError(t, err, "%s %s", kind, n)
		}
	}
	for _, n := range Names(Admission) {
		require.Contains(t, admit.Names, n)
	}
	for _, n := range Names(Routing) {
		require.Contains(t, route.Names, n)
	}
	for _, n := range Names(Scheduler) {
		_, err := sim.ParseScheduler(n)
		require.NoError(t, err)
	}
	for _, n := range Names(Priority) {
		_, err := sim.ParsePriority(n)
		require.NoError(t, err)
	}
	for _, k := range Kinds {
		for _, tp := range Templates(k) {
			require.NotEmpty(t, tp.Doc, "%s %s", k, tp.Name)
			for _, p := range tp.Params {
				require.NotEmpty(t, p.Doc, "%s %s %s", k, tp.Name, p.Name)
				defaults := []Value{p.Default}
				if p.DefaultBy != nil {
					defaults = nil
					_, on := param(&tp, p.DefaultBy.Param)
					require.NotNil(t, on, "%s %s %s: DefaultBy names no parameter", k, tp.Name, p.Name)
					for _, c := range p.DefaultBy.Cases {
						require.Contains(t, on.Enum, c.When, "%s %s %s", k, tp.Name, p.Name)
						defaults = append(defaults, c.V)
					}
				}
				for _, d := range defaults {
					switch p.Type {
					case Float, Int:
						require.NoError(t, p.Check(float64(d.I)+d.F), "%s %s %s: the default is out of range", k, tp.Name, p.Name)
					case String:
						require.Contains(t, p.Enum, d.S, "%s %s %s: the default is not among the values", k, tp.Name, p.Name)
					}
				}
			}
		}
	}
}

func raw(t *testing.T, typ, params string) Raw {
	t.Helper()
	r := Raw{Type: typ}
	if params != "" {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(params), &doc))
		r.Params = *doc.Content[0]
	}
	return r
}

func TestParseSection(t *testing.T) {
	s, err := ParseSection(Admission, raw(t, "token-bucket", "{capacity: 500}"))
	require.NoError(t, err)
	require.Equal(t, 500.0, s.Float("capacity"))
	require.Equal(t, 50000.0, s.Float("refill_rate"), "a parameter not given takes its default")
	require.False(t, s.Bool("per_tenant"))

	s, err = ParseSection(Routing, raw(t, "weighted", "{scorers: {load-balance: 1, queue-depth: 2.5}}"))
	require.NoError(t, err)
	require.Equal(t, []Entry{{Key: "load-balance", V: 1}, {Key: "queue-depth", V: 2.5}}, s.Map("scorers"), "in the order given")

	for _, tc := range []struct {
		kind                  Kind
		typ, params, key, msg string
	}{
		{Admission, "maybe", "", "type", `admission policy "maybe" is not a template; use one of always-admit, token-bucket, rate-limit, tenant-quota, reject-all`},
		{Admission, "always-admit", "{capacity: 1}", "params.capacity", "admission policy always-admit takes no parameters"},
		{Admission, "token-bucket", "{capacity: 0}", "params.capacity", "must be > 0 input tokens, got 0"},
		{Admission, "token-bucket", "{refill_rate: -1}", "params.refill_rate", "must be >= 0 input tokens/s, got -1"},
		{Admission, "token-bucket", "{capacity: .inf}", "params.capacity", "must be finite and > 0 input tokens, got .inf"},
		{Admission, "token-bucket", "{capacity: lots}", "params.capacity", `want a number, got "lots"`},
		{Admission, "token-bucket", "{per_tenant: 1}", "params.per_tenant", `want true or false, got "1"`},
		{Admission, "token-bucket", "{capacity: 1, capacity: 2}", "params.capacity", "given twice"},
		{Admission, "tenant-quota", "{max_in_flight: 1.5}", "params.max_in_flight", "want a whole number, got 1.5"},
		{Admission, "tenant-quota", "{tenants: {a: 0}}", "params.tenants.a", "must be within [1, 1099511627776] requests, got 0"},
		{Admission, "tenant-quota", "{tenants: [1]}", "params.tenants", "must be a mapping"},
		{Routing, "weighted", "{scorers: {cache: 1}}", "params.scorers.cache", `"cache" is not one of prefix-affinity, queue-depth, kv-utilization, load-balance`},
		{Routing, "weighted", "{scorers: {queue-depth: 0}}", "params.scorers", "the weights are all 0"},
		{Routing, "weighted", "{scorers: {queue-depth: 1e308, load-balance: 1e308}}", "params.scorers", "the weights sum to more than"},
		{Routing, "weighted", "{scorers: {}}", "params.scorers", "give at least one of"},
		{Routing, "weighted", "{prefix_index_capacity: -1}", "params.prefix_index_capacity", "must be within [0, 1073741824] blocks, got -1"},
		{Routing, "prefix-affinity", "{min_match_share: 1}", "params.min_match_share", "must be within [0, 1), got 1"},
		{Priority, "slo-based", "{age_weight: -1}", "params.age_weight", "must be >= 0 score per second, got -1"},
		{Priority, "constant", "{age_weight: 1}", "params.age_weight", `priority policy constant has no parameter "age_weight"; use one of base`},
		{Scheduler, "sjf", "{respect_priority: true}", "params.respect_priority", "scheduler policy sjf takes no parameters"},
		{Autoscale, "hpa-v3", "", "type", `autoscale policy "hpa-v3" is not a template; use one of none, hpa, saturation, queue-depth, target-utilization, kpa, oscillator`},
		{Autoscale, "hpa", "{metric: cpu}", "params.metric", `want one of kv_utilization, queue_depth, running, in_flight, slo_attainment, got "cpu"`},
		{Autoscale, "hpa", "{metric: [kv_utilization]}", "params.metric", "want one of kv_utilization"},
		{Autoscale, "hpa", "{metric: running}", "params.target", "has no default with metric running; give one"},
		{Autoscale, "hpa", "{interval_s: 0}", "params.interval_s", "must be within [0.001, 86400] s, got 0"},
		{Autoscale, "kpa", "{panic_threshold: 0.5}", "params.panic_threshold", "must be within [1, 1000], got 0.5"},
		{Admission, "token-bucket", "[1, 2]", "params", "must be a mapping of parameter: value"},
	} {
		_, err := ParseSection(tc.kind, raw(t, tc.typ, tc.params))
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%s %s %s", tc.kind, tc.typ, tc.params)
		require.Equal(t, tc.key, fe.Key, "%s %s %s", tc.kind, tc.typ, tc.params)
		require.ErrorContains(t, err, tc.msg, "%s %s %s", tc.kind, tc.typ, tc.params)
	}
}

// TestNodeRoundTrips: a section written (--print-config) reads back to
// the same section, for every template at its defaults and with values.
func TestNodeRoundTrips(t *testing.T) {
	check := func(s Section) {
		t.Helper()
		data, err := yaml.Marshal(s.Node())
		require.NoError(t, err)
		var r Raw
		require.NoError(t, yaml.Unmarshal(data, &r))
		back, err := ParseSection(s.Kind, r)
		require.NoError(t, err, "%s", data)
		require.True(t, s.Equal(back), "%s", data)
		j1, err := json.Marshal(s)
		require.NoError(t, err)
		j2, err := json.Marshal(back)
		require.NoError(t, err)
		require.JSONEq(t, string(j1), string(j2))
	}
	for _, k := range Kinds {
		for _, tp := range Templates(k) {
			check(newSection(&tp))
		}
	}
	s, err := ParseSection(Priority, raw(t, "tenant-priority", "{base: 0.1, tenants: {gold: 1e-9, bronze: -3}, default_score: 0.30000000000000004}"))
	require.NoError(t, err)
	check(s)
	s, err = ParseSection(Admission, raw(t, "rate-limit", "{rate: 123.456, burst: 7, per_tenant: true}"))
	require.NoError(t, err)
	check(s)
}

func TestSet(t *testing.T) {
	s := Default(Routing)
	require.ErrorContains(t, s.Set("scorers", "{a: 1}"), "round-robin takes no parameters")
	s, err := ParseSection(Routing, Raw{Type: "weighted"})
	require.NoError(t, err)
	require.NoError(t, s.Set("scorers", "{queue-depth: 1}"))
	require.Equal(t, []Entry{{Key: "queue-depth", V: 1}}, s.Map("scorers"))
	require.NoError(t, s.Set("prefix_index_capacity", "64"))
	require.Equal(t, int64(64), s.Int("prefix_index_capacity"))
	require.ErrorContains(t, s.Set("prefix_index_capacity", "-1"), "must be within [0, 1073741824] blocks")
	require.ErrorContains(t, s.Set("nope", "1"), `has no parameter "nope"`)
}

func TestBuild(t *testing.T) {
	env := Env{Instances: 3, Tenants: []string{"gold", "bronze"}}
	env.TTFTUs[sim.SLORealtime], env.E2EUs[sim.SLOBatch] = 200_000, 600_000_000

	s, err := ParseSection(Admission, raw(t, "tenant-quota", "{max_in_flight: 5, tenants: {bronze: 2}}"))
	require.NoError(t, err)
	a, err := s.Admission(env)
	require.NoError(t, err)
	q := a.(*admit.TenantQuota)
	require.Equal(t, int64(5), q.Limit(0))
	require.Equal(t, int64(2), q.Limit(1))
	_, err = s.Admission(Env{Instances: 1})
	require.ErrorContains(t, err, "the workload names no tenants")
	s, err = ParseSection(Admission, raw(t, "tenant-quota", "{tenants: {silver: 2}}"))
	require.NoError(t, err)
	_, err = s.Admission(env)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "params.tenants.silver", fe.Key)
	require.ErrorContains(t, err, `no tenant "silver" in the workload; its tenants are gold, bronze`)

	s, err = ParseSection(Admission, raw(t, "token-bucket", "{per_tenant: true, capacity: 10}"))
	require.NoError(t, err)
	a, err = s.Admission(env)
	require.NoError(t, err)
	ok, _ := a.Admit(&sim.RequestSpec{Tenant: 0, PromptTokens: 10}, 0)
	require.True(t, ok)
	ok, _ = a.Admit(&sim.RequestSpec{Tenant: 1, PromptTokens: 10}, 0)
	require.True(t, ok, "tenant 1 has a bucket of its own")
	ok, _ = a.Admit(&sim.RequestSpec{Tenant: 0, PromptTokens: 10}, 0)
	require.False(t, ok)

	s, err = ParseSection(Priority, raw(t, "deadline-aware", "{default_budget_ms: 5}"))
	require.NoError(t, err)
	p, err := s.Priority(env)
	require.NoError(t, err)
	require.Equal(t, [4]int64{5000, 200_000, 5000, 600_000_000}, p.DeadlineUs, "TTFT target, else E2E target, else the default budget")

	s, err = ParseSection(Priority, raw(t, "slo-based", ""))
	require.NoError(t, err)
	p, err = s.Priority(env)
	require.NoError(t, err)
	require.Equal(t, [4]float64{50, 100, 50, 10}, p.ClassScore, "docs/simulator.md, slo-based: realtime 100, batch 10, else 50")
	require.Equal(t, 1.0, p.AgeWeight)

	s, err = ParseSection(Priority, raw(t, "tenant-priority", "{tenants: {bronze: -1}, default_score: 3}"))
	require.NoError(t, err)
	p, err = s.Priority(env)
	require.NoError(t, err)
	require.Equal(t, []float64{3, -1}, p.TenantScore)

	for _, n := range Names(Routing) {
		s, err := ParseSection(Routing, Raw{Type: n})
		require.NoError(t, err)
		r, err := s.Routing(env)
		require.NoError(t, err, n)
		require.Equal(t, n, r.Name())
	}
	for _, n := range Names(Scheduler) {
		s, err := ParseSection(Scheduler, Raw{Type: n})
		require.NoError(t, err)
		sc, err := s.Scheduler()
		require.NoError(t, err)
		require.Equal(t, n, sc.String())
	}
}

func TestParseFile(t *testing.T) {
	f, err := ParseFile([]byte("version: 1\nrouting: {type: prefix-affinity, params: {min_match_share: 0.5}}\n"), "p.yaml")
	require.NoError(t, err)
	require.Nil(t, f.Sections[0])
	require.Equal(t, 0.5, f.Sections[2].Float("min_match_share"))
	for _, tc := range []struct{ yaml, want string }{
		{"routing: {type: random}", `p.yaml:1: routing.type: routing policy "random" is not a template`},
		{"admission:\n  type: token-bucket\n  params:\n    capacity: -1\n", "p.yaml:4: admission.params.capacity: must be > 0 input tokens, got -1"},
		{"admision: {type: reject-all}", `p.yaml:1: unknown key "admision" in a policy file; use one of version, admission, priority, routing, scheduler, autoscale`},
		{"routing: {type: weighted, parameters: {}}", `p.yaml:1: unknown key "parameters" in a policy section; use one of type, params`},
		{"version: 2", "p.yaml:1: version: this blis reads version 1 policy files, got 2"},
		{"", "p.yaml: empty file"},
	} {
		_, err := ParseFile([]byte(tc.yaml), "p.yaml")
		require.ErrorContains(t, err, tc.want, tc.yaml)
		require.False(t, strings.Contains(strings.TrimSpace(err.Error()), "\n"), "one line: %v", err)
	}
}

// TestDefaultBy: a parameter whose default depends on another follows it
// until given, from a file and from Set alike.
func TestDefaultBy(t *testing.T) {
	s, err := ParseSection(Autoscale, raw(t, "hpa", ""))
	require.NoError(t, err)
	require.Equal(t, "kv_utilization", s.String("metric"))
	require.Equal(t, 0.8, s.Float("target"))

	s, err = ParseSection(Autoscale, raw(t, "hpa", "{metric: queue_depth}"))
	require.NoError(t, err)
	require.Equal(t, 5.0, s.Float("target"), "queue_depth's own default")

	s, err = ParseSection(Autoscale, raw(t, "hpa", "{metric: running, target: 96}"))
	require.NoError(t, err)
	require.Equal(t, 96.0, s.Float("target"))

	s, err = ParseSection(Autoscale, raw(t, "hpa", ""))
	require.NoError(t, err)
	require.NoError(t, s.Set("metric", "in_flight"))
	require.Equal(t, 70.0, s.Float("target"), "a target not given follows the metric set later")
	require.NoError(t, s.Set("target", "12"))
	require.NoError(t, s.Set("metric", "queue_depth"))
	require.Equal(t, 12.0, s.Float("target"), "a target given stays")

	s, err = ParseSection(Autoscale, raw(t, "hpa", ""))
	require.NoError(t, err)
	var fe *FieldError
	require.ErrorAs(t, s.Set("metric", "slo_attainment"), &fe)
	require.Equal(t, "params.target", fe.Key)
}

// TestAutoscaleBuild: every template builds at its defaults into a policy
// of its name; the checks across parameters name the parameter at fault.
func TestAutoscaleBuild(t *testing.T) {
	for _, tp := range Templates(Autoscale) {
		s, err := ParseSection(Autoscale, raw(t, tp.Name, ""))
		require.NoError(t, err, tp.Name)
		a, err := s.Autoscale()
		require.NoError(t, err, tp.Name)
		if tp.Name == "none" {
			require.Nil(t, a.New)
			continue
		}
		require.Equal(t, int64(math.Round(s.Float("interval_s")*1e6)), a.IntervalUs, tp.Name)
		p1, p2 := a.New(), a.New()
		require.Equal(t, tp.Name, p1.Name())
		require.NotSame(t, p1, p2, "%s: one policy per pool", tp.Name)
	}
	s, err := ParseSection(Autoscale, raw(t, "hpa", ""))
	require.NoError(t, err)
	require.Equal(t, int64(15_000_000), func() int64 { a, _ := s.Autoscale(); return a.IntervalUs }(), "the HPA's sync period")
	for _, tc := range []struct{ typ, params, key, msg string }{
		{"queue-depth", "{up: 2, down: 2}", "params.down", "must be < up (2)"},
		{"target-utilization", "{up: 0.2}", "params.down", "must be < up (0.2)"},
		{"target-utilization", "{up: 0.5, down: 0.2, metric: slo_attainment}", "", ""},
		{"saturation", "{scale_up: 0.6}", "params.scale_down", "must be < scale_up (0.6)"},
		{"kpa", "{stable_window_s: 5}", "params.panic_window_s", "must be <= stable_window_s (5 s), got 6 s"},
		{"hpa", "{metric: slo_attainment, target: 2}", "params.target", "slo_attainment is a share: the target must be within (0, 1]"},
		{"hpa", "{metric: kv_utilization, target: 1.2}", "params.target", "kv_utilization is a share: the target must be within (0, 1]"},
		{"hpa", "{metric: queue_depth, target: 12}", "", ""},
		{"target-utilization", "{metric: kv_utilization, up: 1.5, down: 0.5}", "params.up", "kv_utilization is a share: the threshold must be within [0, 1]"},
		{"hpa", "{scale_up_window_s: 0.0000001}", "params.scale_up_window_s", "is below 1 µs"},
	} {
		// The rules across parameters are checked once, when the section
		// is read; building it then cannot fail for them.
		s, err := ParseSection(Autoscale, raw(t, tc.typ, tc.params))
		if tc.key == "" {
			require.NoError(t, err, "%s %s", tc.typ, tc.params)
			_, err = s.Autoscale()
			require.NoError(t, err, "%s %s", tc.typ, tc.params)
			continue
		}
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%s %s", tc.typ, tc.params)
		require.Equal(t, tc.key, fe.Key)
		require.ErrorContains(t, err, tc.msg)
	}
}
