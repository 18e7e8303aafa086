package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
)

func atomicCount(op opID, buf []byte, dt Datatype) (int, error) {
	sz := dt.Size()
	if sz == 0 || len(buf) == 0 || len(buf)%sz != 0 {
		return 0, fmt.Errorf("fabric: %s: buffer of %d bytes is not a whole number of datatype %d elements: %w", opNames[op], len(buf), int(dt), ErrInvalid)
	}
	return len(buf) / sz, nil
}

// Atomic applies op with the elements of buf to the peer's memory at raddr
// (fi_atomic). len(buf) must be a multiple of dt.Size().
func (e *Endpoint) Atomic(buf []byte, desc Desc, dt Datatype, op AtomicOp, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opAtomic]
	}
	if raddr == noAddr {
		return errNoAddr[opAtomic]
	}
	n, err := atomicCount(opAtomic, buf, dt)
	if err != nil {
		return err
	}
	return opErr(opAtomic, C.weft_atomic(C.uintptr_t(e.fid), ptr(buf), C.size_t(n), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.int(dt), C.int(op), C.uint64_t(ctx)))
}

// AtomicMsg is Atomic with operation flags (fi_atomicmsg): OpDeliveryComplete
// makes the completion mean "applied at the target", OpFence, OpCompletion,
// OpInject, OpTransmitComplete.
func (e *Endpoint) AtomicMsg(buf []byte, desc Desc, dt Datatype, op AtomicOp, dest Addr, raddr, key uint64, ctx uint64, flags OpFlag) error {
	if gone(e.handle()) {
		return closeds[opAtomicMsg]
	}
	if raddr == noAddr {
		return errNoAddr[opAtomicMsg]
	}
	n, err := atomicCount(opAtomicMsg, buf, dt)
	if err != nil {
		return err
	}
	return opErr(opAtomicMsg, C.weft_atomicmsg(C.uintptr_t(e.fid), ptr(buf), C.size_t(n), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.int(dt), C.int(op), C.uint64_t(ctx), C.uint64_t(flags)))
}

// InjectAtomic is Atomic without a completion; buf is copied before it
// returns and must not exceed Info.InjectSize.
func (e *Endpoint) InjectAtomic(buf []byte, dt Datatype, op AtomicOp, dest Addr, raddr, key uint64) error {
	if gone(e.handle()) {
		return closeds[opInjectAtomic]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opInjectAtomic]
	}
	if raddr == noAddr {
		return errNoAddr[opInjectAtomic]
	}
	n, err := atomicCount(opInjectAtomic, buf, dt)
	if err != nil {
		return err
	}
	return opErr(opInjectAtomic, C.weft_inject_atomic(C.uintptr_t(e.fid), ptr(buf), C.size_t(n), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.int(dt), C.int(op)))
}

// FetchAtomic applies op and returns the previous remote values in result
// (same length as buf). For OpRead buf's contents are ignored.
func (e *Endpoint) FetchAtomic(buf []byte, desc Desc, result []byte, rdesc Desc, dt Datatype, op AtomicOp, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opFetchAtomic]
	}
	if raddr == noAddr {
		return errNoAddr[opFetchAtomic]
	}
	n, err := atomicCount(opFetchAtomic, buf, dt)
	if err != nil {
		return err
	}
	if len(result) < len(buf) {
		return fmt.Errorf("fabric: fi_fetch_atomic: result of %d bytes < %d: %w", len(result), len(buf), ErrInvalid)
	}
	return opErr(opFetchAtomic, C.weft_fetch_atomic(C.uintptr_t(e.fid), ptr(buf), C.size_t(n), C.uintptr_t(desc), ptr(result), C.uintptr_t(rdesc), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.int(dt), C.int(op), C.uint64_t(ctx)))
}

// CompareAtomic applies a compare operation (OpCswap, ...): where the
// remote value compares to compare, it is replaced by buf's value; result
// receives the previous remote values.
func (e *Endpoint) CompareAtomic(buf []byte, desc Desc, compare []byte, cdesc Desc, result []byte, rdesc Desc, dt Datatype, op AtomicOp, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opCompareAtomic]
	}
	if raddr == noAddr {
		return errNoAddr[opCompareAtomic]
	}
	n, err := atomicCount(opCompareAtomic, buf, dt)
	if err != nil {
		return err
	}
	if len(result) < len(buf) || len(compare) < len(buf) {
		return fmt.Errorf("fabric: fi_compare_atomic: compare/result shorter than buf: %w", ErrInvalid)
	}
	return opErr(opCompareAtomic, C.weft_compare_atomic(C.uintptr_t(e.fid), ptr(buf), C.size_t(n), C.uintptr_t(desc), ptr(compare), C.uintptr_t(cdesc), ptr(result), C.uintptr_t(rdesc), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.int(dt), C.int(op), C.uint64_t(ctx)))
}

func (e *Endpoint) atomicValid(kind int, dt Datatype, op AtomicOp) (int, error) {
	if gone(e.handle()) {
		return 0, fmt.Errorf("fabric: atomicvalid: %w", ErrClosed)
	}
	var n C.size_t
	if ret := C.weft_atomicvalid(C.uintptr_t(e.fid), C.int(kind), C.int(dt), C.int(op), &n); ret != 0 {
		return 0, fmt.Errorf("fabric: atomic op %d on datatype %d: %w: %w", int(op), int(dt), ErrNotSupported, mkErr("fi_atomicvalid", int(ret)))
	}
	if n == 0 {
		return 0, fmt.Errorf("fabric: atomic op %d on datatype %d: %w", int(op), int(dt), ErrNotSupported)
	}
	return int(n), nil
}

// AtomicValid reports how many elements one Atomic of dt/op may carry, or
// an error matching ErrNotSupported when the provider does not support it
// (or atomics were not granted).
func (e *Endpoint) AtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return e.atomicValid(0, dt, op)
}

// FetchAtomicValid is AtomicValid for FetchAtomic.
func (e *Endpoint) FetchAtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return e.atomicValid(1, dt, op)
}

// CompareAtomicValid is AtomicValid for CompareAtomic.
func (e *Endpoint) CompareAtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return e.atomicValid(2, dt, op)
}
