package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/nodeseg"
)

// Dynamic windows (MPI_Win_create_dynamic, MPI_Win_attach,
// MPI_Win_detach): a window that starts with no memory; each rank
// attaches memory of its own when it likes, not collectively, and hands
// the Region it gets to the ranks that will access it (as MPI programs
// send the address MPI_Get_address returns). Operations name a Region
// and an offset in it.
//
// On the libfabric path an origin addresses a target through one base
// and key per rank; a dynamic window's operations encode instead, in
// the offset, the index of the Region in the origin's table for that
// target (Window.dyn) above dynShift bits, and the path looks the
// Region's address and key up there (fabPath.raddr, fabPath.key).

// dynShift is the bit position of the Region index in a dynamic
// window's encoded offsets: a Region may hold up to 2^40 bytes.
const dynShift = 40

const dynMask = 1<<dynShift - 1

// Region is memory a rank attached to a dynamic window: the rank, the
// address and key through which other ranks reach it, and its length.
// Send it to the ranks that will access it (MarshalBinary: 32 bytes, or
// a few dozen more for AttachShared memory, which the encoding also
// names so that ranks of its node can map it); a Region is only good
// with the window it was attached to.
type Region struct {
	Rank      int
	Addr, Key uint64
	Len       int
	// seg and node name AttachShared memory: its segment file and the
	// node (nodeseg.NodeKey) where the file is; "" for other memory.
	seg, node string
}

// regionWire is the length of a marshalled Region of Go memory; one of
// AttachShared memory sets wireShared in its length word and adds two
// length-prefixed names.
const (
	regionWire = 32
	wireShared = 1 << 63
)

// MarshalBinary encodes r.
func (r Region) MarshalBinary() ([]byte, error) {
	b := make([]byte, regionWire, regionWire+4+len(r.seg)+len(r.node))
	binary.LittleEndian.PutUint64(b, uint64(r.Rank))
	binary.LittleEndian.PutUint64(b[8:], r.Addr)
	binary.LittleEndian.PutUint64(b[16:], r.Key)
	binary.LittleEndian.PutUint64(b[24:], uint64(r.Len))
	if r.seg != "" {
		binary.LittleEndian.PutUint64(b[24:], uint64(r.Len)|wireShared)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(r.seg)))
		b = append(b, r.seg...)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(r.node)))
		b = append(b, r.node...)
	}
	return b, nil
}

// RegionWireLen returns the length of the Region encoding that starts b (as
// MarshalBinary wrote it, perhaps followed by more bytes), so that
// several Regions can travel in one message; 0 if b is too short to
// hold it.
func RegionWireLen(b []byte) int {
	if len(b) < regionWire {
		return 0
	}
	if binary.LittleEndian.Uint64(b[24:])&wireShared == 0 {
		return regionWire
	}
	n := regionWire + 2
	if len(b) < n {
		return 0
	}
	n += int(binary.LittleEndian.Uint16(b[regionWire:])) + 2
	if len(b) < n {
		return 0
	}
	n += int(binary.LittleEndian.Uint16(b[n-2:]))
	if len(b) < n {
		return 0
	}
	return n
}

// UnmarshalBinary decodes what MarshalBinary wrote; anything else gives
// ErrInvalid.
func (r *Region) UnmarshalBinary(b []byte) error {
	if RegionWireLen(b) != len(b) || len(b) == 0 {
		return fmt.Errorf("onesided: a Region encoding of %d bytes (want %d): %w", len(b), max(RegionWireLen(b), regionWire), ErrInvalid)
	}
	rank, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[24:])&^wireShared
	if rank > 1<<31 || n > dynMask {
		return fmt.Errorf("onesided: Region of rank %d, %d bytes: %w", rank, n, ErrInvalid)
	}
	var seg, node string
	if len(b) > regionWire {
		k := int(binary.LittleEndian.Uint16(b[regionWire:]))
		seg = string(b[regionWire+2 : regionWire+2+k])
		node = string(b[regionWire+4+k:])
		if !strings.HasPrefix(seg, "weft-dyn-") || strings.ContainsRune(seg, '/') || node == "" {
			return fmt.Errorf("onesided: Region encoding names segment %q on node %q: %w", seg, node, ErrInvalid)
		}
	}
	*r = Region{Rank: int(rank), Addr: binary.LittleEndian.Uint64(b[8:]), Key: binary.LittleEndian.Uint64(b[16:]), Len: int(n), seg: seg, node: node}
	return nil
}

