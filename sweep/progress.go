package sweep

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar shows a sweep's progress on stderr: runs done of the total,
// failures and the time left at the rate so far. On a terminal it is one
// line redrawn in place; elsewhere (a file, a pipe, CI's log) a plain
// line at every tenth of the runs, at most every 30 s otherwise, and at
// the end. It only writes diagnostics: wall time never enters a table.
type Bar struct {
	w        io.Writer
	tty      bool
	label    string
	start    time.Time
	now      func() time.Time
	lastLine time.Time
	lastStep int
	width    int // of the last line drawn in place
}

// NewBar is a bar for w, drawn in place when tty.
func NewBar(w io.Writer, tty bool, label string) *Bar {
	b := &Bar{w: w, tty: tty, label: label, now: time.Now}
	b.start = b.now()
	b.lastLine = b.start
	return b
}

// IsTerminal reports whether f is a terminal: a character device, and
// TERM is not "dumb". (/dev/null is a character device too; a bar drawn
// there is lost, as it should be.)
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// Update shows done runs of total, failed of them.
func (b *Bar) Update(done, failed, total int) {
	now := b.now()
	text := b.text(done, failed, total, now)
	if b.tty {
		pad := ""
		if n := len(text); n < b.width {
			pad = strings.Repeat(" ", b.width-n)
		}
		b.width = len(text)
		fmt.Fprintf(b.w, "\r%s%s", text, pad)
		if done == total {
			fmt.Fprintln(b.w)
		}
		return
	}
	step := 0
	if total > 0 {
		step = done * 10 / total
	}
	if done == total || step > b.lastStep || now.Sub(b.lastLine) >= 30*time.Second {
		b.lastStep, b.lastLine = step, now
		fmt.Fprintln(b.w, text)
	}
}

// Note prints a line (a failed run's error) without breaking the bar.
func (b *Bar) Note(line string) {
	if b.tty && b.width > 0 {
		fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", b.width))
		b.width = 0
	}
	fmt.Fprintln(b.w, line)
}

func (b *Bar) text(done, failed, total int, now time.Time) string {
	el := now.Sub(b.start)
	var s strings.Builder
	fmt.Fprintf(&s, "%s", b.label)
	if b.tty {
		const n = 24
		fill := 0
		if total > 0 {
			fill = done * n / total
		}
		fmt.Fprintf(&s, " [%s%s]", strings.Repeat("#", fill), strings.Repeat(".", n-fill))
	}
	fmt.Fprintf(&s, " %d/%d runs", done, total)
	if failed > 0 {
		fmt.Fprintf(&s, ", %d failed", failed)
	}
	fmt.Fprintf(&s, ", %s", round(el))
	switch {
	case done == total:
	case done > 0:
		left := time.Duration(float64(el) / float64(done) * float64(total-done))
		fmt.Fprintf(&s, ", ETA %s", round(left))
	default:
		s.WriteString(", ETA ?")
	}
	return s.String()
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
