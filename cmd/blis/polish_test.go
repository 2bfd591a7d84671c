package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"
)

// Every command's help fits experiment.HelpWidth columns, and sweep's and
// capacity's put their own flags first, in sections, before the
// experiment's groups (as run's help groups them).
func TestHelpGroupedAndWrapped(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"validate", "--help"}, {"sweep", "--help"}, {"capacity", "--help"}} {
		out, _, err := runCLI(t, args...)
		require.NoError(t, err)
		for i, line := range strings.Split(out, "\n") {
			require.LessOrEqual(t, utf8.RuneCountInString(line), experiment.HelpWidth, "blis %s, line %d: %q", strings.Join(args, " "), i+1, line)
		}
	}
	for _, tc := range []struct {
		cmd   string
		first string   // the first section's title
		own   []string // flags of the command's own sections, in order before --config
	}{
		{"sweep", "The sweep: its grid, seeds and table:", []string{"--grid", "--seeds", "--out", "--shard", "--emit"}},
		{"capacity", "The search:", []string{"--search", "--min", "--max", "--target", "--seeds"}},
	} {
		out, _, err := runCLI(t, tc.cmd, "--help")
		require.NoError(t, err)
		_, examples, ok := strings.Cut(out, "\nExamples:\n")
		require.True(t, ok)
		i := strings.Index(examples, "\n\n")
		require.True(t, i >= 0)
		flags := examples[i+2:]
		require.True(t, strings.HasPrefix(flags, tc.first), "blis %s --help: the first section is not its own:\n%s", tc.cmd, flags[:min(len(flags), 200)])
		cfg := strings.Index(flags, "--config ")
		exp := strings.Index(flags, "\nEngine (")
		require.True(t, cfg > 0, "blis %s --help has no --config", tc.cmd)
		for _, f := range tc.own {
			at := strings.Index(flags, f+" ")
			require.True(t, at > 0 && at < cfg, "blis %s --help: %s is not among its own flags before --config", tc.cmd, f)
		}
		require.Less(t, cfg, exp, "blis %s --help: the experiment files come before the experiment's flags", tc.cmd)
	}
}

// The summary line says what a count counts in the singular too, and a
// cost in its currency.
func TestSummaryPluralsAndCurrency(t *testing.T) {
	_, stderr, err := runCLI(t, "run", "--num-instances", "1", "--routing-policy", "least-loaded", "--requests", "1")
	require.NoError(t, err)
	last := lastLine(stderr)
	require.Contains(t, last, "blis: 1 instance, 1 of 1 request arrived")
	require.NotContains(t, stderr, "1 instances")
	require.Regexp(t, `GPU-hours, cost \$\d+\.\d\d$`, last)

	_, stderr, err = runCLI(t, "run", "--requests", "1")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(lastLine(stderr), "blis: 1 request (1 completed, 0 dropped), "), lastLine(stderr))

	_, stderr, err = runCLI(t, "run", "--num-instances", "4", "--requests", "200", "--rate", "40")
	require.NoError(t, err)
	require.Contains(t, lastLine(stderr), "blis: 4 instances, 200 of 200 requests arrived")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// The main job's stderr names no flag, since none was given: its first
// line once explained the default workload by --prefix-tokens and
// --prefix-groups. Given, the flags are named.
func TestDefaultRunNamesNoFlagNobodySet(t *testing.T) {
	_, stderr, err := runCLI(t, "run")
	require.NoError(t, err)
	require.NotEmpty(t, stderr)
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		require.NotContains(t, line, "--", "the main job's stderr names a flag nobody set: %s", line)
	}
	first, _, _ := strings.Cut(stderr, "\n")
	require.Contains(t, first, "the default workload")

	_, stderr, err = runCLI(t, "run", "--prefix-tokens", "512", "--prompt-tokens", "lognormal:mean=1024,cv=0.6,max=16384")
	require.NoError(t, err)
	first, _, _ = strings.Cut(stderr, "\n")
	require.Contains(t, first, "(--prompt-tokens, --prefix-tokens; docs/workloads.md)")

	_, stderr, err = runCLI(t, "run", "--set", "workload.synthetic.prefix_groups=8")
	require.NoError(t, err)
	first, _, _ = strings.Cut(stderr, "\n")
	require.Contains(t, first, "--set workload.synthetic.prefix_groups")
}
