package experiment

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/windowplot"
	"github.com/blis-sim/blis/internal/docs"
	"github.com/blis-sim/blis/sim/workload"
)

var update = flag.Bool("update", false, "regenerate the autoscaling table in docs/guides/autoscaling.md and docs/autoscaling.md and docs/img/diurnal-autoscale.png (go test ./experiment -run DiurnalAutoscaleDocs -update)")

// TestScenariosAreNotWorkloads: a built-in experiment's name is not a
// workload scenario's (--scenario takes both), and each one resolves.
func TestScenariosAreNotWorkloads(t *testing.T) {
	require.NotEmpty(t, Scenarios())
	for _, name := range Scenarios() {
		require.NotContains(t, workload.Scenarios(), name)
		d, err := LoadScenario(name)
		require.NoError(t, err, name)
		_, err = d.Resolve()
		require.NoError(t, err, name)
	}
	_, err := LoadScenario("nope")
	require.ErrorContains(t, err, "no built-in experiment \"nope\"; they are disaggregated, diurnal-autoscale, fleet-day, shared-kv, shared-kv-local")
	_, err = parse(t, "version: 1\nworkload: {scenario: diurnal-autoscale}\n")
	require.ErrorContains(t, err, "workload.scenario: diurnal-autoscale is a built-in experiment")
}

// autoscaleRows are the policies the README compares on
// diurnal-autoscale: its own (hpa), WVA's, Knative's, and the smallest
// fixed fleet that meets the SLO at the peak (7 replicas meet it for 55 %
// of the requests).
var autoscaleRows = []struct{ label, sets string }{
	{"`hpa` on in-flight requests per replica, target 70 (the scenario's)", ""},
	{"`saturation` (llm-d WVA v2, actuated by an HPA)", "policies.autoscale.type=saturation"},
	{"`kpa` (Knative, concurrency 70 per replica)", "policies.autoscale.type=kpa"},
	{"fixed fleet of 8 replicas, sized for the peak", "policies.autoscale.type=none deployment.pools[0].replicas=8"},
}

// TestDiurnalAutoscaleDocs: the table of cost and SLO attainment in the
// README and docs/autoscaling.md, and the window figure, are those the
// scenario gives today.
func TestDiurnalAutoscaleDocs(t *testing.T) {
	out := make([]string, len(autoscaleRows))
	var png bytes.Buffer
	var wg sync.WaitGroup
	errs := make([]error, len(autoscaleRows))
	for i, row := range autoscaleRows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = autoscaleRow(row.label, row.sets, i == 0, &png)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	table := "| policy | mean replicas | peak | scale-ups / downs | oscillations | GPU-hours | cost ($) | $ per M output tokens | SLO attainment | TTFT p99 (s) |\n|---|---|---|---|---|---|---|---|---|---|\n" + strings.Join(out, "")
	rewriteDocsBlock(t, "autoscale-table", table, "go test ./experiment -run DiurnalAutoscaleDocs -update", "docs/guides/autoscaling.md", "docs/autoscaling.md")
	img := filepath.Join("..", "docs", "img", "diurnal-autoscale.png")
	if *update {
		require.NoError(t, os.WriteFile(img, png.Bytes(), 0o644))
		return
	}
	data, err := os.ReadFile(img)
	require.NoError(t, err)
	require.True(t, bytes.Equal(png.Bytes(), data), "%s is stale: go test ./experiment -run DiurnalAutoscaleDocs -update", img)
}

// autoscaleRow runs diurnal-autoscale with sets (space-separated
// key=value) and formats its row; with figure, it draws its 1-minute
// windows to png.
func autoscaleRow(label, sets string, figure bool, png *bytes.Buffer) (string, error) {
	d, err := LoadScenario("diurnal-autoscale")
	if err != nil {
		return "", err
	}
	for _, kv := range strings.Fields(sets) {
		k, v, _ := strings.Cut(kv, "=")
		if err := d.Set(k, v, "test"); err != nil {
			return "", err
		}
	}
	e, err := d.Resolve()
	if err != nil {
		return "", err
	}
	e.Run.Workers = 1
	if figure {
		e.Run.WindowUs = 60_000_000 // --window 1m, drawn here rather than to a file
	}
	res, err := Run(context.Background(), e, nil)
	if err != nil {
		return "", err
	}
	m := res.Cluster
	f := m.Fleet
	p := f.Pools[0]
	if figure {
		if err := windowplot.Write(png, m.Windows, "png"); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("| %s | %.1f | %d | %d / %d | %d | %.1f | %.2f | %.2f | %.1f %% | %.1f |\n", label, p.MeanReplicas, p.PeakReplicas,
		p.ScaleUps, p.ScaleDowns, p.Oscillations, f.GPUHours, f.Cost, *f.CostPerMillionTokens, 100*m.SLO.Attainment, m.TTFT.P99/1e3), nil
}

// rewriteDocsBlock checks that each doc (a path from the repository's
// root) holds content between its <!-- name --> and <!-- /name -->
// lines, or with -update writes it there (docs.CheckBlock).
func rewriteDocsBlock(t *testing.T, name, content, cmd string, pages ...string) {
	t.Helper()
	docs.CheckBlock(t, "..", *update, cmd, name, content, pages...)
}
