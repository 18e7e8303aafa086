package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
)

// heapCollScenario checks the heap's collectives on every rank: broadcast
// from each root (in place too), collect, all-to-all, reductions of
// integers and floats (the same bits on every rank, in place too), each
// repeated so that a later call overwriting an earlier one's objects is
// covered, and the errors.
func heapCollScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, p := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<16, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	const nb = 24
	src, err := h.Alloc(ctx, nb*p, 8)
	if err != nil {
		return err
	}
	dst, err := h.Alloc(ctx, nb*p, 8)
	if err != nil {
		return err
	}
	fill := func(b []byte, rank, round int) {
		for i := range b {
			b[i] = byte(rank*31 + i*7 + round*13 + 1)
		}
	}
	want := make([]byte, nb*p)
	for round := range 3 {
		for root := range p {
			fill(h.Local(src), me, round)
			if err := h.Broadcast(ctx, dst, src, nb, root); err != nil {
				return err
			}
			fill(want[:nb], root, round)
			if !bytes.Equal(h.Local(dst)[:nb], want[:nb]) {
				return fmt.Errorf("round %d, broadcast from %d: got %v", round, root, h.Local(dst)[:nb])
			}
		}
		// In place: root's src is every rank's result.
		fill(h.Local(src), me, round+5)
		if err := h.Broadcast(ctx, src, src, nb, p-1); err != nil {
			return err
		}
		fill(want[:nb], p-1, round+5)
		if !bytes.Equal(h.Local(src)[:nb], want[:nb]) {
			return fmt.Errorf("round %d, broadcast in place: got %v", round, h.Local(src)[:nb])
		}
		fill(h.Local(src)[:nb], me, round)
		if err := h.Collect(ctx, dst, src, nb); err != nil {
			return err
		}
		for r := range p {
			fill(want[r*nb:(r+1)*nb], r, round)
		}
		if !bytes.Equal(h.Local(dst), want) {
			return fmt.Errorf("round %d, collect: got %v want %v", round, h.Local(dst), want)
		}
		// Block j of rank i's src is (i, j)'s pattern; rank j gets it at i.
		for j := range p {
			fill(h.Local(src)[j*nb:(j+1)*nb], me*p+j, round)
		}
		if err := h.Alltoall(ctx, dst, src, nb); err != nil {
			return err
		}
		for i := range p {
			fill(want[i*nb:(i+1)*nb], i*p+me, round)
		}
		if !bytes.Equal(h.Local(dst), want) {
			return fmt.Errorf("round %d, all-to-all: got %v want %v", round, h.Local(dst), want)
		}
		// Reductions: int64 sum, min and bxor of (rank+1)·(i+1); float64
		// sums of values whose order matters in the last bits.
		s := h.Local(src)
		for _, c := range []struct {
			op   Op
			want func(i int) int64
		}{
			{OpSum, func(i int) int64 { return int64(p*(p+1)/2) * int64(i+1+round) }},
			{OpMin, func(i int) int64 { return int64(i + 1 + round) }},
			{OpBxor, func(i int) int64 {
				x := int64(0)
				for r := 1; r <= p; r++ {
					x ^= int64(r) * int64(i+1+round)
				}
				return x
			}},
		} {
			for i := range 3 {
				binary.LittleEndian.PutUint64(s[8*i:], uint64(int64(me+1)*int64(i+1+round)))
			}
			if err := h.Reduce(ctx, dst, src, 3, AtomicInt64, c.op); err != nil {
				return err
			}
			for i := range 3 {
				if got := int64(binary.LittleEndian.Uint64(h.Local(dst)[8*i:])); got != c.want(i) {
					return fmt.Errorf("round %d, reduce %v: element %d is %d, want %d", round, c.op, i, got, c.want(i))
				}
			}
		}
		wantF := 0.0
		for r := range p {
			wantF += 1.0 / float64(3+r+round)
		}
		binary.LittleEndian.PutUint64(s, math.Float64bits(1.0/float64(3+me+round)))
		if err := h.Reduce(ctx, src, src, 1, AtomicFloat64, OpSum); err != nil { // in place
			return err
		}
		if got := math.Float64frombits(binary.LittleEndian.Uint64(s)); got != wantF {
			return fmt.Errorf("round %d, float sum in place: %v, want %v (rank order)", round, got, wantF)
		}
	}
	// Fence: rank 0's data put before its flag is there when the flag is.
	if p > 1 {
		flag, err := h.Alloc(ctx, 8, 8)
		if err != nil {
			return err
		}
		if me == 0 {
			fill(want[:nb], 0, 9)
			if err := h.Put(1, dst, 0, want[:nb]); err != nil {
				return err
			}
			if err := h.Fence(ctx); err != nil {
				return err
			}
			if err := h.AtomicSet(1, flag, 0, AtomicUint64, 1); err != nil {
				return err
			}
		} else if me == 1 {
			if _, err := h.WaitSignal(ctx, flag, 0, CmpEQ, 1); err != nil {
				return err
			}
			fill(want[:nb], 0, 9)
			if !bytes.Equal(h.Local(dst)[:nb], want[:nb]) {
				return fmt.Errorf("after the flag put behind a Fence: %v", h.Local(dst)[:nb])
			}
		}
		if err := h.Barrier(ctx); err != nil {
			return err
		}
	}
	for name, f := range map[string]func() error{
		"broadcast root":     func() error { return h.Broadcast(ctx, dst, src, nb, p) },
		"broadcast too long": func() error { return h.Broadcast(ctx, dst, src, nb*p+1, 0) },
		"collect too long":   func() error { return h.Collect(ctx, dst, src, nb+1) },
		"alltoall negative":  func() error { return h.Alltoall(ctx, dst, src, -1) },
		"reduce replace":     func() error { return h.Reduce(ctx, dst, src, 1, AtomicInt64, OpReplace) },
		"reduce float bxor":  func() error { return h.Reduce(ctx, dst, src, 1, AtomicFloat64, OpBxor) },
		"not an object":      func() error { return h.Collect(ctx, Sym{Off: 8, Size: 8}, src, 1) },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrOutOfRange) {
			return fmt.Errorf("%s: %v, want ErrInvalid or ErrOutOfRange", name, err)
		}
	}
	return nil
}

func TestHeapCollectives(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return heapCollScenario(ctx, g, WithSharedMemory(ShmOnly))
			})
		})
	}
}
