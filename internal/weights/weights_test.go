package weights

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	known := func(n string) error {
		if n == "a" || n == "b" {
			return nil
		}
		return errors.New("unknown " + n)
	}
	ws, err := Parse(" a:3 , b:0.5", "item", "items", known)
	require.NoError(t, err)
	require.Equal(t, []Weight{{"a", 3}, {"b", 0.5}}, ws)
	for _, tc := range []struct{ in, want string }{
		{"a", `item "a": want name:weight`},
		{"c:1", "unknown c"},
		{"a:-1", `item a: weight "-1" must be a finite number >= 0`},
		{"a:Inf", "finite number"},
		{"a:NaN", "finite number"},
		{"a:x", "finite number"},
		{"a:0,b:0", `items "a:0,b:0" are all 0`},
		{"a:1,a:2", "item a is listed twice"},
		{"a:1e308,b:1e308", `items "a:1e308,b:1e308" sum to more than`}, // normalized to 0 before
		{"", `item "": want name:weight`},
	} {
		_, err := Parse(tc.in, "item", "items", known)
		require.ErrorContains(t, err, tc.want, tc.in)
	}
}
