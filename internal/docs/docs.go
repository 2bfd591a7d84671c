// Package docs reads the repository's Markdown pages (README.md and
// docs/**/*.md) as data, for the tests that keep them true:
//
//   - the shell blocks (```sh fences) and the commands in them, which
//     the executed-docs test runs as written (package docs's own test);
//   - the marker a block may carry on the line before its fence,
//     <!-- docs-test: long (REASON) --> for a command too slow for the
//     quick test (.ci/run runs it), <!-- docs-test: not run (REASON) -->
//     for one that needs what a test cannot have (a GPU, a vLLM server,
//     an LLM endpoint, a Kubernetes cluster), and <!-- docs-test: stdout -->
//     on an output block, which must be what the last command of the shell
//     block before it printed;
//   - the generated blocks between <!-- name --> and <!-- /name -->
//     lines, which a test recomputes and, with -update, rewrites
//     (CheckBlock).
//
// A page is self-contained: its commands run in order from the
// repository's root, each page in a fresh copy of the tree, reading only
// files the repository has or that an earlier command of the page wrote.
package docs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Root is the repository's root: the nearest folder above the working
// directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("docs: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Pages are the documentation pages, as slash paths from root:
// README.md, then docs/**/*.md in lexical order.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	var more []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			more = append(more, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(more)
	return append(pages, more...), err
}

// Marker kinds: how the executed-docs test treats a block.
const (
	Quick  = ""        // run by every go test
	Long   = "long"    // run only when BLIS_DOCS_LONG=1 (.ci/run)
	NotRun = "not run" // never run; Reason says what it needs
	Stdout = "stdout"  // not a command: the stdout of the last command of the shell block before it
)

// Block is one fenced code block of a page.
type Block struct {
	Page   string // slash path from the root
	Line   int    // 1-based line of the opening fence
	Lang   string // the fence's info string: sh, yaml, ...
	Kind   string // Quick, Long or NotRun (from the marker before the fence)
	Reason string // the marker's reason
	Text   string // the lines between the fences, each ending in \n
}

var markerRE = regexp.MustCompile(`^<!-- docs-test: (?:(long|not run) \((.+)\)|(stdout)) -->$`)

// Blocks are page's fenced blocks, in order. A line "<!-- docs-test: ...
// -->" that is not a well-formed marker, or one not followed by a
// fence, is an error naming its line.
func Blocks(root, page string) ([]Block, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var blocks []Block
	kind, reason, markerLine := Quick, "", 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "<!-- docs-test:") {
			m := markerRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("%s:%d: a marker is <!-- docs-test: long (REASON) -->, <!-- docs-test: not run (REASON) --> or <!-- docs-test: stdout -->", page, i+1)
			}
			kind, reason, markerLine = m[1]+m[3], m[2], i+1
			continue
		}
		if !strings.HasPrefix(line, "```") {
			if markerLine != 0 && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: a docs-test marker must come right before a code fence", page, markerLine)
			}
			continue
		}
		b := Block{Page: page, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), Kind: kind, Reason: reason}
		kind, reason, markerLine = Quick, "", 0
		var text strings.Builder
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			text.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a code fence that is never closed", page, b.Line)
		}
		b.Text = text.String()
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// Command is one logical command of a shell block: a line, with the
// lines its trailing backslashes continue, or a compound for/while/if
// statement through its closing done/fi.
type Command struct {
	Line int    // 1-based line in the page where it starts
	Text string // as written, lines joined by \n
}

// Commands are the logical commands of a shell block, comment-only
// lines and blank lines left out.
func (b Block) Commands() []Command {
	var out []Command
	lines := strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		trimmed := strings.TrimSpace(lines[i])
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		text := lines[i]
		depth := compoundDepth(trimmed)
		for (strings.HasSuffix(strings.TrimSpace(lines[i]), "\\") || depth > 0) && i+1 < len(lines) {
			i++
			text += "\n" + lines[i]
			depth += compoundDepth(strings.TrimSpace(lines[i]))
		}
		out = append(out, Command{Line: b.Line + 1 + start, Text: text})
	}
	return out
}

// compoundDepth is how many compound statements a line opens minus how
// many it closes (for/while/until ... done, if ... fi).
func compoundDepth(line string) int {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	d := 0
	for _, w := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ';' || r == '\t' }) {
		switch w {
		case "for", "while", "until", "if":
			d++
		case "done", "fi":
			d--
		}
	}
	return d
}

// Program is the command a logical command runs: its first word after
// any VAR=value assignments ("go run ./cmd/blis" counts as "blis",
// "go run ./cmd/calibrate" as "calibrate", "python -m M" as M).
func (c Command) Program() string {
	f := strings.Fields(strings.ReplaceAll(c.Text, "\\\n", " "))
	for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
		f = f[1:]
	}
	switch {
	case len(f) == 0:
		return ""
	case len(f) >= 3 && f[0] == "go" && f[1] == "run" && strings.HasPrefix(f[2], "./cmd/"):
		return strings.TrimPrefix(f[2], "./cmd/")
	case len(f) >= 3 && (f[0] == "python" || f[0] == "python3") && f[1] == "-m":
		return f[2]
	}
	return f[0]
}

// Replace puts content between s's <!-- name --> and <!-- /name -->
// lines.
func Replace(s, name, content string) (string, error) {
	begin, end := "<!-- "+name+" -->\n", "<!-- /"+name+" -->\n"
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q lines", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	return s[:i+len(begin)] + content + s[j:], nil
}

// TB is the part of testing.TB CheckBlock uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// CheckBlock checks that each page (a slash path from root) holds
// content between its <!-- name --> and <!-- /name --> lines or, with
// update, writes it there. A stale page fails the test naming regen,
// the command that regenerates it.
func CheckBlock(t TB, root string, update bool, regen, name, content string, pages ...string) {
	t.Helper()
	for _, page := range pages {
		path := filepath.Join(root, filepath.FromSlash(page))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v", err)
		}
		want, err := Replace(string(data), name, content)
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if update {
			if want != string(data) {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatalf("%v", err)
				}
			}
			continue
		}
		if want != string(data) {
			t.Fatalf("%s's %s block is stale: %s\n--- want\n%s", page, name, regen, content)
		}
	}
}
