package jit

// Executable memory, W^X.
//
// Generated code is written into an anonymous private mapping that is
// readable and writable but not executable, then the mapping is switched to
// read+execute with mprotect before any caller can reach it; no page is ever
// writable and executable at once. One mapping holds all the code of one
// compiled type (pack and unpack entry points and their data tables).
// Code up to 64 KiB is carved page-aligned from 1 MiB RW chunks (one
// mprotect per compile, no mmap, pages already faulted in when reused);
// larger code gets its own mapping. Released pieces go to a free list keyed
// by size after being switched back to RW (never executed again until sealed
// again with new code). Code is released by a cleanup attached to the
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
	"unsafe"

	"golang.org/x/sys/unix"
)

var errExecRefused = errors.New("jit: executable memory refused")

type codeMem struct {
	mem []byte // the whole mapping
}

var (
	poolMu sync.Mutex
	pool   = map[int][]*codeMem{} // released pieces by length in bytes
	// poolMax bounds the pieces kept per size; more are unmapped.
	poolMax = 16
	// arena is the unused tail of the current chunk: code of at most
	// arenaMax bytes is carved from chunks of chunkSize, so most compiles
	// cost one mprotect and no mmap or page fault.
	arena []byte
)

const (
	arenaChunk = 1 << 20
	arenaMax   = 64 << 10
)

var pageSize = unix.Getpagesize()

var int3Page = func() (p [4096]byte) {
	for i := range p {
		p[i] = 0xcc
	}
	return
}()

// take returns size bytes (a multiple of the page size) of RW memory.
func take(size int) ([]byte, error) {
	poolMu.Lock()
	defer poolMu.Unlock()
	if l := pool[size]; len(l) > 0 {
		m := l[len(l)-1]
		pool[size] = l[:len(l)-1]
		return m.mem, nil
	}
	if size > arenaMax {
		b, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return nil, fmt.Errorf("jit: mmap %d bytes: %w", size, err)
		}
		return unsafe.Slice((*byte)(b), size), nil
	}
	if len(arena) < size {
		// MAP_POPULATE: fault the chunk in at once, not page by page while
		// compiling.
		b, err := unix.MmapPtr(-1, 0, nil, arenaChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("jit: mmap arena: %w", err)
		}
		if len(arena) > 0 { // the old tail is given back
			_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(arena)), uintptr(len(arena)))
		}
		arena = unsafe.Slice((*byte)(b), arenaChunk)
	}
	b := arena[:size:size]
	arena = arena[size:]
	return b, nil
}

// newCode copies code into executable memory and returns it.
func newCode(code []byte) (*codeMem, error) {
	size := (len(code) + pageSize - 1) &^ (pageSize - 1)
	if size == 0 {
		size = pageSize
	}
	b, err := take(size)
	if err != nil {
		return nil, err
	}
	m := &codeMem{mem: b}
	n := copy(m.mem, code)
	for rest := m.mem[n:]; len(rest) > 0; { // int3 padding: a stray jump traps
		rest = rest[copy(rest, int3Page[:]):]
	}
	if err := unix.Mprotect(m.mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		m.unmap()
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: mprotect PROT_EXEC: %w", errExecRefused, err)
		}
		return nil, fmt.Errorf("jit: mprotect: %w", err)
	}
	return m, nil
}

func (m *codeMem) unmap() {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.mem)), uintptr(len(m.mem)))
}

// release makes the memory writable again (never executable) and keeps it
// for reuse, or unmaps it.
func (m *codeMem) release() {
	if err := unix.Mprotect(m.mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		m.unmap()
		return
	}
	poolMu.Lock()
	defer poolMu.Unlock()
	if len(pool[len(m.mem)]) < poolMax {
		pool[len(m.mem)] = append(pool[len(m.mem)], m)
		return
	}
	m.unmap()
}
