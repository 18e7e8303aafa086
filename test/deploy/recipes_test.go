package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// defFile is an Apptainer definition file: the header keywords and the
// sections, each with its body lines (indentation removed).
type defFile struct {
	header   map[string]string
	sections map[string][]string
	order    []string
}

// parseDef parses the structure of an Apptainer definition file: "Key:
// value" header lines up to the first %section line, then sections, each
// line of which belongs to the last %name above it. Comments and blank lines
// outside sections are ignored; a header line that is not "Key: value", an
// unknown or repeated section, or a section before the header is an error.
func parseDef(path string) (*defFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	known := map[string]bool{"setup": true, "files": true, "post": true, "test": true, "environment": true,
		"startscript": true, "runscript": true, "labels": true, "help": true, "arguments": true}
	d := &defFile{header: map[string]string{}, sections: map[string][]string{}}
	cur := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trim, "%"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			name = strings.Fields(name)[0]
			if !known[name] {
				return nil, fmt.Errorf("%s:%d: unknown section %%%s", path, n, name)
			}
			if _, dup := d.sections[name]; dup {
				return nil, fmt.Errorf("%s:%d: section %%%s repeated", path, n, name)
			}
			if len(d.header) == 0 {
				return nil, fmt.Errorf("%s:%d: section %%%s before the header", path, n, name)
			}
			cur = name
			d.sections[cur] = nil
			d.order = append(d.order, cur)
			continue
		}
		if cur != "" {
			d.sections[cur] = append(d.sections[cur], trim)
			continue
		}
		if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		k, v, ok := strings.Cut(trim, ":")
		if !ok || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%s:%d: header line %q is not Key: value", path, n, trim)
		}
		d.header[k] = strings.TrimSpace(v)
	}
	return d, sc.Err()
}

// script returns a section's body as a shell script.
func (d *defFile) script(name string) string { return strings.Join(d.sections[name], "\n") + "\n" }

// goVersion is the go line of go.mod.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(proctest.RepoRoot(t), "go.mod"))
	must(t, err)
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no go line in go.mod")
	}
	return string(m[1])
}

