package jit

import (
	"sync"
	"unsafe"

	x86 "github.com/weft-hpc/weft/jit/internal/amd64"
)

// callArgs is the argument block generated code reads through BX. The
// offsets are baked into the generated code; TestCallArgsLayout asserts them
// with unsafe.Offsetof.
type callArgs struct {
	typed  uintptr // origin of the first unit (typed side)
	packed uintptr // packed-stream pointer
	n      int64   // units (or transpose bands) to copy, ≥ 1
	ctr0   int64   // iterations left in the innermost level, current one included
	pos0   int64   // index of the current entry of an innermost index level
	lv     [maxLevelsConst]levelState
}

type levelState struct{ ctr, pos int64 }

const (
	maxLevelsConst = 8
	offTyped       = 0
	offPacked      = 8
	offN           = 16
	offCtr0        = 24
	offPos0        = 32
	offLv          = 40
	sizeLevelState = 16
)

var _ [unsafe.Sizeof(callArgs{}) - (offLv + maxLevelsConst*sizeLevelState)]struct{}

// Register use in generated code. Never touched: SP, BP (frame pointer),
// R14 (g), R15, X15.
const (
	rArgs = x86.RBX
	rT    = x86.RSI // typed pointer (origin of the current unit)
	rP    = x86.RDI // packed pointer
	rCtr  = x86.RCX // iterations left in the innermost level
	rM    = x86.RDX // iterations of the current tight loop
	rN    = x86.R8  // units left in this call
	rPos  = x86.R10 // innermost index position
	rTab  = x86.R11 // innermost index delta table
)

type gen struct {
	a       *x86.Asm
	cfg     *config
	f       Features
	pack    bool
	usedVec bool
	tmp     [2]x86.Reg
	ti, vi  int
	usedNT  bool
	tIdx    x86.Reg // when not NoReg, typed addresses are [tb + tIdx + off]
	tables  *[]table
	byLevel map[int]table // delta tables shared by the pack and unpack code
	// narrow: transpose code of the narrow band shape (transposePlan.nband)
	narrow bool
}

// dims returns the band, tile and band bytes of the transpose code g
// emits (nt: the non-temporal shape).
func (g *gen) dims(t *transposePlan, nt bool) (band, tile, bandSize int64) {
	if g.narrow {
		return t.narrowDims(g.pack)
	}
	return t.dims(g.pack, nt)
}

type table struct {
	l    x86.Label
	data []int64
	w    int // entry width: 4 (int32) or 8
}

// levelTable returns the delta table of level j, 32-bit when every entry
// fits, emitted once per blob.
func (g *gen) levelTable(p *plan, j int) table {
	if t, ok := g.byLevel[j]; ok {
		return t
	}
	data := p.levels[j].deltas()
	t := table{l: g.a.NewLabel(), data: data, w: 4}
	for _, v := range data {
		if !fits32(v) {
			t.w = 8
			break
		}
	}
	*g.tables = append(*g.tables, t)
	g.byLevel[j] = t
	return t
}

// addEntry adds entry (index + k) of table t to rT. idx holds the index;
// RAX is clobbered for 32-bit tables.
func (g *gen) addEntry(t table, base, idx x86.Reg, k int64) {
	if t.w == 4 {
		g.a.LoadSX32(x86.RAX, x86.MI(base, idx, 4, int32(4*k)))
		g.a.OpRR(x86.ADD, rT, x86.RAX)
		return
	}
	g.a.OpRM(x86.ADD, rT, x86.MI(base, idx, 8, int32(8*k)))
}

func (g *gen) gpr() x86.Reg { g.ti ^= 1; return g.tmp[g.ti] }

func (g *gen) vec() x86.VReg { g.vi = (g.vi + 1) & 7; return x86.VReg(g.vi) }

// tmem returns the typed operand [tb+to] (or [tb+tIdx+to]).
func (g *gen) tmem(tb x86.Reg, to int64) x86.Mem {
	if g.tIdx != x86.NoReg {
		return x86.MI(tb, g.tIdx, 1, int32(to))
	}
	return x86.M(tb, int32(to))
}

