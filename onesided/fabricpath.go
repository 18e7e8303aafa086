package onesided

// The libfabric path of a window.
//
// Memory rules (cgo): the window's region is MAP_SHARED memory outside the
// Go heap, registered once. Signal values, atomic operands and results and
// small Put/Get bounce data live in a registered fabric.Buffer (C/mmap
// memory) carved into slots that are handed back when the operation's
// completion arrives. Larger Put sources and Get destinations in Go memory
// are registered with Domain.Register, which pins them, and the handle is
// closed when the completion arrives. Operation contexts given to libfabric
// are integer handles into the path's slot table (fabops.go), never
// pointers.
//
// The path is split over files: set-up (fabsetup.go) and the record each
// rank sends the others (fabpeer.go), PutSignal's signallers and deferred
// signals (fabsignal.go), the operation tracker (fabops.go), and here the
// other operations, progress, and close.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/gpu"
)

// FabricGroup is a Group that also offers its libfabric domain (as
// endpoint.Comm does). A window opens its own endpoint, CQ and AV in that
// domain when the domain grants RMA and atomics (and FI_FENCE when that
// ordering is forced) and no provider was named with WithProvider;
// otherwise it opens a fabric and domain of its own.
type FabricGroup interface {
	Group
	Info() *fabric.Info
	Domain() *fabric.Domain
}

const (
	slotSize  = 256  // bytes per scratch slot (signals, atomics, small bounces)
	slotCount = 1024 // scratch slots per window
)

type fabPath struct {
	w *Window
	// callCtx is the context of the blocking Window call in progress
	// (Lock, Fence, …; nil outside one): waits for room in the provider's
	// queue and for scratch buffers end with it too, not only with the
	// window's timeout.
	callCtx context.Context
	fab     *fabric.Fabric // non-nil when the window opened its own
	dom     *fabric.Domain
	info    *fabric.Info
	ep      *fabric.Endpoint
	cq      *fabric.CQ
	av      *fabric.AV
	mr      *fabric.MR // the local region
	local   []byte     // registered region (page-rounded)

	addrs []fabric.Addr
	keys  []uint64
	bases []uint64
	// control words: inside the region (Allocate) or a buffer of their own
	// (Create)
	ctrlBuf *fabric.Buffer
	ckeys   []uint64
	cbases  []uint64

	order  SignalOrdering
	wawMax int // largest write ordered by WAW (<0: unlimited)
	// injMax is the largest PutSignal data that is injected (no
	// completion, no tracking) when the ordering is WAW; -1: never.
	// dirty[t] records injected writes to t not yet covered by a flush
	// marker (see flushMarker).
	injMax int
	dirty  []bool
	nDirty int
	stage  *fabric.Buffer // injected PutSignal: signal value, then data (C memory)
	ops    [4]fabric.Op   // the batch of a PutSignal
	dops   [3]fabric.Op   // the batch of a deferred signal (issued from inside progress)
	// OrderCQData: sink stores the signals peers send in remote CQ data
	// into this rank's region (nil unless this rank takes them); cqSig[t]
	// says target t takes them, slotBits[t] is its encoding's slot width.
	sink     *fabric.SignalSink
	cqSig    []bool
	slotBits []int

	scratch   *fabric.Buffer
	freeSlots []int
	// chunk buffers of typed transfers (fabtyped.go), allocated on first use
	chunks     *fabric.Buffer
	freeChunks []int
	chunkUse   [chunkCount]chunkUse
	// mrPool holds closed registration handles for regKeep.
	mrPool []*fabric.MR
	// devMaps are the chunks mapped into each GPU (nil: cannot), devHooks
	// remove the path's close hook of each (gputyped.go); devMu guards
	// both, since a device's Close runs the hook on its own goroutine.
	devMu    sync.Mutex
	devMaps  map[*gpu.Device]*gpu.Buffer
	devHooks map[*gpu.Device]func()

	// postFault, when set (by tests), runs before each post; an error it
	// returns fails the post as the provider's own error would, nothing
	// having been posted. completionOrder, when set (by tests), is given
	// each successful completion read from the queue and returns the
	// handles to complete now, in that order: it may hold some back and
	// hand them over later, as a provider that completes operations out
	// of order would.
	postFault       func(f *fabPath) error
	completionOrder func(f *fabPath, h opHandle) []opHandle

	atomics atomicCounts
	// pend tracks the operations with a completion (fabops.go).
	pend opTable
	comp []fabric.Completion
	// signal[t] issues a PutSignal to t (fabsignal.go), chosen at set-up.
	signal []signalFunc
	// deferred[t]: signals to t waiting for their data's delivery, in
	// issue order; nDeferred counts the targets with any.
	deferred    [][]deferredSig
	nDeferred   int
	draining    bool
	deferErr    error
	firstErr    error
	closedPaths bool
	// foreign is set while a call blocked elsewhere in the process polls
	// this path (progress.go): completions are handled, deferred signals
	// are left to the window's own next call.
	foreign bool
}

