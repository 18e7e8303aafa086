package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// processSetters are the calls that change a process-wide setting: the
// defaults of fabric's domains, ddt's default JIT mode and the compiler
// registered with ddt. A test that uses them would change the behaviour of
// every test running beside it.
var processSetters = map[string]bool{
	"SetFastCall":       true, // fabric
	"SetPollPace":       true, // fabric
	"SetPollYield":      true, // fabric
	"SetDefaultJITMode": true, // ddt
	"SetJITDisabled":    true, // ddt's test hook for WEFT_JIT=off
	"SetCompiler":       true, // internal/ddtir
	"Disable":           true, // jit: unregisters the compiler
}

// globalExceptions are the test functions (package dir/function) allowed to
// change process-wide state, each with its reason. A child-process body
// runs in a re-executed test binary of its own.
var globalExceptions = map[string]string{
	"fabric/checkDefaults":         "child process of TestProcessDefaults",
	"ddt/TestJITMode":              "body runs in a child process (testenv.InChild)",
	"jit/TestForcedFallback":       "body runs in a child process (testenv.InChild)",
	"jit/weftJITOffChild":          "child process of TestWEFTJITOff",
	"fabric/dlChild":               "child process of the libfabric load tests (TestLoad*)",
	"endpoint/ForceMatchHeader":    "called only by the ranks of a launched job (TestMatchHeaderMismatch's child processes)",
	"endpoint/SetPipePieceHook":    "called only by a rank of a launched job (TestNodePipelinePeerDies's child processes)",
	"collectives/SetNodeCMA":       "called only by the ranks of a launched job (TestHierNodeStream's child processes)",
	"collectives/SetStreamArrived": "called only by a rank of a launched job (TestHierNodeStreamThenBarrier's child processes)",
}

// TestNoGlobalMutation: no _test.go file calls a process-wide setter
// (processSetters) or assigns to (=, op=, ++, --) a package-level variable
// declared in its package's non-test files, or to a field or element of
// one, outside the listed exceptions, so that tests can run in parallel.
// Package-level variables of test files (test state) are not checked.
func TestNoGlobalMutation(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string][]string{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var bad []string
	checked := 0
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		fset := token.NewFileSet()
		globals := map[string]bool{}
		var tests []*ast.File
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatalf("parse %s: %v", name, err)
			}
			if strings.HasSuffix(name, "_test.go") {
				tests = append(tests, f)
				continue
			}
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, s := range g.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							if n.Name != "_" {
								globals[n.Name] = true
							}
						}
					}
				}
			}
		}
		for _, f := range tests {
			checked++
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				where := filepath.ToSlash(rel) + "/" + fn.Name.Name
				report := func(pos token.Pos, what string) {
					if _, ok := globalExceptions[where]; ok {
						used[where] = true
						return
					}
					bad = append(bad, fset.Position(pos).String()+": "+what)
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					var lhs []ast.Expr
					switch s := n.(type) {
					case *ast.AssignStmt:
						if s.Tok != token.DEFINE {
							lhs = s.Lhs
						}
					case *ast.IncDecStmt:
						lhs = []ast.Expr{s.X}
					case *ast.CallExpr:
						name := ""
						switch fun := s.Fun.(type) {
						case *ast.Ident:
							name = fun.Name
						case *ast.SelectorExpr:
							name = fun.Sel.Name
						}
						if processSetters[name] {
							report(s.Pos(), "calls "+name)
						}
					}
					for _, e := range lhs {
						if id := rootIdent(e); id != nil && id.Obj == nil && globals[id.Name] {
							report(id.Pos(), "assigns to package variable "+id.Name)
						}
					}
					return true
				})
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	for w, why := range globalExceptions {
		if !used[w] {
			t.Errorf("exception %s (%s) is no longer needed: remove it", w, why)
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d test files", checked)
	}
}

// rootIdent returns the variable an assignment target names: x in x, x.f,
// x[i], *x; nil for anything else.
func rootIdent(e ast.Expr) *ast.Ident {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.SelectorExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		default:
			return nil
		}
	}
}
