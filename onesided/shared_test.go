package onesided

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"unsafe"
)

// sharedScenario: every rank stores its rank + 1 into word me of every
// other rank's window (and of a heap object) by plain stores through
// Window.Shared / Heap.Ptr where the target is direct, by Put elsewhere;
// after a Fence each rank finds every word written. Shared and Ptr
// refuse targets that are not mapped here (ErrNotSupported), unknown
// ranks, objects that are not allocated and freed windows.
// With wantDirect ≥ 0 it also asks that every other rank be direct
// (1) or none (0).
func sharedScenario(ctx context.Context, g Group, wantDirect int, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	w, err := Allocate(ctx, g, 8*n, opts...)
	if err != nil {
		return err
	}
	for t := range n {
		if d := w.Direct(t); t != me && wantDirect >= 0 && d != (wantDirect == 1) {
			return fmt.Errorf("rank %d: Direct(%d) %v", me, t, d)
		}
	}
	freed := false
	defer func() {
		if !freed {
			err = errors.Join(err, w.Free(ctx))
		}
	}()
	for t := range n {
		b, err := w.Shared(t)
		switch {
		case !w.Direct(t):
			if !errors.Is(err, ErrNotSupported) {
				return fmt.Errorf("Shared(%d) of a rank reached through libfabric: %v, want ErrNotSupported", t, err)
			}
			if err := w.Put(t, 8*me, u64bytes(uint64(me+1))); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("Shared(%d): %w", t, err)
		case len(b) != w.Len(t):
			return fmt.Errorf("Shared(%d): %d bytes, want %d", t, len(b), w.Len(t))
		}
		v, err := SharedView[uint64](w, t)
		if err != nil {
			return err
		}
		v[me] = uint64(me + 1)
	}
	if own, err := w.Shared(me); err != nil || unsafe.SliceData(own) != unsafe.SliceData(w.Bytes()) {
		return fmt.Errorf("Shared(own rank) is not Bytes (err %v)", err)
	}
	for _, t := range []int{-1, n} {
		if _, err := w.Shared(t); !errors.Is(err, ErrUnknownRank) {
			return fmt.Errorf("Shared(%d): %v, want ErrUnknownRank", t, err)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	mine, err := View[uint64](w)
	if err != nil {
		return err
	}
	for r, x := range mine {
		if x != uint64(r+1) {
			return fmt.Errorf("word %d of rank %d's window: %d, want %d", r, me, x, r+1)
		}
	}

	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	s, err := h.Alloc(ctx, 8*n, 8)
	if err != nil {
		return err
	}
	for t := range n {
		p, err := h.Ptr(t, s)
		if !h.Window().Direct(t) {
			if !errors.Is(err, ErrNotSupported) {
				return fmt.Errorf("Ptr(%d) of a rank reached through libfabric: %v, want ErrNotSupported", t, err)
			}
			if err := h.Put(t, s, 8*me, u64bytes(uint64(10*me))); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("Ptr(%d): %w", t, err)
		}
		if len(p) != s.Size {
			return fmt.Errorf("Ptr(%d): %d bytes, want %d", t, len(p), s.Size)
		}
		v, err := ViewBytes[uint64](p)
		if err != nil {
			return err
		}
		v[me] = uint64(10 * me)
	}
	if _, err := h.Ptr(me, Sym{Off: s.Off + 8, Size: 8}); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Ptr of an object never allocated: %v, want ErrInvalid", err)
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	got, err := LocalView[uint64](h, s)
	if err != nil {
		return err
	}
	for r, x := range got {
		if x != uint64(10*r) {
			return fmt.Errorf("word %d of rank %d's heap object: %d, want %d", r, me, x, 10*r)
		}
	}
	freed = true
	if err := w.Free(ctx); err != nil {
		return err
	}
	if _, err := w.Shared(me); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("Shared after Free: %v, want ErrClosed", err)
	}
	return nil
}

func u64bytes(v uint64) []byte {
	b := make([]byte, 8)
	*(*uint64)(unsafe.Pointer(&b[0])) = v
	return b
}

func TestShared(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 3, func(ctx context.Context, g Group) error { return sharedScenario(ctx, g, 1) })
	})
	t.Run("libfabric", func(t *testing.T) {
		requireProvider(t, "shm")
		runRanks(t, 3, func(ctx context.Context, g Group) error {
			return sharedScenario(ctx, g, 0, providerCase{"shm", OrderAuto}.opts()...)
		})
	})
}