func (f *fabPath) provider() string         { return f.info.Provider }
func (f *fabPath) ordering() SignalOrdering { return f.order }
func (f *fabPath) issued() uint64           { return f.pend.seq }

// inRegion returns b's offset in the registered region, or -1.
func (f *fabPath) inRegion(b []byte) int {
	if len(b) == 0 || len(f.local) == 0 {
		return -1
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(f.local)))
	if p >= base && p+uintptr(len(b)) <= base+uintptr(len(f.local)) {
		return int(p - base)
	}
	return -1
}

// waitCtx is the context the path's own waits end with.
func (f *fabPath) waitCtx() context.Context {
	if f.callCtx != nil {
		return f.callCtx
	}
	return context.Background()
}

// setCallCtx makes ctx the path's waits' context and returns the one
// before.
func (f *fabPath) setCallCtx(ctx context.Context) (old context.Context) {
	old, f.callCtx = f.callCtx, ctx
	return old
}

// slot takes a scratch slot, driving progress until one is free.
func (f *fabPath) slot() ([]byte, int, error) {
	wt := f.w.newWaiter(f.w.opts.timeout)
	for len(f.freeSlots) == 0 {
		if err := f.progress(); err != nil {
			return nil, -1, err
		}
		if err := wt.pause(f.waitCtx()); err != nil {
			return nil, -1, err
		}
	}
	i := f.freeSlots[len(f.freeSlots)-1]
	f.freeSlots = f.freeSlots[:len(f.freeSlots)-1]
	return f.scratch.Bytes()[i*slotSize : (i+1)*slotSize], i, nil
}

// post retries an operation while the provider answers EAGAIN; on failure
// it drops id.
func (f *fabPath) post(id opHandle, fn func() error) error {
	wt := f.w.newWaiter(f.w.opts.timeout)
	for {
		var err error
		if f.postFault != nil {
			err = f.postFault(f)
		}
		if err == nil {
			err = fn()
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, fabric.ErrAgain) {
			f.drop(id, err)
			return err
		}
		if err := f.progress(); err != nil {
			f.drop(id, err)
			return err
		}
		// The queue is full until the peer makes progress: give way.
		if err := wt.pause(f.waitCtx()); err != nil {
			f.drop(id, err)
			return err
		}
	}
}

// progress reads the CQ once, which drives the provider's progress. With
// a signal sink the read stores the signals peers sent in CQ data and is
// repeated until the provider had nothing more queued, so every signal
// delivered to this rank so far is in its memory when it returns.
func (f *fabPath) progress() error {
	if f.sink == nil {
		n, err := f.cq.Read(f.comp)
		return f.completed(n, err)
	}
	for {
		n, err := f.cq.ReadSignals(f.sink, f.comp, 1)
		if err := f.completed(n, err); err != nil {
			return err
		}
		if n < len(f.comp) { // not cut short by a full f.comp
			return nil
		}
	}
}

// waitWord drives progress until the word at p (in this rank's registered
// memory) is at least want, for at most spins rounds inside one cgo call
// (fabric's CQ.WaitWord, or CQ.WaitWordSignals with a signal sink, which
// also stores the signals it reads), and handles the completions it read.
func (f *fabPath) waitWord(p *uint64, want uint64, spins int) (bool, error) {
	var reached bool
	var n int
	var err error
	if f.sink != nil {
		reached, n, err = f.cq.WaitWordSignals(f.sink, p, want, f.comp, spins)
	} else {
		reached, n, err = f.cq.WaitWord(p, want, f.comp, spins)
	}
	if err := f.completed(n, err); err != nil {
		return reached, err
	}
	return reached, nil
}

