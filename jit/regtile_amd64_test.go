package jit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/cpucache"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/testenv"
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
// of the element loop, several band/tile settings, random chunks
// and misaligned buffers (differential) and whole aligned packs and unpacks
// (the non-temporal path).
func TestRegTileTranspose(t *testing.T) {
	t.Parallel()
	needNative(t)
	if !hostFeatures.AVX512 {
		testenv.Skip(t, "avx512", "register-tiled transposes need AVX-512; this CPU has %v", hostFeatures)
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

	rnd := rand.New(rand.NewPCG(6, 6))
	// band, tile (pack), band, tile (unpack), NT threshold, then
	// the in-cache pack shape: span threshold, band, tile (the shapes
	// below span 20–200 KiB: threshold 0 never uses it, 1 MiB always),
	// then the non-temporal pack shape: band, tile
	for _, cfg := range [][10]int64{
		{8, 8, 32, 8, 1 << 62, 0, 16, 32, 32, 8},
		{4, 4, 4, 4, 0, 0, 16, 32, 4, 4},
		{16, 8, 8, 16, 0, 0, 16, 32, 12, 16},
		{8, 16, 32, 8, 0, 0, 16, 32, 32, 8},
		{12, 12, 20, 4, 1 << 62, 0, 16, 32, 32, 8},
		{8, 8, 32, 8, 1 << 62, 1 << 20, 16, 32, 32, 8}, // the defaults
		{8, 8, 32, 8, 0, 1 << 20, 16, 32, 32, 8},
		{8, 8, 32, 8, 1 << 62, 1 << 20, 32, 64, 32, 8},
		{8, 8, 32, 8, 0, 1 << 20, 12, 20, 64, 4},
	} {
		conf := defaultConfig.with(func(c *config) {
			c.regTileBand, c.regTileRows, c.regTileUBand, c.regTileURows, c.regTileNTMin, c.regTileUNTMin = cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[4]
			c.regTileSmall, c.regTileSBand, c.regTileSRows, c.regTileNTBand, c.regTileNTRows = cfg[5], cfg[6], cfg[7], cfg[8], cfg[9]
		})
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d-%dx%d-nt%v-small%d:%dx%d-nt%dx%d", s.name, cfg[0], cfg[1], cfg[2], cfg[3], cfg[4] == 0, cfg[5], cfg[6], cfg[7], cfg[8], cfg[9]), func(t *testing.T) {
				kk, err := compileWith(irOf(s.ty), hostFeatures, conf)
				if err != nil {
					t.Fatal(err)
				}
				k := kk.(*kernel)
				if reg := k.p.tr != nil && k.p.tr.reg && k.tpackNT != 0; reg != (k.p.tr != nil && k.p.tr.c0%4 == 0) || k.p.tr == nil {
					t.Fatalf("not register-tiled: %+v\n%s", k.p.tr, irOf(s.ty))
				}
				if tr := k.p.tr; tr.reg {
					wb, wt := cfg[0], cfg[1]
					if tr.c0*tr.s0 <= cfg[5] {
						wb, wt = cfg[6], cfg[7]
					}
					if wt = min(wt/4*4, tr.c0); tr.band != wb/4*4 || tr.tile != wt {
						t.Fatalf("pack shape %d × %d, want %d × %d", tr.band, tr.tile, wb/4*4, wt)
					}
					if nt := min(cfg[9]/4*4, tr.c0); tr.ntband != cfg[8]/4*4 || tr.nttile != nt {
						t.Fatalf("non-temporal pack shape %d × %d, want %d × %d", tr.ntband, tr.nttile, cfg[8]/4*4, nt)
					}
				}
				differential(t, rnd, s.ty, k, s.count)
				// whole pack and unpack, aligned buffers
				ir := irOf(s.ty)
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

// TestRegTileNTThresholds checks which calls take the non-temporal
// transpose code: a pack from regTileNTMin bytes (default twice the L2, so
// packed data that could not stay in the core's cache bypasses it), an
// unpack only from regTileUNTMin (default the LLC: unpacked data is computed
// on next), and that packs and unpacks through each entry give the
// interpreter's bytes.
func TestRegTileNTThresholds(t *testing.T) {
	t.Parallel()
	needNative(t)
	if !hostFeatures.AVX512 {
		testenv.Skip(t, "avx512", "register-tiled transposes need AVX-512; this CPU has %v", hostFeatures)
	}
	if want := 2 * cpucache.Size(2, 1<<20); defaultConfig.regTileNTMin != want && tune.JITRTNTMin == settings.Auto {
		t.Fatalf("default pack threshold %d, want twice the L2 (%d)", defaultConfig.regTileNTMin, want)
	}
	if want := cpucache.LastLevel(32 << 20); defaultConfig.regTileUNTMin != want && tune.JITRTUNTMin == settings.Auto {
		t.Fatalf("default unpack threshold %d, want the LLC size (%d)", defaultConfig.regTileUNTMin, want)
	}
	const n = 64
	ty := interpType(t, must(ddt.Resized(must(ddt.Vector(n, 1, n, ddt.Complex128)), 0, 16)))
	total := int64(n * n * 16)
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct{ nt, unt int64 }{{total, total + 1}, {total + 1, total}, {total, total}, {total + 1, total + 1}} {
		conf := defaultConfig.with(func(cf *config) { cf.regTileNTMin, cf.regTileUNTMin = c.nt, c.unt })
		kk, err := compileWith(irOf(ty), hostFeatures, conf)
		if err != nil {
			t.Fatal(err)
		}
		k := kk.(*kernel)
		if k.tpackNT == 0 || k.tunpackNT == 0 {
			t.Fatalf("no non-temporal entries (%#x, %#x) for a %d × %d complex transpose", k.tpackNT, k.tunpackNT, n, n)
		}
		if got, want := k.ntEntry(total, true) != 0, total >= c.nt; got != want {
			t.Fatalf("thresholds %+v: pack of %d bytes non-temporal %v, want %v", c, total, got, want)
		}
		if got, want := k.ntEntry(total, false) != 0, total >= c.unt; got != want {
			t.Fatalf("thresholds %+v: unpack of %d bytes non-temporal %v, want %v", c, total, got, want)
		}
		typed := aligned64(int(total))
		fill(rnd, typed)
		want := make([]byte, total)
		if _, err := ty.PackRange(want, typed, 0, n, 0); err != nil {
			t.Fatal(err)
		}
		got := aligned64(int(total))
		if _, err := k.Pack(got, typed, 0, n, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("thresholds %+v: pack differs from the interpreter", c)
		}
		fill(rnd, got)
		ta := aligned64(len(typed))
		copy(ta, typed)
		if _, err := ty.UnpackRange(ta, got, 0, n, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Unpack(typed, got, 0, n, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ta, typed) {
			t.Fatalf("thresholds %+v: unpack differs from the interpreter", c)
		}
	}
}
