package cma

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/errs"
	"golang.org/x/sys/unix"
)

// peerEnv selects the peer role of a re-executed test binary ("hold" or
// "stage"); peerSizeEnv gives the size of its buffer.
const (
	peerEnv     = "WEFT_CMA_PEER"
	peerSizeEnv = "WEFT_CMA_PEER_SIZE"
)

// TestMain runs the peer roles of the re-executed test binary.
func TestMain(m *testing.M) {
	if mode := os.Getenv(peerEnv); mode != "" {
		// Bounded whatever the parent does.
		time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
		if err := runPeer(mode); err != nil {
			fmt.Println("peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pattern fills n bytes that depend on seed and position.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>9) ^ seed
	}
	return b
}

// runPeer is the peer process: it holds a buffer of pattern(1) bytes and a
// region of two readable pages followed by an inaccessible one, prints
// "pid addr guard", then serves commands from stdin.
func runPeer(mode string) error {
	size, err := strconv.Atoi(os.Getenv(peerSizeEnv))
	if err != nil {
		return err
	}
	buf := pattern(1, size)
	page := os.Getpagesize()
	guard, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return err
	}
	if err := unix.Mprotect(guard[2*page:], unix.PROT_NONE); err != nil {
		return err
	}
	fmt.Printf("%d %d %d\n", os.Getpid(), Addr(buf), Addr(guard))
	if mode == "stage" {
		return stagePeer(buf)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "check":
			// The parent wrote pattern(2) over all of buf.
			if !bytes.Equal(buf, pattern(2, size)) {
				fmt.Println("bad")
			} else {
				fmt.Println("ok")
			}
		}
	}
	_ = guard[0]
	return nil
}

// peerProc is a running peer as the parent sees it.
type peerProc struct {
	pid   int
	addr  uintptr // its buffer
	guard uintptr // two readable pages, then a PROT_NONE page
	in    io.WriteCloser
	out   *bufio.Reader
}

// startPeer starts a peer in the given mode, waits (bounded) for its
// addresses and kills it when the test ends, whatever way it ends.
func startPeer(tb testing.TB, mode string, size int, files ...*os.File) *peerProc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+mode, peerSizeEnv+"="+strconv.Itoa(size))
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	p := &peerProc{in: in, out: bufio.NewReader(outPipe)}
	line, err := readLine(p.out, 30*time.Second)
	if err != nil {
		tb.Fatalf("peer start: %v", err)
	}
	var a, g uint64
	if _, err := fmt.Sscanf(line, "%d %d %d", &p.pid, &a, &g); err != nil {
		tb.Fatalf("peer start: %q: %v", line, err)
	}
	p.addr, p.guard = uintptr(a), uintptr(g)
	return p
}

// readLine reads one line from r within d. On a timeout the reading
// goroutine ends when the test's cleanup kills the peer.
func readLine(r *bufio.Reader, d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	select {
	case x := <-ch:
		return x.s, x.err
	case <-time.After(d):
		return "", errors.New("timed out")
	}
}

// TestTwoProcesses reads a peer's buffer through CMA, checks the bytes,
// writes a new pattern over it and has the peer check it.
func TestTwoProcesses(t *testing.T) {
	const size = 1<<20 + 123
	p := startPeer(t, "hold", size)
	if err := Available(p.pid); err != nil {
		t.Fatalf("Available(peer): %v", err)
	}
	got := make([]byte, size)
	n, err := Read(p.pid, got, p.addr)
	if err != nil || n != size {
		t.Fatalf("Read = %d, %v; want %d", n, err, size)
	}
	if !bytes.Equal(got, pattern(1, size)) {
		t.Fatal("Read: bytes differ from the peer's")
	}
	// An unaligned piece from the middle.
	part := make([]byte, 4097)
	if n, err := Read(p.pid, part, p.addr+1001); err != nil || n != len(part) || !bytes.Equal(part, pattern(1, size)[1001:1001+4097]) {
		t.Fatalf("Read of a middle piece = %d, %v (bytes equal: %v)", n, err, bytes.Equal(part, pattern(1, size)[1001:1001+4097]))
	}
	if n, err := Write(p.pid, pattern(2, size), p.addr); err != nil || n != size {
		t.Fatalf("Write = %d, %v; want %d", n, err, size)
	}
	if _, err := io.WriteString(p.in, "check\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := readLine(p.out, 30*time.Second); err != nil || line != "ok" {
		t.Fatalf("peer check: %q, %v", line, err)
	}
}

// TestSplitting makes every iovec one page long, so that a read needs more
// than iovMax iovecs and several calls.
func TestSplitting(t *testing.T) {
	page := os.Getpagesize()
	size := (iovMax+iovMax/2)*page + 77
	p := startPeer(t, "hold", size)
	got := make([]byte, size)
	if n, err := transfer("read", p.pid, got, p.addr, page); err != nil || n != size || !bytes.Equal(got, pattern(1, size)) {
		t.Fatalf("Read in %d-byte iovecs = %d, %v (bytes equal: %v)", page, n, err, bytes.Equal(got, pattern(1, size)))
	}
	if n, err := transfer("write", p.pid, pattern(2, size), p.addr, page); err != nil || n != size {
		t.Fatalf("Write in %d-byte iovecs = %d, %v", page, n, err)
	}
	if n, err := Read(p.pid, got, p.addr); err != nil || n != size || !bytes.Equal(got, pattern(2, size)) {
		t.Fatalf("Read back = %d, %v (bytes equal: %v)", n, err, bytes.Equal(got, pattern(2, size)))
	}
}

