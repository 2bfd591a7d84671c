package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// atomicFile is an output written to a temporary file in the destination's
// folder and renamed over it only when the run succeeds, so that a failed
// run never leaves a truncated file or destroys an existing one.
type atomicFile struct {
	*os.File
	path, flag string
	done       bool
}

func createAtomic(path, flag string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &atomicFile{File: f, path: path, flag: flag}, nil
}

// commit closes the file and renames it into place.
func (f *atomicFile) commit() error {
	if f.done {
		return nil
	}
	f.done = true
	if err := f.File.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: %w", f.flag, err)
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: %w", f.flag, err)
	}
	return nil
}

// abort discards the file unless it was committed.
func (f *atomicFile) abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}
