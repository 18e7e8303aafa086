package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestHeapAtomicsDirect(t *testing.T) {
	runRanks(t, 4, func(ctx context.Context, g Group) error {
		return heapAtomicsScenario(ctx, g, 200, WithSharedMemory(ShmOnly))
	})
}

func TestNetHeapAtomics(t *testing.T) {
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			requireProvider(t, prov)
			runRanks(t, 3, func(ctx context.Context, g Group) error {
				return heapAtomicsScenario(ctx, g, 15, providerCase{prov, OrderAuto}.opts()...)
			})
		})
	}
}

// TestNetHeapAtomicsCASFallback runs the scenario with every update
// through the compare-and-swap fallback (element by element).
func TestNetHeapAtomicsCASFallback(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return heapAtomicsScenario(ctx, g, 5, append(providerCase{"shm", OrderAuto}.opts(), withCASFallback())...)
	})
}

func TestHeapAtomicErrors(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return heapAtomicErrors(ctx, g, WithSharedMemory(ShmOnly))
	})
}

func TestNetHeapAtomicErrors(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return heapAtomicErrors(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
	})
}

// Layout of the object heapAtomicsScenario updates, in bytes.
const (
	haAdd   = 0   // int64: every rank adds me+1 per iteration
	haInc   = 8   // uint32: every rank increments per iteration
	haFAdd  = 16  // float64: every rank adds 0.5 per iteration
	haOr    = 24  // uint64: every rank ORs bit me per iteration
	haAnd   = 32  // uint32: starts all ones, every rank clears bit me
	haXor   = 40  // uint64: rank me XORs (i+1)*(me+1)<<me in iteration i
	haSet   = 48  // uint64: every rank sets a value that names it
	haFSet  = 56  // float32: every rank sets -1.5 (after the fetch-add below)
	haMix   = 64  // uint64: non-fetching and fetching adds mixed
	haVec   = 72  // haVecN int64: vector add
	haVecN  = 37  // elements: more than one staging slot's worth
	haVec32 = 368 // haVecN int32: vector add of negative operands
	haMax   = 520 // haMaxN int64: vector max and min
	haMaxN  = 4
	haObj   = 560
)