// TestPartialThenFault reads across the end of the peer's accessible
// pages: the readable part arrives, then ErrInvalid (EFAULT).
func TestPartialThenFault(t *testing.T) {
	page := os.Getpagesize()
	p := startPeer(t, "hold", 16)
	buf := make([]byte, 2*page+100)
	n, err := Read(p.pid, buf, p.guard)
	if n != 2*page || !errors.Is(err, errs.ErrInvalid) || !errors.Is(err, unix.EFAULT) {
		t.Fatalf("Read across a PROT_NONE page = %d, %v; want %d, ErrInvalid (EFAULT)", n, err, 2*page)
	}
	n, err = Write(p.pid, buf, p.guard)
	if n != 2*page || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Write across a PROT_NONE page = %d, %v; want %d, ErrInvalid", n, err, 2*page)
	}
}

// TestErrors: a dead pid, bad addresses, bad arguments.
func TestErrors(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"=hold", peerSizeEnv+"=x") // exits at once
	_ = cmd.Run()
	dead := cmd.ProcessState.Pid()
	buf := make([]byte, 64)
	if _, err := Read(dead, buf, 4096); !errors.Is(err, errs.ErrPeerGone) {
		t.Errorf("Read from exited pid %d: %v; want ErrPeerGone", dead, err)
	}
	if _, err := Write(dead, buf, 4096); !errors.Is(err, errs.ErrPeerGone) {
		t.Errorf("Write to exited pid %d: %v; want ErrPeerGone", dead, err)
	}
	if err := Available(dead); !errors.Is(err, errs.ErrPeerGone) {
		t.Errorf("Available(exited pid %d): %v; want ErrPeerGone", dead, err)
	}
	self := os.Getpid()
	if n, err := Read(self, buf, 0); n != 0 || !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Read at address 0 = %d, %v; want 0, ErrInvalid", n, err)
	}
	if n, err := Write(self, buf, 8); n != 0 || !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Write at address 8 = %d, %v; want 0, ErrInvalid", n, err)
	}
	if _, err := Read(self, buf, ^uintptr(0)-10); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Read of a wrapping range: %v; want ErrInvalid", err)
	}
	for _, pid := range []int{0, -1} {
		if _, err := Read(pid, buf, Addr(buf)); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Read(pid %d): %v; want ErrInvalid", pid, err)
		}
		if err := Available(pid); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Available(pid %d): %v; want ErrInvalid", pid, err)
		}
	}
	if n, err := Read(self, nil, 0); n != 0 || err != nil {
		t.Errorf("empty Read = %d, %v; want 0, nil", n, err)
	}
}

// TestSelf copies within this process, and reports the ptrace policy of
// this machine.
func TestSelf(t *testing.T) {
	if err := Available(os.Getpid()); err != nil {
		t.Fatalf("Available(self): %v", err)
	}
	src, dst := pattern(5, 10000), make([]byte, 10000)
	if n, err := Read(os.Getpid(), dst, Addr(src)); err != nil || n != len(src) || !bytes.Equal(src, dst) {
		t.Fatalf("Read(self) = %d, %v", n, err)
	}
	t.Logf("uid %d; %s", os.Getuid(), policy())
}

// TestRefusedMessage: the EPERM error names ptrace_scope and wraps
// ErrNotSupported.
func TestRefusedMessage(t *testing.T) {
	err := wrap("read", 1, 0, 1, unix.EPERM)
	if !errors.Is(err, errs.ErrNotSupported) || !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "ptrace_scope") && !strings.Contains(err.Error(), "Yama") {
		t.Fatalf("EPERM: %v", err)
	}
	if err := wrap("read", 1, 0, 1, unix.ENOSYS); !errors.Is(err, errs.ErrNotSupported) {
		t.Fatalf("ENOSYS: %v", err)
	}
}

// TestReadSegs gathers blocks of this process's memory, also past the
// kernel's 1024 iovecs per call and starting mid-stream, and checks the
// bytes; bad arguments give errors.
func TestReadSegs(t *testing.T) {
	// This process is its own peer: the kernel treats pid == self like any
	// other process it may read.
	src := make([]byte, 3<<20)
	for i := range src {
		src[i] = byte(i*7 + i>>11)
	}
	var segs []Seg
	var want []byte
	for off := 0; off+40 <= len(src) && len(segs) < 3000; off += 1000 {
		segs = append(segs, Seg{Addr: Addr(src[off:]), Len: 40 + off%23})
		want = append(want, src[off:off+40+off%23]...)
	}
	got := make([]byte, len(want))
	n, err := ReadSegs(os.Getpid(), got, segs)
	if err != nil || n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("ReadSegs: %d of %d bytes, err %v, equal %v", n, len(want), err, bytes.Equal(got, want))
	}
	part := make([]byte, 100) // a prefix ending inside a block
	if n, err := ReadSegs(os.Getpid(), part, segs); err != nil || n != 100 || !bytes.Equal(part, want[:100]) {
		t.Fatalf("prefix: %d %v", n, err)
	}
	if _, err := ReadSegs(os.Getpid(), make([]byte, len(want)+1), segs); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("more than the blocks hold: %v", err)
	}
	if _, err := ReadSegs(0, got, segs); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("pid 0: %v", err)
	}
	if _, err := ReadSegs(os.Getpid(), make([]byte, 8), []Seg{{Addr: 0, Len: 8}}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("unmapped block: %v", err)
	}
}
