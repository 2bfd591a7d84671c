package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden and testdata/experiments from the code (go test ./cmd/blis -run Golden -update)")

// goldenRuns are the default run and the README's examples, frozen so that
// refactors of the engine keep blis run byte-identical. A golden freezes
// behaviour, it does not prove it right: the invariant checks that run on
// every simulation (INV-1..8) and the other tests do that.
//
// Each case's stdout is compared byte for byte with testdata/golden/NAME.json;
// files the run writes (trace, KV events) are compared by SHA-256 with
// testdata/golden/NAME.files, one "name sha256 bytes" line per file.
var goldenRuns = []struct {
	name  string
	args  []string
	files []string // flags whose value is an output file, in order: --otlp-trace, --kv-events
}{
	{name: "default", args: nil},
	{name: "sjf-long-prompts", args: []string{"--rate", "30", "--requests", "5000", "--prompt-tokens", "lognormal:mean=2000,cv=0.8", "--scheduler", "sjf"}},
	{name: "mixtral-a100-tp4-cpu-tier", args: []string{"--model", "mixtral-8x7b", "--hardware", "a100-80gb", "--tp", "4", "--kv-blocks-cpu", "50000"}},
	{name: "noise-trace", args: []string{"--latency-noise", "0.05", "--trace-step-sample-rate", "1"}, files: []string{"--otlp-trace"}},
	{name: "calibration-trace", args: []string{"--latency", "roofline", "--latency-noise", "0.05", "--requests", "3000",
		"--trace-step-sample-rate", "1", "--trace-rich-subsample-rate", "0.1", "--trace-max-events-per-span", "100000"}, files: []string{"--otlp-trace"}},
	{name: "replay-per-request", args: []string{"--replay", "testdata/replay/requests.parquet", "--per-request"}},
	{name: "coefficients-file", args: []string{"--coefficients", "../../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml"}},
	{name: "offload-kv-events", args: []string{"--requests", "400", "--rate", "40", "--kv-blocks-gpu", "3000", "--kv-blocks-cpu", "20000",
		"--kv-offload-threshold", "0.5", "--trace-step-sample-rate", "0.3", "--trace-rich-subsample-rate", "0.2", "--per-request"},
		files: []string{"--otlp-trace", "--kv-events"}},
	{name: "blackbox-priority-horizon", args: []string{"--latency", "blackbox", "--scheduler", "priority-fcfs", "--priority", "slo-based",
		"--rate", "40", "--requests", "2000", "--horizon", "30", "--kv-blocks-gpu", "4000", "--arrival", "gamma", "--gamma-cv", "3"}},
	{name: "chunked-off-small-cache", args: []string{"--enable-chunked-prefill=false", "--kv-blocks-gpu", "900", "--rate", "12",
		"--requests", "600", "--max-num-seqs", "32", "--scheduler", "reverse-priority", "--priority", "inverted-slo", "--per-request"}},
	{name: "unservable-drops-trace", args: []string{"--kv-blocks-gpu", "120", "--requests", "300", "--rate", "10",
		"--prompt-tokens", "uniform:100,2500", "--prefix-groups", "0", "--trace-route", "/v1/chat/completions"}, files: []string{"--otlp-trace"}},
}

// TestGoldenRuns runs each golden twice: from its flags, and from its
// experiment file (testdata/experiments/NAME.yaml, what --print-config
// writes for those flags; a stale one fails, -update rewrites it), with
// only the output files given as flags. Both must give the golden bytes.
func TestGoldenRuns(t *testing.T) {
	for _, g := range goldenRuns {
		t.Run(g.name, func(t *testing.T) {
			expPath := filepath.Join("testdata", "experiments", g.name+".yaml")
			args := append([]string{"run", "--print-config"}, g.args...)
			for _, f := range g.files { // the run's outputs, named; the test gives them temporary paths
				args = append(args, f, strings.TrimPrefix(f, "--")+".out")
			}
			printed, _, err := runCLI(t, args...)
			require.NoError(t, err)
			printed = relativePaths(t, printed)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(expPath), 0o755))
				require.NoError(t, os.WriteFile(expPath, []byte(printed), 0o644))
			}
			checked, err := os.ReadFile(expPath)
			require.NoError(t, err, "missing experiment file; regenerate with go test ./cmd/blis -run Golden -update")
			require.Equal(t, string(checked), printed, "%s is stale: go test ./cmd/blis -run Golden -update", expPath)
			goldenRun(t, g.name, g.args, g.files)
			goldenRun(t, g.name, []string{"--config", expPath}, g.files)
		})
	}
}

func goldenRun(t *testing.T, name string, given, files []string) {
	t.Helper()
	g := struct {
		name  string
		args  []string
		files []string
	}{name, given, files}
	{
		{
			dir := t.TempDir()
			args := append([]string{"run", "-q"}, g.args...)
			var outs []string
			for _, f := range g.files {
				p := filepath.Join(dir, strings.TrimPrefix(f, "--"))
				args = append(args, f, p)
				outs = append(outs, p)
			}
			stdout, _, err := runCLI(t, args...)
			require.NoError(t, err)
			var files strings.Builder
			for i, p := range outs {
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				sum := sha256.Sum256(data)
				files.WriteString(strings.TrimPrefix(g.files[i], "--") + " " + hex.EncodeToString(sum[:]) + " " + itoa(len(data)) + "\n")
			}
			jsonPath := filepath.Join("testdata", "golden", g.name+".json")
			filesPath := filepath.Join("testdata", "golden", g.name+".files")
			if *update {
				require.NoError(t, os.WriteFile(jsonPath, []byte(stdout), 0o644))
				if len(outs) > 0 {
					require.NoError(t, os.WriteFile(filesPath, []byte(files.String()), 0o644))
				}
			}
			want, err := os.ReadFile(jsonPath)
			require.NoError(t, err, "missing golden; regenerate with go test ./cmd/blis -run Golden -update")
			require.Equal(t, string(want), stdout, "blis run %s changed its output", strings.Join(g.args, " "))
			if len(outs) > 0 {
				wantFiles, err := os.ReadFile(filesPath)
				require.NoError(t, err)
				require.Equal(t, string(wantFiles), files.String(), "the files blis run writes changed")
			}
		}
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}

// relativePaths turns the absolute paths --print-config writes (so that
// the file reads the same files from any folder) back into this
// package's relative spelling, so that the checked-in experiment files
// are the same on every machine.
func relativePaths(t *testing.T, printed string) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	root := filepath.Dir(filepath.Dir(wd))
	sep := string(filepath.Separator)
	for _, q := range []string{" ", `"`} {
		printed = strings.ReplaceAll(printed, q+wd+sep, q)
		printed = strings.ReplaceAll(printed, q+root+sep, q+"../../")
	}
	return printed
}
