package launchers_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// startSlurm brings up a private single-node Slurm with
// deploy/slurm/single-node.sh and returns the SLURM_CONF environment entry.
func startSlurm(t *testing.T) string {
	t.Helper()
	return proctest.StartSlurm(t, 4, 1).Env()
}

// TestSlurm runs hello directly under srun --mpi=pmi2 (weft's PMI-2 client),
// then through fabrun inside an allocation (fabrun launches with srun), and
// checks that a failing rank is named with its status.
func TestSlurm(t *testing.T) {
	conf := startSlurm(t)
	fab, hello := binaries(t)
	env := []string{conf, "WEFT_PROVIDER=", "WEFT_LOG_LEVEL=debug"}

	// The bootstrap's own launcher worker under Slurm's PMI-2 server: binary
	// values up to 10 000 bytes (split across 1024-byte PMI-2 values),
	// process mapping, fence, finalize.
	btest := filepath.Join(filepath.Dir(hello), "bootstrap.test")
	if out, err := exec.Command(proctest.GoTool(), "test", "-c", "-o", btest, "github.com/weft-hpc/weft/internal/bootstrap").CombinedOutput(); err != nil {
		t.Fatalf("go test -c internal/bootstrap: %v\n%s", err, out)
	}
	r := run(t, 60*time.Second, []string{conf, "WEFT_BOOTSTRAP_WORKER=1", "WEFT_EXPECT_KIND=slurm"},
		"srun", "--mpi=pmi2", "-n", "3", btest, "-test.run", "^TestLauncherWorker$", "-test.v")
	for rank := range 3 {
		if r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf("slurm rank %d ok", rank)) {
			t.Fatalf("bootstrap worker under srun --mpi=pmi2: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	}

	r = run(t, 60*time.Second, env, "srun", "--mpi=pmi2", "-n", "2", hello)
	checkRing(t, "srun --mpi=pmi2 -n 2 hello", r, 2)
	t.Logf("srun hello: %v", r.Took)
	if !strings.Contains(r.Stderr, "kind=slurm") {
		t.Errorf("ranks did not use the Slurm bootstrap:\n%s", r.Stderr)
	}

	r = run(t, 60*time.Second, env, "salloc", "-n", "2", fab, "-n", "2", "--tag-output", hello)
	checkRing(t, "salloc -n 2 fabrun -n 2 hello", r, 2)
	t.Logf("salloc fabrun hello: %v", r.Took)
	for _, want := range []string{"launcher=slurm", "[0] rank 0 of 2 on", "[1] rank 1 of 2 on"} {
		if !strings.Contains(r.Stdout+r.Stderr, want) {
			t.Errorf("missing %q:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}

	// --output-dir: srun writes each task's files there.
	odir := t.TempDir()
	r = run(t, 60*time.Second, []string{conf}, "salloc", "-n", "2", fab, "-n", "2", "--output-dir", odir, "sh", "-c", `echo "out $PMI_RANK"; echo "err $PMI_RANK" >&2`)
	for rank := range 2 {
		for ext, want := range map[string]string{".out": "out", ".err": "err"} {
			b, err := os.ReadFile(filepath.Join(odir, fmt.Sprintf("rank.%d%s", rank, ext)))
			if r.Code != 0 || err != nil || string(b) != fmt.Sprintf("%s %d\n", want, rank) {
				t.Errorf("--output-dir under Slurm, rank %d's %s: %q, %v; exit %d\n%s%s", rank, ext, b, err, r.Code, r.Stdout, r.Stderr)
			}
		}
	}

	// --ppn becomes srun's --ntasks-per-node.
	r = run(t, 60*time.Second, append(env, "WEFT_LOG_LEVEL=debug"), "salloc", "-n", "2", fab, "-n", "2", "--ppn", "2", hello)
	checkRing(t, "salloc -n 2 fabrun --ppn 2 hello", r, 2)

	// MPMD under Slurm: one srun step whose tasks pick their program by
	// rank, with its environment and arguments, quoting kept.
	r = run(t, 60*time.Second, env, "salloc", "-n", "3", fab, "-n", "1", "--tag-output", hello, ":", "-n", "2", "--env", "X=a b", hello)
	checkRing(t, "salloc -n 3 fabrun MPMD hello", r, 3)
	if c := strings.Count(r.Stdout, "ring ok, program 1\n"); c != 2 {
		t.Errorf("MPMD under Slurm: %d ranks of program 1, want 2:\n%s", c, r.Stdout)
	}
	r = run(t, 60*time.Second, []string{conf}, "salloc", "-n", "2", fab, "-n", "1", "sh", "-c", `echo "A $WEFT_APPNUM"`, ":", "-n", "1", "--env", "X=a 'b'", "sh", "-c", `echo "B $WEFT_APPNUM $X"`)
	for _, want := range []string{"A 0\n", "B 1 a 'b'\n"} {
		if r.Code != 0 || !strings.Contains(r.Stdout, want) {
			t.Errorf("MPMD under Slurm: exit %d, missing %q:\n%s%s", r.Code, want, r.Stdout, r.Stderr)
		}
	}

	r = run(t, 60*time.Second, []string{conf}, "salloc", "-n", "2", fab, "-n", "2", "sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 3; sleep 30`)
	if r.Code != 3 || !strings.Contains(r.Stderr, "fabrun: rank 1 exited with status 3") {
		t.Errorf("failing rank under Slurm: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("salloc fabrun failing job: %v", r.Took)
	if r.Took > 15*time.Second {
		t.Errorf("failing job under Slurm took %v", r.Took)
	}

	mark := proctest.Marker()
	r = run(t, 60*time.Second, []string{conf, mark}, "salloc", "-n", "2", fab, "-n", "2", "--timeout", "1s", "sleep", "30")
	if r.Code != 124 || !strings.Contains(r.Stderr, "fabrun: job timed out after 1s") {
		t.Errorf("timeout under Slurm: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("salloc fabrun --timeout 1s: %v", r.Took)
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("ranks left behind after a timeout under Slurm: %v", left)
	}

	// A hung weft job under Slurm: on --timeout, srun forwards fabrun's
	// SIGUSR1 to every task and each writes its stacks, tagged with its rank.
	// The ranks get 8 s to start and reach the hang (as over ssh,
	// TestSSHTimeoutDumpsStacks).
	hang := hangBinary(t)
	mark = proctest.Marker()
	r = run(t, 30*time.Second, []string{conf, mark, "WEFT_FABRUN_TEST_RANK=hang"}, "salloc", "-n", "2", fab, "-n", "2", "--timeout", "8s", hang)
	if r.Code != 124 || !strings.Contains(r.Stderr, "fabrun: job timed out after 8s") {
		t.Errorf("hung job under Slurm: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if m := stacksMissing(r.Stderr, 2); len(m) > 0 {
		t.Errorf("no tagged stack with hangHere from Slurm ranks %v in:\n%s%s", m, r.Stdout, r.Stderr)
	}
	t.Logf("salloc fabrun --timeout 8s, hung weft ranks: %v", r.Took)
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("ranks left behind after a timeout under Slurm: %v", left)
	}
}