// mvPair4 moves two 4-byte blocks, typed [tb+to1] and [tb+to2], that are
// consecutive in the packed stream at [pb+po], with one 8-byte packed
// access: pack loads both, merges them (shl, or) and stores once; unpack
// loads once and stores the low and the high half.
func (g *gen) mvPair4(tb x86.Reg, to1, to2 int64, pb x86.Reg, po int64) {
	a := g.a
	r0, r1 := g.tmp[0], g.tmp[1]
	p := x86.M(pb, int32(po))
	if g.pack {
		a.Load(4, r0, g.tmem(tb, to1)) // zero-extends
		a.Load(4, r1, g.tmem(tb, to2))
		a.Shl(r1, 32)
		a.OpRR(x86.OR, r0, r1)
		a.Store(8, p, r0)
		return
	}
	a.Load(8, r0, p)
	a.Store(4, g.tmem(tb, to1), r0)
	a.Shr(r0, 32)
	a.Store(4, g.tmem(tb, to2), r0)
}

// mv copies w bytes between typed [tb+to] and packed [pb+po] in the
// direction of g.pack.
func (g *gen) mv(w int, tb x86.Reg, to int64, pb x86.Reg, po int64) {
	src, dst := g.tmem(tb, to), x86.M(pb, int32(po))
	if !g.pack {
		src, dst = dst, src
	}
	if w <= 8 {
		r := g.gpr()
		g.a.Load(w, r, src)
		g.a.Store(w, dst, r)
		return
	}
	v := g.vec()
	if w > 16 {
		g.usedVec = true
	}
	g.a.VLoad(w, v, src)
	g.a.VStore(w, dst, v)
}

func (g *gen) vwidth() int64 {
	switch {
	case g.f.AVX512:
		return 64
	case g.f.AVX2:
		return 32
	}
	return 16
}

// small copies l bytes with at most two (overlapping) moves of the widest
// width not above l, after full-width moves while l is at least twice that.
func (g *gen) small(tb x86.Reg, to int64, pb x86.Reg, po int64, l int64) {
	for l > 0 {
		w := int64(1)
		for _, c := range []int64{64, 32, 16, 8, 4, 2} {
			if c <= l && (c <= 8 || c <= g.vwidth()) {
				w = c
				break
			}
		}
		switch {
		case l == w:
			g.mv(int(w), tb, to, pb, po)
			return
		case l < 2*w && l-w <= 8 && (l-w)&(l-w-1) == 0:
			// 12 = 8 + 4, 24 = 16 + 8: no byte written twice
			g.mv(int(w), tb, to, pb, po)
			g.mv(int(l-w), tb, to+w, pb, po+w)
			return
		case l < 2*w:
			g.mv(int(w), tb, to, pb, po)
			g.mv(int(w), tb, to+l-w, pb, po+l-w)
			return
		}
		g.mv(int(w), tb, to, pb, po)
		to, po, l = to+w, po+w, l-w
	}
}

// copyBlock emits the copy of one block of l bytes.
func (g *gen) copyBlock(tb x86.Reg, to int64, pb x86.Reg, po int64, l int64) {
	w := g.vwidth()
	switch {
	case l <= g.cfg.unrollMax || l < 4*w:
		for l > 2*w {
			g.mv(int(w), tb, to, pb, po)
			to, po, l = to+w, po+w, l-w
		}
		g.small(tb, to, pb, po, l)
	case l >= g.cfg.ntMin && l >= 4*w && w >= 16:
		g.ntCopy(tb, to, pb, po, l)
	case l >= g.cfg.repMin && g.f.ERMS:
		g.rep(tb, to, pb, po, l)
	default:
		g.vloop(tb, to, pb, po, l)
	}
}

// rep emits rep movsb for a large block, saving the registers it needs.
// Only valid inside the regular loop code (tb = RSI, pb = RDI).
func (g *gen) rep(tb x86.Reg, to int64, pb x86.Reg, po int64, l int64) {
	a := g.a
	a.MovRR(x86.RAX, x86.RSI)
	a.MovRR(x86.R9, x86.RDI)
	a.MovRR(x86.R13, x86.RCX)
	if g.pack {
		a.Lea(x86.RSI, x86.M(x86.RAX, int32(to)))
		a.Lea(x86.RDI, x86.M(x86.R9, int32(po)))
	} else {
		a.Lea(x86.RDI, x86.M(x86.RAX, int32(to)))
		a.Lea(x86.RSI, x86.M(x86.R9, int32(po)))
	}
	a.MovImm(x86.RCX, l)
	a.RepMovsb()
	a.MovRR(x86.RSI, x86.RAX)
	a.MovRR(x86.RDI, x86.R9)
	a.MovRR(x86.RCX, x86.R13)
}

