package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

const testTimeout = 60 * time.Second

func TestDirectPutSignalStress(t *testing.T) {
	const iters = 300
	const payload = 64 << 10
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return putSignalStress(ctx, g, iters, payload, WithSharedMemory(ShmOnly))
			})
		})
	}
}

// putSignalStress: every rank sends iters messages to its right neighbour;
// each message fills the payload with a value derived from the iteration,
// and the receiver checks every byte as soon as the signal shows. Two
// buffers alternate, and an acknowledgement signal flows back so that a
// buffer is only rewritten once the receiver has checked it.
func putSignalStress(ctx context.Context, g Group, iters, payload int, opts ...Option) error {
	return putSignalStressSizes(ctx, g, iters, []int{payload}, opts...)
}

// putSignalStressSizes is putSignalStress with message i of sizes[i %
// len(sizes)] bytes, so that one run mixes the libfabric path's injected
// small PutSignals with tracked and delivery-ordered large ones.
func putSignalStressSizes(ctx context.Context, g Group, iters int, sizes []int, opts ...Option) error {
	return putSignalStressSizesHook(ctx, g, iters, sizes, nil, opts...)
}

// putSignalStressSizesHook is putSignalStressSizes that calls hook (when
// not nil) on the window before the first message.
func putSignalStressSizesHook(ctx context.Context, g Group, iters int, sizes []int, hook func(*Window), opts ...Option) (err error) {
	payload := 0
	for _, s := range sizes {
		payload = max(payload, s)
	}
	me, n := g.Rank(), g.Size()
	right, left := (me+1)%n, (me+n-1)%n
	const sig, ack = 0, 8
	data := 64
	w, err := Allocate(ctx, g, data+2*payload, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	if hook != nil {
		hook(w)
	}
	// Two source buffers: like MPI_Put's, a PutSignal source must not be
	// rewritten until the put is complete, which the acknowledgement of
	// the message two iterations back proves.
	bufs := [2][]byte{make([]byte, payload), make([]byte, payload)}
	for it := 1; it <= iters; it++ {
		slot := it % 2
		buf := bufs[slot][:sizes[it%len(sizes)]]
		if it > 2 { // the receiver must have checked the slot's previous message
			if _, err := w.WaitSignal(ctx, ack, CmpGE, uint64(it-2)); err != nil {
				return err
			}
		}
		fill(buf, me, it)
		if err := w.PutSignal(right, data+slot*payload, buf, sig, uint64(it)); err != nil {
			return err
		}
		if _, err := w.WaitSignal(ctx, sig, CmpGE, uint64(it)); err != nil {
			return err
		}
		got := w.Bytes()[data+slot*payload:][:len(buf)]
		if err := checkFill(got, left, it); err != nil {
			return fmt.Errorf("iteration %d: signal visible before data: %w", it, err)
		}
		if err := w.Signal(left, ack, uint64(it)); err != nil {
			return err
		}
	}
	return w.Fence(ctx)
}

func fill(b []byte, rank, it int) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(rank)<<48|uint64(it)<<24|uint64(i))
	}
}

func checkFill(b []byte, rank, it int) error {
	for i := 0; i+8 <= len(b); i += 8 {
		want := uint64(rank)<<48 | uint64(it)<<24 | uint64(i)
		if v := binary.LittleEndian.Uint64(b[i:]); v != want {
			return fmt.Errorf("byte %d: got %#x want %#x", i, v, want)
		}
	}
	return nil
}

func TestDirectAtomicsContention(t *testing.T) {
	runRanks(t, 4, func(ctx context.Context, g Group) error {
		return atomicsContention(ctx, g, 2000, WithSharedMemory(ShmOnly))
	})
}

