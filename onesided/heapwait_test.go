package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestHeapWaitUntil(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 4, func(ctx context.Context, g Group) error {
			return heapWaitScenario(ctx, g, WithSharedMemory(ShmOnly))
		})
	})
	t.Run("shm", func(t *testing.T) {
		requireProvider(t, "shm")
		runRanks(t, 3, func(ctx context.Context, g Group) error {
			return heapWaitScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
		})
	})
}

// heapWaitScenario: every other rank sets its word of rank 0's flags
// object (word r to r+1); rank 0 collects them with WaitUntilSome, then
// (flags cleared) with WaitUntilAny, then waits for all with
// WaitUntilAll, each time skipping its own word and the ones it has seen.
// Then the edge cases and errors on every rank.
func heapWaitScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	flags, err := h.Alloc(ctx, 8*n, 8)
	if err != nil {
		return err
	}
	for round, name := range []string{"WaitUntilSome", "WaitUntilAny", "WaitUntilAll"} {
		if me != 0 {
			if err := h.AtomicSet(0, flags, 8*me, AtomicUint64, uint64(me+1)); err != nil {
				return err
			}
			if err := h.Quiet(ctx); err != nil {
				return err
			}
		} else {
			skip := make([]bool, n)
			skip[0] = true
			seen := 0
			for seen < n-1 {
				var got []int
				switch round {
				case 0:
					if got, err = h.WaitUntilSome(ctx, flags, skip, CmpGE, 1, nil); err == nil && len(got) == 0 {
						err = fmt.Errorf("no index with %d words left", n-1-seen)
					}
				case 1:
					var i int
					if i, err = h.WaitUntilAny(ctx, flags, skip, CmpGE, 1); err == nil {
						got = []int{i}
					}
				default:
					err = h.WaitUntilAll(ctx, flags, skip, CmpGE, 1)
					for i := 1; i < n; i++ {
						got = append(got, i)
					}
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				for _, i := range got {
					if i <= 0 || i >= n || skip[i] {
						return fmt.Errorf("%s: index %d (skip %v)", name, i, skip)
					}
					if v := binary.LittleEndian.Uint64(h.Local(flags)[8*i:]); v != uint64(i+1) {
						return fmt.Errorf("%s: word %d = %d, want %d", name, i, v, i+1)
					}
					skip[i] = true
					seen++
				}
			}
			clear(h.Local(flags))
		}
		if err := h.Barrier(ctx); err != nil {
			return err
		}
	}

	// Every word skipped: at once.
	all := make([]bool, n)
	for i := range all {
		all[i] = true
	}
	if i, err := h.WaitUntilAny(ctx, flags, all, CmpEQ, 99); i != -1 || err != nil {
		return fmt.Errorf("WaitUntilAny with every word skipped: %d, %v", i, err)
	}
	if got, err := h.WaitUntilSome(ctx, flags, all, CmpEQ, 99, []int{7}); !slices.Equal(got, []int{7}) || err != nil {
		return fmt.Errorf("WaitUntilSome with every word skipped: %v, %v", got, err)
	}
	if err := h.WaitUntilAll(ctx, flags, all, CmpEQ, 99); err != nil {
		return fmt.Errorf("WaitUntilAll with every word skipped: %v", err)
	}
	// The test forms look once: this rank's own word set locally.
	binary.LittleEndian.PutUint64(h.Local(flags)[8*me:], 5)
	if i, err := h.TestAny(flags, nil, CmpEQ, 5); i != me || err != nil {
		return fmt.Errorf("TestAny with word %d set: %d, %v", me, i, err)
	}
	if got, err := h.TestSome(flags, nil, CmpEQ, 5, []int{-1}); !slices.Equal(got, []int{-1, me}) || err != nil {
		return fmt.Errorf("TestSome with word %d set: %v, %v", me, got, err)
	}
	if ok, err := h.TestAll(flags, nil, CmpEQ, 5); ok != (n == 1) || err != nil {
		return fmt.Errorf("TestAll with one word of %d set: %v, %v", n, ok, err)
	}
	mine := slices.Clone(all)
	mine[me] = false
	if ok, err := h.TestAll(flags, mine, CmpEQ, 5); !ok || err != nil {
		return fmt.Errorf("TestAll of the one word set: %v, %v", ok, err)
	}
	if i, err := h.TestAny(flags, all, CmpEQ, 5); i != -1 || err != nil {
		return fmt.Errorf("TestAny with every word skipped: %d, %v", i, err)
	}
	if ok, err := h.TestAll(flags, all, CmpEQ, 7); !ok || err != nil {
		return fmt.Errorf("TestAll with every word skipped: %v, %v", ok, err)
	}
	if _, err := h.TestAll(flags, make([]bool, n+1), CmpEQ, 5); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("TestAll with a skip of the wrong length: %v, want ErrInvalid", err)
	}
	clear(h.Local(flags))
	// A word nobody sets, and the errors.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = h.WaitUntilAny(short, flags, nil, CmpEQ, 99)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("WaitUntilAny for a value nobody writes: %v, want DeadlineExceeded", err)
	}
	odd, err := h.Alloc(ctx, 12, 8)
	if err != nil {
		return err
	}
	if err := h.WaitUntilAll(ctx, flags, make([]bool, n+1), CmpEQ, 0); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("skip of the wrong length: %v, want ErrInvalid", err)
	}
	if err := h.WaitUntilAll(ctx, flags, nil, Cmp(0), 0); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("comparison 0: %v, want ErrInvalid", err)
	}
	if err := h.WaitUntilAll(ctx, odd, nil, CmpEQ, 0); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("an object of 12 bytes: %v, want ErrInvalid", err)
	}
	return h.Barrier(ctx)
}
