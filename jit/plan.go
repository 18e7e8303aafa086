package jit

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// A plan is the machine-independent lowering of an IR: a chain of repetition
// levels (loops and index lists) around a body that is copied as straight-line
// code. One instance of the body is a "unit": Size/unit units per element, all
// of the same packed size, so a stream offset maps to (unit, offset in unit)
// by one division. Generated code only ever runs whole units; a unit cut by
// the start or end of a pack window is finished by the Go walker (walk), so
// resumption is byte-exact without any cost inside the loops.
type plan struct {
	cfg    *config // the code shape asked for
	ir     *ddtir.IR
	levels []level // innermost first; the element loop is implicit (outermost)
	body   *ddtir.Node
	blocks []blk   // the body flattened: offsets relative to the body origin
	unit   int64   // packed bytes per unit (body.Size)
	below  []int64 // below[j]: units per instance of levels[j]'s child... see unitsBelow
	upe    int64   // units per element
	tr     *transposePlan
	// bigBody: the body is a struct or block list too large to unroll; each
	// unit is packed part by part (seq.go) and blocks is nil.
	bigBody bool
}

// level is one repetition around the body: a loop (offs == nil) or an index
// list. The origin of child instance i is parent origin + disp + off(i).
type level struct {
	count  int64
	stride int64
	offs   []int64
	disp   int64
}

func (l *level) off(i int64) int64 {
	if l.offs != nil {
		return l.offs[i]
	}
	return i * l.stride
}

// deltas returns the per-step source increments of an index level: entry i
// moves from instance i to i+1, the last entry back to instance 0.
func (l *level) deltas() []int64 {
	d := make([]int64, l.count)
	for i := int64(0); i < l.count; i++ {
		if i+1 < l.count {
			d[i] = l.off(i+1) - l.off(i)
		} else {
			d[i] = l.off(0) - l.off(i)
		}
	}
	return d
}

// blk is one contiguous copy of the body: typed offset and length; the packed
// offset is the running sum of the previous lengths.
type blk struct{ off, len int64 }

// transposePlan describes cache-blocked code for a two-level nest whose inner
// stride is large and whose parent stride is small (a matrix transpose, FFT2's
// column pack): bands of `band` parent instances are copied tile by tile, `tile`
// inner rows at a time, so every cache line read is used `band` times before
// it is evicted.
type transposePlan struct {
	c0, s0   int64 // inner loop
	l        int64 // block length
	parent   int   // index of the parent level in plan.levels, or -1 for the element loop
	s1       int64 // parent stride
	band     int64 // parent instances per band
	tile     int64 // inner rows per tile
	bandSize int64 // packed bytes per band
	// reg: register-tiled code (AVX-512, 16-byte elements in adjacent
	// columns): 4×4 element quads are moved as four 64-byte loads, two rounds
	// of lane shuffles and four 64-byte stores.
	reg bool
	// unpack's band, tile and band size (equal to pack's unless register
	// tiled: unpack reads columns and writes rows, so wider bands suit it)
	uband, utile, ubandSize int64
	// the register-tiled pack with non-temporal stores (its stores bypass
	// the caches, so wide bands no longer cost write streams)
	ntband, nttile, ntbandSize int64
	// nband: the parent instances of the narrow bands (0: none), one
	// 64-byte line of a row (4 columns of 16 bytes when register tiled):
	// a pack or unpack window that does not hold a whole band of the
	// wide shape runs its whole columns through these, so that only the
	// columns the window cuts and fewer than nband whole ones take the
	// loop code, which walks one column down all rows at a time.
	nband int64
}

// dims returns the band (parent instances), tile (rows) and packed bytes per
// band of the pack or the unpack code, with non-temporal stores or not.
func (t *transposePlan) dims(pack, nt bool) (band, tile, bandSize int64) {
	switch {
	case pack && nt:
		return t.ntband, t.nttile, t.ntbandSize
	case pack:
		return t.band, t.tile, t.bandSize
	}
	return t.uband, t.utile, t.ubandSize
}