// atomicsContention: every rank hammers rank 0's words with FetchAndOp,
// CompareAndSwap and Accumulate, then checks the totals.
func atomicsContention(ctx context.Context, g Group, iters int, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	const longAt, longN, longReps = 80, 300, 4
	w, err := Allocate(ctx, g, longAt+8*longN, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	// words: 0 fetch-add counter, 8 CAS counter, 16 accumulate sum,
	// 24 max, 32 min (int64), 40 bxor, 48 float64 sum, 56 uint32 sum,
	// 64 and 72 a pair of counters GetAccumulate adds 1 and 2 to; from
	// longAt longN counters a long GetAccumulate adds j+1 to (several
	// fetching atomics in flight on the libfabric path)
	if me == 0 {
		binary.LittleEndian.PutUint64(w.Bytes()[32:], uint64(math.MaxInt64))
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	seen := make(map[uint64]bool, iters)
	for i := 0; i < iters; i++ {
		old, err := w.FetchAndOp(0, 0, AtomicUint64, OpSum, 1)
		if err != nil {
			return err
		}
		if seen[old] {
			return fmt.Errorf("fetch-add returned %d twice", old)
		}
		seen[old] = true
		for {
			cur, err := w.FetchAndOp(0, 8, AtomicUint64, OpNoOp, 0)
			if err != nil {
				return err
			}
			prev, err := w.CompareAndSwap(0, 8, AtomicUint64, cur, cur+1)
			if err != nil {
				return err
			}
			if prev == cur {
				break
			}
		}
	}
	v := int64(me + 1)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	for _, o := range []struct {
		off int
		op  Op
	}{{16, OpSum}, {24, OpMax}, {32, OpMin}, {40, OpBxor}} {
		if err := w.Accumulate(0, o.off, AtomicInt64, o.op, b[:]); err != nil {
			return err
		}
	}
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(0.5))
	if err := w.Accumulate(0, 48, AtomicFloat64, OpSum, b[:]); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(b[:], 3)
	if err := w.Accumulate(0, 56, AtomicUint32, OpSum, b[:4]); err != nil {
		return err
	}
	// GetAccumulate: every fetched first counter is unique, as fetch-add's.
	var add, old [16]byte
	binary.LittleEndian.PutUint64(add[:], 1)
	binary.LittleEndian.PutUint64(add[8:], 2)
	gets := max(iters/10, 1)
	for range gets {
		if err := w.GetAccumulate(0, 64, AtomicUint64, OpSum, add[:], old[:]); err != nil {
			return err
		}
		if o := binary.LittleEndian.Uint64(old[:]); seen[1<<40|o] {
			return fmt.Errorf("GetAccumulate fetched %d twice", o)
		} else {
			seen[1<<40|o] = true
		}
	}
	inc, prev := make([]byte, 8*longN), make([]byte, 8*longN)
	for j := range longN {
		binary.LittleEndian.PutUint64(inc[8*j:], uint64(j+1))
	}
	last := make([]uint64, longN)
	for rep := range longReps {
		if err := w.GetAccumulate(0, longAt, AtomicUint64, OpSum, inc, prev); err != nil {
			return err
		}
		for j := range longN {
			// Element j only ever grows by j+1: what it held is a
			// multiple of j+1, and more than this rank saw the last time.
			p := binary.LittleEndian.Uint64(prev[8*j:])
			if p%uint64(j+1) != 0 || p >= uint64(n*longReps*(j+1)) || rep > 0 && p <= last[j] {
				return fmt.Errorf("long GetAccumulate, repetition %d: element %d held %d (last %d)", rep, j, p, last[j])
			}
			last[j] = p
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if me == 0 {
		m := w.Bytes()
		u := func(o int) uint64 { return binary.LittleEndian.Uint64(m[o:]) }
		for j := range longN {
			if got := u(longAt + 8*j); got != uint64(n*longReps*(j+1)) {
				return fmt.Errorf("long GetAccumulate: element %d is %d, want %d", j, got, n*longReps*(j+1))
			}
		}
		wantX := uint64(0)
		for r := 1; r <= n; r++ {
			wantX ^= uint64(r)
		}
		checks := []struct {
			name      string
			got, want uint64
		}{
			{"fetch-add", u(0), uint64(n * iters)},
			{"cas", u(8), uint64(n * iters)},
			{"sum", u(16), uint64(n * (n + 1) / 2)},
			{"max", u(24), uint64(n)},
			{"min", u(32), 1},
			{"bxor", u(40), wantX},
			{"fsum", u(48), math.Float64bits(0.5 * float64(n))},
			{"u32sum", uint64(binary.LittleEndian.Uint32(m[56:])), uint64(3 * n)},
			{"get-accumulate first", u(64), uint64(n * max(iters/10, 1))},
			{"get-accumulate second", u(72), uint64(2 * n * max(iters/10, 1))},
		}
		for _, c := range checks {
			if c.got != c.want {
				return fmt.Errorf("%s: got %d want %d", c.name, c.got, c.want)
			}
		}
		// OpNoOp reads the pair, OpReplace swaps it.
		var got, swap [16]byte
		binary.LittleEndian.PutUint64(swap[:], 7)
		binary.LittleEndian.PutUint64(swap[8:], 8)
		for _, op := range []Op{OpNoOp, OpReplace} {
			if err := w.GetAccumulate(0, 64, AtomicUint64, op, swap[:], got[:]); err != nil {
				return err
			}
			if a, b := binary.LittleEndian.Uint64(got[:]), binary.LittleEndian.Uint64(got[8:]); a != u(64) && op == OpNoOp || b != 2*a {
				return fmt.Errorf("GetAccumulate %v read %d, %d", op, a, b)
			}
		}
		if u(64) != 7 || u(72) != 8 {
			return fmt.Errorf("GetAccumulate replace left %d, %d", u(64), u(72))
		}
	}
	return w.Fence(ctx)
}

func TestWindowErrors(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return windowErrors(ctx, g, WithSharedMemory(ShmOnly))
	})
}

func windowErrors(ctx context.Context, g Group, opts ...Option) error {
	w, err := Allocate(ctx, g, 128, opts...)
	if err != nil {
		return err
	}
	b := make([]byte, 16)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"put past end", w.Put(1, 120, b), ErrOutOfRange},
		{"put negative", w.Put(1, -1, b), ErrOutOfRange},
		{"get past end", w.Get(0, 128, b[:1]), ErrOutOfRange},
		{"unknown rank", w.Put(g.Size(), 0, b), ErrUnknownRank},
		{"negative rank", w.Get(-1, 0, b), ErrUnknownRank},
		{"misaligned signal", w.PutSignal(1, 16, b, 4, 1), ErrInvalid},
		{"signal overlaps data", w.PutSignal(1, 16, b, 24, 1), ErrInvalid},
		{"signal out of range", w.PutSignal(1, 16, b, 128, 1), ErrOutOfRange},
		{"bitwise float", w.Accumulate(1, 0, AtomicFloat64, OpBor, b[:8]), ErrInvalid},
		{"partial element", w.Accumulate(1, 0, AtomicInt64, OpSum, b[:7]), ErrInvalid},
		{"misaligned atomic", w.Accumulate(1, 4, AtomicInt64, OpSum, b[:8]), ErrInvalid},
		{"bad type", w.Accumulate(1, 0, AtomicType(99), OpSum, b[:8]), ErrInvalid},
		{"get-accumulate result of another length", w.GetAccumulate(1, 0, AtomicInt64, OpSum, b[:8], b[:4]), ErrInvalid},
		{"get-accumulate bitwise float", w.GetAccumulate(1, 0, AtomicFloat64, OpBxor, b[:8], make([]byte, 8)), ErrInvalid},
		{"get-accumulate misaligned", w.GetAccumulate(1, 4, AtomicInt64, OpNoOp, b[:8], make([]byte, 8)), ErrInvalid},
		{"flush unknown", w.Flush(ctx, 7), ErrUnknownRank},
	}
	_, err = w.FetchAndOp(1, 128, AtomicUint64, OpSum, 1)
	cases = append(cases, struct {
		name string
		err  error
		want error
	}{"fetch out of range", err, ErrOutOfRange})
	_, _, err = w.TestSignal(0, Cmp(0), 1)
	cases = append(cases, struct {
		name string
		err  error
		want error
	}{"bad cmp", err, ErrInvalid})
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := w.Free(ctx); err != nil {
		return err
	}
	if err := w.Free(ctx); err != nil {
		return fmt.Errorf("second Free: %v", err)
	}
	if err := w.Put(1, 0, b); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("put on freed window: %v", err)
	}
	if _, err := w.WaitSignal(ctx, 0, CmpEQ, 1); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("wait on freed window: %v", err)
	}
	if _, err := Allocate(ctx, g, -1, opts...); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("negative size: %v", err)
	}
	return nil
}

func TestDirectPutGet(t *testing.T) {
	runRanks(t, 3, func(ctx context.Context, g Group) (err error) {
		me, n := g.Rank(), g.Size()
		w, err := Allocate(ctx, g, 1000+me, WithSharedMemory(ShmOnly))
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		for r := 0; r < n; r++ {
			if w.Len(r) != 1000+r || !w.Direct(r) {
				return fmt.Errorf("rank %d: len %d direct %v", r, w.Len(r), w.Direct(r))
			}
		}
		msg := bytes.Repeat([]byte{byte(me + 1)}, 100)
		if err := w.Put((me+1)%n, me*100, msg); err != nil {
			return err
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		prev := (me + n - 1) % n
		got := make([]byte, 100)
		if err := w.Get(me, prev*100, got); err != nil {
			return err
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(prev + 1)}, 100)) {
			return fmt.Errorf("local region after put: %v", got[:8])
		}
		if err := w.Get((me+1)%n, me*100, got); err != nil {
			return err
		}
		if !bytes.Equal(got, msg) {
			return fmt.Errorf("get of own put: %v", got[:8])
		}
		return nil
	})
}
