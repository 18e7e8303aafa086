package ddt

import (
	"fmt"

	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// The interpreter walks the IR directly. Every entry point checks the typed
// buffer against count × the true extent once (Type.check); below that the
// walkers index slices, so a bug would panic on a Go bounds check rather than
// touch memory it must not. Inner loops are specialised by block length
// (1, 2, 4, 8, 16 bytes; copy() above).

// span returns the bytes [lo, hi) that count ≥ 1 elements touch, relative
// to displacement 0 of element 0:
// [TrueLB + min(0, (count-1)·Extent), TrueLB + TrueExtent + max(0, (count-1)·Extent)).
// ok is false when that does not fit in an int64.
func span(ir *ddtir.IR, count int) (lo, hi int64, ok bool) {
	s, ok := checked.Mul(int64(count-1), ir.Extent)
	if !ok {
		return 0, 0, false
	}
	lo = ir.TrueLB
	if hi, ok = checked.Add(lo, ir.TrueExtent); !ok {
		return 0, 0, false
	}
	if s < 0 {
		lo, ok = checked.Add(lo, s)
	} else {
		hi, ok = checked.Add(hi, s)
	}
	if !ok {
		return 0, 0, false
	}
	return lo, hi, true
}

// check validates a Pack/Unpack call and returns the packed length of count
// elements. It is the one bounds check every entry point makes before any
// byte moves (the interpreter's leaves and compiled kernels rely on it).
func (t *Type) check(op string, ir *ddtir.IR, typedLen int, base int64, count int, from int64) (int64, error) {
	if count < 0 {
		return 0, fmt.Errorf("ddt: %s %s: negative count %d: %w", op, t.Name(), count, ErrInvalid)
	}
	total, ok := checked.Mul(int64(count), ir.Size)
	if !ok {
		return 0, fmt.Errorf("ddt: %s %s: %d elements of %d bytes: %w", op, t.Name(), count, ir.Size, ErrOverflow)
	}
	if from < 0 || from > total {
		return 0, fmt.Errorf("ddt: %s %s: stream offset %d outside [0,%d]: %w", op, t.Name(), from, total, ErrInvalid)
	}
	if total == 0 {
		return 0, nil
	}
	lo, hi, ok := span(ir, count)
	if !ok {
		return 0, fmt.Errorf("ddt: %s %s: %d elements of extent %d: typed offsets overflow int64: %w",
			op, t.Name(), count, ir.Extent, ErrOverflow)
	}
	lo, ok1 := checked.Add(base, lo)
	hi, ok2 := checked.Add(base, hi)
	if !ok1 || !ok2 || lo < 0 || hi > int64(typedLen) {
		return 0, fmt.Errorf("ddt: %s %s: %d elements at base %d need typed bytes [%d,%d), buffer has %d: %w",
			op, t.Name(), count, base, lo, hi, typedLen, ErrBounds)
	}
	return total, nil
}

func (t *Type) committedState(op string) (*state, error) {
	if t == nil {
		return nil, fmt.Errorf("ddt: %s: nil type: %w", op, ErrInvalid)
	}
	s := t.st.Load()
	if s == nil {
		return nil, fmt.Errorf("ddt: %s %s: %w", op, t.Name(), ErrNotCommitted)
	}
	return s, nil
}

// PackSize returns the number of packed bytes of count elements
// (MPI_Pack_size without the header).
func (t *Type) PackSize(count int) (int64, error) {
	if t == nil {
		return 0, fmt.Errorf("ddt: PackSize: nil type: %w", ErrInvalid)
	}
	if count < 0 {
		return 0, fmt.Errorf("ddt: PackSize %s: negative count %d: %w", t.Name(), count, ErrInvalid)
	}
	n, ok := checked.Mul(int64(count), t.size)
	if !ok {
		return 0, fmt.Errorf("ddt: PackSize %s: %w", t.Name(), ErrOverflow)
	}
	return n, nil
}

// Pack packs count elements of src into dst and returns the number of bytes
// written. src[0] is displacement 0 of element 0 (the MPI buffer address),
// so a type that touches negative displacements needs PackRange with a base.
// dst must hold PackSize(count) bytes.
//
// Errors: ErrNotCommitted, ErrInvalid, ErrOverflow, ErrBounds (src or dst too
// small; nothing is written).
func (t *Type) Pack(dst, src []byte, count int) (int, error) {
	s, err := t.committedState("Pack")
	if err != nil {
		return 0, err
	}
	total, err := t.check("Pack", s.ir, len(src), 0, count, 0)
	if err != nil {
		return 0, err
	}
	if int64(len(dst)) < total {
		return 0, fmt.Errorf("ddt: Pack %s: %d packed bytes, dst has %d: %w", t.Name(), total, len(dst), ErrBounds)
	}
	return t.run(s, false, dst[:total], src, 0, count, 0)
}

// Unpack unpacks count elements from src into dst, the reverse of Pack.
// dst[0] is displacement 0 of element 0; src must hold PackSize(count) bytes.
func (t *Type) Unpack(dst, src []byte, count int) (int, error) {
	s, err := t.committedState("Unpack")
	if err != nil {
		return 0, err
	}
	total, err := t.check("Unpack", s.ir, len(dst), 0, count, 0)
	if err != nil {
		return 0, err
	}
	if int64(len(src)) < total {
		return 0, fmt.Errorf("ddt: Unpack %s: %d packed bytes, src has %d: %w", t.Name(), total, len(src), ErrBounds)
	}
	return t.run(s, true, src[:total], dst, 0, count, 0)
}

// PackRange packs the part of the packed stream of count elements that
// starts at stream offset from into packed, as much as fits, and returns the
// number of bytes written: min(len(packed), PackSize(count)-from). typed[base]
// is displacement 0 of element 0; element k starts at base + k*Extent. A call
// may stop inside a basic element; the next call with from+n continues there.
func (t *Type) PackRange(packed, typed []byte, base int64, count int, from int64) (int, error) {
	s, err := t.committedState("PackRange")
	if err != nil {
		return 0, err
	}
	total, err := t.check("PackRange", s.ir, len(typed), base, count, from)
	if err != nil {
		return 0, err
	}
	n := min(int64(len(packed)), total-from)
	return t.run(s, false, packed[:n], typed, base, count, from)
}

// UnpackRange is the reverse of PackRange: it copies packed, the part of the
// stream starting at offset from, into typed, as much as the stream has left,
// and returns the number of bytes consumed.
func (t *Type) UnpackRange(typed, packed []byte, base int64, count int, from int64) (int, error) {
	s, err := t.committedState("UnpackRange")
	if err != nil {
		return 0, err
	}
	total, err := t.check("UnpackRange", s.ir, len(typed), base, count, from)
	if err != nil {
		return 0, err
	}
	n := min(int64(len(packed)), total-from)
	return t.run(s, true, packed[:n], typed, base, count, from)
}

// run moves len(p) stream bytes starting at from (already checked), through
// the kernel when there is one.
func (t *Type) run(s *state, un bool, p, typed []byte, base int64, count int, from int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.kernel != nil {
		var n int
		var err error
		if un {
			n, err = s.kernel.Unpack(typed, p, base, count, from)
		} else {
			n, err = s.kernel.Pack(p, typed, base, count, from)
		}
		if err != nil {
			return n, fmt.Errorf("ddt: compiled kernel for %s: %w: %w", t.Name(), ErrInternal, err)
		}
		return n, nil
	}
	return interpSafe(t, s.ir, un, p, typed, base, count, from)
}

// interpSafe runs the interpreter and turns a failed internal range check
// (a bug, never bad input: check ran first) into an error wrapping
// ErrInternal.
func interpSafe(t *Type, ir *ddtir.IR, un bool, p, typed []byte, base int64, count int, from int64) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			n, err = 0, fmt.Errorf("ddt: %s: %w: %w", t.Name(), ErrInternal, e)
		}
	}()
	interpRun(ir, un, p, typed, base, count, from)
	return len(p), nil
}

