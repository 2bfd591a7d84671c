package summary

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTokens: the counting rule of docs/anomalies.md, by hand.
func TestTokens(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{" \n\t\r ", 0},
		{"a", 1},
		{"abcd", 1},
		{"hello", 2},          // ⌈5/4⌉
		{"summary", 2},        // ⌈7/4⌉
		{"counterfactual", 4}, // ⌈14/4⌉
		{"1", 1},
		{"123", 1},
		{"1234", 2},    // ⌈4/3⌉
		{"1000000", 3}, // ⌈7/3⌉
		{"p99", 2},     // a letter run, a digit run
		{"a1b2", 4},
		{"31.7", 3},          // 31, ".", 7
		{"# Run summary", 4}, // "#", Run, summary
		{"- TTFT p50 31.7 ms", 8},
		{"a b", 2},
		{"a,b", 3},
		{"don't", 3},
		{"--", 2},
		{"_(x)_", 5},
		{"µs", 3},            // µ is 2 bytes of UTF-8, 1 token each; s
		{"→", 3},             // 3 bytes
		{"a\u00a0b", 2},      // a non-ASCII space counts nothing
		{"naïve", 1 + 2 + 1}, // na, ï (2 bytes), ve
		{"\xff", 1},          // an invalid byte: 1
	} {
		require.Equal(t, c.want, Tokens(c.in), "%q", c.in)
	}
}

// TestTokensIsAdditiveOverWhiteSpace: splitting a text at white space
// never changes its count, so the count of a document is the sum of its
// lines'.
func TestTokensIsAdditiveOverWhiteSpace(t *testing.T) {
	text := "# Run summary\n\n## Outcome\n\n- Requests: 2000 arrived, 1990 completed (99.5 %).\n- Latency (ms): TTFT p50 31.7, p99 88.5.\n"
	sum := 0
	for _, l := range strings.Split(text, "\n") {
		sum += Tokens(l)
	}
	require.Equal(t, Tokens(text), sum)
	require.Zero(t, testing.AllocsPerRun(10, func() { Tokens(text) }))
}

// FuzzTokens: the count never exceeds the bytes that are not white space
// and is never negative; ASCII text counts at least one token per run of
// non-space characters.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", "abc 123", "µs → ≥", "# Run summary\n- a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Tokens(s)
		nonSpace := 0
		for i := 0; i < len(s); i++ {
			if c := s[i]; c != ' ' && c != '\n' && c != '\t' && c != '\r' {
				nonSpace++
			}
		}
		if n < 0 || n > nonSpace {
			t.Fatalf("Tokens(%q) = %d, %d bytes not white space", s, n, nonSpace)
		}
		if len(strings.Fields(s)) > 0 && n == 0 && isASCII(s) {
			t.Fatalf("Tokens(%q) = 0", s)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
