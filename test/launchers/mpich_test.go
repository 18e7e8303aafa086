package launchers_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// TestMPICHUnderFabrun runs a real MPICH program (testdata/mpiring.c) under
// fabrun: MPICH's own PMI-1 client talks to fabrun's server over PMI_FD. An
// MPI_Abort in one rank ends the job with its error code.
func TestMPICHUnderFabrun(t *testing.T) {
	prog := testenv.MPICH(t, filepath.Join("testdata", "mpiring.c"))
	fab, _ := binaries(t)
	r := run(t, 60*time.Second, nil, fab, "-n", "3", "--launcher", "local", "--tag-output", prog)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"[0] mpi rank 0 of 3: token 3", "[1] mpi rank 1 of 3: token 2", "[2] mpi rank 2 of 3: token 3"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}
	r = run(t, 60*time.Second, nil, fab, "-n", "3", "--launcher", "local", prog, "abort")
	if r.Code != 7 || !strings.Contains(r.Stderr, "fabrun: rank 1 called abort with status 7") {
		t.Errorf("MPI_Abort: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