// vloop emits a loop of 4 vector moves per iteration and an overlapping tail.
func (g *gen) vloop(tb x86.Reg, to int64, pb x86.Reg, po int64, l int64) {
	a := g.a
	w := g.vwidth()
	step := 4 * w
	iters := l / step
	a.Lea(x86.R9, x86.M(tb, int32(to)))
	a.Lea(x86.R13, x86.M(pb, int32(po)))
	a.MovImm(x86.R12, iters)
	top := a.NewLabel()
	a.Align(16)
	a.Bind(top)
	for k := int64(0); k < 4; k++ {
		g.mv(int(w), x86.R9, k*w, x86.R13, k*w)
	}
	a.OpRI(x86.ADD, x86.R9, int32(step))
	a.OpRI(x86.ADD, x86.R13, int32(step))
	a.Dec(x86.R12)
	a.Jcc(x86.CondNE, top)
	if rest := l - iters*step; rest > 0 {
		// the tail ends at the block end; it may overlap bytes already copied
		for rest > w {
			g.mv(int(w), x86.R9, 0, x86.R13, 0)
			a.OpRI(x86.ADD, x86.R9, int32(w))
			a.OpRI(x86.ADD, x86.R13, int32(w))
			rest -= w
		}
		g.mv(int(w), x86.R9, rest-w, x86.R13, rest-w)
	}
}

// ntCopy copies a large block with non-temporal stores: one unaligned
// vector move, then aligned streaming stores from the next vector boundary of
// the destination, then an overlapping unaligned move for the tail. The
// function ends with sfence (epilogue).
func (g *gen) ntCopy(tb x86.Reg, to int64, pb x86.Reg, po int64, l int64) {
	a := g.a
	w := g.vwidth()
	src, dst := x86.M(tb, int32(to)), x86.M(pb, int32(po))
	if !g.pack {
		src, dst = dst, src
	}
	a.Lea(x86.R9, src)
	a.Lea(x86.R13, dst)
	v := g.vec()
	a.VLoad(int(w), v, x86.M(x86.R9, 0))
	a.VStore(int(w), x86.M(x86.R13, 0), v)
	// k = w - (dst & (w-1)), in 1..w; skip k bytes (already copied)
	a.MovRR(x86.R12, x86.R13)
	a.OpRI(x86.AND, x86.R12, int32(w-1))
	a.MovImm(x86.RAX, w)
	a.OpRR(x86.SUB, x86.RAX, x86.R12)
	a.OpRR(x86.ADD, x86.R9, x86.RAX)
	a.OpRR(x86.ADD, x86.R13, x86.RAX)
	a.MovImm(x86.R12, l)
	a.OpRR(x86.SUB, x86.R12, x86.RAX) // bytes left, ≥ 3w
	loop := a.NewLabel()
	a.Align(16)
	a.Bind(loop)
	a.VLoad(int(w), v, x86.M(x86.R9, 0))
	a.VStoreNT(int(w), x86.M(x86.R13, 0), v)
	a.OpRI(x86.ADD, x86.R9, int32(w))
	a.OpRI(x86.ADD, x86.R13, int32(w))
	a.OpRI(x86.SUB, x86.R12, int32(w))
	a.OpRI(x86.CMP, x86.R12, int32(w))
	a.Jcc(x86.CondAE, loop)
	// tail: the last w bytes of the block (overlapping what was copied)
	a.VLoad(int(w), v, x86.MI(x86.R9, x86.R12, 1, int32(-w)))
	a.VStore(int(w), x86.MI(x86.R13, x86.R12, 1, int32(-w)), v)
	if w > 16 {
		g.usedVec = true
	}
	g.usedNT = true
}

