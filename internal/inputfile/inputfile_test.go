package inputfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.yaml")
	require.NoError(t, os.WriteFile(p, []byte("version: 1\n"), 0o644))
	data, err := Read(p)
	require.NoError(t, err)
	require.Equal(t, "version: 1\n", string(data))
	_, err = Read(filepath.Join(dir, "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = Read(dir)
	require.ErrorContains(t, err, "is a directory")
	// An endless device stops at the bound instead of filling memory.
	_, err = Read("/dev/zero")
	require.EqualError(t, err, "/dev/zero: more than 64 MiB: a configuration file is text of a few KB (is it the right file?)")
}
