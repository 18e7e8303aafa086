package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weft-hpc/weft/ddt"
)

// Heap is a symmetric heap for PGAS runtimes: one window of the same size on
// every rank, carved up by a deterministic allocator so that every rank's
// Alloc returns the same offset for the same call. Objects are then named
// by (rank, Sym).
//
// Alloc and Free are collective and must be called in the same order on
// every rank (as shmem_malloc and shmem_free). A Heap, like a Window, is
// for one goroutine at a time.
type Heap struct {
	w      *Window
	free   []span      // sorted, coalesced free spans
	allocs map[int]int // offset → size
	check  bool
	closed bool
	// Distributed locks (lock.go): the ones this rank holds, and the ones
	// it owes, given up by a call whose context ended.
	held map[int]bool
	owed map[int]lockState
}

type span struct{ start, end int }

// Sym is a symmetric object: the same offset and size on every rank.
type Sym struct {
	Off, Size int
}

// NewHeap allocates a symmetric heap of size bytes on every rank of g
// (collective; size must be the same everywhere). Setting WEFT_TUNE=heapcheck=1
// makes Alloc verify through an Allgather that every rank got the same
// offset.
func NewHeap(ctx context.Context, g Group, size int, opts ...Option) (*Heap, error) {
	if size <= 0 {
		return nil, fmt.Errorf("onesided: NewHeap(%d): %w", size, ErrInvalid)
	}
	w, err := Allocate(ctx, g, size, opts...)
	if err != nil {
		return nil, fmt.Errorf("onesided: NewHeap: %w", err)
	}
	for r := 0; r < w.Size(); r++ {
		if w.Len(r) != size {
			_ = w.Free(ctx)
			return nil, fmt.Errorf("onesided: NewHeap: rank %d asked for %d bytes, rank %d for %d: %w",
				r, w.Len(r), w.Rank(), size, ErrInvalid)
		}
	}
	return &Heap{w: w, free: []span{{0, size}}, allocs: map[int]int{},
		check: w.opts.heapCheck}, nil
}

// Window returns the heap's underlying window.
func (h *Heap) Window() *Window {
	if h == nil {
		return nil
	}
	return h.w
}

// usable returns an error for a nil or closed heap.
func (h *Heap) usable(op string) error {
	if h == nil {
		return fmt.Errorf("onesided: Heap.%s on a nil heap: %w", op, ErrInvalid)
	}
	if h.closed {
		return fmt.Errorf("onesided: Heap.%s: %w", op, ErrClosed)
	}
	return nil
}

// Alloc reserves size bytes aligned to align (a power of two; 0 means 8)
// at the same offset on every rank. It is collective and ends with a
// barrier, so other ranks may access the object as soon as it returns.
func (h *Heap) Alloc(ctx context.Context, size, align int) (Sym, error) {
	if err := h.usable("Alloc"); err != nil {
		return Sym{}, err
	}
	if align == 0 {
		align = 8
	}
	if size <= 0 || align < 0 || align&(align-1) != 0 {
		return Sym{}, fmt.Errorf("onesided: Heap.Alloc(%d, align %d): %w", size, align, ErrInvalid)
	}
	off := -1
	for i, s := range h.free {
		// Checked arithmetic: size and align come from the caller, and an
		// overflowing a+size would pass the test and split the span into
		// garbage.
		if s.start > math.MaxInt-(align-1) {
			continue
		}
		a := roundUp(s.start, align)
		if a > s.end || size > s.end-a {
			continue
		}
		off = a
		// Split the span into what is left on either side.
		rest := []span{}
		if a > s.start {
			rest = append(rest, span{s.start, a})
		}
		if a+size < s.end {
			rest = append(rest, span{a + size, s.end})
		}
		h.free = slices.Replace(h.free, i, i+1, rest...)
		break
	}
	if off < 0 {
		// Still collective: every rank fails the same way.
		return Sym{}, fmt.Errorf("onesided: Heap.Alloc(%d): %w", size, ErrOutOfMemory)
	}
	h.allocs[off] = size
	sym := Sym{Off: off, Size: size}
	clear(h.w.local[off : off+size])
	if h.check {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(off))
		all, err := h.w.g.Allgather(ctx, b[:])
		if err != nil {
			return sym, fmt.Errorf("onesided: Heap.Alloc: %w", err)
		}
		for r, v := range all {
			if int(binary.LittleEndian.Uint64(v)) != off {
				return sym, fmt.Errorf("onesided: Heap.Alloc: rank %d got offset %d, this rank %d (calls out of order?): %w",
					r, binary.LittleEndian.Uint64(v), off, ErrInvalid)
			}
		}
	}
	return sym, h.w.barrier(ctx)
}

