package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Endpoint is an enabled endpoint (fi_endpoint) bound to one CQ for both
// transmit and receive and to an AV.
//
// Every data-transfer method is exactly one call into C: a fast call (see
// SetFastCall) when the endpoint has a C stack, the stack is free and the
// buffer lies in a live registration of the domain, else a cgo call. ctx
// is an integer handle returned in the Completion (never a Go pointer).
// Buffers must stay valid until the completion: Alloc'd (mmap) memory, registered memory
// (Register pins it), or Go memory the caller pinned. Inject variants copy
// the data before returning and produce no completion. A method returns an
// error matching ErrAgain when the provider is out of resources: read the
// CQ and retry. Operations must not run concurrently with Close.
type Endpoint struct {
	*obj
	dom  *Domain
	info *Info
	cq   *CQ
	av   *AV
	cfg  epConfig // bound counters and CQs, kept reachable
	// injectMax is Info.InjectSize: larger injects are refused before C
	// (ofi_rxm answers them with EAGAIN forever, shm accepts them).
	injectMax int
	iov       iovScratch // vectored operations
}

// EndpointOption configures OpenEndpoint.
type EndpointOption func(*epConfig)

type epConfig struct {
	counters []cntrBind
}

type cntrBind struct {
	c      *Counter
	events Access
}

// WithCounter binds a counter to the endpoint for the given events:
// AccessSend, AccessRecv, AccessRead, AccessWrite (local completions) and
// AccessRemoteRead, AccessRemoteWrite (remote accesses, needs CapRMAEvent).
func WithCounter(c *Counter, events Access) EndpointOption {
	return func(cfg *epConfig) { cfg.counters = append(cfg.counters, cntrBind{c, events}) }
}

// OpenEndpoint opens an endpoint described by info, binds its transmit and
// receive completions to cq and its addressing to av, and enables it.
func (d *Domain) OpenEndpoint(info *Info, cq *CQ, av *AV, opts ...EndpointOption) (*Endpoint, error) {
	if info == nil || info.c == 0 {
		return nil, fmt.Errorf("fabric: OpenEndpoint: nil info: %w", ErrInvalid)
	}
	if cq == nil {
		return nil, fmt.Errorf("fabric: OpenEndpoint: nil CQ: %w", ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: OpenEndpoint: %w", ErrClosed)
	}
	var cfg epConfig
	for _, o := range opts {
		o(&cfg)
	}
	if gone(cq.handle()) || (av != nil && gone(av.handle())) {
		return nil, fmt.Errorf("fabric: OpenEndpoint: CQ or AV: %w", ErrClosed)
	}
	if info.Provider == "shm" {
		sweepStaleShm()
	}
	var fid C.uintptr_t
	ret := C.weft_ep_open(C.uintptr_t(d.fid), C.uintptr_t(info.c), &fid)
	runtime.KeepAlive(info)
	if ret != 0 {
		return nil, fmt.Errorf("fabric: open endpoint (%s): %w", info.Provider, mkErr("fi_endpoint", int(ret)))
	}
	e := &Endpoint{obj: new(obj), dom: d, info: info, cq: cq, av: av, cfg: cfg, injectMax: info.InjectSize}
	e.fast = newFastStack(&d.cfg, info.Provider)
	e.init("ep", uintptr(fid), orderEP)
	fail := func(what string, ret C.int) (*Endpoint, error) {
		err := mkErr(what, int(ret))
		e.close()
		return nil, fmt.Errorf("fabric: open endpoint (%s): %w", info.Provider, err)
	}
	if ret := C.weft_ep_bind(fid, C.uintptr_t(cq.fid), C.FI_TRANSMIT|C.FI_RECV); ret != 0 {
		return fail("fi_ep_bind(cq)", ret)
	}
	if av != nil {
		if ret := C.weft_ep_bind(fid, C.uintptr_t(av.fid), 0); ret != 0 {
			return fail("fi_ep_bind(av)", ret)
		}
	}
	for _, b := range cfg.counters {
		if gone(b.c.handle()) {
			e.close()
			return nil, fmt.Errorf("fabric: open endpoint: counter: %w", ErrClosed)
		}
		if ret := C.weft_ep_bind(fid, C.uintptr_t(b.c.fid), C.uint64_t(b.events)); ret != 0 {
			return fail("fi_ep_bind(cntr)", ret)
		}
	}
	if ret := C.weft_ep_enable(fid); ret != 0 {
		return fail("fi_enable", ret)
	}
	if err := d.adopt(e.obj); err != nil {
		e.close()
		return nil, err
	}
	backstop(e, e.obj)
	return e, nil
}

// Info returns the configuration the endpoint was opened with.
func (e *Endpoint) Info() *Info {
	if e == nil {
		return nil
	}
	return e.info
}

// Name returns the endpoint's address (fi_getname), to be inserted in
// peers' AVs.
func (e *Endpoint) Name() ([]byte, error) {
	if gone(e.handle()) {
		return nil, fmt.Errorf("fabric: Endpoint.Name: %w", ErrClosed)
	}
	buf := make([]byte, 256)
	for {
		n := C.size_t(len(buf))
		ret := C.weft_ep_getname(C.uintptr_t(e.fid), unsafe.Pointer(&buf[0]), &n)
		if ret == -C.FI_ETOOSMALL && int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		if ret != 0 {
			return nil, fmt.Errorf("fabric: Endpoint.Name: %w", mkErr("fi_getname", int(ret)))
		}
		return buf[:n], nil
	}
}

// Close closes the endpoint. It is idempotent; operations after Close
// return errors matching ErrClosed.
func (e *Endpoint) Close() error {
	if e == nil {
		return nil
	}
	return e.close()
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// Send posts a message send (fi_send).
func (e *Endpoint) Send(buf []byte, desc Desc, dest Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opSend]
	}
	if ret, ok := e.postFast(SendOp(buf, desc, dest, ctx)); ok {
		return opErr(opSend, ret)
	}
	return opErr(opSend, C.weft_send(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(ctx)))
}