// TestApptainerDef checks deploy/apptainer/weft.def as far as anything here
// can without Apptainer (not packaged for Debian 12): its header and
// sections parse; the label version is deploy/VERSION; %files copies the
// source tree where %post builds it; %post installs Go at go.mod's version
// and the packages through deploy/install-deps.sh, and builds with
// `make build` (targets this Makefile has); every script section passes
// bash -n; and %environment plus %test, with /opt/weft/bin pointing to a
// local build, run a real two-rank job here.
func TestApptainerDef(t *testing.T) {
	t.Parallel() // each waits mostly on other processes
	d, err := parseDef(deployFile(t, "apptainer/weft.def"))
	if err != nil {
		t.Fatal(err)
	}
	if d.header["Bootstrap"] != "docker" || d.header["From"] != "debian:12" {
		t.Errorf("header %v, want Bootstrap: docker, From: debian:12 (the release install-deps.sh targets)", d.header)
	}
	for _, s := range []string{"help", "labels", "files", "post", "environment", "runscript", "test"} {
		if _, ok := d.sections[s]; !ok {
			t.Errorf("no %%%s section", s)
		}
	}
	labels := map[string]string{}
	for _, l := range d.sections["labels"] {
		if k, v, ok := strings.Cut(l, " "); ok {
			labels[k] = strings.TrimSpace(v)
		}
	}
	if v := labels["org.opencontainers.image.version"]; v != version(t) {
		t.Errorf("label version %q, want %q (deploy/VERSION)", v, version(t))
	}
	if !strings.Contains(strings.Join(d.sections["help"], "\n"), "weft "+version(t)) {
		t.Errorf("%%help does not name weft %s", version(t))
	}
	src := ""
	for _, l := range d.sections["files"] {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "." {
			src = f[1]
		}
	}
	if src == "" {
		t.Fatalf("%%files does not copy the source tree (.): %q", d.sections["files"])
	}
	post := d.script("post")
	for _, want := range []string{
		"GO_VERSION=" + goVersion(t),
		"cd " + src,
		"deploy/install-deps.sh build",
		"make build BIN=/opt/weft/bin",
	} {
		if !strings.Contains(post, want) {
			t.Errorf("%%post lacks %q:\n%s", want, post)
		}
	}
	// Every apt-get install in %post other than install-deps.sh's is the
	// bootstrap of curl, certificates and make.
	for _, m := range regexp.MustCompile(`apt-get install ([^\n]*)`).FindAllStringSubmatch(post, -1) {
		for _, w := range strings.Fields(m[1]) {
			if !strings.HasPrefix(w, "-") && w != "ca-certificates" && w != "curl" && w != "make" {
				t.Errorf("%%post installs %s itself; weft's packages come from deploy/install-deps.sh", w)
			}
		}
	}
	mk, err := os.ReadFile(filepath.Join(proctest.RepoRoot(t), "Makefile"))
	must(t, err)
	if !regexp.MustCompile(`(?m)^build: `).Match(mk) || !strings.Contains(string(mk), "$(BIN)") {
		t.Errorf("the Makefile has no build target writing to $(BIN)")
	}
	for _, s := range []string{"post", "environment", "runscript", "test"} {
		r := proctest.Run(t, 10*time.Second, nil, d.script(s), "bash", "-n")
		if r.Code != 0 {
			t.Errorf("%%%s: bash -n: %s", s, r.Stderr)
		}
	}

	// %environment then %test, with the image's /opt/weft/bin replaced by
	// this test's build.
	bin := binDir(t)
	script := strings.ReplaceAll(d.script("environment")+d.script("test"), "/opt/weft/bin", bin)
	r := proctest.Run(t, time.Minute, nil, "", "bash", "-euc", script)
	if r.Code != 0 || strings.Count(r.Stdout, ": ring ok") != 2 {
		t.Errorf("%%environment + %%test here: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// spackCheck reads a Spack recipe with Python's ast and prints what the
// test checks, as JSON: the classes with their bases, the string class
// attributes, the version() and depends_on() calls in the class body, the
// methods, and the string arguments of calls to go(...).
const spackCheck = `
import ast, json, py_compile, sys
src, cfile = sys.argv[1], sys.argv[2]
py_compile.compile(src, cfile=cfile, doraise=True)
tree = ast.parse(open(src).read(), src)
out = {"classes": {}, "imports": []}
for node in tree.body:
    if isinstance(node, ast.ImportFrom):
        out["imports"].append(node.module + ":" + ",".join(a.name for a in node.names))
    if not isinstance(node, ast.ClassDef):
        continue
    c = {"bases": [ast.unparse(b) for b in node.bases], "attrs": {}, "versions": [], "depends": [], "methods": [], "go": []}
    for st in node.body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant):
            c["attrs"][st.targets[0].id] = st.value.value
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            call = st.value
            name = ast.unparse(call.func)
            args = [ast.literal_eval(a) for a in call.args]
            kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
            if name == "version":
                c["versions"].append({"name": args[0], **kw})
            elif name == "depends_on":
                t = kw.get("type", "")
                c["depends"].append({"spec": args[0], "type": list(t) if isinstance(t, tuple) else [t]})
        elif isinstance(st, ast.FunctionDef):
            c["methods"].append(st.name)
            for n in ast.walk(st):
                if isinstance(n, ast.Call) and ast.unparse(n.func) == "go":
                    c["go"].append([a.value for a in n.args if isinstance(a, ast.Constant)])
    out["classes"][node.name] = c
print(json.dumps(out))
`

// TestSpackRecipe checks deploy/spack as far as anything here can without
// Spack: package.py compiles (py_compile), and its ast has class Weft(Package)
// with a homepage and git URL, version deploy/VERSION, build dependencies
// on a C compiler and on Go at go.mod's version, libfabric >= 1.17 as the
// Debian package asks, an install method that builds the commands the
// Debian package ships, and a run environment; repo.yaml names the
// namespace.
func TestSpackRecipe(t *testing.T) {
	t.Parallel() // each waits mostly on other processes
	// The system's python3 first: a shim in PATH (pyenv's) can take
	// seconds to start on a busy machine.
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		py, err = exec.LookPath("python3")
	}
	if err != nil {
		testenv.Skip(t, "python3", "python3 not installed: %v", err)
	}
	recipe := deployFile(t, "spack/packages/weft/package.py")
	r := proctest.Run(t, 90*time.Second, nil, "", py, "-c", spackCheck, recipe, filepath.Join(t.TempDir(), "package.pyc"))
	if r.Code != 0 {
		t.Fatalf("python3 ast of %s: exit %d\n%s", recipe, r.Code, r.Stderr)
	}
	type class struct {
		Bases    []string
		Attrs    map[string]any
		Versions []map[string]string
		Depends  []struct {
			Spec string
			Type []string
		}
		Methods []string
		Go      [][]string
	}
	var got struct {
		Classes map[string]class
		Imports []string
	}
	must(t, json.Unmarshal([]byte(r.Stdout), &got))
	if strings.Join(got.Imports, " ") != "spack.package:*" {
		t.Errorf("imports %v, want from spack.package import *", got.Imports)
	}
	c, ok := got.Classes["Weft"]
	if !ok || strings.Join(c.Bases, ",") != "Package" {
		t.Fatalf("no class Weft(Package): %+v", got.Classes)
	}
	if c.Attrs["homepage"] != "https://github.com/weft-hpc/weft" || c.Attrs["git"] != "https://github.com/weft-hpc/weft.git" {
		t.Errorf("homepage %v, git %v", c.Attrs["homepage"], c.Attrs["git"])
	}
	versions := map[string]map[string]string{}
	for _, v := range c.Versions {
		versions[v["name"]] = v
	}
	if v, ok := versions[version(t)]; !ok || v["tag"] != "v"+version(t) {
		t.Errorf("versions %v: want %s at tag v%s", c.Versions, version(t), version(t))
	}
	deps := map[string][]string{}
	for _, d := range c.Depends {
		deps[d.Spec] = d.Type
	}
	for spec, typ := range map[string]string{"c": "build", "go@" + goVersion(t) + ":": "build", "libfabric@1.17:": "build,link,run"} {
		if got, ok := deps[spec]; !ok || strings.Join(got, ",") != typ {
			t.Errorf("depends_on(%q) with type %s: got %v (all: %v)", spec, typ, got, deps)
		}
	}
	for _, m := range []string{"install", "setup_build_environment", "setup_run_environment"} {
		if !strings.Contains(" "+strings.Join(c.Methods, " ")+" ", " "+m+" ") {
			t.Errorf("no method %s: %v", m, c.Methods)
		}
	}
	// install builds what the Debian package ships (build-deb.sh's go build).
	deb, err := os.ReadFile(deployFile(t, "debian/build-deb.sh"))
	must(t, err)
	if len(c.Go) != 1 || c.Go[0][0] != "build" {
		t.Fatalf("install: go calls %v, want one go build", c.Go)
	}
	for _, pkg := range c.Go[0][1:] {
		if strings.HasPrefix(pkg, "./cmd/") && !strings.Contains(string(deb), " "+pkg) {
			t.Errorf("spack builds %s, the Debian package does not", pkg)
		}
	}
	for _, pkg := range []string{"./cmd/fabrun", "./cmd/fabrun/fabrun-info"} {
		if !strings.Contains(" "+strings.Join(c.Go[0], " ")+" ", " "+pkg+" ") {
			t.Errorf("spack install does not build %s: %v", pkg, c.Go[0])
		}
	}
	repo, err := os.ReadFile(deployFile(t, "spack/repo.yaml"))
	must(t, err)
	if !regexp.MustCompile(`(?m)^repo:\n\s+namespace: weft$`).Match(repo) {
		t.Errorf("deploy/spack/repo.yaml does not name namespace weft:\n%s", repo)
	}
}

// TestParseDef checks that parseDef refuses what Apptainer refuses.
func TestParseDef(t *testing.T) {
	for _, c := range []struct{ name, text, err string }{
		{"ok", "Bootstrap: docker\nFrom: debian:12\n%post\n    true\n", ""},
		{"unknown section", "Bootstrap: docker\n%postinstall\n    true\n", "unknown section %postinstall"},
		{"repeated section", "Bootstrap: docker\n%post\n%post\n", "section %post repeated"},
		{"no header", "%post\n    true\n", "before the header"},
		{"bad header", "Bootstrap docker\n", "is not Key: value"},
	} {
		p := filepath.Join(t.TempDir(), "x.def")
		must(t, os.WriteFile(p, []byte(c.text), 0o644))
		d, err := parseDef(p)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err == "" && (d.header["From"] != "debian:12" || d.script("post") != "true\n"):
			t.Errorf("%s: parsed %+v", c.name, d)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
}
