package yamlfile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// laughs is a "billion laughs" document: depth nested lists of ten
// aliases of the list before, 10^(depth+1) values in all.
func laughs(depth int) string {
	lines := []string{"version: 1", "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"}
	for i := 1; i <= depth; i++ {
		lines = append(lines, fmt.Sprintf("x%d: &a%d [%s]", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", ")))
	}
	return strings.Join(lines, "\n") + "\n"
}

// A 300-byte --config of nested aliases ran for minutes (every walk of
// the tree expanded its 10^9 values) before any key was checked; it is
// refused at once, naming the file and the line, while a file that uses
// a few aliases is read.
func TestAliasesAreBounded(t *testing.T) {
	type anyFile map[string]any
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{laughs(8), "x.yaml: line 3: the aliases (*a0 and others) repeat their anchors' values 1234567800 more times, beyond the 100000 allowed"},
		{laughs(40), "x.yaml: line 3: the aliases (*a0 and others) repeat their anchors' values 2^40 or more times"},
		{laughs(4), "x.yaml: line 3: the aliases (*a0 and others) repeat their anchors' values 123400 more times"},
		{laughs(2), ""},
		{"version: 1\nbase: &b {a: 1, b: [1, 2]}\npools: [*b, *b, *b]\n", ""},
	} {
		start := time.Now()
		var out anyFile
		_, err := Decode([]byte(tc.doc), "x.yaml", &out, nil)
		if tc.want == "" {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, tc.want)
		}
		require.Less(t, time.Since(start), 2*time.Second)
		var n yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(tc.doc), &n))
		_, err = DecodeNode(n.Content[0], "x.yaml", "", &out, nil)
		if tc.want != "" {
			require.ErrorContains(t, err, "the aliases")
		}
	}
}
