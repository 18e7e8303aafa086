package ccall

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"unsafe"
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
		t.Skipf("no executable memory: %v", err)
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
