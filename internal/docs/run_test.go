package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The executed-docs test runs every shell block of README.md and
// docs/**/*.md as written, page by page, each page in a fresh copy of
// the repository (its tracked and new files) and in one shell, so that a
// block's cd, export and virtualenv carry to the next as they do for a
// reader. Each command has a time budget. What it changes to run them,
// and why:
//
//   - `go run ./cmd/blis ...` and `go run ./cmd/calibrate ...` run the
//     binaries this test built once from the same tree (a `go` on PATH
//     forwards everything else to the real one): linking them again for
//     each of the commands would dominate the test. `go build -o F
//     ./cmd/X` copies the binary, `go install ./cmd/...` puts it on PATH.
//     Bare blis and calibrate are the same binaries, as after the
//     install of docs/getting-started.md.
//   - /tmp/ in a command is a private folder of the test's (several
//     people's tests share this machine's /tmp).
//   - In the quick test, when a virtualenv with the pinned requirements is
//     at hand ($BLIS_VENV, else build/venv: scripts/test.sh makes it
//     before the Go tests), `python3 -m venv DIR` links DIR to it and
//     `pip install -r ...lock` is not run again. With BLIS_DOCS_LONG=1
//     (.ci/run), both run as written.
//
// Blocks marked <!-- docs-test: long (...) --> run only with
// BLIS_DOCS_LONG=1; blocks marked <!-- docs-test: not run (...) --> and
// the commands of notRun never run, and the test keeps their number
// small. A block marked <!-- docs-test: stdout --> must equal what the
// last command before it printed. Files a page writes into the copy must
// be ignored by .gitignore.

// notRun are commands the pages show that the test never runs, each with
// why.
var notRun = map[string]string{
	"./scripts/test.sh": "the test command, which runs this test",
}

// maxNotRun bounds the blocks and commands never run: each needs what a
// test cannot have (a GPU, a vLLM server, an LLM endpoint, Kubernetes).
const maxNotRun = 12

// Time budgets per command. The machines are shared and slow: these
// bound a command that hangs or has become an order of magnitude slower,
// not a benchmark.
var (
	quickBudget = 120 * time.Second
	longBudget  = 20 * time.Minute
)

func longRun() bool { return os.Getenv("BLIS_DOCS_LONG") == "1" }

// TestDocsMarkers: every marker has a reason, the blocks never run are
// few, and each page's blocks parse.
func TestDocsMarkers(t *testing.T) {
	r := root(t)
	pages, err := Pages(r)
	require.NoError(t, err)
	never := len(notRun)
	for _, page := range pages {
		blocks, err := Blocks(r, page)
		require.NoError(t, err)
		for i, b := range blocks {
			switch b.Kind {
			case NotRun, Long:
				require.GreaterOrEqual(t, len(strings.Fields(b.Reason)), 3, "%s:%d: say why in a few words", page, b.Line)
				require.Equal(t, "sh", b.Lang, "%s:%d: a %s marker on a %q block", page, b.Line, b.Kind, b.Lang)
				if b.Kind == NotRun {
					never++
				}
			case Stdout:
				require.NotEqual(t, "sh", b.Lang, "%s:%d: a stdout block is output, not commands", page, b.Line)
				require.True(t, i > 0 && blocks[i-1].Lang == "sh" && blocks[i-1].Kind == Quick, "%s:%d: a stdout block follows the shell block it shows the output of", page, b.Line)
			}
		}
	}
	for cmd, why := range notRun {
		require.GreaterOrEqual(t, len(strings.Fields(why)), 3, "%s: say why", cmd)
	}
	require.LessOrEqual(t, never, maxNotRun, "more commands are never run than the few that need a GPU, a server or an LLM")
}

// TestDocsCommandsRun runs the pages' commands (see above).
func TestDocsCommandsRun(t *testing.T) {
	r := root(t)
	pages, err := Pages(r)
	require.NoError(t, err)
	work := t.TempDir()
	env := prepare(t, r, work)
	files := trackedFiles(t, r)
	for _, page := range pages {
		blocks, err := Blocks(r, page)
		require.NoError(t, err)
		if !runnable(blocks) {
			continue
		}
		t.Run(page, func(t *testing.T) { runPage(t, r, work, env, files, page, blocks) })
	}
}

func runnable(blocks []Block) bool {
	for _, b := range blocks {
		if b.Lang == "sh" && (b.Kind == Quick || b.Kind == Long && longRun()) {
			return true
		}
	}
	return false
}

// docsEnv is what every page's shell gets.
type docsEnv struct {
	bin  string // blis, calibrate and the go that forwards
	venv string // a ready virtualenv, or ""
}

