package experiment

// The declared keys, attacked (docs/hardening.md, round 4: the
// experiment's declared keys): every value a file, a flag or --set gives
// goes through its key's declaration, so each class below is held for
// every key at once.

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/schema"
)

// Fractions in whole-number keys were truncated (replicas: 2.5 ran 2
// instances); every whole-number key now refuses them, from a file, a
// flag or --set, naming the key.
func TestFractionsInWholeNumberKeysAreRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"version: 1\ndeployment:\n  pools: [{replicas: 2.5}]\n", "x.yaml:3: deployment.pools[0].replicas: want a whole number, got 2.5"},
		{"version: 1\ndeployment:\n  pools: [{vllm: {max_num_seqs: 1.9}}]\n", "x.yaml:3: deployment.pools[0].vllm.max_num_seqs: want a whole number, got 1.9"},
		{"version: 1\nrun: {seed: 42.9}\n", "x.yaml:2: run.seed: want a whole number, got 42.9"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n  network: {latency_us: 0.4}\npolicies: {disaggregation: {type: always}}\n",
			"x.yaml:4: deployment.network.latency_us: want a whole number, got 0.4"},
		{"version: 1\ndeployment:\n  pools: [{data_parallel_size: -1}]\n", "x.yaml:3: deployment.pools[0].data_parallel_size: must be within [1, 4096] engines, got -1"},
	} {
		_, err := parse(t, tc.yaml)
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
	d := NewDraft()
	require.EqualError(t, d.Set("deployment.pools[0].replicas", "2.5", "--set deployment.pools[0].replicas"),
		"--set deployment.pools[0].replicas: want a whole number, got 2.5 (fractions are not rounded)")
	require.EqualError(t, d.SetFlag("data-parallel-size", "-1"), "--data-parallel-size: must be within [1, 4096] engines, got -1")
	// Whole numbers are read exactly, past 2^53.
	e, err := parse(t, "version: 1\nrun: {seed: 9007199254740993}\n")
	require.NoError(t, err)
	require.Equal(t, int64(9007199254740993), e.Run.Seed)
}

// A value of the wrong kind named the Go type it could not fill, not the
// key ("cannot read !!str `two` into int"; a policy file's "routing:
// least-loaded": "into policy.Raw").
func TestValuesOfTheWrongKindNameTheirKey(t *testing.T) {
	_, err := parse(t, "version: 1\ndeployment:\n  pools:\n    - replicas: two\n")
	require.EqualError(t, err, `x.yaml:4: deployment.pools[0].replicas: want a whole number, got "two"`)
	_, err = parse(t, "version: 1\npolicies:\n  routing: least-loaded\n")
	require.EqualError(t, err, `x.yaml:3: policies.routing: want a mapping, got "least-l..."`)
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("routing: least-loaded\n"), 0o644))
	require.ErrorContains(t, NewDraft().LoadPolicies(pol), "p.yaml:1: routing: want a mapping")
}

// --set 'deployment.pools[0].replicas=2' without a file said "there are
// 0" pools; it sets the default deployment's one pool.
func TestSetTheDefaultPool(t *testing.T) {
	d, err := Inputs{Sets: []string{"deployment.pools[0].replicas=2"}}.Draft()
	require.NoError(t, err)
	e, err := d.Resolve()
	require.NoError(t, err)
	require.Equal(t, 2, e.Deployment.NumInstances())
	require.Equal(t, ModeCluster, e.Mode)
	_, err = Inputs{Sets: []string{"deployment.pools[1].replicas=2"}}.Draft()
	// It said "there are 0" pools, while [0] had just set the one.
	require.ErrorContains(t, err, "deployment.pools[1]: no file gave this list: [0] sets its one element (the default's), or give a file with more")
}

