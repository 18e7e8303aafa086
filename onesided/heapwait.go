package onesided

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Waits on several words at once (OpenSHMEM 1.5's shmem_wait_until_all,
// _any and _some on uint64 words, and the shmem_test forms, which look
// once): the words are the 8-byte elements of
// this rank's copy of a symmetric object, updated by other ranks'
// PutSignal, Signal, Put or atomics. skip, when not nil, has one entry
// per word; a word whose entry is true is left out (OpenSHMEM's status
// array). A waiting rank drives libfabric progress and paces itself as
// WaitSignal does, and returns when ctx ends.

// WaitUntilAll waits until every word of s not skipped satisfies cmp
// against value (shmem_uint64_wait_until_all).
func (h *Heap) WaitUntilAll(ctx context.Context, s Sym, skip []bool, cmp Cmp, value uint64) error {
	_, err := h.waitWords(ctx, "WaitUntilAll", s, skip, cmp, allMet(cmp, value))
	return err
}

// WaitUntilAny waits until one word of s not skipped satisfies cmp
// against value and returns its index (shmem_uint64_wait_until_any): the
// lowest such index, so a caller that handles one word at a time skips
// it afterwards. It returns -1 at once when every word is skipped.
func (h *Heap) WaitUntilAny(ctx context.Context, s Sym, skip []bool, cmp Cmp, value uint64) (int, error) {
	found := -1
	live, err := h.waitWords(ctx, "WaitUntilAny", s, skip, cmp, firstMet(cmp, value, &found))
	if err != nil || !live {
		return -1, err
	}
	return found, nil
}

// WaitUntilSome waits until at least one word of s not skipped satisfies
// cmp against value, then appends the index of every such word to idx and
// returns it (shmem_uint64_wait_until_some). It returns idx unchanged at
// once when every word is skipped.
func (h *Heap) WaitUntilSome(ctx context.Context, s Sym, skip []bool, cmp Cmp, value uint64, idx []int) ([]int, error) {
	n := len(idx)
	_, err := h.waitWords(ctx, "WaitUntilSome", s, skip, cmp, everyMet(cmp, value, &idx, n))
	if err != nil {
		return idx[:n], err
	}
	return idx, nil
}

// TestAll reports, without waiting, whether every word of s not skipped
// satisfies cmp against value (shmem_uint64_test_all); with every word
// skipped, true.
func (h *Heap) TestAll(s Sym, skip []bool, cmp Cmp, value uint64) (bool, error) {
	live, met, err := h.checkWords(context.Background(), "TestAll", s, skip, cmp, false, allMet(cmp, value))
	return met || !live && err == nil, err
}

// TestAny returns, without waiting, the lowest index of a word of s not
// skipped that satisfies cmp against value (shmem_uint64_test_any); -1
// when none does.
func (h *Heap) TestAny(s Sym, skip []bool, cmp Cmp, value uint64) (int, error) {
	found := -1
	_, _, err := h.checkWords(context.Background(), "TestAny", s, skip, cmp, false, firstMet(cmp, value, &found))
	if err != nil {
		return -1, err
	}
	return found, nil
}

// TestSome appends, without waiting, the index of every word of s not
// skipped that satisfies cmp against value to idx and returns it
// (shmem_uint64_test_some).
func (h *Heap) TestSome(s Sym, skip []bool, cmp Cmp, value uint64, idx []int) ([]int, error) {
	n := len(idx)
	_, _, err := h.checkWords(context.Background(), "TestSome", s, skip, cmp, false, everyMet(cmp, value, &idx, n))
	if err != nil {
		return idx[:n], err
	}
	return idx, nil
}

// allMet is the test of the All forms: every word not skipped satisfies
// cmp against value.
func allMet(cmp Cmp, value uint64) func(ws words) bool {
	return func(ws words) bool {
		for i := range ws.n {
			if !ws.skipped(i) && !cmp.test(ws.load(i), value) {
				return false
			}
		}
		return true
	}
}

// firstMet is the test of the Any forms: it sets *found to the lowest
// index of a word not skipped that satisfies cmp against value.
func firstMet(cmp Cmp, value uint64, found *int) func(ws words) bool {
	return func(ws words) bool {
		for i := range ws.n {
			if !ws.skipped(i) && cmp.test(ws.load(i), value) {
				*found = i
				return true
			}
		}
		return false
	}
}

// everyMet is the test of the Some forms: it sets (*idx)[n:] to the
// indices of the words not skipped that satisfy cmp against value.
func everyMet(cmp Cmp, value uint64, idx *[]int, n int) func(ws words) bool {
	return func(ws words) bool {
		*idx = (*idx)[:n]
		for i := range ws.n {
			if !ws.skipped(i) && cmp.test(ws.load(i), value) {
				*idx = append(*idx, i)
			}
		}
		return len(*idx) > n
	}
}

// words are the 8-byte words of a heap object in this rank's memory.
type words struct {
	base []byte // the object, 8-byte aligned
	n    int
	skip []bool
}

func (ws words) load(i int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&ws.base[8*i])))
}

func (ws words) skipped(i int) bool { return ws.skip != nil && ws.skip[i] }

// waitWords checks s, skip and cmp, then calls done until it reports
// true, driving progress between tries; live is false (and done is not
// called) when every word is skipped.
func (h *Heap) waitWords(ctx context.Context, op string, s Sym, skip []bool, cmp Cmp, done func(ws words) bool) (live bool, err error) {
	live, _, err = h.checkWords(ctx, op, s, skip, cmp, true, done)
	return live, err
}

// checkWords is waitWords, or with wait false one look at the words
// (with progress driven once when the first finds nothing): met reports
// whether done did.
func (h *Heap) checkWords(ctx context.Context, op string, s Sym, skip []bool, cmp Cmp, wait bool, done func(ws words) bool) (live, met bool, err error) {
	o, err := h.at(op, s, 0, s.Size)
	if err != nil {
		return false, false, err
	}
	if o%8 != 0 || s.Size%8 != 0 {
		return false, false, fmt.Errorf("onesided: Heap.%s: words of 8 bytes at 8-byte alignment, not %d bytes at offset %d: %w", op, s.Size, o, ErrInvalid)
	}
	ws := words{n: s.Size / 8, skip: skip}
	if skip != nil && len(skip) != ws.n {
		return false, false, fmt.Errorf("onesided: Heap.%s: %d skip entries for %d words: %w", op, len(skip), ws.n, ErrInvalid)
	}
	if !cmp.valid() {
		return false, false, fmt.Errorf("onesided: Heap.%s: comparison %d: %w", op, cmp, ErrInvalid)
	}
	for i := range ws.n {
		live = live || !ws.skipped(i)
	}
	if !live {
		return false, false, nil
	}
	w := h.w
	if err := w.enterWait(op); err != nil {
		return true, false, err
	}
	defer w.exitWait()
	ws.base = w.local[o : o+s.Size]
	wt := w.newWaiter(0)
	wt.stop = &w.freeing
	for {
		if done(ws) {
			return true, true, nil
		}
		if w.net != nil {
			if err := w.net.progress(); err != nil {
				return true, false, fmt.Errorf("onesided: Heap.%s: %w", op, err)
			}
			if done(ws) {
				return true, true, nil
			}
		}
		if !wait {
			return true, false, nil
		}
		if err := wt.pause(ctx); err != nil {
			return true, false, fmt.Errorf("onesided: Heap.%s(%+v): %w", op, s, err)
		}
	}
}
