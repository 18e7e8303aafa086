package jit

// Executable memory, W^X.
//
// No page is ever writable and executable in the same mapping. Two ways,
// chosen once per process:
//
// Dual mapping (default, WEFT_TUNE=jitdualmap=1). Code lives in 1 MiB chunks of
// anonymous shared memory (memfd_create) mapped twice: once read+write, once
// read+execute, at unrelated addresses. Code is written through the RW view
// and called through the RX view, so a compile costs no system call at all
// (the syscalls happen once per chunk), and pieces are carved at 64-byte
// granularity in power-of-two size classes (128 B .. 64 KiB) instead of one
// page per type, which also packs code densely for the instruction TLB. x86
// keeps instruction fetch coherent with stores by physical address, and a
// kernel is published to other goroutines through the code cache's mutex or
// an atomic pointer, so a caller never sees a piece before its bytes. The
// trade-off versus mprotect: the RW alias exists for the life of the chunk
// (at an address nothing else refers to); a process that must never have a
// writable alias of code sets WEFT_TUNE=jitdualmap=0.
//
// mprotect (WEFT_TUNE=jitdualmap=0, or when memfd_create or the RX mapping is
// refused). Code is written into a private RW mapping and switched to RX with
// one mprotect per compile. Code up to 64 KiB is carved page-aligned from
// 1 MiB RW chunks (prefaulted); larger code gets its own mapping. Released
// pieces are switched back to RW and kept on a free list by size.
//
// Code over 64 KiB always takes the mprotect path (own private mapping; its
// page faults are cheaper than memfd's, measured). Either way, released pieces
// are never executed again until they hold new code, and code is released by
// a cleanup attached to the kernel that owns it, so it is never freed while a
// goroutine still holds the kernel (every call keeps it alive).
//
// If the kernel refuses PROT_EXEC (SELinux execmem, PaX, a seccomp filter),
// newCode returns errExecRefused and the package stops compiling: ddt keeps
// using its interpreter.

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errExecRefused = errors.New("jit: executable memory refused")

// codeMem is one piece of executable memory.
type codeMem struct {
	mem   []byte // the executable view: what is called
	rw    []byte // the writable view of the same bytes (dual mapping), else nil
	class int    // dual-mapping size class, -1 for an own mapping
}

var (
	poolMu sync.Mutex
	pool   = map[int][]*codeMem{} // mprotect mode: released pieces by length
	// poolMax bounds the pieces kept per size; more are unmapped.
	poolMax = 16
	// arena is the unused tail of the current chunk: code of at most
	// arenaMax bytes is carved from chunks of chunkSize, so most compiles
	// cost one mprotect and no mmap or page fault.
	arena []byte

	// Dual mapping state (under poolMu).
	dualRefused bool                    // the kernel refused a dual mapping: every compile uses mprotect
	dualRW      []byte                  // unused tail of the current chunk, RW view
	dualRX      []byte                  // the same tail, RX view
	dualFree    [dualClasses][]*codeMem // released pieces per size class
)

const (
	arenaChunk = 1 << 20
	arenaMax   = 64 << 10

	dualMinShift = 7  // smallest class: 128 bytes
	dualClasses  = 10 // 128 B .. 64 KiB
	dualAlign    = 64
)

var pageSize = unix.Getpagesize()

var int3Page = func() (p [4096]byte) {
	for i := range p {
		p[i] = 0xcc
	}
	return
}()

func fillInt3(b []byte) {
	for len(b) > 0 {
		b = b[copy(b, int3Page[:]):]
	}
}

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

// dualMapping maps size bytes of a fresh memfd twice: RW and RX.
func dualMapping(size int, populate bool) (rw, rx []byte, err error) {
	fd, err := unix.MemfdCreate("weft-jit", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, nil, fmt.Errorf("ftruncate memfd: %w", err)
	}
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	w, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap RW view: %w", err)
	}
	x, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_EXEC, flags)
	if err != nil {
		_ = unix.MunmapPtr(w, uintptr(size))
		return nil, nil, fmt.Errorf("%w: mmap RX view: %w", errExecRefused, err)
	}
	return unsafe.Slice((*byte)(w), size), unsafe.Slice((*byte)(x), size), nil
}

// takeDual returns a dual-mapped piece of at least n bytes, or nil (and the
// caller falls back to mprotect) when dual is false or dual mapping was
// refused.
func takeDual(n int, dual bool) *codeMem {
	if !dual {
		return nil
	}
	poolMu.Lock()
	defer poolMu.Unlock()
	if dualRefused {
		return nil
	}
	if n > arenaMax {
		// Large code (long index tables) takes the mprotect path: its
		// own private mapping, whose page faults are cheaper than
		// memfd's and whose one mprotect is small next to generating
		// 64 KiB or more.
		return nil
	}
	c := 0
	if n > 1<<dualMinShift {
		c = bits.Len(uint(n-1)) - dualMinShift
	}
	if l := dualFree[c]; len(l) > 0 {
		m := l[len(l)-1]
		dualFree[c] = l[:len(l)-1]
		return m
	}
	size := 1 << (c + dualMinShift)
	if len(dualRW) < size {
		rw, rx, err := dualMapping(arenaChunk, true)
		if err != nil {
			log.Debug("dual mapping refused; using mprotect", "error", err)
			dualRefused = true
			return nil
		}
		// The old tail stays mapped (pieces around it are live); it is at
		// most 64 KiB per 1 MiB chunk.
		dualRW, dualRX = rw, rx
	}
	m := &codeMem{mem: dualRX[:size:size], rw: dualRW[:size:size], class: c}
	dualRW, dualRX = dualRW[size:], dualRX[size:]
	return m
}

// newCode copies code into executable memory and returns it: a piece of a
// dual mapping when dual is set (config.dualMap) and the kernel allows it,
// else memory sealed by mprotect.
func newCode(code []byte, dual bool) (*codeMem, error) {
	if m := takeDual(len(code), dual); m != nil {
		n := copy(m.rw, code)
		fillInt3(m.rw[n:]) // a stray jump traps
		return m, nil
	}
	size := (len(code) + pageSize - 1) &^ (pageSize - 1)
	if size == 0 {
		size = pageSize
	}
	b, err := take(size)
	if err != nil {
		return nil, err
	}
	m := &codeMem{mem: b, class: -1}
	n := copy(m.mem, code)
	fillInt3(m.mem[n:])
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
	if m.rw != nil {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.rw)), uintptr(len(m.rw)))
	}
}

// release gives the memory back for reuse (never executed again before it
// holds new code), or unmaps it.
func (m *codeMem) release() {
	if m.rw != nil {
		if m.class < 0 {
			m.unmap()
			return
		}
		fillInt3(m.rw) // old entry points trap
		poolMu.Lock()
		dualFree[m.class] = append(dualFree[m.class], m)
		poolMu.Unlock()
		return
	}
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