// addImm adds a 64-bit constant to r (through RAX when it needs 64 bits).
func (g *gen) addImm(r x86.Reg, v int64) {
	switch {
	case v == 0:
	case fits32(v):
		g.a.OpRI(x86.ADD, r, int32(v))
	default:
		g.a.MovImm(x86.RAX, v)
		g.a.OpRR(x86.ADD, r, x86.RAX)
	}
}

// body emits the straight-line copy of one unit at [rT] <-> [rP].
func (g *gen) body(p *plan, tb, pb x86.Reg) { g.bodyAt(p, tb, 0, pb, 0) }

// bodyAt copies one unit at typed [tb+to], packed [pb+po].
func (g *gen) bodyAt(p *plan, tb x86.Reg, to int64, pb x86.Reg, po int64) {
	bs := p.blocks
	// A pack pair is five instructions for two blocks instead of four (three
	// memory operations instead of four): it pays while the body runs from
	// the op cache, where memory operations are the limit (13 % faster on a
	// 1000-entry 4-byte list), and measured slower on a 2000-block body
	// (LAMMPS s), whose ≈ 32 KB of code is decoded every pass. An unpack
	// pair has four instructions either way.
	pairs := g.cfg.pairMoves && (!g.pack || len(bs) <= pairPackBlocks)
	for i := 0; i < len(bs); i++ {
		if b := bs[i]; pairs && b.len == 4 && i+1 < len(bs) && bs[i+1].len == 4 {
			g.mvPair4(tb, to+b.off, to+bs[i+1].off, pb, po)
			po += 8
			i++
			continue
		}
		g.copyBlock(tb, to+bs[i].off, pb, po, bs[i].len)
		po += bs[i].len
	}
}

func (g *gen) epilogue() {
	if g.usedNT {
		g.a.Sfence()
	}
	if g.usedVec {
		g.a.Vzeroupper()
	}
	g.a.Ret()
}

func (g *gen) emitTables() {
	if len(*g.tables) == 0 {
		return
	}
	g.a.Ud2()
	g.a.Align(8)
	for _, t := range *g.tables {
		g.a.Bind(t.l)
		g.a.Table(t.w, t.data)
	}
}

// loopCode emits the resumable nested-loop function for p.
//
// On entry the argument block holds the origin of the first unit, the packed
// pointer, the number of units n, and for every level the iterations left
// (current included) and the current index. The code copies exactly n units
// and returns; it keeps no state (the Go driver recomputes it from the unit
// number for the next call).
func (g *gen) loopCode(p *plan) {
	a := g.a
	g.tmp = [2]x86.Reg{x86.RAX, x86.R9}
	a.Load(8, rT, x86.M(rArgs, offTyped))
	a.Load(8, rP, x86.M(rArgs, offPacked))
	a.Load(8, rN, x86.M(rArgs, offN))
	a.Load(8, rCtr, x86.M(rArgs, offCtr0))
	var in level // innermost level; the element loop when there is none
	inIsElem := len(p.levels) == 0
	if !inIsElem {
		in = p.levels[0]
	}
	var tab0 table
	absMode := g.absMode(p, in, inIsElem)
	if !inIsElem && in.offs != nil {
		if absMode {
			tab0 = g.absTable(p)
		} else {
			tab0 = g.levelTable(p, 0)
		}
		a.Load(8, rPos, x86.M(rArgs, offPos0))
		a.LeaLabel(rTab, tab0.l)
	}
	done := a.NewLabel()
	row := a.NewLabel()
	a.Bind(row)
	// m = min(ctr, n); n -= m; ctr -= m
	a.MovRR(rM, rCtr)
	a.OpRR(x86.CMP, rM, rN)
	a.Cmov(x86.CondA, rM, rN)
	a.OpRR(x86.SUB, rN, rM)
	a.OpRR(x86.SUB, rCtr, rM)
	stride := in.stride
	if inIsElem {
		stride = p.ir.Extent
	}
	if absMode {
		g.absLoops(p, tab0)
	} else {
		g.tightLoops(p, in, inIsElem, tab0, stride)
	}
	a.Test(rN, rN)
	a.Jcc(x86.CondE, done)
	if inIsElem { // the element loop never wraps inside one call
		a.Ud2()
	} else {
		// Innermost level finished a row: back to instance 0, step the next level.
		if in.offs != nil {
			a.MovImm(rPos, 0) // the last delta already returned to instance 0
		} else {
			g.addImm(rT, -in.count*in.stride)
		}
		a.MovImm(rCtr, in.count)
		for j := 1; j < len(p.levels); j++ {
			l := p.levels[j]
			ctr := x86.M(rArgs, int32(offLv+(j-1)*sizeLevelState))
			pos := x86.M(rArgs, int32(offLv+(j-1)*sizeLevelState+8))
			wrap := a.NewLabel()
			a.DecM(ctr)
			a.Jcc(x86.CondE, wrap)
			if l.offs != nil {
				t := g.levelTable(p, j)
				a.Load(8, x86.R12, pos)
				a.LeaLabel(x86.R9, t.l)
				g.addEntry(t, x86.R9, x86.R12, 0)
				a.OpMI(x86.ADD, pos, 1)
			} else {
				g.addImm(rT, l.stride)
			}
			a.Jmp(row)
			a.Bind(wrap)
			a.MovImm(x86.RAX, l.count)
			a.Store(8, ctr, x86.RAX)
			g.addImm(rT, l.off(0)-l.off(l.count-1))
			if l.offs != nil {
				a.MovImm(x86.RAX, 0)
				a.Store(8, pos, x86.RAX)
			}
		}
		// element loop
		g.addImm(rT, p.ir.Extent)
		a.Jmp(row)
	}
	a.Bind(done)
	g.epilogue()
}

