// Package tooltest holds what the tests of the side-by-side bench tools
// (test/bench/p2p, test/bench/ddtpp) share: building the tool with fabrun,
// running it, reading its -json records, checking that bad command lines
// are refused and that its tables say what they should.
package tooltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/internal/testenv"
)

// A Tool is the command of a test's package, built with fabrun for the
// test's runs of it.
type Tool struct {
	Name   string          // the command's name, the prefix of its error messages
	Bin    string          // the built command
	Fabrun string          // the built fabrun
	Ctx    context.Context // ends with the test, or at the limit given to New
	// Args are given to every run, after -fabrun and before the run's own.
	Args []string
	tmp  string
}

// New builds the command of the test's package, named name, and fabrun
// into a temporary directory of t, its runs bounded by limit from now. It
// skips t (through testenv) under -short, saying that the test does what,
// and where MPICH's compiler wrapper or launcher is missing.
func New(t *testing.T, name, what string, limit time.Duration) *Tool {
	t.Helper()
	testenv.Short(t, what)
	for _, p := range []string{"mpicc.mpich", "mpiexec.hydra"} {
		if _, err := exec.LookPath(p); err != nil {
			testenv.Skip(t, "mpich", "%s not found (Debian packages mpich, libmpich-dev): %v", p, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	dir := t.TempDir()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", ".", "github.com/weft-hpc/weft/cmd/fabrun").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return &Tool{Name: name, Bin: filepath.Join(dir, name), Fabrun: filepath.Join(dir, "fabrun"), Ctx: ctx, tmp: t.TempDir()}
}

// Run runs the tool with -fabrun, tl.Args and args, its TMPDIR a
// directory of its own, and returns its stdout and stderr. A failed run
// ends t; a temporary directory the tool left behind (weft-NAME-*) is an
// error of t.
func (tl *Tool) Run(t testing.TB, args ...string) (stdout, stderr string) {
	t.Helper()
	args = append(append([]string{"-fabrun", tl.Fabrun}, tl.Args...), args...)
	cmd := exec.CommandContext(tl.Ctx, tl.Bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tl.tmp)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s\n%s", args, err, o.String(), e.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tl.tmp, "weft-"+tl.Name+"-*")); len(left) > 0 {
		t.Errorf("%v left %v behind", args, left)
	}
	return o.String(), e.String()
}

// RefusesUsage checks that the tool refuses each command line of bad with
// exit status 2 and an error message after its name.
func (tl *Tool) RefusesUsage(t testing.TB, bad [][]string) {
	t.Helper()
	for _, args := range bad {
		out, err := exec.CommandContext(tl.Ctx, tl.Bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: want exit status 2, got %v:\n%s", args, err, out)
			continue
		}
		if !strings.HasPrefix(string(out), tl.Name+": ") {
			t.Errorf("%v: no error message: %q", args, out)
		}
	}
}

// Records reads the benchrec records of a -json run's stdout, one a line;
// a line that is not one (unknown fields included) ends t.
func Records(t testing.TB, out string) []benchrec.Record {
	t.Helper()
	var rs []benchrec.Record
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r benchrec.Record
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// Contains checks that text, a tool's tables, holds each of wants; each one
// missing is an error of t.
func Contains(t testing.TB, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}
