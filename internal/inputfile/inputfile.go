// Package inputfile reads a user's configuration file whole (an
// experiment, deployment, policy, workload spec, grid, host profile,
// coefficient, model or hardware file), with a bound. The path may name a
// pipe (--config <(...)) or a device, so it cannot be refused for not
// being a regular file; without the bound /dev/zero, or a FIFO fed
// forever, was read until memory ran out (11 GB in 12 minutes for
// --replay /dev/zero, deaf to SIGTERM).
package inputfile

import (
	"fmt"
	"io"
	"os"
)

// MaxBytes bounds a configuration file: the largest the project ships is
// a few KB.
const MaxBytes = 64 << 20

// Read is os.ReadFile refusing more than MaxBytes, naming the path.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: more than %d MiB: a configuration file is text of a few KB (is it the right file?)", path, MaxBytes>>20)
	}
	return data, nil
}

// Open opens a data file (a trace to replay, engine counters, a sweep's
// table) that is read to its end, refusing a device or a pipe: /dev/zero
// has no end and filled memory (9 GB within three minutes for --counters), as
// blis validate already refuses one for its records.
func Open(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := Special(path, st, "give the file itself"); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Special refuses a data file that is neither a regular file nor a
// folder (st is path's): a device or a pipe has no end to read to. hint
// says what to give instead.
func Special(path string, st os.FileInfo, hint string) error {
	if st.Mode().IsRegular() || st.IsDir() {
		return nil
	}
	return fmt.Errorf("%s is not a regular file (%s): %s (a device or a pipe has no end to read to)", path, st.Mode().Type(), hint)
}
