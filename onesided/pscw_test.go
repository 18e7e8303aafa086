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

func TestPSCW(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		for _, n := range []int{1, 2, 4, 5} {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return pscwScenario(ctx, g, 200, false, WithSharedMemory(ShmOnly))
			})
		}
	})
	casFlips := netKind("shm", false) // the flips by compare-and-swap
	casFlips.name, casFlips.opts = "shm-cas", append(casFlips.opts, withCASFallback())
	kinds := []windowKind{netKind("shm", false), netKind("tcp;ofi_rxm", false), netKind("shm", true), casFlips}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return pscwScenario(ctx, g, 20, k.create, k.opts...)
	})
}

// pscwGroups returns, for round k of a window of n ranks, the distances
// d of that round: rank r accesses ranks r+d and is exposed to ranks
// r−d (mod n). They change from round to round, so a target often posts
// to an origin whose current epoch does not name it, and some rounds
// include the rank itself (d = 0).
func pscwGroups(k, n int) []int {
	switch {
	case n == 1:
		return []int{0}
	case k%5 == 4:
		return []int{0, 1}
	case k%3 == 2 && n > 2:
		return []int{1, n - 1}
	default:
		return []int{1 + k%(n-1)}
	}
}

// pscwScenario: rounds of generalised active-target synchronisation whose
// groups change from round to round (pscwGroups). Each round every rank
// posts to its origins, starts its targets, puts the round and its rank
// into slot d of each target, completes, and waits (or tests until done)
// for its origins; then it checks its slots, and on some rounds it waits
// a little and checks them again: an origin that put before this rank's
// next Post would show there. Then Start and Wait whose partners are
// late (their contexts end, the epochs are kept), and the errors. With
// create the window is a Create of Go memory.
func pscwScenario(ctx context.Context, g Group, rounds int, create bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	size := 16 * n
	w, err := newWindow(ctx, g, size, create, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	var b [16]byte
	for k := range rounds {
		ds := pscwGroups(k, n)
		origins, targets := make([]int, len(ds)), make([]int, len(ds))
		for i, d := range ds {
			origins[i], targets[i] = (me-d+n)%n, (me+d)%n
		}
		if err := w.Post(ctx, origins); err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		if err := w.Start(ctx, targets); err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		for i, t := range targets {
			binary.LittleEndian.PutUint64(b[:], uint64(k+1))
			binary.LittleEndian.PutUint64(b[8:], uint64(me))
			if err := w.Put(t, 16*ds[i], b[:]); err != nil {
				return err
			}
		}
		if err := w.Complete(ctx); err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		if k%2 == 0 {
			if err := w.Wait(ctx); err != nil {
				return fmt.Errorf("round %d: %w", k, err)
			}
		} else {
			for {
				done, err := w.Test()
				if err != nil {
					return fmt.Errorf("round %d: %w", k, err)
				}
				if done {
					break
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("round %d: testing: %w", k, err)
				}
				runtime.Gosched()
			}
		}
		for check := range 2 {
			for i, d := range ds {
				slot := w.Bytes()[16*d:]
				r, o := binary.LittleEndian.Uint64(slot), binary.LittleEndian.Uint64(slot[8:])
				if r != uint64(k+1) || o != uint64(origins[i]) {
					return fmt.Errorf("round %d, check %d: slot %d holds round %d from rank %d, want round %d from rank %d",
						k, check, d, r-1, o, k, origins[i])
				}
			}
			if k%7 != 3 {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if n > 1 {
		if err := pscwLate(ctx, w); err != nil {
			return err
		}
	}
	return pscwErrors(ctx, w)
}

// pscwLate: a Start whose target has not posted, and a Wait whose origin
// has not completed, end with their contexts; what arrived later is
// still taken by the next Start and Wait.
func pscwLate(ctx context.Context, w *Window) error {
	me := w.Rank()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 30*time.Millisecond) }
	if me == 0 {
		c, cancel := short()
		err := w.Start(c, []int{1})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Start before the target's Post: %v, want DeadlineExceeded", err)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	switch me {
	case 1:
		if err := w.Post(ctx, []int{0}); err != nil {
			return err
		}
		c, cancel := short()
		err := w.Wait(c)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Wait before the origin's Complete: %v, want DeadlineExceeded", err)
		}
		if done, err := w.Test(); done || err != nil {
			return fmt.Errorf("Test before the origin's Complete: %v, %v", done, err)
		}
	}
	if err := w.Fence(ctx); err != nil { // rank 1 has posted and waited in vain
		return err
	}
	switch me {
	case 0:
		if err := w.Start(ctx, []int{1}); err != nil {
			return fmt.Errorf("Start after the target's late Post: %w", err)
		}
		if err := w.Put(1, 0, []byte("late")); err != nil {
			return err
		}
		if err := w.Complete(ctx); err != nil {
			return err
		}
	case 1:
		if err := w.Wait(ctx); err != nil {
			return fmt.Errorf("Wait after a Wait that timed out: %w", err)
		}
		if string(w.Bytes()[:4]) != "late" {
			return fmt.Errorf("after Wait: %q, want the origin's put", w.Bytes()[:4])
		}
	}
	return w.Fence(ctx)
}

// pscwErrors: calls out of order and bad groups.
func pscwErrors(ctx context.Context, w *Window) error {
	me, n := w.Rank(), w.Size()
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Complete without Start", w.Complete(ctx), ErrInvalid},
		{"Wait without Post", w.Wait(ctx), ErrInvalid},
		{"Start of rank n", w.Start(ctx, []int{n}), ErrUnknownRank},
		{"Post to rank -1", w.Post(ctx, []int{-1}), ErrUnknownRank},
		{"Start naming a rank twice", w.Start(ctx, []int{me, me}), ErrInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := w.Test(); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Test without Post: %v", err)
	}
	// An epoch towards this rank alone.
	if err := w.Post(ctx, []int{me}); err != nil {
		return err
	}
	if err := w.Post(ctx, []int{me}); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("a second Post: %v", err)
	}
	if err := w.Start(ctx, []int{me}); err != nil {
		return err
	}
	if err := w.Start(ctx, nil); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("a second Start: %v", err)
	}
	if err := w.Complete(ctx); err != nil {
		return err
	}
	if err := w.Wait(ctx); err != nil {
		return err
	}
	// Empty groups open and close at once.
	if err := w.Post(ctx, nil); err != nil {
		return err
	}
	if err := w.Start(ctx, nil); err != nil {
		return err
	}
	if err := w.Complete(ctx); err != nil {
		return err
	}
	if done, err := w.Test(); !done || err != nil {
		return fmt.Errorf("Test of an empty exposure epoch: %v, %v", done, err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Post(canceled, []int{me}); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Post with an ended context: %v", err)
	}
	return nil
}

func TestPSCWNilAndFreed(t *testing.T) {
	ctx := context.Background()
	var w *Window
	if err := w.Post(ctx, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Post on nil: %v", err)
	}
	if err := w.Start(ctx, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Start on nil: %v", err)
	}
	if err := w.Complete(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("Complete on nil: %v", err)
	}
	if err := w.Wait(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("Wait on nil: %v", err)
	}
	if _, err := w.Test(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Test on nil: %v", err)
	}
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		w, err := Allocate(ctx, g, 8, WithSharedMemory(ShmOnly))
		if err != nil {
			return err
		}
		if err := w.Free(ctx); err != nil {
			return err
		}
		if err := w.Post(ctx, []int{0}); !errors.Is(err, ErrClosed) {
			return fmt.Errorf("Post on a freed window: %v", err)
		}
		if _, err := w.Test(); !errors.Is(err, ErrClosed) {
			return fmt.Errorf("Test on a freed window: %v", err)
		}
		return nil
	})
}