// Free returns s to the heap. It is collective: it completes this rank's
// operations and waits for every rank before the memory can be reused.
func (h *Heap) Free(ctx context.Context, s Sym) error {
	if err := h.usable("Free"); err != nil {
		return err
	}
	if sz, ok := h.allocs[s.Off]; !ok || sz != s.Size {
		return fmt.Errorf("onesided: Heap.Free(%+v): not an allocated object: %w", s, ErrInvalid)
	}
	delete(h.allocs, s.Off)
	i, _ := slices.BinarySearchFunc(h.free, s.Off, func(sp span, off int) int { return sp.start - off })
	h.free = slices.Insert(h.free, i, span{s.Off, s.Off + s.Size})
	// Coalesce with neighbours.
	if i+1 < len(h.free) && h.free[i].end == h.free[i+1].start {
		h.free[i].end = h.free[i+1].end
		h.free = slices.Delete(h.free, i+1, i+2)
	}
	if i > 0 && h.free[i-1].end == h.free[i].start {
		h.free[i-1].end = h.free[i].end
		h.free = slices.Delete(h.free, i, i+1)
	}
	return h.w.Fence(ctx)
}

// Local returns this rank's copy of s.
func (h *Heap) Local(s Sym) []byte {
	if h == nil || h.closed || s.Off < 0 || s.Size < 0 || s.Off > len(h.w.local) || s.Size > len(h.w.local)-s.Off {
		return nil
	}
	return h.w.local[s.Off : s.Off+s.Size : s.Off+s.Size]
}

// Ptr returns rank's copy of s for loads and stores of this process's own
// (OpenSHMEM's shmem_ptr): this rank's, or that of a rank of this node
// whose heap shares a memory segment with this one (Window.Shared). For
// any other rank it fails with ErrNotSupported; for an s that is not an
// allocated object of h, with ErrInvalid. The slice is valid until s is
// freed; the rules of Window.Shared apply.
func (h *Heap) Ptr(rank int, s Sym) ([]byte, error) {
	o, err := h.at("Ptr", s, 0, s.Size)
	if err != nil {
		return nil, err
	}
	p, err := h.w.Shared(rank)
	if err != nil {
		return nil, err
	}
	return p[o : o+s.Size : o+s.Size], nil
}

func (h *Heap) at(op string, s Sym, off, n int) (int, error) {
	if err := h.usable(op); err != nil {
		return 0, err
	}
	if sz, ok := h.allocs[s.Off]; !ok || sz != s.Size {
		return 0, fmt.Errorf("onesided: Heap.%s(%+v): not an allocated object: %w", op, s, ErrInvalid)
	}
	if off < 0 || n < 0 || off > s.Size || n > s.Size-off {
		return 0, fmt.Errorf("onesided: Heap.%s: [%d, %d) outside a %d-byte object: %w", op, off, off+n, s.Size, ErrOutOfRange)
	}
	return s.Off + off, nil
}