// A positive time below 1 µs rounded to 0, which means "none" or
// "forever" (drain.timeout_s: 1e-7 waited forever, abort_timeout_s: 1e-7
// disabled aborts): every time key refuses it, and takes 1 µs.
func TestTimesBelowOneMicrosecondAreRefused(t *testing.T) {
	times := 0
	for _, d := range Keys {
		if !d.Key.IsTime() {
			continue
		}
		times++
		tiny := "0.0000001"
		if d.Key.Unit == "ms" {
			tiny = "0.0001"
		}
		n := &yaml.Node{Kind: yaml.ScalarNode, Value: tiny}
		if d.Key.Type == schema.List {
			n = &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n, n}}
		}
		_, err := d.Key.Decode(n, d.Path)
		require.ErrorContains(t, err, "is below 1 µs", d.Path)
	}
	require.GreaterOrEqual(t, times, 10)
	for _, tc := range []struct{ yaml, want string }{
		{"version: 1\ndeployment:\n  pools: [{replicas: 2, drain: {timeout_s: 0.0000001}}]\n", "deployment.pools[0].drain.timeout_s: 0.0000001 s is below 1 µs"},
		{"version: 1\ndeployment:\n  pools: [{role: prefill}, {role: decode}]\n  network: {abort_timeout_s: 0.0000001}\npolicies: {disaggregation: {type: always}}\n",
			"deployment.network.abort_timeout_s: 0.0000001 s is below 1 µs"},
		{"version: 1\ndeployment:\n  pools: [{replicas: 2, max_replicas: 3}]\npolicies: {autoscale: {type: hpa, params: {scale_down_window_s: 0.0000001}}}\n",
			"policies.autoscale.params.scale_down_window_s: 0.0000001 s is below 1 µs"},
	} {
		_, err := parse(t, tc.yaml)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := parse(t, "version: 1\ndeployment:\n  pools: [{replicas: 2, drain: {timeout_s: 0.000001}}]\n")
	require.NoError(t, err)
}

// Hostile values for every declared key: NaN, infinities, 1e300, 1e-15,
// negative numbers, fractions, a megabyte of text, the wrong kind. Each is
// refused with one short line naming the key, or accepted within the
// key's range.
func TestHostileValuesForEveryKey(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	values := []string{"nan", ".nan", ".inf", "-.inf", "1e300", "-1e300", "1e-15", "-1e-15", "-1", "2.5", "0", huge, "[1, 2]", "{a: 1}", "~", "true"}
	for _, d := range Keys {
		for _, v := range values {
			var doc yaml.Node
			require.NoError(t, yaml.Unmarshal([]byte("k: "+v), &doc))
			n := doc.Content[0].Content[1]
			got, err := d.Key.Decode(n, d.Path)
			if err != nil {
				msg := err.Error()
				require.True(t, strings.HasPrefix(msg, d.Path+": "), "%s = %.20s: %s", d.Path, v, msg)
				require.Less(t, len(msg), 600, "%s = %.20s: the error quotes the input whole", d.Path, v)
				require.NotContains(t, msg, "\n")
				continue
			}
			switch d.Key.Type {
			case schema.Float:
				require.False(t, math.IsNaN(got.F) || math.IsInf(got.F, 0), "%s = %.20s", d.Path, v)
				require.NoError(t, d.Key.Check(got.F), "%s = %.20s", d.Path, v)
			case schema.Int:
				require.NoError(t, d.Key.Check(float64(got.I)), "%s = %.20s", d.Path, v)
				require.NotEqual(t, "2.5", v, "%s took a fraction", d.Path)
			case schema.List:
				require.Equal(t, "[1, 2]", v, "%s took a scalar", d.Path)
				for _, x := range got.L {
					require.NoError(t, d.Key.Check(x), "%s = %s", d.Path, v)
				}
			}
		}
	}
}

// Keys given twice and unknown keys are refused with the file's line.
func TestDuplicateAndUnknownKeys(t *testing.T) {
	_, err := parse(t, "version: 1\nrun:\n  seed: 1\n  seed: 2\n")
	require.ErrorContains(t, err, `x.yaml:4: mapping key "seed" already defined at line 3`)
	_, err = parse(t, "version: 1\nrun:\n  sead: 1\n")
	require.ErrorContains(t, err, `x.yaml:3: unknown key "sead" in run; use one of seed`)
}

