package main

import (
	"os/exec"
	"strings"
	"testing"
)

// blis must not link gRPC, Arrow Flight or genproto (issue 18: they were
// 70 of the 514 packages a first `go run ./cmd/blis` compiled, pulled in by
// pqarrow and the OTLP collector service's package, and doubled the
// binary). blis reads Parquet with parquet/file (internal/pqread); test
// files may still use pqarrow. calibrate still writes its tables through
// pqarrow (otlpingest), so it still links them.
func TestNoGRPCOrFlightDependency(t *testing.T) {
	// go test puts its own go command first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/", "google.golang.org/genproto", "arrow/go/v17/arrow/flight", "arrow/go/v17/parquet/pqarrow"} {
			if strings.Contains(p, bad) {
				t.Errorf("blis depends on %s", p)
			}
		}
	}
}
