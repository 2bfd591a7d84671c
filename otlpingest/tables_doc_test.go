package otlpingest

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

const tablesDoc = "../docs/ingest-tables.md"

// renderTablesDoc lists every table's columns from the code that writes
// them, so that the reference cannot drift from the Parquet files.
func renderTablesDoc() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Ingest tables, schema version %d\n\n", SchemaVersion)
	b.WriteString("Generated from `otlpingest/tables.go` by `go test ./otlpingest -run TestTablesDocUpToDate -update`; do not edit by hand.\n")
	b.WriteString("Attribute columns are named after the attribute key with `.` replaced by `_`. Times named `*_wall_ns` and `time_unix_nano` are Unix nanoseconds; `*_mono_*` are the host's monotonic clock.\n")
	for _, name := range TableNames {
		fmt.Fprintf(&b, "\n## %s\n\n| column | type | nullable | meaning |\n|---|---|---|---|\n", name)
		for _, c := range TableColumns(name) {
			null := "no"
			if c.Nullable {
				null = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Name, c.Type, null, c.Doc)
		}
	}
	return b.Bytes()
}

func TestTablesDocUpToDate(t *testing.T) {
	want := renderTablesDoc()
	if *update {
		require.NoError(t, os.WriteFile(tablesDoc, want, 0o644))
		return
	}
	got, err := os.ReadFile(tablesDoc)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s is stale; run: go test ./otlpingest -run TestTablesDocUpToDate -update", tablesDoc)
}
