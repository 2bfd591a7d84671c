package sweep

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSet(t *testing.T) {
	for _, tc := range []struct {
		arg, key string
		values   []string
		err      string
	}{
		{arg: "deployment.pools[0].replicas=1,2,4", key: "deployment.pools[0].replicas", values: []string{"1", "2", "4"}},
		{arg: " workload.rate_scale = 0.5, 1 ,2", key: "workload.rate_scale", values: []string{"0.5", "1", "2"}},
		// One value is kept as written: blis run's --set.
		{arg: "policies.routing.params.scorers={queue-depth: 1, kv-utilization: 2}", key: "policies.routing.params.scorers", values: []string{"{queue-depth: 1, kv-utilization: 2}"}},
		{arg: "workload.synthetic.prompt_tokens=lognormal:mean=2000", key: "workload.synthetic.prompt_tokens", values: []string{"lognormal:mean=2000"}},
		{arg: `workload.synthetic.prompt_tokens="uniform:10,20",const:100`, key: "workload.synthetic.prompt_tokens", values: []string{"uniform:10,20", "const:100"}},
		{arg: "policies.routing.params.scorers={queue-depth: 1},{prefix-affinity: 3, queue-depth: 2}", key: "policies.routing.params.scorers",
			values: []string{"{queue-depth: 1}", "{prefix-affinity: 3, queue-depth: 2}"}},
		{arg: "policies.routing.type=round-robin,least-loaded", key: "policies.routing.type", values: []string{"round-robin", "least-loaded"}},
		{arg: "run.seed=", err: "no value after ="},
		{arg: "run.seed", err: "want KEY=VALUE"},
		{arg: "=1,2", err: "an empty key"},
		{arg: "a b=1,2", err: "is not an experiment key"},
		{arg: "run.seed=1,,2", err: "cannot read"},
		{arg: "run.seed=1,~", err: "value 2: an empty value"},
		{arg: "run.seed=[1,2", err: "cannot read"},
		// Text after the values was dropped ("1,2]" swept 1 and 2).
		{arg: "deployment.pools[0].replicas=1,2]", err: "cannot read"},
		{arg: "deployment.pools[0].replicas=1,2] x", err: "cannot read"},
		{arg: "x=&a 1,*a", err: "alias"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			key, values, err := ParseSet(tc.arg)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.key, key)
			require.Equal(t, tc.values, values)
		})
	}
}

func TestParseGrid(t *testing.T) {
	g, err := ParseGrid([]byte(`version: 1
seeds: 3
grid:
  deployment.pools[0].replicas: [1, 2, 4]
  policies.routing.type: least-loaded   # one value: set, not swept
  workload.rate_scale: [0.5, 1, 2]
  policies.routing.params.scorers: [{queue-depth: 1}, {prefix-affinity: 3, queue-depth: 2}]
  run.horizon_s: [60]                   # a list of one is an axis
`), "g.yaml")
	require.NoError(t, err)
	require.Equal(t, 3, g.Seeds)
	require.Equal(t, []Setting{{Key: "policies.routing.type", Value: "least-loaded", Origin: "g.yaml:5: grid.policies.routing.type"}}, g.Set)
	require.Equal(t, []Axis{
		{Key: "deployment.pools[0].replicas", Values: []string{"1", "2", "4"}},
		{Key: "workload.rate_scale", Values: []string{"0.5", "1", "2"}},
		{Key: "policies.routing.params.scorers", Values: []string{"{queue-depth: 1}", "{prefix-affinity: 3, queue-depth: 2}"}},
		{Key: "run.horizon_s", Values: []string{"60"}},
	}, g.Axes)
	n, err := g.Points()
	require.NoError(t, err)
	require.Equal(t, 18, n)
	// The first axis varies slowest.
	require.Equal(t, []string{"1", "0.5", "{queue-depth: 1}", "60"}, g.Values(0))
	require.Equal(t, []string{"1", "0.5", "{prefix-affinity: 3, queue-depth: 2}", "60"}, g.Values(1))
	require.Equal(t, []string{"1", "1", "{queue-depth: 1}", "60"}, g.Values(2))
	require.Equal(t, []string{"4", "2", "{prefix-affinity: 3, queue-depth: 2}", "60"}, g.Values(17))

	// Marshal reads back to the same grid (origins name the new file).
	back, err := ParseGrid(g.Marshal(), "m.yaml")
	require.NoError(t, err)
	require.Equal(t, g.Axes, back.Axes)
	require.Equal(t, g.Seeds, back.Seeds)
	require.Equal(t, g.Set[0].Value, back.Set[0].Value)
}

func TestParseGridErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "g.yaml: empty file"},
		{"grid: {}", "g.yaml: the grid file needs version: 1 at its top"},
		{"version: 2", "g.yaml:1: version: this blis reads version 1 grid files, got 2"},
		{"version: 1\naxes: {}", `g.yaml:2: unknown key "axes" in the top level; use one of version, seeds, grid`},
		{"version: 1\nseeds: 0", "g.yaml:2: seeds: must be within [1, 65536] seeds, got 0"},
		{"version: 1\nseeds: 2.5", "g.yaml:2: seeds: want a whole number, got 2.5"}, // was 2 seeds
		{"version: 1\ngrid: [a, b]", "g.yaml:2: grid: a mapping of experiment keys"},
		{"version: 1\ngrid:\n  run.seed: []", "g.yaml:3: grid.run.seed: an empty list"},
		{"version: 1\ngrid:\n  run.seed: [1, 1]", `g.yaml:3: grid.run.seed: run.seed: the value "1" is given twice`},
		{"version: 1\ngrid:\n  run.seed: [1]\n  run.seed: [2]", "g.yaml:4: grid.run.seed: run.seed is swept twice"},
		{"version: 1\ngrid:\n  run.seed: [1, ~]", "g.yaml:3: grid.run.seed: value 2: an empty value"},
		{"version: 1\ngrid:\n  run seed: [1]", "is not an experiment key"},
		{"version: 1\ngrid:\n  [a]: 1", "a key must be an experiment key"},
		{"version: 1\ngrid:\n  a: [1]\n---\nversion: 1", "a second YAML document"},
	} {
		_, err := ParseGrid([]byte(tc.yaml), "g.yaml")
		require.ErrorContains(t, err, tc.want, "%q", tc.yaml)
		require.NotContains(t, strings.TrimSpace(err.Error()), "\n", "one line")
	}
}

