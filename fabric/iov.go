package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// MaxIOV is the most segments one vectored operation takes here; the
// provider's own limit is Info.IOVLimit (the smaller one applies).
const MaxIOV = C.WEFT_MAX_IOV

// IOV is one segment of a vectored operation: a buffer and its local
// descriptor. The same lifetime rules as for single-buffer operations
// apply to every segment (Alloc'd, registered, or pinned Go memory).
type IOV struct {
	Buf  []byte
	Desc Desc
}

// iovScratch holds the segments of the vectored operation in flight on
// an endpoint as (base, len, desc) integer triples: Go memory without Go
// pointers, passed to C only for the duration of the call. It lives in the
// Endpoint (allocated once) and is guarded by mu, so vectored operations do
// not allocate.
type iovScratch struct {
	mu   sync.Mutex
	segs [3 * MaxIOV]C.uint64_t
}

var errIOVs [numOps]error

func init() {
	for i := range errIOVs {
		errIOVs[i] = fmt.Errorf("fabric: %s: between 1 and %d segments, at most Info.IOVLimit: %w", opNames[i], MaxIOV, ErrInvalid)
	}
}

// pack fills the scratch; the caller holds e.iov.mu.
func (e *Endpoint) pack(op opID, iov []IOV) error {
	if len(iov) == 0 || len(iov) > MaxIOV || (e.info.IOVLimit > 0 && len(iov) > e.info.IOVLimit) {
		return errIOVs[op]
	}
	for i, s := range iov {
		e.iov.segs[3*i] = C.uint64_t(uintptr(unsafe.Pointer(unsafe.SliceData(s.Buf))))
		e.iov.segs[3*i+1] = C.uint64_t(len(s.Buf))
		e.iov.segs[3*i+2] = C.uint64_t(s.Desc)
	}
	return nil
}

// SendV posts a message send gathered from the segments (fi_sendv).
func (e *Endpoint) SendV(iov []IOV, dest Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opSendV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opSendV, iov); err != nil {
		return err
	}
	ret := C.weft_sendv(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(dest), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opSendV, ret)
}

// RecvV posts a receive scattered into the segments (fi_recvv).
func (e *Endpoint) RecvV(iov []IOV, src Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opRecvV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opRecvV, iov); err != nil {
		return err
	}
	ret := C.weft_recvv(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(src), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opRecvV, ret)
}

// TSendV is TSend gathered from the segments (fi_tsendv).
func (e *Endpoint) TSendV(iov []IOV, dest Addr, tag uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opTSendV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opTSendV, iov); err != nil {
		return err
	}
	ret := C.weft_tsendv(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(dest), C.uint64_t(tag), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opTSendV, ret)
}

// TRecvV is TRecv scattered into the segments (fi_trecvv).
func (e *Endpoint) TRecvV(iov []IOV, src Addr, tag, ignore uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opTRecvV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opTRecvV, iov); err != nil {
		return err
	}
	ret := C.weft_trecvv(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(src), C.uint64_t(tag), C.uint64_t(ignore), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opTRecvV, ret)
}

// WriteV writes the segments, gathered, to the contiguous remote range
// starting at raddr (fi_writev).
func (e *Endpoint) WriteV(iov []IOV, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opWriteV]
	}
	if raddr == noAddr {
		return errNoAddr[opWriteV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opWriteV, iov); err != nil {
		return err
	}
	ret := C.weft_writev(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opWriteV, ret)
}

// ReadV reads the contiguous remote range at raddr, scattered into the
// segments (fi_readv).
func (e *Endpoint) ReadV(iov []IOV, src Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opReadV]
	}
	if raddr == noAddr {
		return errNoAddr[opReadV]
	}
	e.iov.mu.Lock()
	defer e.iov.mu.Unlock()
	if err := e.pack(opReadV, iov); err != nil {
		return err
	}
	ret := C.weft_readv(C.uintptr_t(e.fid), &e.iov.segs[0], C.size_t(len(iov)), C.uint64_t(src), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx))
	runtime.KeepAlive(iov)
	return opErr(opReadV, ret)
}
