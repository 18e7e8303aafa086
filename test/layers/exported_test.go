package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoInternalInExportedAPI: no exported function, method, type, field,
// constant or variable of a public package mentions a type of an internal
// package, since a user cannot import it (name it, implement it, store it).
// It walks the syntax of each public package's non-test files: the
// parameter, result, field, embedded and declared types of every exported
// name.
func TestNoInternalInExportedAPI(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this check needs the go command: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}},{{join .CgoFiles \",\"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		rel := strings.TrimPrefix(f[0], module)
		if isInternal(rel) || isLeaf(rel) {
			continue
		}
		for _, name := range strings.Split(f[2], ",") {
			if name == "" {
				continue
			}
			for _, e := range internalInExported(t, filepath.Join(f[1], name)) {
				t.Errorf("%s: %s", rel, e)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d files", checked)
	}
}

func isInternal(path string) bool {
	return path == "internal" || strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalInExported parses one file and returns a line for each exported
// declaration whose type mentions an internal package.
func internalInExported(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	internal := map[string]string{} // local name → import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if !isInternal(strings.TrimPrefix(p, module)) && !strings.HasPrefix(p, "internal/") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = p
	}
	if len(internal) == 0 {
		return nil
	}
	var bad []string
	check := func(what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					if p, ok := internal[id.Name]; ok {
						bad = append(bad, fmt.Sprintf("%s: %s mentions %s.%s (%s)", fset.Position(sel.Pos()), what, id.Name, sel.Sel.Name, p))
					}
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv != nil && !exportedRecv(d.Recv.List[0].Type) {
				continue
			}
			check(d.Name.Name, d.Type)
			if d.Recv != nil {
				check(d.Name.Name, d.Recv)
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					if !sp.Name.IsExported() {
						continue
					}
					if sp.TypeParams != nil {
						check(sp.Name.Name, sp.TypeParams)
					}
					checkType(sp.Name.Name, sp.Type, check)
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.IsExported() {
							check(n.Name, sp.Type)
							// var X = internal.New(...) or internal.T{...}:
							// the value's type is internal.
							for _, v := range sp.Values {
								switch v := v.(type) {
								case *ast.CallExpr:
									check(n.Name, v.Fun)
								case *ast.CompositeLit:
									check(n.Name, v.Type)
								}
							}
						}
					}
				}
			}
		}
	}
	return bad
}

// checkType checks the exported parts of a declared type: every field or
// method of a struct or interface whose name is exported (and embedded
// ones), the whole type otherwise.
func checkType(name string, typ ast.Expr, check func(string, ast.Node)) {
	var fields *ast.FieldList
	switch tt := typ.(type) {
	case *ast.StructType:
		fields = tt.Fields
	case *ast.InterfaceType:
		fields = tt.Methods
	default:
		check(name, typ)
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) == 0 {
			check(name+" (embedded)", fl.Type)
			continue
		}
		for _, n := range fl.Names {
			if n.IsExported() {
				check(name+"."+n.Name, fl.Type)
			}
		}
	}
}

func exportedRecv(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// TestExamplesPublicOnly: the examples are what users copy, so they import
// public packages only.
func TestExamplesPublicOnly(t *testing.T) {
	n := 0
	for _, p := range list(t, "./examples/...") {
		n++
		for _, imp := range p.imports {
			if isInternal(imp) {
				t.Errorf("%s imports %s, which users cannot import", p.path, imp)
			}
		}
	}
	if n == 0 {
		t.Fatal("no examples found")
	}
}
