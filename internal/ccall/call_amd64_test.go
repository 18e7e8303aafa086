package ccall

import (
	"errors"
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
