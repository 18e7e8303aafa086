package ddt_test

import (
	"fmt"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
)

// fft2Recv is the receive side of DDTBench's FFT2 all-to-all: b columns of b
// complex numbers each, rows m complex long.
func fft2Recv(tb testing.TB, m int) *Type {
	must := mustT(tb)
	b := m / 2
	cplx := must(Contiguous(2, Float64))
	col := must(Resized(must(Vector(b, 1, m, cplx)), 0, 16))
	return must(Contiguous(b, col))
}

// TestGridShape pins the walk of transposing unpacks: a loop over strided
// columns whose blocks share cache lines is moved in tiles of columns, row
// by row (the column walk scattered FFT2's rows 4 KiB apart and ran up to
// 11× slower than a hand loop); layouts where that does not pay, or where
// blocks could overlap, keep the column walk.
func TestGridShape(t *testing.T) {
	must := mustT(t)
	for _, m := range []int{128, 256, 768} {
		ty := fft2Recv(t, m)
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		root := IROf(ty).Root
		if got := GridTile(root.Child, root.Count, root.Stride); got != 8 {
			t.Errorf("fft2_recv m=%d: tile %d columns, want 8 (IR %s)", m, got, ty.DumpIR())
		}
	}
	fft := must(Resized(must(Vector(256, 1, 256, Complex128)), 0, 16))
	if err := fft.Commit(); err != nil {
		t.Fatal(err)
	}
	if ir := IROf(fft); GridTile(ir.Root, 256, ir.Extent) != 8 {
		t.Errorf("fft2 (count 256): no grid walk (IR %s)", fft.DumpIR())
	}
	for _, c := range []struct {
		name          string
		ty            *Type
		count, stride int64
	}{
		{"columns overlap", must(Vector(64, 2, 64, Float64)), 64, 8},
		{"rows close", must(Vector(64, 1, 16, Float64)), 16, 8},
		{"columns wider than the row", must(Vector(64, 1, 64, Float64)), 65, 8},
		{"blocks above a line", must(Vector(64, 9, 128, Float64)), 2, 72},
		{"columns in separate lines", must(Vector(64, 1, 1024, Float64)), 8, 128},
		{"one column", must(Vector(64, 1, 64, Float64)), 1, 8},
	} {
		if err := c.ty.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := GridTile(IROf(c.ty).Root, c.count, c.stride); got != 0 {
			t.Errorf("%s: tile %d, want the column walk (IR %s)", c.name, got, c.ty.DumpIR())
		}
	}
}

// TestGridAgainstReference checks grid walks (whole, chunked, resumed inside
// a column and inside a block) against the reference packer: block lengths
// with and without a fixed-size move, column counts that are not multiples
// of the tile, gaps between columns.
func TestGridAgainstReference(t *testing.T) {
	must := mustT(t)
	for _, m := range []int{34, 50} {
		t.Run(fmt.Sprint("fft2_recv", m), func(t *testing.T) {
			checkAgainstRef(t, fft2Recv(t, m), 2, []int{1, 7, 16, 100})
		})
	}
	for _, l := range []int{1, 4, 8, 12, 16, 24, 64} {
		for _, gap := range []int{0, 4} {
			for _, cols := range []int{3, 17} {
				rows := 5
				cs := l + gap
				rs := max(256, cols*cs)
				col := must(Resized(must(HVector(rows, l, int64(rs), Byte)), 0, int64(cs)))
				ty := must(Contiguous(cols, col))
				if err := ty.Commit(); err != nil {
					t.Fatal(err)
				}
				if root := IROf(ty).Root; cs <= 64 && GridTile(root.Child, root.Count, root.Stride) == 0 {
					t.Fatalf("l%d gap%d cols%d: no grid walk (IR %s)", l, gap, cols, ty.DumpIR())
				}
				t.Run(fmt.Sprintf("l%d-gap%d-cols%d", l, gap, cols), func(t *testing.T) {
					checkAgainstRef(t, ty, 2, []int{3, l + 1, 64})
				})
			}
		}
	}
}
