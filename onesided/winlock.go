package onesided

import (
	"context"
	"fmt"
	"unsafe"
)

// Window locks (MPI_Win_lock and MPI_Win_unlock): a reader-writer lock per
// target rank, in a word of that rank's control words, changed only by
// compare-and-swap (hardware on the direct-store path, libfabric's
// otherwise, as the window's other atomics). The word holds winWriter
// while a rank holds the target exclusively, else the number of shared
// holders. A rank that cannot have the lock tries again after a pause
// (the window's wait policy), so a context that ends simply stops the
// attempts. MPI promises no order among waiting ranks, and none is kept:
// a steady stream of shared holders can keep an exclusive one waiting.

// winLockWord is the byte offset of the lock word in each rank's control
// words: the barrier's words come first, one per round (a group would
// need 2^62 ranks to reach this one), and the last word is the libfabric
// path's spare.
const winLockWord = ctrlBytes - 16

// winWriter is the lock word of a target held exclusively.
const winWriter = uint64(1) << 63

// Lock takes target's lock (MPI_Win_lock): exclusive, no other rank may
// hold it in any mode meanwhile; shared, other shared holders may. It
// waits (bounded by ctx) until the lock is free for that mode. The window
// is always open to Put, Get and the atomics, whether locked or not: the
// lock only orders the ranks that take it, as a mutual exclusion for a
// read-modify-write of a target's data (Get, Flush, Put under an
// exclusive lock). A rank may hold the locks of several targets, one
// each; taking one it holds gives ErrInvalid.
func (w *Window) Lock(ctx context.Context, target int, exclusive bool) error {
	defer w.after(w.during(ctx))
	if err := w.check("Lock", target, 0, 0); err != nil {
		return err
	}
	if _, held := w.locks[target]; held {
		return fmt.Errorf("onesided: Lock: this rank holds rank %d's lock already: %w", target, ErrInvalid)
	}
	wt := w.newWaiter(0)
	wt.target = target
	cur := uint64(0) // the word as last seen
	for {
		want := winWriter
		if !exclusive {
			want = cur + 1
		}
		if exclusive && cur == 0 || !exclusive && cur&winWriter == 0 {
			old, err := w.lockCAS(target, cur, want)
			if err != nil {
				return fmt.Errorf("onesided: Lock(rank %d): %w", target, err)
			}
			if old == cur {
				break
			}
			if cur = old; !exclusive && cur&winWriter == 0 {
				continue // another shared holder came or went: try again at once
			}
		}
		if w.net != nil {
			if err := w.net.progress(); err != nil {
				return fmt.Errorf("onesided: Lock(rank %d): %w", target, err)
			}
		}
		if err := wt.pause(ctx); err != nil {
			return fmt.Errorf("onesided: Lock(rank %d): %w", target, err)
		}
		// Read the word again: a swap of 0 for 0 changes nothing.
		old, err := w.lockCAS(target, 0, 0)
		if err != nil {
			return fmt.Errorf("onesided: Lock(rank %d): %w", target, err)
		}
		cur = old
	}
	if w.locks == nil {
		w.locks = map[int]bool{}
	}
	w.locks[target] = exclusive
	return nil
}

// Unlock releases target's lock (MPI_Win_unlock), which this rank holds:
// first every operation it issued to target completes (Flush), so that
// the next holder sees them.
func (w *Window) Unlock(ctx context.Context, target int) error {
	defer w.after(w.during(ctx))
	if err := w.check("Unlock", target, 0, 0); err != nil {
		return err
	}
	if _, held := w.locks[target]; !held {
		return fmt.Errorf("onesided: Unlock: this rank does not hold rank %d's lock: %w", target, ErrInvalid)
	}
	if err := w.Flush(ctx, target); err != nil {
		return fmt.Errorf("onesided: Unlock(rank %d): %w", target, err)
	}
	return w.unlock(target)
}

// unlock releases target's lock, which this rank holds, without a flush.
func (w *Window) unlock(target int) error {
	exclusive := w.locks[target]
	cur := winWriter
	if !exclusive {
		cur = 1
	}
	for {
		next := uint64(0)
		if !exclusive {
			if cur == 0 || cur&winWriter != 0 {
				return fmt.Errorf("onesided: Unlock(rank %d): the lock word reads %#x while this rank holds it shared: %w", target, cur, ErrInvalid)
			}
			next = cur - 1
		}
		old, err := w.lockCAS(target, cur, next)
		if err != nil {
			return fmt.Errorf("onesided: Unlock(rank %d): %w", target, err)
		}
		if old == cur {
			break
		}
		if exclusive {
			return fmt.Errorf("onesided: Unlock(rank %d): the lock word reads %#x while this rank holds it exclusively: %w", target, old, ErrInvalid)
		}
		cur = old
	}
	delete(w.locks, target)
	return nil
}

// LockAll takes every rank's lock shared (MPI_Win_lock_all): the start of
// a passive-target epoch over the whole window, held against exclusive
// Locks of any target. It waits (bounded by ctx) for each target in rank
// order; when one fails it releases the ones it took. A rank holding any
// target's lock may not LockAll (ErrInvalid).
func (w *Window) LockAll(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if err := w.check("LockAll", 0, 0, 0); err != nil {
		return err
	}
	if len(w.locks) > 0 {
		return fmt.Errorf("onesided: LockAll: this rank holds %d targets' locks already: %w", len(w.locks), ErrInvalid)
	}
	for t := range w.size {
		if err := w.Lock(ctx, t, false); err != nil {
			for r := range t {
				_ = w.unlock(r) // nothing was issued to them inside
			}
			return fmt.Errorf("onesided: LockAll: %w", err)
		}
	}
	return nil
}

// UnlockAll releases every target's lock this rank holds shared after
// LockAll (MPI_Win_unlock_all), once its operations to every target have
// completed (FlushAll). It fails with ErrInvalid unless this rank holds
// every target's lock shared.
func (w *Window) UnlockAll(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if err := w.check("UnlockAll", 0, 0, 0); err != nil {
		return err
	}
	if len(w.locks) != w.size {
		return fmt.Errorf("onesided: UnlockAll: this rank holds %d of %d targets' locks: %w", len(w.locks), w.size, ErrInvalid)
	}
	for _, excl := range w.locks {
		if excl {
			return fmt.Errorf("onesided: UnlockAll: a target's lock is held exclusively (Unlock it): %w", ErrInvalid)
		}
	}
	if err := w.FlushAll(ctx); err != nil {
		return fmt.Errorf("onesided: UnlockAll: %w", err)
	}
	for t := range w.size {
		if err := w.unlock(t); err != nil {
			return fmt.Errorf("onesided: UnlockAll: %w", err)
		}
	}
	return nil
}

// lockCAS compares and swaps target's lock word.
func (w *Window) lockCAS(target int, cmp, swap uint64) (uint64, error) {
	if c := w.ctrl[target]; c != nil && !w.atomicsNet {
		return atomicCAS(unsafe.Pointer(&c[winLockWord]), AtomicUint64, cmp, swap), nil
	}
	if w.net == nil {
		return 0, fmt.Errorf("no path to rank %d's control words: %w", target, ErrNoPath)
	}
	return w.net.ctrlCAS(target, winLockWord, cmp, swap)
}
