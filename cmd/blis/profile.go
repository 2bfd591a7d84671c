package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/blis-sim/blis/internal/atomicfile"
)

// profiles are blis run's --cpuprofile and --memprofile: pprof files of the
// process (the Go toolchain's convention, as go test -cpuprofile writes
// them), read with go tool pprof. Each is written through a temporary file
// in its folder (internal/atomicfile), opened before the run starts, so a
// path that cannot be written fails before any work, and renamed into
// place once the run printed its report, a partial one (Ctrl-C) included:
// the profile of an interrupted slow run is what its user wants to read.
// A run that fails without a report writes neither.
type profiles struct {
	cpu, mem *atomicfile.File
}

// profileTargets are the profile flags' outputs, for the run's check of its
// files (an output over an input or over another output is refused).
func profileTargets(o *runFlags) []atomicfile.Named {
	return []atomicfile.Named{{Label: "--cpuprofile", Path: o.cpuProfile}, {Label: "--memprofile", Path: o.memProfile}}
}

// checkProfilePath refuses a profile path that exists and is not a regular
// file: a FIFO, a device or a socket would be replaced by the renamed
// temporary file (a folder is refused by the run's check, naming it).
func checkProfilePath(label, path string) error {
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

// startProfiles opens the profiles' files and starts the CPU profile.
func startProfiles(o *runFlags) (*profiles, error) {
	p := &profiles{}
	for _, t := range profileTargets(o) {
		if err := checkProfilePath(t.Label, t.Path); err != nil {
			return nil, err
		}
	}
	var err error
	if o.cpuProfile != "" {
		if p.cpu, err = atomicfile.Create(o.cpuProfile, "--cpuprofile"); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(p.cpu); err != nil {
			p.abort()
			return nil, fmt.Errorf("--cpuprofile %s: %w", o.cpuProfile, err)
		}
	}
	if o.memProfile != "" {
		if p.mem, err = atomicfile.Create(o.memProfile, "--memprofile"); err != nil {
			p.abort()
			return nil, err
		}
	}
	return p, nil
}

// abort stops the CPU profile and discards both files.
func (p *profiles) abort() {
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Abort()
	}
	if p.mem != nil {
		p.mem.Abort()
	}
}

// commit stops the CPU profile, writes the heap profile (after a garbage
// collection, as go test -memprofile does: the memory the run still holds
// at its end, and every allocation it made with -sample_index=alloc_space)
// and renames both into place.
func (p *profiles) commit() error {
	defer p.abort() // whatever was not committed
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
