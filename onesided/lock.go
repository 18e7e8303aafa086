package onesided

import (
	"context"
	"fmt"
)

// Distributed locks on the symmetric heap (shmem_set_lock,
// shmem_test_lock, shmem_clear_lock): a queue lock of the MCS kind, so
// that waiting ranks get the lock first come, first served, each
// spinning on its own copy of the lock object rather than on one word
// every waiter polls.
//
// The lock is an 8-byte symmetric object, zero on every rank before its
// first use. Its home rank (the object's offset ÷ 8, modulo the heap's
// size, so that locks spread over the ranks) keeps the queue's tail in
// its copy's low four bytes: 1 + the rank last to ask, 0 while the lock
// is free. Every rank's copy holds, in its high four bytes, that rank's
// queue node: bit 31 set once its predecessor hands the lock over, bits
// 0–30 1 + the rank that queued behind it. Read as a little-endian
// 64-bit word, a rank's copy is therefore at least lockGranted once it
// has been handed the lock and at least lockHasNext once a successor has
// named itself, whatever the home's tail half holds.
//
// Every update of a lock word is an atomic of the window (a hardware
// atomic on the direct-store path, a libfabric atomic otherwise), so
// updates from every rank are atomic with respect to each other; a rank
// waits on its own copy with the window's WaitSignal.
const (
	lockGrantBit = uint64(1) << 31 // in the node half
	lockNextMask = uint64(1)<<31 - 1
	lockGranted  = lockGrantBit << 32 // the whole word, granted
	lockHasNext  = uint64(1) << 32    // the whole word, a successor named
	lockNodeOff  = 4                  // byte offset of the node half
)

// lockState is what this rank still owes a lock it gave up waiting for
// or releasing when a context ended: the lock will reach it (or has), and
// it must be handed on (serviceLocks).
type lockState uint8

const (
	lockAbandonedWait    lockState = iota + 1 // queued; pass the lock on once granted
	lockAbandonedRelease                      // held; pass it on once the successor names itself
)

// lockAt checks lock for SetLock, TestLock and ClearLock and returns its
// window offset and home rank.
func (h *Heap) lockAt(op string, lock Sym) (off, home int, err error) {
	o, err := h.at(op, lock, 0, 8)
	if err != nil {
		return 0, 0, err
	}
	if o%8 != 0 {
		return 0, 0, fmt.Errorf("onesided: Heap.%s: a lock must be 8-byte aligned (offset %d): %w", op, o, ErrInvalid)
	}
	return o, o / 8 % h.w.Size(), nil
}

// lockTake begins SetLock or TestLock: lockAt's checks, the locks this
// rank owes handed on where they can be, and a refusal of a lock this
// rank holds or owes.
func (h *Heap) lockTake(op string, lock Sym) (off, home int, err error) {
	o, home, err := h.lockAt(op, lock)
	if err != nil {
		return 0, 0, err
	}
	if err := h.serviceLocks(); err != nil {
		return 0, 0, err
	}
	if h.held[o] || h.owed[o] != 0 {
		return 0, 0, fmt.Errorf("onesided: Heap.%s(%+v): this rank holds or owes the lock already: %w", op, lock, ErrInvalid)
	}
	return o, home, nil
}

// SetLock acquires the distributed lock lock (shmem_set_lock): an 8-byte
// symmetric object, zero on every rank before its first use, and used for
// nothing else. It waits while another rank holds the lock; waiting ranks
// get it in the order they asked. A rank holding the lock may not ask
// for it again (ErrInvalid), nor may two goroutines of one heap share a
// lock (a Heap is for one goroutine at a time).
//
// When ctx ends before the lock comes, SetLock returns the context's
// error without the lock; its place in the queue stays, and the lock is
// handed on when it reaches that place, during this heap's next SetLock,
// TestLock, ClearLock, Quiet, Barrier or Close. Ranks queued behind wait
// until then.
func (h *Heap) SetLock(ctx context.Context, lock Sym) error {
	o, home, err := h.lockTake("SetLock", lock)
	if err != nil {
		return err
	}
	me := uint64(h.w.Rank() + 1)
	prev, err := h.w.FetchAndOp(home, o, AtomicUint32, OpReplace, me)
	if err != nil {
		return fmt.Errorf("onesided: Heap.SetLock: %w", err)
	}
	if prev != 0 {
		if prev > uint64(h.w.Size()) || prev == me {
			return fmt.Errorf("onesided: Heap.SetLock(%+v): the lock word names rank %d of %d (not a lock, or not zeroed before use): %w", lock, prev-1, h.w.Size(), ErrInvalid)
		}
		// Name ourselves to the predecessor, then wait for its hand-over.
		if _, err := h.w.FetchAndOp(int(prev-1), o+lockNodeOff, AtomicUint32, OpBor, me); err != nil {
			return fmt.Errorf("onesided: Heap.SetLock: %w", err)
		}
		if _, err := h.w.WaitSignal(ctx, o, CmpGE, lockGranted); err != nil {
			h.owe(o, lockAbandonedWait)
			return fmt.Errorf("onesided: Heap.SetLock(%+v): %w", lock, err)
		}
		if err := h.clearGrant(o); err != nil {
			return err
		}
	}
	h.hold(o)
	return nil
}

