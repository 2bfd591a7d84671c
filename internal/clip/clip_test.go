package clip

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
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

// PathErr clips the path an fs.PathError quotes, keeps what it wraps.
func TestPathErr(t *testing.T) {
	long := strings.Repeat("p", 1<<20)
	_, err := os.Open(long)
	require.Greater(t, len(err.Error()), 1<<20)
	c := PathErr(fmt.Errorf("workload.spec_file: %w", err))
	require.Equal(t, "workload.spec_file: open "+String(long)+": file name too long", c.Error())
	require.ErrorIs(t, c, syscall.ENAMETOOLONG)
	short := errors.New("x")
	require.Equal(t, short, PathErr(short))
	_, err = os.Open("/no/such")
	require.Equal(t, err, PathErr(err))
}
