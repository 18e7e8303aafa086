package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestHeapLocks(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 4, func(ctx context.Context, g Group) error {
			return heapLockScenario(ctx, g, 300, WithSharedMemory(ShmOnly))
		})
	})
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			requireProvider(t, prov)
			runRanks(t, 3, func(ctx context.Context, g Group) error {
				return heapLockScenario(ctx, g, 20, providerCase{prov, OrderAuto}.opts()...)
			})
		})
	}
}

func TestHeapLockAbandoned(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("direct-%d", n), func(t *testing.T) {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return heapLockAbandoned(ctx, g, WithSharedMemory(ShmOnly))
			})
		})
	}
	t.Run("shm-3", func(t *testing.T) {
		requireProvider(t, "shm")
		runRanks(t, 3, func(ctx context.Context, g Group) error {
			return heapLockAbandoned(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
		})
	})
}

func TestHeapLockErrors(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return heapLockErrors(ctx, g, WithSharedMemory(ShmOnly))
	})
}

// heapLockScenario: every rank, iters (even) times, takes one of two locks (of
// different home ranks), reads a counter guarded by it from rank 0 with
// a Get, writes it back plus one with a Put, and releases the lock: a
// read-modify-write no atomic protects, so a lost update means two ranks
// held a lock at once. Then TestLock: with the lock held, every other
// rank fails to take it; once free, exactly one of the ranks trying at
// once takes it.
func heapLockScenario(ctx context.Context, g Group, iters int, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	var locks [2]Sym
	for i := range locks {
		if locks[i], err = h.Alloc(ctx, 8, 8); err != nil {
			return err
		}
	}
	if _, h0, _ := h.lockAt("test", locks[0]); func() bool { _, h1, _ := h.lockAt("test", locks[1]); return h0 == h1 }() {
		return fmt.Errorf("the two locks share home rank %d", h0)
	}
	counters, err := h.Alloc(ctx, 16, 8)
	if err != nil {
		return err
	}
	wins, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	var b [8]byte
	for i := 0; i < iters; i++ {
		k := (i + me) % 2
		if err := h.SetLock(ctx, locks[k]); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		if err := h.Get(0, counters, 8*k, b[:]); err != nil {
			return err
		}
		if err := h.Quiet(ctx); err != nil {
			return err
		}
		runtime.Gosched() // let another rank of this process run inside the critical section if it can
		binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
		if err := h.Put(0, counters, 8*k, b[:]); err != nil {
			return err
		}
		if err := h.ClearLock(ctx, locks[k]); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if me == 0 {
		c := h.Local(counters)
		a, z := binary.LittleEndian.Uint64(c), binary.LittleEndian.Uint64(c[8:])
		if want := uint64(n * iters / 2); a != want || z != want {
			return fmt.Errorf("counters %d and %d after %d ranks × %d locked increments, want %d each: an update was lost", a, z, n, iters, want)
		}
	}
	if len(h.held) != 0 || len(h.owed) != 0 {
		return fmt.Errorf("after the loop: held %v, owed %v", h.held, h.owed)
	}

	// TestLock against a holder, then a race for a free lock.
	l := locks[0]
	if me == 0 {
		if err := h.SetLock(ctx, l); err != nil {
			return err
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if me != 0 {
		if got, err := h.TestLock(l); err != nil || got {
			return fmt.Errorf("TestLock of a lock rank 0 holds: %v, %v", got, err)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if me == 0 {
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	won := uint64(0)
	got, err := h.TestLock(l)
	if err != nil {
		return err
	}
	if got {
		won = 1
	}
	if err := h.AtomicAdd(0, wins, 0, AtomicUint64, won); err != nil {
		return err
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if me == 0 {
		if w := binary.LittleEndian.Uint64(h.Local(wins)); w != 1 {
			return fmt.Errorf("%d ranks took a free lock at once, want 1", w)
		}
	}
	if got {
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
	}
	return h.Barrier(ctx)
}

// heapLockAbandoned: rank 1 gives up waiting for a lock rank 0 holds
// (its context ends); rank 2, if any, queues behind it. When rank 0
// releases, the lock reaches rank 1's abandoned place and is handed on
// by rank 1's next heap call, so that rank 2 gets it; with two ranks the
// lock ends free.
func heapLockAbandoned(ctx context.Context, g Group, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	l, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	if me == 0 {
		if err := h.SetLock(ctx, l); err != nil {
			return err
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if me == 1 {
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := h.SetLock(short, l)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("SetLock while rank 0 holds the lock, context ended: %v, want DeadlineExceeded", err)
		}
		if h.owed[l.Off] != lockAbandonedWait {
			return fmt.Errorf("abandoned lock not owed: %v", h.owed)
		}
		if err := h.SetLock(ctx, l); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("SetLock of an owed lock: %v, want ErrInvalid", err)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	switch me {
	case 0:
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
	case 1:
		// Rank 0 releases meanwhile: the lock reaches the abandoned place,
		// and this rank's heap calls hand it on.
		for len(h.owed) > 0 {
			if err := h.Quiet(ctx); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the abandoned lock was never handed on: %w", ctx.Err())
			}
		}
	case 2:
		if err := h.SetLock(ctx, l); err != nil {
			return fmt.Errorf("SetLock behind an abandoned place: %w", err)
		}
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	// Free again: rank n-1 takes and releases it at once.
	if me == n-1 {
		if got, err := h.TestLock(l); err != nil || !got {
			return fmt.Errorf("TestLock of the lock once everyone released it: %v, %v", got, err)
		}
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
	}
	return h.Barrier(ctx)
}

// heapLockErrors: the lock calls' bad arguments.
func heapLockErrors(ctx context.Context, g Group, opts ...Option) (err error) {
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	l, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	small, err := h.Alloc(ctx, 4, 4)
	if err != nil {
		return err
	}
	odd, err := h.Alloc(ctx, 12, 4) // at 12: not 8-byte aligned
	if err != nil {
		return err
	}
	junk, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	if odd.Off%8 == 0 {
		return fmt.Errorf("object meant to be misaligned is at %d", odd.Off)
	}
	var nilHeap *Heap
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"ClearLock of a free lock", h.ClearLock(ctx, l), ErrInvalid},
		{"SetLock of an object of 4 bytes", h.SetLock(ctx, small), ErrOutOfRange},
		{"SetLock of a misaligned object", h.SetLock(ctx, odd), ErrInvalid},
		{"SetLock of no object", h.SetLock(ctx, Sym{Off: 2048, Size: 8}), ErrInvalid},
		{"SetLock on a nil heap", nilHeap.SetLock(ctx, l), ErrInvalid},
	}
	if _, err := nilHeap.TestLock(l); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("TestLock on a nil heap: %v", err)
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	if g.Rank() == 0 {
		if err := h.SetLock(ctx, l); err != nil {
			return err
		}
		if err := h.SetLock(ctx, l); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("SetLock of a lock held: %v, want ErrInvalid", err)
		}
		if _, err := h.TestLock(l); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("TestLock of a lock held: %v, want ErrInvalid", err)
		}
		if err := h.ClearLock(ctx, l); err != nil {
			return err
		}
		// A lock word that was not zeroed names a rank that is not there.
		_, home, _ := h.lockAt("test", junk)
		if err := h.Put(home, junk, 0, []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}); err != nil {
			return err
		}
		if err := h.Quiet(ctx); err != nil {
			return err
		}
		if err := h.SetLock(ctx, junk); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("SetLock of a lock word never zeroed: %v, want ErrInvalid", err)
		}
		// The word now names this rank, which neither holds nor waits for
		// it: refused too, rather than a wait for itself.
		if err := h.SetLock(ctx, junk); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("SetLock of a lock word naming this rank: %v, want ErrInvalid", err)
		}
	}
	return h.Barrier(ctx)
}
