// Package atomicfile writes the outputs of blis and calibrate so that a
// failed run never truncates or destroys a file: every output is written to
// a hidden temporary file in its destination's folder (".NAME.tmp-RANDOM")
// and renamed over the destination only when the run succeeds. A run that
// fails removes its temporary files and leaves every earlier output as it
// was.
//
// Check refuses, before a run starts, an output path that is one of the
// run's inputs or another of its outputs: paths are compared cleaned and
// absolute, with symbolic links of existing folders resolved, and with
// os.SameFile when both exist (hard links).
//
// The files are created with mode 0644 (before the umask), the mode the
// tools used with os.WriteFile. They are not fsynced: the guarantee is
// against a failed run, not against a power loss.
//
// An output path that names a stream rather than a file, a named pipe
// (FIFO) or a character device (/dev/null, a terminal), is never renamed
// over: the temporary file is made in the system's temporary folder and,
// on Commit, its bytes are written into the stream (opened for writing,
// which waits for a reader of a FIFO), so the node stays what it was and a
// failed run writes nothing into it. Any other node that is not a regular
// file (a socket, a block device) is refused, naming the output. A path
// that is a symbolic link is written through: the file it points to is
// replaced, and the link kept.
//
// Lock takes an advisory lock for an output a long command rewrites
// (blis sweep's table, checkpointed as it runs), refusing a second writer.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// live is every temporary file not yet committed or aborted, so that
// RemoveTemporaries can remove them when the process is stopped.
var live struct {
	sync.Mutex
	m      map[string]bool
	closed bool // RemoveTemporaries ran: no more commits
}

func register(tmp string) {
	live.Lock()
	defer live.Unlock()
	if live.m == nil {
		live.m = map[string]bool{}
	}
	live.m[tmp] = true
}

// ErrStopped is Create's and Commit's error once RemoveTemporaries ran.
var ErrStopped = errors.New("stopped by a signal")

// RemoveTemporaries removes every temporary file not yet committed and
// keeps any from being created or committed after: what a process stopped
// by a signal calls before it exits, so that it leaves no hidden
// ".NAME.tmp-N" behind and commits nothing half written.
func RemoveTemporaries() {
	live.Lock()
	defer live.Unlock()
	live.closed = true
	for tmp := range live.m {
		os.Remove(tmp)
	}
	live.m = nil
}

// ExitOnSignal makes SIGINT and SIGTERM remove the temporaries
// (RemoveTemporaries), say so on stderr as "prog: ..." and exit with the
// shell's status for the signal (130, 143). It is for commands that do not
// stop cleanly on cancellation themselves; stop undoes it.
func ExitOnSignal(prog string, stderr io.Writer) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			RemoveTemporaries()
			fmt.Fprintf(stderr, "%s: stopped by %v: outputs not yet written are not written, and no temporary file is left\n", prog, sig)
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// Mode is the permission of a new output, before the umask.
const Mode = 0o644

// File is one output being written. Write to it (it is an *os.File), then
// Commit, or Abort to discard it; Abort after Commit does nothing, so
// `defer f.Abort()` is the usual pattern.
type File struct {
	*os.File
	path, label string
	dest        string // path, its symbolic links resolved
	done        bool
}

// Create opens a temporary file for path in path's folder (in the
// system's temporary folder when path is a stream: a FIFO or a character
// device). label names the output in errors (a flag, such as
// "--otlp-trace").
func Create(path, label string) (*File, error) {
	dest, stream, err := destination(path, label)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	if stream {
		dir = os.TempDir()
	}
	for range 100 {
		tmp := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64()%1e12, 10))
		live.Lock()
		if live.closed {
			live.Unlock()
			return nil, fmt.Errorf("%s %s: %w", label, path, ErrStopped)
		}
		var f *os.File
		f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, Mode)
		live.Unlock()
		if err == nil {
			register(tmp)
			return &File{File: f, path: path, dest: dest, label: label}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	return nil, fmt.Errorf("%s %s: %w", label, path, err)
}

// Path is the destination.
func (f *File) Path() string { return f.path }

// Commit closes the file and renames it over its destination.
func (f *File) Commit() error {
	if f.done {
		return nil
	}
	f.done = true
	live.Lock()
	defer live.Unlock()
	delete(live.m, f.Name())
	if live.closed {
		f.File.Close()
		os.Remove(f.Name())
		return fmt.Errorf("%s %s: %w", f.label, f.path, ErrStopped)
	}
	defer os.Remove(f.Name())
	if err := f.File.Close(); err != nil {
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	// What the destination is now decides: a stream made since Create is
	// written into too.
	if _, stream, err := destination(f.dest, f.label); err != nil {
		return err
	} else if stream {
		return f.pour()
	}
	if err := os.Rename(f.Name(), f.dest); err != nil {
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	return nil
}

// pour writes the temporary file's bytes into the stream at the
// destination.
func (f *File) pour() error {
	src, err := os.Open(f.Name())
	if err != nil {
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	defer src.Close()
	dst, err := os.OpenFile(f.dest, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("%s %s: %w", f.label, f.path, err)
	}
	return nil
}

// destination is where path's bytes go: path with its symbolic links
// resolved (when they resolve), and whether it is a stream written into
// rather than a file renamed over. A node that is neither is refused.
func destination(path, label string) (dest string, stream bool, err error) {
	dest = path
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			dest = r
		}
	}
	st, err := os.Stat(dest)
	if err != nil {
		return dest, false, nil // a new file (or an error Create reports)
	}
	m := st.Mode()
	switch {
	case m.IsRegular():
		return dest, false, nil
	case m&os.ModeNamedPipe != 0, m&os.ModeCharDevice != 0:
		return dest, true, nil
	}
	return dest, false, fmt.Errorf("%s %s is %s: an output is a regular file (written through a temporary file renamed into place), a named pipe or a character device (written into)", label, path, kindOf(m))
}

// kindOf names a node that is not a regular file.
func kindOf(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	}
	return "not a regular file"
}