// narrowDims returns the band, tile and packed bytes per band of the
// narrow pack or unpack code (nband > 0).
func (t *transposePlan) narrowDims(pack bool) (band, tile, bandSize int64) {
	_, tile, _ = t.dims(pack, false)
	return t.nband, tile, t.nband * t.c0 * t.l
}

// setNarrow sets nband: one 64-byte line of parent instances, when that is
// at least 2 and narrower than the pack's and the unpack's wide bands.
func (t *transposePlan) setNarrow() {
	t.nband = 0
	nb := int64(64) / t.s1
	if t.reg {
		nb = 4
	}
	if nb >= 2 && nb < t.band && nb < t.uband && prod32(nb, t.c0, t.l) {
		t.nband = nb
	}
}

// maxLevels bounds the loop levels of a plan. The body limits are in
// config (maxBodyBlocks, indexBody, unrollLoop, unrollLoopSize).
const maxLevels = 8

func errDecline(format string, args ...any) error {
	return fmt.Errorf("jit: "+format+": %w", append(args, ddt.ErrNotCompiled)...)
}

func fits32(v int64) bool { return v >= -1<<31 && v < 1<<31 }

// Compile-time arithmetic on strides, counts and offsets goes through the
// overflow-checked helpers below: a product that wraps around int64 could
// otherwise pass fits32 and be encoded as a wrong 32-bit displacement.

// lin32 reports whether a×b + c, computed exactly, fits in an int32.
func lin32(a, b, c int64) bool {
	v, ok := checked.MulAdd(a, b, c)
	return ok && fits32(v)
}

// prod32 reports whether the product of vs, computed exactly, fits in an
// int32.
func prod32(vs ...int64) bool {
	p := int64(1)
	for _, v := range vs {
		var ok bool
		if p, ok = checked.Mul(p, v); !ok {
			return false
		}
	}
	return fits32(p)
}

// maxTreeNodes bounds the IR trees the compiler walks. ddt shares a
// sub-tree between parents (a struct of t and a loop over t), and the
// compiler's passes walk the IR as a tree, so a DAG of n nodes can be a tree
// of 2^n; such types are declined and run on the interpreter, whose work is
// proportional to the bytes moved.
const maxTreeNodes = 1 << 16

// checkTree declines an IR whose tree exceeds maxTreeNodes.
func checkTree(ir *ddtir.IR) error {
	if ir.Root != nil && !ddtir.TreeFits(ir.Root, maxTreeNodes) {
		return errDecline("IR tree of more than %d nodes", maxTreeNodes)
	}
	return nil
}

func newPlan(ir *ddtir.IR, cfg *config) (*plan, error) {
	if ir == nil || ir.Root == nil || ir.Size <= 0 {
		return nil, errDecline("empty type")
	}
	p := &plan{ir: ir, cfg: cfg}
	var outer []level // outermost first
	n := ir.Root
	for {
		switch {
		case (n.Op == ddtir.OpLoop || n.Op == ddtir.OpIndex) && !(n.Blocks <= min(cfg.unrollLoop, cfg.maxBodyBlocks) && n.Size <= cfg.unrollLoopSize) && !shortIndex(n, cfg):
			if len(outer) == maxLevels {
				return nil, errDecline("more than %d loop levels", maxLevels)
			}
			l := level{count: n.Count, stride: n.Stride, disp: n.Disp}
			if n.Op == ddtir.OpIndex {
				l.count = int64(len(n.Offsets))
				l.offs = n.Offsets
			}
			outer = append(outer, l)
			n = n.Child
			continue
		case n.Op == ddtir.OpBlocks && n.Blocks > cfg.maxBodyBlocks && equalLens(n.Lens):
			if len(outer) == maxLevels {
				return nil, errDecline("more than %d loop levels", maxLevels)
			}
			outer = append(outer, level{count: int64(len(n.Offsets)), offs: n.Offsets, disp: n.Disp})
			n = &ddtir.Node{Op: ddtir.OpBlock, Len: n.Lens[0], Size: n.Lens[0], Blocks: 1}
			continue
		}
		break
	}
	p.body = n
	if n.Blocks > cfg.maxBodyBlocks {
		if n.Op != ddtir.OpStruct && n.Op != ddtir.OpBlocks {
			return nil, errDecline("body of %d blocks", n.Blocks)
		}
		p.bigBody = true // compiled as a sequence of parts (seq.go)
	} else {
		p.blocks = flatten(n, 0, make([]blk, 0, n.Blocks))
	}
	for _, b := range p.blocks {
		if !fits32(b.off) || !fits32(b.off+b.len) {
			return nil, errDecline("offset %d beyond 2 GiB", b.off)
		}
	}
	p.unit = n.Size
	for i := len(outer) - 1; i >= 0; i-- {
		p.levels = append(p.levels, outer[i])
	}
	p.below = make([]int64, len(p.levels))
	u := int64(1)
	for j := range p.levels {
		p.below[j] = u
		u *= p.levels[j].count
	}
	p.upe = u
	if p.upe*p.unit != ir.Size {
		return nil, fmt.Errorf("jit: internal: %d units of %d bytes != size %d", p.upe, p.unit, ir.Size)
	}
	if !p.bigBody {
		p.tr = p.transpose()
	}
	return p, nil
}

