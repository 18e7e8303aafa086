package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/testenv"
)

// typedScenario: each rank puts a strided column (vector type) of its
// array into the next rank's window as a differently strided layout, gets
// it back with the types swapped, and checks both; then the error paths.
func typedScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	right := (me + 1) % n
	left := (me + n - 1) % n
	// origin: 6 blocks of 2 int64 every 5 int64; target: 4 blocks of 3 every 4.
	ot, err := ddt.Vector(6, 2, 5, ddt.Int64)
	if err != nil {
		return err
	}
	tt, err := ddt.Vector(4, 3, 4, ddt.Int64)
	if err != nil {
		return err
	}
	for _, t := range []*ddt.Type{ot, tt} {
		if err := t.Commit(); err != nil {
			return err
		}
	}
	w, err := Allocate(ctx, g, 8*40, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	origin := make([]byte, 8*30)
	for i := 0; i < 30; i++ {
		binary.LittleEndian.PutUint64(origin[8*i:], uint64(me*1000+i))
	}
	const off = 16
	if err := w.PutTyped(right, off, origin, 1, ot, 1, tt); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	// What left sent: its origin elements in vector order.
	var want []uint64
	for b := 0; b < 6; b++ {
		for j := 0; j < 2; j++ {
			want = append(want, uint64(left*1000+b*5+j))
		}
	}
	k := 0
	for b := 0; b < 4; b++ {
		for j := 0; j < 3; j++ {
			got := binary.LittleEndian.Uint64(w.Bytes()[off+8*(b*4+j):])
			if got != want[k] {
				return fmt.Errorf("typed put: target element %d = %d, want %d", b*4+j, got, want[k])
			}
			k++
		}
	}
	// Read right's copy back into a fresh origin layout.
	back := make([]byte, len(origin))
	if err := w.GetTyped(ctx, right, off, back, 1, ot, 1, tt); err != nil {
		return err
	}
	for b := 0; b < 6; b++ {
		for j := 0; j < 2; j++ {
			i := b*5 + j
			if got := binary.LittleEndian.Uint64(back[8*i:]); got != uint64(me*1000+i) {
				return fmt.Errorf("typed get: origin element %d = %d, want %d", i, got, me*1000+i)
			}
		}
	}
	if err := w.PutTyped(right, 8*40-64, origin, 1, ot, 1, tt); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("typed put past the end: %v", err)
	}
	if err := w.PutTyped(right, 0, origin, 2, ot, 1, tt); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("typed put with mismatched sizes: %v", err)
	}
	// A target type whose count × extent overflows int64: the span check
	// must reject it before anything is written (it once let a direct
	// store write past the target's window).
	huge, err := ddt.Resized(ddt.Byte, 0, 1<<62)
	if err != nil {
		return err
	}
	if err := huge.Commit(); err != nil {
		return err
	}
	before := append([]byte(nil), w.Bytes()...)
	if err := w.PutTyped(right, 0, origin, 5, ddt.Byte, 5, huge); !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("typed put of an overflowing span: %v", err)
	}
	if err := w.GetTyped(ctx, right, 0, origin, 5, ddt.Byte, 5, huge); !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("typed get of an overflowing span: %v", err)
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if !bytes.Equal(w.Bytes(), before) {
		return fmt.Errorf("a rejected typed put changed a window")
	}
	// A target layout whose entries overlap carries more bytes than any
	// window holds: refused before a packed buffer of that size is made
	// (2^50 bytes here; allocating it would end the process).
	same, err := ddt.IndexedBlock(1, make([]int, 1<<10), ddt.Byte)
	if err != nil {
		return err
	}
	if err := same.Commit(); err != nil {
		return err
	}
	if err := w.PutTyped(right, 0, origin, 1<<50, ddt.Byte, 1<<40, same); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("typed put of a 2^50-byte overlapping layout: %v", err)
	}
	if err := w.GetTyped(ctx, right, 0, origin, 1<<50, ddt.Byte, 1<<40, same); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("typed get of a 2^50-byte overlapping layout: %v", err)
	}
	raw, _ := ddt.Vector(2, 1, 2, ddt.Int64)
	if err := w.PutTyped(right, 0, origin, 1, raw, 2, ddt.Int64); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("typed put with uncommitted type: %v", err)
	}
	return w.Fence(ctx)
}

