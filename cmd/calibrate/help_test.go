package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/features"
)

func help(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--help"))
	require.NoError(t, cmd.Execute())
	return out.String()
}

// calibrate's help names the feature spec calibrate fit uses by default
// (features.DefaultSpec), and fit's flag defaults to it: the help once
// named spec 2.0 while fit used 3.0.
func TestHelpNamesTheDefaultSpec(t *testing.T) {
	root := help(t)
	require.Contains(t, strings.Join(strings.Fields(root), " "), "(feature spec "+features.DefaultSpec+", calibrate fit's default;")
	require.Contains(t, help(t, "fit"), `--feature-spec string`)
	require.Contains(t, help(t, "fit"), `(default "`+features.DefaultSpec+`")`)
	for _, s := range []string{features.SpecV1, features.SpecV2, features.SpecV3} {
		require.Contains(t, root, s)
	}
}

// Every command's help fits the width blis's does.
func TestHelpWrapped(t *testing.T) {
	for _, args := range [][]string{nil, {"physics"}, {"ingest"}, {"fit"}, {"predict"}, {"receive"}} {
		for i, line := range strings.Split(help(t, args...), "\n") {
			require.LessOrEqual(t, utf8.RuneCountInString(line), experiment.HelpWidth, "calibrate %s --help, line %d: %q", strings.Join(args, " "), i+1, line)
		}
	}
}
