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
	_, err := h.checkWords(ctx, "WaitUntilAll", s, skip, cmp, true, allMet(cmp, value))
	return err
}

// TestAll reports, without waiting, whether every word of s not skipped
// satisfies cmp against value (shmem_uint64_test_all); with every word
// skipped, true.
func (h *Heap) TestAll(s Sym, skip []bool, cmp Cmp, value uint64) (bool, error) {
	return h.checkWords(context.Background(), "TestAll", s, skip, cmp, false, allMet(cmp, value))
}

// WaitUntilAny waits until one word of s not skipped satisfies cmp
// against value and returns its index (shmem_uint64_wait_until_any): the
// lowest such index, so a caller that handles one word at a time skips
// it afterwards. It returns -1 at once when every word is skipped.
func (h *Heap) WaitUntilAny(ctx context.Context, s Sym, skip []bool, cmp Cmp, value uint64) (int, error) {
	return h.anyWord(ctx, "WaitUntilAny", s, skip, cmp, value, true)
}

// TestAny returns, without waiting, the lowest index of a word of s not
// skipped that satisfies cmp against value (shmem_uint64_test_any); -1
// when none does.
func (h *Heap) TestAny(s Sym, skip []bool, cmp Cmp, value uint64) (int, error) {
	return h.anyWord(context.Background(), "TestAny", s, skip, cmp, value, false)
}

// WaitUntilSome waits until at least one word of s not skipped satisfies
// cmp against value, then appends the index of every such word to idx and
// returns it (shmem_uint64_wait_until_some). It returns idx unchanged at
// once when every word is skipped.
func (h *Heap) WaitUntilSome(ctx context.Context, s Sym, skip []bool, cmp Cmp, value uint64, idx []int) ([]int, error) {
	return h.someWords(ctx, "WaitUntilSome", s, skip, cmp, value, true, idx)
}

// TestSome appends, without waiting, the index of every word of s not
// skipped that satisfies cmp against value to idx and returns it
// (shmem_uint64_test_some).
func (h *Heap) TestSome(s Sym, skip []bool, cmp Cmp, value uint64, idx []int) ([]int, error) {
	return h.someWords(context.Background(), "TestSome", s, skip, cmp, value, false, idx)
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

// anyWord is WaitUntilAny (wait) and TestAny.
func (h *Heap) anyWord(ctx context.Context, op string, s Sym, skip []bool, cmp Cmp, value uint64, wait bool) (int, error) {
	found := -1
	_, err := h.checkWords(ctx, op, s, skip, cmp, wait, func(ws words) bool {
		for i := range ws.n {
			if !ws.skipped(i) && cmp.test(ws.load(i), value) {
				found = i
				return true
			}
		}
		return false
	})
	if err != nil {
		return -1, err
	}
	return found, nil
}

// someWords is WaitUntilSome (wait) and TestSome.
func (h *Heap) someWords(ctx context.Context, op string, s Sym, skip []bool, cmp Cmp, value uint64, wait bool, idx []int) ([]int, error) {
	n := len(idx)
	_, err := h.checkWords(ctx, op, s, skip, cmp, wait, func(ws words) bool {
		idx = idx[:n]
		for i := range ws.n {
			if !ws.skipped(i) && cmp.test(ws.load(i), value) {
				idx = append(idx, i)
			}
		}
		return len(idx) > n
	})
	if err != nil {
		return idx[:n], err
	}
	return idx, nil
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

// checkWords checks s, skip and cmp, then calls done until it reports
// true (met), driving progress between tries; with wait false it looks
// once (twice on the libfabric path, around one progress call) and
// reports whether done did. With every word skipped it calls done never
// and reports true.
func (h *Heap) checkWords(ctx context.Context, op string, s Sym, skip []bool, cmp Cmp, wait bool, done func(ws words) bool) (met bool, err error) {
	o, err := h.at(op, s, 0, s.Size)
	if err != nil {
		return false, err
	}
	if o%8 != 0 || s.Size%8 != 0 {
		return false, fmt.Errorf("onesided: Heap.%s: words of 8 bytes at 8-byte alignment, not %d bytes at offset %d: %w", op, s.Size, o, ErrInvalid)
	}
	ws := words{n: s.Size / 8, skip: skip}
	if skip != nil && len(skip) != ws.n {
		return false, fmt.Errorf("onesided: Heap.%s: %d skip entries for %d words: %w", op, len(skip), ws.n, ErrInvalid)
	}
	if !cmp.valid() {
		return false, fmt.Errorf("onesided: Heap.%s: comparison %d: %w", op, cmp, ErrInvalid)
	}
	live := false
	for i := range ws.n {
		live = live || !ws.skipped(i)
	}
	if !live {
		return true, nil
	}
	w := h.w
	if err := w.enterWait(op); err != nil {
		return false, err
	}
	defer w.exitWait()
	ws.base = w.local[o : o+s.Size]
	wt := w.newWaiter(0)
	wt.stop = &w.freeing
	for {
		if done(ws) {
			return true, nil
		}
		if w.net != nil {
			if err := w.net.progress(); err != nil {
				return false, fmt.Errorf("onesided: Heap.%s: %w", op, err)
			}
			if done(ws) {
				return true, nil
			}
		}
		if !wait {
			return false, nil
		}
		if err := wt.pause(ctx); err != nil {
			return false, fmt.Errorf("onesided: Heap.%s(%+v): %w", op, s, err)
		}
	}
}
