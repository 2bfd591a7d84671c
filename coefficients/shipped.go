package coefficients

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"sync"

	"github.com/blis-sim/blis/physics"
)

// The shipped files are produced by scripts/make-shipped-coefficients.sh;
// each one's provenance says how.
//
//go:embed shipped
var shippedFS embed.FS

// ShippedFile is one coefficient file built into the binary.
type ShippedFile struct {
	Name string // e.g. shipped/llama-3.1-8b_h100-sxm_tp1.yaml
	File *File
}

// Shipped returns the built-in coefficient files, sorted by name. A file
// that fails to parse is a build defect and panics (a test parses them all).
// They are parsed once per process (a sweep resolves every point, each
// looking them up) and shared: read them, never change them.
func Shipped() []ShippedFile { return slices.Clone(shipped()) }

var shipped = sync.OnceValue(func() []ShippedFile {
	names, err := fs.Glob(shippedFS, "shipped/*.yaml")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	out := make([]ShippedFile, 0, len(names))
	for _, n := range names {
		data, err := shippedFS.ReadFile(n)
		if err != nil {
			panic(err)
		}
		f, err := Parse(data, path.Join("coefficients", n))
		if err != nil {
			panic(fmt.Sprintf("shipped coefficient file: %v", err))
		}
		out = append(out, ShippedFile{Name: n, File: f})
	}
	return out
})

// FindShipped returns the first shipped file fitted on the configuration
// (Check gives neither a warning nor an error), or nil: a shipped file is
// used without being asked for only where it was fitted.
func FindShipped(pc *physics.PhysicsConfig) *ShippedFile {
	for _, s := range shipped() {
		if w, err := s.File.Check(pc); err == nil && len(w) == 0 {
			f := *s.File // the caller's copy; its slices stay shared, read-only
			return &ShippedFile{Name: s.Name, File: &f}
		}
	}
	return nil
}