// Stream reports whether path is a named pipe or a character device, an
// output written into once on Commit rather than renamed over: a command
// that writes an output several times (checkpoints) writes a stream once.
func Stream(path string) bool {
	_, stream, err := destination(path, "")
	return err == nil && stream
}

// Abort discards the file unless it was committed.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
	live.Lock()
	delete(live.m, f.Name())
	live.Unlock()
}

// WriteFile writes data to path through a temporary file.
func WriteFile(path, label string, data []byte) error {
	f, err := Create(path, label)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%s %s: %w", label, path, err)
	}
	return f.Commit()
}

// Group is the outputs of one run, committed together at its end. Its zero
// value is ready to use.
type Group struct {
	files []*File
}

// Create opens an output of the group.
func (g *Group) Create(path, label string) (*File, error) {
	f, err := Create(path, label)
	if err != nil {
		return nil, err
	}
	g.files = append(g.files, f)
	return f, nil
}

// WriteFile adds an output with the given content.
func (g *Group) WriteFile(path, label string, data []byte) error {
	f, err := g.Create(path, label)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%s %s: %w", label, path, err)
	}
	return nil
}

// Commit renames every output into place, in the order created. After the
// first failure the remaining ones are discarded.
func (g *Group) Commit() error {
	for i, f := range g.files {
		if err := f.Commit(); err != nil {
			for _, r := range g.files[i+1:] {
				r.Abort()
			}
			g.files = nil
			return err
		}
	}
	g.files = nil
	return nil
}

// Abort discards every output not committed yet.
func (g *Group) Abort() {
	for _, f := range g.files {
		f.Abort()
	}
	g.files = nil
}

// Named is a path and what names it in errors (a flag or an argument).
// MadeDir says the command creates the output's folder before writing it
// (calibrate ingest -o, fit --report): Check then needs only a writable
// ancestor.
type Named struct {
	Label, Path string
	MadeDir     bool
}

// writable checks, before any work, that o can be written: its folder
// exists (or, with MadeDir, its nearest existing ancestor) and is a folder
// where a file can be created, probed by creating and removing one. A
// run that would fail at its end for want of a folder fails at its start.
func writable(o Named) error {
	dest, stream, err := destination(o.Path, o.Label)
	if err != nil {
		return err
	}
	if stream {
		return openable(o, dest)
	}
	dir := filepath.Dir(dest)
	anc := dir
	for {
		st, err := os.Stat(anc)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s %s: %s is not a folder", o.Label, o.Path, anc)
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s %s: %w", o.Label, o.Path, err)
		}
		up := filepath.Dir(anc)
		if up == anc {
			break
		}
		anc = up
	}
	if anc != dir && !o.MadeDir {
		return fmt.Errorf("%s %s: the folder %s does not exist", o.Label, o.Path, dir)
	}
	f, err := os.CreateTemp(anc, ".blis-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", o.Label, o.Path, anc, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// DirInputs are the regular files directly inside dir, each an input named
// label: what a run that reads a folder reads. A missing or unreadable
// folder gives none (the run reports it).
func DirInputs(label, dir string) []Named {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Named
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, Named{Label: label, Path: filepath.Join(dir, e.Name())})
		}
	}
	return out
}

// Check refuses an output (empty paths are ignored) that is an existing
// folder, one of the inputs, or another output. Inputs that do not exist
// are ignored (nothing to destroy; the run reports them), so that a shipped
// name given where a path may be ("llama-3.1-8b") is not taken for a file.
// It is called before a run starts, so that nothing is computed for a run
// that cannot write.
func Check(inputs, outputs []Named) error {
	type key struct {
		Named
		canon string
		info  os.FileInfo
	}
	mk := func(n Named) key {
		k := key{Named: n, canon: canonical(n.Path)}
		k.info, _ = os.Stat(n.Path)
		return k
	}
	same := func(a, b key) bool {
		return a.canon == b.canon || (a.info != nil && b.info != nil && os.SameFile(a.info, b.info))
	}
	var ins []key
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		if k := mk(in); k.info != nil {
			ins = append(ins, k)
		}
	}
	var outs []key
	for _, o := range outputs {
		if o.Path == "" {
			continue
		}
		k := mk(o)
		if k.info != nil && k.info.IsDir() {
			return fmt.Errorf("%s %s is a directory; give a file name", o.Label, o.Path)
		}
		for _, in := range ins {
			if same(k, in) {
				return fmt.Errorf("%s %s is also the input %s %s: an output is never written over an input; give another path", o.Label, o.Path, in.Label, in.Path)
			}
		}
		for _, prev := range outs {
			if same(k, prev) {
				return fmt.Errorf("%s %s is also the output %s %s: give each output its own path", o.Label, o.Path, prev.Label, prev.Path)
			}
		}
		outs = append(outs, k)
	}
	// Then that each can be written (after the clashes, which say more).
	for _, o := range outs {
		if err := writable(o.Named); err != nil {
			return err
		}
	}
	return nil
}

// canonical is path absolute and clean, with the symbolic links of its
// existing part resolved.
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	dir, base := filepath.Split(abs)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return abs
}
