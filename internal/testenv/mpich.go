package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MPICH compiles the C file src with MPICH's compiler into an executable
// in a temporary directory of t and returns its path; without MPICH's
// compiler or headers it skips t (feature "mpich").
func MPICH(t testing.TB, src string) string {
	t.Helper()
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		if mpicc, err = exec.LookPath("mpicc"); err != nil {
			Skip(t, "mpich", "no MPICH compiler (Debian package libmpich-dev / mpich): %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	if out, err := exec.Command(mpicc, "-O", "-o", bin, src).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "mpi.h") {
			Skip(t, "mpich", "MPICH headers absent (Debian package libmpich-dev, only recommended by mpich): %s", out)
		}
		t.Fatalf("%s: %v\n%s", mpicc, err, out)
	}
	return bin
}

// RunSingleton runs the MPI program bin as a singleton — without a
// launcher's variables (PMI_, HYDRA_, MPIR_), though the test may itself
// run under a launcher — with stdin as its input, for at most a minute,
// and returns what it printed; it fails t if the program fails.
func RunSingleton(t testing.TB, bin, stdin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMI_") && !strings.HasPrefix(kv, "HYDRA_") && !strings.HasPrefix(kv, "MPIR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return string(out)
}
