package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// blis must not link gRPC, Arrow Flight or genproto (they were
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

// blis is flags, signals, progress and printing: the simulation, the
// replay and the assembly of an experiment live in the library
// (ARCHITECTURE.md), so the command imports no cluster, deploy or sim and
// stays within 800 lines of Go.
func TestThinCommand(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"/cluster", "/deploy", "/sim"} {
			if strings.HasSuffix(p, "/blis"+bad) || strings.Contains(p, "/blis"+bad+"/") {
				t.Errorf("blis imports %s", p)
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(data), "\n")
	}
	if lines > 800 {
		t.Errorf("cmd/blis has %d lines of Go (tests aside); at most 800: move what is not flags, signals, progress or printing into the library", lines)
	}
}
