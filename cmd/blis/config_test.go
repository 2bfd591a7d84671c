package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/docs"
	"github.com/blis-sim/blis/sim/workload"
)

// tourPages are the pages of the README's tour: the README, getting
// started and the task guides.
func tourPages(t *testing.T) []string {
	t.Helper()
	pages, err := docs.Pages(docsRoot(t))
	require.NoError(t, err)
	var out []string
	for _, p := range pages {
		if p == "README.md" || p == "docs/getting-started.md" || strings.HasPrefix(p, "docs/guides/") {
			out = append(out, p)
		}
	}
	return out
}

// readmeRuns are the blis run commands of the tour's shell blocks, with
// their for loops expanded, as argument lists.
func readmeRuns(t *testing.T) [][]string {
	t.Helper()
	root := docsRoot(t)
	var logical []string
	for _, page := range tourPages(t) {
		blocks, err := docs.Blocks(root, page)
		require.NoError(t, err)
		for _, b := range blocks {
			if b.Lang != "sh" {
				continue
			}
			for _, c := range b.Commands() {
				for _, line := range strings.Split(c.Text, "\n") {
					if i := strings.Index(line, "  #"); i >= 0 {
						line = line[:i] // a comment
					}
					logical = append(logical, strings.TrimSpace(line))
				}
			}
		}
	}
	// Rejoin continuation lines.
	var joined []string
	cur := ""
	for _, l := range logical {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		joined = append(joined, cur+l)
		cur = ""
	}
	logical = joined
	var runs [][]string
	var loopVar string
	var loopValues []string
	for _, l := range logical {
		if strings.HasPrefix(l, "for ") {
			// for X in A B C; do [command; done]
			head, rest, _ := strings.Cut(l, "; do")
			f := strings.Fields(head)
			loopVar, loopValues = f[1], f[3:]
			l = strings.TrimSpace(rest)
		}
		if l == "done" {
			loopVar = ""
			continue
		}
		ends := strings.HasSuffix(l, "; done") // a one-line loop
		l = strings.TrimSpace(strings.TrimSuffix(l, "; done"))
		_, cmd, ok := strings.Cut(l, "./cmd/blis run")
		if !ok {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, " > ") // stdout to a file
		values := []string{""}
		if loopVar != "" {
			values = loopValues
		}
		for _, v := range values {
			args := strings.Fields(strings.ReplaceAll(cmd, "$"+loopVar, v))
			for i, a := range args {
				args[i] = strings.Trim(a, "'") // the shell's quotes
			}
			runs = append(runs, append([]string{"run"}, args...))
		}
		if ends {
			loopVar = ""
		}
	}
	return runs
}

// TestConfigFormMatchesFlagForm: every example of the tour gives the same
// bytes (report and output files) from its flags as from the experiment
// file --print-config writes for them.
func TestConfigFormMatchesFlagForm(t *testing.T) {
	runs := readmeRuns(t)
	require.GreaterOrEqual(t, len(runs), 15, "the README's examples")
	dir := t.TempDir()
	agents, err := workload.ScenarioText("agentic")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents.yaml"), agents, 0o644))
	deployment := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(deployment, []byte("pools:\n  - {name: a, replicas: 2}\n  - {name: b, hardware: a100-80gb}\nrouting: {policy: least-loaded}\n"), 0o644))
	inputs := map[string]string{
		"/tmp/tables/requests.parquet": "testdata/replay/requests.parquet",
		"/tmp/coeffs.yaml":             "../../coefficients/shipped/llama-3.1-8b_h100-sxm_tp1.yaml",
		"/tmp/agents.yaml":             filepath.Join(dir, "agents.yaml"),
		"deploy.yaml":                  deployment,
		"examples/deploy.yaml":         "../../examples/deploy.yaml",
	}
	outputs := map[string]bool{"--otlp-trace": true, "--kv-events": true, "--decision-trace": true, "--window-out": true, "--window-plot": true}
	tested := 0
	for i, args := range runs {
		joined := strings.Join(args, " ")
		if strings.Contains(joined, "--print-spec") || strings.Contains(joined, "--help") || strings.Contains(joined, "--config") || strings.Contains(joined, "--print-config") ||
			strings.Contains(joined, "--policy-config") {
			continue // not a run, or one of an experiment file
		}
		args = append([]string(nil), args...)
		var outs []string
		for j := 1; j < len(args); j++ {
			if p, ok := inputs[args[j]]; ok {
				args[j] = p
			}
			if outputs[args[j-1]] {
				args[j] = filepath.Join(dir, strings.TrimPrefix(args[j-1], "--")+"-"+itoa(i)+filepath.Ext(args[j]))
				outs = append(outs, args[j])
			}
		}
		tested++
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			a, _, err := runCLI(t, append(args, "-q")...)
			require.NoError(t, err)
			aFiles := hashFiles(t, outs)
			printed, _, err := runCLI(t, append(args, "--print-config")...)
			require.NoError(t, err)
			exp := filepath.Join(dir, "exp-"+itoa(i)+".yaml")
			require.NoError(t, os.WriteFile(exp, []byte(printed), 0o644))
			b, _, err := runCLI(t, "run", "-q", "--config", exp)
			require.NoError(t, err)
			// The file names its input files by absolute path (they read
			// the same from any folder), which the report echoes.
			require.Equal(t, a, relativePaths(t, b), "the --config form differs from the flags\n%s", printed)
			require.Equal(t, aFiles, hashFiles(t, outs), "the output files differ")
		})
	}
	require.GreaterOrEqual(t, tested, 14)
}

func hashFiles(t *testing.T, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err, p)
		sum := sha256.Sum256(data)
		out = append(out, hex.EncodeToString(sum[:]))
	}
	return out
}
