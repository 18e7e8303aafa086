package shmring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// peerEnv, set in a re-executed test binary, makes TestTwoProcesses play
// the peer over the mapping on file descriptor 3; its value is the number
// of messages.
const peerEnv = "WEFT_SHMRING_PEER"

const (
	procCells = 256
	procMax   = 2000
)

func procSize(id uint64) int {
	if id%8 == 0 {
		return int(id*131) % (procMax + 1)
	}
	return int(id) % 64
}

// shmFile returns an open, already unlinked file in /dev/shm (a memfd where
// /dev/shm is missing) of size bytes.
func shmFile(t *testing.T, size int) *os.File {
	t.Helper()
	f, err := os.CreateTemp("/dev/shm", "weft-shmring-test-*")
	if err == nil {
		// Unlinked at once: no exit path, a kill included, leaves it behind.
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			t.Fatal(err)
		}
	} else {
		fd, merr := unix.MemfdCreate("weft-shmring-test", 0)
		if merr != nil {
			t.Fatalf("no /dev/shm (%v) and no memfd (%v)", err, merr)
		}
		f = os.NewFile(uintptr(fd), "memfd")
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return f
}

func mapFile(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// TestTwoProcesses sends messages of many sizes from this process to a
// re-executed test binary through a ring in a shared /dev/shm mapping; the
// peer checks each and echoes it on a second ring, and this process checks
// the echoes: payload, length, user word and order.
func TestTwoProcesses(t *testing.T) {
	size := 2 * Layout(procCells)
	if v := os.Getenv(peerEnv); v != "" {
		total, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := mapFile(os.NewFile(3, "shm"), size)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		if err := peer(mem, total, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		return
	}
	total := uint64(200_000)
	if testing.Short() {
		total = 20_000
	}
	f := shmFile(t, size)
	defer f.Close()
	mem, err := mapFile(f, size)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	there, back := mem[:Layout(procCells)], mem[Layout(procCells):]
	for _, m := range [][]byte{there, back} {
		if err := Init(m, procCells, procMax); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := NewProducer(there)
	if err != nil {
		t.Fatal(err)
	}
	co, err := NewConsumer(back)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTwoProcesses$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), peerEnv+"="+strconv.FormatUint(total, 10))
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			<-done
		}
	}()

	buf := make([]byte, procMax)
	var sent, got uint64
	for spins := 0; got < total; {
		progress := false
		if sent < total {
			ok, err := pr.TrySend(sent, pattern(sent, procSize(sent)))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				sent++
				progress = true
			}
		}
		u, n, ok, err := co.TryRecv(buf)
		if err != nil {
			t.Fatalf("echo %d: %v", got, err)
		}
		if ok {
			if u != got || n != procSize(got) || !bytes.Equal(buf[:n], pattern(got, n)) {
				t.Fatalf("echo %d: got user %d, %d bytes", got, u, n)
			}
			got++
			progress = true
		}
		if !progress {
			if spins++; spins%256 == 0 {
				select {
				case err := <-done:
					exited = true
					t.Fatalf("peer exited after %d of %d echoes: %v\n%s", got, total, err, out.String())
				default:
				}
				runtime.Gosched()
			}
		}
	}
	err = <-done
	exited = true
	if err != nil || !bytes.Contains(out.Bytes(), []byte("--- PASS: TestTwoProcesses")) {
		t.Fatalf("peer: %v\n%s", err, out.String())
	}
	mustEmpty(t, co)
}

// peer receives total messages on the first ring of mem, checks them and
// echoes each on the second.
func peer(mem []byte, total uint64, deadline time.Time) error {
	co, err := NewConsumer(mem[:Layout(procCells)])
	if err != nil {
		return err
	}
	pr, err := NewProducer(mem[Layout(procCells):])
	if err != nil {
		return err
	}
	buf := make([]byte, procMax)
	for want, spins := uint64(0), 0; want < total; {
		u, n, ok, err := co.TryRecv(buf)
		if err != nil {
			return fmt.Errorf("message %d: %w", want, err)
		}
		if !ok {
			if spins++; spins%256 == 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("stuck at message %d", want)
				}
				runtime.Gosched()
			}
			continue
		}
		if u != want || n != procSize(want) || !bytes.Equal(buf[:n], pattern(want, n)) {
			return fmt.Errorf("message %d: got user %d, %d bytes", want, u, n)
		}
		for {
			ok, err := pr.TrySend(u, buf[:n])
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("echo %d: ring full past the deadline", want)
			}
			runtime.Gosched()
		}
		want++
	}
	return nil
}