// SendData posts a send that carries 64 bits of remote CQ data (needs
// Info.CQDataSize > 0).
func (e *Endpoint) SendData(buf []byte, desc Desc, data uint64, dest Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opSendData]
	}
	if ret, ok := e.postFast(SendDataOp(buf, desc, data, dest, ctx)); ok {
		return opErr(opSendData, ret)
	}
	return opErr(opSendData, C.weft_senddata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(ctx)))
}

// SendDataDevice posts a send of n bytes at address addr with 64 bits of
// remote CQ data, from memory that is not Go's: device memory registered
// with Domain.RegisterDevice (desc), which the provider reads itself
// (FI_HMEM), or C/mmap memory. The memory must stay valid until the send
// completes.
func (e *Endpoint) SendDataDevice(addr uint64, n int, desc Desc, data uint64, dest Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opSendData]
	}
	if addr == 0 || n < 0 {
		return fmt.Errorf("fabric: SendDataDevice(%#x, %d): %w", addr, n, ErrInvalid)
	}
	return opErr(opSendData, C.weft_senddata_at(C.uintptr_t(e.fid), C.uint64_t(addr), C.size_t(n), C.uintptr_t(desc), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(ctx)))
}

// Recv posts a message receive from src (AddrUnspec = any source).
func (e *Endpoint) Recv(buf []byte, desc Desc, src Addr, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opRecv]
	}
	if ret, ok := e.postFast(RecvOp(buf, desc, src, ctx)); ok {
		return opErr(opRecv, ret)
	}
	return opErr(opRecv, C.weft_recv(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(src), C.uint64_t(ctx)))
}

// Inject sends a small message (≤ Info.InjectSize) without a completion.
func (e *Endpoint) Inject(buf []byte, dest Addr) error {
	if gone(e.handle()) {
		return closeds[opInject]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opInject]
	}
	if ret, ok := e.postFast(InjectOp(buf, dest)); ok {
		return opErr(opInject, ret)
	}
	return opErr(opInject, C.weft_inject(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(dest)))
}