// tightLoops emits the innermost loops (loop level, delta-table index level
// or the element loop): a 4× unrolled loop for small units,
// then a one-unit loop.
func (g *gen) tightLoops(p *plan, in level, inIsElem bool, tab0 table, stride int64) {
	a := g.a
	inner := a.NewLabel()
	after := a.NewLabel()
	// Unroll small bodies 4×: strided bodies address k*stride directly,
	// indexed bodies chain through the delta table.
	if k := int64(unrollBy); p.unit <= unrollUnitMax && len(p.blocks) <= 2 &&
		(in.offs != nil || unrollFits(k, stride, p.blocks, p.unit)) && fits32(k*p.unit) {
		quad, tail := a.NewLabel(), a.NewLabel()
		a.OpRI(x86.CMP, rM, int32(k))
		a.Jcc(x86.CondB, tail)
		a.Align(16)
		a.Bind(quad)
		for j := int64(0); j < k; j++ {
			if in.offs != nil && !inIsElem {
				g.bodyAt(p, rT, 0, rP, j*p.unit)
				g.addEntry(tab0, rTab, rPos, j)
			} else {
				g.bodyAt(p, rT, j*stride, rP, j*p.unit)
			}
		}
		a.OpRI(x86.ADD, rP, int32(k*p.unit))
		if in.offs != nil && !inIsElem {
			a.OpRI(x86.ADD, rPos, int32(k))
		} else {
			g.addImm(rT, k*stride)
		}
		a.OpRI(x86.SUB, rM, int32(k))
		a.OpRI(x86.CMP, rM, int32(k))
		a.Jcc(x86.CondAE, quad)
		a.Bind(tail)
		a.Test(rM, rM)
		a.Jcc(x86.CondE, after)
	}
	a.Align(16)
	a.Bind(inner)
	g.body(p, rT, rP)
	a.OpRI(x86.ADD, rP, int32(p.unit))
	switch {
	case inIsElem:
		g.addImm(rT, p.ir.Extent)
	case in.offs != nil:
		g.addEntry(tab0, rTab, rPos, 0)
		a.Inc(rPos)
	default:
		g.addImm(rT, in.stride)
	}
	a.Dec(rM)
	a.Jcc(x86.CondNE, inner)
	a.Bind(after)
}

// unrollFits reports whether the k× unrolled strided body can address unit
// j < k at j×stride + block offset with 32-bit displacements, and step by
// k×stride: both ends, computed exactly, fit in an int32 (a product that
// wrapped around int64 must not pass).
func unrollFits(k, stride int64, blocks []blk, unit int64) bool {
	if len(blocks) == 0 {
		return false
	}
	last := blocks[len(blocks)-1].off + unit // (offsets fit in 32 bits: newPlan)
	return lin32(k, stride, blocks[0].off) && lin32(k, stride, last)
}