// shortIndex reports whether n is an index list short enough to become the
// body: straight-line code with every offset a displacement, which needs no
// offset table load per block (≈ 1.8× faster than the table loop on
// 1000-entry lists of 4- and 8-byte blocks; beyond ~2000 entries the code
// no longer fits the instruction caches and the table loop is as fast).
func shortIndex(n *ddtir.Node, cfg *config) bool {
	if n.Op != ddtir.OpIndex || int64(len(n.Offsets)) > min(cfg.indexBody, cfg.maxBodyBlocks) ||
		n.Child.Op != ddtir.OpBlock || n.Child.Len > unrollUnitMax {
		return false
	}
	for _, o := range n.Offsets {
		if !fits32(n.Disp+o+n.Child.Disp) || !fits32(n.Disp+o+n.Child.Disp+n.Child.Len) {
			return false
		}
	}
	return true
}

func equalLens(l []int64) bool {
	for _, x := range l {
		if x != l[0] {
			return false
		}
	}
	return len(l) > 0
}

// flatten appends the blocks of one instance of n at origin o, merging blocks
// that continue each other.
func flatten(n *ddtir.Node, o int64, out []blk) []blk {
	o += n.Disp
	add := func(off, l int64) {
		if k := len(out) - 1; k >= 0 && out[k].off+out[k].len == off {
			out[k].len += l
			return
		}
		out = append(out, blk{off, l})
	}
	switch n.Op {
	case ddtir.OpBlock:
		add(o, n.Len)
	case ddtir.OpBlocks:
		for i, off := range n.Offsets {
			add(o+off, n.Lens[i])
		}
	case ddtir.OpLoop:
		for i := int64(0); i < n.Count; i++ {
			out = flatten(n.Child, o+i*n.Stride, out)
		}
	case ddtir.OpIndex:
		for _, off := range n.Offsets {
			out = flatten(n.Child, o+off, out)
		}
	case ddtir.OpStruct:
		for i, off := range n.Offsets {
			out = flatten(n.Children[i], o+off, out)
		}
	}
	return out
}

// Tight-loop unrolling: units of at most unrollUnitMax bytes (and at most
// two blocks) are copied unrollBy at a time, or absUnroll at a time through
// an absolute offset table (index lists: 8 measured ~15 % faster than 4 on
// 4-byte SPECFEM3D lists; on strided loops 8 was slower than 4).
var (
	unrollBy      = 4
	absUnroll     = 8
	unrollUnitMax = int64(64)
)

// config.pairMoves: in bodies, two 4-byte blocks that follow each other in
// the stream are moved as one 8-byte packed access (pack: two loads
// combined by shl/or into one store; unpack: one load split into two
// stores).

// pairPackBlocks: pack bodies of more blocks do not pair (see bodyAt).
const pairPackBlocks = 1024

