package summary

import (
	"unicode"
	"unicode/utf8"
)

// Tokens counts s's tokens by this package's rule (docs/anomalies.md,
// "Summaries"), an over-estimate of what BPE tokenizers of current
// LLMs give for ASCII English with numbers, so that a summary within a
// budget by this count is within it for them too:
//
//   - a maximal run of letters counts ⌈n/4⌉ tokens (n letters): BPE
//     vocabularies hold most English words whole, or in pieces of 4 or
//     more letters;
//   - a maximal run of digits counts ⌈n/3⌉: cl100k and o200k split
//     numbers into groups of at most 3 digits;
//   - every other character but white space counts 1 (punctuation,
//     Markdown marks, each byte of a non-ASCII character's UTF-8
//     encoding, which byte-level BPE may split that far);
//   - white space counts nothing (BPE merges it into the next token).
//
// It reads s once and allocates nothing.
func Tokens(s string) int {
	n := 0
	var run, runLen int // run: 1 letters, 2 digits, 0 none
	flush := func() {
		switch run {
		case 1:
			n += (runLen + 3) / 4
		case 2:
			n += (runLen + 2) / 3
		}
		run, runLen = 0, 0
	}
	for i := 0; i < len(s); {
		c := s[i]
		var kind, size int
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			kind, size = 1, 1
		case c >= '0' && c <= '9':
			kind, size = 2, 1
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			kind, size = 3, 1
		case c < 0x80:
			kind, size = 4, 1
		default:
			// A non-ASCII character: one token per byte, letters or not
			// (white space too, conservatively).
			r, w := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				kind, size = 3, w
			} else {
				kind, size = 5, w
			}
		}
		if kind != run {
			flush()
		}
		switch kind {
		case 1, 2:
			run = kind
			runLen++
		case 4:
			n++
		case 5:
			n += size
		}
		i += size
	}
	flush()
	return n
}