// interpRun is the interpreter entry point: it moves stream bytes
// [from, from+len(p)) of count elements between p and typed.
func interpRun(ir *ddtir.IR, un bool, p, typed []byte, base int64, count int, from int64) {
	hi := from + int64(len(p))
	if ir.Contig {
		a := base + ir.TrueLB + from
		if un {
			copy(typed[a:a+int64(len(p))], p)
		} else {
			copy(p, typed[a:a+int64(len(p))])
		}
		return
	}
	loopRange(ir.Root, int64(count), ir.Extent, p, typed, base, from, hi, un)
}

// ---------------------------------------------------------------------------
// full instances

// moveFull moves one whole instance of n with origin o; len(p) == n.Size.
func moveFull(n *ddtir.Node, p, t []byte, o int64, un bool) {
	o += n.Disp
	switch n.Op {
	case ddtir.OpBlock:
		if un {
			copy(t[o:o+n.Len], p)
		} else {
			copy(p, t[o:o+n.Len])
		}
	case ddtir.OpLoop:
		loopFull(n.Child, n.Count, n.Stride, p, t, o, un)
	case ddtir.OpIndex:
		indexFull(n, n.Offsets, p, t, o, un)
	case ddtir.OpBlocks:
		moveBlocks(p, t, o, n.Offsets, n.Lens, o-n.Disp+n.Lo, o-n.Disp+n.Hi, un)
	case ddtir.OpStruct:
		for i, c := range n.Children {
			moveFull(c, p[n.Prefix[i]:n.Prefix[i+1]], t, o+n.Offsets[i], un)
		}
	}
}