// absMode reports whether the innermost level is an index list over a small
// unit that can be addressed through an absolute offset table: every access
// is [P0 + table[pos] + off] with P0 the origin of instance 0, so there is no
// dependency chain through the typed pointer and one instruction less per
// unit than with the delta table.
func (g *gen) absMode(p *plan, in level, inIsElem bool) bool {
	if inIsElem || in.offs == nil || p.unit > unrollUnitMax || len(p.blocks) > 2 {
		return false
	}
	for i := int64(0); i < in.count; i++ {
		if !fits32(in.offs[i] - in.offs[0]) {
			return false
		}
	}
	return true
}

// absTable returns the absolute offset table of the innermost index level:
// entry i = off(i) - off(0), and entry count = 0 (back to instance 0).
func (g *gen) absTable(p *plan) table {
	if t, ok := g.byLevel[-1]; ok {
		return t
	}
	in := p.levels[0]
	abs := make([]int64, in.count+1)
	for i := int64(0); i < in.count; i++ {
		abs[i] = in.offs[i] - in.offs[0]
	}
	t := table{l: g.a.NewLabel(), data: abs, w: 4}
	*g.tables = append(*g.tables, t)
	g.byLevel[-1] = t
	return t
}

// absLoops emits the tight loops of an absMode innermost index level: P0 in
// R13, the entry of the current unit in R12, unrolled absUnroll×, then rT restored
// to the position of the next unit (instance 0 after a full row).
func (g *gen) absLoops(p *plan, tab table) {
	a := g.a
	k := int64(absUnroll)
	a.LoadSX32(x86.RAX, x86.MI(rTab, rPos, 4, 0))
	a.MovRR(x86.R13, rT)
	a.OpRR(x86.SUB, x86.R13, x86.RAX)
	g.tIdx = x86.R12
	quad, tail, inner, fin := a.NewLabel(), a.NewLabel(), a.NewLabel(), a.NewLabel()
	a.OpRI(x86.CMP, rM, int32(k))
	a.Jcc(x86.CondB, tail)
	a.Align(16)
	a.Bind(quad)
	for j := int64(0); j < k; j++ {
		a.LoadSX32(x86.R12, x86.MI(rTab, rPos, 4, int32(4*j)))
		g.bodyAt(p, x86.R13, 0, rP, j*p.unit)
	}
	a.OpRI(x86.ADD, rP, int32(k*p.unit))
	a.OpRI(x86.ADD, rPos, int32(k))
	a.OpRI(x86.SUB, rM, int32(k))
	a.OpRI(x86.CMP, rM, int32(k))
	a.Jcc(x86.CondAE, quad)
	a.Bind(tail)
	a.Test(rM, rM)
	a.Jcc(x86.CondE, fin)
	a.Align(16)
	a.Bind(inner)
	a.LoadSX32(x86.R12, x86.MI(rTab, rPos, 4, 0))
	g.bodyAt(p, x86.R13, 0, rP, 0)
	a.OpRI(x86.ADD, rP, int32(p.unit))
	a.Inc(rPos)
	a.Dec(rM)
	a.Jcc(x86.CondNE, inner)
	a.Bind(fin)
	g.tIdx = x86.NoReg
	a.LoadSX32(x86.RAX, x86.MI(rTab, rPos, 4, 0))
	a.Lea(rT, x86.MI(x86.R13, x86.RAX, 1, 0))
}

// transposeCode emits the cache-blocked function: n bands, each band being
// t.band parent instances × t.c0 inner rows, copied tile by tile.
func (g *gen) transposeCode(t *transposePlan) {
	a := g.a
	tband, _, _ := g.dims(t, false)
	g.tmp = [2]x86.Reg{x86.RAX, x86.RCX}
	g.bandLoops(t, false, func(rows int64) {
		a.MovRR(x86.R12, x86.R9)
		a.MovRR(x86.R13, x86.R10)
		a.MovImm(x86.RDX, tband)
		el := a.NewLabel()
		a.Align(16)
		a.Bind(el)
		for k := int64(0); k < rows; k++ {
			g.small(x86.R12, k*t.s0, x86.R13, k*t.l, t.l)
		}
		a.OpRI(x86.ADD, x86.R12, int32(t.s1))
		a.OpRI(x86.ADD, x86.R13, int32(t.c0*t.l))
		a.Dec(x86.RDX)
		a.Jcc(x86.CondNE, el)
	})
	g.epilogue()
}