// Put writes data into rank's copy of s at byte offset off.
func (h *Heap) Put(rank int, s Sym, off int, data []byte) error {
	o, err := h.at("Put", s, off, len(data))
	if err != nil {
		return err
	}
	return h.w.Put(rank, o, data)
}

// Get reads len(dst) bytes of rank's copy of s at off; dst is filled after
// Quiet (at once for direct stores).
func (h *Heap) Get(rank int, s Sym, off int, dst []byte) error {
	o, err := h.at("Get", s, off, len(dst))
	if err != nil {
		return err
	}
	return h.w.Get(rank, o, dst)
}

// typedAt checks a typed transfer's target layout, count elements of t
// from byte off of object s, against the object (not only the window)
// and returns the layout's window offset.
func (h *Heap) typedAt(op string, s Sym, off, count int, t *ddt.Type) (int, error) {
	o, err := h.at(op, s, off, 0)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, fmt.Errorf("onesided: Heap.%s: nil datatype: %w", op, ErrInvalid)
	}
	if err := t.CheckBounds(count, s.Size-off); err != nil {
		return 0, fmt.Errorf("onesided: Heap.%s: the target layout leaves the %d-byte object: %w: %w", op, s.Size, ErrOutOfRange, err)
	}
	return o, nil
}

// PutTyped is Window.PutTyped into rank's copy of s, the target layout
// starting at byte off of the object and staying inside it: OpenSHMEM's
// strided shmem_iput with ddt.Vector types, and any other layout. It
// completes at Quiet.
func (h *Heap) PutTyped(rank int, s Sym, off int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	o, err := h.typedAt("PutTyped", s, off, targetCount, targetType)
	if err != nil {
		return err
	}
	return h.w.PutTyped(rank, o, origin, originCount, originType, targetCount, targetType)
}

// GetTyped is Window.GetTyped from rank's copy of s (shmem_iget and any
// other layout); origin holds the data when it returns.
func (h *Heap) GetTyped(ctx context.Context, rank int, s Sym, off int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	o, err := h.typedAt("GetTyped", s, off, targetCount, targetType)
	if err != nil {
		return err
	}
	return h.w.GetTyped(ctx, rank, o, origin, originCount, originType, targetCount, targetType)
}

// AccumulateTyped is Window.AccumulateTyped into rank's copy of s (the
// strided accumulate of ARMCI); it completes at Quiet.
func (h *Heap) AccumulateTyped(rank int, s Sym, off int, t AtomicType, op Op, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	o, err := h.typedAt("AccumulateTyped", s, off, targetCount, targetType)
	if err != nil {
		return err
	}
	return h.w.AccumulateTyped(rank, o, t, op, origin, originCount, originType, targetCount, targetType)
}

// PutSignal writes data into rank's copy of s at off, then value into the
// signal word at sigOff of object sig (see Window.PutSignal).
func (h *Heap) PutSignal(rank int, s Sym, off int, data []byte, sig Sym, sigOff int, value uint64) error {
	o, err := h.at("PutSignal", s, off, len(data))
	if err != nil {
		return err
	}
	so, err := h.at("PutSignal", sig, sigOff, 8)
	if err != nil {
		return err
	}
	return h.w.PutSignal(rank, o, data, so, value)
}

// WaitSignal waits until cmp(word, value) holds for this rank's signal word
// at sigOff of object sig.
func (h *Heap) WaitSignal(ctx context.Context, sig Sym, sigOff int, cmp Cmp, value uint64) (uint64, error) {
	so, err := h.at("WaitSignal", sig, sigOff, 8)
	if err != nil {
		return 0, err
	}
	return h.w.WaitSignal(ctx, so, cmp, value)
}

// Atomic applies op with operand to the element of type t at off in rank's
// copy of s and returns the previous value (see Window.FetchAndOp).
func (h *Heap) Atomic(rank int, s Sym, off int, t AtomicType, op Op, operand uint64) (uint64, error) {
	o, err := h.at("Atomic", s, off, t.Size())
	if err != nil {
		return 0, err
	}
	return h.w.FetchAndOp(rank, o, t, op, operand)
}

