// Package clip shortens input quoted in a message, so that an error about
// one bad cell, field or line never copies a whole (possibly huge) input
// into the message (docs/hardening.md, "Unbounded work": a 400 MB CSV
// cell quoted whole took 3.7 GB).
package clip

import (
	"errors"
	"io/fs"
	"strings"
	"unicode/utf8"
)

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

// PathErr returns err with the path of the *fs.PathError it wraps
// clipped wherever its message quotes it (an open of a 1 MB "path" says
// "open xxx...: file name too long", not the megabyte); err itself when
// the path is short or there is none. The result unwraps to err.
func PathErr(err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) || len(pe.Path) <= Max {
		return err
	}
	return &clipped{msg: strings.ReplaceAll(err.Error(), pe.Path, String(pe.Path)), err: err}
}

type clipped struct {
	msg string
	err error
}

func (c *clipped) Error() string { return c.msg }
func (c *clipped) Unwrap() error { return c.err }
