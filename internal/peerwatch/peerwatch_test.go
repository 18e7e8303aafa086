package peerwatch

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestIdentRoundTrip(t *testing.T) {
	id := Self()
	if id.PID <= 0 || id.Node == "" || id.Start == 0 {
		t.Fatalf("Self() = %+v", id)
	}
	b := id.Append([]byte{1, 2})
	got, rest, err := Parse(append(b[2:], 9))
	if err != nil || got != id || len(rest) != 1 || rest[0] != 9 {
		t.Fatalf("Parse = %+v %v %v, want %+v", got, rest, err, id)
	}
	for n := range len(b) - 2 {
		if _, _, err := Parse(b[2 : 2+n]); err == nil {
			t.Fatalf("Parse of %d of %d bytes succeeded", n, len(b)-2)
		}
	}
}

// TestExited: a live child is alive; once it is a zombie, and once it is
// reaped, it has exited; a live pid with another start time (a reused pid)
// has exited too; processes on other nodes are never reported.
func TestExited(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		testenv.Skip(t, "sleep", "cannot start sleep(1): %v", err)
	}
	defer cmd.Process.Kill()
	start, _, err := stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id := Ident{Node: Self().Node, PID: cmd.Process.Pid, Start: start}
	w := New([]Ident{Self(), id, {Node: "elsewhere", PID: cmd.Process.Pid, Start: start}, {}})
	if err := w.CheckAll(); err != nil {
		t.Fatalf("live processes: %v", err)
	}
	reused := id
	reused.Start++
	if !reused.Exited() {
		t.Error("a pid with another start time is not reported")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie.
	deadline := time.Now().Add(10 * time.Second)
	for !id.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("killed child not reported as exited")
		}
		time.Sleep(time.Millisecond)
	}
	err = w.Check(1)
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("Check of the killed child: %v", err)
	}
	t.Log(err)
	_ = cmd.Wait()
	if !id.Exited() {
		t.Error("reaped child not reported as exited")
	}
	for _, r := range []int{0, 2, 3, -1, 4} {
		if err := w.Check(r); err != nil {
			t.Errorf("Check(%d) = %v", r, err)
		}
	}
	var nilw *Watch
	if nilw.CheckAll() != nil || nilw.Check(0) != nil {
		t.Error("nil Watch reported something")
	}
}

func TestPacer(t *testing.T) {
	var p Pacer
	if p.Due() {
		t.Fatal("due at once")
	}
	p.next = time.Now().Add(-time.Millisecond)
	if !p.Due() || p.Due() {
		t.Fatal("not due once after the interval")
	}
}