func (g *gen) regTransposeCode(t *transposePlan, nt bool) {
	a := g.a
	tband, _, _ := g.dims(t, nt)
	col := t.c0 * t.l // packed bytes per column (one parent instance)
	store := func(m x86.Mem, v x86.VReg) {
		if nt {
			a.VStoreNT(64, m, v)
		} else {
			a.VStore(64, m, v)
		}
	}
	set := 0
	// quad moves the 4×4 block whose typed corner is [R12+to] (rows s0
	// apart) and whose packed corner is [R13+po] (columns col apart).
	quad := func(to, po int64) {
		r := x86.VReg(16 + 8*set) // zmm16-23 or zmm24-31: never zmm0-15
		set ^= 1
		tm := func(k int64) x86.Mem { return x86.M(x86.R12, int32(to+k*t.s0)) }
		pm := func(k int64) x86.Mem { return x86.M(x86.R13, int32(po+k*col)) }
		for k := int64(0); k < 4; k++ {
			if g.pack {
				a.VLoad(64, r+x86.VReg(k), tm(k))
			} else {
				a.VLoad(64, r+x86.VReg(k), pm(k))
			}
		}
		// round 1: pairs of lanes; round 2: single lanes
		a.VShufI64x2(r+4, r+0, r+1, 0x44)
		a.VShufI64x2(r+5, r+0, r+1, 0xee)
		a.VShufI64x2(r+6, r+2, r+3, 0x44)
		a.VShufI64x2(r+7, r+2, r+3, 0xee)
		a.VShufI64x2(r+0, r+4, r+6, 0x88)
		a.VShufI64x2(r+1, r+4, r+6, 0xdd)
		a.VShufI64x2(r+2, r+5, r+7, 0x88)
		a.VShufI64x2(r+3, r+5, r+7, 0xdd)
		for k := int64(0); k < 4; k++ {
			if g.pack {
				store(pm(k), r+x86.VReg(k))
			} else {
				store(tm(k), r+x86.VReg(k))
			}
		}
	}
	g.bandLoops(t, nt, func(rows int64) {
		// column groups (4 columns = 64 bytes of a row) in a loop: the
		// code stays small (compile time) at no measurable cost
		groups := tband / 4
		per := groups // column groups per iteration: the largest divisor ≤ regTileGroups
		for groups%per != 0 || per > regTileGroups {
			per--
		}
		a.MovRR(x86.R12, x86.R9)
		a.MovRR(x86.R13, x86.R10)
		cgl := a.NewLabel()
		if groups > per {
			a.MovImm(x86.RDX, groups/per)
			a.Align(16)
			a.Bind(cgl)
		}
		for cg := int64(0); cg < per; cg++ {
			for rg := int64(0); rg < rows/4; rg++ {
				quad(4*rg*t.s0+64*cg, 4*cg*col+64*rg)
			}
		}
		if groups > per {
			a.OpRI(x86.ADD, x86.R12, int32(64*per))
			a.OpRI(x86.ADD, x86.R13, int32(4*col*per))
			a.Dec(x86.RDX)
			a.Jcc(x86.CondNE, cgl)
		}
	})
	g.usedVec = true
	g.usedNT = nt
	g.epilogue()
}

