package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim/workload"
)

// Every scenario runs from the command line as the README shows, with an
// SLO attainment per class, and runs the same twice.
func TestScenariosRun(t *testing.T) {
	for _, name := range workload.Scenarios() {
		t.Run(name, func(t *testing.T) {
			args := []string{"run", "--scenario", name, "--horizon", "60", "-q"}
			out, _, err := runCLI(t, args...)
			require.NoError(t, err)
			r := parseCluster(t, out)
			require.Contains(t, r.Config.Workload, "spec scenario "+name)
			require.Greater(t, r.Metrics.Requests.Completed, int64(50))
			require.NotEmpty(t, r.Metrics.PerSLOClass)
			require.NotNil(t, r.Metrics.SLO, "the classes have targets")
			require.NotNil(t, r.Metrics.Fairness, "named tenants are reported")
			again, _, err := runCLI(t, args...)
			require.NoError(t, err)
			require.Equal(t, out, again)
		})
	}
}

// --print-spec prints a scenario that, saved and edited, runs as a spec
// file; a spec file's errors name the flag, file and line.
func TestPrintSpecAndSpecFile(t *testing.T) {
	out, _, err := runCLI(t, "run", "--scenario", "mixed-slo", "--print-spec")
	require.NoError(t, err)
	text, err := workload.ScenarioText("mixed-slo")
	require.NoError(t, err)
	require.Equal(t, string(text), out)

	dir := t.TempDir()
	path := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
	fromFile, _, err := runCLI(t, "run", "--workload-spec", path, "--horizon", "30", "-q")
	require.NoError(t, err)
	fromScenario, _, err := runCLI(t, "run", "--scenario", "mixed-slo", "--horizon", "30", "-q")
	require.NoError(t, err)
	a, b := parseCluster(t, fromFile), parseCluster(t, fromScenario)
	require.Equal(t, a.Metrics, b.Metrics, "the same spec, the same run")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("version: 1\nduration_s: 10\ntenants:\n  - id: a\n    weight: -3\n"), 0o644))
	_, _, err = runCLI(t, "run", "--workload-spec", bad)
	require.ErrorContains(t, err, "--workload-spec: "+bad+":5: tenants[0].weight: must be a finite number >= 0, got -3")
}

func TestSpecFlagConflicts(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--scenario", "agentic", "--rate", "3"}, "--rate cannot be combined with --scenario"},
		{[]string{"run", "--scenario", "agentic", "--replay", "x.csv"}, "--replay cannot be combined with --scenario"},
		{[]string{"run", "--scenario", "agentic", "--workload-spec", "x.yaml"}, "--workload-spec cannot be combined with --scenario"},
		// Every name --scenario takes is listed: the error listed the
		// workload scenarios only, not the built-in experiments.
		{[]string{"run", "--scenario", "nope"}, `--scenario: no scenario "nope"; the workload scenarios are agentic,`},
		{[]string{"run", "--scenario", "nope"}, `, and --scenario also takes the built-in experiments disaggregated, diurnal-autoscale,`},
		{[]string{"run", "--print-spec"}, "--print-spec needs --scenario NAME or --workload-spec FILE"},
		{[]string{"run", "--workload-spec", "/nonexistent.yaml"}, "--workload-spec: open /nonexistent.yaml"},
	} {
		_, _, err := runCLI(t, tt.args...)
		require.ErrorContains(t, err, tt.want, "%v", tt.args)
	}
}

// The README's tenant-mix example: one instance misses the realtime
// tenant's TPOT target on many requests; a second meets nearly all, a
// third all but 1 %.
func TestMixedSLOExampleFromREADME(t *testing.T) {
	att := func(n string) map[string]float64 {
		out, _, err := runCLI(t, "run", "-q", "--scenario", "mixed-slo", "--num-instances", n, "--routing-policy", "least-loaded")
		require.NoError(t, err)
		r := parseCluster(t, out)
		m := map[string]float64{"all": r.Metrics.SLO.Attainment}
		for _, c := range r.Metrics.PerSLOClass {
			m[c.Class] = c.SLO.Attainment
		}
		return m
	}
	one, two := att("1"), att("2")
	require.Less(t, one["realtime"], 0.7)
	require.Greater(t, one["interactive"], 0.99)
	require.Equal(t, 1.0, one["batch"])
	require.Greater(t, two["realtime"], 0.97)
	require.Greater(t, two["all"], 0.99)
}