// completed handles n completions read into f.comp and the read's error.
// Remote CQ data that reaches it was not a signal this rank could store:
// the window's CQ serves its own endpoint only (no receives are posted on
// it), so that is a peer's bug, reported, never guessed at.
func (f *fabPath) completed(n int, err error) error {
	var bad error
	for i := 0; i < n; i++ {
		c := &f.comp[i]
		if c.Flags&fabric.CompRemoteCQData != 0 {
			if bad == nil {
				bad = fmt.Errorf("onesided: remote CQ data %#x is not a signal for this rank's window (slot out of range, malformed, or signals in CQ data not taken here): %w",
					c.Data, ErrInvalid)
			}
			continue
		}
		if f.completionOrder != nil {
			for _, h := range f.completionOrder(f, c.Context) {
				f.complete(h, nil)
			}
			continue
		}
		f.complete(c.Context, nil)
	}
	if bad != nil {
		if f.firstErr == nil {
			f.firstErr = bad
		}
		return bad
	}
	if err != nil {
		var ce *fabric.CQError
		if errors.As(err, &ce) {
			f.complete(ce.Context, err)
			err = fmt.Errorf("onesided: operation failed: %w", err)
			if f.firstErr == nil {
				f.firstErr = err
			}
			return err
		}
		return fmt.Errorf("onesided: read completions: %w", err)
	}
	if f.nDeferred > 0 && !f.foreign {
		f.drainDeferred()
		return f.takeDeferErr()
	}
	return nil
}

// wait drives progress until the held operation h completes, and returns
// its error. The caller releases h afterwards (also when wait fails: the
// slot is then freed when the completion arrives).
func (f *fabPath) wait(ctx context.Context, h opHandle) error {
	wt := f.w.newWaiter(f.w.opts.timeout)
	wt.target = int(f.pend.op(h).target)
	for !f.pend.done(h) {
		if err := f.progress(); err != nil && f.pend.done(h) {
			break
		} else if err != nil {
			return err
		}
		if err := wt.pause(ctx); err != nil {
			return err
		}
	}
	return f.pend.op(h).err
}

// source returns a buffer and descriptor libfabric may read data from until
// the operation completes, and what the completion must release: a
// scratch slot (or -1) and a registration (or nil).
func (f *fabPath) source(data []byte) (buf []byte, desc fabric.Desc, scratch int, mr *fabric.MR, err error) {
	if len(data) == 0 || f.inRegion(data) >= 0 {
		return data, f.mr.Desc(), -1, nil, nil
	}
	if len(data) <= slotSize {
		s, i, err := f.slot()
		if err != nil {
			return nil, desc, -1, nil, err
		}
		copy(s, data)
		return s[:len(data)], f.scratch.Desc(), i, nil, nil
	}
	if mr, err = f.regKeep(data); err != nil {
		return nil, desc, -1, nil, err
	}
	return data, mr.Desc(), -1, mr, nil
}

// raddr and key are the remote address and key of byte off of target's
// region; on a dynamic window off encodes a Region (dynamic.go).
func (f *fabPath) raddr(target, off int) uint64 {
	if f.w.dyn != nil {
		return f.w.dyn[target][off>>dynShift].region.Addr + uint64(off&dynMask)
	}
	return f.bases[target] + uint64(off)
}

func (f *fabPath) key(target, off int) uint64 {
	if f.w.dyn != nil {
		return f.w.dyn[target][off>>dynShift].region.Key
	}
	return f.keys[target]
}

// attach registers buf for remote access (a dynamic window's Region).
func (f *fabPath) attach(buf []byte) (addr, key uint64, mr io.Closer, err error) {
	m, err := f.dom.Register(buf, fabric.AccessAll)
	if err != nil {
		return 0, 0, nil, err
	}
	return m.RemoteAddr(buf), m.Key(), m, nil
}