// attachment is memory this rank attached: Go memory (buf), or with seg
// or anon the memory AttachShared allocated for it.
type attachment struct {
	region Region
	mr     io.Closer
	buf    []byte
	seg    *nodeseg.Seg
	anon   []byte
}

// free releases the memory AttachShared allocated (after mr is closed).
func (a attachment) free() {
	if a.seg != nil {
		_ = a.seg.Unlink()
		_ = a.seg.Close()
	}
	if a.anon != nil {
		_ = syscallMunmap(a.anon)
	}
}

// CreateDynamic creates a window with no memory on any rank
// (MPI_Win_create_dynamic); Attach adds memory rank by rank. It is
// collective over g. Like Create it uses the libfabric path alone
// (WithSharedMemory(ShmOnly) gives ErrNotSupported).
func CreateDynamic(ctx context.Context, g Group, opts ...Option) (*Window, error) {
	w, err := create(ctx, "CreateDynamic", g, nil, true, opts)
	if err != nil {
		return nil, err
	}
	w.dyn = make([][]dynEntry, w.size)
	w.dynIndex = make([]map[[2]uint64]int, w.size)
	w.attached = map[[2]uint64]attachment{}
	w.net.noCQSignals()
	return w, nil
}

// Attach registers buf (non-empty, 8-byte aligned, at most 2^40 bytes)
// for access through the dynamic window w (MPI_Win_attach) and returns
// its Region. It is not collective. buf stays pinned until Detach or
// Free; a buffer attached twice gives ErrInvalid.
func (w *Window) Attach(buf []byte) (Region, error) {
	if err := w.dynamicCheck("Attach"); err != nil {
		return Region{}, err
	}
	if len(buf) == 0 || len(buf) > dynMask || bufAddr(buf)%8 != 0 {
		return Region{}, fmt.Errorf("onesided: Attach: a buffer of %d bytes at %#x (want 1..2^40 bytes, 8-byte aligned): %w", len(buf), bufAddr(buf), ErrInvalid)
	}
	addr, key, mr, err := w.net.attach(buf)
	if err != nil {
		return Region{}, fmt.Errorf("onesided: Attach: %w", err)
	}
	k := [2]uint64{addr, key}
	if _, dup := w.attached[k]; dup {
		_ = mr.Close()
		return Region{}, fmt.Errorf("onesided: Attach: the memory at %#x is attached already: %w", bufAddr(buf), ErrInvalid)
	}
	r := Region{Rank: w.rank, Addr: addr, Key: key, Len: len(buf)}
	w.attached[k] = attachment{region: r, mr: mr, buf: buf}
	return r, nil
}

// Detach ends the access to a Region this rank attached (MPI_Win_detach).
// Other ranks must not access it afterwards; its memory is the caller's
// again (it may stay registered in the path's cache for a while, as any
// registered memory, without being written).
func (w *Window) Detach(r Region) error {
	if err := w.dynamicCheck("Detach"); err != nil {
		return err
	}
	k := [2]uint64{r.Addr, r.Key}
	a, ok := w.attached[k]
	if !ok || a.region != r {
		return fmt.Errorf("onesided: Detach: %+v is not a Region this rank attached: %w", r, ErrInvalid)
	}
	delete(w.attached, k)
	if idx, ok := w.dynIndex[w.rank][k]; ok {
		w.dyn[w.rank][idx] = dynEntry{region: r} // its memory goes now
	}
	err := a.mr.Close()
	a.free()
	if err != nil {
		return fmt.Errorf("onesided: Detach: %w", err)
	}
	return nil
}

// PutRegion is Put into Region r at byte offset off: complete at the
// target after a flush of r.Rank.
func (w *Window) PutRegion(r Region, off int, data []byte) error {
	target, o, err := w.dynTarget("PutRegion", r, off, len(data), 1)
	if err != nil {
		return err
	}
	mem, err := w.regionMem("PutRegion", r, o, false)
	if err != nil {
		return err
	}
	w.count(opPut, r.Rank, len(data))
	if mem != nil {
		copy(mem[off:], data)
		return nil
	}
	return w.net.put(target, o, data)
}