// InjectData is Inject with remote CQ data.
func (e *Endpoint) InjectData(buf []byte, data uint64, dest Addr) error {
	if gone(e.handle()) {
		return closeds[opInjectData]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opInjectData]
	}
	if ret, ok := e.postFast(InjectDataOp(buf, data, dest)); ok {
		return opErr(opInjectData, ret)
	}
	return opErr(opInjectData, C.weft_injectdata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(data), C.uint64_t(dest)))
}

// TSend posts a tagged send.
func (e *Endpoint) TSend(buf []byte, desc Desc, dest Addr, tag uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opTSend]
	}
	if ret, ok := e.postFast(TSendOp(buf, desc, dest, tag, ctx)); ok {
		return opErr(opTSend, ret)
	}
	return opErr(opTSend, C.weft_tsend(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(tag), C.uint64_t(ctx)))
}

// TSendData posts a tagged send carrying remote CQ data.
func (e *Endpoint) TSendData(buf []byte, desc Desc, data uint64, dest Addr, tag uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opTSendData]
	}
	if ret, ok := e.postFast(TSendDataOp(buf, desc, data, dest, tag, ctx)); ok {
		return opErr(opTSendData, ret)
	}
	return opErr(opTSendData, C.weft_tsenddata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(tag), C.uint64_t(ctx)))
}

// TInject sends a small tagged message without a completion.
func (e *Endpoint) TInject(buf []byte, dest Addr, tag uint64) error {
	if gone(e.handle()) {
		return closeds[opTInject]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opTInject]
	}
	if ret, ok := e.postFast(TInjectOp(buf, dest, tag)); ok {
		return opErr(opTInject, ret)
	}
	return opErr(opTInject, C.weft_tinject(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(dest), C.uint64_t(tag)))
}

// TInjectData is TInject with remote CQ data.
func (e *Endpoint) TInjectData(buf []byte, data uint64, dest Addr, tag uint64) error {
	if gone(e.handle()) {
		return closeds[opTInjectData]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opTInjectData]
	}
	if ret, ok := e.postFast(TInjectDataOp(buf, data, dest, tag)); ok {
		return opErr(opTInjectData, ret)
	}
	return opErr(opTInjectData, C.weft_tinjectdata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(tag)))
}

// TRecv posts a tagged receive matching messages whose tag equals tag in
// every bit not set in ignore, from src (AddrUnspec = any source; a
// specific source needs CapDirectedRecv).
func (e *Endpoint) TRecv(buf []byte, desc Desc, src Addr, tag, ignore uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opTRecv]
	}
	if ret, ok := e.postFast(TRecvOp(buf, desc, src, tag, ignore, ctx)); ok {
		return opErr(opTRecv, ret)
	}
	return opErr(opTRecv, C.weft_trecv(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(src), C.uint64_t(tag), C.uint64_t(ignore), C.uint64_t(ctx)))
}

// Write posts an RMA write of buf to raddr (MR.RemoteAddr on the peer) in
// the peer's region with key.
func (e *Endpoint) Write(buf []byte, desc Desc, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opWrite]
	}
	if raddr == noAddr {
		return errNoAddr[opWrite]
	}
	if ret, ok := e.postFast(WriteOp(buf, desc, dest, raddr, key, ctx)); ok {
		return opErr(opWrite, ret)
	}
	return opErr(opWrite, C.weft_write(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx)))
}

// WriteData is Write that also delivers data in a completion at the target
// (Flags has CompRemoteCQData). Needs Info.CQDataSize > 0.
func (e *Endpoint) WriteData(buf []byte, desc Desc, data uint64, dest Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opWriteData]
	}
	if raddr == noAddr {
		return errNoAddr[opWriteData]
	}
	if ret, ok := e.postFast(WriteDataOp(buf, desc, data, dest, raddr, key, ctx)); ok {
		return opErr(opWriteData, ret)
	}
	return opErr(opWriteData, C.weft_writedata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx)))
}