// write issues a tracked write of data (flags added to delivery
// completion) and returns its handle; with hold the slot is held for the
// caller (opTable.hold), who releases it. On error nothing stays tracked.
func (f *fabPath) write(target, off int, data []byte, flags fabric.OpFlag, hold bool) (opHandle, error) {
	buf, desc, scratch, mr, err := f.source(data)
	if err != nil {
		return untracked, err
	}
	id := f.pend.track(target, scratch, mr)
	if hold {
		f.pend.hold(id)
	}
	if err := f.post(id, func() error {
		return f.ep.WriteMsg(buf, desc, f.addrs[target], f.raddr(target, off), f.key(target, off), id,
			flags|fabric.OpDeliveryComplete|fabric.OpCompletion)
	}); err != nil {
		return untracked, err
	}
	return id, nil
}

func (f *fabPath) ctrlMem() []byte {
	if f.ctrlBuf == nil {
		return nil
	}
	return f.ctrlBuf.Bytes()[:f.w.ctrlLen:f.w.ctrlLen]
}

// ctrlSignal writes a control word (the window barrier). Control writes
// need no ordering against data: Fence flushes all data first.
func (f *fabPath) ctrlSignal(target, off int, val uint64) error {
	return f.writeWord(target, f.cbases[target]+uint64(off), f.ckeys[target], val, 0)
}

func (f *fabPath) put(target, off int, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if len(data) <= f.injMax {
		// WAW granted: inject (no slot, no completion); the next flush
		// marker covers it.
		return f.injectPut(target, off, data)
	}
	_, err := f.write(target, off, data, 0, false)
	return err
}

// injectPut is a Put of at most injMax bytes with fi_inject_write.
func (f *fabPath) injectPut(target, off int, data []byte) error {
	f.markDirty(target)
	if err := f.post(untracked, func() error {
		return f.ep.InjectWrite(data, f.addrs[target], f.raddr(target, off), f.key(target, off))
	}); err != nil {
		return fmt.Errorf("onesided: Put: %w", err)
	}
	return nil
}

func (f *fabPath) get(target, off int, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	var buf, copyTo []byte
	var desc fabric.Desc
	var mr *fabric.MR
	scratch := -1
	switch {
	case f.inRegion(dst) >= 0:
		buf, desc = dst, f.mr.Desc()
	case len(dst) <= slotSize:
		s, i, err := f.slot()
		if err != nil {
			return err
		}
		scratch, copyTo = i, dst
		buf, desc = s[:len(dst)], f.scratch.Desc()
	default:
		var err error
		if mr, err = f.regKeep(dst); err != nil {
			return err
		}
		buf, desc = dst, mr.Desc()
	}
	id := f.pend.track(target, scratch, mr)
	f.pend.ops[id-1].copyTo = copyTo
	return f.post(id, func() error {
		return f.ep.Read(buf, desc, f.addrs[target], f.raddr(target, off), f.key(target, off), id)
	})
}

// noInject (WEFT_TUNE=osinject=0) turns the injected PutSignal off: every
// write is then tracked with its own delivery completion, as on the other
// ordering paths (a diagnostic and a comparison point for benchmarks).
var noInject = !tune.OSInject

// maxInject caps the PutSignal data that is injected: larger data is
// cheaper through the tracked write than copied by the provider.
const maxInject = 4096

func fabType(t AtomicType) fabric.Datatype {
	switch t {
	case AtomicInt32:
		return fabric.Int32
	case AtomicUint32:
		return fabric.Uint32
	case AtomicInt64:
		return fabric.Int64
	case AtomicUint64:
		return fabric.Uint64
	case AtomicFloat32:
		return fabric.Float32
	}
	return fabric.Float64
}

func fabOp(o Op) fabric.AtomicOp {
	switch o {
	case OpSum:
		return fabric.OpSum
	case OpMin:
		return fabric.OpMin
	case OpMax:
		return fabric.OpMax
	case OpReplace:
		return fabric.OpWrite
	case OpBor:
		return fabric.OpBor
	case OpBand:
		return fabric.OpBand
	case OpBxor:
		return fabric.OpBxor
	}
	return fabric.OpRead
}

// casType is the unsigned type of the same size, for the CAS-loop fallback.
func casType(t AtomicType) AtomicType {
	if t.Size() == 4 {
		return AtomicUint32
	}
	return AtomicUint64
}

