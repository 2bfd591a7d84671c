package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/schema"
)

// TestAutoscalingDocFiguresAreTheDeclarations: the figures docs/autoscaling.md's
// table of policies states in prose (the HPA's windows and rates, the
// saturation analyzer's thresholds, the KPA's windows, the threshold
// templates') are each template's declared defaults, so changing a default
// beside its code fails here until the prose says it (docs/policies.md,
// generated, lists every parameter).
func TestAutoscalingDocFiguresAreTheDeclarations(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "autoscaling.md"))
	require.NoError(t, err)
	doc := string(b)
	// row is the table row of the template named first in it.
	row := func(name string) string {
		i := strings.Index(doc, "\n| `"+name+"`")
		require.GreaterOrEqual(t, i, 0, "docs/autoscaling.md has no row for %s", name)
		r := doc[i+1:]
		return r[:strings.Index(r, "\n")]
	}
	// def is a template parameter's default as the doc writes it.
	def := func(tpl, param string) string {
		for _, tp := range Templates(Autoscale) {
			if tp.Name != tpl {
				continue
			}
			for _, k := range tp.Params {
				if k.Name == param {
					if k.Type == schema.Int {
						return fmt.Sprint(k.Default.I)
					}
					return schema.FmtNum(k.Default.F)
				}
			}
		}
		t.Fatalf("autoscale template %s has no parameter %s", tpl, param)
		return ""
	}
	share := func(tpl, param string) string { // "0.70": two decimals
		x := 0.0
		_, err := fmt.Sscan(def(tpl, param), &x)
		require.NoError(t, err)
		return fmt.Sprintf("%.2f", x)
	}
	for _, tc := range []struct {
		row   string
		wants []string
	}{
		{"hpa", []string{
			fmt.Sprintf("`scale_down_window_s` (%s)", def("hpa", "scale_down_window_s")),
			fmt.Sprintf("`scale_up_window_s` (%s)", def("hpa", "scale_up_window_s")),
			fmt.Sprintf("at most max(+%s %%, +%s) replicas per %s s up, %s %% per %s s down", def("hpa", "scale_up_percent"), def("hpa", "scale_up_pods"),
				def("hpa", "scale_up_period_s"), def("hpa", "scale_down_percent"), def("hpa", "scale_down_period_s")),
			fmt.Sprintf("Every %s s.", def("hpa", "interval_s")),
		}},
		{"saturation", []string{
			fmt.Sprintf("KV capacity × %s", def("saturation", "kv_threshold")),
			fmt.Sprintf("≥ %s waiting per replica", def("saturation", "queue_threshold")),
			fmt.Sprintf("up above %s of the supply", share("saturation", "scale_up")),
			fmt.Sprintf("down under %s", share("saturation", "scale_down")),
			fmt.Sprintf("%s s down-stabilization", def("saturation", "scale_down_window_s")),
			fmt.Sprintf("Every %s s.", def("saturation", "interval_s")),
		}},
		{"queue-depth", []string{
			fmt.Sprintf("threshold %s/%s, cooldown %s s", def("target-utilization", "up"), def("target-utilization", "down"), def("target-utilization", "cooldown_s")),
			fmt.Sprintf("queue over threshold for %s s", def("queue-depth", "sustain_s")),
		}},
		{"kpa", []string{
			fmt.Sprintf("averaged over %s s", def("kpa", "stable_window_s")),
			fmt.Sprintf("over `target` (%s = 100 × 70 %%)", def("kpa", "target")),
			fmt.Sprintf("the %s-s average wants %s × the ready replicas", def("kpa", "panic_window_s"), def("kpa", "panic_threshold")),
			fmt.Sprintf("until %s s pass calm", def("kpa", "stable_window_s")),
			fmt.Sprintf("at most ×%s up, ÷%s down per %s-s tick", def("kpa", "max_scale_up_rate"), def("kpa", "max_scale_down_rate"), def("kpa", "interval_s")),
		}},
	} {
		r := row(tc.row)
		for _, w := range tc.wants {
			require.Contains(t, r, w, "docs/autoscaling.md's %s row states a figure that is not the declaration's", tc.row)
		}
	}
}