// WriteMsg is Write with operation flags (fi_writemsg): OpFence,
// OpDeliveryComplete, OpTransmitComplete, OpInjectComplete, OpCompletion,
// OpInject. Use WriteMsgData for OpRemoteCQData.
func (e *Endpoint) WriteMsg(buf []byte, desc Desc, dest Addr, raddr, key uint64, ctx uint64, flags OpFlag) error {
	return e.WriteMsgData(buf, desc, 0, dest, raddr, key, ctx, flags)
}

// WriteMsgData is WriteMsg carrying remote CQ data (set OpRemoteCQData in
// flags for the target to see it).
func (e *Endpoint) WriteMsgData(buf []byte, desc Desc, data uint64, dest Addr, raddr, key uint64, ctx uint64, flags OpFlag) error {
	if gone(e.handle()) {
		return closeds[opWriteMsg]
	}
	if raddr == noAddr {
		return errNoAddr[opWriteMsg]
	}
	if ret, ok := e.postFast(WriteMsgOp(buf, desc, data, dest, raddr, key, ctx, flags)); ok {
		return opErr(opWriteMsg, ret)
	}
	return opErr(opWriteMsg, C.weft_writemsg(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx), C.uint64_t(flags)))
}

// InjectWrite writes a small buffer (≤ Info.InjectSize) without a
// completion.
func (e *Endpoint) InjectWrite(buf []byte, dest Addr, raddr, key uint64) error {
	if gone(e.handle()) {
		return closeds[opInjectWrite]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opInjectWrite]
	}
	if raddr == noAddr {
		return errNoAddr[opInjectWrite]
	}
	if ret, ok := e.postFast(InjectWriteOp(buf, dest, raddr, key)); ok {
		return opErr(opInjectWrite, ret)
	}
	return opErr(opInjectWrite, C.weft_inject_write(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key)))
}

// InjectWriteData is InjectWrite that also delivers data in a completion
// at the target (Flags has CompRemoteCQData; needs Info.CQDataSize > 0).
// buf may be empty: the write then carries only the CQ data.
func (e *Endpoint) InjectWriteData(buf []byte, data uint64, dest Addr, raddr, key uint64) error {
	if gone(e.handle()) {
		return closeds[opInjectWriteData]
	}
	if len(buf) > e.injectMax {
		return errInjectSize[opInjectWriteData]
	}
	if raddr == noAddr {
		return errNoAddr[opInjectWriteData]
	}
	if ret, ok := e.postFast(InjectWriteDataOp(buf, data, dest, raddr, key)); ok {
		return opErr(opInjectWriteData, ret)
	}
	return opErr(opInjectWriteData, C.weft_inject_writedata(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(raddr), C.uint64_t(key)))
}

// Read posts an RMA read from the peer's raddr into buf.
func (e *Endpoint) Read(buf []byte, desc Desc, src Addr, raddr, key uint64, ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opRead]
	}
	if raddr == noAddr {
		return errNoAddr[opRead]
	}
	if ret, ok := e.postFast(ReadOp(buf, desc, src, raddr, key, ctx)); ok {
		return opErr(opRead, ret)
	}
	return opErr(opRead, C.weft_read(C.uintptr_t(e.fid), ptr(buf), C.size_t(len(buf)), C.uintptr_t(desc), C.uint64_t(src), C.uint64_t(raddr), C.uint64_t(key), C.uint64_t(ctx)))
}

// Cancel cancels a posted receive (or other operation) by its ctx handle.
// A canceled operation completes with a *CQError matching ErrCanceled.
func (e *Endpoint) Cancel(ctx uint64) error {
	if gone(e.handle()) {
		return closeds[opCancel]
	}
	return opErr(opCancel, C.weft_cancel(C.uintptr_t(e.fid), C.uint64_t(ctx)))
}