// atomicCounts caches the provider's answers to fi_fetch_atomicvalid and
// fi_compare_atomicvalid, which do not change while the endpoint is open
// (each query is a cgo call that also allocates): 0 not asked yet, -1 not
// granted, else the elements one operation may carry.
type atomicCounts struct {
	fetch [AtomicFloat64 + 1][OpNoOp + 1]int32
	cas   [AtomicFloat64 + 1]int32
}

// validCount turns a validity query's answer into a cached count.
func validCount(n int, err error) int32 {
	if err != nil || n < 1 {
		return -1
	}
	return int32(min(n, 1<<30))
}

// fetchCount is how many elements of t one fetching atomic o may carry
// on this provider, or -1.
func (f *fabPath) fetchCount(t AtomicType, o Op) int {
	if t < AtomicInt32 || t > AtomicFloat64 || o < OpSum || o > OpNoOp {
		return int(validCount(f.ep.FetchAtomicValid(fabType(t), fabOp(o))))
	}
	c := &f.atomics.fetch[t][o]
	if *c == 0 {
		*c = validCount(f.ep.FetchAtomicValid(fabType(t), fabOp(o)))
	}
	return int(*c)
}

func (f *fabPath) fetchValid(t AtomicType, o Op) bool { return f.fetchCount(t, o) >= 1 }

func (f *fabPath) casValid(t AtomicType) bool {
	if t < AtomicInt32 || t > AtomicFloat64 {
		return validCount(f.ep.CompareAtomicValid(fabType(t), fabric.OpCswap)) >= 1
	}
	c := &f.atomics.cas[t]
	if *c == 0 {
		*c = validCount(f.ep.CompareAtomicValid(fabType(t), fabric.OpCswap))
	}
	return *c >= 1
}

func (f *fabPath) accumulate(target, off int, t AtomicType, o Op, data []byte) error {
	sz := t.Size()
	// fi_atomic completes at the origin before the target has applied it
	// (transmit completion) and the fabric API offers no delivery-complete
	// flag for it, so Accumulate uses fi_fetch_atomic, whose completion
	// means applied, and discards the fetched values.
	if n := f.fetchCount(t, o); n >= 1 && !f.w.opts.casFallback {
		chunk := min(n*sz, slotSize/2)
		for i := 0; i < len(data); i += chunk {
			part := data[i:min(len(data), i+chunk)]
			if _, _, err := f.fetchPost(target, f.raddr(target, off+i), f.key(target, off+i), t, o, part, false); err != nil {
				return err
			}
		}
		return nil
	}
	// Fallback: element by element through fetch-and-op or a CAS loop.
	for i := 0; i < len(data); i += sz {
		if _, err := f.fetchOp(target, off+i, t, o, loadElem(data[i:], sz)); err != nil {
			return err
		}
	}
	return nil
}

// getAccBatch bounds the fetching atomics of one getAccumulate in flight
// at once (each holds a scratch slot until its result is copied out).
const getAccBatch = 8

