//go:build !unix

package atomicfile

import (
	"fmt"
	"os"
)

// openable checks that the stream dest can be opened for writing.
func openable(o Named, dest string) error {
	f, err := os.OpenFile(dest, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.Label, o.Path, err)
	}
	return f.Close()
}

// Lock does nothing where flock is not available: a second writer is not
// refused.
func Lock(path, label, holder string) (unlock func(), err error) {
	return func() {}, nil
}
