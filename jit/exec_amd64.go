package jit

// Executable memory, W^X.
//
// Generated code is written into an anonymous private mapping that is
// readable and writable but not executable, then the mapping is switched to
// read+execute with mprotect before any caller can reach it; no page is ever
// writable and executable at once. One mapping holds all the code of one
// compiled type (pack and unpack entry points and their data tables).
// Mappings are recycled through a small free list keyed by page count: a
// released mapping is switched back to RW (never executed again until it is
// sealed again with new code). Code is released by a cleanup attached to the
// kernel that owns it, so code is never freed while a goroutine still holds
// the kernel (every call keeps it alive for its duration).
//
// If the kernel refuses PROT_EXEC (SELinux execmem, PaX, a seccomp filter),
// newCode returns errExecRefused and the package stops compiling: ddt keeps
// using its interpreter.

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

var errExecRefused = errors.New("jit: executable memory refused")

type codeMem struct {
	mem []byte // the whole mapping
}

var (
	poolMu sync.Mutex
	pool   = map[int][]*codeMem{} // by length in bytes
	// poolMax bounds the mappings kept per size.
	poolMax = 16
)

var pageSize = unix.Getpagesize()

// newCode copies code into fresh executable memory and returns it.
func newCode(code []byte) (*codeMem, error) {
	size := (len(code) + pageSize - 1) &^ (pageSize - 1)
	if size == 0 {
		size = pageSize
	}
	poolMu.Lock()
	var m *codeMem
	if l := pool[size]; len(l) > 0 {
		m = l[len(l)-1]
		pool[size] = l[:len(l)-1]
	}
	poolMu.Unlock()
	if m == nil {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return nil, fmt.Errorf("jit: mmap %d bytes: %w", size, err)
		}
		m = &codeMem{mem: b}
	}
	n := copy(m.mem, code)
	clear(m.mem[n:])
	for i := n; i < len(m.mem); i++ {
		m.mem[i] = 0xcc // int3 padding: a stray jump traps
	}
	if err := unix.Mprotect(m.mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		_ = unix.Munmap(m.mem)
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: mprotect PROT_EXEC: %w", errExecRefused, err)
		}
		return nil, fmt.Errorf("jit: mprotect: %w", err)
	}
	return m, nil
}

// release returns the mapping to the pool (made writable, never executable)
// or unmaps it.
func (m *codeMem) release() {
	if err := unix.Mprotect(m.mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		_ = unix.Munmap(m.mem)
		return
	}
	poolMu.Lock()
	defer poolMu.Unlock()
	if len(pool[len(m.mem)]) < poolMax {
		pool[len(m.mem)] = append(pool[len(m.mem)], m)
		return
	}
	_ = unix.Munmap(m.mem)
}
