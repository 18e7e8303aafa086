package jit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
)

// aligned64 returns n bytes starting at a 64-byte aligned address.
func aligned64(n int) []byte {
	b := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	return b[off : off+n]
}

// TestRegTileTranspose checks the register-tiled transpose (4×4 quads of
// 16-byte elements, optional prefetch and non-temporal stores) against the
// interpreter: square and rectangular matrices, a parent loop level instead
// of the element loop, several band/tile/prefetch settings, random chunks
// and misaligned buffers (differential) and whole aligned packs and unpacks
// (the non-temporal path).
func TestRegTileTranspose(t *testing.T) {
	needNative(t)
	if !hostFeatures.AVX512 {
		t.Skip("register-tiled transposes need AVX-512; this CPU has", hostFeatures)
	}
	type shape struct {
		name  string
		ty    *ddt.Type
		count int
	}
	var shapes []shape
	// (transpose-shaped: rows at least 1 KiB apart, i.e. ≥ 64 columns)
	for _, rc := range [][2]int{{20, 64}, {24, 70}, {36, 72}, {64, 64}, {128, 100}, {32, 130}, {18, 64}} {
		rows, cols := rc[0], rc[1]
		c := must(ddt.Vector(rows, 1, cols, ddt.Complex128))
		shapes = append(shapes, shape{fmt.Sprintf("cols%dx%d", rows, cols), interpType(t, must(ddt.Resized(c, 0, 16))), cols})
	}
	// a parent loop level (hvector of columns), two elements
	c := must(ddt.Vector(64, 1, 120, ddt.Complex128))
	hv := must(ddt.HVector(40, 1, 16, c))
	shapes = append(shapes, shape{"parent64x40", interpType(t, must(ddt.Resized(hv, 0, 40*16))), 2})

	defer func(b, r, ub, ur, pf, nt, sm, sb, sr, nb, nr int64) {
		regTileBand, regTileRows, regTileUBand, regTileURows, regTilePF, regTileNTMin = b, r, ub, ur, pf, nt
		regTileSmall, regTileSBand, regTileSRows, regTileNTBand, regTileNTRows = sm, sb, sr, nb, nr
	}(regTileBand, regTileRows, regTileUBand, regTileURows, regTilePF, regTileNTMin, regTileSmall, regTileSBand, regTileSRows, regTileNTBand, regTileNTRows)
	rnd := rand.New(rand.NewPCG(6, 6))
	// band, tile (pack), band, tile (unpack), prefetch, NT threshold, then
	// the in-cache pack shape: span threshold, band, tile (the shapes
	// below span 20–200 KiB: threshold 0 never uses it, 1 MiB always),
	// then the non-temporal pack shape: band, tile
	for _, cfg := range [][11]int64{
		{8, 8, 32, 8, 0, 1 << 62, 0, 16, 32, 32, 8},
		{4, 4, 4, 4, 1, 0, 0, 16, 32, 4, 4},
		{16, 8, 8, 16, 2, 0, 0, 16, 32, 12, 16},
		{8, 16, 32, 8, 0, 0, 0, 16, 32, 32, 8},
		{12, 12, 20, 4, 1, 1 << 62, 0, 16, 32, 32, 8},
		{8, 8, 32, 8, 0, 1 << 62, 1 << 20, 16, 32, 32, 8}, // the defaults
		{8, 8, 32, 8, 0, 0, 1 << 20, 16, 32, 32, 8},
		{8, 8, 32, 8, 1, 1 << 62, 1 << 20, 32, 64, 32, 8},
		{8, 8, 32, 8, 0, 0, 1 << 20, 12, 20, 64, 4},
	} {
		regTileBand, regTileRows, regTileUBand, regTileURows, regTilePF, regTileNTMin = cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5]
		regTileSmall, regTileSBand, regTileSRows, regTileNTBand, regTileNTRows = cfg[6], cfg[7], cfg[8], cfg[9], cfg[10]
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d-%dx%d-pf%d-nt%v-small%d:%dx%d-nt%dx%d", s.name, cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5] == 0, cfg[6], cfg[7], cfg[8], cfg[9], cfg[10]), func(t *testing.T) {
				kk, err := compileIR(s.ty.IR(), hostFeatures)
				if err != nil {
					t.Fatal(err)
				}
				k := kk.(*kernel)
				if reg := k.p.tr != nil && k.p.tr.reg && k.tpackNT != 0; reg != (k.p.tr != nil && k.p.tr.c0%4 == 0) || k.p.tr == nil {
					t.Fatalf("not register-tiled: %+v\n%s", k.p.tr, s.ty.IR())
				}
				if tr := k.p.tr; tr.reg {
					wb, wt := cfg[0], cfg[1]
					if tr.c0*tr.s0 <= cfg[6] {
						wb, wt = cfg[7], cfg[8]
					}
					if wt = min(wt/4*4, tr.c0); tr.band != wb/4*4 || tr.tile != wt {
						t.Fatalf("pack shape %d × %d, want %d × %d", tr.band, tr.tile, wb/4*4, wt)
					}
					if nt := min(cfg[10]/4*4, tr.c0); tr.ntband != cfg[9]/4*4 || tr.nttile != nt {
						t.Fatalf("non-temporal pack shape %d × %d, want %d × %d", tr.ntband, tr.nttile, cfg[9]/4*4, nt)
					}
				}
				differential(t, rnd, s.ty, k, s.count)
				// whole pack and unpack, aligned buffers
				ir := s.ty.IR()
				base, tl := layout(ir, s.count)
				typed := aligned64(int(base + tl))
				fill(rnd, typed)
				total := int64(s.count) * ir.Size
				want := make([]byte, total)
				if _, err := s.ty.PackRange(want, typed, base, s.count, 0); err != nil {
					t.Fatal(err)
				}
				got := aligned64(int(total))
				if _, err := k.Pack(got, typed, base, s.count, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatal("aligned pack differs from the interpreter")
				}
				fill(rnd, got)
				ta := aligned64(len(typed))
				copy(ta, typed)
				if _, err := s.ty.UnpackRange(ta, got, base, s.count, 0); err != nil {
					t.Fatal(err)
				}
				if _, err := k.Unpack(typed, got, base, s.count, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ta, typed) {
					t.Fatal("aligned unpack differs from the interpreter")
				}
			})
		}
	}
}
