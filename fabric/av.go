package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// AV is an address vector (fi_av, FI_AV_TABLE): inserting the same
// addresses in the same order yields the same Addr values in every process
// (0, 1, 2, ...).
type AV struct {
	*obj
	dom  *Domain
	mu   sync.Mutex
	used map[Addr]bool // inserted and not removed; guards Lookup/Remove against providers that do not bounds-check
}

// OpenAV opens a table address vector sized for count addresses (a hint;
// 0 = provider default).
func (d *Domain) OpenAV(count int) (*AV, error) {
	if count < 0 {
		return nil, fmt.Errorf("fabric: OpenAV count %d: %w", count, ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: OpenAV: %w", ErrClosed)
	}
	var fid C.uintptr_t
	if ret := C.weft_av_open(C.uintptr_t(d.fid), C.size_t(count), &fid); ret != 0 {
		return nil, fmt.Errorf("fabric: open AV: %w", mkErr("fi_av_open", int(ret)))
	}
	av := &AV{obj: new(obj), dom: d, used: map[Addr]bool{}}
	av.init("av", uintptr(fid), orderQueue)
	if err := d.adopt(av.obj); err != nil {
		av.close()
		return nil, err
	}
	backstop(av, av.obj)
	return av, nil
}

// Insert adds endpoint names (from Endpoint.Name) and
// returns their addresses, in order. An address the provider cannot
// resolve makes Insert fail with an error matching ErrAddrNotAvail.
func (a *AV) Insert(addrs ...[]byte) ([]Addr, error) {
	if gone(a.handle()) {
		return nil, fmt.Errorf("fabric: AV.Insert: %w", ErrClosed)
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	// One fi_av_insert per name: providers walk a packed array either with
	// a fixed stride or, for FI_ADDR_STR (shm), string by string, and
	// shm's names vary in length. Insert is not on the hot path.
	out := make([]Addr, len(addrs))
	for i, b := range addrs {
		if len(b) == 0 {
			return nil, fmt.Errorf("fabric: AV.Insert: address %d is empty: %w", i, ErrInvalid)
		}
		if a.dom.info.strAddr && b[len(b)-1] != 0 {
			b = append(append([]byte(nil), b...), 0)
		}
		ret := C.weft_av_insert(C.uintptr_t(a.fid), unsafe.Pointer(&b[0]), 1, (*C.uint64_t)(unsafe.Pointer(&out[i])))
		if ret < 0 {
			return nil, fmt.Errorf("fabric: AV.Insert: address %d: %w", i, mkErr("fi_av_insert", int(ret)))
		}
		if ret != 1 {
			return nil, fmt.Errorf("fabric: AV.Insert: address %d not inserted: %w", i, ErrAddrNotAvail)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var bad error
	for i, ad := range out {
		if ad == AddrUnspec {
			if bad == nil {
				bad = fmt.Errorf("fabric: AV.Insert: address %d not available: %w", i, ErrAddrNotAvail)
			}
			continue
		}
		a.used[ad] = true
	}
	return out, bad
}

// Lookup returns the name stored at addr.
func (a *AV) Lookup(addr Addr) ([]byte, error) {
	if gone(a.handle()) {
		return nil, fmt.Errorf("fabric: AV.Lookup: %w", ErrClosed)
	}
	a.mu.Lock()
	ok := a.used[addr]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fabric: AV.Lookup(%d): not in the AV: %w", addr, ErrAddrNotAvail)
	}
	buf := make([]byte, 256)
	for {
		n := C.size_t(len(buf))
		ret := C.weft_av_lookup(C.uintptr_t(a.fid), C.uint64_t(addr), unsafe.Pointer(&buf[0]), &n)
		if ret != 0 {
			return nil, fmt.Errorf("fabric: AV.Lookup(%d): %w", addr, mkErr("fi_av_lookup", int(ret)))
		}
		if int(n) <= len(buf) {
			return buf[:n], nil
		}
		buf = make([]byte, n)
	}
}

// Remove removes addresses from the vector.
func (a *AV) Remove(addrs ...Addr) error {
	if gone(a.handle()) {
		return fmt.Errorf("fabric: AV.Remove: %w", ErrClosed)
	}
	if len(addrs) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ad := range addrs {
		if !a.used[ad] {
			return fmt.Errorf("fabric: AV.Remove(%d): not in the AV: %w", ad, ErrAddrNotAvail)
		}
	}
	cp := append([]Addr(nil), addrs...)
	if ret := C.weft_av_remove(C.uintptr_t(a.fid), (*C.uint64_t)(unsafe.Pointer(&cp[0])), C.size_t(len(cp))); ret != 0 {
		return fmt.Errorf("fabric: AV.Remove: %w", mkErr("fi_av_remove", int(ret)))
	}
	for _, ad := range addrs {
		delete(a.used, ad)
	}
	return nil
}

// Close closes the AV; endpoints bound to it must be closed first. It is
// idempotent.
func (a *AV) Close() error {
	if a == nil {
		return nil
	}
	return a.close()
}
