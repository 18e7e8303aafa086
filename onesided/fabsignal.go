package onesided

// PutSignal on the libfabric path: one signaller per target, chosen once
// when the path is set up from the path's ordering and whether the target
// takes signals in remote CQ data, so a PutSignal makes one indirect call
// instead of branching on the ordering.

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/fabric"
)

// signalFunc issues a PutSignal of data at off followed by val at sigOff
// (region offsets) to target.
type signalFunc func(f *fabPath, target, off int, data []byte, sigOff int, val uint64) error

// signallerFor returns the signaller for a target of a path with
// ordering order; cq says the target takes signals in CQ data (only with
// OrderCQData).
func signallerFor(order SignalOrdering, cq bool) signalFunc {
	switch {
	case cq:
		return (*fabPath).signalCQData
	case order == OrderWAW || order == OrderCQData:
		// A target that takes no signals in CQ data gets WAW ones.
		return (*fabPath).signalWAW
	case order == OrderFence:
		return (*fabPath).signalFence
	}
	return (*fabPath).signalDelivery
}

// chooseSignallers sets every target's signaller; f.order and f.cqSig are
// final.
func (f *fabPath) chooseSignallers() {
	f.signal = make([]signalFunc, f.w.size)
	for t := range f.signal {
		f.signal[t] = signallerFor(f.order, f.cqSig[t])
	}
}

// noCQSignals makes every target's signals RMA writes (a dynamic
// window: a signal in CQ data names an offset in the target's one region,
// which a dynamic window has not got).
func (f *fabPath) noCQSignals() {
	clear(f.cqSig)
	f.chooseSignallers()
}

func (f *fabPath) putSignal(target, off int, data []byte, sigOff int, val uint64) error {
	return f.signal[target](f, target, off, data, sigOff, val)
}

// signalWAW: the provider keeps writes to one target in order. Small data
// and the signal are injected back to back in one batch (one cgo call: no
// scratch slot, no completion to track); larger data goes in a tracked
// write with the signal written right behind it, or, beyond the
// provider's WAW limit, as with signalDelivery.
func (f *fabPath) signalWAW(target, off int, data []byte, sigOff int, val uint64) error {
	if len(data) <= f.injMax && len(f.deferred[target]) == 0 {
		return f.injectSignal(target, off, data, sigOff, val)
	}
	if f.wawMax >= 0 && len(data) > f.wawMax {
		return f.signalDelivery(target, off, data, sigOff, val)
	}
	d, err := f.writeHeld(target, off, data)
	if err != nil || len(f.deferred[target]) > 0 {
		return f.deferSignal(target, d, sigOff, val, err)
	}
	f.release(d)
	return f.writeSignal(target, sigOff, val, 0)
}

// signalCQData: WAW ordering, and the target stores signals it finds in
// remote CQ data. Small data and the signal go in one injected write
// (the signal in its CQ data); larger data goes in a tracked write
// followed by the signal alone in CQ data, or, beyond the provider's WAW
// limit, as with signalDelivery.
func (f *fabPath) signalCQData(target, off int, data []byte, sigOff int, val uint64) error {
	if len(data) <= f.injMax && len(f.deferred[target]) == 0 {
		return f.cqSignal(f.ops[:0], target, off, data, sigOff, val)
	}
	if f.wawMax >= 0 && len(data) > f.wawMax {
		return f.signalDelivery(target, off, data, sigOff, val)
	}
	d, err := f.writeHeld(target, off, data)
	if err != nil || len(f.deferred[target]) > 0 {
		return f.deferSignal(target, d, sigOff, val, err)
	}
	f.release(d)
	return f.cqSignal(f.ops[:0], target, 0, nil, sigOff, val)
}

// signalFence: the signal write carries FI_FENCE, so the provider starts
// it only once the data write before it has completed.
func (f *fabPath) signalFence(target, off int, data []byte, sigOff int, val uint64) error {
	d, err := f.writeHeld(target, off, data)
	if err != nil || len(f.deferred[target]) > 0 {
		return f.deferSignal(target, d, sigOff, val, err)
	}
	f.release(d)
	var flags fabric.OpFlag
	if len(data) > 0 {
		flags = fabric.OpFence
	}
	return f.writeSignal(target, sigOff, val, flags)
}

// signalDelivery: the signal goes out once the data's delivery completion
// has arrived (progress issues it); signals to one target leave in the
// order they were asked for. Flush waits for them.
func (f *fabPath) signalDelivery(target, off int, data []byte, sigOff int, val uint64) error {
	d, err := f.writeHeld(target, off, data)
	if err != nil || d != untracked || len(f.deferred[target]) > 0 {
		return f.deferSignal(target, d, sigOff, val, err)
	}
	if f.cqSig[target] {
		return f.cqSignal(f.ops[:0], target, 0, nil, sigOff, val)
	}
	return f.writeSignal(target, sigOff, val, 0)
}

// writeHeld writes data (if any) with a tracked write whose slot is held
// for the caller (untracked when data is empty). On error the write is
// not tracked.
func (f *fabPath) writeHeld(target, off int, data []byte) (opHandle, error) {
	if len(data) == 0 {
		return untracked, nil
	}
	return f.write(target, off, data, 0, true)
}

