// Package clip shortens input quoted in a message, so that an error about
// one bad cell, field or line never copies a whole (possibly huge) input
// into the message (issue 32, class 4: a 400 MB CSV cell quoted whole
// took 3.7 GB).
package clip

import "unicode/utf8"

// Max is the longest string String returns, in bytes.
const Max = 40

// String returns s, or its first bytes (on a rune boundary) followed by
// "..." when it is longer than Max bytes.
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	n := Max - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
