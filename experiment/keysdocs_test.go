package experiment

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/policy"
)

// TestKeysDocIsCurrent: docs/experiment.md's table of every key is the
// declarations' (go test ./experiment -run KeysDoc -update).
func TestKeysDocIsCurrent(t *testing.T) {
	rewriteDocsBlock(t, "keys-table", KeysMarkdown(), "go test ./experiment -run KeysDoc -update", "docs/experiment.md")
}

var tick = regexp.MustCompile("`([^`]+)`")

// TestDocsDefaultsTablesMatchTheDeclarations: the defaults tables that
// docs/autoscaling.md, docs/disaggregation.md and docs/kv-tiers.md write
// by hand, with their sources, give each key its declared default: a
// default changed in one place and not the other fails here.
func TestDocsDefaultsTablesMatchTheDeclarations(t *testing.T) {
	threshold := policy.Param{}
	for _, tp := range policy.Templates(policy.Disaggregation) {
		if tp.Name == disagg.PrefixThresholdName {
			threshold = tp.Params[0]
		}
	}
	for _, tc := range []struct {
		doc, after string
		path       func(key string) string
		rows       int
	}{
		{"docs/autoscaling.md", "## The lifecycle and its defaults", func(k string) string {
			if strings.HasPrefix(k, "deployment.") {
				return k
			}
			return "deployment.pools[*]." + k
		}, 13},
		{"docs/disaggregation.md", "| key | default | source |", func(k string) string {
			if rest, ok := strings.CutPrefix(k, "network."); ok {
				return "deployment.network." + rest
			}
			return k
		}, 5},
		{"docs/kv-tiers.md", "A pool's `kv_tiers`", func(k string) string { return "deployment.pools[*].kv_tiers." + k }, 5},
		{"docs/kv-tiers.md", "The deployment's `kv_store`", func(k string) string { return "deployment.kv_store." + k }, 7},
	} {
		data, err := os.ReadFile(filepath.Join("..", tc.doc))
		require.NoError(t, err)
		s := string(data)
		i := strings.Index(s, tc.after)
		require.GreaterOrEqual(t, i, 0, "%s: no %q", tc.doc, tc.after)
		rows := 0
		inTable := false
		for _, line := range strings.Split(s[i:], "\n") {
			if strings.HasPrefix(line, "|---") {
				inTable = true
				continue
			}
			if !inTable {
				continue
			}
			if !strings.HasPrefix(line, "|") {
				break
			}
			cells := strings.Split(line, "|")
			names := tick.FindAllStringSubmatch(cells[1], -1)
			if len(names) == 0 {
				continue // a row of no key (the NVLink's, from the hardware file)
			}
			var keys []string
			prefix := ""
			for _, n := range names {
				k := n[1]
				if prefix != "" && !strings.Contains(k, ".") {
					k = prefix + k // "`startup.warmup_penalty`, `warmup_s`"
				}
				if j := strings.LastIndex(k, "."); j >= 0 {
					prefix = k[:j+1]
				}
				keys = append(keys, k)
			}
			values := splitTop(strings.TrimSpace(cells[2]))
			for j, k := range keys {
				v := values[min(j, len(values)-1)]
				var decl *schema.Key
				if k == "prefix-threshold.threshold" {
					decl = &threshold
				} else {
					decl = declOf(tc.path(k))
				}
				require.NotNil(t, decl, "%s: %s is not a key", tc.doc, k)
				want := decl.DefaultString()
				if decl.DefaultText != "" && !decl.Default.Equal(schema.Value{}) {
					want = decl.ValueString(decl.Default) // a constant behind the text
				}
				require.True(t, strings.HasPrefix(v, want), "%s: %s's default is %q in the table, %q in its declaration", tc.doc, k, v, want)
				rows++
			}
		}
		require.Equal(t, tc.rows, rows, "%s: keys in the table", tc.doc)
	}
}

// splitTop splits a cell at its top-level ", " (not inside brackets).
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case ',':
			if depth == 0 && i+1 < len(s) && s[i+1] == ' ' {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 2
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}
