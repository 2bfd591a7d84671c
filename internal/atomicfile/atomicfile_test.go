package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAbortKeepsEarlierFile: an output is written to a temporary file beside
// its path and renamed over it only on commit; an aborted one (a failed
// run) leaves the earlier file whole and no temporary file behind.
func TestAbortKeepsEarlierFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("earlier trace\n"), 0o644))
	f, err := Create(path, "--otlp-trace")
	require.NoError(t, err)
	_, err = f.WriteString("half a new trace")
	require.NoError(t, err)
	f.Abort()
	require.Equal(t, "earlier trace\n", string(must(os.ReadFile(path))))
	require.Len(t, must(os.ReadDir(dir)), 1, "no temporary file is left behind")

	f, err = Create(path, "--otlp-trace")
	require.NoError(t, err)
	_, err = f.WriteString("new trace\n")
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	f.Abort() // after a commit, a no-op
	require.Equal(t, "new trace\n", string(must(os.ReadFile(path))))
	st := must(os.Stat(path))
	require.NotZero(t, st.Mode().Perm()&0o044, "readable by others as os.WriteFile(0644) made it (umask permitting), not CreateTemp's 0600")

	_, err = Create(filepath.Join(dir, "no", "such", "dir.jsonl"), "--otlp-trace")
	require.ErrorContains(t, err, "--otlp-trace "+filepath.Join(dir, "no", "such", "dir.jsonl"))
	require.ErrorContains(t, WriteFile(filepath.Join(dir, "no", "x"), "-o", nil), "-o ")
}

// TestGroup: a group's outputs appear together on Commit, and none of them
// on Abort.
func TestGroup(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("old a"), 0o644))
	var g Group
	require.NoError(t, g.WriteFile(a, "-o", []byte("new a")))
	require.NoError(t, g.WriteFile(b, "--report", []byte("new b")))
	g.Abort()
	require.Equal(t, "old a", string(must(os.ReadFile(a))))
	require.NoFileExists(t, b)
	require.Len(t, must(os.ReadDir(dir)), 1)

	require.NoError(t, g.WriteFile(a, "-o", []byte("new a")))
	require.NoError(t, g.WriteFile(b, "--report", []byte("new b")))
	require.NoError(t, g.Commit())
	g.Abort()
	require.Equal(t, "new a", string(must(os.ReadFile(a))))
	require.Equal(t, "new b", string(must(os.ReadFile(b))))
	require.Len(t, must(os.ReadDir(dir)), 2)
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.csv")
	require.NoError(t, os.WriteFile(in, []byte("input"), 0o644))
	hard := filepath.Join(dir, "hard.csv")
	require.NoError(t, os.Link(in, hard))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(dir, link))
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	tables := filepath.Join(dir, "tables")
	require.NoError(t, os.Mkdir(tables, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tables, "steps.parquet"), nil, 0o644))
	wd := must(os.Getwd())
	rel := must(filepath.Rel(wd, in))

	inputs := append([]Named{{Label: "--replay", Path: in}}, DirInputs("TABLES_DIR", tables)...)
	for _, c := range []struct {
		name    string
		outputs []Named
		want    string // "" for no error
	}{
		{"distinct", []Named{{Label: "--otlp-trace", Path: filepath.Join(dir, "t.jsonl")}, {Label: "--kv-events", Path: filepath.Join(dir, "kv.jsonl")}}, ""},
		{"unset outputs are ignored", []Named{{Label: "--otlp-trace", Path: ""}, {Label: "--kv-events", Path: ""}}, ""},
		{"a new file in an input folder", []Named{{Label: "-o", Path: filepath.Join(tables, "coeffs.yaml")}}, ""},
		{"output is the input", []Named{{Label: "--otlp-trace", Path: in}}, "--otlp-trace " + in + " is also the input --replay " + in},
		{"spelled differently", []Named{{Label: "--otlp-trace", Path: filepath.Join(dir, "sub", "..", ".", "x.csv")}}, "is also the input --replay"},
		{"relative", []Named{{Label: "--otlp-trace", Path: rel}}, "is also the input --replay"},
		{"through a symbolic link", []Named{{Label: "--otlp-trace", Path: filepath.Join(link, "x.csv")}}, "is also the input --replay"},
		{"a hard link", []Named{{Label: "--otlp-trace", Path: hard}}, "is also the input --replay"},
		{"a file of an input folder", []Named{{Label: "-o", Path: filepath.Join(tables, "steps.parquet")}}, "is also the input TABLES_DIR"},
		{"two outputs", []Named{{Label: "--otlp-trace", Path: filepath.Join(dir, "f")}, {Label: "--kv-events", Path: filepath.Join(dir, "f")}},
			"--kv-events " + filepath.Join(dir, "f") + " is also the output --otlp-trace"},
		{"two outputs, one through a link", []Named{{Label: "--otlp-trace", Path: filepath.Join(dir, "f")}, {Label: "--kv-events", Path: filepath.Join(link, "f")}},
			"is also the output --otlp-trace"},
		{"a directory", []Named{{Label: "--plot", Path: sub}}, "--plot " + sub + " is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(inputs, c.outputs)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