// writeSignal writes val to target's word at sigOff with a tracked
// write (flags added to delivery completion).
func (f *fabPath) writeSignal(target, sigOff int, val uint64, flags fabric.OpFlag) error {
	return f.writeWord(target, f.raddr(target, sigOff), f.key(target, sigOff), val, flags)
}

// writeWord writes the 8-byte val to target's address raddr (key rkey)
// with a tracked, delivery-complete write from a scratch slot (an 8-byte
// array handed to write would escape to the heap).
func (f *fabPath) writeWord(target int, raddr, rkey uint64, val uint64, flags fabric.OpFlag) error {
	s, i, err := f.slot()
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(s, val)
	id := f.pend.track(target, i, nil)
	desc := f.scratch.Desc()
	return f.post(id, func() error {
		return f.ep.WriteMsg(s[:8], desc, f.addrs[target], raddr, rkey, id,
			flags|fabric.OpDeliveryComplete|fabric.OpCompletion)
	})
}

// deferredSig is a signal write waiting for its data's delivery.
type deferredSig struct {
	data opHandle // held data write, or untracked: ordered behind earlier signals only
	id   opHandle // the signal's own operation (flush waits for it)
	off  int
	val  uint64
}

// deferSignal queues the signal to target behind data (a held write, or
// untracked) and issues whatever is ready. A failed data write (werr)
// queues nothing and is returned.
func (f *fabPath) deferSignal(target int, data opHandle, sigOff int, val uint64, werr error) error {
	if werr != nil {
		return werr
	}
	id := f.pend.track(target, -1, nil)
	if len(f.deferred[target]) == 0 {
		f.nDeferred++
	}
	f.deferred[target] = append(f.deferred[target], deferredSig{data: data, id: id, off: sigOff, val: val})
	f.drainDeferred()
	return f.takeDeferErr()
}

// drainDeferred issues, per target and in order, the deferred signals
// whose data has been delivered.
func (f *fabPath) drainDeferred() {
	if f.draining || f.nDeferred == 0 {
		return
	}
	f.draining = true
	defer func() { f.draining = false }()
	// Issuing a signal drives progress, which may complete the data of a
	// queue already visited: repeat until a pass issues nothing.
	for again := true; again; {
		again = false
		for t, q := range f.deferred {
			if len(q) == 0 {
				continue
			}
			n := len(q)
			q = f.drainTarget(t, q)
			if len(q) != n {
				again = true
			}
			if len(q) == 0 {
				f.nDeferred--
				q = f.deferred[t][:0] // keep the array
			}
			f.deferred[t] = q
		}
	}
}

// drainTarget issues target t's ready signals and returns what is left.
func (f *fabPath) drainTarget(t int, q []deferredSig) []deferredSig {
	for len(q) > 0 {
		h := q[0]
		var derr error
		if h.data != untracked {
			if !f.pend.done(h.data) {
				break
			}
			derr = f.pend.op(h.data).err
			f.release(h.data)
		}
		q = q[1:]
		if derr != nil {
			f.complete(h.id, derr)
			f.deferErr = fmt.Errorf("onesided: data of a PutSignal failed, its signal is dropped: %w", derr)
			continue
		}
		if f.cqSig[t] {
			// The data is delivered: the signal goes as CQ data, after
			// every earlier write to t (WAW).
			f.complete(h.id, nil)
			if err := f.cqSignal(f.dops[:0], t, 0, nil, h.off, h.val); err != nil {
				f.deferErr = err
			}
			continue
		}
		s, i, err := f.slot()
		if err != nil {
			f.complete(h.id, nil)
			f.deferErr = err
			continue
		}
		f.pend.ops[h.id-1].scratch = int32(i)
		binary.NativeEndian.PutUint64(s, h.val)
		desc := f.scratch.Desc()
		id, off := h.id, h.off
		if err := f.post(id, func() error {
			return f.ep.WriteMsg(s[:8], desc, f.addrs[t], f.raddr(t, off), f.key(t, off), id,
				fabric.OpDeliveryComplete|fabric.OpCompletion)
		}); err != nil {
			f.deferErr = err
		}
	}
	return q
}

func (f *fabPath) takeDeferErr() error {
	err := f.deferErr
	f.deferErr = nil
	return err
}

// markDirty records an injected write to t that the next flush marker
// must cover.
func (f *fabPath) markDirty(t int) {
	if !f.dirty[t] {
		f.dirty[t] = true
		f.nDirty++
	}
}

// flushMarkers gives every target (or only target, when ≥ 0) that has
// received injected writes since its last marker an 8-byte write, with
// delivery completion, to its spare control word. The provider orders
// writes to one target (WAW; injection is only used then), so when the
// marker's delivery completion arrives every injected write before it has
// been delivered too; flush then waits for the markers like for any other
// tracked operation.
func (f *fabPath) flushMarkers(target int) error {
	if f.nDirty == 0 {
		return nil
	}
	for t := range f.dirty {
		if !f.dirty[t] || target >= 0 && t != target {
			continue
		}
		f.dirty[t] = false
		f.nDirty--
		if err := f.ctrlSignal(t, ctrlBytes-8, 0); err != nil {
			return fmt.Errorf("onesided: flush marker to rank %d: %w", t, err)
		}
	}
	return nil
}