// --print-config wrote an input file's path relative to the working
// directory, which --config reads from the file's folder: the printed
// file failed elsewhere, or ran another file of the same name. It is
// written absolute.
func TestPrintedPathsReadTheSameFilesAnywhere(t *testing.T) {
	work, other := t.TempDir(), t.TempDir()
	spec := "version: 1\nrate: %s\nduration_s: 5\ntenants: [{id: a}]\n"
	require.NoError(t, os.WriteFile(filepath.Join(work, "spec.yaml"), []byte(strings.Replace(spec, "%s", "2", 1)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "spec.yaml"), []byte(strings.Replace(spec, "%s", "9", 1)), 0o644)) // a decoy
	t.Chdir(work)
	d, err := Inputs{Flags: []FlagValue{{Name: "workload-spec", Value: "spec.yaml"}}}.Draft()
	require.NoError(t, err)
	e, err := d.Resolve()
	require.NoError(t, err)
	printed, err := e.Marshal()
	require.NoError(t, err)
	exp := filepath.Join(other, "exp.yaml")
	require.NoError(t, os.WriteFile(exp, printed, 0o644))
	t.Chdir(other)
	d, err = Load(exp)
	require.NoError(t, err)
	e2, err := d.Resolve()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(work, "spec.yaml"), e2.Workload.File)
	require.Equal(t, 2.0, e2.Workload.Spec.Rate)
}

// kv_store.capacity_gb: 1e-9 held no block and did nothing; it is
// refused as a disk of no block is.
func TestAStoreMustHoldABlock(t *testing.T) {
	_, err := parse(t, "version: 1\ndeployment:\n  pools: [{replicas: 2, vllm: {total_kv_blocks_cpu: 100}}]\n  kv_store: {capacity_gb: 1e-9}\n")
	require.ErrorContains(t, err, "x.yaml:4: deployment.kv_store.capacity_gb: 1e-09 GB holds no KV block of pool pool0")
}

// --disaggregation always on pools that all prefill and decode split
// nothing (the prefill router moves in step with the router) and said
// nothing: it warns.
func TestAlwaysThatSplitsNothingWarns(t *testing.T) {
	e, err := parse(t, "version: 1\ndeployment:\n  pools: [{replicas: 2}]\nworkload: {synthetic: {requests: 50}}\npolicies: {disaggregation: {type: always}}\n")
	require.NoError(t, err)
	res, err := Run(context.Background(), e, &MemSinks{})
	require.NoError(t, err)
	require.Zero(t, res.Cluster.Disaggregation.Disaggregated)
	require.Contains(t, strings.Join(res.Warnings, "\n"), "disaggregation always split none of the 50 requests")
}

// The hostile pass on the weight flags and on values given as text
// (docs/hardening.md, round 4: the experiment's declared keys, items 11
// to 13).

// A weight flag ("name:weight,...") is read for its form only, then by
// the key's declaration as a file's value is: a weight that is not a
// number as Go reads one ("1}", "*a", "[1") was pasted into YAML and
// became part of the mapping or an alias; an empty name read as "".
func TestWeightFlagsReadOnlyNamesAndNumbers(t *testing.T) {
	for _, tc := range []struct{ flag, v, want string }{
		{"routing-scorers", "queue-depth:1}", `--routing-scorers: queue-depth: want a number, got "1}"`},
		{"routing-scorers", "queue-depth:*a", `--routing-scorers: queue-depth: want a number, got "*a"`},
		{"routing-scorers", "queue-depth:[1", `--routing-scorers: queue-depth: want a number, got "[1"`},
		{"routing-scorers", "queue-depth:", `--routing-scorers: queue-depth: want a number, got ""`},
		{"routing-scorers", ":1", `--routing-scorers: ":1": want name:weight`},
		{"routing-scorers", "queue-depth:1,,", `--routing-scorers: "": want name:weight`},
		{"routing-scorers", "queue-depth:-1", "--routing-scorers: queue-depth: must be >= 0 weight, got -1"},
		{"routing-scorers", "queue-depth:NaN", "--routing-scorers: queue-depth: must be finite and >= 0 weight, got NaN"},
		{"routing-scorers", "queue-depth:1e400", `--routing-scorers: queue-depth: want a number, got "1e400"`},
		{"routing-scorers", "magic:1", `--routing-scorers: magic: "magic" is not one of prefix-affinity, queue-depth, kv-utilization, load-balance`},
		{"routing-scorers", "queue-depth:1,queue-depth:2", "--routing-scorers: queue-depth: given twice"},
		{"routing-scorers", "queue-depth:0", "--routing-scorers: the weights are all 0; at least one must be > 0"},
		{"fitness-weights", "throughput:1}", `--fitness-weights: throughput: want a number, got "1}"`},
	} {
		d, err := Inputs{Flags: []FlagValue{{Name: "routing-policy", Value: "weighted"}, {Name: tc.flag, Value: tc.v}}}.Draft()
		if err == nil {
			_, err = d.Resolve()
		}
		require.EqualError(t, err, tc.want, "--%s %s", tc.flag, tc.v)
	}
	d, err := Inputs{Flags: []FlagValue{{Name: "routing-policy", Value: "weighted"}, {Name: "routing-scorers", Value: " queue-depth : 1 , kv-utilization:1e-15"}}}.Draft()
	require.NoError(t, err)
	_, err = d.Resolve()
	require.NoError(t, err)
}

