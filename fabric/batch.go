package fabric

/*
#include "shim.h"
#cgo noescape weft_post_batch
#cgo nocallback weft_post_batch
#cgo noescape weft_post_read
#cgo nocallback weft_post_read
#cgo noescape weft_cq_wait_word
#cgo nocallback weft_cq_wait_word
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// OpKind selects the libfabric call an Op makes in Endpoint.PostBatch and
// Endpoint.PostAndRead.
type OpKind uint64

// Operation kinds. The zero value is invalid. Each kind takes the fields
// named next to it; the others are ignored.
const (
	OpKindRecv            OpKind = iota + 1 // fi_recv: Buf, Len, Desc, Addr (source; AddrUnspec = any), Ctx
	OpKindSend                              // fi_send: Buf, Len, Desc, Addr, Ctx
	OpKindSendData                          // fi_senddata: Send's fields and Data
	OpKindInject                            // fi_inject: Buf, Len (≤ Info.InjectSize), Addr; no completion
	OpKindInjectData                        // fi_injectdata: Inject's fields and Data
	OpKindTRecv                             // fi_trecv: Buf, Len, Desc, Addr, Tag, Ignore, Ctx
	OpKindTSend                             // fi_tsend: Buf, Len, Desc, Addr, Tag, Ctx
	OpKindTSendData                         // fi_tsenddata: TSend's fields and Data
	OpKindTInject                           // fi_tinject: Buf, Len (≤ Info.InjectSize), Addr, Tag; no completion
	OpKindTInjectData                       // fi_tinjectdata: TInject's fields and Data
	OpKindWrite                             // fi_write: Buf, Len, Desc, Addr, RAddr, Key, Ctx
	OpKindWriteData                         // fi_writedata: Write's fields and Data
	OpKindInjectWrite                       // fi_inject_write: Buf, Len (≤ Info.InjectSize), Addr, RAddr, Key; no completion
	OpKindRead                              // fi_read: Buf, Len, Desc, Addr (source), RAddr, Key, Ctx
	OpKindWriteMsg                          // fi_writemsg: Write's fields, Data, Flags (OpFence, OpDeliveryComplete, OpInject, ...)
	OpKindInjectWriteData                   // fi_inject_writedata: InjectWrite's fields and Data (Len may be 0); no completion at the origin
	numOpKinds
)

// kindOps maps an OpKind to the operation id used for its errors.
var kindOps = [numOpKinds]opID{
	0, opRecv, opSend, opSendData, opInject, opInjectData, opTRecv, opTSend,
	opTSendData, opTInject, opTInjectData, opWrite, opWriteData, opInjectWrite, opRead, opWriteMsg,
	opInjectWriteData,
}

var kindNames = [numOpKinds]string{
	"invalid", "Recv", "Send", "SendData", "Inject", "InjectData", "TRecv", "TSend",
	"TSendData", "TInject", "TInjectData", "Write", "WriteData", "InjectWrite", "Read", "WriteMsg",
	"InjectWriteData",
}

// String returns the kind's name ("TInject", ...).
func (k OpKind) String() string {
	if k >= numOpKinds {
		return fmt.Sprintf("OpKind(%d)", uint64(k))
	}
	return kindNames[k]
}

// Op is one operation for Endpoint.PostBatch and Endpoint.PostAndRead. Its
// layout is fixed (twelve 64-bit words, identical to the C struct weft_op),
// so a []Op goes to C as it is, with no conversion. Build one with the
// constructors (RecvOp, TInjectOp, WriteMsgOp, ...) or fill the fields
// directly; OpKind lists which fields each kind uses.
//
// Memory: Buf must point at memory that is not on the Go heap (a
// Domain.Alloc buffer, C or mmap memory) or at Go memory pinned with a
// runtime.Pinner, and, as for the single operations, stay valid until the
// operation's completion (inject kinds copy it before the call returns).
// The rule holds for inject kinds too, because the Buf pointer travels
// inside Go memory (the []Op): with cgo pointer checking on (the default,
// GODEBUG=cgocheck=1), an Op whose Buf points at unpinned Go memory makes
// the call panic with "cgo argument has Go pointer to unpinned Go pointer".
// The []Op itself, like out []Completion, is ordinary Go memory that C
// reads only during the call and never keeps. A batch whose buffers all lie
// in live registrations of the endpoint's domain may take the fast path
// (see SetFastCall), where no cgo check runs; any other batch goes through
// cgo and its check.
type Op struct {
	Kind   OpKind
	Flags  OpFlag         // OpKindWriteMsg: fi_writemsg flags
	Buf    unsafe.Pointer // local buffer; see Op for what it may point at
	Len    uintptr        // bytes at Buf
	Desc   Desc           // local descriptor (Buffer.Desc, MR.Desc) or 0
	Addr   Addr           // destination; source for receives and reads
	Tag    uint64         // tagged kinds
	Ignore uint64         // OpKindTRecv: tag bits to ignore
	Data   uint64         // *Data kinds and OpKindWriteMsg: remote CQ data
	RAddr  uint64         // RMA kinds: MR.RemoteAddr on the peer
	Key    uint64         // RMA kinds: the peer region's key
	Ctx    uint64         // handle returned in the Completion
}

// Compile-time check that Op is exactly twelve 64-bit words.
var (
	_ [unsafe.Sizeof(Op{}) - 96]byte
	_ [96 - unsafe.Sizeof(Op{})]byte
)

// The constructors build each Op in one literal: a value assembled from
// another constructor's result is copied with wide loads right after its
// narrow stores, which stalls on store forwarding on every call.

// RecvOp is an OpKindRecv of buf from src.
func RecvOp(buf []byte, desc Desc, src Addr, ctx uint64) Op {
	return Op{Kind: OpKindRecv, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: src, Ctx: ctx}
}

// SendOp is an OpKindSend of buf to dest.
func SendOp(buf []byte, desc Desc, dest Addr, ctx uint64) Op {
	return Op{Kind: OpKindSend, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Ctx: ctx}
}

// SendDataOp is an OpKindSendData of buf with remote CQ data.
func SendDataOp(buf []byte, desc Desc, data uint64, dest Addr, ctx uint64) Op {
	return Op{Kind: OpKindSendData, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Data: data, Ctx: ctx}
}

// InjectOp is an OpKindInject of buf to dest.
func InjectOp(buf []byte, dest Addr) Op {
	return Op{Kind: OpKindInject, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest}
}

// InjectDataOp is an OpKindInjectData of buf with remote CQ data.
func InjectDataOp(buf []byte, data uint64, dest Addr) Op {
	return Op{Kind: OpKindInjectData, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest, Data: data}
}

// TRecvOp is an OpKindTRecv of buf matching tag in the bits not set in
// ignore.
func TRecvOp(buf []byte, desc Desc, src Addr, tag, ignore, ctx uint64) Op {
	return Op{Kind: OpKindTRecv, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: src, Tag: tag, Ignore: ignore, Ctx: ctx}
}

// TSendOp is an OpKindTSend of buf with tag.
func TSendOp(buf []byte, desc Desc, dest Addr, tag, ctx uint64) Op {
	return Op{Kind: OpKindTSend, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Tag: tag, Ctx: ctx}
}

// TSendDataOp is an OpKindTSendData of buf with tag and remote CQ data.
func TSendDataOp(buf []byte, desc Desc, data uint64, dest Addr, tag, ctx uint64) Op {
	return Op{Kind: OpKindTSendData, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Tag: tag, Data: data, Ctx: ctx}
}

// TInjectOp is an OpKindTInject of buf with tag.
func TInjectOp(buf []byte, dest Addr, tag uint64) Op {
	return Op{Kind: OpKindTInject, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest, Tag: tag}
}

// TInjectDataOp is an OpKindTInjectData of buf with tag and remote CQ data.
func TInjectDataOp(buf []byte, data uint64, dest Addr, tag uint64) Op {
	return Op{Kind: OpKindTInjectData, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest, Tag: tag, Data: data}
}

// WriteOp is an OpKindWrite of buf to raddr in the peer's region key.
func WriteOp(buf []byte, desc Desc, dest Addr, raddr, key, ctx uint64) Op {
	return Op{Kind: OpKindWrite, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, RAddr: raddr, Key: key, Ctx: ctx}
}

// WriteDataOp is an OpKindWriteData: WriteOp with remote CQ data.
func WriteDataOp(buf []byte, desc Desc, data uint64, dest Addr, raddr, key, ctx uint64) Op {
	return Op{Kind: OpKindWriteData, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Data: data, RAddr: raddr, Key: key, Ctx: ctx}
}

// InjectWriteOp is an OpKindInjectWrite of buf to raddr in the peer's
// region key.
func InjectWriteOp(buf []byte, dest Addr, raddr, key uint64) Op {
	return Op{Kind: OpKindInjectWrite, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest, RAddr: raddr, Key: key}
}

// InjectWriteDataOp is an OpKindInjectWriteData: InjectWriteOp that also
// delivers data in a completion at the target (Flags has CompRemoteCQData;
// needs Info.CQDataSize > 0). buf may be empty: the write then carries
// only the CQ data.
func InjectWriteDataOp(buf []byte, data uint64, dest Addr, raddr, key uint64) Op {
	return Op{Kind: OpKindInjectWriteData, Buf: ptr(buf), Len: uintptr(len(buf)), Addr: dest, Data: data, RAddr: raddr, Key: key}
}

// ReadOp is an OpKindRead into buf from raddr in the peer's region key.
func ReadOp(buf []byte, desc Desc, src Addr, raddr, key, ctx uint64) Op {
	return Op{Kind: OpKindRead, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: src, RAddr: raddr, Key: key, Ctx: ctx}
}

// WriteMsgOp is an OpKindWriteMsg: a write with fi_writemsg flags, e.g.
// OpFence, OpDeliveryComplete, OpInject (then no completion unless
// OpCompletion is set and the buffer is copied at once), OpRemoteCQData
// (then data reaches the target's CQ).
func WriteMsgOp(buf []byte, desc Desc, data uint64, dest Addr, raddr, key, ctx uint64, flags OpFlag) Op {
	return Op{Kind: OpKindWriteMsg, Flags: flags, Buf: ptr(buf), Len: uintptr(len(buf)), Desc: desc, Addr: dest, Data: data, RAddr: raddr, Key: key, Ctx: ctx}
}

// maxBatchOps bounds one batch (the op index travels in 30 bits).
const maxBatchOps = 1 << 30

var (
	errBatchClosed  = fmt.Errorf("fabric: PostBatch: %w", ErrClosed)
	errBatchEmpty   = fmt.Errorf("fabric: PostBatch: empty batch: %w", ErrInvalid)
	errBatchCQ      = fmt.Errorf("fabric: PostAndRead: CQ: %w", ErrClosed)
	errBatchNilCQ   = fmt.Errorf("fabric: PostAndRead: nil CQ: %w", ErrInvalid)
	errWaitNilWord  = fmt.Errorf("fabric: CQ.WaitWord: nil word: %w", ErrInvalid)
	errWaitAlign    = fmt.Errorf("fabric: CQ.WaitWord: word not 8-byte aligned: %w", ErrInvalid)
	errBatchTooMany = fmt.Errorf("fabric: PostBatch: more than 2^30 operations: %w", ErrInvalid)
)

// check validates ops in Go before any of them is posted: a known Kind, an
// inject no larger than Info.InjectSize, an RMA address other than
// MR.RemoteAddr's "outside" value, a Buf for a non-empty Len.
func (e *Endpoint) check(ops []Op) error {
	if len(ops) >= maxBatchOps {
		return errBatchTooMany
	}
	for i := range ops {
		o := &ops[i]
		if o.Kind == 0 || o.Kind >= numOpKinds {
			return fmt.Errorf("fabric: PostBatch: op %d: unknown kind %d: %w", i, uint64(o.Kind), ErrInvalid)
		}
		if o.Buf == nil && o.Len != 0 {
			return fmt.Errorf("fabric: PostBatch: op %d (%v): nil Buf with Len %d: %w", i, o.Kind, o.Len, ErrInvalid)
		}
		switch o.Kind {
		case OpKindInject, OpKindInjectData, OpKindTInject, OpKindTInjectData, OpKindInjectWrite, OpKindInjectWriteData:
			if o.Len > uintptr(e.injectMax) {
				return fmt.Errorf("fabric: PostBatch: op %d (%v): %d bytes > inject size %d: %w", i, o.Kind, o.Len, e.injectMax, ErrInvalid)
			}
		case OpKindWriteMsg:
			if o.Flags&OpInject != 0 && o.Len > uintptr(e.injectMax) {
				return fmt.Errorf("fabric: PostBatch: op %d (%v with OpInject): %d bytes > inject size %d: %w", i, o.Kind, o.Len, e.injectMax, ErrInvalid)
			}
		}
		switch o.Kind {
		case OpKindWrite, OpKindWriteData, OpKindInjectWrite, OpKindRead, OpKindWriteMsg, OpKindInjectWriteData:
			if o.RAddr == noAddr {
				return fmt.Errorf("fabric: PostBatch: op %d (%v): remote address is MR.RemoteAddr's \"outside the region\" value: %w", i, o.Kind, ErrInvalid)
			}
		}
	}
	return nil
}

// postErr converts the failure of op i (code is a positive libfabric errno).
// EAGAIN is the operation's preallocated error, so the retry path does not
// allocate.
func postErr(ops []Op, i int, code int) error {
	op := kindOps[ops[i].Kind]
	if code == int(C.FI_EAGAIN) {
		return agains[op]
	}
	return fmt.Errorf("fabric: PostBatch: op %d (%v): %w", i, ops[i].Kind, mkErr(opNames[op], -code))
}

func decodeNeg(ret C.int64_t) (int, int) {
	v := uint64(-int64(ret))
	return int(v >> 32), int(v & 0xffffffff)
}

// PostBatch posts ops in order in one cgo call (one crossing instead of
// len(ops)) and stops at the first operation the provider refuses. It
// returns how many operations were posted. When posted < len(ops), err is
// the error of ops[posted] and ops[posted+1:] were not tried: err matches
// ErrAgain when the provider is out of resources (read the CQ, which
// drives progress, then post ops[posted:] again); otherwise it names the
// op's index and kind and wraps the libfabric error.
//
// Before anything is posted the whole batch is checked in Go: an unknown
// Kind, an inject kind longer than Info.InjectSize, an RMA kind whose RAddr
// is MR.RemoteAddr's "outside" value, or a nil Buf with a non-zero Len
// returns 0 and an error matching ErrInvalid that names the op, with
// nothing posted; so does an empty batch. After Close it returns 0 and
// ErrClosed. Each op follows the rules of the matching single-operation
// method; see Op for which memory Buf may point at.
func (e *Endpoint) PostBatch(ops []Op) (posted int, err error) {
	if gone(e.handle()) {
		return 0, errBatchClosed
	}
	if len(ops) == 0 {
		return 0, errBatchEmpty
	}
	if err := e.check(ops); err != nil {
		return 0, err
	}
	var ret C.int64_t
	if f := e.fast; f.acquire(0) && f.holdIf(f.opsRegistered(e.dom, ops)) {
		f.fastOps(e.fid, ops)
		ret = C.int64_t(f.call(C.WEFT_FAST_POST_BATCH))
		runtime.KeepAlive(ops)
	} else {
		ret = C.weft_post_batch(C.uintptr_t(e.fid), (*C.struct_weft_op)(unsafe.Pointer(&ops[0])), C.size_t(len(ops)))
	}
	if ret >= 0 {
		return len(ops), nil
	}
	i, code := decodeNeg(ret)
	return i, postErr(ops, i, code)
}

// PostAndRead posts ops like PostBatch and then, in the same cgo call,
// reads cq like CQ.ReadSpin(out, spins): it retries an empty queue until it
// yields at least one completion or an error, at most spins times (spins < 1
// counts as 1). One ping-pong step (repost the receive, inject the reply,
// wait for the next message) thus costs one crossing.
//
// It returns how many ops were posted and how many completions it stored
// in out (at most 64). When every op was posted, err is the CQ's: nil, or a
// *CQError for an error completion. When the provider refused ops[posted]
// with EAGAIN, cq is still read (that is what frees resources on
// manual-progress providers): the completions in out[:n] are valid, err
// matches ErrAgain, and the caller posts ops[posted:] again; an error
// completion is left queued for the next read. When ops[posted] failed
// otherwise, the CQ is not read (n = 0). ops may be empty (then it is
// ReadSpin); out may be empty (then the read only drives progress and
// returns n = 0). The checks of PostBatch apply, and cq must be open. One
// goroutine at a time may read a CQ.
func (e *Endpoint) PostAndRead(ops []Op, cq *CQ, out []Completion, spins int) (posted, n int, err error) {
	if gone(e.handle()) {
		return 0, 0, errBatchClosed
	}
	if cq == nil {
		return 0, 0, errBatchNilCQ
	}
	if gone(cq.handle()) {
		return 0, 0, errBatchCQ
	}
	if err := e.check(ops); err != nil {
		return 0, 0, err
	}
	var ret C.int64_t
	if f := cq.enter(spins); f != nil && f.holdIf(f.opsRegistered(e.dom, ops)) {
		f.fastOps(e.fid, ops)
		f.fastOut(cq.fid, out, spins)
		ret = C.int64_t(f.call(C.WEFT_FAST_POST_READ))
		runtime.KeepAlive(ops)
		runtime.KeepAlive(out)
	} else {
		var op *C.struct_weft_op
		if len(ops) > 0 {
			op = (*C.struct_weft_op)(unsafe.Pointer(&ops[0]))
		}
		comp, cnt := compArg(out)
		ret = C.weft_post_read(C.uintptr_t(e.fid), op, C.size_t(len(ops)),
			C.uintptr_t(cq.fid), comp, cnt, spinArg(spins), cq.pace)
	}
	if ret >= 0 {
		v := uint64(ret)
		posted, n = int(v>>32)&(maxBatchOps-1), int(v&0xffffffff)
		if v>>62 != 0 {
			return posted, n, agains[kindOps[ops[posted].Kind]]
		}
		return posted, n, nil
	}
	i, code := decodeNeg(ret)
	if i < len(ops) {
		return i, 0, postErr(ops, i, code)
	}
	return len(ops), 0, cq.readFail(code)
}

// WaitWord waits, inside one cgo call, until the 64-bit word at word is at
// least want or the CQ yields something, at most spins rounds (spins < 1
// counts as 1). Each round loads the word (an acquire load), returns if it
// has reached want, and otherwise reads the CQ once into out, which also
// drives progress: on manual-progress providers (shm, ofi_rxm) that is what
// applies a peer's RMA writes to this side's memory, so a flag written by a
// remote InjectWrite becomes visible while this call spins.
//
// It returns reached (the word was ≥ want when the call returned), the
// number of completions stored in out (the caller must handle them, as with
// CQ.Read), and the CQ's error (a *CQError for an error completion). It
// returns as soon as the word is reached, the CQ yields completions or an
// error, or the rounds run out (false, 0, nil). With an empty out it only
// drives progress and waits for the word.
//
// word must be 8-byte aligned and point at memory a peer may write: a
// Domain.Alloc buffer or registered Go memory (Register keeps it pinned).
// C reads it only during the call.
func (c *CQ) WaitWord(word *uint64, want uint64, out []Completion, spins int) (reached bool, n int, err error) {
	if gone(c.handle()) {
		return false, 0, closeds[opCQRead]
	}
	if word == nil {
		return false, 0, errWaitNilWord
	}
	if uintptr(unsafe.Pointer(word))&7 != 0 {
		return false, 0, errWaitAlign
	}
	var ret C.int64_t
	if f := c.enter(spins); f != nil {
		f.args.word, f.args.want = C.uintptr_t(uintptr(unsafe.Pointer(word))), C.uint64_t(want)
		f.fastOut(c.fid, out, spins)
		ret = C.int64_t(f.call(C.WEFT_FAST_CQ_WAIT_WORD))
		runtime.KeepAlive(word)
		runtime.KeepAlive(out)
	} else {
		comp, cnt := compArg(out)
		ret = C.weft_cq_wait_word(C.uintptr_t(c.fid), (*C.uint64_t)(unsafe.Pointer(word)), C.uint64_t(want), comp, cnt, spinArg(spins), c.pace)
	}
	if ret >= 0 {
		return ret>>32 != 0, int(ret & 0xffffffff), nil
	}
	reached = atomic.LoadUint64(word) >= want
	return reached, 0, c.readFail(int(-ret))
}
