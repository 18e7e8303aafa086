package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestWindowModel runs the same random sequences of every kind of window
// operation on every kind of window — direct stores, libfabric shm and
// tcp;ofi_rxm, Create windows over Go memory — and checks each result,
// and every region at the end, against a plain byte-array model: where a
// window kind computes an address or a layout differently from the others
// it shows here.
func TestWindowModel(t *testing.T) {
	kinds := []windowKind{kindDirect, netKind("shm", false), netKind("tcp;ofi_rxm", false),
		netKind("shm", true), netKind("tcp;ofi_rxm", true)}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return modelScenario(ctx, g, 150, k.create, k.opts...)
	})
}

// modelSlice is the bytes of each target's region that one origin owns:
// origin o writes only [o·modelSlice, (o+1)·modelSlice) of every region,
// so its model of them is exact.
const modelSlice = 512

// modelScenario: ops random operations of this rank, each on a random
// target's slice of this rank and completed (Flush) before the next, then
// a Fence and a check of every region against the models of its origins.
func modelScenario(ctx context.Context, g Group, ops int, create bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	size := n * modelSlice
	w, err := newWindow(ctx, g, size, create, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	model := make([][]byte, n) // model[t]: this rank's slice of target t's region
	for t := range model {
		model[t] = make([]byte, modelSlice)
	}
	r := rand.New(rand.NewPCG(uint64(me), 11))
	base := me * modelSlice
	for i := range ops {
		t := r.IntN(n)
		m := model[t]
		if err := modelOp(ctx, w, r, t, base, m); err != nil {
			return fmt.Errorf("operation %d on rank %d: %w", i, t, err)
		}
		if err := w.Flush(ctx, t); err != nil {
			return err
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	flat := make([]byte, 0, size)
	for _, m := range model {
		flat = append(flat, m...)
	}
	all, err := g.Allgather(ctx, flat)
	if err != nil {
		return err
	}
	region := w.Bytes()
	for o := range n {
		got := region[o*modelSlice : (o+1)*modelSlice]
		want := all[o][me*modelSlice : (me+1)*modelSlice]
		if !bytes.Equal(got, want) {
			at := 0
			for got[at] == want[at] {
				at++
			}
			return fmt.Errorf("rank %d's region, rank %d's slice: byte %d is %d, the model says %d", me, o, at, got[at], want[at])
		}
	}
	return w.Fence(ctx)
}

// modelOp issues one random operation to target t at slice base, applies
// it to m, the model of that slice, and checks what it returns.
func modelOp(ctx context.Context, w *Window, r *rand.Rand, t, base int, m []byte) error {
	le := binary.LittleEndian
	words := modelSlice / 8
	switch op := r.IntN(9); op {
	case 0: // Put
		off, k := r.IntN(modelSlice), r.IntN(65)
		k = min(k, modelSlice-off)
		data := make([]byte, k)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		copy(m[off:], data)
		return w.Put(t, base+off, data)
	case 1: // Get
		off := r.IntN(modelSlice)
		k := min(r.IntN(65), modelSlice-off)
		dst := make([]byte, k)
		if err := w.Get(t, base+off, dst); err != nil {
			return err
		}
		if err := w.Flush(ctx, t); err != nil {
			return err
		}
		if !bytes.Equal(dst, m[off:off+k]) {
			return fmt.Errorf("Get of [%d, %d): %v, model %v", off, off+k, dst, m[off:off+k])
		}
	case 2, 3: // PutTyped, GetTyped: int32 vectors on one side, contiguous or not on the other
		count, bl := 1+r.IntN(6), 1+r.IntN(3)
		stride := bl + r.IntN(4)
		span := 4 * ((count-1)*stride + bl)
		off := 4 * r.IntN((modelSlice-span)/4+1)
		vt, err := ddt.Vector(count, bl, stride, ddt.Int32)
		if err != nil {
			return err
		}
		if err := vt.Commit(); err != nil {
			return err
		}
		elems := count * bl
		var blocks []int // target byte offsets of the elements, in order
		for c := range count {
			for b := range bl {
				blocks = append(blocks, off+4*(c*stride+b))
			}
		}
		if op == 2 {
			origin := make([]byte, 4*elems)
			for i := range origin {
				origin[i] = byte(r.Uint32())
			}
			for i, at := range blocks {
				copy(m[at:at+4], origin[4*i:])
			}
			return w.PutTyped(t, base+off, origin, elems, ddt.Int32, 1, vt)
		}
		got := make([]byte, 4*elems)
		if err := w.GetTyped(ctx, t, base+off, got, elems, ddt.Int32, 1, vt); err != nil {
			return err
		}
		for i, at := range blocks {
			if !bytes.Equal(got[4*i:4*i+4], m[at:at+4]) {
				return fmt.Errorf("GetTyped element %d (byte %d): %v, model %v", i, at, got[4*i:4*i+4], m[at:at+4])
			}
		}
	case 4: // Accumulate (sum of int64)
		at, k := r.IntN(words), 1+r.IntN(4)
		k = min(k, words-at)
		data := make([]byte, 8*k)
		for i := range k {
			v := r.Int64N(1000) - 500
			le.PutUint64(data[8*i:], uint64(v))
			le.PutUint64(m[8*(at+i):], le.Uint64(m[8*(at+i):])+uint64(v))
		}
		return w.Accumulate(t, base+8*at, AtomicInt64, OpSum, data)
	case 5: // AccumulateTyped: every other int64 of the target
		k := 1 + r.IntN(5)
		at := r.IntN(words - 2*k + 2)
		vt, err := ddt.Vector(k, 1, 2, ddt.Int64)
		if err != nil {
			return err
		}
		if err := vt.Commit(); err != nil {
			return err
		}
		data := make([]byte, 8*k)
		for i := range k {
			v := r.Uint64N(1000)
			le.PutUint64(data[8*i:], v)
			w8 := 8 * (at + 2*i)
			le.PutUint64(m[w8:], le.Uint64(m[w8:])+v)
		}
		return w.AccumulateTyped(t, base+8*at, AtomicInt64, OpSum, data, k, ddt.Int64, 1, vt)
	case 6: // GetAccumulate (max of uint64)
		at, k := r.IntN(words), 1+r.IntN(40)
		k = min(k, words-at)
		data, prev := make([]byte, 8*k), make([]byte, 8*k)
		want := append([]byte(nil), m[8*at:8*(at+k)]...)
		for i := range k {
			v := r.Uint64N(1 << 20)
			le.PutUint64(data[8*i:], v)
			le.PutUint64(m[8*(at+i):], max(le.Uint64(m[8*(at+i):]), v))
		}
		if err := w.GetAccumulate(t, base+8*at, AtomicUint64, OpMax, data, prev); err != nil {
			return err
		}
		if !bytes.Equal(prev, want) {
			return fmt.Errorf("GetAccumulate of %d words at %d returned %v, model %v", k, at, prev, want)
		}
	case 7: // FetchAndOp (bxor)
		at, v := r.IntN(words), r.Uint64()
		old, err := w.FetchAndOp(t, base+8*at, AtomicUint64, OpBxor, v)
		if err != nil {
			return err
		}
		if want := le.Uint64(m[8*at:]); old != want {
			return fmt.Errorf("FetchAndOp at word %d returned %#x, model %#x", at, old, want)
		}
		le.PutUint64(m[8*at:], old^v)
	case 8: // CompareAndSwap, matching half the time
		at := r.IntN(words)
		cur := le.Uint64(m[8*at:])
		cmp := cur
		if r.IntN(2) == 0 {
			cmp++
		}
		swap := r.Uint64()
		old, err := w.CompareAndSwap(t, base+8*at, AtomicUint64, cmp, swap)
		if err != nil {
			return err
		}
		if old != cur {
			return fmt.Errorf("CompareAndSwap at word %d returned %#x, model %#x", at, old, cur)
		}
		if cmp == cur {
			le.PutUint64(m[8*at:], swap)
		}
	}
	return nil
}
