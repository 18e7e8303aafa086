// Package layers checks the package layering that docs/ARCHITECTURE.md
// states: each library package imports only packages of lower layers, cgo
// lives only where the design puts it, and fabrun carries no libfabric.
package layers

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/weft-hpc/weft/"

// layer of each library package (module-relative path). A package may
// import packages of strictly lower layers only. A new package must be
// given a layer here (and a line in docs/ARCHITECTURE.md).
var layer = map[string]int{
	"errs":                 0,
	"internal/wlog":        0,
	"internal/ccall":       0,
	"internal/proctest":    1,
	"internal/benchrec":    1,
	"internal/peerwatch":   1,
	"internal/shmring":     1,
	"internal/cma":         1,
	"internal/nodeseg":     1,
	"internal/release":     0,
	"internal/testenv":     0,
	"internal/checked":     0,
	"internal/wait":        0,
	"internal/vecop":       0,
	"internal/memcopy":     1,
	"internal/cpucache":    0,
	"internal/choose":      0,
	"internal/progress":    1,
	"internal/ddtir":       0,
	"internal/settings":    0,
	"internal/fft":         0,
	"internal/gputools":    0,
	"internal/ptxsim":      0,
	"internal/devhook":     0,
	"internal/testcluster": 1,
	"jit/internal/amd64":   0,
	"internal/pmi":         1,
	"ddt":                  1,
	"fabric":               1,
	"internal/bootstrap":   2,
	"internal/launch":      2,
	"jit":                  2,
	"ddt/ddttest":          2,
	"internal/misuse":      2,
	"gpu":                  2,
	"job":                  3,
	"endpoint":             4,
	"internal/launchtest":  3,
	"internal/eptest":      5,
	"onesided":             5,
	"collectives":          6,
	"am":                   7,
}

// top-level trees that may import any library package but are imported by
// none.
var leaves = []string{"cmd/", "examples/", "test/"}

// cgoAllowed are the only packages with cgo files.
var cgoAllowed = map[string]bool{"fabric": true, "gpu": true}

// testOnly are helpers that no library package may import.
var testOnly = map[string]bool{"internal/benchrec": true, "internal/testenv": true, "internal/proctest": true, "internal/launchtest": true, "internal/eptest": true, "internal/misuse": true, "ddt/ddttest": true, "internal/gputools": true, "internal/ptxsim": true, "internal/testcluster": true}

type pkg struct {
	path    string // module-relative for the module's packages
	own     bool   // in this module
	imports []string
	cgo     bool
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering check needs the go command: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, append([]string{"list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{len .CgoFiles}}"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		rel, own := strings.CutPrefix(f[0], module)
		p := pkg{path: rel, own: own, cgo: f[2] != "0"}
		for _, imp := range strings.Split(f[1], ",") {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				p.imports = append(p.imports, rel)
			}
		}
		ps = append(ps, p)
	}
	return ps
}

func isLeaf(path string) bool {
	for _, l := range leaves {
		if strings.HasPrefix(path, l) {
			return true
		}
	}
	return false
}

func TestLayering(t *testing.T) {
	ps := list(t, "./...")
	if len(ps) < 10 {
		t.Fatalf("go list found only %d packages", len(ps))
	}
	for _, p := range ps {
		if p.cgo && !cgoAllowed[p.path] {
			t.Errorf("%s uses cgo; only %v may (RATIONALE.md: why fabric/ is the only cgo package)", p.path, keys(cgoAllowed))
		}
		if isLeaf(p.path) {
			for _, imp := range p.imports {
				// test/bench/internal holds the loops and runners the
				// bench tools share; its packages import libraries only.
				if isLeaf(imp) && !(strings.HasPrefix(imp, "test/bench/internal/") && strings.HasPrefix(p.path, "test/bench/")) {
					t.Errorf("%s imports %s: commands, examples and test tools import libraries only", p.path, imp)
				}
			}
			continue
		}
		l, ok := layer[p.path]
		if !ok {
			t.Errorf("%s has no layer: add it to this test and to docs/ARCHITECTURE.md", p.path)
			continue
		}
		for _, imp := range p.imports {
			il, ok := layer[imp]
			switch {
			case isLeaf(imp):
				t.Errorf("library %s imports %s", p.path, imp)
			case testOnly[imp] && !testOnly[p.path]:
				t.Errorf("library %s imports the test helper %s", p.path, imp)
			case ok && il >= l:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down only", p.path, l, imp, il)
			}
		}
	}
}

// TestFabrunWithoutLibfabric: fabrun and its launcher must start where
// libfabric is absent (RATIONALE.md, why fabrun info is a separate binary).
func TestFabrunWithoutLibfabric(t *testing.T) {
	ps := list(t, "-deps", "./cmd/fabrun")
	for _, p := range ps {
		if p.own && (p.path == "fabric" || p.cgo) {
			t.Errorf("cmd/fabrun depends on %s", p.path)
		}
	}
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