// injectSignal injects data (copied into the staging buffer: batched
// operations may only point at C memory) and then the signal word, in one
// PostBatch.
func (f *fabPath) injectSignal(target, off int, data []byte, sigOff int, val uint64) error {
	f.markDirty(target)
	st := f.stage.Bytes()
	binary.NativeEndian.PutUint64(st, val)
	dst := f.addrs[target]
	n := min(len(data), 1) + 1                        // data (if any), then the signal
	ops := append(f.ops[:0], make([]fabric.Op, n)...) // zeroed, filled in place
	if len(data) > 0 {
		copy(st[8:], data)
		setInjectWrite(&ops[0], fabric.OpKindInjectWrite, st[8:8+len(data)], 0, dst, f.raddr(target, off), f.key(target, off))
	}
	setInjectWrite(&ops[n-1], fabric.OpKindInjectWrite, st[:8], 0, dst, f.raddr(target, sigOff), f.key(target, sigOff))
	return f.postSignalBatch(ops)
}

// sigWords encodes a signal to target's word at sigOff (region offset) in
// CQ data into words: one word, or three parts when val does not fit. It
// returns how many. (It fills the caller's array: an array returned by
// value was copied with wide loads right after its narrow stores, a store
// forwarding stall on every PutSignal.)
func (f *fabPath) sigWords(words *[3]uint64, target, sigOff int, val uint64) (int, error) {
	if d, ok := fabric.EncodeSignal(f.slotBits[target], sigOff, val); ok {
		words[0] = d
		return 1, nil
	}
	p, ok := fabric.EncodeSignalParts(f.slotBits[target], f.w.rank, sigOff, val)
	if !ok {
		return 0, fmt.Errorf("onesided: PutSignal: signal offset %d of rank %d cannot be encoded in CQ data: %w", sigOff-f.w.netOff, target, ErrInvalid)
	}
	*words = p
	return 3, nil
}

// setInjectWrite fills a zeroed op like fabric.InjectWriteOp (kind
// OpKindInjectWrite) or fabric.InjectWriteDataOp (OpKindInjectWriteData),
// field by field: an Op value (it holds a pointer) is built in a
// temporary and copied into a slice element with wide loads right after
// its narrow stores, a store-forwarding stall on every PutSignal.
func setInjectWrite(o *fabric.Op, kind fabric.OpKind, buf []byte, data uint64, dst fabric.Addr, raddr, key uint64) {
	o.Kind, o.Buf, o.Len = kind, unsafe.Pointer(unsafe.SliceData(buf)), uintptr(len(buf))
	o.Addr, o.Data, o.RAddr, o.Key = dst, data, raddr, key
}

// cqSignal issues a PutSignal whose signal travels as remote CQ data: data
// (at most injMax bytes, staged: batched operations may only point at C
// memory) and signal in one fi_inject_writedata, or the signal alone in a
// write of 0 bytes when data is empty (Signal, or data already written by
// a tracked write that WAW keeps in front). A value too large for one
// word adds two more 0-byte writes (the parts). One PostBatch; no
// completion to track; the next flush marker covers it. ops is the
// scratch the batch is built in: f.ops, or f.dops for deferred signals,
// which progress may issue while a PutSignal's batch waits in post.
func (f *fabPath) cqSignal(ops []fabric.Op, target, off int, data []byte, sigOff int, val uint64) error {
	var words [3]uint64
	nw, err := f.sigWords(&words, target, sigOff, val)
	if err != nil {
		return err
	}
	f.markDirty(target)
	dst, key := f.addrs[target], f.keys[target]
	ops = append(ops[:0], make([]fabric.Op, nw)...) // zeroed, filled in place
	if len(data) > 0 {
		st := f.stage.Bytes()[8:]
		copy(st, data)
		setInjectWrite(&ops[0], fabric.OpKindInjectWriteData, st[:len(data)], words[0], dst, f.raddr(target, off), key)
	} else {
		setInjectWrite(&ops[0], fabric.OpKindInjectWriteData, nil, words[0], dst, f.raddr(target, sigOff), key)
	}
	for i := 1; i < nw; i++ {
		setInjectWrite(&ops[i], fabric.OpKindInjectWriteData, nil, words[i], dst, f.raddr(target, sigOff), key)
	}
	return f.postSignalBatch(ops)
}

// postSignalBatch posts a PutSignal's untracked batch; on EAGAIN the rest
// is posted after progress.
func (f *fabPath) postSignalBatch(ops []fabric.Op) error {
	if err := f.post(untracked, func() error {
		n, err := f.ep.PostBatch(ops)
		ops = ops[n:]
		return err
	}); err != nil {
		return fmt.Errorf("onesided: PutSignal: %w", err)
	}
	return nil
}
