package experiment

import (
	"bytes"
	"fmt"
	"io"

	"github.com/blis-sim/blis/internal/atomicfile"
)

// Sinks are where a run's output files go (the experiment's
// run.outputs). Run creates every output before the simulation starts,
// so that an unwritable path fails at once; it calls Commit when the run
// succeeded and Abort when it failed or was cancelled, so that no partial
// output is ever left where the experiment said.
type Sinks interface {
	// Create opens the output at key (run.outputs.otlp_trace, ...) for
	// path.
	Create(key, path string) (io.Writer, error)
	Commit() error
	Abort()
}

// FileSinks writes each output to a temporary file beside its path and
// renames them all into place on Commit (internal/atomicfile). Label
// names an output in errors (a flag, in blis run); nil names it by key.
type FileSinks struct {
	Label func(key string) string
	g     atomicfile.Group
}

func (s *FileSinks) Create(key, path string) (io.Writer, error) {
	label := key
	if s.Label != nil {
		label = s.Label(key)
	}
	return s.g.Create(path, label)
}

func (s *FileSinks) Commit() error { return s.g.Commit() }
func (s *FileSinks) Abort()        { s.g.Abort() }

// MemSinks keeps outputs in memory, by key: for callers that want the
// decision trace or the windows without files. Committed says whether
// the run that wrote them finished.
type MemSinks struct {
	Files     map[string]*bytes.Buffer
	Committed bool
}

func (s *MemSinks) Create(key, path string) (io.Writer, error) {
	if s.Files == nil {
		s.Files = map[string]*bytes.Buffer{}
	}
	if _, ok := s.Files[key]; ok {
		return nil, fmt.Errorf("%s: created twice", key)
	}
	b := &bytes.Buffer{}
	s.Files[key] = b
	return b, nil
}

func (s *MemSinks) Commit() error { s.Committed = true; return nil }
func (s *MemSinks) Abort()        { s.Files = nil }
