//go:build amd64

package jit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// gaps returns n increasing indices with gaps of 1 to 6 (some neighbours
// adjacent, so some blocks merge), shuffled when shuffle is set.
func gaps(r *rand.Rand, n int, shuffle bool) []int {
	idx := make([]int, n)
	x := 0
	for i := range idx {
		x += 1 + r.IntN(6)
		idx[i] = x
	}
	if shuffle {
		r.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	}
	return idx
}

// codeHas reports whether the generated code of p (both directions) holds
// the byte sequence want.
func codeHas(t *testing.T, p *plan, f Features, want []byte) (pack, unpack bool) {
	t.Helper()
	code, e, a, err := generate(p, f)
	defer asmPool.Put(a)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(code[e.pack:e.unpack], want), bytes.Contains(code[e.unpack:], want)
}

var (
	shlR9By32  = []byte{0x49, 0xc1, 0xe1, 0x20} // the pack half of a pair move
	shrRAXBy32 = []byte{0x48, 0xc1, 0xe8, 0x20} // the unpack half
)

// TestShortIndexBodies checks index lists unrolled into straight-line bodies
// (at most indexBody entries over one block of at most 64 bytes) and the
// table loop they replace (longer lists, larger blocks, indexBody = 0), with
// and without pair moves, on every vector width, against the interpreter.
func TestShortIndexBodies(t *testing.T) {
	t.Parallel()
	needNative(t)
	r := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{40, 1000, 1025} {
		for _, shuffle := range []bool{false, true} {
			idx := gaps(r, n, shuffle)
			for _, bl := range []int{1, 3, 4, 8, 12, 24, 64, 65} {
				ty := interpType(t, must(ddt.IndexedBlock(1, idx, must(ddt.Contiguous(bl, ddt.Byte)))))
				for _, ib := range []int64{1024, 0} {
					for _, pm := range []bool{true, false} {
						cfg := defaultConfig.with(func(c *config) { c.indexBody, c.pairMoves = ib, pm })
						name := fmt.Sprintf("n%d-shuf%v-bl%d-ib%d-pair%v", n, shuffle, bl, ib, pm)
						for _, isa := range []Features{hostFeatures, {AVX2: hostFeatures.AVX2, ERMS: true}, {}} {
							k, err := compileWith(irOf(ty), isa, cfg)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							kk := k.(*kernel)
							body := len(kk.p.levels) == 0
							if want := int64(n) <= ib && bl <= 64; body != want {
								t.Fatalf("%s: straight-line body %v, want %v", name, body, want)
							}
							if body && bl == 4 && isa == hostFeatures {
								// gaps of 1 to 6: many consecutive
								// 4-byte blocks stay unmerged
								pk, _ := codeHas(t, kk.p, isa, shlR9By32)
								_, up := codeHas(t, kk.p, isa, shrRAXBy32)
								if pk != pm || up != pm {
									t.Fatalf("%s: pair moves in pack %v, unpack %v, want %v", name, pk, up, pm)
								}
							}
							differential(t, r, ty, k, 2)
						}
					}
				}
			}
		}
	}
}

// TestShortIndexOffsets: an index list whose offsets do not fit in 32-bit
// displacements stays a table loop (the plan is checked; nothing runs).
func TestShortIndexOffsets(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig.with(func(c *config) { c.indexBody = 1024 })
	blk := &ddtir.Node{Op: ddtir.OpBlock, Len: 4, Size: 4, Blocks: 1}
	for _, c := range []struct {
		offs []int64
		body bool
	}{
		{[]int64{0, 8, 1 << 20}, true},
		{[]int64{0, 8, 1 << 31}, false},
		{[]int64{0, 8, 1<<31 - 2}, false}, // the block's end is beyond
		{[]int64{-1 << 31, 0, 8}, true},
	} {
		n := &ddtir.Node{Op: ddtir.OpIndex, Offsets: c.offs, Child: blk, Size: 4 * int64(len(c.offs)), Blocks: int64(len(c.offs))}
		if got := shortIndex(n, cfg); got != c.body {
			t.Errorf("offsets %v: short index %v, want %v", c.offs, got, c.body)
		}
	}
}

// TestPairMoves checks the 8-byte pair moves of 4-byte blocks: a struct
// body of more than pairPackBlocks blocks (unpack pairs, pack does not), an
// absolute-table index loop over units of two 4-byte blocks (typed operands
// [R13+R12+off]), and 4-byte blocks mixed with other sizes, against the
// interpreter.
func TestPairMoves(t *testing.T) {
	t.Parallel()
	needNative(t)
	r := rand.New(rand.NewPCG(9, 9))
	idx := gaps(r, 500, false)
	var bl []int
	var ds []int64
	var ts []*ddt.Type
	off := int64(0)
	for _, e := range []*ddt.Type{ddt.Int32, ddt.Int32, must(ddt.Contiguous(3, ddt.Float64)), ddt.Int32} {
		bl, ds = append(bl, 1), append(ds, off)
		ts = append(ts, must(ddt.IndexedBlock(1, idx, e)))
		off += int64(idx[len(idx)-1]+1) * e.Extent()
	}
	big := interpType(t, must(ddt.Struct(bl, ds, ts))) // 2000 blocks before merging, > pairPackBlocks after
	two := must(ddt.Struct([]int{1, 1}, []int64{0, 8}, []*ddt.Type{ddt.Int32, ddt.Int32}))
	abs := interpType(t, must(ddt.IndexedBlock(1, gaps(r, 3000, true), must(ddt.Resized(two, 0, 12)))))
	mixed := interpType(t, must(ddt.Indexed([]int{1, 1, 2, 1, 1, 3, 1}, []int{0, 3, 6, 10, 12, 15, 20}, ddt.Int32)))
	for _, c := range []struct {
		name         string
		ty           *ddt.Type
		pack, unpack bool // pairs expected
	}{
		{"struct2000", big, false, true},
		{"abs", abs, true, true},
		{"mixed", mixed, true, true},
	} {
		for _, pm := range []bool{true, false} {
			cfg := defaultConfig.with(func(c *config) { c.pairMoves = pm })
			k, err := compileWith(irOf(c.ty), hostFeatures, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if kk, ok := k.(*kernel); ok {
				pk, _ := codeHas(t, kk.p, hostFeatures, shlR9By32)
				_, up := codeHas(t, kk.p, hostFeatures, shrRAXBy32)
				if pk != (pm && c.pack) || up != (pm && c.unpack) {
					t.Fatalf("%s pair %v: pack pairs %v, unpack pairs %v\n%s", c.name, pm, pk, up, irOf(c.ty))
				}
			} else {
				t.Fatalf("%s: not a loop kernel (%T)", c.name, k)
			}
			for range 3 {
				differential(t, r, c.ty, k, 2)
			}
		}
	}
}
