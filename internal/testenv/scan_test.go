package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDirectSkips: no test file of the module outside this package skips
// with t.Skip, t.Skipf, t.SkipNow or their testing.B forms. A skip goes
// through Skip (or Short), which names the missing feature and fails when
// WEFT_REQUIRE claims it, so a machine that should run everything cannot
// skip a test silently. A test that does not apply in some role of its
// process (a child, a launched rank) returns instead.
func TestNoDirectSkips(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	scanned := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") || path == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		calls, err := directSkips(rel, src)
		if err != nil {
			return err
		}
		for _, c := range calls {
			t.Errorf("%s: direct skip; use testenv.Skip(t, feature, why) or testenv.Short", c)
		}
		scanned++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d test files under %s", scanned, root)
	}
}

// directSkips returns the position ("file:line: x.Skipf") of every call of a
// method named Skip, Skipf or SkipNow in src whose receiver is not this
// package.
func directSkips(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		switch sel.Sel.Name {
		case "Skip", "Skipf", "SkipNow":
		default:
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testenv" {
			return true
		}
		recv := "_"
		if id, ok := sel.X.(*ast.Ident); ok {
			recv = id.Name
		}
		found = append(found, fset.Position(call.Pos()).String()+": "+recv+"."+sel.Sel.Name)
		return true
	})
	return found, nil
}

// TestDirectSkipsFound checks the scanner itself on a small file.
func TestDirectSkipsFound(t *testing.T) {
	src := `package p

import "testing"

func TestA(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	testenv.Skip(t, "sshd", "none")
	testenv.Short(t, "long")
	t.Run("x", func(t *testing.T) { t.SkipNow() })
	t.Skipf("%d", 1)
}

func BenchmarkB(b *testing.B) { b.Skip("x") }
`
	got, err := directSkips("p_test.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p_test.go:7:3: t.Skip", "p_test.go:11:34: t.SkipNow", "p_test.go:12:2: t.Skipf", "p_test.go:15:33: b.Skip"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
