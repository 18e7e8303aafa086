package fabric

import (
	"fmt"
	"os"
	"syscall"

	"github.com/weft-hpc/weft/internal/settings"
)

// Buffer is registered memory outside the Go heap: an anonymous mmap,
// page aligned, backed by huge pages when the system has them (explicit
// MAP_HUGETLB for sizes that are multiples of 2 MiB, else transparent huge
// pages via madvise), falling back silently to normal pages.
type Buffer struct {
	obj
	b    []byte
	mr   *MR
	huge bool
}

const hugePage = 2 << 20

// Alloc maps size bytes (rounded up to whole pages) and registers them with
// AccessAll. Close unregisters and unmaps. WEFT_TUNE=hugepages=0 disables
// huge pages.
func (d *Domain) Alloc(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("fabric: Alloc(%d): %w", size, ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: Alloc: %w", ErrClosed)
	}
	page := os.Getpagesize()
	n := (size + page - 1) / page * page
	tune, _ := settings.Tune()
	useHuge := tune.HugePages
	var mem []byte
	var err error
	huge := false
	if useHuge && n%hugePage == 0 {
		mem, err = syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_HUGETLB)
		huge = err == nil
	}
	if mem == nil {
		mem, err = syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return nil, fmt.Errorf("fabric: Alloc: mmap %d bytes: %w", n, err)
		}
		if useHuge && n >= hugePage {
			_ = syscall.Madvise(mem, 14) // MADV_HUGEPAGE; advisory, errors ignored
		}
	}
	e, err := d.register(mem, AccessAll, false)
	if err != nil {
		_ = syscall.Munmap(mem)
		return nil, fmt.Errorf("fabric: Alloc: %w", err)
	}
	buf := &Buffer{b: mem[:size:size], huge: huge}
	buf.init("buffer", 0, orderMem)
	// The registration becomes a child of the buffer so that closing the
	// buffer deregisters before unmapping.
	e.parent.mu.Lock()
	delete(e.parent.kids, &e.obj)
	e.parent.mu.Unlock()
	if err := buf.adopt(&e.obj); err != nil {
		return nil, err
	}
	buf.onClose = func() error {
		if err := syscall.Munmap(mem); err != nil {
			return fmt.Errorf("fabric: Buffer.Close: munmap: %w", err)
		}
		return nil
	}
	buf.mr = &MR{e: e, owned: true}
	if err := d.adopt(&buf.obj); err != nil {
		buf.close()
		return nil, err
	}
	return buf, nil
}

// Bytes returns the buffer's memory. It must not be used after Close.
func (b *Buffer) Bytes() []byte { return b.b }

// MR returns the buffer's registration (closed by Buffer.Close; its own
// Close does nothing).
func (b *Buffer) MR() *MR { return b.mr }

// Desc is shorthand for b.MR().Desc().
func (b *Buffer) Desc() Desc { return b.mr.Desc() }

// Huge reports whether the buffer is backed by explicit huge pages.
func (b *Buffer) Huge() bool { return b.huge }

// Close deregisters and unmaps the buffer. It is idempotent.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	return b.close()
}
