package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
)

func TestHeapAllocatorSameOffsets(t *testing.T) {
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return heapScenario(ctx, g, WithSharedMemory(ShmOnly), withHeapCheck())
	})
}

// withHeapCheck turns the heap's header checks on for one heap (WEFT_TUNE's
// heapcheck does it for all).
func withHeapCheck() Option { return func(o *options) { o.heapCheck = true } }

// withCASFallback sends every atomic but reads through the compare-and-swap
// fallback of the libfabric path.
func withCASFallback() Option { return func(o *options) { o.casFallback = true } }

// heapScenario allocates, frees and reallocates objects, checks offsets,
// does puts/gets/atomics by (rank, Sym) and the error paths.
func heapScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<16, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	a, err := h.Alloc(ctx, 100, 0)
	if err != nil {
		return err
	}
	b, err := h.Alloc(ctx, 4096, 4096)
	if err != nil {
		return err
	}
	c, err := h.Alloc(ctx, 8*n, 64)
	if err != nil {
		return err
	}
	if a.Off != 0 || b.Off != 4096 || c.Off != 128 {
		return fmt.Errorf("offsets a=%d b=%d c=%d, want 0 4096 128", a.Off, b.Off, c.Off)
	}
	if err := h.Free(ctx, a); err != nil {
		return err
	}
	d, err := h.Alloc(ctx, 64, 0)
	if err != nil {
		return err
	}
	if d.Off != 0 {
		return fmt.Errorf("reuse after free: offset %d", d.Off)
	}
	if _, err := h.Alloc(ctx, 1<<20, 0); !errors.Is(err, ErrOutOfMemory) {
		return fmt.Errorf("oversized alloc: %v", err)
	}
	// Everyone writes its rank into slot me of c on every rank, and adds
	// to a counter on rank 0.
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], uint64(me+1))
	for r := 0; r < n; r++ {
		if err := h.Put(r, c, 8*me, v[:]); err != nil {
			return err
		}
		if _, err := h.Atomic(0, d, 0, AtomicUint64, OpSum, uint64(r)); err != nil {
			return err
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	for r := 0; r < n; r++ {
		if got := binary.LittleEndian.Uint64(h.Local(c)[8*r:]); got != uint64(r+1) {
			return fmt.Errorf("slot %d = %d", r, got)
		}
	}
	got := make([]byte, 8)
	if err := h.Get(0, d, 0, got); err != nil {
		return err
	}
	if err := h.Quiet(ctx); err != nil {
		return err
	}
	if v := binary.LittleEndian.Uint64(got); v != uint64(n*n*(n-1)/2) {
		return fmt.Errorf("counter %d, want %d", v, n*n*(n-1)/2)
	}
	if err := h.Put(0, c, 8*n-4, v[:]); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("put past object: %v", err)
	}
	if err := h.Put(n, c, 0, v[:]); !errors.Is(err, ErrUnknownRank) {
		return fmt.Errorf("put to unknown rank: %v", err)
	}
	if err := h.Put(0, a, 0, v[:]); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("put to freed object: %v", err)
	}
	if err := h.Free(ctx, Sym{Off: 5, Size: 3}); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("free of unknown object: %v", err)
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if err := h.Close(ctx); err != nil {
		return err
	}
	if err := h.Put(0, c, 0, v[:]); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("put on closed heap: %v", err)
	}
	return nil
}

