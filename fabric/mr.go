package fabric

// Memory that libfabric keeps.
//
// Register hands libfabric the address of a Go slice. The cgo rules allow
// C to keep a Go pointer only while the memory is pinned, so every cached
// registration owns a runtime.Pinner that pins the slice's backing array
// from fi_mr_reg until fi_close of the MR. Alloc'd buffers (alloc.go) live
// outside the Go heap (mmap) and need no pinning. Operation buffers that are
// not registered must likewise be mmap/C memory or pinned by the caller for
// as long as the operation is in flight.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/internal/settings"
)

// mrEntry is one libfabric registration, shared by every MR handle that
// the cache hands out for ranges inside it.
type mrEntry struct {
	obj
	dom    *Domain
	base   uintptr
	length int
	access Access
	key    uint64
	desc   Desc
	pin    runtime.Pinner
	refs   int // live MR handles; guarded by the cache mutex
	// the idle LRU's links while refs == 0 (idle): an intrusive list, so
	// that releasing a registration allocates nothing
	prev, next *mrEntry
	idle       bool
}

// MR is a handle on registered memory. Handles for the same or contained
// ranges may share one registration (the MR cache); each handle is closed
// once.
type MR struct {
	e      *mrEntry
	closed bool
	owned  bool // belongs to a Buffer: Close is a no-op
	device bool // device memory (RegisterDevice): not cached, Close deregisters
	mu     sync.Mutex
}

// Key returns the remote key a peer needs to access the region.
func (m *MR) Key() uint64 {
	if m == nil || m.e == nil {
		return 0
	}
	return m.e.key
}

// Desc returns the local descriptor for operations on the region (0 for
// a nil or zero MR).
func (m *MR) Desc() Desc {
	if m == nil || m.e == nil {
		return 0
	}
	return m.e.desc
}

// Access returns the access rights of the registration (a superset of
// what was asked for when the cache served a wider registration).
func (m *MR) Access() Access {
	if m == nil || m.e == nil {
		return 0
	}
	return m.e.access
}