// GetRegion is Get from Region r at byte offset off: dst is filled after a
// flush of r.Rank.
func (w *Window) GetRegion(r Region, off int, dst []byte) error {
	target, o, err := w.dynTarget("GetRegion", r, off, len(dst), 1)
	if err != nil {
		return err
	}
	mem, err := w.regionMem("GetRegion", r, o, false)
	if err != nil {
		return err
	}
	w.count(opGet, r.Rank, len(dst))
	if mem != nil {
		memcopy.Copy(dst, mem[off:])
		return nil
	}
	return w.net.get(target, o, dst)
}

// AccumulateRegion is Accumulate into Region r at byte offset off
// (aligned to t's size).
func (w *Window) AccumulateRegion(r Region, off int, t AtomicType, op Op, data []byte) error {
	if err := checkOp(t, op); err != nil || op == OpNoOp || len(data)%max(t.Size(), 1) != 0 {
		return fmt.Errorf("onesided: AccumulateRegion(%v, %v) of %d bytes: %w", op, t, len(data), ErrInvalid)
	}
	target, o, err := w.dynTarget("AccumulateRegion", r, off, len(data), t.Size())
	if err != nil {
		return err
	}
	mem, err := w.regionMem("AccumulateRegion", r, o, true)
	if err != nil {
		return err
	}
	w.count(opAtomic, r.Rank, len(data))
	if mem != nil {
		applyAll(mem[off:], t, op, data)
		return nil
	}
	return w.net.accumulate(target, o, t, op, data)
}

// FetchAndOpRegion is FetchAndOp on the element of Region r at byte
// offset off (aligned to t's size).
func (w *Window) FetchAndOpRegion(r Region, off int, t AtomicType, op Op, operand uint64) (uint64, error) {
	if err := checkOp(t, op); err != nil {
		return 0, fmt.Errorf("onesided: FetchAndOpRegion: %w", err)
	}
	target, o, err := w.dynTarget("FetchAndOpRegion", r, off, t.Size(), t.Size())
	if err != nil {
		return 0, err
	}
	mem, err := w.regionMem("FetchAndOpRegion", r, o, true)
	if err != nil {
		return 0, err
	}
	w.count(opAtomic, r.Rank, t.Size())
	if mem != nil {
		return atomicApply(unsafe.Pointer(&mem[off]), t, op, operand), nil
	}
	return w.net.fetchOp(target, o, t, op, operand)
}

// CompareAndSwapRegion is CompareAndSwap on the element of Region r at
// byte offset off (aligned to t's size).
func (w *Window) CompareAndSwapRegion(r Region, off int, t AtomicType, compare, swap uint64) (uint64, error) {
	if t.Size() == 0 {
		return 0, fmt.Errorf("onesided: CompareAndSwapRegion: type %v: %w", t, ErrInvalid)
	}
	target, o, err := w.dynTarget("CompareAndSwapRegion", r, off, t.Size(), t.Size())
	if err != nil {
		return 0, err
	}
	mem, err := w.regionMem("CompareAndSwapRegion", r, o, true)
	if err != nil {
		return 0, err
	}
	w.count(opAtomic, r.Rank, t.Size())
	if mem != nil {
		return atomicCAS(unsafe.Pointer(&mem[off]), t, compare, swap), nil
	}
	return w.net.cas(target, o, t, compare, swap)
}

// RputRegion is PutRegion returning a Request (MPI_Rput): once it
// completes, data may be modified.
func (w *Window) RputRegion(r Region, off int, data []byte) (*Request, error) {
	if err := w.PutRegion(r, off, data); err != nil {
		return nil, err
	}
	return w.regionRequest(r, false), nil
}

// RgetRegion is GetRegion returning a Request (MPI_Rget): once it
// completes, dst holds the data.
func (w *Window) RgetRegion(r Region, off int, dst []byte) (*Request, error) {
	if err := w.GetRegion(r, off, dst); err != nil {
		return nil, err
	}
	return w.regionRequest(r, false), nil
}

// RaccumulateRegion is AccumulateRegion returning a Request
// (MPI_Raccumulate): once it completes, data may be modified and the
// update has been applied.
func (w *Window) RaccumulateRegion(r Region, off int, t AtomicType, op Op, data []byte) (*Request, error) {
	if err := w.AccumulateRegion(r, off, t, op, data); err != nil {
		return nil, err
	}
	return w.regionRequest(r, true), nil
}

