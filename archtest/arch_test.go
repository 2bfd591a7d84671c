package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/blis-sim/blis/"

// floor is one row of ARCHITECTURE.md's table.
type floor struct {
	level    int // -1 for the test floor
	patterns []string
}

// readFloors reads ARCHITECTURE.md's table of floors.
func readFloors(t *testing.T) []floor {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, "<!-- floors -->"), strings.Index(s, "<!-- /floors -->")
	if i < 0 || j < i {
		t.Fatal("ARCHITECTURE.md has no <!-- floors --> table")
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var out []floor
	for _, line := range strings.Split(s[i:j], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(line, "|---") || strings.TrimSpace(cells[1]) == "floor" {
			continue
		}
		f := floor{level: -1}
		if l := strings.TrimSpace(cells[1]); l != "test" {
			n, err := strconv.Atoi(l)
			if err != nil {
				t.Fatalf("ARCHITECTURE.md: floor %q is not a number", l)
			}
			f.level = n
		}
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			f.patterns = append(f.patterns, m[1])
		}
		out = append(out, f)
	}
	if len(out) < 8 {
		t.Fatalf("ARCHITECTURE.md's table has %d floors", len(out))
	}
	return out
}

// levelOf is pkg's floor (relative to the module), the most specific
// pattern winning (internal/testsupport/... over internal/...).
func levelOf(floors []floor, pkg string) (int, bool) {
	best, level := -1, 0
	for _, f := range floors {
		for _, p := range f.patterns {
			n := 0
			switch {
			case strings.HasSuffix(p, "/..."):
				root := strings.TrimSuffix(p, "/...")
				if !strings.HasPrefix(pkg, root+"/") {
					continue
				}
				n = len(root) + 1
			case p == pkg:
				n = len(p) + 1000 // an exact name beats any prefix
			default:
				continue
			}
			if n > best {
				best, level = n, f.level
			}
		}
	}
	return level, best >= 0
}

type pkgInfo struct {
	path         string
	imports      []string // the module's packages the non-test files import
	testImports  []string // those the tests import
	hasNonTestGo bool
}

func list(t *testing.T) []pkgInfo {
	t.Helper()
	// go test puts its own go command first on PATH.
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}|{{len .GoFiles}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkgInfo
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		if !strings.HasPrefix(parts[0], module) {
			continue
		}
		own := func(s string) []string {
			var o []string
			for _, f := range strings.Fields(s) {
				if strings.HasPrefix(f, module) {
					o = append(o, strings.TrimPrefix(f, module))
				}
			}
			return o
		}
		pkgs = append(pkgs, pkgInfo{path: strings.TrimPrefix(parts[0], module), imports: own(parts[1]), testImports: own(parts[2]), hasNonTestGo: parts[3] != "0"})
	}
	return pkgs
}

// TestImportsFollowTheHouseMap: every package is on a floor and imports
// only its floor and those below; the rules of ARCHITECTURE.md hold.
func TestImportsFollowTheHouseMap(t *testing.T) {
	floors := readFloors(t)
	pkgs := list(t)
	if len(pkgs) < 30 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	under := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, p := range pkgs {
		from, ok := levelOf(floors, p.path)
		if !ok {
			t.Errorf("%s is on no floor of ARCHITECTURE.md: place it", p.path)
			continue
		}
		for _, imp := range p.imports {
			to, ok := levelOf(floors, imp)
			switch {
			case !ok:
				continue // reported as a package of its own
			case to == -1 && from != -1:
				t.Errorf("%s imports %s: test support is for tests only", p.path, imp)
			case from != -1 && to > from:
				t.Errorf("%s (floor %d) imports %s (floor %d): a floor imports only its own and those below", p.path, from, imp, to)
			}
		}
		for _, imp := range append(append([]string{}, p.imports...), p.testImports...) {
			switch {
			case under(imp, "cmd"):
				t.Errorf("%s imports %s: nothing imports a command", p.path, imp)
			case p.path == "experiment" && (under(imp, "sweep") || under(imp, "replay")):
				t.Errorf("experiment imports %s: a run does not know it is swept or replayed", imp)
			}
		}
		for _, imp := range p.imports {
			switch {
			case under(p.path, "cluster") && (under(imp, "experiment") || under(imp, "deploy") || under(imp, "policy")):
				t.Errorf("%s imports %s: the cluster's cores take values, not files", p.path, imp)
			case p.path == "sim" && (under(imp, "cluster") || under(imp, "deploy") || under(imp, "experiment") || under(imp, "policy")):
				t.Errorf("sim imports %s: the engine knows no fleet", imp)
			case p.path == "cmd/blis" && (under(imp, "cluster") || under(imp, "deploy") || imp == "sim"):
				t.Errorf("cmd/blis imports %s: the command prints what the library computes", imp)
			}
		}
	}
}

// TestTheMapCatchesAForbiddenImport: the check fails on an import the map
// forbids (so that a broken table cannot pass everything).
func TestTheMapCatchesAForbiddenImport(t *testing.T) {
	floors := readFloors(t)
	for _, c := range []struct {
		pkg  string
		want int
	}{{"internal/clip", 0}, {"sim", 2}, {"sim/workload", 2}, {"cluster/route", 3}, {"deploy", 4}, {"experiment", 5}, {"sweep", 6}, {"cmd/blis", 7}, {"internal/testsupport/simtest", -1}} {
		got, ok := levelOf(floors, c.pkg)
		if !ok || got != c.want {
			t.Errorf("%s is on floor %d (placed %v), want %d", c.pkg, got, ok, c.want)
		}
	}
	// cluster/route (3) importing experiment (5) is refused by the floors.
	from, _ := levelOf(floors, "cluster/route")
	to, _ := levelOf(floors, "experiment")
	if to <= from {
		t.Error("the map lets a fleet core import the experiment")
	}
}