func TestGridTooLarge(t *testing.T) {
	var g Grid
	for i := range 5 {
		vals := make([]string, 100)
		for j := range vals {
			vals[j] = string(rune('a'+i)) + strings.Repeat("x", j)
		}
		require.NoError(t, g.Add("k"+string(rune('a'+i)), vals, "test", false))
	}
	_, err := g.Points()
	require.ErrorContains(t, err, "more than 100000 points (100 × 100 × 100 × 100 × 100 values)")
}

// FuzzParseGrid: any bytes give a grid or a one-line error naming the
// file, never a panic; a grid marshals to a file that reads back to the
// same axes, settings and seeds, and its points enumerate every value.
func FuzzParseGrid(f *testing.F) {
	for _, s := range []string{
		"version: 1\nseeds: 2\ngrid:\n  deployment.pools[0].replicas: [1, 2]\n  workload.rate_scale: [0.5, 1]\n",
		"version: 1\ngrid:\n  policies.routing.params.scorers: [{a: 1}, {b: [1, 2]}]\n  policies.routing.type: weighted\n",
		"version: 1\ngrid:\n  x: ['a,b', \"c\\td\", '']\n", "version: 1\ngrid:\n  x: [&a 1, *a]\n", "version: 1\ngrid: ~\n",
		"version: 1\ngrid:\n  x: [1e400, 0x10, .inf]\n", "version: 2", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGrid(data, "f.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "f.yaml") || strings.Contains(strings.TrimSpace(err.Error()), "\n") {
				t.Fatalf("error without the file, or on several lines: %q", err)
			}
			return
		}
		back, err := ParseGrid(g.Marshal(), "m.yaml")
		if err != nil {
			t.Fatalf("marshaled grid does not read back: %v\n%s", err, g.Marshal())
		}
		require.Equal(t, g.Seeds, back.Seeds)
		require.Equal(t, len(g.Axes), len(back.Axes))
		for i := range g.Axes {
			require.Equal(t, g.Axes[i], back.Axes[i])
		}
		require.Equal(t, len(g.Set), len(back.Set))
		for i := range g.Set {
			require.Equal(t, g.Set[i].Key, back.Set[i].Key)
			require.Equal(t, g.Set[i].Value, back.Set[i].Value)
		}
		n, err := g.Points()
		require.NoError(t, err)
		if n <= 4096 {
			seen := map[string]bool{}
			for p := range n {
				seen[strings.Join(g.Values(p), "\x00")] = true
			}
			require.Len(t, seen, n, "every point is another combination")
		}
	})
}

// FuzzParseSet: any --set argument gives a key and values or an error,
// never a panic; a list of several values reads back from its values
// written as a grid file.
func FuzzParseSet(f *testing.F) {
	for _, s := range []string{"a.b=1,2,3", "k={x: 1},{y: [1, 2]}", `k="a,b",'c'`, "k=[", "k=1", "=", "k=a: b", "k=#", "k=1,\n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		key, values, err := ParseSet(arg)
		if err != nil {
			return
		}
		require.NotEmpty(t, values)
		if len(values) < 2 {
			return
		}
		var g Grid
		if err := g.Add(key, values, "--set", false); err != nil {
			return // a value given twice
		}
		back, err := ParseGrid(g.Marshal(), "m.yaml")
		if err != nil {
			t.Fatalf("%q: values do not read back: %v\n%s", arg, err, g.Marshal())
		}
		require.Equal(t, values, back.Axes[0].Values)
	})
}

// GridOf: blis sweep's --grid file, then each --set over it; errors name
// the flag or the file.
func TestGridOf(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/g.yaml"
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nseeds: 2\ngrid:\n  workload.rate_scale: [0.5, 1]\n"), 0o644))
	g, err := GridOf(path, []string{"deployment.pools[0].replicas=1,2,3", "policies.routing.type=least-loaded"})
	require.NoError(t, err)
	require.Equal(t, 2, g.Seeds)
	require.Equal(t, []Axis{{Key: "workload.rate_scale", Values: []string{"0.5", "1"}}, {Key: "deployment.pools[0].replicas", Values: []string{"1", "2", "3"}}}, g.Axes)
	require.Equal(t, []Setting{{Key: "policies.routing.type", Value: "least-loaded", Origin: "--set policies.routing.type"}}, g.Set)

	g, err = GridOf("", nil)
	require.NoError(t, err)
	require.Equal(t, Grid{}, g)

	_, err = GridOf(dir+"/missing.yaml", nil)
	require.ErrorContains(t, err, "--grid: ")
	_, err = GridOf("", []string{"no-equals-sign"})
	require.Error(t, err)
	_, err = GridOf(path, []string{"workload.rate_scale=2,3"})
	require.ErrorContains(t, err, "workload.rate_scale")
}
