package launch

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCatches(t *testing.T) {
	// A Go program (this one) catches both; sleep catches neither.
	if !catches(os.Getpid(), syscall.SIGQUIT) || !catches(os.Getpid(), syscall.SIGUSR1) {
		t.Errorf("this Go process does not catch SIGQUIT and SIGUSR1?")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if catches(cmd.Process.Pid, syscall.SIGQUIT) || catches(cmd.Process.Pid, syscall.SIGUSR1) {
		t.Errorf("sleep catches SIGQUIT or SIGUSR1?")
	}
	if catches(-1, syscall.SIGQUIT) {
		t.Errorf("a process that does not exist catches SIGQUIT?")
	}
}

// TestForceTag: once forced, untagged output is tagged by whole lines;
// what was written before is passed on unchanged.
func TestForceTag(t *testing.T) {
	var out proctest.Buffer
	o := newOutputs(&out, io.Discard, false)
	w, errW, err := o.pipes(4)
	if err != nil {
		t.Fatal(err)
	}
	errW.Close()
	w.WriteString("plain\nhalf")
	waitFor(t, "the first chunk", func() bool { return out.String() == "plain\nhalf" })
	o.forceTag()
	w.WriteString(" line\nnext\nlast")
	w.Close()
	o.wait(5 * time.Second)
	if got, want := out.String(), "plain\nhalf line\n[4] next\n[4] last\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestDumpStacksLeavesOthersAlone: a stack request does not reach programs
// that do not catch SIGUSR1 (a shell would die of it), does not change
// their output, and the job goes on.
func TestDumpStacksLeavesOthersAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out proctest.Buffer
	inR, inW := io.Pipe()
	defer inW.Close()
	j, err := Start(ctx, Config{NP: 1, Stdout: &out, Stdin: inR,
		Argv: []string{"sh", "-c", `echo up; read -r l; echo "got $l"`}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rank", func() bool { return out.String() == "up\n" })
	if n := j.DumpStacks(); n != 0 {
		t.Errorf("DumpStacks signalled %d processes of a shell rank", n)
	}
	io.WriteString(inW, "x\n")
	if err := j.Wait(); err != nil {
		t.Fatalf("job after DumpStacks: %v\n%s", err, out.String())
	}
	if got := out.String(); got != "up\ngot x\n" {
		t.Errorf("output %q", got)
	}
}

// TestTimeoutStacksSkipsNonCatchers: with TimeoutStacks, ranks that do not
// catch SIGQUIT are ended as before, without waiting for stacks.
func TestTimeoutStacksSkipsNonCatchers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	j, err := Start(ctx, Config{NP: 2, Timeout: 200 * time.Millisecond, TimeoutStacks: true, KillGrace: 2 * time.Second,
		Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	err = j.Wait()
	var ee *ExitError
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &ee) || ee.Code != 124 {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// sleep dies from SIGTERM at once: no stack wait, no kill grace.
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("took %v", took)
	}
	if left := leftovers(j); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// TestFailStacks: with FailStacks, a rank's failure makes the ranks still
// running write their stacks (tagged) before the job ends, and the job
// reports the failed rank, not a timeout; without it, no stacks.
func TestFailStacks(t *testing.T) {
	for _, on := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out proctest.Buffer
		start := time.Now()
		j, err := Start(ctx, Config{NP: 2, Timeout: 20 * time.Second, FailStacks: on, TagOutput: true,
			Stdout: &out, Stderr: &out, Env: []string{"WEFT_LAUNCH_HELPER=failstacks"}, Argv: []string{self(t)}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		err = j.Wait()
		cancel()
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Rank != 1 || ee.Code != 3 {
			t.Fatalf("FailStacks=%v: err = %v, want rank 1's exit status 3\n%s", on, err, out.String())
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("FailStacks=%v: took %v", on, took)
		}
		shown := regexp.MustCompile(`(?m)^\[0\] .*\.waitOnFailedPeer\(`).MatchString(out.String())
		if shown != on {
			t.Errorf("FailStacks=%v: rank 0's stack in the output: %v\n%s", on, shown, out.String())
		}
		if left := leftovers(j); len(left) > 0 {
			t.Errorf("FailStacks=%v: processes left behind: %v", on, left)
		}
	}
}