// heapAtomicsScenario: every rank updates every rank's copy of one object
// iters times with every non-fetching atomic, scalar and vector, then
// checks exact totals after a barrier. A ring of Quiet then PutSignal
// checks that Quiet alone completes the updates at the target.
func heapAtomicsScenario(ctx context.Context, g Group, iters int, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	// A 4-byte object first, so that the object under test sits at 8 and
	// the sigword after it is reached only through its Sym.
	pad, err := h.Alloc(ctx, 4, 4)
	if err != nil {
		return err
	}
	obj, err := h.Alloc(ctx, haObj, 8)
	if err != nil {
		return err
	}
	sig, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint32(h.Local(obj)[haAnd:], math.MaxUint32)
	for k := 2; k < haMaxN; k++ { // the min's start
		binary.NativeEndian.PutUint64(h.Local(obj)[haMax+8*k:], uint64(math.MaxInt64))
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	vec := make([]uint64, haVecN)
	vec32 := make([]uint64, haVecN)
	for k := range vec {
		vec[k] = uint64(k + me)
		vec32[k] = uint64(int64(-k - me)) // the low four bytes: int32(-k-me)
	}
	for i := 0; i < iters; i++ {
		for r := 0; r < n; r++ {
			steps := []struct {
				name string
				call func() error
			}{
				{"add", func() error { return h.AtomicAdd(r, obj, haAdd, AtomicInt64, uint64(me+1)) }},
				{"inc", func() error { return h.AtomicInc(r, obj, haInc, AtomicUint32) }},
				{"fadd", func() error { return h.AtomicAdd(r, obj, haFAdd, AtomicFloat64, math.Float64bits(0.5)) }},
				{"or", func() error { return h.AtomicOr(r, obj, haOr, AtomicUint64, 1<<me) }},
				{"and", func() error { return h.AtomicAnd(r, obj, haAnd, AtomicUint32, ^uint64(1<<me)) }},
				{"xor", func() error { return h.AtomicXor(r, obj, haXor, AtomicUint64, uint64((i+1)*(me+1))<<me) }},
				{"set", func() error { return h.AtomicSet(r, obj, haSet, AtomicUint64, uint64(1000+me)) }},
				{"mix", func() error { return h.AtomicAdd(r, obj, haMix, AtomicUint64, 1) }},
				{"fetch-mix", func() error { _, err := h.Atomic(r, obj, haMix, AtomicUint64, OpSum, 2); return err }},
				{"vec", func() error { return h.AtomicAddN(r, obj, haVec, AtomicInt64, vec) }},
				{"vec32", func() error { return h.AtomicN(r, obj, haVec32, AtomicInt32, OpSum, vec32) }},
				{"vmax", func() error {
					return h.AtomicN(r, obj, haMax, AtomicInt64, OpMax, []uint64{uint64(me), uint64(i)})
				}},
				{"vmin", func() error {
					return h.AtomicN(r, obj, haMax+16, AtomicInt64, OpMin, []uint64{uint64(me + 5), uint64(i + 7)})
				}},
			}
			for _, s := range steps {
				if err := s.call(); err != nil {
					return fmt.Errorf("%s to rank %d, iteration %d: %w", s.name, r, i, err)
				}
			}
		}
	}
	// Completion at Quiet: the right neighbour sees a last add once the
	// signal that follows this rank's Quiet has arrived, with no barrier.
	right, left := (me+1)%n, (me+n-1)%n
	if err := h.AtomicAddN(right, obj, haFAdd-8, AtomicUint32, []uint64{0, 100}); err != nil {
		return err
	}
	if err := h.Quiet(ctx); err != nil {
		return err
	}
	if err := h.PutSignal(right, sig, 0, nil, sig, 0, 1); err != nil {
		return err
	}
	if _, err := h.WaitSignal(ctx, sig, 0, CmpEQ, 1); err != nil {
		return err
	}
	m := h.Local(obj)
	// haInc is a uint32 at 8; the word after it (12) got the ring's 100.
	if got := binary.NativeEndian.Uint32(m[haFAdd-4:]); got != 100 {
		return fmt.Errorf("after rank %d's Quiet and signal: word %d, want 100", left, got)
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	// A float32 set after a fetch-add on the same element.
	if me == 0 {
		if _, err := h.Atomic(0, obj, haFSet, AtomicFloat32, OpSum, uint64(math.Float32bits(2))); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			if err := h.AtomicSet(r, obj, haFSet, AtomicFloat32, uint64(math.Float32bits(-1.5))); err != nil {
				return err
			}
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}

	u64 := func(o int) uint64 { return binary.NativeEndian.Uint64(m[o:]) }
	u32 := func(o int) uint32 { return binary.NativeEndian.Uint32(m[o:]) }
	N := uint64(n)
	I := uint64(iters)
	wantXor := uint64(0)
	for r := 0; r < n; r++ {
		for i := 0; i < iters; i++ {
			wantXor ^= uint64((i+1)*(r+1)) << r
		}
	}
	type check struct {
		name      string
		got, want uint64
	}
	checks := []check{
		{"add", u64(haAdd), I * N * (N + 1) / 2},
		{"inc", uint64(u32(haInc)), I * N},
		{"fadd", u64(haFAdd), math.Float64bits(0.5 * float64(iters*n))},
		{"or", u64(haOr), 1<<N - 1},
		{"and", uint64(u32(haAnd)), uint64(math.MaxUint32 &^ (1<<N - 1))},
		{"xor", u64(haXor), wantXor},
		{"mix", u64(haMix), 3 * I * N},
		{"fset", uint64(u32(haFSet)), uint64(math.Float32bits(-1.5))},
		{"vmax[0]", u64(haMax), N - 1},
		{"vmax[1]", u64(haMax + 8), I - 1},
		{"vmin[0]", u64(haMax + 16), 5},
		{"vmin[1]", u64(haMax + 24), 7},
	}
	if s := u64(haSet); s < 1000 || s >= 1000+N {
		checks = append(checks, check{"set (one rank's value)", s, 1000})
	}
	for k := 0; k < haVecN; k++ {
		// sum over ranks of (k + r), iters times
		want := I * (N*uint64(k) + N*(N-1)/2)
		checks = append(checks, check{fmt.Sprintf("vec[%d]", k), u64(haVec + 8*k), want})
		want32 := uint32(int32(-int64(want)))
		checks = append(checks, check{fmt.Sprintf("vec32[%d]", k), uint64(u32(haVec32 + 4*k)), uint64(want32)})
	}
	for _, c := range checks {
		if c.got != c.want {
			return fmt.Errorf("rank %d: %s = %#x, want %#x", me, c.name, c.got, c.want)
		}
	}
	if end := haVec32 + 4*haVecN; slices.ContainsFunc(m[end:haMax], func(b byte) bool { return b != 0 }) {
		return fmt.Errorf("rank %d: bytes past the int32 vector were written: %v", me, m[end:haMax])
	}
	if err := h.Free(ctx, pad); err != nil {
		return err
	}
	return h.Barrier(ctx)
}

// heapAtomicErrors: every invalid call of a non-fetching atomic returns
// the documented sentinel, never panics, and leaves memory alone.
func heapAtomicErrors(ctx context.Context, g Group, opts ...Option) (err error) {
	h, err := NewHeap(ctx, g, 1<<12, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, h.Close)
	pad, err := h.Alloc(ctx, 4, 4)
	if err != nil {
		return err
	}
	odd, err := h.Alloc(ctx, 16, 4) // at 4: not 8-byte aligned
	if err != nil {
		return err
	}
	obj, err := h.Alloc(ctx, 16, 8)
	if err != nil {
		return err
	}
	gone, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	if err := h.Free(ctx, gone); err != nil {
		return err
	}
	if odd.Off%8 == 0 {
		return fmt.Errorf("object meant to be misaligned is at %d", odd.Off)
	}
	var nilHeap *Heap
	two := []uint64{1, 2}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"nil heap add", func() error { return nilHeap.AtomicAdd(0, obj, 0, AtomicInt64, 1) }, ErrInvalid},
		{"nil heap vector", func() error { return nilHeap.AtomicAddN(0, obj, 0, AtomicInt64, two) }, ErrInvalid},
		{"type 0", func() error { return h.AtomicAdd(0, obj, 0, AtomicType(0), 1) }, ErrInvalid},
		{"type 99", func() error { return h.AtomicSet(0, obj, 0, AtomicType(99), 1) }, ErrInvalid},
		{"inc of type -1", func() error { return h.AtomicInc(0, obj, 0, AtomicType(-1)) }, ErrInvalid},
		{"and on float", func() error { return h.AtomicAnd(0, obj, 0, AtomicFloat64, 1) }, ErrInvalid},
		{"xor on float32", func() error { return h.AtomicXor(0, obj, 0, AtomicFloat32, 1) }, ErrInvalid},
		{"op 0", func() error { return h.AtomicN(0, obj, 0, AtomicInt64, Op(0), two) }, ErrInvalid},
		{"op 99", func() error { return h.AtomicN(0, obj, 0, AtomicInt64, Op(99), two) }, ErrInvalid},
		{"noop", func() error { return h.AtomicN(0, obj, 0, AtomicInt64, OpNoOp, two) }, ErrInvalid},
		{"N=0", func() error { return h.AtomicAddN(0, obj, 0, AtomicInt64, []uint64{}) }, ErrInvalid},
		{"nil vals", func() error { return h.AtomicN(0, obj, 0, AtomicInt32, OpSum, nil) }, ErrInvalid},
		{"offset 4 for int64", func() error { return h.AtomicAdd(0, obj, 4, AtomicInt64, 1) }, ErrInvalid},
		{"offset 2 for int32", func() error { return h.AtomicInc(0, obj, 2, AtomicInt32) }, ErrInvalid},
		{"misaligned object", func() error { return h.AtomicAddN(0, odd, 0, AtomicUint64, two) }, ErrInvalid},
		{"past the end", func() error { return h.AtomicAdd(0, obj, 16, AtomicInt64, 1) }, ErrOutOfRange},
		{"last element", func() error { return h.AtomicAdd(0, obj, 12, AtomicInt32, 1) }, nil},
		{"vector past the end", func() error { return h.AtomicAddN(0, obj, 8, AtomicInt64, two) }, ErrOutOfRange},
		{"negative offset", func() error { return h.AtomicOr(0, obj, -8, AtomicUint64, 1) }, ErrOutOfRange},
		{"huge offset", func() error { return h.AtomicSet(0, obj, math.MaxInt-3, AtomicUint32, 1) }, ErrOutOfRange},
		{"freed object", func() error { return h.AtomicAdd(0, gone, 0, AtomicInt64, 1) }, ErrInvalid},
		{"made-up object", func() error { return h.AtomicAdd(0, Sym{Off: 8, Size: 8}, 0, AtomicInt64, 1) }, ErrInvalid},
		{"rank -1", func() error { return h.AtomicAdd(-1, obj, 0, AtomicInt64, 1) }, ErrUnknownRank},
		{"rank n", func() error { return h.AtomicAddN(g.Size(), obj, 0, AtomicInt64, two) }, ErrUnknownRank},
	}
	for _, c := range cases {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return c.call()
		}()
		if c.want == nil {
			if err != nil {
				return fmt.Errorf("%s: %v, want success", c.name, err)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			return fmt.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		return err
	}
	// Only "last element" (a valid int32 add at 12, from every rank)
	// touched rank 0's memory.
	if g.Rank() == 0 {
		want := make([]byte, 16)
		binary.NativeEndian.PutUint32(want[12:], uint32(g.Size()))
		if got := h.Local(obj); !slices.Equal(got, want) {
			return fmt.Errorf("object after the failed calls: %v, want %v", got, want)
		}
		if got := h.Local(odd); slices.ContainsFunc(got, func(b byte) bool { return b != 0 }) {
			return fmt.Errorf("misaligned object written: %v", got)
		}
	}
	if err := h.Free(ctx, pad); err != nil {
		return err
	}
	if err := h.Close(ctx); err != nil {
		return err
	}
	if err := h.AtomicAdd(0, obj, 0, AtomicInt64, 1); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("add on a closed heap: %v, want ErrClosed", err)
	}
	return nil
}