// loopFull moves count whole instances of child, origins o + i*stride.
func loopFull(child *ddtir.Node, count, stride int64, p, t []byte, o int64, un bool) {
	if child.Op == ddtir.OpBlock {
		a := o + child.Disp
		if un {
			unpackStrided(p, t, a, stride, count, child.Len)
		} else {
			packStrided(p, t, a, stride, count, child.Len)
		}
		return
	}
	if tw := gridTile(child, count, stride); un && tw > 0 {
		b := child.Child
		moveGrid(p, t, o+child.Disp+b.Disp, stride, count, child.Stride, child.Count, b.Len, tw, un)
		return
	}
	cs := child.Size
	q := int64(0)
	for i := int64(0); i < count; i++ {
		moveFull(child, p[q:q+cs], t, o, un)
		q += cs
		o += stride
	}
}

// Grid walks (a loop over a strided column: transposes such as FFT2's).
// Moving the columns one after the other touches a new cache line for every
// block, and rows a multiple of 4 KiB apart all land in the same L1 set:
// an unpack that scatters FFT2 columns of 128–256 complex numbers ran 6–11×
// slower than a hand loop writing the rows in order. moveGrid moves tiles of
// columns row by row instead, so every typed cache line is written whole.
// Packs keep the column walk: strided loads with sequential stores measured
// faster than tiles (whose packed side is tw store streams rows·l apart).
const (
	gridTileBytes = 128 // typed bytes of one row of a tile (two cache lines)
	gridMinRow    = 256 // row strides below this are left to the column walk
)

// gridTile returns the number of columns per tile for count columns at
// column stride cs, each column a loop child of blocks, or 0 where the
// column walk is kept: blocks longer than a cache line, columns that do not
// share lines, rows close together, or blocks that could overlap (the walk
// order must not matter to an unpack).
func gridTile(child *ddtir.Node, count, cs int64) int64 {
	if child.Op != ddtir.OpLoop || child.Child.Op != ddtir.OpBlock || count < 2 || child.Count < 2 {
		return 0
	}
	l, rs := child.Child.Len, child.Stride
	if l > 64 || cs < l || cs > 64 || rs < gridMinRow {
		return 0
	}
	if span, ok := checked.MulAdd(count-1, cs, l); !ok || span > rs {
		return 0
	}
	return max(1, gridTileBytes/cs)
}

// indexFull moves whole instances of n.Child at origins o + offs[i], where
// offs is n.Offsets or a part of it and o includes n.Disp.
func indexFull(n *ddtir.Node, offs []int64, p, t []byte, o int64, un bool) {
	child := n.Child
	if child.Op == ddtir.OpBlock {
		lo, hi := o-n.Disp+n.Lo, o-n.Disp+n.Hi
		o += child.Disp
		if un {
			unpackIndexed(p, t, o, offs, child.Len, lo, hi)
		} else {
			packIndexed(p, t, o, offs, child.Len, lo, hi)
		}
		return
	}
	cs := child.Size
	q := int64(0)
	for _, off := range offs {
		moveFull(child, p[q:q+cs], t, o+off, un)
		q += cs
	}
}

// ---------------------------------------------------------------------------
// partial instances

