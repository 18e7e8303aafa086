package jit

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestOverflowingSpanCompiled: count × extent overflowing int64 must be
// rejected before a compiled kernel (JIT on) or the auto policy's Go walker
// (JIT auto) runs: both once wrote past a 1-byte buffer or panicked.
func TestOverflowingSpanCompiled(t *testing.T) {
	needNative(t)
	for _, ext := range []int64{1<<62 + 16, 1 << 62, -(1 << 62), math.MaxInt64, 1 << 61} {
		for _, mode := range []ddt.JITMode{ddt.JITOn, ddt.JITAuto} {
			ty := must(ddt.Resized(ddt.Byte, 0, ext))
			if err := ty.SetJIT(mode); err != nil {
				t.Fatal(err)
			}
			if err := ty.Commit(); err != nil {
				t.Fatalf("extent %d mode %v: %v", ext, mode, err)
			}
			if mode == ddt.JITOn && !ty.Compiled() || mode == ddt.JITAuto && !ty.JITPending() {
				t.Fatalf("extent %d mode %v: no compiled or pending kernel", ext, mode)
			}
			const guard = 4096
			all := make([]byte, 2*guard+1)
			typed := all[guard : guard+1 : guard+1]
			src := bytes.Repeat([]byte{0xee}, 64)
			for _, count := range []int{2, 3, 4, 5, 8, 64} {
				n, err := ty.Unpack(typed, src, count)
				if err == nil || n != 0 || !errors.Is(err, ddt.ErrOverflow) && !errors.Is(err, ddt.ErrBounds) {
					t.Errorf("extent %d mode %v count %d: Unpack = %d, %v", ext, mode, count, n, err)
				}
				n, err = ty.Pack(src, typed, count)
				if err == nil || n != 0 {
					t.Errorf("extent %d mode %v count %d: Pack = %d, %v", ext, mode, count, n, err)
				}
			}
			for i, b := range all {
				if b != 0 && i != guard {
					t.Fatalf("extent %d mode %v: byte %d outside the 1-byte buffer written", ext, mode, i-guard)
				}
			}
			if n, err := ty.Unpack(typed, src, 1); n != 1 || err != nil || typed[0] != 0xee {
				t.Fatalf("extent %d mode %v: one element: %d, %v", ext, mode, n, err)
			}
		}
	}
}

// TestUnrollFitsExact: the 4× unrolled strided loop needs k×stride + offset
// in 32 bits, computed exactly: 4 × (2^62+16) wraps to 64 in int64 and must
// not pass.
func TestUnrollFitsExact(t *testing.T) {
	blocks := []blk{{0, 1}}
	for _, c := range []struct {
		stride int64
		want   bool
	}{{16, true}, {1 << 28, true}, {1 << 29, false}, {1<<62 + 16, false}, {1 << 62, false}, {-(1 << 62), false}, {math.MinInt64, false}} {
		if got := unrollFits(4, c.stride, blocks, 1); got != c.want {
			t.Errorf("unrollFits(4, %d) = %v, want %v", c.stride, got, c.want)
		}
	}
	if prod32(1<<61, 8) || prod32(4, 1<<62, 4) || !prod32(1<<10, 1<<20) {
		t.Error("prod32 does not compute exactly")
	}
}

// TestSharedSubtreesDeclined: an IR whose nodes are shared by several
// parents (a struct of t and a loop over t, nested 30 deep: 60 nodes, a tree
// of 2^30) commits at once and runs on the interpreter instead of being
// walked as a tree by the compiler.
func TestSharedSubtreesDeclined(t *testing.T) {
	needNative(t)
	ty := ddt.Int16
	for range 30 {
		two := must(ddt.Contiguous(2, ty))
		ty = must(ddt.Struct([]int{1, 1}, []int64{0, 2 * ty.Extent()}, []*ddt.Type{ty, two}))
	}
	auto := must(ddt.Dup(ty))
	if err := auto.SetJIT(ddt.JITAuto); err != nil {
		t.Fatal(err)
	}
	if err := auto.Commit(); err != nil || auto.Compiled() {
		t.Fatalf("auto: %v, compiled %v", err, auto.Compiled())
	}
	on := must(ddt.Dup(ty))
	if err := on.SetJIT(ddt.JITOn); err != nil {
		t.Fatal(err)
	}
	if err := on.Commit(); !errors.Is(err, ddt.ErrNotCompiled) {
		t.Fatalf("on: %v, want ErrNotCompiled", err)
	}
	if _, _, err := compileFresh(irOf(auto)); !errors.Is(err, ddt.ErrNotCompiled) {
		t.Fatalf("compileFresh: %v, want ErrNotCompiled", err)
	}
}