// TestHeapAllocHugeSizes: sizes near math.MaxInt (and bad ones) fail
// cleanly, and the free list is intact after each: a later allocation of
// everything that is left still succeeds.
func TestHeapAllocHugeSizes(t *testing.T) {
	const size = 1 << 16
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		h, err := NewHeap(ctx, g, size, WithSharedMemory(ShmOnly))
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, h.Close)
		first, err := h.Alloc(ctx, 64, 0)
		if err != nil {
			return err
		}
		intact := func(what string) error {
			if len(h.free) != 1 || h.free[0] != (span{64, size}) {
				return fmt.Errorf("after %s: free list %v, want [{64 %d}]", what, h.free, size)
			}
			return nil
		}
		cases := []struct {
			size, align int
			want        error
		}{
			{math.MaxInt, 0, ErrOutOfMemory},
			{math.MaxInt - 7, 0, ErrOutOfMemory},
			{math.MaxInt - 64, 0, ErrOutOfMemory},
			{math.MaxInt - size + 1, 0, ErrOutOfMemory},
			{size, 0, ErrOutOfMemory},
			{64, 1 << 62, ErrOutOfMemory},
			{-1, 0, ErrInvalid},
			{math.MinInt, 0, ErrInvalid},
			{0, 0, ErrInvalid},
			{64, 3, ErrInvalid},
			{64, -8, ErrInvalid},
		}
		for _, c := range cases {
			what := fmt.Sprintf("Alloc(%d, align %d)", c.size, c.align)
			if _, err := h.Alloc(ctx, c.size, c.align); !errors.Is(err, c.want) {
				return fmt.Errorf("%s: %v, want %v", what, err, c.want)
			}
			if err := intact(what); err != nil {
				return err
			}
		}
		rest, err := h.Alloc(ctx, size-64, 0)
		if err != nil {
			return fmt.Errorf("allocating the %d bytes left: %w", size-64, err)
		}
		if rest.Off != 64 {
			return fmt.Errorf("rest at %d, want 64", rest.Off)
		}
		if l := h.Local(Sym{Off: 64, Size: math.MaxInt}); l != nil {
			return fmt.Errorf("Local of an overflowing Sym returned %d bytes", len(l))
		}
		if err := h.Free(ctx, rest); err != nil {
			return err
		}
		return h.Free(ctx, first)
	})
}

// heapTypedScenario: shmem_iput and shmem_iget through the heap's typed
// calls (every other int64 of the origin into every third of the object
// on the next rank, and back), a strided accumulate, and a target layout
// that leaves the object (ErrOutOfRange, nothing moved).
func heapTypedScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, p := g.Rank(), g.Size()
	right := (me + 1) % p
	h, err := NewHeap(ctx, g, 1<<14, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	const n = 10
	obj, err := h.Alloc(ctx, 8*3*n, 8)
	if err != nil {
		return err
	}
	acc, err := h.Alloc(ctx, 8*3*n, 8)
	if err != nil {
		return err
	}
	src, err := ddt.Vector(n, 1, 2, ddt.Int64)
	if err == nil {
		err = src.Commit()
	}
	if err != nil {
		return err
	}
	dst, err := ddt.Vector(n, 1, 3, ddt.Int64)
	if err == nil {
		err = dst.Commit()
	}
	if err != nil {
		return err
	}
	origin := make([]int64, 2*n)
	for i := range origin {
		origin[i] = int64(100*me + i)
	}
	ob := unsafe.Slice((*byte)(unsafe.Pointer(&origin[0])), 8*len(origin))
	if err := h.PutTyped(right, obj, 0, ob, 1, src, 1, dst); err != nil {
		return err
	}
	if err := h.AccumulateTyped(right, acc, 8, AtomicInt64, OpSum, ob, 1, src, 1, dst); err != nil {
		return err
	}
	// 24 bytes in, a layout spanning 3n-2 elements ends past the object
	if err := h.PutTyped(right, obj, 24, ob, 1, src, 1, dst); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("PutTyped leaving the object: %v, want ErrOutOfRange", err)
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	left := (me + p - 1) % p
	got, err := LocalView[int64](h, obj)
	if err != nil {
		return err
	}
	sums, err := LocalView[int64](h, acc)
	if err != nil {
		return err
	}
	for i := range 3 * n {
		want, wantAcc := int64(0), int64(0)
		if i%3 == 0 {
			want = int64(100*left + 2*(i/3))
		}
		if i >= 1 && (i-1)%3 == 0 {
			wantAcc = int64(100*left + 2*((i-1)/3))
		}
		if got[i] != want || sums[i] != wantAcc {
			return fmt.Errorf("rank %d, element %d: put %d (want %d), accumulated %d (want %d)", me, i, got[i], want, sums[i], wantAcc)
		}
	}
	// shmem_iget: the left rank's strided copy back into a column
	back := make([]int64, 2*n)
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&back[0])), 8*len(back))
	if err := h.GetTyped(ctx, right, obj, 0, bb, 1, src, 1, dst); err != nil {
		return err
	}
	for i := range n {
		if back[2*i] != int64(100*me+2*i) {
			return fmt.Errorf("GetTyped: element %d = %d, want %d", i, back[2*i], 100*me+2*i)
		}
	}
	return h.Barrier(ctx)
}

func TestHeapTyped(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 3, func(ctx context.Context, g Group) error { return heapTypedScenario(ctx, g) })
	})
	t.Run("libfabric", func(t *testing.T) {
		requireProvider(t, "shm")
		runRanks(t, 3, func(ctx context.Context, g Group) error {
			return heapTypedScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
		})
	})
}