// prepare builds blis and calibrate, writes the forwarding go, and finds
// a virtualenv.
func prepare(t *testing.T, r, work string) docsEnv {
	t.Helper()
	bin := filepath.Join(work, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, name := range []string{"blis", "calibrate"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./cmd/"+name)
		cmd.Dir = r
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build ./cmd/%s: %s", name, out)
	}
	realGo, err := exec.LookPath("go")
	require.NoError(t, err)
	shim := `#!/bin/sh
# The executed-docs test's go: the commands the docs build or run from
# ./cmd/blis and ./cmd/calibrate take the binaries it built from the same tree.
bin=` + strconv.Quote(bin) + `
case "$1 $2" in
"run ./cmd/blis") shift 2; exec "$bin/blis" "$@";;
"run ./cmd/calibrate") shift 2; exec "$bin/calibrate" "$@";;
esac
if [ "$1" = build ] && [ "$2" = -o ] && [ $# -eq 4 ]; then
  case "$4" in ./cmd/blis|./cmd/calibrate) exec cp "$bin/${4#./cmd/}" "$3";; esac
fi
if [ "$1" = install ]; then
  shift
  ok=1
  for p in "$@"; do case "$p" in ./cmd/blis|./cmd/calibrate) ;; *) ok=0;; esac; done
  if [ $ok = 1 ]; then exit 0; fi  # already on PATH
  set -- install "$@"
fi
exec ` + strconv.Quote(realGo) + ` "$@"
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(shim), 0o755))
	env := docsEnv{bin: bin}
	if !longRun() {
		for _, v := range []string{os.Getenv("BLIS_VENV"), filepath.Join(r, "build", "venv")} {
			if v == "" {
				continue
			}
			if abs, err := filepath.Abs(v); err == nil && isExec(filepath.Join(abs, "bin", "python")) && hasModules(abs, "gepa", "openevolve") {
				env.venv = abs
				break
			}
		}
		t.Logf("virtualenv for the Python blocks: %q (empty: the pages' own commands make one)", env.venv)
	}
	return env
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

func hasModules(venv string, mods ...string) bool {
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import "+strings.Join(mods, ", "))
	return cmd.Run() == nil
}

// trackedFiles are the repository's files a clone would have, with the
// new ones not yet committed (git ls-files), as slash paths.
func trackedFiles(t *testing.T, r string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = r
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files")
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(r, filepath.FromSlash(f))); err == nil { // deleted, not yet committed
			files = append(files, f)
		}
	}
	return files
}

func copyTree(t *testing.T, r, dst string, files []string) {
	t.Helper()
	for _, f := range files {
		src := filepath.Join(r, filepath.FromSlash(f))
		to := filepath.Join(dst, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		st, err := os.Lstat(src)
		require.NoError(t, err)
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, to))
			continue
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, data, st.Mode().Perm()))
	}
}

var (
	venvLine = regexp.MustCompile(`^python3? -m venv (\S+)$`)
	pipLine  = regexp.MustCompile(`^pip3? install( -q)?( -r \S+\.lock)+$`)
)

// step is one command of a page's script.
type step struct {
	block  Block
	cmd    Command
	budget time.Duration
}

func runPage(t *testing.T, r, work string, env docsEnv, files []string, page string, blocks []Block) {
	slug := strings.NewReplacer("/", "_", ".", "_").Replace(page)
	copyDir := filepath.Join(work, slug)
	tmp := filepath.Join(work, slug+"-tmp")
	outs := filepath.Join(work, slug+"-out")
	for _, d := range []string{copyDir, tmp, outs} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	copyTree(t, r, copyDir, files)

	var script strings.Builder
	script.WriteString("set -eo pipefail\ncd " + strconv.Quote(copyDir) + "\n")
	var steps []step
	var expect []struct {
		after int
		block Block
	}
	for _, b := range blocks {
		if b.Kind == Stdout {
			expect = append(expect, struct {
				after int
				block Block
			}{len(steps) - 1, b})
			continue
		}
		if b.Lang != "sh" || b.Kind == NotRun || b.Kind == Long && !longRun() {
			if b.Lang == "sh" && b.Kind == Long {
				t.Logf("%s:%d: long (%s): not run in the quick test (BLIS_DOCS_LONG=1 runs it)", page, b.Line, b.Reason)
			}
			continue
		}
		budget := quickBudget
		if b.Kind == Long {
			budget = longBudget
		}
		for _, c := range b.Commands() {
			text := c.Text
			if why, ok := notRun[withoutComment(text)]; ok {
				t.Logf("%s:%d: %s: not run: %s", page, c.Line, text, why)
				continue
			}
			// The pages' /tmp/ paths go to the test's own folder; the
			// prepared virtualenv's path is put in after (a tree cloned
			// under /tmp has its virtualenv there).
			text = strings.ReplaceAll(text, "/tmp/", tmp+"/")
			if env.venv != "" {
				if m := venvLine.FindStringSubmatch(strings.TrimSpace(text)); m != nil {
					text = fmt.Sprintf("[ -e %s ] || ln -s %s %s   # docs test: the prepared virtualenv", m[1], strconv.Quote(env.venv), m[1])
				} else if pipLine.MatchString(strings.TrimSpace(text)) {
					text = "true   # docs test: the prepared virtualenv has the pinned requirements: " + text
				}
			}
			n := len(steps)
			steps = append(steps, step{block: b, cmd: c, budget: budget})
			fmt.Fprintf(&script, "echo S %d >&3\n{\n%s\n} >%s 2>%s\necho E %d >&3\n", n, text,
				strconv.Quote(filepath.Join(outs, strconv.Itoa(n)+".out")), strconv.Quote(filepath.Join(outs, strconv.Itoa(n)+".err")), n)
		}
	}
	if len(steps) == 0 {
		return
	}
	scriptPath := filepath.Join(work, slug+".sh")
	require.NoError(t, os.WriteFile(scriptPath, []byte(script.String()), 0o644))

	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command("bash", scriptPath)
	cmd.Dir = copyDir
	cmd.Env = append(os.Environ(), "PATH="+env.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOFLAGS=", "BLIS_DOCS_TEST=1")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var shellErr bytes.Buffer
	cmd.Stderr = &shellErr
	require.NoError(t, cmd.Start())
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	marks := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			marks <- sc.Text()
		}
		close(marks)
	}()
	cur, started := -1, time.Now()
	finished := map[int]time.Duration{}
	var timedOut *step
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for running := true; running; {
		select {
		case m, ok := <-marks:
			if !ok {
				running = false
				break
			}
			f := strings.Fields(m)
			n, _ := strconv.Atoi(f[1])
			if f[0] == "S" {
				cur, started = n, time.Now()
				timer.Reset(steps[n].budget)
			} else {
				finished[n] = time.Since(started)
			}
		case <-timer.C:
			timedOut = &steps[cur]
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			running = false
		}
	}
	werr := <-done
	for n, s := range steps {
		d, ok := finished[n]
		if !ok {
			break
		}
		t.Logf("%s:%d: %.1f s: %s", page, s.cmd.Line, d.Seconds(), firstLine(s.cmd.Text))
	}
	if timedOut != nil {
		t.Fatalf("%s:%d: over its budget of %s: %s\n%s", page, timedOut.cmd.Line, timedOut.budget, timedOut.cmd.Text, tail(outs, cur))
	}
	if werr != nil || len(finished) < len(steps) {
		n := len(finished)
		if n < len(steps) {
			s := steps[n]
			t.Fatalf("%s:%d: failed (%v): %s\n%s%s", page, s.cmd.Line, werr, s.cmd.Text, tail(outs, n), shellErr.String())
		}
		t.Fatalf("%s: the shell failed after its last command (%v): %s", page, werr, shellErr.String())
	}
	for _, e := range expect {
		require.GreaterOrEqual(t, e.after, 0)
		got, err := os.ReadFile(filepath.Join(outs, strconv.Itoa(e.after)+".out"))
		require.NoError(t, err)
		require.Equal(t, strings.TrimRight(e.block.Text, "\n"), strings.TrimRight(string(got), "\n"),
			"%s:%d: the output shown is not what %s prints", page, e.block.Line, firstLine(steps[e.after].cmd.Text))
	}
	checkIgnored(t, copyDir, files, page)
}

// withoutComment is a one-line command without its trailing comment.
func withoutComment(s string) string {
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// tail is the end of step n's stderr and stdout.
func tail(outs string, n int) string {
	var b strings.Builder
	for _, ext := range []string{".err", ".out"} {
		data, _ := os.ReadFile(filepath.Join(outs, strconv.Itoa(n)+ext))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", ext[1:], data)
	}
	return b.String()
}

// checkIgnored: every file or folder the page's commands made in the
// copy is ignored by .gitignore, so that a reader following the page
// commits none of it.
func checkIgnored(t *testing.T, copyDir string, files []string, page string) {
	t.Helper()
	had := map[string]bool{".git": true}
	for _, f := range files {
		for p := f; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
			had[p] = true
		}
	}
	var made []string
	require.NoError(t, filepath.WalkDir(copyDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(copyDir, path)
		rel = filepath.ToSlash(rel)
		if rel == "." || had[rel] {
			return nil
		}
		made = append(made, rel)
		if d.IsDir() {
			return filepath.SkipDir // the folder is what is ignored or not
		}
		return nil
	}))
	if len(made) == 0 {
		return
	}
	sort.Strings(made)
	git := exec.Command("git", "init", "-q")
	git.Dir = copyDir
	require.NoError(t, git.Run())
	check := exec.Command("git", "check-ignore", "--no-index", "--stdin", "-n", "-v")
	check.Dir = copyDir
	check.Stdin = strings.NewReader(strings.Join(made, "\n") + "\n")
	out, _ := check.Output() // status 1 when nothing is ignored
	var notIgnored []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// "::\tPATH" is a path no pattern matches.
		if p, ok := strings.CutPrefix(line, "::\t"); ok {
			notIgnored = append(notIgnored, p)
		}
	}
	require.Empty(t, notIgnored, "%s's commands write these into the repository, and .gitignore does not ignore them", page)
}