// CompareAndSwap is Window.CompareAndSwap on rank's copy of s at off.
func (h *Heap) CompareAndSwap(rank int, s Sym, off int, t AtomicType, compare, swap uint64) (uint64, error) {
	o, err := h.at("CompareAndSwap", s, off, t.Size())
	if err != nil {
		return 0, err
	}
	return h.w.CompareAndSwap(rank, o, t, compare, swap)
}

// Non-fetching atomics (shmem_atomic_add, _inc, _set, _and, _or, _xor and
// their vector forms). Each updates elements of type t in rank's copy of s
// at byte offset off (which, added to s.Off, must be aligned to t.Size())
// and returns once the update is issued, without waiting for the target:
// the update is complete at the target after Quiet or Barrier, as a Put
// is (on the direct-store path at once). The operands are copied before
// the call returns. Operands are raw bits, as for Atomic: the low four
// bytes for 4-byte types, math.Float64bits and friends for floats,
// uint64(v) for a signed v. Each element is updated atomically with
// respect to every other atomic on it (fetching or not, from any rank);
// the elements of a vector form are not updated as one unit.
//
// On the libfabric path a vector form is one fetch-atomic of N elements
// (split where N exceeds what the provider grants in one operation or
// what the window's registered staging slots hold), the fetched values
// discarded:
// its completion, unlike fi_atomic's, means applied at the target. On the
// direct-store path it is a loop of hardware atomics.

// AtomicAdd adds v to the element of type t at off in rank's copy of s
// (shmem_atomic_add). Floats are added as floats.
func (h *Heap) AtomicAdd(rank int, s Sym, off int, t AtomicType, v uint64) error {
	return h.update("AtomicAdd", rank, s, off, t, OpSum, []uint64{v})
}

// AtomicInc adds one to the element of type t at off in rank's copy of s
// (shmem_atomic_inc); for floats, 1.0.
func (h *Heap) AtomicInc(rank int, s Sym, off int, t AtomicType) error {
	one := uint64(1)
	switch t {
	case AtomicFloat32:
		one = uint64(math.Float32bits(1))
	case AtomicFloat64:
		one = math.Float64bits(1)
	}
	return h.update("AtomicInc", rank, s, off, t, OpSum, []uint64{one})
}

// AtomicSet atomically stores v into the element of type t at off in
// rank's copy of s (shmem_atomic_set).
func (h *Heap) AtomicSet(rank int, s Sym, off int, t AtomicType, v uint64) error {
	return h.update("AtomicSet", rank, s, off, t, OpReplace, []uint64{v})
}

// AtomicAnd applies a bitwise AND with v to the integer element of type t
// at off in rank's copy of s (shmem_atomic_and).
func (h *Heap) AtomicAnd(rank int, s Sym, off int, t AtomicType, v uint64) error {
	return h.update("AtomicAnd", rank, s, off, t, OpBand, []uint64{v})
}

// AtomicOr applies a bitwise OR with v to the integer element of type t at
// off in rank's copy of s (shmem_atomic_or).
func (h *Heap) AtomicOr(rank int, s Sym, off int, t AtomicType, v uint64) error {
	return h.update("AtomicOr", rank, s, off, t, OpBor, []uint64{v})
}

// AtomicXor applies a bitwise XOR with v to the integer element of type t
// at off in rank's copy of s (shmem_atomic_xor).
func (h *Heap) AtomicXor(rank int, s Sym, off int, t AtomicType, v uint64) error {
	return h.update("AtomicXor", rank, s, off, t, OpBxor, []uint64{v})
}

// AtomicAddN adds vals[i] to element i of the len(vals) consecutive
// elements of type t starting at off in rank's copy of s.
func (h *Heap) AtomicAddN(rank int, s Sym, off int, t AtomicType, vals []uint64) error {
	return h.update("AtomicAddN", rank, s, off, t, OpSum, vals)
}

