package columns

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDuplicate(t *testing.T) {
	require.NoError(t, Duplicate([]string{"a", "b", "c"}, nil))
	require.NoError(t, Duplicate(nil, nil))
	require.EqualError(t, Duplicate([]string{"a", "b", "a", "b"}, nil), "column a appears twice (columns 1 and 3)")
	require.EqualError(t, Duplicate([]string{"A", "b", " a"}, func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }), "column a appears twice (columns 1 and 3)")
}

func TestTrimBOM(t *testing.T) {
	h := []string{"\ufeffa", "\ufeffb"}
	TrimBOM(h)
	require.Equal(t, []string{"a", "\ufeffb"}, h, "only the first cell's mark, where an export puts it")
	TrimBOM(nil)
}