func TestTypedDirect(t *testing.T) {
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return typedScenario(ctx, g, WithSharedMemory(ShmOnly))
	})
}

func TestTypedNet(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return typedScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
	})
}

// largeTypedScenario: typed puts and gets of 240 KiB (several of the
// direct path's 64 KiB pieces) between layouts of every kind: strided to
// differently strided, contiguous to strided and strided to contiguous;
// each checked element by element after a fence.
func largeTypedScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	right, left := (me+1)%n, (me+n-1)%n
	const elems = 30 << 10 // int64s moved per transfer
	strided := func(blk, stride int) (*ddt.Type, error) {
		t, err := ddt.Vector(elems/blk, blk, stride, ddt.Int64)
		if err != nil {
			return nil, err
		}
		return t, t.Commit()
	}
	ot, err := strided(3, 5) // origin: 3 of every 5
	if err != nil {
		return err
	}
	tt, err := strided(5, 7) // target: 5 of every 7
	if err != nil {
		return err
	}
	contig, err := ddt.Contiguous(elems, ddt.Int64)
	if err != nil {
		return err
	}
	if err := contig.Commit(); err != nil {
		return err
	}
	w, err := Allocate(ctx, g, 8*(elems/5*7+8), opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	origin := make([]byte, 8*(elems/3*5))
	for i := 0; i < len(origin)/8; i++ {
		binary.LittleEndian.PutUint64(origin[8*i:], uint64(me<<32|i))
	}
	// Large blocks on both sides: the libfabric path moves them by iovec
	// RMA straight from and to the origin.
	otL, err := strided(10240, 10300) // 80 KiB blocks (above zcblock)
	if err != nil {
		return err
	}
	ttL, err := strided(15360, 15400)
	if err != nil {
		return err
	}
	oidx := func(blk, stride int) func(k int) int {
		return func(k int) int { return k/blk*stride + k%blk }
	}
	region := oidx(5, 7) // k-th target element's index
	for _, c := range []struct {
		name   string
		ot, tt *ddt.Type
		oi, ti func(k int) int
	}{{"strided→strided", ot, tt, oidx(3, 5), region}, {"strided→contiguous", ot, contig, oidx(3, 5), nil},
		{"large blocks", otL, ttL, oidx(10240, 10300), oidx(15360, 15400)}} {
		// stream[k] is the k-th origin element of rank r's layout.
		stream := func(r, k int) uint64 { return uint64(r<<32 | c.oi(k)) }
		check := func(what string, get func(k int) uint64, from int) error {
			for k := 0; k < elems; k++ {
				if got, want := get(k), stream(from, k); got != want {
					return fmt.Errorf("%s: element %d = %#x, want %#x", what, k, got, want)
				}
			}
			return nil
		}
		if err := w.PutTyped(right, 8, origin, 1, c.ot, 1, c.tt); err != nil {
			return fmt.Errorf("%s put: %w", c.name, err)
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		local := w.Bytes()
		idx := c.ti
		if c.tt == contig {
			idx = func(k int) int { return k }
		}
		if err := check(c.name+" put", func(k int) uint64 { return binary.LittleEndian.Uint64(local[8+8*idx(k):]) }, left); err != nil {
			return err
		}
		// Get it back into a contiguous buffer and into the strided origin layout.
		flat := make([]byte, 8*elems)
		if err := w.GetTyped(ctx, right, 8, flat, 1, contig, 1, c.tt); err != nil {
			return fmt.Errorf("%s get: %w", c.name, err)
		}
		if err := check(c.name+" get into contiguous", func(k int) uint64 { return binary.LittleEndian.Uint64(flat[8*k:]) }, me); err != nil {
			return err
		}
		back := make([]byte, len(origin))
		if err := w.GetTyped(ctx, right, 8, back, 1, c.ot, 1, c.tt); err != nil {
			return fmt.Errorf("%s get strided: %w", c.name, err)
		}
		if err := check(c.name+" get into strided", func(k int) uint64 { return binary.LittleEndian.Uint64(back[8*c.oi(k):]) }, me); err != nil {
			return err
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
	}
	return nil
}

func TestTypedLargeDirect(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return largeTypedScenario(ctx, g, WithSharedMemory(ShmOnly))
	})
}

func TestTypedLargeNet(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return largeTypedScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
	})
}