// AtomicN applies op with operand vals[i] to element i of the len(vals)
// consecutive elements of type t starting at off in rank's copy of s: the
// vector form of every non-fetching atomic (OpSum, OpMin, OpMax,
// OpReplace, and on integer types OpBor, OpBand, OpBxor; not OpNoOp).
func (h *Heap) AtomicN(rank int, s Sym, off int, t AtomicType, op Op, vals []uint64) error {
	return h.update("AtomicN", rank, s, off, t, op, vals)
}

// update is the common path of the non-fetching atomics: it validates the
// arguments against the heap and the object, packs the operands and hands
// them to Window.Accumulate.
func (h *Heap) update(name string, rank int, s Sym, off int, t AtomicType, op Op, vals []uint64) error {
	if err := h.usable(name); err != nil {
		return err
	}
	if err := checkOp(t, op); err != nil {
		return fmt.Errorf("onesided: Heap.%s: %w", name, err)
	}
	if op == OpNoOp {
		return fmt.Errorf("onesided: Heap.%s: op %v does not update: %w", name, op, ErrInvalid)
	}
	if len(vals) == 0 {
		return fmt.Errorf("onesided: Heap.%s: no elements: %w", name, ErrInvalid)
	}
	sz := t.Size()
	if len(vals) > math.MaxInt/sz {
		return fmt.Errorf("onesided: Heap.%s: %d elements: %w", name, len(vals), ErrOutOfRange)
	}
	o, err := h.at(name, s, off, len(vals)*sz)
	if err != nil {
		return err
	}
	if o%sz != 0 {
		return fmt.Errorf("onesided: Heap.%s: offset %d of an object at %d is not %d-byte aligned for %v: %w",
			name, off, s.Off, sz, t, ErrInvalid)
	}
	data := make([]byte, len(vals)*sz)
	for i, v := range vals {
		if sz == 4 {
			binary.NativeEndian.PutUint32(data[i*sz:], uint32(v))
		} else {
			binary.NativeEndian.PutUint64(data[i*sz:], v)
		}
	}
	return h.w.Accumulate(rank, o, t, op, data)
}

// Quiet waits until every operation this rank issued is complete at its
// target (shmem_quiet), the non-fetching atomics included.
func (h *Heap) Quiet(ctx context.Context) error {
	if err := h.usable("Quiet"); err != nil {
		return err
	}
	if err := h.serviceLocks(); err != nil {
		return err
	}
	return h.w.FlushAll(ctx)
}

// Fence orders this rank's Puts and non-fetching atomics to each rank
// (shmem_fence): those issued before it are delivered to a rank before
// those issued after it. Here it is as strong as Quiet, which completes
// them all. It is not the window's Fence (MPI_Win_fence, a collective
// call), which is the heap's Barrier.
func (h *Heap) Fence(ctx context.Context) error {
	if err := h.usable("Fence"); err != nil {
		return err
	}
	return h.Quiet(ctx)
}

// Barrier is Quiet followed by a barrier of all ranks (shmem_barrier_all).
func (h *Heap) Barrier(ctx context.Context) error {
	if err := h.usable("Barrier"); err != nil {
		return err
	}
	if err := h.serviceLocks(); err != nil {
		return err
	}
	return h.w.Fence(ctx)
}

// Close frees the heap (collective; idempotent).
func (h *Heap) Close(ctx context.Context) error {
	if h == nil {
		return fmt.Errorf("onesided: Close of a nil heap: %w", ErrInvalid)
	}
	if h.closed {
		return nil
	}
	// The ranks queued behind a lock this rank gave up must get it
	// before the window goes.
	lockErr := h.settleLocks(ctx)
	h.closed = true
	return errors.Join(lockErr, h.w.Free(ctx))
}
