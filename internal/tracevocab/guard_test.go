package tracevocab

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// vocabulary returns the string constants of this package, by value.
func vocabulary(t *testing.T) map[string]string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "tracevocab.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					val, _ := strconv.Unquote(lit.Value)
					out[val] = vs.Names[i].Name
				}
			}
		}
	}
	return out
}

// distinctive tells the names that mean nothing else (dotted attribute
// keys, span and table names, KV event types) from plain words such as
// "phase", "error" or "CPU", which other code may well spell for its own
// reasons.
func distinctive(val, name string) bool {
	if strings.ContainsAny(val, "._") {
		return true
	}
	return strings.HasPrefix(name, "KV") && !strings.HasPrefix(name, "KVBlocks") && !strings.HasPrefix(name, "KVUsage")
}

// Names of the shapes vLLM uses, even ones this package does not list
// yet: a new one belongs here, not spelled out where it is used.
// (vllm.scheduler_reserve_full_isl, a deployment file's key, is not one:
// the scopes are vllm.api and vllm.scheduler, then a dot.)
var vllmShaped = regexp.MustCompile(`^(gen_ai\.[a-z_.]+|vllm\.(api|scheduler)(\.[a-z_.]*)?|scheduler_steps_[0-9]*|(api|journey|step)\.[A-Z_]+)$`)

// TestNoTraceNameOutsideVocabulary fails when a string literal of a
// non-test Go file anywhere in the module spells out one of vLLM's trace
// names (or holds one quoted, as a JSON fragment does) instead of taking
// it from this package.
func TestNoTraceNameOutsideVocabulary(t *testing.T) {
	vocab := vocabulary(t)
	var names []string
	for val, name := range vocab {
		if distinctive(val, name) {
			names = append(names, val)
		}
	}
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	self, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, _ := filepath.Abs(path)
			base := d.Name()
			if abs == self || base == "testdata" || base == "vendor" || (base != "." && base != ".." && strings.HasPrefix(base, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		tags := map[*ast.BasicLit]bool{} // struct tags name JSON fields, not trace names
		ast.Inspect(f, func(n ast.Node) bool {
			if fld, ok := n.(*ast.Field); ok && fld.Tag != nil {
				tags[fld.Tag] = true
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || tags[lit] {
				return true
			}
			val, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			bad := ""
			if name, ok := vocab[val]; ok && distinctive(val, name) {
				bad = "tracevocab." + name
			} else if vllmShaped.MatchString(val) {
				bad = "a new constant in internal/tracevocab"
			} else {
				for _, v := range names {
					if strings.Contains(val, `"`+v+`"`) {
						bad = "tracevocab." + vocab[v] + " (quoted in a JSON fragment)"
						break
					}
				}
			}
			if bad != "" {
				found++
				t.Errorf("%s: %s spells out a trace name; use %s", fset.Position(lit.Pos()), lit.Value, bad)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found > 0 {
		t.Logf("vLLM's span, event and attribute names live in internal/tracevocab (see its package doc)")
	}
}

// The guard sees what it should: the names this package holds are the
// ones the test looks for.
func TestGuardKnowsTheNames(t *testing.T) {
	vocab := vocabulary(t)
	for _, v := range []string{RequestID, SpanRequest, SpanCore, StepSpanPrefix, ScopeStep, APIArrived, JourneyScheduled,
		StepBatchSummary, KVUsageGPURatio, SnapshotEffectivePromptLen, KVTransferCompleted, TableKVEvents} {
		if name, ok := vocab[v]; !ok || !distinctive(v, name) {
			t.Errorf("%q is not guarded", v)
		}
	}
	for _, v := range []string{Phase, AbortError, MediumCPU, PhasePrefill} {
		if distinctive(v, vocab[v]) {
			t.Errorf("plain word %q would be guarded everywhere", v)
		}
	}
}