// PutSignalRegion is PutSignal on a dynamic window: data into Region r
// at byte offset off, then value into the 8-byte signal word at sigOff of
// Region sr (8-byte aligned; sr may be r, the word outside the data),
// both Regions of one rank. The rank sees the data once it sees the
// signal (WaitSignalRegion), in the window's signal ordering; the
// signals of a dynamic window are RMA writes, never CQ data (a signal in
// CQ data names an offset in one window region). data may be reused when
// the call returns.
func (w *Window) PutSignalRegion(r Region, off int, data []byte, sr Region, sigOff int, value uint64) error {
	if r.Rank != sr.Rank {
		return fmt.Errorf("onesided: PutSignalRegion: data in a Region of rank %d, signal in one of rank %d: %w", r.Rank, sr.Rank, ErrInvalid)
	}
	target, o, err := w.dynTarget("PutSignalRegion", r, off, len(data), 1)
	if err != nil {
		return err
	}
	_, so, err := w.dynTarget("PutSignalRegion", sr, sigOff, 8, 8)
	if err != nil {
		return err
	}
	if r == sr && sigOff < off+len(data) && off < sigOff+8 && len(data) > 0 {
		return fmt.Errorf("onesided: PutSignalRegion: signal [%d,+8) overlaps data [%d,%d): %w", sigOff, off, off+len(data), ErrInvalid)
	}
	mem, err := w.regionMem("PutSignalRegion", r, o, false)
	if err != nil {
		return err
	}
	sig, err := w.regionMem("PutSignalRegion", sr, so, false)
	if err != nil {
		return err
	}
	w.count(opSignal, r.Rank, len(data)+8)
	if mem != nil && sig != nil {
		copy(mem[off:], data)
		// Sequentially consistent: a rank that loads the value sees the data.
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&sig[sigOff])), value)
		return nil
	}
	return w.net.putSignal(target, o, data, so, value)
}

// SignalRegion stores value into the signal word at sigOff of Region sr,
// ordered after every PutSignalRegion this rank issued before to sr's
// rank.
func (w *Window) SignalRegion(sr Region, sigOff int, value uint64) error {
	return w.PutSignalRegion(sr, 0, nil, sr, sigOff, value)
}

// TestSignalRegion is TestSignal on the signal word at sigOff of r, a
// Region this rank attached.
func (w *Window) TestSignalRegion(r Region, sigOff int, cmp Cmp, value uint64) (bool, uint64, error) {
	if err := w.enterWait("TestSignalRegion"); err != nil {
		return false, 0, err
	}
	defer w.exitWait()
	p, err := w.ownWord("TestSignalRegion", r, sigOff, cmp)
	if err != nil {
		return false, 0, err
	}
	return w.testWord(p, cmp, value)
}

// WaitSignalRegion is WaitSignal on the signal word at sigOff of r, a
// Region this rank attached: it waits until cmp(word, value) holds,
// driving libfabric progress meanwhile, and returns the word.
func (w *Window) WaitSignalRegion(ctx context.Context, r Region, sigOff int, cmp Cmp, value uint64) (uint64, error) {
	if err := w.enterWait("WaitSignalRegion"); err != nil {
		return 0, err
	}
	defer w.exitWait()
	p, err := w.ownWord("WaitSignalRegion", r, sigOff, cmp)
	if err != nil {
		return 0, err
	}
	return w.waitWordCmp(ctx, "WaitSignalRegion", p, sigOff, cmp, value)
}

// ownWord checks a signal word at sigOff of r, which this rank must have
// attached (and not detached), and returns it.
func (w *Window) ownWord(op string, r Region, sigOff int, cmp Cmp) (*uint64, error) {
	if err := w.dynamicCheck(op); err != nil {
		return nil, err
	}
	if !cmp.valid() {
		return nil, fmt.Errorf("onesided: %s: comparison %d: %w", op, cmp, ErrInvalid)
	}
	a, ok := w.attached[[2]uint64{r.Addr, r.Key}]
	if !ok || a.region != r {
		return nil, fmt.Errorf("onesided: %s: %+v is not a Region this rank attached: %w", op, r, ErrInvalid)
	}
	if sigOff < 0 || sigOff > len(a.buf)-8 {
		return nil, fmt.Errorf("onesided: %s: signal word [%d,+8) outside a Region of %d bytes: %w", op, sigOff, len(a.buf), ErrOutOfRange)
	}
	if (bufAddr(a.buf)+uintptr(sigOff))%8 != 0 {
		return nil, fmt.Errorf("onesided: %s: signal offset %d not 8-byte aligned: %w", op, sigOff, ErrInvalid)
	}
	return (*uint64)(unsafe.Pointer(&a.buf[sigOff])), nil
}

