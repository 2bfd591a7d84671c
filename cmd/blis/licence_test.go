package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLicenceAndNotice: the repository carries the Apache-2.0 licence in
// full and a NOTICE naming the third-party data it ships; every licence
// file the NOTICE points to sits beside its copy, and every third-party
// licence file under testdata/ is named in the NOTICE.
func TestLicenceAndNotice(t *testing.T) {
	root := filepath.Join("..", "..")
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License"} {
		if !strings.Contains(string(lic), want) {
			t.Errorf("LICENSE lacks %q: not the full Apache-2.0 text", want)
		}
	}
	notice, err := os.ReadFile(filepath.Join(root, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`Licence: (\S+)`).FindAllStringSubmatch(string(notice), -1) {
		named[m[1]] = true
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("NOTICE names %s: %v", m[1], err)
		}
	}
	if len(named) < 2 {
		t.Errorf("NOTICE names %d licence files, want the vLLM runs' and splitwise's", len(named))
	}
	found, err := filepath.Glob(filepath.Join(root, "testdata", "*", "LICENSE*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		rel, _ := filepath.Rel(root, f)
		if !named[filepath.ToSlash(rel)] {
			t.Errorf("%s ships with the data but NOTICE does not name it", rel)
		}
	}
}