// TestTypedDirectNoAllocs: a small typed put and get between direct-store
// ranks allocate nothing: whether a side is one block is told from its
// type's description, not from Flatten's refusal (which built an error
// each call, 0.4 µs against a put of 50–70 ns).
func TestTypedDirectNoAllocs(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		right := 1 - g.Rank()
		ot, err := ddt.Vector(6, 2, 5, ddt.Int64)
		if err != nil {
			return err
		}
		tt, err := ddt.Contiguous(12, ddt.Int64)
		if err != nil {
			return err
		}
		for _, ty := range []*ddt.Type{ot, tt} {
			if err := ty.Commit(); err != nil {
				return err
			}
		}
		w, err := Allocate(ctx, g, 8*64, WithSharedMemory(ShmOnly))
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		origin := make([]byte, 8*30)
		var ferr error
		round := func() {
			if err := w.PutTyped(right, 0, origin, 1, ot, 1, tt); err != nil {
				ferr = err
			}
			if err := w.GetTyped(ctx, right, 8*16, origin, 1, ot, 1, tt); err != nil {
				ferr = err
			}
		}
		round()
		if n := testing.AllocsPerRun(100, round); n != 0 && !testenv.Race {
			return fmt.Errorf("%.1f allocations per typed put and get", n)
		}
		if ferr != nil {
			return ferr
		}
		return w.Fence(ctx)
	})
}

// netTypedCase is a typed transfer shape of the libfabric path's tests
// and benchmarks: each takes one of its three ways.
type netTypedCase struct {
	name   string
	origin func() (*ddt.Type, error)
	target func() (*ddt.Type, error)
	span   int // origin bytes
}

var netTypedCases = []netTypedCase{
	// a small vector: packed into one chunk, one write or read
	{"small", func() (*ddt.Type, error) { return ddt.Vector(6, 2, 5, ddt.Int64) },
		func() (*ddt.Type, error) { return ddt.Contiguous(12, ddt.Int64) }, 8 * 30},
	// 1 MiB of 8-byte blocks: sixteen chunks
	{"chunks-1MiB", func() (*ddt.Type, error) { return ddt.Vector(1<<17, 1, 2, ddt.Int64) },
		func() (*ddt.Type, error) { return ddt.Contiguous(1<<17, ddt.Int64) }, 16 << 17},
	// 1 MiB in 128 KiB blocks: iovec RMA from the origin's own memory
	{"iovec-1MiB", func() (*ddt.Type, error) { return ddt.Vector(8, 1<<14, 20000, ddt.Int64) },
		func() (*ddt.Type, error) { return ddt.Contiguous(8<<14, ddt.Int64) }, 8 * 20000 * 8},
	// a contiguous origin into 16 target blocks of 8 KiB
	{"target-blocks", func() (*ddt.Type, error) { return ddt.Contiguous(1<<14, ddt.Int64) },
		func() (*ddt.Type, error) { return ddt.Vector(16, 1024, 1100, ddt.Int64) }, 8 << 14},
}

func (c netTypedCase) types() (ot, tt *ddt.Type, err error) {
	if ot, err = c.origin(); err == nil {
		if tt, err = c.target(); err == nil {
			if err = ot.Commit(); err == nil {
				err = tt.Commit()
			}
		}
	}
	return ot, tt, err
}

// TestTypedNetNoAllocs: a repeated PutTyped + Flush and GetTyped on the
// libfabric path allocate nothing, whichever way they take (the chunks,
// iovec RMA from the origin's blocks, many target blocks): the block
// lists, the chunk queue and the registration handles are kept by the
// window. Rank 1 drives progress in a Fence meanwhile (shm's RMA takes
// the target's).
func TestTypedNetNoAllocs(t *testing.T) {
	requireProvider(t, "shm")
	for _, c := range netTypedCases {
		t.Run(c.name, func(t *testing.T) {
			ot, tt, err := c.types()
			if err != nil {
				t.Fatal(err)
			}
			runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
				w, err := Allocate(ctx, g, 2<<20, providerCase{"shm", OrderAuto}.opts()...)
				if err != nil {
					return err
				}
				defer cleanup(ctx, &err, w.Free)
				if g.Rank() == 1 {
					return w.Fence(ctx)
				}
				defer func() { err = errors.Join(err, w.Fence(ctx)) }()
				origin := make([]byte, c.span)
				var ferr error
				round := func() {
					ferr = errors.Join(ferr, w.PutTyped(1, 0, origin, 1, ot, 1, tt), w.Flush(ctx, 1),
						w.GetTyped(ctx, 1, 0, origin, 1, ot, 1, tt))
				}
				round()
				n := testing.AllocsPerRun(20, round)
				if ferr != nil {
					return ferr
				}
				if n != 0 && !testenv.Race {
					return fmt.Errorf("%.1f allocations per PutTyped, Flush and GetTyped", n)
				}
				return nil
			})
		})
	}
}

