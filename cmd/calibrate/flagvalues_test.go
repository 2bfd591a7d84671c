package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// Every flag of every calibrate command that takes a number, a list of
// numbers or a boolean refuses a value of the wrong kind naming the flag
// (--tp 1.5 gave `invalid argument "1.5" for "--tp" flag:
// strconv.ParseInt: parsing "1.5": invalid syntax`).
func TestFlagValuesOfTheWrongKind(t *testing.T) {
	tried := 0
	for _, c := range newRootCmd().Commands() {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			var bad []string
			switch f.Value.Type() {
			case "int", "int64":
				bad = []string{"1.5", "1e300", "x"}
			case "float64", "float64Slice":
				bad = []string{"x"}
			case "bool":
				bad = []string{"maybe"}
			default:
				return
			}
			for _, v := range bad {
				tried++
				_, err := run(t, c.Name(), "--"+f.Name+"="+v)
				require.Error(t, err, "%s --%s=%s", c.Name(), f.Name, v)
				require.Regexp(t, `^--`+f.Name+`: want [a-z ]+, got "`, err.Error(), "%s --%s=%s", c.Name(), f.Name, v)
				require.NotContains(t, err.Error(), "strconv")
			}
		})
	}
	require.Greater(t, tried, 50)
}

// calibrate fit --configs /dev/zero was read until memory ran out (as
// blis's configuration flags were): a configuration file is read to a
// bound.
func TestEndlessConfigsRefused(t *testing.T) {
	_, err := run(t, "fit", "--configs", "/dev/zero", "-o", t.TempDir()+"/c.yaml")
	require.EqualError(t, err, "--configs: /dev/zero: more than 64 MiB: a configuration file is text of a few KB (is it the right file?)")
}
