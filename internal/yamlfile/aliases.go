package yamlfile

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// MaxAliasValues bounds the values a document's aliases (*name, each read
// in place of its anchor's value) add to it. A "billion laughs" file of
// nine nested lists of ten aliases each is 10^9 values that every walk of
// the tree visits: a 300-byte --config ran for minutes before any key was
// checked. A file that needs more repetition than this writes it out.
const MaxAliasValues = 100_000

// CheckAliases refuses a tree whose aliases, expanded, add more than
// MaxAliasValues values, naming the line of the first alias. It counts
// without expanding (each node's expanded size once), so it is linear in
// the tree's size.
func CheckAliases(root *yaml.Node) error {
	const limit = 1 << 40 // sizes saturate here
	memo := map[*yaml.Node]int64{}
	var first *yaml.Node
	var size func(n *yaml.Node) int64
	size = func(n *yaml.Node) int64 {
		if s, ok := memo[n]; ok {
			return s
		}
		memo[n] = 1 // an anchor inside its own value (yaml.v3 refuses it) counts once
		var s int64 = 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			if first == nil {
				first = n
			}
			s = size(n.Alias)
		} else {
			for _, c := range n.Content {
				s = min(s+size(c), limit)
			}
		}
		memo[n] = s
		return s
	}
	total := size(root)
	if added := total - int64(len(memo)); first != nil && added > MaxAliasValues {
		return fmt.Errorf("line %d: the aliases (*%s and others) repeat their anchors' values %s more times, beyond the %d allowed; write the values out",
			first.Line, first.Value, countText(added, limit), MaxAliasValues)
	}
	return nil
}

func countText(n, limit int64) string {
	if n >= limit-1<<20 {
		return "2^40 or"
	}
	return fmt.Sprint(n)
}