// PutTypedRegion is PutTyped into Region r: originCount elements of
// originType taken from origin go into targetCount elements of
// targetType laid out from byte offset off of r (both layouts the same
// packed bytes, the target's blocks inside r). As PutTyped on the
// libfabric path, the blocks go by iovec writes or through registered
// chunk buffers; complete at the target after a flush of r.Rank.
func (w *Window) PutTypedRegion(r Region, off int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	target, o, segs, n, err := w.dynTyped("PutTypedRegion", r, off, originCount, originType, targetCount, targetType)
	if err != nil {
		return err
	}
	mem, err := w.regionMem("PutTypedRegion", r, o, false)
	if err != nil {
		return err
	}
	w.count(opPut, r.Rank, n)
	if mem != nil {
		return transcode("PutTypedRegion", mem, int64(off), targetCount, targetType, origin, 0, originCount, originType, n, false)
	}
	return w.netTyped(context.Background(), "PutTypedRegion", target, o, segs, origin, originCount, originType, n, false)
}

// GetTypedRegion is GetTyped from Region r: targetCount elements of
// targetType laid out from byte offset off of r are read into
// originCount elements of originType in origin. It waits until origin
// holds the data (or ctx ends).
func (w *Window) GetTypedRegion(ctx context.Context, r Region, off int, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	defer w.after(w.during(ctx))
	target, o, segs, n, err := w.dynTyped("GetTypedRegion", r, off, originCount, originType, targetCount, targetType)
	if err != nil {
		return err
	}
	mem, err := w.regionMem("GetTypedRegion", r, o, false)
	if err != nil {
		return err
	}
	w.count(opGet, r.Rank, n)
	if mem != nil {
		return transcode("GetTypedRegion", origin, 0, originCount, originType, mem, int64(off), targetCount, targetType, n, true)
	}
	if err := w.netTyped(ctx, "GetTypedRegion", target, o, segs, origin, originCount, originType, n, true); err != nil {
		return err
	}
	return w.net.flush(ctx, target)
}

// AccumulateTypedRegion is AccumulateTyped into Region r: originCount
// elements of originType from origin are combined with op, element by
// element and each atomically, into targetCount elements of targetType
// laid out from byte offset off of r (every target block whole elements
// of t at t-aligned addresses). Complete at the target after a flush of
// r.Rank; origin may be reused at once.
func (w *Window) AccumulateTypedRegion(r Region, off int, t AtomicType, op Op, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	if err := checkOp(t, op); err != nil || op == OpNoOp {
		return fmt.Errorf("onesided: AccumulateTypedRegion(%v, %v): %w", op, t, ErrInvalid)
	}
	target, o, segs, n, err := w.dynTyped("AccumulateTypedRegion", r, off, originCount, originType, targetCount, targetType)
	if err != nil {
		return err
	}
	sz := t.Size()
	if n%sz != 0 {
		return fmt.Errorf("onesided: AccumulateTypedRegion: %d bytes is not a whole number of %v: %w", n, t, ErrInvalid)
	}
	for _, s := range segs {
		if (r.Addr+uint64(off)+uint64(s.Off))%uint64(sz) != 0 || int(s.Len)%sz != 0 {
			return fmt.Errorf("onesided: AccumulateTypedRegion: target block [%d, %d) is not whole %v elements at an aligned offset: %w",
				off+int(s.Off), off+int(s.Off+s.Len), t, ErrInvalid)
		}
	}
	mem, err := w.regionMem("AccumulateTypedRegion", r, o, true)
	if err != nil {
		return err
	}
	w.count(opAtomic, r.Rank, n)
	return accumulateStream("AccumulateTypedRegion", t, n, segs, origin, originCount, originType, func(boff int, data []byte) error {
		if mem != nil {
			applyAll(mem[off+boff:], t, op, data)
			return nil
		}
		return w.net.accumulate(target, o+boff, t, op, data)
	})
}