// accumulateTypedScenario: every rank adds a strided column of int64 into
// a strided layout of rank 0's window (16 elements, eager-sized) and a
// 10 000-element column into a contiguous range (packed in several
// pieces); after a Fence rank 0 holds the sums, and every byte outside
// the layouts is untouched. Bad arguments apply nothing.
func accumulateTypedScenario(ctx context.Context, g Group, opts ...Option) (err error) {
	me, p := g.Rank(), g.Size()
	const small, big = 16, 10000
	w, err := Allocate(ctx, g, 8*(3*small+big+8), opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	mk := func(t *ddt.Type, err error) (*ddt.Type, error) {
		if err != nil {
			return nil, err
		}
		return t, t.Commit()
	}
	ocol, err := mk(ddt.Vector(small, 1, 2, ddt.Int64))
	if err != nil {
		return err
	}
	tcol, err := mk(ddt.Vector(small, 1, 3, ddt.Int64))
	if err != nil {
		return err
	}
	obig, err := mk(ddt.Vector(big, 1, 2, ddt.Int64))
	if err != nil {
		return err
	}
	tbig, err := mk(ddt.Contiguous(big, ddt.Int64))
	if err != nil {
		return err
	}
	origin := make([]int64, 2*big)
	for i := range origin {
		origin[i] = int64((me+1)*100000 + i)
	}
	ob := unsafe.Slice((*byte)(unsafe.Pointer(&origin[0])), 8*len(origin))
	const bigAt = 8 * (3*small + 8)
	if err := w.AccumulateTyped(0, 8, AtomicInt64, OpSum, ob, 1, ocol, 1, tcol); err != nil {
		return err
	}
	if err := w.AccumulateTyped(0, bigAt, AtomicInt64, OpSum, ob, 1, obig, 1, tbig); err != nil {
		return err
	}
	// Bad arguments: nothing applied.
	bytes4, err := mk(ddt.Vector(4, 4, 8, ddt.Byte))
	if err != nil {
		return err
	}
	for name, err := range map[string]error{
		"no-op":            w.AccumulateTyped(0, 8, AtomicInt64, OpNoOp, ob, 1, ocol, 1, tcol),
		"sizes differ":     w.AccumulateTyped(0, 8, AtomicInt64, OpSum, ob, 1, ocol, 2, tcol),
		"4-byte blocks":    w.AccumulateTyped(0, 8, AtomicInt64, OpSum, ob, 16, ddt.Byte, 1, bytes4),
		"origin too short": w.AccumulateTyped(0, 8, AtomicInt64, OpSum, ob[:8*2*small-16], 1, ocol, 1, tcol),
	} {
		if !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("AccumulateTyped with %s: %v, want ErrInvalid", name, err)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if me != 0 {
		return nil
	}
	got, err := View[int64](w)
	if err != nil {
		return err
	}
	sum := func(i int) int64 { // Σ over ranks of origin element i
		var s int64
		for r := range p {
			s += int64((r+1)*100000 + i)
		}
		return s
	}
	for i := range 3*small + 8 {
		want := int64(0)
		if i >= 1 && (i-1)%3 == 0 && (i-1)/3 < small {
			want = sum(2 * ((i - 1) / 3))
		}
		if got[i] != want {
			return fmt.Errorf("strided layout: element %d = %d, want %d", i, got[i], want)
		}
	}
	for i := range big {
		if want := sum(2 * i); got[bigAt/8+i] != want {
			return fmt.Errorf("large accumulate: element %d = %d, want %d", i, got[bigAt/8+i], want)
		}
	}
	return nil
}

func TestAccumulateTyped(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		runRanks(t, 3, func(ctx context.Context, g Group) error { return accumulateTypedScenario(ctx, g) })
	})
	t.Run("libfabric", func(t *testing.T) {
		requireProvider(t, "shm")
		runRanks(t, 3, func(ctx context.Context, g Group) error {
			return accumulateTypedScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
		})
	})
}
