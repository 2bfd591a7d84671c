package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/pqread"
)

// setFooterRows rewrites the footer's num_rows of a Parquet file (a field
// header 0x16 and a zigzag varint) in place, keeping its length: the
// damage a hardening review reported, one footer byte changed so that the count
// reads -1 or huge.
func setFooterRows(t *testing.T, path string, neg bool) {
	t.Helper()
	f, err := pqread.Open(path)
	require.NoError(t, err)
	rows := f.NumRows()
	f.Close()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	n := len(data)
	flen := int(binary.LittleEndian.Uint32(data[n-8 : n-4]))
	footer := data[n-8-flen : n-8]
	enc := binary.AppendUvarint([]byte{0x16}, uint64(rows)<<1)
	i := bytes.Index(footer, enc)
	require.GreaterOrEqual(t, i, 0, "%s: num_rows not found in the footer", path)
	v := footer[i+1 : i+len(enc)]
	if neg {
		// Zigzag 1 is -1, spelled in as many varint bytes.
		for k := range v {
			v[k] = 0x80
		}
		v[0], v[len(v)-1] = 0x81, 0
		if len(v) == 1 {
			v[0] = 0x01
		}
	} else {
		v[len(v)-1] = 0x7f // the top group: a huge count
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// A footer row count damaged to -1 or a huge number
// panicked (makeslice: cap out of range) in calibrate fit and calibrate
// predict --tables. Both fail naming the file.
func TestDamagedTablesAreRefused(t *testing.T) {
	tables := simTables(t, 3)
	coeffs := filepath.Join("..", "..", "coefficients", "shipped", "llama-3.1-8b_h100-sxm_tp1.yaml")
	for _, table := range []string{"steps", "request_snapshots", "requests"} {
		for _, neg := range []bool{true, false} {
			dir := t.TempDir()
			for _, name := range []string{"steps", "request_snapshots", "requests", "journey_events", "kv_events"} {
				data, err := os.ReadFile(filepath.Join(tables, name+".parquet"))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name+".parquet"), data, 0o644))
			}
			bad := filepath.Join(dir, table+".parquet")
			setFooterRows(t, bad, neg)
			for _, args := range [][]string{
				{"fit", dir, "-q", "-o", filepath.Join(t.TempDir(), "c.yaml")},
				{"predict", "--coefficients", coeffs, "--tables", dir},
			} {
				_, err := run(t, args...)
				require.ErrorContains(t, err, bad+": corrupt Parquet file: footer says", "%v", args)
			}
		}
	}
}