// TestLock takes the lock if it is free and reports whether it did
// (shmem_test_lock, which returns 0 where TestLock returns true). It
// never waits for the lock.
func (h *Heap) TestLock(lock Sym) (bool, error) {
	o, home, err := h.lockTake("TestLock", lock)
	if err != nil {
		return false, err
	}
	old, err := h.w.CompareAndSwap(home, o, AtomicUint32, 0, uint64(h.w.Rank()+1))
	if err != nil {
		return false, fmt.Errorf("onesided: Heap.TestLock: %w", err)
	}
	if old != 0 {
		return false, nil
	}
	h.hold(o)
	return true, nil
}

// ClearLock releases lock (shmem_clear_lock), which this rank holds:
// first every Put, Get and atomic it issued completes (Quiet), so that
// the next holder sees the stores of this critical region; then the lock
// goes to the rank that asked next, if any. It may wait (bounded by ctx)
// for a rank that has just queued to name itself; when ctx ends there,
// the lock is handed on later, as SetLock describes.
func (h *Heap) ClearLock(ctx context.Context, lock Sym) error {
	o, home, err := h.lockAt("ClearLock", lock)
	if err != nil {
		return err
	}
	if !h.held[o] {
		return fmt.Errorf("onesided: Heap.ClearLock(%+v): this rank does not hold the lock: %w", lock, ErrInvalid)
	}
	if err := h.w.FlushAll(ctx); err != nil {
		return fmt.Errorf("onesided: Heap.ClearLock: %w", err)
	}
	delete(h.held, o)
	done, err := h.release(o, home)
	if err != nil {
		return err
	}
	if done {
		return h.serviceLocks()
	}
	if _, err := h.w.WaitSignal(ctx, o, CmpGE, lockHasNext); err != nil {
		h.owe(o, lockAbandonedRelease)
		return fmt.Errorf("onesided: Heap.ClearLock(%+v): %w", lock, err)
	}
	if _, err := h.release(o, home); err != nil {
		return err
	}
	return h.serviceLocks()
}

// release hands the lock at o (home rank home), held by this rank, to
// its successor, or frees it when nobody queued; false when a rank has
// queued but not yet named itself (the caller waits for it and calls
// again).
func (h *Heap) release(o, home int) (bool, error) {
	_, v, err := h.w.TestSignal(o, CmpGE, lockHasNext)
	if err != nil {
		return false, fmt.Errorf("onesided: Heap.ClearLock: %w", err)
	}
	next := v >> 32 & lockNextMask
	if next == 0 {
		me := uint64(h.w.Rank() + 1)
		old, err := h.w.CompareAndSwap(home, o, AtomicUint32, me, 0)
		if err != nil {
			return false, fmt.Errorf("onesided: Heap.ClearLock: %w", err)
		}
		return old == me, nil
	}
	if next > uint64(h.w.Size()) {
		return false, fmt.Errorf("onesided: Heap.ClearLock: the lock word names rank %d of %d: %w", next-1, h.w.Size(), ErrInvalid)
	}
	// Our node is ours again before the successor may run: nobody else
	// writes it until we queue anew.
	if _, err := h.w.FetchAndOp(h.w.Rank(), o+lockNodeOff, AtomicUint32, OpReplace, 0); err != nil {
		return false, fmt.Errorf("onesided: Heap.ClearLock: %w", err)
	}
	if _, err := h.w.FetchAndOp(int(next-1), o+lockNodeOff, AtomicUint32, OpBor, lockGrantBit); err != nil {
		return false, fmt.Errorf("onesided: Heap.ClearLock: %w", err)
	}
	return true, nil
}

// clearGrant clears the hand-over bit of this rank's node at o, keeping a
// successor's name that may arrive at the same time.
func (h *Heap) clearGrant(o int) error {
	if _, err := h.w.FetchAndOp(h.w.Rank(), o+lockNodeOff, AtomicUint32, OpBand, lockNextMask); err != nil {
		return fmt.Errorf("onesided: Heap.SetLock: %w", err)
	}
	return nil
}

func (h *Heap) hold(o int) {
	if h.held == nil {
		h.held = map[int]bool{}
	}
	h.held[o] = true
}

func (h *Heap) owe(o int, s lockState) {
	if h.owed == nil {
		h.owed = map[int]lockState{}
	}
	h.owed[o] = s
}

// serviceLocks hands on, without waiting, the locks this rank owes
// (abandoned by a SetLock or ClearLock whose context ended) that have
// reached it.
func (h *Heap) serviceLocks() error {
	for o, s := range h.owed {
		home := o / 8 % h.w.Size()
		if s == lockAbandonedWait {
			granted, _, err := h.w.TestSignal(o, CmpGE, lockGranted)
			if err != nil {
				return fmt.Errorf("onesided: Heap: handing on an abandoned lock: %w", err)
			}
			if !granted {
				continue
			}
			if err := h.clearGrant(o); err != nil {
				return err
			}
			h.owed[o] = lockAbandonedRelease
		}
		done, err := h.release(o, home)
		if err != nil {
			return err
		}
		if done {
			delete(h.owed, o)
		}
	}
	return nil
}

// settleLocks hands on every lock this rank owes, waiting (bounded by
// ctx) for each to reach it: before the heap goes away, the ranks queued
// behind must get it.
func (h *Heap) settleLocks(ctx context.Context) error {
	for len(h.owed) > 0 {
		if err := h.serviceLocks(); err != nil {
			return err
		}
		if len(h.owed) == 0 {
			return nil
		}
		for o, s := range h.owed {
			want := lockGranted
			if s == lockAbandonedRelease {
				want = lockHasNext
			}
			if _, err := h.w.WaitSignal(ctx, o, CmpGE, want); err != nil {
				return fmt.Errorf("onesided: Heap: handing on an abandoned lock: %w", err)
			}
			break
		}
	}
	return nil
}
