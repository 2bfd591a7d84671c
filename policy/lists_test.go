package policy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var backticked = regexp.MustCompile("`([a-z0-9-]+)`")

// names are the backticked names in s, in order.
func names(s string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestTemplateListsInDocs: the prose lists of templates (docs/status.md's
// table, docs/getting-started.md's policy bundle and docs/cluster.md's
// tables) name exactly the registered templates, so a template added
// beside its code fails here until they say it.
func TestTemplateListsInDocs(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join("..", path))
		require.NoError(t, err)
		return string(b)
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	readme := read("docs/status.md")

	// The status table: "admission (`a`, `b`, ...)" and "a router (`x`,
	// ...; the weighted one with ...)".
	for _, c := range []struct {
		kind   Kind
		prefix string
	}{{Admission, "behind admission ("}, {Routing, "and a router ("}} {
		i := strings.Index(readme, c.prefix)
		require.GreaterOrEqual(t, i, 0, "docs/status.md has no %q", c.prefix)
		rest := readme[i+len(c.prefix):]
		rest = rest[:strings.IndexAny(rest, ");")]
		require.Equal(t, sorted(Names(c.kind)), sorted(names(rest)), "docs/status.md's %s list", c.kind)
	}

	// The policy bundle's sentence: "admission `a`, ...; priority ...".
	start := read("docs/getting-started.md")
	i := strings.Index(start, "names a template per section with its parameters: ")
	require.GreaterOrEqual(t, i, 0)
	sentence := start[i:]
	sentence = sentence[:strings.Index(sentence, " ([policies.md]")]
	for _, part := range strings.Split(sentence[strings.Index(sentence, ": ")+2:], "; ") {
		kind, list, _ := strings.Cut(part, " ")
		require.Equal(t, sorted(Names(Kind(kind))), sorted(names(list)), "docs/getting-started.md's %s list", kind)
	}

	// docs/cluster.md's admission and routing tables: one row a template.
	cluster := read("docs/cluster.md")
	for _, c := range []struct {
		kind    Kind
		section string
	}{{Admission, "## Admission"}, {Routing, "## Routing"}} {
		i := strings.Index(cluster, c.section)
		require.GreaterOrEqual(t, i, 0)
		var rows []string
		inTable := false
		for _, line := range strings.Split(cluster[i:], "\n")[1:] {
			if strings.HasPrefix(line, "|---") {
				inTable = true
				continue
			}
			if inTable && !strings.HasPrefix(line, "|") {
				break
			}
			if inTable {
				cell := strings.Split(line, "|")[1]
				rows = append(rows, names(cell)...)
			}
		}
		require.Equal(t, sorted(Names(c.kind)), sorted(rows), "docs/cluster.md's %s table", c.kind)
	}
}
