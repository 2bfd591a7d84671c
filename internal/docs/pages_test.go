package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := Root()
	require.NoError(t, err)
	return r
}

func read(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(page)))
	require.NoError(t, err)
	return string(data)
}

// prose is a page without its code blocks.
func prose(s string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// The README's first screen, up to its "Where next" list included, is at
// most 60 lines and holds what a new user needs: what the tool is for,
// the two commands, the tour with its table of output fields, and links
// to getting started, the guides and the reference.
func TestREADMEFirstScreen(t *testing.T) {
	s := read(t, "README.md")
	lines := strings.Split(s, "\n")
	end := -1
	inNext := false
	for i, l := range lines {
		if l == "## Where next" {
			inNext = true
			continue
		}
		if inNext && strings.HasPrefix(l, "## ") {
			end = i
			break
		}
	}
	if end < 0 {
		end = len(lines)
	}
	require.True(t, inNext, "the README has no ## Where next section")
	require.LessOrEqual(t, end, 60, "the README's first screen (through ## Where next) is %d lines; at most 60", end)
	first := strings.Join(lines[:end], "\n")
	for _, want := range []string{
		"go run ./cmd/blis run ", "./scripts/test.sh ", "go install ./cmd/blis ./cmd/calibrate",
		"## Five-minute tour", "<!-- output-fields -->", "metrics.stability", "metrics.steady_state",
		"docs/getting-started.md", "docs/guides/", "docs/README.md",
	} {
		require.Contains(t, first, want)
	}
	// The two commands come first: the first shell block holds them and
	// only them.
	blocks, err := Blocks(root(t), "README.md")
	require.NoError(t, err)
	require.NotEmpty(t, blocks)
	var progs []string
	for _, c := range blocks[0].Commands() {
		progs = append(progs, strings.Fields(c.Text)[0]+" "+c.Program())
	}
	require.Equal(t, []string{"go blis", "./scripts/test.sh ./scripts/test.sh"}, progs)
}

// No page speaks the team's internal language: the design documents'
// numbers ("seed 003"), the tracker's ("issue 16"), the test rounds'
// vocabulary ("defect class", "stop 4"). A reader of the repository has
// none of them. Public projects' issues are named with their project
// ("vLLM issue 891" is fine).
func TestNoInternalJargon(t *testing.T) {
	pages, err := Pages(root(t))
	require.NoError(t, err)
	jargon := regexp.MustCompile(`(?i)\b(seeds? 0\d\d|seeds? \d\d\d(?:[,/ and]+\d\d\d)*|issues? \d+|defect class(es)?|stop \d+)\b`)
	public := regexp.MustCompile(`(?i)(vllm(-omni)?|llm-d|kubernetes|knative|ray|gepa|openevolve|lmcache|mooncake|sglang|golang/go|github|pytorch|(nvidia/)?nccl(-tests)?|vidur|splitwise|kuberay|opentelemetry)('s)? (pull request|pull|pr|issues?) #?\d+`)
	for _, page := range pages {
		for i, line := range strings.Split(read(t, page), "\n") {
			for _, m := range jargon.FindAllStringIndex(line, -1) {
				ctx := line[max(0, m[0]-40):m[1]]
				if strings.HasPrefix(strings.ToLower(line[m[0]:m[1]]), "issue") && public.MatchString(ctx) {
					continue
				}
				t.Errorf("%s:%d: internal jargon %q: say what it is instead", page, i+1, line[m[0]:m[1]])
			}
		}
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of every page names a file of the repository, and
// its #anchor a heading of that page.
func TestLinksResolve(t *testing.T) {
	r := root(t)
	pages, err := Pages(r)
	require.NoError(t, err)
	for _, page := range pages {
		for _, m := range linkRE.FindAllStringSubmatch(prose(read(t, page)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = path.Join(path.Dir(page), file)
			}
			info, err := os.Stat(filepath.Join(r, filepath.FromSlash(resolved)))
			if !assertNoErr(t, err, "%s: link %s: no %s", page, target, resolved) {
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			require.Contains(t, anchors(read(t, resolved)), anchor, "%s: link %s: %s has no heading #%s", page, target, resolved, anchor)
		}
	}
}

func assertNoErr(t *testing.T, err error, format string, args ...any) bool {
	t.Helper()
	if err != nil {
		t.Errorf(format, args...)
		return false
	}
	return true
}

// anchors are the #fragments GitHub gives a page's headings: lower case,
// punctuation but hyphens dropped, spaces as hyphens, repeats numbered.
func anchors(s string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose(s), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	if s == "" {
		s = "0"
	}
	return s
}

var installLink = regexp.MustCompile(`\]\((\.\./)*(docs/)?getting-started\.md#install\)`)

// A page whose shell blocks run bare blis or calibrate points to the one
// place that says how to install them.
func TestBareCommandsPointToTheInstall(t *testing.T) {
	r := root(t)
	pages, err := Pages(r)
	require.NoError(t, err)
	bare := 0
	for _, page := range pages {
		blocks, err := Blocks(r, page)
		require.NoError(t, err)
		uses := false
		for _, b := range blocks {
			if b.Lang != "sh" {
				continue
			}
			for _, c := range b.Commands() {
				if f := strings.Fields(c.Text); len(f) > 0 && (f[0] == "blis" || f[0] == "calibrate") {
					uses = true
				}
			}
		}
		if !uses || page == "docs/getting-started.md" {
			continue
		}
		bare++
		require.True(t, installLink.MatchString(read(t, page)),
			"%s runs bare blis or calibrate: link getting-started.md#install, where they are installed", page)
	}
	require.Contains(t, read(t, "docs/getting-started.md"), "go install ./cmd/blis ./cmd/calibrate")
}

// Every shell block that runs Python (python, pip, pytest, the tools'
// entry points) activates its virtualenv first, in the same block.
func TestPythonBlocksActivateAVirtualenv(t *testing.T) {
	r := root(t)
	pages, err := Pages(r)
	require.NoError(t, err)
	python := regexp.MustCompile(`^(python3?|pip3?|pytest|openevolve-run|ray)$`)
	for _, page := range pages {
		blocks, err := Blocks(r, page)
		require.NoError(t, err)
		for _, b := range blocks {
			if b.Lang != "sh" {
				continue
			}
			active := false
			for _, c := range b.Commands() {
				f := strings.Fields(c.Text)
				if len(f) >= 2 && (f[0] == "." || f[0] == "source") && strings.HasSuffix(f[1], "bin/activate") {
					active = true
				}
				if f[0] == "python3" && len(f) >= 3 && f[1] == "-m" && f[2] == "venv" {
					continue // making it
				}
				if strings.HasPrefix(f[0], "cd") && len(f) > 2 {
					f = f[3:] // cd DIR && ...
				}
				if len(f) > 0 && python.MatchString(f[0]) && !active {
					t.Errorf("%s:%d: %s runs Python before its block activates a virtualenv (. .venv/bin/activate)", page, c.Line, f[0])
				}
			}
		}
	}
}

// .gitignore ignores what the pages' commands write into the
// repository's root (the executed-docs test checks each file it sees
// written; these are the ones a reader would otherwise commit).
func TestGitignoreCoversTheDocsOutputs(t *testing.T) {
	ignore := read(t, ".gitignore")
	for _, want := range []string{"/.venv", "/blis", "/calibrate", "/exp.yaml", "/table.csv", "/table.parquet", "/gepa-run/", "/run.json", "/tables/"} {
		require.Contains(t, strings.Split(ignore, "\n"), want)
	}
}
