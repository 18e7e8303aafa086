package main

import (
	"bufio"
	"bytes"
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

// killMarked SIGKILLs what a failed test left behind.
func killMarked(mark string) {
	for _, l := range proctest.Marked(mark) {
		var pid int
		fmt.Sscan(l, &pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestSIGKILLedFabrunLeavesNothing: when fabrun dies from SIGKILL, its
// ranks die, and so do the processes the ranks started: one in the rank's
// session and one that left it (setsid).
func TestSIGKILLedFabrunLeavesNothing(t *testing.T) {
	fab, _ := binaries(t)
	mark := proctest.Marker()
	cmd := exec.Command(fab, "-n", "2", "--launcher", "local", "--tag-output",
		"sh", "-c", `sleep 1000 & setsid sleep 1001 & echo up; wait`)
	cmd.Env = append(os.Environ(), mark)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMarked(mark) })
	done := make(chan error, 1)
	go func() {
		rd := bufio.NewReader(out)
		for n := 0; n < 2; {
			l, err := rd.ReadString('\n')
			if err != nil {
				done <- fmt.Errorf("fabrun output ended: %v\n%s", err, se.String())
				return
			}
			if strings.HasSuffix(l, "up\n") {
				n++
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("ranks did not start\n%s", se.String())
	}
	// fabrun, 2 sh, 4 sleep. One sample decides: a process in the middle
	// of an exec can be missing from one look at /proc and back in the
	// next, so a second look may count fewer than the first.
	deadline := time.Now().Add(5 * time.Second)
	procs := proctest.Marked(mark)
	for len(procs) < 7 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		procs = proctest.Marked(mark)
	}
	if len(procs) < 7 {
		t.Fatalf("%d processes of the job running, want 7: %v", len(procs), procs)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("processes alive 5s after fabrun was SIGKILLed: %v", left)
	}
}

// TestInterruptDuringInit: SIGINT to fabrun while its ranks initialise
// (bootstrap and libfabric start-up; 50-300 ms after the first rank
// started) ends the job promptly with status 130, leaving nothing behind.
func TestInterruptDuringInit(t *testing.T) {
	fab, hello := binaries(t)
	for _, delay := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		mark := proctest.Marker()
		cmd := exec.Command(fab, "-n", "4", "--launcher", "local", "--provider", "shm", hello)
		cmd.Env = append(os.Environ(), mark)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Count the delay from the first rank's start: before that fabrun
		// may not have reached its signal handler yet (a slow start on a
		// busy machine), and a SIGINT then ends it as it ends any program,
		// with no job to leave behind.
		for wait := time.Now().Add(10 * time.Second); len(proctest.Marked(mark)) < 2 && time.Now().Before(wait); {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGINT)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			killMarked(mark)
			t.Fatalf("SIGINT at %v: fabrun still running 15s later\n%s%s", delay, so.String(), se.String())
		}
		took := time.Since(start)
		var ee *exec.ExitError
		if strings.Contains(so.String(), "ring ok") && err == nil {
			t.Logf("SIGINT at %v came after the job ended", delay)
		} else if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("SIGINT at %v: fabrun %v, want exit status 130\n%s%s", delay, err, so.String(), se.String())
		}
		if took > 5*time.Second {
			t.Errorf("SIGINT at %v: fabrun took %v to end", delay, took)
		}
		if left := proctest.WaitGone(mark, 2*time.Second); len(left) > 0 {
			t.Errorf("SIGINT at %v: processes left behind: %v", delay, left)
			killMarked(mark)
		}
	}
}
