package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// SingletonEnv is this process's environment without a launcher's
// variables (PMI_, HYDRA_, MPIR_), for an MPI program that must start as
// a singleton though the test may itself run under a launcher.
func SingletonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMI_") && !strings.HasPrefix(kv, "HYDRA_") && !strings.HasPrefix(kv, "MPIR_") {
			env = append(env, kv)
		}
	}
	return env
}
