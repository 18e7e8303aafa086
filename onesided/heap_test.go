package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
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
