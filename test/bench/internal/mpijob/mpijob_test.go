package mpijob

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := Rotate(s, k); !slices.Equal(got, want) {
			t.Errorf("Rotate(%v, %d) = %v, want %v", s, k, got, want)
		}
	}
	if !slices.Equal(s, []string{"a", "b", "c"}) {
		t.Errorf("Rotate changed its argument: %v", s)
	}
	if Rotate([]int(nil), 3) != nil {
		t.Error("Rotate of nothing is not empty")
	}
}

// TestRun: a job's output comes back; a failing job's error carries its
// output; a job that outlives its limit is killed with its whole process
// group (a child it started in the background included) and the error
// says so.
func TestRun(t *testing.T) {
	ctx := context.Background()
	out, err := Run(ctx, 10*time.Second, []string{"sh", "-c", "echo out; echo err >&2"})
	if err != nil || !strings.Contains(string(out), "out") || !strings.Contains(string(out), "err") {
		t.Errorf("output %q, %v", out, err)
	}
	if _, err := Run(ctx, 10*time.Second, []string{"sh", "-c", "echo oops; exit 3"}); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("failing job: %v", err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	_, err = Run(ctx, 200*time.Millisecond, []string{"sh", "-c", "sleep 30 & echo $! > " + pidFile + "; wait"})
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("overlong job: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("overlong job ended after %v", el)
	}
	pid, _ := os.ReadFile(pidFile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err != nil || len(pid) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background child %s of a killed job still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Run(ctx, time.Second, nil); err == nil {
		t.Error("empty command line accepted")
	}
}

func TestFindAndLaunch(t *testing.T) {
	if _, err := Find(context.Background(), "lam"); err == nil || !strings.Contains(err.Error(), "lam") {
		t.Errorf("Find(lam): %v", err)
	}
	got := FabrunLaunch("/x/fabrun", 2, "shm", time.Minute, []string{"A=1"})
	want := []string{"/x/fabrun", "-n", "2", "--launcher", "local", "--provider", "shm", "--timeout", "1m0s", "--env", "A=1"}
	if !slices.Equal(got, want) {
		t.Errorf("FabrunLaunch = %v, want %v", got, want)
	}
	if _, err := Fabrun(context.Background(), filepath.Join(t.TempDir(), "none"), ""); err == nil {
		t.Error("a missing fabrun accepted")
	}
	// A weft job re-executes this program under the fabrun named.
	fabrun := filepath.Join(t.TempDir(), "fabrun")
	if err := os.WriteFile(fabrun, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := NewWeft(context.Background(), fabrun, "", "tcp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want = append(FabrunLaunch(fabrun, 4, "tcp", time.Minute, []string{"A=1", "B=2"}), self)
	if got := w.Launch(4, []string{"A=1", "B=2"}); !slices.Equal(got, want) {
		t.Errorf("Weft.Launch = %v, want %v", got, want)
	}
	if _, err := NewWeft(context.Background(), filepath.Join(t.TempDir(), "none"), "", "tcp", time.Minute); err == nil {
		t.Error("NewWeft with a missing fabrun accepted")
	}
}

// TestBuildWithHeader: a program built with Build can include mpibench.h,
// written next to it, and its argument parser takes non-negative integers
// and refuses anything else with a message.
func TestBuildWithHeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Find(ctx, "mpich")
	if err != nil {
		testenv.Skip(t, "mpich", "%v", err)
	}
	const src = `#include "mpibench.h"
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		printf("%ld\n", mpibench_arg("prog", argv[i], "N"));
	return 0;
}
`
	dst := filepath.Join(t.TempDir(), "args")
	if err := m.Build(ctx, []byte(src), dst); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, dst, "12", "0", "x", "-3", "", "7z").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"12\n0\n", `prog: N "x": want a non-negative integer`, `prog: N "-3": want`, `prog: N "": want`, `prog: N "7z": want`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "-1\n"); n != 4 {
		t.Errorf("%d arguments refused, want 4:\n%s", n, out)
	}
}

// TestBuildAllLeavesOut: an implementation that cannot run here is left
// out with a line saying so, and the others are still built.
func TestBuildAllLeavesOut(t *testing.T) {
	var notes strings.Builder
	got := BuildAll(context.Background(), []string{"lam"}, []byte("int main(void) { return 0; }\n"), t.TempDir(), "tool", &notes)
	if len(got) != 0 {
		t.Errorf("built %v", got)
	}
	if !strings.HasPrefix(notes.String(), "tool: lam left out: ") {
		t.Errorf("notes %q", notes.String())
	}
}

// TestFirstError: a failed build's note carries the compiler's first
// error line and a count of the rest, not the whole output.
func TestFirstError(t *testing.T) {
	out := "p.c: In function 'main':\np.c:3:5: error: implicit declaration of function 'MPI_Psend_init'\np.c:4:5: error: 'MPI_Pready' undeclared\n    4 |     MPI_Pready(0, r);\n"
	if got, want := firstError(out), "p.c:3:5: error: implicit declaration of function 'MPI_Psend_init' (and 3 more lines)"; got != want {
		t.Errorf("firstError = %q, want %q", got, want)
	}
	if got := firstError("ld: cannot find -lmpi\n"); got != "ld: cannot find -lmpi" {
		t.Errorf("one line: %q", got)
	}
	if got := firstError("warning: a\nwarning: b\n"); got != "warning: a (and 1 more lines)" {
		t.Errorf("no error line: %q", got)
	}
	ld := "/usr/bin/ld: /tmp/x.o: in function `main':\nx.c:(.text+0x4): undefined reference to `MPI_Psend_init'\ncollect2: error: ld returned 1 exit status\n"
	if got, want := firstError(ld), "x.c:(.text+0x4): undefined reference to `MPI_Psend_init' (and 2 more lines)"; got != want {
		t.Errorf("linker: %q, want %q", got, want)
	}
}