// dynTyped checks a typed transfer with Region r at off and returns its
// target, encoded offset, the target layout's blocks (each inside r) and
// the bytes it carries.
func (w *Window) dynTyped(op string, r Region, off, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) (target, enc int, segs []ddt.Segment, n int, err error) {
	if target, enc, err = w.dynTarget(op, r, off, 0, 1); err != nil {
		return 0, 0, nil, 0, err
	}
	on, err := typedBytes(op, originCount, originType, targetCount, targetType)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	if on > int64(r.Len-off) {
		return 0, 0, nil, 0, fmt.Errorf("onesided: %s: the layouts carry %d bytes, more than the Region's %d from offset %d: %w", op, on, r.Len-off, off, ErrOutOfRange)
	}
	segs, err = targetType.AppendSegments(w.typed.tsegs[:0], targetCount, 0)
	w.typed.tsegs = segs
	if err != nil {
		if errors.Is(err, ddt.ErrOverflow) {
			return 0, 0, nil, 0, fmt.Errorf("onesided: %s: %w: %w", op, ErrOutOfRange, err)
		}
		return 0, 0, nil, 0, fmt.Errorf("onesided: %s: %w: %w", op, ErrInvalid, err)
	}
	for _, s := range segs {
		if lo := int64(off) + s.Off; lo < 0 || s.Len > int64(r.Len)-lo {
			return 0, 0, nil, 0, fmt.Errorf("onesided: %s: block [%d, +%d) outside a Region of %d bytes: %w", op, lo, s.Len, r.Len, ErrOutOfRange)
		}
	}
	return target, enc, segs, int(on), nil
}

// dynamicCheck reports an error unless w is an open dynamic window.
func (w *Window) dynamicCheck(op string) error {
	if err := w.check(op, 0, 0, 0); err != nil {
		return err
	}
	if w.dyn == nil {
		return fmt.Errorf("onesided: %s: not a dynamic window (CreateDynamic): %w", op, ErrInvalid)
	}
	return nil
}

// dynTarget checks an operation on n bytes at off of Region r, aligned
// to align, and returns its target rank and encoded offset (the Region's
// index in this rank's table for the target, then off).
func (w *Window) dynTarget(op string, r Region, off, n, align int) (int, int, error) {
	if err := w.dynamicCheck(op); err != nil {
		return 0, 0, err
	}
	if r.Rank < 0 || r.Rank >= w.size {
		return 0, 0, fmt.Errorf("onesided: %s: Region of rank %d of %d: %w", op, r.Rank, w.size, ErrUnknownRank)
	}
	if r.Len <= 0 || r.Len > dynMask || off < 0 || n < 0 || off > r.Len || n > r.Len-off {
		return 0, 0, fmt.Errorf("onesided: %s: [%d, %d) outside a Region of %d bytes: %w", op, off, off+n, r.Len, ErrOutOfRange)
	}
	if (r.Addr+uint64(off))%uint64(align) != 0 {
		return 0, 0, fmt.Errorf("onesided: %s: offset %d not %d-byte aligned: %w", op, off, align, ErrInvalid)
	}
	k := [2]uint64{r.Addr, r.Key}
	if r.Rank == w.rank {
		// This rank's own Regions can be checked: a made-up or detached
		// one would reach the provider with a key nothing registered,
		// and libfabric's shm provider drops such an operation: it
		// would never complete.
		if a, ok := w.attached[k]; !ok || a.region != r {
			return 0, 0, fmt.Errorf("onesided: %s: %+v is not a Region this rank has attached: %w", op, r, ErrInvalid)
		}
	}
	idx, ok := w.dynIndex[r.Rank][k]
	if !ok {
		if w.dynIndex[r.Rank] == nil {
			w.dynIndex[r.Rank] = map[[2]uint64]int{}
		}
		idx = len(w.dyn[r.Rank])
		if idx >= 1<<(62-dynShift) {
			return 0, 0, fmt.Errorf("onesided: %s: %d Regions of rank %d in use: %w", op, idx, r.Rank, ErrInvalid)
		}
		w.dyn[r.Rank] = append(w.dyn[r.Rank], dynEntry{region: r})
		w.dynIndex[r.Rank][k] = idx
	} else if e := &w.dyn[r.Rank][idx]; e.region != r {
		// Other memory attached since at the same address and key.
		*e = dynEntry{region: r}
	}
	return r.Rank, idx<<dynShift | off, nil
}

func bufAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