// yaml.v3 reads the first flow collection of a text and drops what
// follows it: --set KEY='{queue-depth: 1}}', a file "{version: 1}}" and
// a sweep's values "1,2]" ran as if the stray text were not there.
func TestTextAfterAValueIsRefused(t *testing.T) {
	for _, s := range []string{"{queue-depth: 1}}", "{queue-depth: 1} x", "{queue-depth: 1}, {kv-utilization: 1}"} {
		d, err := Inputs{Flags: []FlagValue{{Name: "routing-policy", Value: "weighted"}}, Sets: []string{"policies.routing.params.scorers=" + s}}.Draft()
		if err == nil {
			_, err = d.Resolve()
		}
		require.ErrorContains(t, err, "policies.routing.params.scorers: cannot read", s)
	}
	_, err := Inputs{Sets: []string{"deployment.pools[0].latency.blackbox.alpha=[1, 2, 3]]"}}.Draft()
	require.ErrorContains(t, err, "--set deployment.pools[0].latency.blackbox.alpha: cannot read")
	_, err = parse(t, "{version: 1}}\n")
	require.ErrorContains(t, err, "x.yaml: text after the document")
	for _, s := range []string{"[1]]", "{a: 1}]", "{a: 1} x", "2\n---\n3"} {
		_, err := schema.ParseYAML(s)
		require.Error(t, err, s)
	}
	for s, want := range map[string]yaml.Kind{"[1, 2]": yaml.SequenceNode, "{a: 1} # note": yaml.MappingNode, "2\n": yaml.ScalarNode} {
		n, err := schema.ParseYAML(s)
		require.NoError(t, err, s)
		require.Equal(t, want, n.Kind, s)
	}
	n, err := schema.ParseYAML("  ")
	require.NoError(t, err)
	require.Nil(t, n)
}

// An entry of a mapping or a list without a value ("{queue-depth: }",
// "[1, ~, 3]") was read as 0: a scorer given no weight, a provisioning
// delay of 0 s. It is refused naming the entry.
func TestEntriesWithoutAValueAreRefused(t *testing.T) {
	_, err := parse(t, "version: 1\npolicies:\n  routing: {type: weighted, params: {scorers: {queue-depth: , kv-utilization: 1}}}\n")
	require.EqualError(t, err, "x.yaml:3: policies.routing.params.scorers.queue-depth: no value")
	_, err = parse(t, "version: 1\ndeployment:\n  pools: [{nodes: {provision_s: [~, 480]}}]\n")
	require.EqualError(t, err, "x.yaml:3: deployment.pools[0].nodes.provision_s[0]: no value")
	d, err := Inputs{Flags: []FlagValue{{Name: "routing-policy", Value: "weighted"}}, Sets: []string{"policies.routing.params.scorers={queue-depth: ~, kv-utilization: 1}"}}.Draft()
	if err == nil {
		_, err = d.Resolve()
	}
	require.EqualError(t, err, "--set policies.routing.params.scorers: queue-depth: no value")
}
