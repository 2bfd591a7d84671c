// Package profiling writes a command's pprof files, --cpuprofile and
// --memprofile (the Go toolchain's convention, as go test -cpuprofile
// writes them), read with go tool pprof.
package profiling

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/internal/atomicfile"
)

// Profiles are a run's --cpuprofile and --memprofile: pprof files of the
// process. Each is written through a temporary file
// in its folder (internal/atomicfile), opened before the run starts, so a
// path that cannot be written fails before any work, and renamed into
// place once the run printed its report, a partial one (Ctrl-C) included:
// the profile of an interrupted slow run is what its user wants to read.
// A run that fails without a report writes neither.
type Profiles struct {
	cpu, mem *atomicfile.File
}

// Targets are the profiles' outputs, for the run's check of its files (an
// output over an input or over another output is refused).
func Targets(cpu, mem string) []atomicfile.Named {
	return []atomicfile.Named{{Label: "--cpuprofile", Path: cpu}, {Label: "--memprofile", Path: mem}}
}

// checkPath refuses a profile path that exists and is not a regular
// file: a FIFO, a device or a socket would be replaced by the renamed
// temporary file (a folder is refused by the run's check, naming it).
func checkPath(label, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode().IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch m := st.Mode(); {
	case m&os.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&os.ModeDevice != 0:
		kind = "a device"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Errorf("%s %s is %s, which the profile would replace: a profile is written to a new file renamed into place; give a file path", label, path, kind)
}

// Start opens the profiles' files (cpu or mem "": none) and starts the
// CPU profile, after checkFiles (the run's check of its outputs, which
// must refuse these beside its own: an input, another output, a folder)
// and its own refusal of paths that are not regular files.
func Start(cpu, mem string, checkFiles func(extra ...atomicfile.Named) error) (*Profiles, error) {
	p := &Profiles{}
	for _, t := range Targets(cpu, mem) {
		if err := checkPath(t.Label, t.Path); err != nil {
			return nil, err
		}
	}
	if err := checkFiles(Targets(cpu, mem)...); err != nil {
		return nil, err
	}
	var err error
	if cpu != "" {
		if p.cpu, err = atomicfile.Create(cpu, "--cpuprofile"); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(p.cpu); err != nil {
			p.Abort()
			return nil, fmt.Errorf("--cpuprofile %s: %w", cpu, err)
		}
	}
	if mem != "" {
		if p.mem, err = atomicfile.Create(mem, "--memprofile"); err != nil {
			p.Abort()
			return nil, err
		}
	}
	return p, nil
}

// AddFlags defines --cpuprofile and --memprofile on f.
func AddFlags(f *pflag.FlagSet, cpu, mem *string) {
	f.StringVar(cpu, "cpuprofile", "", "write a CPU profile of the run to FILE (pprof format: go tool pprof FILE), also when Ctrl-C ends the run")
	f.StringVar(mem, "memprofile", "", "write a heap profile at the run's end to FILE (pprof format: go tool pprof FILE; -sample_index=alloc_space for every allocation)")
}

// Finish commits the profiles when the run printed a report (keep), else
// discards them.
func (p *Profiles) Finish(keep bool) error {
	if !keep {
		p.Abort()
		return nil
	}
	return p.Commit()
}

// Abort stops the CPU profile and discards both files.
func (p *Profiles) Abort() {
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Abort()
	}
	if p.mem != nil {
		p.mem.Abort()
	}
}

// Commit stops the CPU profile, writes the heap profile (after a garbage
// collection, as go test -memprofile does: the memory the run still holds
// at its end, and every allocation it made with -sample_index=alloc_space)
// and renames both into place.
func (p *Profiles) Commit() error {
	defer p.Abort() // whatever was not committed
	if p.cpu != nil {
		pprof.StopCPUProfile()
		if err := p.cpu.Commit(); err != nil {
			return err
		}
	}
	if p.mem != nil {
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(p.mem, 0); err != nil {
			return fmt.Errorf("--memprofile %s: %w", p.mem.Path(), err)
		}
		if err := p.mem.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Interrupted is err, the message of a run Ctrl-C ended ("no output file
// was written"), naming the profiles it wrote all the same.
func (p *Profiles) Interrupted(err error) error {
	var kept []string
	if p.cpu != nil {
		kept = append(kept, "--cpuprofile "+p.cpu.Path())
	}
	if p.mem != nil {
		kept = append(kept, "--memprofile "+p.mem.Path())
	}
	if len(kept) == 0 {
		return err
	}
	return fmt.Errorf("%w, but for the profiles (%s)", err, strings.Join(kept, ", "))
}
