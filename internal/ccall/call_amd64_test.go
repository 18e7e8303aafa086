package ccall

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/internal/testenv"
)

// code maps machine code executable and returns its address.
func code(t *testing.T, b []byte) uintptr {
	t.Helper()
	m, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	copy(m, b)
	if err := syscall.Mprotect(m, syscall.PROT_READ|syscall.PROT_EXEC); err != nil {
		testenv.Skip(t, "exec-memory", "no executable memory: %v", err)
	}
	return uintptr(unsafe.Pointer(&m[0]))
}

func stack(t *testing.T) (lo, top uintptr) {
	t.Helper()
	m, err := syscall.Mmap(-1, 0, 64<<10, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	lo = uintptr(unsafe.Pointer(&m[0]))
	return lo, lo + uintptr(len(m))
}

func TestCallArgAndResult(t *testing.T) {
	inc := code(t, []byte{0x48, 0x8d, 0x47, 0x01, 0xc3}) // lea rax, [rdi+1]; ret
	_, top := stack(t)
	for _, v := range []uintptr{0, 41, 1 << 40, ^uintptr(0) - 1} {
		if got := Call(inc, v, top); got != int64(v+1) {
			t.Errorf("Call(inc, %#x) = %#x", v, got)
		}
	}
}

// TestCallStack checks that the callee runs on the given stack with the
// System V alignment (SP ≡ 8 mod 16 at entry) and that the goroutine's
// own stack is intact afterwards.
func TestCallStack(t *testing.T) {
	sp := code(t, []byte{0x48, 0x89, 0xe0, 0xc3}) // mov rax, rsp; ret
	lo, top := stack(t)
	local := [4]uint64{1, 2, 3, 4}
	got := uintptr(Call(sp, 0, top))
	if got < lo || got >= top {
		t.Fatalf("callee SP %#x outside the stack [%#x, %#x)", got, lo, top)
	}
	if got%16 != 8 {
		t.Errorf("callee SP %#x: want ≡ 8 mod 16 at entry", got)
	}
	if local != [4]uint64{1, 2, 3, 4} {
		t.Errorf("goroutine stack changed: %v", local)
	}
}

func TestCallManyGoroutines(t *testing.T) {
	inc := code(t, []byte{0x48, 0x8d, 0x47, 0x01, 0xc3})
	done := make(chan error)
	for g := 0; g < 8; g++ {
		_, top := stack(t)
		go func() {
			for i := uintptr(0); i < 100000; i++ {
				if Call(inc, i, top) != int64(i+1) {
					done <- errBad
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

var errBad = errors.New("wrong result")

// TestCallFaultIsFatal: a fault in the called code ends the process; it
// does not turn into a Go panic that a deferred recover could swallow.
func TestCallFaultIsFatal(t *testing.T) {
	if os.Getenv("WEFT_CCALL_FAULT_CHILD") == "1" {
		fault := code(t, []byte{0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0xc3}) // mov rax, [0]; ret
		_, top := stack(t)
		defer func() {
			if recover() != nil {
				os.Exit(3)
			}
		}()
		Call(fault, 0, top)
		os.Exit(4)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCallFaultIsFatal$")
	cmd.Env = append(os.Environ(), "WEFT_CCALL_FAULT_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	switch ee.ExitCode() {
	case 3:
		t.Fatalf("the fault was recovered as a panic\n%s", out)
	case 4:
		t.Fatalf("the faulting call returned\n%s", out)
	}
	t.Logf("child exit %d: %s", ee.ExitCode(), firstLine(out))
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// The tests below each check one runtime invariant that Call relies on
// (RATIONALE.md, "Why may fabric call C without cgo?"). A Go release that
// breaks one of them fails here before fast calls are enabled on it.

// TestCallRestoresX15: C may clobber X15 (caller-saved in System V), which
// Go's register ABI keeps zero; the ABI0 wrapper around Call must re-zero
// it, or Go code that zeroes memory with X15 writes garbage.
func TestCallRestoresX15(t *testing.T) {
	dirty := code(t, []byte{0x66, 0x45, 0x0f, 0x76, 0xff, 0xc3}) // pcmpeqd xmm15, xmm15; ret
	_, top := stack(t)
	for i := 0; i < 100; i++ {
		var b [8]uint64
		for j := range b {
			b[j] = ^uint64(0)
		}
		Call(dirty, 0, top)
		zero8(&b)
		if b != [8]uint64{} {
			t.Fatalf("memory zeroed after Call holds %#x: X15 not restored", b)
		}
	}
}

//go:noinline
func zero8(p *[8]uint64) { *p = [8]uint64{} }

// spinCode counts arg.n down to zero, then stores arg.n into arg.out:
// a C-like leaf that runs long enough for signals and GC to hit it.
var spinCode = []byte{
	0x48, 0x8b, 0x0f, // mov rcx, [rdi]
	0x48, 0xff, 0xc9, // dec rcx
	0x75, 0xfb, // jnz -5
	0x48, 0x8b, 0x07, // mov rax, [rdi]
	0x48, 0x89, 0x47, 0x08, // mov [rdi+8], rax
	0xc3, // ret
}

type spinArg struct{ n, out uint64 }

// TestCallUnderPreemptionAndGC: while Call runs, the runtime's preemption
// signals (SIGURG, sent by the GC's stop-the-world and by sysmon) reach a
// thread whose SP is on the C stack and whose PC is outside Go; the handler
// must leave it running, the GC must wait rather than scan or move the
// goroutine's stack, and a pointer into that stack given to C must still
// be the goroutine's memory when Call returns.
func TestCallUnderPreemptionAndGC(t *testing.T) {
	spin := code(t, spinCode)
	var stop atomic.Bool
	var gcs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // GC and stack shrinking, as often as possible
		defer wg.Done()
		for !stop.Load() {
			runtime.GC()
			gcs.Add(1)
		}
	}()
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		_, top := stack(t)
		go func() {
			errc <- spinOnStack(spin, top, 2000, 0)
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if gcs.Load() == 0 {
		t.Fatal("no GC completed alongside the calls")
	}
	t.Logf("%d GC cycles during the calls", gcs.Load())
}

// spinOnStack makes rounds Calls of spin with an argument block on the
// goroutine stack, first growing that stack by depth frames so the GC has
// something to shrink, and checks each result.
func spinOnStack(spin, top uintptr, rounds, depth int) error {
	if depth < 64 {
		var pad [256]byte
		err := spinOnStack(spin, top, rounds, depth+1)
		pad[depth]++
		if pad[depth] != 1 {
			return errBad
		}
		return err
	}
	for i := 0; i < rounds; i++ {
		if err := spinOnce(spin, top, uint64(100000+i)); err != nil {
			return err
		}
	}
	return nil
}

// spinOnce is one call from an ordinary Go frame, whose prologue is a
// preemption point as in fabric's callers.
//
//go:noinline
func spinOnce(spin, top uintptr, n uint64) error {
	var frame [32]uint64
	a := spinArg{n: n}
	frame[n%32] = n
	Call(spin, uintptr(unsafe.Pointer(&a)), top)
	if a.out != a.n || frame[n%32] != n {
		return errStackMoved
	}
	return nil
}

var errStackMoved = errors.New("C wrote its result elsewhere than the goroutine's argument: the stack moved during Call")
