package onesided

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Generalised active-target synchronisation (MPI_Win_post, MPI_Win_start,
// MPI_Win_complete, MPI_Win_wait and MPI_Win_test): a target opens its
// region to a group of origins (Post … Wait), an origin opens access to a
// group of targets (Start … Complete), and only the ranks named take
// part, unlike Fence.
//
// Each rank's control words end with two bitmaps of one bit per window
// rank: in the post bitmap bit t is flipped by target t's Post, in the
// complete bitmap bit o by origin o's Complete. A flip is a
// compare-and-swap on the word (hardware on the direct-store path,
// libfabric's otherwise, as the window's locks). The owner keeps the
// parity it has seen of every bit: a rank has news from another when
// the bit differs from it. Between two ranks at most one flip of a bitmap
// is ever unseen: a target posts to an origin again only after its Wait,
// which waited for that origin's Complete, which came after its Start
// saw the earlier post (and the same for completes), so a flip is never
// lost to a second one, and the bits need no clearing.

// pscwState is a window's open epochs of generalised active-target
// synchronisation and the parities it has seen.
type pscwState struct {
	exposed   []int // origins of the open exposure epoch (Post … Wait)
	exposing  bool
	access    []int // targets of the open access epoch (Start … Complete)
	accessing bool
	seenPost  []uint64 // bit t: parity of target t's posts seen
	seenDone  []uint64 // bit o: parity of origin o's completes seen
	named     []uint64 // checkGroup's scratch: the ranks of a group seen
}

// pscwWords is the number of words of each bitmap in a window of n ranks.
func pscwWords(n int) int { return (n + 63) / 64 }

// postOff and doneOff are the byte offsets, in each rank's control words,
// of the word holding rank r's bit of the post and complete bitmaps.
func (w *Window) postOff(r int) int { return ctrlBytes + 8*(r/64) }
func (w *Window) doneOff(r int) int { return ctrlBytes + 8*pscwWords(w.size) + 8*(r/64) }

// Post opens an exposure epoch of this rank's region to origins
// (MPI_Win_post): each of them may access it between its Start naming
// this rank and its Complete; Wait or Test closes the epoch once every
// one has completed. It does not wait for the origins. origins are
// window ranks, each at most once, and may include this rank. A rank has
// at most one exposure epoch open (ErrInvalid otherwise). Should telling
// an origin fail, the epoch stays open towards every origin named.
func (w *Window) Post(ctx context.Context, origins []int) error {
	defer w.after(w.during(ctx))
	if err := w.checkGroup("Post", origins); err != nil {
		return err
	}
	if w.pscw.exposing {
		return fmt.Errorf("onesided: Post: an exposure epoch is open already (Post without Wait): %w", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("onesided: Post: %w", err)
	}
	w.pscw.exposed = append(w.pscw.exposed[:0], origins...)
	w.pscw.exposing = true
	for _, o := range origins {
		if err := w.flipBit(o, w.postOff(w.rank), w.rank); err != nil {
			return fmt.Errorf("onesided: Post: telling rank %d: %w", o, err)
		}
	}
	return nil
}

// Start opens an access epoch to targets (MPI_Win_start): it waits,
// driving progress, until each of them has posted an exposure epoch that
// names this rank; Put, Get and the atomics to them may follow until
// Complete. targets are window ranks, each at most once. A rank has at
// most one access epoch open (ErrInvalid otherwise). It returns ctx's
// error or ErrPeerGone if a target never posts; the epoch is
// then not open, and the posts that did arrive are kept for the next
// Start.
func (w *Window) Start(ctx context.Context, targets []int) error {
	defer w.after(w.during(ctx))
	if err := w.checkGroup("Start", targets); err != nil {
		return err
	}
	if w.pscw.accessing {
		return fmt.Errorf("onesided: Start: an access epoch is open already (Start without Complete): %w", ErrInvalid)
	}
	if err := w.awaitBits(ctx, "Start", targets, w.postOff, w.pscw.seenPost); err != nil {
		return err
	}
	w.pscw.access = append(w.pscw.access[:0], targets...)
	w.pscw.accessing = true
	return nil
}

// Complete closes the access epoch Start opened (MPI_Win_complete): every
// operation this rank issued to the epoch's targets completes at them
// (as Flush), then each target is told, so that its Wait sees the data.
// Without an open access epoch it returns ErrInvalid. Should flushing or
// telling a target fail, the epoch is closed all the same and the error
// returned.
func (w *Window) Complete(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if err := w.check("Complete", 0, 0, 0); err != nil {
		return err
	}
	if !w.pscw.accessing {
		return fmt.Errorf("onesided: Complete without Start: %w", ErrInvalid)
	}
	w.pscw.accessing = false
	for _, t := range w.pscw.access {
		if err := w.Flush(ctx, t); err != nil {
			return fmt.Errorf("onesided: Complete: %w", err)
		}
	}
	for _, t := range w.pscw.access {
		if err := w.flipBit(t, w.doneOff(w.rank), w.rank); err != nil {
			return fmt.Errorf("onesided: Complete: telling rank %d: %w", t, err)
		}
	}
	return nil
}

// Wait closes the exposure epoch Post opened (MPI_Win_wait): it waits,
// driving progress, until every origin named has called Complete, so
// that everything they issued in their access epochs is in this rank's
// region. Without an open exposure epoch it returns ErrInvalid. It
// returns ctx's error or ErrPeerGone if an origin never
// completes; the epoch then stays open, and a later Wait or Test may
// close it.
func (w *Window) Wait(ctx context.Context) error {
	defer w.after(w.during(ctx))
	if err := w.check("Wait", 0, 0, 0); err != nil {
		return err
	}
	if !w.pscw.exposing {
		return fmt.Errorf("onesided: Wait without Post: %w", ErrInvalid)
	}
	if err := w.awaitBits(ctx, "Wait", w.pscw.exposed, w.doneOff, w.pscw.seenDone); err != nil {
		return err
	}
	return w.closeExposure("Wait")
}

// Test is Wait without waiting (MPI_Win_test): it reports whether every
// origin of the open exposure epoch has completed, and if so closes the
// epoch as Wait does. Without an open exposure epoch it returns
// ErrInvalid.
func (w *Window) Test() (bool, error) {
	if err := w.check("Test", 0, 0, 0); err != nil {
		return false, err
	}
	if !w.pscw.exposing {
		return false, fmt.Errorf("onesided: Test without Post: %w", ErrInvalid)
	}
	done := w.bitsArrived(w.pscw.exposed, w.doneOff, w.pscw.seenDone) < 0
	if !done && w.net != nil {
		if err := w.net.progress(); err != nil {
			return false, fmt.Errorf("onesided: Test: %w", err)
		}
		done = w.bitsArrived(w.pscw.exposed, w.doneOff, w.pscw.seenDone) < 0
	}
	if !done {
		return false, nil
	}
	flipSeen(w.pscw.exposed, w.pscw.seenDone)
	return true, w.closeExposure("Test")
}

// closeExposure ends the exposure epoch whose origins have all completed.
func (w *Window) closeExposure(op string) error {
	w.pscw.exposing = false
	if w.net != nil {
		// What the origins wrote through libfabric is complete (they
		// flushed before telling); with OrderCQData a signal among it is
		// stored when the completion queue is read.
		if err := w.net.progress(); err != nil {
			return fmt.Errorf("onesided: %s: %w", op, err)
		}
	}
	return nil
}

// checkGroup validates a Post or Start group: window ranks, none twice.
func (w *Window) checkGroup(op string, ranks []int) error {
	if err := w.check(op, 0, 0, 0); err != nil {
		return err
	}
	if w.pscw.seenPost == nil {
		w.pscw.seenPost = make([]uint64, pscwWords(w.size))
		w.pscw.seenDone = make([]uint64, pscwWords(w.size))
		w.pscw.named = make([]uint64, pscwWords(w.size))
	}
	named := w.pscw.named // all zero between calls
	defer func() {
		for _, r := range ranks {
			if r >= 0 && r < w.size {
				named[r/64] = 0
			}
		}
	}()
	for _, r := range ranks {
		if r < 0 || r >= w.size {
			return fmt.Errorf("onesided: %s: rank %d of %d: %w", op, r, w.size, ErrUnknownRank)
		}
		if named[r/64]>>(r%64)&1 != 0 {
			return fmt.Errorf("onesided: %s: rank %d named twice: %w", op, r, ErrInvalid)
		}
		named[r/64] |= 1 << (r % 64)
	}
	return nil
}

// flipBit flips rank r's bit in the control word at byte off of target:
// a compare-and-swap loop on direct stores, a flip through libfabric
// otherwise (ctrlXor: one atomic, not waited for).
func (w *Window) flipBit(target, off, r int) error {
	bit := uint64(1) << (r % 64)
	if c := w.ctrl[target]; c != nil && !w.atomicsNet {
		p := (*uint64)(unsafe.Pointer(&c[off]))
		for {
			old := atomic.LoadUint64(p)
			if atomic.CompareAndSwapUint64(p, old, old^bit) {
				return nil
			}
		}
	}
	if w.net == nil {
		return fmt.Errorf("no path to rank %d's control words: %w", target, ErrNoPath)
	}
	return w.net.ctrlXor(target, off, bit)
}

// bitsArrived returns -1 if every rank of ranks has flipped its bit of
// this rank's bitmap (at offsets off) since seen, else the first that
// has not.
func (w *Window) bitsArrived(ranks []int, off func(int) int, seen []uint64) int {
	for _, r := range ranks {
		v := atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.myCtrl[off(r)])))
		if (v^seen[r/64])>>(r%64)&1 == 0 {
			return r
		}
	}
	return -1
}

// flipSeen records one more flip of each rank's bit.
func flipSeen(ranks []int, seen []uint64) {
	for _, r := range ranks {
		seen[r/64] ^= 1 << (r % 64)
	}
}

// awaitBits waits until every rank of ranks has flipped its bit of this
// rank's bitmap since seen, then records the flips.
func (w *Window) awaitBits(ctx context.Context, op string, ranks []int, off func(int) int, seen []uint64) error {
	wt := w.newWaiter(0)
	for {
		r := w.bitsArrived(ranks, off, seen)
		if r < 0 {
			flipSeen(ranks, seen)
			return nil
		}
		if w.net != nil {
			if err := w.net.progress(); err != nil {
				return fmt.Errorf("onesided: %s: %w", op, err)
			}
			if w.bitsArrived(ranks, off, seen) < 0 {
				continue
			}
		}
		wt.target = r
		if err := wt.pause(ctx); err != nil {
			return fmt.Errorf("onesided: %s (waiting for rank %d): %w", op, r, err)
		}
	}
}
