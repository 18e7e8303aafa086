package peerwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	start, _, err := Stat(cmd.Process.Pid)
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

// TestStat: Stat reads the state and start time that /proc/pid/stat
// holds, for a process whose command name holds spaces and parentheses
// too, allocates nothing, and reports a pid that names no process with an
// error wrapping os.ErrNotExist.
func TestStat(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		testenv.Skip(t, "sleep", "no sleep(1): %v", err)
	}
	odd := filepath.Join(t.TempDir(), "a) b (c")
	if err := os.Symlink(sleep, odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if pid == cmd.Process.Pid && !bytes.Contains(b, []byte("(a) b (c)")) {
			t.Errorf("the child's command name is not the odd one: %q", b)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		want, _ := strconv.ParseUint(f[19], 10, 64)
		start, state, err := Stat(pid)
		if err != nil || start != want || state != f[0][0] {
			t.Errorf("Stat(%d) = %d, %q, %v; /proc says %d, %q", pid, start, state, err, want, f[0][0])
		}
	}
	if a := testing.AllocsPerRun(100, func() { _, _, _ = Stat(cmd.Process.Pid) }); a != 0 && !testenv.Race { // the race detector's instrumentation allocates
		t.Errorf("Stat allocates %.1f times a call", a)
	}
	if _, _, err := Stat(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat of a pid that names no process: %v, want os.ErrNotExist", err)
	}
}