// bandLoops emits the loop nest both transpose generators share: bands of
// tband columns (rN of them, typed origin rT, packed origin rP), each cut into
// tiles of ttile rows and a last partial tile (nt: the shape of the
// non-temporal variant). inner emits one tile of rows
// rows whose typed corner is [R9] and packed corner [R10]; it may use R12,
// R13 and RDX.
func (g *gen) bandLoops(t *transposePlan, nt bool, inner func(rows int64)) {
	a := g.a
	tband, ttile, tbandSize := g.dims(t, nt)
	a.Load(8, rT, x86.M(rArgs, offTyped))
	a.Load(8, rP, x86.M(rArgs, offPacked))
	a.Load(8, rN, x86.M(rArgs, offN))
	band := a.NewLabel()
	a.Bind(band)
	a.MovRR(x86.R9, rT)  // tile origin, typed
	a.MovRR(x86.R10, rP) // tile origin, packed
	emitTiles := func(rows, ntiles int64) {
		tile := a.NewLabel()
		a.MovImm(x86.R11, ntiles)
		a.Align(16)
		a.Bind(tile)
		inner(rows)
		g.addImm(x86.R9, rows*t.s0)
		a.OpRI(x86.ADD, x86.R10, int32(rows*t.l))
		a.Dec(x86.R11)
		a.Jcc(x86.CondNE, tile)
	}
	if full := t.c0 / ttile; full > 0 {
		emitTiles(ttile, full)
	}
	if rem := t.c0 % ttile; rem > 0 {
		emitTiles(rem, 1)
	}
	a.OpRI(x86.ADD, rT, int32(tband*t.s1))
	a.OpRI(x86.ADD, rP, int32(tbandSize))
	a.Dec(rN)
	a.Jcc(x86.CondNE, band)
}

// entry points inside one code blob
type entries struct {
	pack, unpack       int // offsets of the loop functions
	tpack, tunpack     int // transpose functions, -1 when absent
	tpackNT, tunpackNT int // non-temporal register-tiled transposes, -1 when absent
	tpackN, tunpackN   int // narrow-band transposes, -1 when absent
	tables             int // end of the instructions: index tables follow
}

// asmPool keeps assemblers (and their code, label and fixup buffers) between
// compilations: their bytes are copied into executable memory before an
// assembler goes back.
var asmPool = sync.Pool{New: func() any { return x86.New(4096) }}

// generate emits all functions of p into one blob. The blob lives in the
// returned assembler's buffer: copy it, then put the assembler back into
// asmPool.
func generate(p *plan, f Features) ([]byte, entries, *x86.Asm, error) {
	a := asmPool.Get().(*x86.Asm)
	a.Reset()
	a.VEX128 = f.AVX2 || f.AVX512 // no legacy SSE next to ymm/zmm code
	e := entries{tpack: -1, tunpack: -1, tpackNT: -1, tunpackNT: -1, tpackN: -1, tunpackN: -1}
	var tables []table
	byLevel := map[int]table{}
	for _, pack := range []bool{true, false} {
		g := &gen{a: a, cfg: p.cfg, f: f, pack: pack, tables: &tables, byLevel: byLevel, tIdx: x86.NoReg}
		a.Align(16)
		if pack {
			e.pack = a.Len()
		} else {
			e.unpack = a.Len()
		}
		g.loopCode(p)
		if p.tr != nil {
			g2 := &gen{a: a, cfg: p.cfg, f: f, pack: pack, tIdx: x86.NoReg}
			a.Align(16)
			if pack {
				e.tpack = a.Len()
			} else {
				e.tunpack = a.Len()
			}
			if p.tr.reg {
				g2.regTransposeCode(p.tr, false)
				g3 := &gen{a: a, cfg: p.cfg, f: f, pack: pack, tIdx: x86.NoReg}
				a.Align(16)
				if pack {
					e.tpackNT = a.Len()
				} else {
					e.tunpackNT = a.Len()
				}
				g3.regTransposeCode(p.tr, true)
			} else {
				g2.transposeCode(p.tr)
			}
			if p.tr.nband > 0 {
				g4 := &gen{a: a, cfg: p.cfg, f: f, pack: pack, tIdx: x86.NoReg, narrow: true}
				a.Align(16)
				if pack {
					e.tpackN = a.Len()
				} else {
					e.tunpackN = a.Len()
				}
				if p.tr.reg {
					g4.regTransposeCode(p.tr, false)
				} else {
					g4.transposeCode(p.tr)
				}
			}
		}
	}
	e.tables = a.Len()
	(&gen{a: a, cfg: p.cfg, tables: &tables, tIdx: x86.NoReg}).emitTables()
	b, err := a.Finish()
	return b, e, a, err
}
