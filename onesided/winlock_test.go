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

func TestWindowLocks(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 4, func(ctx context.Context, g Group) error {
			return windowLockScenario(ctx, g, 300, false, WithSharedMemory(ShmOnly))
		})
	})
	kinds := []windowKind{netKind("shm", false), netKind("tcp;ofi_rxm", false), netKind("shm", true)}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return windowLockScenario(ctx, g, 20, k.create, k.opts...)
	})
}

// windowLockScenario: every rank, iters (even) times, locks rank 0 or
// rank n-1 exclusively, reads a counter there with Get and Flush, yields,
// and writes it back plus one with a Put before Unlock: a lost update
// means two ranks held one lock at once. Then the shared mode: every rank
// holds rank 0's lock shared at once (they meet in a barrier while
// holding it), an exclusive Lock waits while a shared holder is there
// (its context ends) and succeeds once it has gone; the same with
// LockAll and UnlockAll; and the errors. With
// create the window is a Create of Go memory (its control words apart).
func windowLockScenario(ctx context.Context, g Group, iters int, create bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	w, err := newWindow(ctx, g, 64, create, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	var b [8]byte
	targets := [2]int{0, n - 1}
	for i := 0; i < iters; i++ {
		t := targets[(i+me)%2]
		if err := w.Lock(ctx, t, true); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		if err := w.Get(t, 0, b[:]); err != nil {
			return err
		}
		if err := w.Flush(ctx, t); err != nil {
			return err
		}
		runtime.Gosched() // let another rank of this process run inside the critical section if it can
		binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
		if err := w.Put(t, 0, b[:]); err != nil {
			return err
		}
		if err := w.Unlock(ctx, t); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if me == 0 || me == n-1 {
		got := binary.LittleEndian.Uint64(w.Bytes())
		want := uint64(n * iters / 2)
		if n == 1 {
			want = uint64(iters)
		}
		if got != want {
			return fmt.Errorf("rank %d's counter %d after %d ranks' locked increments, want %d: an update was lost", me, got, n, want)
		}
	}

	// Shared holders at once.
	if err := w.Lock(ctx, 0, false); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil { // every rank holds it shared here
		return fmt.Errorf("barrier while holding rank 0's lock shared: %w", err)
	}
	if err := w.Unlock(ctx, 0); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	// An exclusive Lock waits for a shared holder.
	if n > 1 {
		if me == 0 {
			if err := w.Lock(ctx, 0, false); err != nil {
				return err
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 1 {
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err := w.Lock(short, 0, true)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("exclusive Lock while rank 0 holds it shared: %v, want DeadlineExceeded", err)
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 0 {
			if err := w.Unlock(ctx, 0); err != nil {
				return err
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 1 {
			if err := w.Lock(ctx, 0, true); err != nil {
				return fmt.Errorf("exclusive Lock once the shared holder left: %w", err)
			}
			if err := w.Unlock(ctx, 0); err != nil {
				return err
			}
		}
	}

	// LockAll on every rank at once (once rank 1 has released the lock it
	// took exclusively above), then an exclusive Lock against it.
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if err := w.LockAll(ctx); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil { // every rank holds every lock shared here
		return fmt.Errorf("barrier while holding LockAll: %w", err)
	}
	if err := w.Lock(ctx, 0, true); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Lock of a target held by LockAll: %v, want ErrInvalid", err)
	}
	if err := w.UnlockAll(ctx); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if n > 1 {
		if me == 0 {
			if err := w.LockAll(ctx); err != nil {
				return err
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 1 {
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err := w.Lock(short, n-1, true)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("exclusive Lock while rank 0 holds LockAll: %v, want DeadlineExceeded", err)
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 0 {
			if err := w.UnlockAll(ctx); err != nil {
				return err
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 1 {
			if err := w.Lock(ctx, n-1, true); err != nil {
				return fmt.Errorf("exclusive Lock after UnlockAll: %w", err)
			}
			if err := w.Unlock(ctx, n-1); err != nil {
				return err
			}
		}
	}
	if err := w.UnlockAll(ctx); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("UnlockAll without LockAll: %v, want ErrInvalid", err)
	}
	if err := w.Lock(ctx, 0, false); err != nil {
		return err
	}
	if err := w.LockAll(ctx); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("LockAll while holding a lock: %v, want ErrInvalid", err)
	}
	if err := w.Unlock(ctx, 0); err != nil {
		return err
	}

	// Errors.
	var nilWin *Window
	if err := w.Unlock(ctx, 0); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Unlock without the lock: %v, want ErrInvalid", err)
	}
	if err := w.Lock(ctx, n, true); !errors.Is(err, ErrUnknownRank) {
		return fmt.Errorf("Lock of rank %d of %d: %v, want ErrUnknownRank", n, n, err)
	}
	if err := nilWin.Lock(ctx, 0, true); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Lock on a nil window: %v, want ErrInvalid", err)
	}
	if err := w.Lock(ctx, me, true); err != nil {
		return err
	}
	if err := w.Lock(ctx, me, false); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Lock of a lock held: %v, want ErrInvalid", err)
	}
	if err := w.Unlock(ctx, me); err != nil {
		return err
	}
	return w.Fence(ctx)
}