// getAccumulate applies o with data's elements to consecutive elements of
// type t from off at target and stores their previous values in result:
// one fetching atomic per chunk of as many elements as the provider takes
// at once and half a scratch slot holds, up to getAccBatch of them in
// flight, each waited for. Without the fetching atomic it goes element by
// element, as fetchOp.
func (f *fabPath) getAccumulate(target, off int, t AtomicType, o Op, data, result []byte) error {
	sz := t.Size()
	n := f.fetchCount(t, o)
	if n < 1 || f.w.opts.casFallback && o != OpNoOp {
		for i := 0; i < len(data); i += sz {
			old, err := f.fetchOp(target, off+i, t, o, loadElem(data[i:], sz))
			if err != nil {
				return err
			}
			storeElem(result[i:], sz, old)
		}
		return nil
	}
	chunk := min(n*sz, slotSize/2)
	type fetching struct {
		id  opHandle
		res []byte // the previous values, in the held slot
		at  int
	}
	var batch [getAccBatch]fetching
	for i := 0; i < len(data); {
		k := 0
		var err error
		for ; k < getAccBatch && i < len(data); k++ {
			part := data[i:min(len(data), i+chunk)]
			id, res, perr := f.fetchPost(target, f.raddr(target, off+i), f.key(target, off+i), t, o, part, true)
			if err = perr; err != nil {
				break
			}
			batch[k] = fetching{id, res, i}
			i += len(part)
		}
		for _, b := range batch[:k] {
			if werr := f.wait(f.waitCtx(), b.id); werr != nil && err == nil {
				err = werr
			}
			copy(result[b.at:], b.res)
			f.release(b.id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *fabPath) fetchOp(target, off int, t AtomicType, o Op, v uint64) (uint64, error) {
	if f.fetchValid(t, o) && !(f.w.opts.casFallback && o != OpNoOp) {
		return f.fetchAtomic(target, off, t, o, v)
	}
	// Fallback: read, combine at the origin, compare-and-swap; retry if
	// another rank changed the element in between.
	if !f.casValid(casType(t)) {
		return 0, fmt.Errorf("onesided: %v on %v: provider %s grants neither the atomic nor compare-and-swap: %w",
			o, t, f.info.Provider, ErrNotSupported)
	}
	old, err := f.cas(target, off, casType(t), 0, 0)
	if err != nil {
		return 0, err
	}
	for {
		prev, err := f.cas(target, off, casType(t), old, combine(t, o, old, v))
		if err != nil {
			return 0, err
		}
		if prev == old {
			return old, nil
		}
		old = prev
	}
}

func (f *fabPath) fetchAtomic(target, off int, t AtomicType, o Op, v uint64) (uint64, error) {
	sz := t.Size()
	var operand [8]byte
	putElem(operand[:], sz, v)
	id, res, err := f.fetchPost(target, f.raddr(target, off), f.key(target, off), t, o, operand[:sz], true)
	if err != nil {
		return 0, err
	}
	defer f.release(id)
	if err := f.wait(f.waitCtx(), id); err != nil {
		return 0, err
	}
	return loadElem(res, sz), nil
}

// fetchPost issues one fetching atomic o with the elements of operand (at
// most half a scratch slot) on target's memory at raddr (key key),
// through a scratch slot whose second half receives the previous values,
// returned as res. With hold the slot stays the caller's until release;
// without, the operation completes at the next flush and its results
// are dropped.
func (f *fabPath) fetchPost(target int, raddr, key uint64, t AtomicType, o Op, operand []byte, hold bool) (id opHandle, res []byte, err error) {
	s, slot, err := f.slot()
	if err != nil {
		return untracked, nil, err
	}
	n := len(operand)
	copy(s, operand)
	id = f.pend.track(target, slot, nil)
	if hold {
		f.pend.hold(id)
	}
	desc := f.scratch.Desc()
	if err := f.post(id, func() error {
		return f.ep.FetchAtomic(s[:n], desc, s[slotSize/2:slotSize/2+n], desc, fabType(t), fabOp(o),
			f.addrs[target], raddr, key, id)
	}); err != nil {
		return untracked, nil, err
	}
	return id, s[slotSize/2 : slotSize/2+n], nil
}

func (f *fabPath) cas(target, off int, t AtomicType, cmp, swap uint64) (uint64, error) {
	return f.casAt(target, f.raddr(target, off), f.key(target, off), t, cmp, swap)
}

// ctrlCAS is a compare-and-swap of the 8-byte control word at byte off of
// target's control words (the window locks).
func (f *fabPath) ctrlCAS(target, off int, cmp, swap uint64) (uint64, error) {
	return f.casAt(target, f.cbases[target]+uint64(off), f.ckeys[target], AtomicUint64, cmp, swap)
}

// ctrlXor flips bits of the 8-byte control word at byte off of target
// (Post and Complete): one fetching XOR whose result is dropped, issued
// and left to complete as an Accumulate (at the next flush), so the
// caller waits for no round trip; without that atomic, a compare-and-swap
// loop, waited for.
func (f *fabPath) ctrlXor(target, off int, bits uint64) error {
	if f.fetchValid(AtomicUint64, OpBxor) && !f.w.opts.casFallback {
		var operand [8]byte
		putElem(operand[:], 8, bits)
		_, _, err := f.fetchPost(target, f.cbases[target]+uint64(off), f.ckeys[target], AtomicUint64, OpBxor, operand[:], false)
		return err
	}
	cur, err := f.ctrlCAS(target, off, 0, 0) // reads the word
	for err == nil {
		var old uint64
		if old, err = f.ctrlCAS(target, off, cur, cur^bits); err == nil && old == cur {
			return nil
		}
		cur = old
	}
	return err
}

// casAt is a compare-and-swap of the element of type t at remote address
// raddr (key key) of target, waited for.
func (f *fabPath) casAt(target int, raddr, key uint64, t AtomicType, cmp, swap uint64) (uint64, error) {
	if !f.casValid(t) {
		return 0, fmt.Errorf("onesided: compare-and-swap on %v: provider %s does not grant it: %w", t, f.info.Provider, ErrNotSupported)
	}
	s, i, err := f.slot()
	if err != nil {
		return 0, err
	}
	sz := t.Size()
	putElem(s, sz, swap)
	putElem(s[8:], sz, cmp)
	// Held: the result stays in the scratch slot until release.
	id := f.pend.track(target, i, nil)
	f.pend.hold(id)
	desc := f.scratch.Desc()
	if err := f.post(id, func() error {
		return f.ep.CompareAtomic(s[:sz], desc, s[8:8+sz], desc, s[16:16+sz], desc, fabType(t), fabric.OpCswap,
			f.addrs[target], raddr, key, id)
	}); err != nil {
		return 0, err
	}
	defer f.release(id)
	if err := f.wait(f.waitCtx(), id); err != nil {
		return 0, err
	}
	return loadElem(s[16:], sz), nil
}

func (f *fabPath) flush(ctx context.Context, target int) error {
	if err := f.flushMarkers(target); err != nil {
		return err
	}
	return f.flushLocal(ctx, target)
}

// flushLocal waits until every tracked operation to target (< 0: to
// all) has completed here; unlike flush it sends no marker behind
// injected writes, which are complete here once issued.
func (f *fabPath) flushLocal(ctx context.Context, target int) error {
	wt := f.w.newWaiter(0)
	wt.target = target
	for {
		if target >= 0 && f.pend.perTarget[target] == 0 || target < 0 && f.pend.live == 0 {
			return nil
		}
		if err := f.progress(); err != nil {
			return err
		}
		if err := wt.pause(ctx); err != nil {
			return fmt.Errorf("onesided: flush: %w", err)
		}
	}
}

// issuedDone drives progress once and reports whether the first n
// operations are locally complete.
func (f *fabPath) issuedDone(n uint64) (bool, error) {
	if !f.pend.issuedBefore(n) {
		return true, nil
	}
	if err := f.progress(); err != nil {
		return false, err
	}
	return !f.pend.issuedBefore(n), nil
}

func (f *fabPath) waitIssued(ctx context.Context, n uint64) error {
	wt := f.w.newWaiter(0)
	for f.pend.issuedBefore(n) {
		if err := f.progress(); err != nil {
			return err
		}
		if err := wt.pause(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (f *fabPath) close() error {
	if f.closedPaths {
		return nil
	}
	f.closedPaths = true
	var errs []error
	closeIt := func(c interface{ Close() error }) {
		if c != nil {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if f.ep != nil {
		closeIt(f.ep)
	}
	for i := range f.pend.ops {
		f.complete(opHandle(i)+1, nil)
	}
	if f.mr != nil {
		closeIt(f.mr)
	}
	if f.scratch != nil {
		closeIt(f.scratch)
	}
	if err := f.unmapChunks(); err != nil { // before the memory goes
		errs = append(errs, err)
	}
	if f.chunks != nil {
		closeIt(f.chunks)
	}
	if f.stage != nil {
		closeIt(f.stage)
	}
	if f.ctrlBuf != nil {
		closeIt(f.ctrlBuf)
	}
	if f.av != nil {
		closeIt(f.av)
	}
	if f.cq != nil {
		closeIt(f.cq)
	}
	if f.fab != nil {
		if f.dom != nil {
			closeIt(f.dom)
		}
		closeIt(f.fab)
	}
	return errors.Join(errs...)
}

func putElem(b []byte, size int, v uint64) {
	if size == 4 {
		binary.NativeEndian.PutUint32(b, uint32(v))
		return
	}
	binary.NativeEndian.PutUint64(b, v)
}