// RemoteAddr returns the address a peer passes as raddr to reach b, which
// must lie inside the registered region: b's virtual address when the
// provider uses FI_MR_VIRT_ADDR, else its offset from the start of the
// registration. It returns ^uint64(0) when b is outside the region.
func (m *MR) RemoteAddr(b []byte) uint64 {
	if m == nil || m.e == nil {
		return ^uint64(0)
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := m.e
	if p < e.base || p+uintptr(len(b)) > e.base+uintptr(e.length) {
		return ^uint64(0)
	}
	if e.dom.virt {
		return uint64(p)
	}
	return uint64(p - e.base)
}

// Close releases the handle. The registration itself stays in the
// domain's MR cache (pinned and registered) until it is evicted or the
// domain closes. Close is idempotent.
func (m *MR) Close() error {
	if m == nil || m.owned {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.device {
		return m.e.close()
	}
	return m.e.dom.cache.release(m.e)
}

// mrCache serves Register: an exact or containing registration with enough
// access rights is reused. Unreferenced registrations stay registered (and
// their memory pinned) in an LRU of at most max entries.
type mrCache struct {
	mu      sync.Mutex
	dom     *Domain
	entries map[*mrEntry]struct{}
	// the idle LRU: most recently released first
	head, tail *mrEntry
	idleN      int
	max        int
	hits       uint64
	misses     uint64
}

// DefaultMRCacheSize is the number of unreferenced registrations a domain
// keeps; WEFT_TUNE's mrcache overrides it (0 disables keeping them).
const DefaultMRCacheSize = 64

func (c *mrCache) init(d *Domain) {
	c.dom = d
	c.entries = map[*mrEntry]struct{}{}
	t, _ := settings.Tune()
	c.max = int(t.MRCache)
}

// MRCacheStats reports cache hits and misses of Register on this domain.
func (d *Domain) MRCacheStats() (hits, misses uint64) {
	if d == nil {
		return 0, 0
	}
	d.cache.mu.Lock()
	defer d.cache.mu.Unlock()
	return d.cache.hits, d.cache.misses
}

// Register registers buf for access and returns a handle. Go memory is
// pinned until the registration is deregistered (MR.Close releases the
// handle; the registration may stay cached, see DefaultMRCacheSize).
// Registering a range that an existing registration covers is a lookup.
func (d *Domain) Register(buf []byte, access Access) (*MR, error) {
	e, err := d.acquire(buf, access)
	if err != nil {
		return nil, err
	}
	return &MR{e: e}, nil
}

// RegisterInto is Register into a handle of the caller's: m, zero or
// closed, is pointed at the registration of buf, so that a caller that
// registers the same buffers over and over and keeps its handles
// allocates nothing when the cache serves them. Close m as any handle
// (once per RegisterInto). A handle still open, one a Buffer owns or one
// RegisterDevice made is refused with ErrInvalid.
func (d *Domain) RegisterInto(m *MR, buf []byte, access Access) error {
	if m == nil {
		return fmt.Errorf("fabric: RegisterInto: nil handle: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned || m.device || (m.e != nil && !m.closed) {
		return fmt.Errorf("fabric: RegisterInto: handle still open or not the cache's: %w", ErrInvalid)
	}
	e, err := d.acquire(buf, access)
	if err != nil {
		return err
	}
	m.e, m.closed = e, false
	return nil
}

// acquire finds or makes the registration Register hands out and takes a
// reference on it.
func (d *Domain) acquire(buf []byte, access Access) (*mrEntry, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("fabric: Register: empty buffer: %w", ErrInvalid)
	}
	if access == 0 {
		return nil, fmt.Errorf("fabric: Register: no access rights: %w", ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: Register: %w", ErrClosed)
	}
	c := &d.cache
	p := uintptr(unsafe.Pointer(&buf[0]))
	end := p + uintptr(len(buf))
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := range c.entries {
		if e.base <= p && end <= e.base+uintptr(e.length) && e.access&access == access && !e.closed.Load() {
			if e.refs == 0 && e.idle {
				c.unlink(e)
			}
			e.refs++
			c.hits++
			return e, nil
		}
	}
	c.misses++
	e, err := d.register(buf, access, true)
	if err != nil {
		return nil, err
	}
	e.refs = 1
	c.entries[e] = struct{}{}
	forget := e.onClose // drops the span before the memory is unpinned
	e.onClose = func() error {
		_ = forget()
		e.pin.Unpin()
		c.mu.Lock()
		delete(c.entries, e)
		if e.idle {
			c.unlink(e)
		}
		c.mu.Unlock()
		return nil
	}
	return e, nil
}

// requestedKey is the key a registration asks for: one of the domain's
// own, or 0 where the provider chooses (FI_MR_PROV_KEY).
func (d *Domain) requestedKey() uint64 {
	if d.provKey {
		return 0
	}
	return d.key()
}

// register makes one libfabric registration (no cache).
func (d *Domain) register(buf []byte, access Access, pin bool) (*mrEntry, error) {
	e := &mrEntry{dom: d, base: uintptr(unsafe.Pointer(&buf[0])), length: len(buf), access: access}
	if pin {
		e.pin.Pin(&buf[0])
	}
	key := d.requestedKey()
	var fid C.uintptr_t
	var ckey C.uint64_t
	var cdesc C.uintptr_t
	ret := C.weft_mr_reg(C.uintptr_t(d.fid), C.uintptr_t(e.base), C.size_t(len(buf)), C.uint64_t(access), C.uint64_t(key), &fid, &ckey, &cdesc)
	if ret != 0 {
		e.pin.Unpin()
		return nil, fmt.Errorf("fabric: register %d bytes: %w", len(buf), mkErr("fi_mr_reg", int(ret)))
	}
	e.key, e.desc = uint64(ckey), Desc(cdesc)
	e.init("mr", uintptr(fid), orderMem)
	d.spans.add(e.base, e.length)
	e.onClose = func() error { d.spans.remove(e.base, e.length); return nil }
	if err := d.adopt(&e.obj); err != nil {
		e.close()
		e.pin.Unpin()
		return nil, err
	}
	return e, nil
}

// pushFront puts e, just released, at the head of the idle LRU. Caller
// holds c.mu.
func (c *mrCache) pushFront(e *mrEntry) {
	e.prev, e.next, e.idle = nil, c.head, true
	if c.head != nil {
		c.head.prev = e
	} else {
		c.tail = e
	}
	c.head = e
	c.idleN++
}

// unlink takes idle entry e out of the LRU. Caller holds c.mu.
func (c *mrCache) unlink(e *mrEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next, e.idle = nil, nil, false
	c.idleN--
}

// release drops one reference; unreferenced entries are kept in the LRU
// up to max and deregistered beyond it. Called with c.mu not held.
func (c *mrCache) release(e *mrEntry) error {
	c.mu.Lock()
	e.refs--
	if e.refs > 0 {
		c.mu.Unlock()
		return nil
	}
	c.pushFront(e)
	var evict []*mrEntry
	for c.idleN > c.max {
		old := c.tail
		c.unlink(old)
		delete(c.entries, old)
		evict = append(evict, old)
	}
	c.mu.Unlock()
	var err error
	for _, old := range evict {
		if e2 := old.close(); e2 != nil && err == nil {
			err = e2
		}
	}
	return err
}
