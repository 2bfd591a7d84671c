// Package columns holds the check every table reader makes of its header:
// no column may appear twice, since a reader that takes the first or the
// last copy would silently drop the other (docs/hardening.md, class 7).
package columns

import (
	"fmt"
	"strings"
)

// Duplicate returns an error naming the first column that appears twice
// in header (1-based positions), comparing names after norm (nil: as
// they are); nil when every name is distinct.
func Duplicate(header []string, norm func(string) string) error {
	seen := make(map[string]int, len(header))
	for i, h := range header {
		if norm != nil {
			h = norm(h)
		}
		if j, ok := seen[h]; ok {
			return fmt.Errorf("column %s appears twice (columns %d and %d)", h, j+1, i+1)
		}
		seen[h] = i
	}
	return nil
}

// TrimBOM removes a UTF-8 byte order mark from the first cell of header,
// in place: spreadsheets write one at the start of a CSV they export, and
// the header's first name must still read as itself.
func TrimBOM(header []string) {
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff")
	}
}
