//go:build unix

package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// openable checks that the stream dest (a FIFO or a character device) may
// be opened for writing, without opening it: opening a FIFO that a reader
// waits on would hand that reader an empty stream.
func openable(o Named, dest string) error {
	if err := syscall.Access(dest, 2 /* W_OK */); err != nil {
		return fmt.Errorf("%s %s: %w", o.Label, o.Path, &os.PathError{Op: "access", Path: dest, Err: err})
	}
	return nil
}

// Lock takes an exclusive advisory lock (flock) on path's lock file, a
// hidden ".NAME.lock" beside it, for as long as the command writes path;
// unlock releases it and removes the file. A second command locking the
// same path while the first holds it is refused at once with an error
// naming label, path and what holds it (holder, "another blis sweep").
// A stream (Stream) is not locked: nothing is renamed over it. The lock
// is the kernel's: it is released when the process ends, however it ends.
func Lock(path, label, holder string) (unlock func(), err error) {
	dest, stream, err := destination(path, label)
	if err != nil {
		return nil, err
	}
	if stream {
		return func() {}, nil
	}
	dir, base := filepath.Split(dest)
	lock := filepath.Join(dir, "."+base+".lock")
	for range 100 {
		f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, Mode)
		if err != nil {
			return nil, fmt.Errorf("%s %s: its lock file: %w", label, path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s %s: %s is writing it (it holds %s); wait for it to end or give another path", label, path, holder, lock)
			}
			return nil, fmt.Errorf("%s %s: locking %s: %w", label, path, lock, err)
		}
		// The holder before us may have removed the file between our open
		// and our lock: then the lock is on a file nobody else sees.
		a, errA := f.Stat()
		b, errB := os.Stat(lock)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return func() {
				os.Remove(lock)
				f.Close()
			}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%s %s: could not lock %s", label, path, lock)
}
