package clip

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	require.Equal(t, "abc", String("abc"))
	s40 := strings.Repeat("x", 40)
	require.Equal(t, s40, String(s40))
	require.Equal(t, strings.Repeat("9", 37)+"...", String(strings.Repeat("9", 400<<20>>10)))
	// Never splits a rune, never longer than Max.
	for n := 0; n < 100; n++ {
		s := strings.Repeat("é", n) + strings.Repeat("µ", n%7)
		c := String(s)
		require.True(t, utf8.ValidString(c), s)
		require.LessOrEqual(t, len(c), Max)
	}
}
