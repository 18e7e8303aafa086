package launchers_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// TestHydraHello runs examples/hello under MPICH's mpiexec.hydra, whose
// ranks reach weft's PMI-1 client through PMI_FD and, with -pmi-port,
// through PMI_PORT + PMI_ID.
func TestHydraHello(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testenv.Skip(t, "hydra", "mpiexec.hydra not installed (Debian package mpich): %v", err)
	}
	_, hello := binaries(t)
	for _, mode := range [][]string{nil, {"-pmi-port"}} {
		args := append([]string{"-launcher", "fork"}, mode...)
		args = append(args, "-n", "3", hello)
		r := run(t, 60*time.Second, []string{"WEFT_PROVIDER=", "SLURM_JOB_ID="}, hydra, args...)
		checkRing(t, "mpiexec.hydra "+strings.Join(mode, " "), r, 3)
	}
	// MPMD: Hydra numbers the programs, and weft's ranks read theirs
	// from PMI's appnum.
	r := run(t, 60*time.Second, []string{"WEFT_PROVIDER=", "SLURM_JOB_ID="}, hydra, "-launcher", "fork", "-n", "1", hello, ":", "-n", "2", hello)
	checkRing(t, "mpiexec.hydra MPMD", r, 3)
	if c := strings.Count(r.Stdout, "ring ok, program 1\n"); c != 2 {
		t.Errorf("mpiexec.hydra MPMD: %d ranks of program 1, want 2:\n%s", c, r.Stdout)
	}
}

// TestHydraFailure checks that a failing rank under Hydra surfaces: hello
// aborts through PMI-1 when its provider cannot be opened.
func TestHydraFailure(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testenv.Skip(t, "hydra", "mpiexec.hydra not installed (Debian package mpich): %v", err)
	}
	_, hello := binaries(t)
	r := run(t, 60*time.Second, []string{"WEFT_PROVIDER=no-such-provider"}, hydra, "-launcher", "fork", "-n", "2", hello)
	// Hydra may drop the ranks' last stderr lines when it kills the job on
	// abort, so only the status and the absence of success are certain.
	if r.Code == 0 || strings.Contains(r.Stdout, "ring ok") {
		t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("exit %d; stderr:\n%s", r.Code, r.Stderr)
}