// moveRange moves stream bytes [lo, hi) of one instance of n with origin o;
// len(p) == hi-lo, 0 ≤ lo < hi ≤ n.Size.
func moveRange(n *ddtir.Node, p, t []byte, o, lo, hi int64, un bool) {
	if lo == 0 && hi == n.Size {
		moveFull(n, p, t, o, un)
		return
	}
	o += n.Disp
	switch n.Op {
	case ddtir.OpBlock:
		a := o + lo
		if un {
			copy(t[a:a+hi-lo], p)
		} else {
			copy(p, t[a:a+hi-lo])
		}
	case ddtir.OpLoop:
		loopRange(n.Child, n.Count, n.Stride, p, t, o, lo, hi, un)
	case ddtir.OpIndex:
		indexRange(n, p, t, o, lo, hi, un)
	case ddtir.OpBlocks:
		i := search(n.Prefix, lo)
		q := int64(0)
		for ; i < len(n.Offsets) && n.Prefix[i] < hi; i++ {
			s := max(lo, n.Prefix[i]) - n.Prefix[i]
			e := min(hi, n.Prefix[i+1]) - n.Prefix[i]
			a := o + n.Offsets[i]
			if un {
				copy(t[a+s:a+e], p[q:q+e-s])
			} else {
				copy(p[q:q+e-s], t[a+s:a+e])
			}
			q += e - s
		}
	case ddtir.OpStruct:
		i := search(n.Prefix, lo)
		q := int64(0)
		for ; i < len(n.Children) && n.Prefix[i] < hi; i++ {
			s := max(lo, n.Prefix[i]) - n.Prefix[i]
			e := min(hi, n.Prefix[i+1]) - n.Prefix[i]
			moveRange(n.Children[i], p[q:q+e-s], t, o+n.Offsets[i], s, e, un)
			q += e - s
		}
	}
}

// search returns the largest i < len(prefix)-1 with prefix[i] ≤ x.
func search(prefix []int64, x int64) int {
	lo, hi := 0, len(prefix)-1 // invariant: prefix[lo] ≤ x, answer < hi
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if prefix[m] <= x {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// loopRange moves stream bytes [lo, hi) of count instances of child at
// origins o + i*stride (also used for the count elements of a type).
func loopRange(child *ddtir.Node, count, stride int64, p, t []byte, o, lo, hi int64, un bool) {
	cs := child.Size
	i := lo / cs
	q := int64(0)
	if off := lo - i*cs; off != 0 {
		e := min(cs, hi-i*cs)
		moveRange(child, p[:e-off], t, o+i*stride, off, e, un)
		q = e - off
		i++
	}
	if nf := (hi - i*cs) / cs; nf > 0 {
		loopFull(child, nf, stride, p[q:q+nf*cs], t, o+i*stride, un)
		q += nf * cs
		i += nf
	}
	if rem := hi - i*cs; rem > 0 && i < count {
		moveRange(child, p[q:q+rem], t, o+i*stride, 0, rem, un)
	}
}

// indexRange is loopRange over the offset list of n; o includes n.Disp.
func indexRange(n *ddtir.Node, p, t []byte, o, lo, hi int64, un bool) {
	child, offs := n.Child, n.Offsets
	cs := child.Size
	i := lo / cs
	q := int64(0)
	if off := lo - i*cs; off != 0 {
		e := min(cs, hi-i*cs)
		moveRange(child, p[:e-off], t, o+offs[i], off, e, un)
		q = e - off
		i++
	}
	if nf := (hi - i*cs) / cs; nf > 0 {
		indexFull(n, offs[i:i+nf], p[q:q+nf*cs], t, o, un)
		q += nf * cs
		i += nf
	}
	if rem := hi - i*cs; rem > 0 && i < int64(len(offs)) {
		moveRange(child, p[q:q+rem], t, o+offs[i], 0, rem, un)
	}
}

// Interpreter returns a Kernel that runs the interpreter on t even when t
// has a compiled kernel: the oracle that compiled kernels are tested against.
// It checks its arguments like PackRange does.
func (t *Type) Interpreter() (Kernel, error) {
	s, err := t.committedState("Interpreter")
	if err != nil {
		return nil, err
	}
	return interpKernel{t: t, st: &state{ir: s.ir, blocks: s.blocks}}, nil
}

type interpKernel struct {
	t  *Type
	st *state
}

// Pack implements Kernel with the interpreter.
func (k interpKernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	total, err := k.t.check("Interpreter.Pack", k.st.ir, len(typed), base, count, from)
	if err != nil {
		return 0, err
	}
	return k.t.run(k.st, false, packed[:min(int64(len(packed)), total-from)], typed, base, count, from)
}

// Unpack implements Kernel with the interpreter.
func (k interpKernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	total, err := k.t.check("Interpreter.Unpack", k.st.ir, len(typed), base, count, from)
	if err != nil {
		return 0, err
	}
	return k.t.run(k.st, true, packed[:min(int64(len(packed)), total-from)], typed, base, count, from)
}
