package flagerr

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// A value that does not parse as its flag's kind is refused naming the
// flag and the kind, never with strconv's words; other errors pass.
func TestRewrite(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--n", "0.5"}, `--n: want a whole number, got "0.5" (fractions are not rounded)`},
		{[]string{"--n", "1e300"}, `--n: want a whole number, got "1e300" (beyond the range of the flag's type)`},
		{[]string{"--n", "9223372036854775808"}, `--n: want a whole number, got "9223372036854775808" (beyond the range of the flag's type)`},
		{[]string{"--n", "1e3"}, `--n: want a whole number, got "1e3" (write it in digits)`},
		{[]string{"--n", "NaN"}, `--n: want a whole number, got "NaN" (a finite whole number)`},
		{[]string{"--n", "two"}, `--n: want a whole number, got "two"`},
		{[]string{"--x", "1,5"}, `--x: want a number, got "1,5"`},
		{[]string{"--b=maybe"}, `--b: want true or false, got "maybe"`},
		{[]string{"--xs", "1,a"}, `--xs: want numbers separated by commas, got "1,a"`},
		{[]string{"--d", "5"}, `--d: want a duration (30s, 500ms, 2m), got "5"`},
		{[]string{"--d", "999999999h"}, `--d: want a duration (30s, 500ms, 2m), got "999999999h" (beyond the range of the flag's type)`},
		{[]string{"--n", strings.Repeat("9", 100000)}, "--n: want a whole number, got"},
		{[]string{"--nope", "1"}, "unknown flag: --nope"},
	}
	for _, c := range cases {
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }, SilenceErrors: true, SilenceUsage: true}
		cmd.Flags().Int("n", 0, "")
		cmd.Flags().Float64("x", 0, "")
		cmd.Flags().Bool("b", false, "")
		cmd.Flags().Float64Slice("xs", nil, "")
		cmd.Flags().Duration("d", 0, "")
		cmd.SetFlagErrorFunc(Rewrite)
		cmd.SetArgs(c.args)
		err := cmd.Execute()
		require.Error(t, err, c.args)
		require.True(t, strings.HasPrefix(err.Error(), c.want), "%v: %v", c.args, err)
		require.NotContains(t, err.Error(), "strconv")
		require.Less(t, len(err.Error()), 200, c.args)
	}
}
