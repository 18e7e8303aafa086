package launchers_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

var (
	hangOnce sync.Once
	hangPath string
	hangErr  error
)

// hangBinary builds cmd/fabrun's test binary once: with
// WEFT_FABRUN_TEST_RANK=hang it is a weft rank that blocks in hangHere
// (cmd/fabrun/stacks_test.go).
func hangBinary(t *testing.T) string {
	t.Helper()
	_, hello := binaries(t)
	hangOnce.Do(func() {
		hangPath = filepath.Join(filepath.Dir(hello), "fabrun.test")
		if out, err := exec.Command(proctest.GoTool(), "test", "-c", "-o", hangPath, "github.com/weft-hpc/weft/cmd/fabrun").CombinedOutput(); err != nil {
			hangErr = fmt.Errorf("go test -c cmd/fabrun: %v\n%s", err, out)
		}
	})
	if hangErr != nil {
		t.Fatal(hangErr)
	}
	return hangPath
}

// TestSSHTimeoutDumpsStacks: --timeout on a hung ssh job makes every remote
// rank write its goroutine stacks (the remote wrapper forwards SIGQUIT),
// tagged with its rank; fabrun exits 124 and nothing is left behind. The
// job's timeout leaves the ranks 8 s to start over ssh and reach the hang
// (about 1 s on an idle machine, several on 2 cores busy with the rest of
// make test).
func TestSSHTimeoutDumpsStacks(t *testing.T) {
	ssh := startSSHD(t)
	fab, _ := binaries(t)
	hang := hangBinary(t)
	mark := proctest.Marker()
	r := run(t, 30*time.Second, nil, fab, "--ssh", ssh, "--launcher", "ssh", "-n", "2", "--hosts", "127.0.0.1:2", "--timeout", "8s",
		"--env", mark, "--env", "WEFT_FABRUN_TEST_RANK=hang", hang)
	if r.Code != 124 || !strings.Contains(r.Stderr, "fabrun: job timed out after 8s") {
		t.Fatalf("exit %d after %v, want 124\n%s%s", r.Code, r.Took, r.Stdout, r.Stderr)
	}
	if m := stacksMissing(r.Stderr, 2); len(m) > 0 {
		t.Errorf("no tagged stack with hangHere from ssh ranks %v in:\n%s%s", m, r.Stdout, r.Stderr)
	}
	if r.Took > 13*time.Second {
		t.Errorf("took %v", r.Took)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("remote processes left behind: %v", left)
	}
}

// TestSSHSIGUSR1DumpsStacks: SIGUSR1 to fabrun makes every ssh rank write
// its goroutine stacks, tagged with its rank, and the job then completes
// normally.
func TestSSHSIGUSR1DumpsStacks(t *testing.T) {
	ssh := startSSHD(t)
	fab, _ := binaries(t)
	hang := hangBinary(t)
	const np = 2
	release := filepath.Join(t.TempDir(), "release")
	mark := proctest.Marker()
	cmd := exec.Command(fab, "--ssh", ssh, "--launcher", "ssh", "-n", fmt.Sprint(np), "--hosts", "127.0.0.1:2", "--timeout", "15s",
		"--env", mark, "--env", "WEFT_FABRUN_TEST_RANK=hang", "--env", "WEFT_FABRUN_TEST_RELEASE_FILE="+release, hang)
	var out, errb proctest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
			t.Errorf("processes left behind: %v", left)
		}
	})
	// Polls until cond holds or the deadline passes: waiting for output, not
	// timing a verdict.
	deadline := time.Now().Add(12 * time.Second)
	waitFor := func(cond func() bool) bool {
		for !cond() {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		return true
	}
	if !waitFor(func() bool { return strings.Count(out.String(), " up\n") == np }) {
		t.Fatalf("ranks did not start\n%s%s", out.String(), errb.String())
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return len(stacksMissing(errb.String(), np)) == 0 }) {
		t.Fatalf("no tagged stacks with hangHere from ssh ranks %v after SIGUSR1\n%s%s", stacksMissing(errb.String(), np), out.String(), errb.String())
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("fabrun after SIGUSR1 and release: %v\n%s%s", err, out.String(), errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("job did not end after release\n%s%s", out.String(), errb.String())
	}
	for r := range np {
		if want := fmt.Sprintf("[%d] rank %d done\n", r, r); !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}

// stacksMissing returns the ranks below np without a line tagged "[rank] "
// that shows a hangHere frame.
func stacksMissing(out string, np int) []int { return proctest.RanksWithout(out, ".hangHere(", np) }
