package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// Every flag of every blis command that takes a number or a boolean
// refuses a value of the wrong kind naming the flag (--max-requests 0.5
// gave `invalid argument "0.5" for "--max-requests" flag:
// strconv.ParseInt: parsing "0.5": invalid syntax`): a fraction in a
// whole-number flag, a word in a number flag, "maybe" in a boolean one.
// An experiment's flag is decoded by its key's declaration, so its error
// also gives the range and unit (TestFractionInAFlagNamesItsRange).
func TestFlagValuesOfTheWrongKind(t *testing.T) {
	records := "../../testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl"
	// What each command needs besides the flag tried, so that the flag's
	// value is what fails.
	base := map[string][]string{
		"run":      {"run"},
		"sweep":    {"sweep", "--set", "workload.rate_scale=0.5,1"},
		"capacity": {"capacity", "--search", "workload.rate_scale", "--min", "0.5", "--max", "1", "--target", "ttft_p99_ms<=500"},
		"validate": {"validate", records},
	}
	tried := 0
	for _, c := range newRootCmd().Commands() {
		args, ok := base[c.Name()]
		if !ok {
			continue
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			var bad []string
			switch f.Value.Type() {
			case "int", "int64":
				bad = []string{"0.5", "1e300", "x"}
			case "float64":
				bad = []string{"x", "1,5"}
			case "bool":
				bad = []string{"maybe"}
			default:
				return
			}
			for _, v := range bad {
				tried++
				_, _, err := runCLI(t, append(append([]string{}, args...), "--"+f.Name+"="+v)...)
				require.Error(t, err, "%s --%s=%s", c.Name(), f.Name, v)
				require.Contains(t, err.Error(), "--"+f.Name, "%s --%s=%s", c.Name(), f.Name, v)
				require.NotContains(t, err.Error(), "strconv", "%s --%s=%s", c.Name(), f.Name, v)
			}
		})
	}
	require.Greater(t, tried, 200)
}

// An experiment's flag is decoded by its key's declaration: the error
// gives the key's range and unit.
func TestFractionInAFlagNamesItsRange(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--precision", "0.05", "--max-requests", "0.5"}, "--max-requests: want a whole number, got 0.5 (fractions are not rounded)"},
		{[]string{"run", "--precision", "0.05", "--max-requests", "1e300"}, "--max-requests: must be within [1, 2147483647] requests, got 1e300"},
		{[]string{"run", "--summary-max-tokens", "1e9", "--summarize-trace", "s.md"}, "--summary-max-tokens: must be within [100, 100000] tokens, got 1e9"},
		{[]string{"run", "--seed", "1e300"}, "--seed: must be a whole number within ±2^63, got 1e300"},
		{[]string{"sweep", "--set", "workload.rate_scale=1", "--requests", "2.5"}, "--requests: want a whole number, got 2.5 (fractions are not rounded)"},
		{[]string{"sweep", "--set", "workload.rate_scale=1", "--seeds", "2.5"}, `--seeds: want a whole number, got "2.5" (fractions are not rounded)`},
	} {
		_, _, err := runCLI(t, c.args...)
		require.EqualError(t, err, c.want, c.args)
	}
}

// Every YAML file a blis command reads refuses a "billion laughs" of
// nested aliases at once, naming the flag and the file: a 300-byte
// --config ran for minutes before a key was checked.
func TestYAMLAliasBombsAreRefused(t *testing.T) {
	dir := t.TempDir()
	lines := []string{"x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"}
	for i := 1; i <= 8; i++ {
		lines = append(lines, fmt.Sprintf("x%d: &a%d [%s]", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", ")))
	}
	bomb := strings.Join(lines, "\n") + "\n"
	file := func(name, head string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(head+bomb), 0o644))
		return p
	}
	for _, args := range [][]string{
		{"run", "--config", file("exp.yaml", "version: 1\n")},
		{"run", "--workload-spec", file("spec.yaml", "version: 1\n")},
		{"run", "--policy-config", file("pol.yaml", "")},
		{"run", "--deployment", file("dep.yaml", "")},
		{"run", "--coefficients", file("coef.yaml", "")},
		{"run", "--host-profile", file("host.yaml", "")},
		{"sweep", "--grid", file("grid.yaml", "version: 1\n")},
	} {
		start := time.Now()
		_, _, err := runCLI(t, args...)
		require.ErrorContains(t, err, args[1]+": "+args[2]+": line ", args)
		require.ErrorContains(t, err, "the aliases (*a0 and others) repeat their anchors' values 1234567800 more times", args)
		require.Less(t, time.Since(start), 5*time.Second, args)
	}
}

// An input that never ends (/dev/zero; a FIFO fed forever) was read until
// memory ran out, deaf to SIGTERM: --replay /dev/zero held 11 GB after 12
// minutes, --counters 9 GB within three. A configuration file is read to a
// bound, a data file must be a regular file; each names its flag, at once.
func TestEndlessInputsAreRefused(t *testing.T) {
	records := "../../testdata/vllm-runs/RTX4090/Llama-3.1-8B/requests.jsonl"
	for _, args := range [][]string{
		{"run", "--config", "/dev/zero"},
		{"run", "--workload-spec", "/dev/zero"},
		{"run", "--policy-config", "/dev/zero"},
		{"run", "--deployment", "/dev/zero"},
		{"run", "--coefficients", "/dev/zero"},
		{"run", "--host-profile", "/dev/zero"},
		{"run", "--model", "/dev/zero"},
		{"run", "--hardware", "/dev/zero"},
		{"run", "--replay", "/dev/zero"},
		{"sweep", "--grid", "/dev/zero"},
		{"sweep", "--set", "workload.rate_scale=1,2", "--rows", "/dev/zero"},
		{"validate", records, "--meta", "/dev/zero"},
		{"validate", records, "--counters", "/dev/zero"},
		{"validate", "/dev/zero"},
	} {
		start := time.Now()
		_, _, err := runCLI(t, args...)
		require.Error(t, err, args)
		require.Contains(t, err.Error(), "/dev/zero", args)
		require.Regexp(t, "more than 64 MiB|is not a regular file", err.Error(), args)
		if args[len(args)-2] != "validate" {
			require.Contains(t, err.Error(), args[len(args)-2]+": ", args)
		}
		require.Less(t, time.Since(start), 10*time.Second, args)
	}
}

// A string flag's text is the string, whatever YAML makes of it:
// --prompt-tokens const: was read as a mapping ("--prompt-tokens: want a
// string, got a mapping") and --prompt-tokens @x did not parse; each is
// now judged by the key's own reader, which says what it accepts.
func TestStringFlagsTakeTheirTextAsGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt-tokens", "const:"}, `--prompt-tokens: distribution "const:": empty item; accepted forms: 512 | const:512`},
		{[]string{"--prompt-tokens", "a: b"}, `--prompt-tokens: distribution "a: b": unknown kind "a"`},
		{[]string{"--prompt-tokens", "@x"}, `--prompt-tokens: distribution "@x": "@x" is not a finite number`},
		{[]string{"--latency", "{a: 1}"}, `--latency: want one of auto, physics, roofline, blackbox, got "{a: 1}"`},
		{[]string{"--warmup", "[1]"}, `--warmup: auto, none or a duration (30s, 2m; whole µs): "[1]" is not a duration`},
	} {
		_, _, err := runCLI(t, append([]string{"run", "--requests", "5"}, c.args...)...)
		require.ErrorContains(t, err, c.want, c.args)
		require.NotContains(t, err.Error(), "want a string", c.args)
	}
}
