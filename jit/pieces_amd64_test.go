package jit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestTransposePieces checks FFT2's receive layout (the columns of each
// process's block of a row-distributed matrix, transposed) packed and
// unpacked in pieces against the interpreter: pieces that start and end
// inside columns and hold fewer columns than a wide band, a narrow band
// and some wide bands, register-tiled and not, and random pieces
// (differential). The pieces run the wide, narrow and loop code in turn.
func TestTransposePieces(t *testing.T) {
	t.Parallel()
	needNative(t)
	const m, procs = 128, 2
	b := m / procs
	cplx := must(ddt.Contiguous(2, ddt.Float64))
	col := must(ddt.Resized(must(ddt.Vector(b, 1, m, cplx)), 0, 16))
	ty := interpType(t, must(ddt.Contiguous(b, col)))
	colBytes := int64(b * 16) // packed bytes per column
	rnd := rand.New(rand.NewPCG(20, 3))
	for _, rt := range []bool{true, false} {
		conf := defaultConfig.with(func(c *config) { c.regTileOn = rt })
		kk, err := compileWith(irOf(ty), hostFeatures, conf)
		if err != nil {
			t.Fatal(err)
		}
		k := kk.(*kernel)
		tr := k.p.tr
		if tr == nil || tr.nband == 0 || k.tpackN == 0 || k.tunpackN == 0 {
			t.Fatalf("register tiles %v: no narrow transpose code: %+v", rt, tr)
		}
		ir := irOf(ty)
		base, tl := layout(ir, procs)
		total := int64(procs) * ir.Size
		for _, piece := range []int64{colBytes/2 + 16, 3*colBytes + 48, 5*colBytes + colBytes/4, 13*colBytes + 80, 42*colBytes + 2*colBytes/3, 4096} {
			t.Run(fmt.Sprintf("rt%v/piece%d", rt, piece), func(t *testing.T) {
				typed := make([]byte, base+tl)
				fill(rnd, typed)
				want := make([]byte, total)
				if _, err := ty.PackRange(want, typed, base, procs, 0); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, total)
				for from := int64(0); from < total; from += piece {
					end := min(total, from+piece)
					if n, err := k.Pack(got[from:end], typed, base, procs, from); err != nil || int64(n) != end-from {
						t.Fatalf("pack at %d: %d %v", from, n, err)
					}
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("pack in pieces of %d differs from the interpreter", piece)
				}
				fill(rnd, got)
				ta := append([]byte(nil), typed...)
				if _, err := ty.UnpackRange(ta, got, base, procs, 0); err != nil {
					t.Fatal(err)
				}
				for from := int64(0); from < total; from += piece {
					end := min(total, from+piece)
					if n, err := k.Unpack(typed, got[from:end], base, procs, from); err != nil || int64(n) != end-from {
						t.Fatalf("unpack at %d: %d %v", from, n, err)
					}
				}
				if !bytes.Equal(ta, typed) {
					t.Fatalf("unpack in pieces of %d differs from the interpreter", piece)
				}
			})
		}
		for i := 0; i < 4; i++ {
			differential(t, rnd, ty, k, procs)
		}
	}
}
