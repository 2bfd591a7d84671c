package experiment

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
)

// pdPrompts are the mean prompt lengths the disaggregation table spans.
var pdPrompts = []int{512, 1024, 2048, 3072, 4096, 5120, 6144}

// pdRun runs the disaggregated scenario with its prompts' mean set to
// prompt tokens, disaggregated as it is, or colocated: the same four
// GPUs, every pool's role both, no decider.
func pdRun(prompt int, colocated bool) (*cluster.Result, error) {
	d, err := LoadScenario("disaggregated")
	if err != nil {
		return nil, err
	}
	sets := []string{fmt.Sprintf(`workload.spec.tenants=[{id: rag, slo_class: interactive, prompt_tokens: "lognormal:mean=%d,cv=0.5,max=%d", output_tokens: "lognormal:mean=256,cv=0.8,max=2048"}]`, prompt, 4*prompt)}
	if colocated {
		sets = append(sets, "deployment.pools[*].role=both", "policies.disaggregation.type=never")
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if err := d.Set(k, v, "test"); err != nil {
			return nil, err
		}
	}
	e, err := d.Resolve()
	if err != nil {
		return nil, err
	}
	e.Run.Workers = 1
	res, err := Run(context.Background(), e, nil)
	if err != nil {
		return nil, err
	}
	return res.Cluster, nil
}

// TestDisaggregationDocs: the comparison of P/D 2:2 with four colocated
// instances in docs/disaggregation.md and the README is what the
// disaggregated scenario gives today (go test ./experiment -run
// DisaggregationDocs -update rewrites it). Beside the numbers, it checks
// what the table is for: disaggregation keeps the decodes' TPOT tail
// below colocation's as the prompts grow, and it costs TTFT on short
// prompts (the transfer, two instances prefilling instead of four).
func TestDisaggregationDocs(t *testing.T) {
	type pair struct{ colo, pd *cluster.Result }
	rows := make([]pair, len(pdPrompts))
	errs := make([]error, 2*len(pdPrompts))
	var wg sync.WaitGroup
	for i, p := range pdPrompts {
		for k, colo := range []bool{true, false} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := pdRun(p, colo)
				errs[2*i+k] = err
				if colo {
					rows[i].colo = r
				} else {
					rows[i].pd = r
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var b strings.Builder
	b.WriteString("| mean prompt (tokens) | TTFT p50 / p99 (ms), colocated | P/D | TPOT p50 / p99 (ms), colocated | P/D | SLO attainment, colocated | P/D | goodput (req/s), colocated | P/D |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, p := range pdPrompts {
		c, d := rows[i].colo, rows[i].pd
		cc, dc := c.PerSLOClass[0], d.PerSLOClass[0]
		fmt.Fprintf(&b, "| %d | %s / %s | %s / %s | %.1f / %.1f | %.1f / %.1f | %.1f %% | %.1f %% | %.2f | %.2f |\n", p,
			ms(c.TTFT.P50), ms(c.TTFT.P99), ms(d.TTFT.P50), ms(d.TTFT.P99),
			cc.TPOT.P50, cc.TPOT.P99, dc.TPOT.P50, dc.TPOT.P99,
			100*c.SLO.Attainment, 100*d.SLO.Attainment, c.SLO.GoodputRPS, d.SLO.GoodputRPS)
		require.NotNil(t, d.Disaggregation, "prompt %d", p)
		require.Nil(t, c.Disaggregation, "prompt %d", p)
		require.Equal(t, d.Disaggregation.Transfers, d.Disaggregation.Disaggregated, "prompt %d: every disaggregated request's KV moved once", p)
	}
	// What the table shows, checked: on the shortest prompts P/D costs
	// TTFT; from 2,048 tokens on, colocation's TPOT tail is above P/D's;
	// at 4,096, P/D serves more requests within the SLO.
	require.Greater(t, rows[0].pd.TTFT.P50, rows[0].colo.TTFT.P50)
	for i, p := range pdPrompts {
		if p >= 2048 {
			require.Greater(t, rows[i].colo.PerSLOClass[0].TPOT.P99, rows[i].pd.PerSLOClass[0].TPOT.P99, "prompt %d", p)
		}
		if p == 4096 {
			require.Greater(t, rows[i].pd.SLO.GoodputRPS, rows[i].colo.SLO.GoodputRPS, "prompt %d", p)
		}
	}
	rewriteDocsBlock(t, "disaggregation-table", b.String(), "go test ./experiment -run DisaggregationDocs -update", "docs/guides/disaggregation-and-kv-tiers.md", "docs/disaggregation.md")
}

// ms formats milliseconds, whole from 10 ms.
func ms(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
