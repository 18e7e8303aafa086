package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// pgroupRank is a rank (WEFT_LAUNCH_HELPER=pgroup) that starts a child in a
// process group of its own (still in the rank's session), prints its pid
// and exits 0.
func pgroupRank() int {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "pgroup:", err)
		return 2
	}
	fmt.Println("child", cmd.Process.Pid)
	return 0
}

// TestForwardedSignalEscalates: ranks that ignore a forwarded SIGTERM get
// SIGKILL once the kill grace has passed.
func TestForwardedSignalEscalates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out proctest.Buffer
	j, err := Start(ctx, Config{NP: 2, Stdout: &out, TagOutput: true, KillGrace: 300 * time.Millisecond,
		Argv: []string{"sh", "-c", `trap '' TERM INT; echo ready; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "ready") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	j.Signal(syscall.SIGTERM)
	err = j.Wait()
	took := time.Since(start)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL || ee.Code != 137 {
		t.Fatalf("err = %v (%+v), want a rank killed by SIGKILL after the grace\n%s", err, ee, out.String())
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("the job ended %v after SIGTERM, want the 300ms kill grace and little more", took)
	}
	if left := leftovers(j); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// TestSessionSwept: a rank's child that moved to a process group of its own
// is killed when the job ends, like the ranks' process groups.
func TestSessionSwept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark := proctest.Marker()
	var out proctest.Buffer
	err := Run(ctx, Config{NP: 2, Stdout: &out, Stderr: &out, Argv: []string{self(t)},
		Env: []string{"WEFT_LAUNCH_HELPER=pgroup", mark}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if strings.Count(out.String(), "child ") != 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	if left := proctest.Marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
		for _, l := range left {
			var pid int
			fmt.Sscan(l, &pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
