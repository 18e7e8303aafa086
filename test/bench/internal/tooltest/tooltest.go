// Package tooltest holds what the end-to-end tests of the side-by-side
// bench tools (test/bench/p2p, test/bench/ddtpp) share: building the tool
// with fabrun, running it, reading its -json records and checking that bad
// command lines are refused.
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

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/internal/testenv"
)

// NeedMPICH skips t (through testenv, feature "mpich") where MPICH's
// compiler wrapper or launcher is missing.
func NeedMPICH(t testing.TB) {
	t.Helper()
	for _, p := range []string{"mpicc.mpich", "mpiexec.hydra"} {
		if _, err := exec.LookPath(p); err != nil {
			testenv.Skip(t, "mpich", "%s not found (Debian packages mpich, libmpich-dev): %v", p, err)
		}
	}
}

// Build builds the command of the test's package, named name, and fabrun
// into a temporary directory of t and returns their paths.
func Build(t testing.TB, ctx context.Context, name string) (bin, fabrun string) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", ".", "github.com/weft-hpc/weft/cmd/fabrun").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return filepath.Join(dir, name), filepath.Join(dir, "fabrun")
}

// Run runs bin with args and TMPDIR set to tmp and returns its stdout and
// stderr; a failed run ends t, and a name matching tmpGlob left in tmp
// (the tool's temporary directory, not removed) is an error of t.
func Run(t testing.TB, ctx context.Context, bin, tmp, tmpGlob string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s\n%s", args, err, o.String(), e.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, tmpGlob)); len(left) > 0 {
		t.Errorf("%v left %v behind", args, left)
	}
	return o.String(), e.String()
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

// RefusesUsage checks that bin, the tool name, refuses each command line
// of bad with exit status 2 and an error message after "name: ".
func RefusesUsage(t testing.TB, ctx context.Context, bin, name string, bad [][]string) {
	t.Helper()
	for _, args := range bad {
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: want exit status 2, got %v:\n%s", args, err, out)
			continue
		}
		if !strings.HasPrefix(string(out), name+": ") {
			t.Errorf("%v: no error message: %q", args, out)
		}
	}
}
