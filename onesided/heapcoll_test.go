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
	const nb = 24 // the reductions use 3 words
	h, src, dst, err := collHeap(ctx, g, nb, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	if err := collBattery(ctx, h, h, src, dst, me, p, nb); err != nil {
		return err
	}
	fill := collFill
	want := make([]byte, nb*p)
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

// collHeap makes a heap over g and, on it, the source and destination
// of the collectives' battery: nb bytes per rank of g each.
func collHeap(ctx context.Context, g Group, nb int, opts ...Option) (h *Heap, src, dst Sym, err error) {
	if h, err = NewHeap(ctx, g, 1<<16, opts...); err != nil {
		return nil, src, dst, err
	}
	if src, err = h.Alloc(ctx, nb*g.Size(), 8); err == nil {
		dst, err = h.Alloc(ctx, nb*g.Size(), 8)
	}
	if err != nil {
		_ = h.Close(ctx)
		return nil, src, dst, err
	}
	return h, src, dst, nil
}

// collSet is the collectives a heap and a team share.
type collSet interface {
	Broadcast(ctx context.Context, dst, src Sym, nbytes, root int) error
	Collect(ctx context.Context, dst, src Sym, nbytes int) error
	Alltoall(ctx context.Context, dst, src Sym, nbytes int) error
	Reduce(ctx context.Context, dst, src Sym, count int, t AtomicType, op Op) error
}

// collFill fills b with member rank's pattern of a round.
func collFill(b []byte, rank, round int) {
	for i := range b {
		b[i] = byte(rank*31 + i*7 + round*13 + 1)
	}
}

// collBattery: three rounds of every collective of c, among p members of
// which this rank is member me, on objects src and dst of h (nb·p bytes
// each): broadcasts from every root and in place, collect, all-to-all,
// integer reductions and a float sum in place, each result checked.
func collBattery(ctx context.Context, h *Heap, c collSet, src, dst Sym, me, p, nb int) error {
	fill := collFill
	want := make([]byte, nb*p)
	for round := range 3 {
		for root := range p {
			fill(h.Local(src), me, round)
			if err := c.Broadcast(ctx, dst, src, nb, root); err != nil {
				return err
			}
			fill(want[:nb], root, round)
			if !bytes.Equal(h.Local(dst)[:nb], want[:nb]) {
				return fmt.Errorf("round %d, broadcast from %d: got %v", round, root, h.Local(dst)[:nb])
			}
		}
		// In place: root's src is every rank's result.
		fill(h.Local(src), me, round+5)
		if err := c.Broadcast(ctx, src, src, nb, p-1); err != nil {
			return err
		}
		fill(want[:nb], p-1, round+5)
		if !bytes.Equal(h.Local(src)[:nb], want[:nb]) {
			return fmt.Errorf("round %d, broadcast in place: got %v", round, h.Local(src)[:nb])
		}
		fill(h.Local(src)[:nb], me, round)
		if err := c.Collect(ctx, dst, src, nb); err != nil {
			return err
		}
		for r := range p {
			fill(want[r*nb:(r+1)*nb], r, round)
		}
		if !bytes.Equal(h.Local(dst)[:nb*p], want) {
			return fmt.Errorf("round %d, collect: got %v want %v", round, h.Local(dst)[:nb*p], want)
		}
		// Block j of rank i's src is (i, j)'s pattern; rank j gets it at i.
		for j := range p {
			fill(h.Local(src)[j*nb:(j+1)*nb], me*p+j, round)
		}
		if err := c.Alltoall(ctx, dst, src, nb); err != nil {
			return err
		}
		for i := range p {
			fill(want[i*nb:(i+1)*nb], i*p+me, round)
		}
		if !bytes.Equal(h.Local(dst)[:nb*p], want) {
			return fmt.Errorf("round %d, all-to-all: got %v want %v", round, h.Local(dst)[:nb*p], want)
		}
		// Reductions: int64 sum, min and bxor of (rank+1)·(i+1); float64
		// sums of values whose order matters in the last bits.
		s := h.Local(src)
		for _, rc := range []struct {
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
			if err := c.Reduce(ctx, dst, src, 3, AtomicInt64, rc.op); err != nil {
				return err
			}
			for i := range 3 {
				if got := int64(binary.LittleEndian.Uint64(h.Local(dst)[8*i:])); got != rc.want(i) {
					return fmt.Errorf("round %d, reduce %v: element %d is %d, want %d", round, rc.op, i, got, rc.want(i))
				}
			}
		}
		wantF := 0.0
		for r := range p {
			wantF += 1.0 / float64(3+r+round)
		}
		binary.LittleEndian.PutUint64(s, math.Float64bits(1.0/float64(3+me+round)))
		if err := c.Reduce(ctx, src, src, 1, AtomicFloat64, OpSum); err != nil { // in place
			return err
		}
		if got := math.Float64frombits(binary.LittleEndian.Uint64(s)); got != wantF {
			return fmt.Errorf("round %d, float sum in place: %v, want %v (rank order)", round, got, wantF)
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

// teamScenario: teams of the heap's ranks — the even ranks, the odd ones,
// all but rank 0 (overlapping both) and the last rank alone — each run
// the whole collective battery among their members, one team after the
// other on shared objects (a rank outside a team goes on to the next
// while the members work: the teams' barriers keep them apart); then a
// non-member's calls, bad splits, and calls after Destroy.
func teamScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, p := g.Rank(), g.Size()
	const nb = 24 // the reductions use 3 words
	h, src, dst, err := collHeap(ctx, g, nb, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	type split struct{ start, stride, size int }
	splits := []split{{0, 2, (p + 1) / 2}, {p - 1, 1, 1}}
	if p > 1 {
		splits = append(splits, split{1, 2, p / 2}, split{1, 1, p - 1})
	}
	var teams []*Team
	for _, s := range splits {
		t, err := h.SplitStrided(ctx, s.start, s.stride, s.size)
		if err != nil {
			return fmt.Errorf("split %+v: %w", s, err)
		}
		if t.Size() != s.size || t.HeapRank(0) != s.start || t.HeapRank(s.size-1) != s.start+(s.size-1)*s.stride || t.HeapRank(s.size) != -1 {
			return fmt.Errorf("split %+v: size %d, members %d..%d", s, t.Size(), t.HeapRank(0), t.HeapRank(t.Size()-1))
		}
		if in := me >= s.start && (me-s.start)%s.stride == 0 && (me-s.start)/s.stride < s.size; in != (t.Rank() >= 0) ||
			in && t.HeapRank(t.Rank()) != me {
			return fmt.Errorf("split %+v: rank %d has team rank %d", s, me, t.Rank())
		}
		teams = append(teams, t)
	}
	for _, k := range []int{0, 3, 2, 3, 1} {
		if k >= len(teams) {
			continue
		}
		t := teams[k]
		if t.Rank() < 0 {
			if err := t.Barrier(ctx); !errors.Is(err, ErrInvalid) {
				return fmt.Errorf("a non-member's team barrier: %v", err)
			}
			continue
		}
		if err := collBattery(ctx, h, t, src, dst, t.Rank(), t.Size(), nb); err != nil {
			return fmt.Errorf("team %+v: %w", splits[k], err)
		}
		if err := t.Barrier(ctx); err != nil {
			return err
		}
	}
	for name, bad := range map[string]split{
		"start past the end": {p, 1, 1}, "negative start": {-1, 1, 1}, "zero stride": {0, 0, 1},
		"zero size": {0, 1, 0}, "last member past the end": {0, 1, p + 1}, "stride past the end": {p - 1, 2, 2},
	} {
		if _, err := h.SplitStrided(ctx, bad.start, bad.stride, bad.size); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("split with %s: %v, want ErrInvalid", name, err)
		}
	}
	for _, t := range teams {
		if err := t.Destroy(ctx); err != nil {
			return err
		}
	}
	if err := teams[0].Collect(ctx, dst, src, 1); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("collect on a destroyed team: %v", err)
	}
	if err := teams[0].Destroy(ctx); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("a second Destroy: %v", err)
	}
	var nilTeam *Team
	if nilTeam.Rank() != -1 || nilTeam.Size() != 0 || nilTeam.HeapRank(0) != -1 || !errors.Is(nilTeam.Barrier(ctx), ErrInvalid) {
		return fmt.Errorf("nil team answers")
	}
	return h.Barrier(ctx)
}

func TestTeams(t *testing.T) {
	for _, n := range []int{1, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return teamScenario(ctx, g, WithSharedMemory(ShmOnly))
			})
		})
	}
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			requireProvider(t, prov)
			runRanks(t, 3, func(ctx context.Context, g Group) error {
				return teamScenario(ctx, g, providerCase{prov, OrderAuto}.opts()...)
			})
		})
	}
}