// transposeMinStride is the inner stride that makes a nest
// transpose-shaped; the tile and band sizes are in config.
var transposeMinStride = int64(1024)

// Register-tiled transpose limits; the band and tile sizes (WEFT_TUNE's
// jitrt* knobs, docs/tuning.md) are in config.
var (
	regTileGroups = int64(4)  // column groups (4 columns each) unrolled per loop iteration
	regTileQuads  = int64(64) // at most this many 4×4 quads unrolled (rows/4 per column group)
)

// useRegTile switches t to register-tiled code when the CPU and the shape
// allow it: AVX-512, 16-byte blocks in adjacent columns (parent stride =
// block length, so four columns are one 64-byte vector), rows a multiple of 4.
func (t *transposePlan) useRegTile(f Features, cfg *config) {
	if t == nil || !cfg.regTileOn || !f.AVX512 || t.l != 16 || t.s1 != 16 || t.c0%4 != 0 {
		return
	}
	// Pack: while the rows a band walks stay in the L2 (FFT2 s and m), wide
	// bands of tall tiles measured ≈ 25 % faster than the 8 × 8 shape; beyond
	// it (FFT2 l, rows 8 KiB apart) the narrow shape is faster.
	pb, pt := cfg.regTileBand, cfg.regTileRows
	if rows, ok := checked.Mul(t.c0, t.s0); ok && rows <= cfg.regTileSmall {
		pb, pt = cfg.regTileSBand, cfg.regTileSRows
	}
	var d [3][3]int64
	for i, bt := range [3][2]int64{{pb, pt}, {cfg.regTileUBand, cfg.regTileURows}, {cfg.regTileNTBand, cfg.regTileNTRows}} {
		band := max(4, bt[0]/4*4)
		tile := min(max(4, bt[1]/4*4), t.c0)
		if tile/4 > regTileQuads {
			return
		}
		ahead, ok := checked.MulAdd(tile, 1, 4)
		if !ok || !prod32(t.s0, ahead) || !prod32(band, t.s1) || !prod32(band, t.c0, t.l) {
			return
		}
		d[i] = [3]int64{band, tile, band * t.c0 * t.l}
	}
	t.reg = true
	t.band, t.tile, t.bandSize = d[0][0], d[0][1], d[0][2]
	t.uband, t.utile, t.ubandSize = d[1][0], d[1][1], d[1][2]
	t.ntband, t.nttile, t.ntbandSize = d[2][0], d[2][1], d[2][2]
	t.setNarrow()
}

func (p *plan) transpose() *transposePlan {
	if len(p.levels) == 0 || len(p.blocks) != 1 || p.blocks[0].len > 64 || p.blocks[0].off != 0 {
		return nil
	}
	in := p.levels[0]
	if in.offs != nil || in.stride < transposeMinStride || in.count < 2 {
		return nil
	}
	t := &transposePlan{c0: in.count, s0: in.stride, l: p.blocks[0].len, parent: -1, s1: p.ir.Extent}
	if len(p.levels) > 1 {
		par := p.levels[1]
		if par.offs != nil {
			return nil
		}
		t.parent, t.s1 = 1, par.stride
	}
	// The parent must step through memory in small strides, and the rows of
	// the transpose must not overlap (Unpack writes in a different order).
	if t.s1 < t.l || t.s1 > 256 || t.s1*4 > t.s0 {
		return nil
	}
	t.band = max(2, p.cfg.transposeBandBytes/t.s1)
	t.tile = min(p.cfg.transposeTile, t.c0)
	if !prod32(t.s0, t.tile) || !prod32(t.band, t.s1) || !prod32(t.band, t.c0, t.l) || !prod32(t.c0, t.l) {
		return nil
	}
	t.bandSize = t.band * t.c0 * t.l
	t.uband, t.utile, t.ubandSize = t.band, t.tile, t.bandSize
	t.ntband, t.nttile, t.ntbandSize = t.band, t.tile, t.bandSize
	t.setNarrow()
	return t
}
