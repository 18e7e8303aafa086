package ddt

import (
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// This file builds the IR of a type (Commit time). Every mk* function is a
// "smart constructor": it returns the simplest node equivalent to what was
// asked for, so normalisation happens bottom-up as the tree is built.

// pow2 returns the largest power of two dividing v, capped at MaxAlign
// (MaxAlign for v == 0).
func pow2(v int64) int64 {
	if v == 0 {
		return ddtir.MaxAlign
	}
	a := int64(1) << bits.TrailingZeros64(uint64(v))
	return min(a, ddtir.MaxAlign)
}

func mkBlock(disp, n int64) *ddtir.Node {
	if n <= 0 {
		return nil
	}
	return &ddtir.Node{Op: ddtir.OpBlock, Disp: disp, Len: n, Size: n, Lo: disp, Hi: disp + n,
		Align: min(pow2(disp), pow2(n)), MinBlock: n, MaxBlock: n, Blocks: 1}
}

// shift returns n moved by d bytes.
func shift(n *ddtir.Node, d int64) *ddtir.Node {
	if n == nil || d == 0 {
		return n
	}
	m := *n
	m.Disp += d
	m.Lo += d
	m.Hi += d
	m.Align = min(m.Align, pow2(d))
	return &m
}

func mkLoop(disp, count, stride int64, child *ddtir.Node) *ddtir.Node {
	if child == nil || count <= 0 {
		return nil
	}
	if count == 1 {
		return shift(child, disp)
	}
	switch child.Op {
	case ddtir.OpBlock:
		if stride == child.Len {
			return mkBlock(disp+child.Disp, count*child.Len)
		}
	case ddtir.OpLoop:
		// The inner loop tiles the outer stride exactly: one longer loop.
		if tile, ok := checked.Mul(child.Count, child.Stride); ok && tile == stride {
			return mkLoop(disp+child.Disp, count*child.Count, child.Stride, child.Child)
		}
	}
	span := (count - 1) * stride
	n := &ddtir.Node{Op: ddtir.OpLoop, Disp: disp, Count: count, Stride: stride, Child: child,
		Size: count * child.Size, Lo: disp + child.Lo + min(0, span), Hi: disp + child.Hi + max(0, span),
		Align:    min(pow2(disp), pow2(stride), child.Align),
		MinBlock: child.MinBlock, MaxBlock: child.MaxBlock, Blocks: count * child.Blocks}
	return n
}

// constStride reports whether offs is an arithmetic progression (len ≥ 2).
func constStride(offs []int64) (int64, bool) {
	if len(offs) < 2 {
		return 0, false
	}
	s, ok := checked.Sub(offs[1], offs[0])
	if !ok {
		return 0, false
	}
	for i := 2; i < len(offs); i++ {
		if d, ok := checked.Sub(offs[i], offs[i-1]); !ok || d != s {
			return 0, false
		}
	}
	return s, true
}

func mkIndex(disp int64, offs []int64, child *ddtir.Node) *ddtir.Node {
	if child == nil || len(offs) == 0 {
		return nil
	}
	if len(offs) == 1 {
		return shift(child, disp+offs[0])
	}
	if s, ok := constStride(offs); ok {
		return mkLoop(disp+offs[0], int64(len(offs)), s, child)
	}
	if child.Op == ddtir.OpBlock && mergesPay(offs, child.Len) {
		bo := make([]int64, len(offs))
		bl := make([]int64, len(offs))
		for i, o := range offs {
			bo[i], bl[i] = o+child.Disp, child.Len
		}
		return mkBlocks(disp, bo, bl)
	}
	return newIndex(disp, offs, child)
}

// mergesPay reports whether merging touching blocks of length l at offs
// removes at least half of them. Otherwise an index over one block length
// is faster than a list of varying lengths (fixed-size moves, no length
// table).
func mergesPay(offs []int64, l int64) bool {
	touching := 0
	for i := 1; i < len(offs); i++ {
		if offs[i-1]+l == offs[i] {
			touching++
		}
	}
	return 2*touching >= len(offs)
}

func newIndex(disp int64, offs []int64, child *ddtir.Node) *ddtir.Node {
	lo, hi := offs[0], offs[0]
	al := min(pow2(disp), child.Align)
	for _, o := range offs {
		lo, hi = min(lo, o), max(hi, o)
		al = min(al, pow2(o))
	}
	n := int64(len(offs))
	return &ddtir.Node{Op: ddtir.OpIndex, Disp: disp, Offsets: offs, Child: child, Size: n * child.Size,
		Lo: disp + lo + child.Lo, Hi: disp + hi + child.Hi, Align: al,
		MinBlock: child.MinBlock, MaxBlock: child.MaxBlock, Blocks: n * child.Blocks}
}

// mkBlocks builds a list of byte blocks, merging neighbours that touch in
// order and choosing loop or index forms when the lengths agree. offs and
// lens are owned by the callee.
func mkBlocks(disp int64, offs, lens []int64) *ddtir.Node {
	w := 0
	for i := range offs {
		if lens[i] <= 0 {
			continue
		}
		if w > 0 && offs[w-1]+lens[w-1] == offs[i] {
			lens[w-1] += lens[i]
			continue
		}
		offs[w], lens[w] = offs[i], lens[i]
		w++
	}
	offs, lens = offs[:w], lens[:w]
	if w == 0 {
		return nil
	}
	if w == 1 {
		return mkBlock(disp+offs[0], lens[0])
	}
	same := true
	for _, l := range lens[1:] {
		if l != lens[0] {
			same = false
			break
		}
	}
	if same {
		if s, ok := constStride(offs); ok {
			return mkLoop(disp+offs[0], int64(w), s, mkBlock(0, lens[0]))
		}
		return newIndex(disp, offs, mkBlock(0, lens[0]))
	}
	n := &ddtir.Node{Op: ddtir.OpBlocks, Disp: disp, Offsets: offs, Lens: lens, Prefix: make([]int64, w+1),
		Align: pow2(disp), MinBlock: lens[0], MaxBlock: lens[0], Blocks: int64(w)}
	n.Lo, n.Hi = offs[0], offs[0]+lens[0]
	for i, o := range offs {
		n.Prefix[i+1] = n.Prefix[i] + lens[i]
		n.Lo, n.Hi = min(n.Lo, o), max(n.Hi, o+lens[i])
		n.Align = min(n.Align, pow2(o), pow2(lens[i]))
		n.MinBlock, n.MaxBlock = min(n.MinBlock, lens[i]), max(n.MaxBlock, lens[i])
	}
	n.Size = n.Prefix[w]
	n.Lo += disp
	n.Hi += disp
	return n
}

type entry struct {
	off  int64
	node *ddtir.Node
}

// sameShape reports whether a and b copy the same pattern, ignoring their
// top-level Disp.
func sameShape(a, b *ddtir.Node) bool {
	if a == b {
		return true
	}
	if a.Op != b.Op || a.Size != b.Size || a.Len != b.Len || a.Count != b.Count || a.Stride != b.Stride ||
		!slices.Equal(a.Offsets, b.Offsets) || !slices.Equal(a.Lens, b.Lens) || len(a.Children) != len(b.Children) {
		return false
	}
	if a.Child != nil && !(a.Child.Disp == b.Child.Disp && sameShape(a.Child, b.Child)) {
		return false
	}
	for i := range a.Children {
		if a.Children[i].Disp != b.Children[i].Disp || !sameShape(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}

func mkStruct(disp int64, es []entry) *ddtir.Node {
	// Drop empty members and splice nested structs in.
	var flat []entry
	for _, e := range es {
		if e.node == nil {
			continue
		}
		if e.node.Op == ddtir.OpStruct {
			for i, c := range e.node.Children {
				flat = append(flat, entry{e.off + e.node.Disp + e.node.Offsets[i], c})
			}
			continue
		}
		flat = append(flat, e)
	}
	switch len(flat) {
	case 0:
		return nil
	case 1:
		return shift(flat[0].node, disp+flat[0].off)
	}
	same, leafy := true, true
	for _, e := range flat {
		if !sameShape(e.node, flat[0].node) {
			same = false
		}
		if e.node.Op != ddtir.OpBlock && e.node.Op != ddtir.OpBlocks {
			leafy = false
		}
	}
	if same {
		offs := make([]int64, len(flat))
		for i, e := range flat {
			offs[i] = e.off + e.node.Disp
		}
		c := *flat[0].node
		return mkIndex(disp, offs, shift(&c, -c.Disp))
	}
	if leafy {
		var offs, lens []int64
		for _, e := range flat {
			n := e.node
			if n.Op == ddtir.OpBlock {
				offs = append(offs, e.off+n.Disp)
				lens = append(lens, n.Len)
				continue
			}
			for i, o := range n.Offsets {
				offs = append(offs, e.off+n.Disp+o)
				lens = append(lens, n.Lens[i])
			}
		}
		return mkBlocks(disp, offs, lens)
	}
	n := &ddtir.Node{Op: ddtir.OpStruct, Disp: disp, Offsets: make([]int64, len(flat)), Children: make([]*ddtir.Node, len(flat)),
		Prefix: make([]int64, len(flat)+1), Align: pow2(disp)}
	for i, e := range flat {
		c := e.node
		n.Offsets[i], n.Children[i] = e.off, c
		n.Prefix[i+1] = n.Prefix[i] + c.Size
		if i == 0 {
			n.Lo, n.Hi = e.off+c.Lo, e.off+c.Hi
			n.MinBlock, n.MaxBlock = c.MinBlock, c.MaxBlock
		}
		n.Lo, n.Hi = min(n.Lo, e.off+c.Lo), max(n.Hi, e.off+c.Hi)
		n.Align = min(n.Align, pow2(e.off), c.Align)
		n.MinBlock, n.MaxBlock = min(n.MinBlock, c.MinBlock), max(n.MaxBlock, c.MaxBlock)
		n.Blocks += c.Blocks
	}
	n.Size = n.Prefix[len(flat)]
	n.Lo += disp
	n.Hi += disp
	return n
}

// normSteps counts the nodes built and checked by all Commits (a test hook:
// it shows that shared sub-types are normalised once).
var normSteps atomic.Int64

// norm is the state of one normalisation: the node already built for each
// uncommitted sub-type, so a sub-type that occurs several times in a tree
// (Struct{t, t} nested n deep) is normalised once, not 2^n times.
type norm struct {
	memo map[*Type]*ddtir.Node
}

// nodeOf returns the IR root of a component type, reusing it when the
// component is committed or was already normalised by this Commit.
func (nm *norm) nodeOf(t *Type) *ddtir.Node {
	if ir := t.ir(); ir != nil {
		return ir.Root
	}
	if n, ok := nm.memo[t]; ok {
		return n
	}
	n := nm.node(t)
	nm.memo[t] = n
	return n
}

// node builds the normalised IR node of one element of t (nil if empty).
func (nm *norm) node(t *Type) *ddtir.Node {
	normSteps.Add(1)
	if t.size == 0 {
		return nil
	}
	switch t.comb {
	case CombinerNamed:
		return mkBlock(0, t.size)
	case CombinerContiguous:
		old := t.types[0]
		return mkLoop(0, int64(t.ints[0]), old.Extent(), nm.nodeOf(old))
	case CombinerVector, CombinerHVector:
		old := t.types[0]
		var stride int64
		if t.comb == CombinerVector {
			stride = int64(t.ints[2]) * old.Extent()
		} else {
			stride = t.addrs[0]
		}
		inner := mkLoop(0, int64(t.ints[1]), old.Extent(), nm.nodeOf(old))
		return mkLoop(0, int64(t.ints[0]), stride, inner)
	case CombinerIndexed, CombinerHIndexed, CombinerIndexedBlock, CombinerHIndexedBlock:
		old := t.types[0]
		ext := old.Extent()
		nb := t.ints[0]
		bl := func(i int) int64 {
			switch t.comb {
			case CombinerIndexed, CombinerHIndexed:
				return int64(t.ints[1+i])
			}
			return int64(t.ints[1])
		}
		disp := func(i int) int64 {
			switch t.comb {
			case CombinerIndexed:
				return int64(t.ints[1+nb+i]) * ext
			case CombinerIndexedBlock:
				return int64(t.ints[2+i]) * ext
			}
			return t.addrs[i]
		}
		on := nm.nodeOf(old)
		es := make([]entry, 0, nb)
		for i := 0; i < nb; i++ {
			if b := bl(i); b > 0 {
				es = append(es, entry{disp(i), mkLoop(0, b, ext, on)})
			}
		}
		return mkStruct(0, es)
	case CombinerStruct:
		es := make([]entry, 0, len(t.types))
		for i, tt := range t.types {
			if b := int64(t.ints[1+i]); b > 0 {
				es = append(es, entry{t.addrs[i], mkLoop(0, b, tt.Extent(), nm.nodeOf(tt))})
			}
		}
		return mkStruct(0, es)
	case CombinerSubarray, CombinerDarray:
		return nm.nodeOf(t.impl)
	case CombinerResized, CombinerDup:
		return nm.nodeOf(t.types[0])
	}
	return nil
}

// buildIR normalises t into its IR.
func (t *Type) buildIR() *ddtir.IR {
	nm := &norm{memo: map[*Type]*ddtir.Node{}}
	root := nm.node(t)
	ir := &ddtir.IR{Root: root, Size: t.size, Extent: t.Extent(), LB: t.lb, TrueLB: t.trueLB,
		TrueExtent: t.TrueExtent(), Align: ddtir.MaxAlign}
	if t.elem > 0 {
		ir.ElemSize = t.elem
	}
	if root != nil {
		ir.Align = min(root.Align, pow2(ir.Extent))
		ir.Contig = root.Op == ddtir.OpBlock && ir.Extent == ir.Size
	}
	return ir
}

// checkIR verifies the IR against the bounds computed by the constructors.
func (t *Type) checkIR(ir *ddtir.IR) error {
	if ir.Root == nil {
		if t.size != 0 {
			return fmt.Errorf("ddt: Commit %s: empty IR for size %d: %w", t.Name(), t.size, ErrInternal)
		}
		return nil
	}
	if err := validate(ir.Root, map[*ddtir.Node]bool{}); err != nil {
		return fmt.Errorf("ddt: Commit %s: %w", t.Name(), err)
	}
	if ir.Root.Size != t.size || ir.Root.Lo != t.trueLB || ir.Root.Hi != t.trueUB {
		return fmt.Errorf("ddt: Commit %s: IR size %d [%d,%d) disagrees with type size %d [%d,%d): %w",
			t.Name(), ir.Root.Size, ir.Root.Lo, ir.Root.Hi, t.size, t.trueLB, t.trueUB, ErrInternal)
	}
	return nil
}

// validate re-derives every node's Size, Lo, Hi and Prefix from its fields
// and children, with overflow-checked arithmetic, and reports the first
// disagreement (ErrInternal) or overflow (ErrOverflow). Commit runs it so
// that the per-node bounds the leaf loops check against, and a compiler
// relies on, are exact. done holds the nodes already validated: a node
// shared by several parents is checked once.
func validate(n *ddtir.Node, done map[*ddtir.Node]bool) error {
	if done[n] {
		return nil
	}
	normSteps.Add(1)
	bad := func(what string) error {
		return fmt.Errorf("IR %s node: %s: %w", n.Op, what, ErrInternal)
	}
	over := func(what string) error {
		return fmt.Errorf("IR %s node: %s overflows int64: %w", n.Op, what, ErrOverflow)
	}
	var size, lo, hi int64
	var ok bool
	switch n.Op {
	case ddtir.OpBlock:
		if n.Len <= 0 {
			return bad("non-positive length")
		}
		size, lo = n.Len, n.Disp
		if hi, ok = checked.Add(n.Disp, n.Len); !ok {
			return over("block end")
		}
	case ddtir.OpLoop:
		if n.Count < 1 || n.Child == nil {
			return bad("bad count or child")
		}
		if err := validate(n.Child, done); err != nil {
			return err
		}
		span, ok := checked.Mul(n.Count-1, n.Stride)
		if !ok {
			return over("loop span")
		}
		if size, ok = checked.Mul(n.Count, n.Child.Size); !ok {
			return over("loop size")
		}
		var ok1, ok2 bool
		lo, ok1 = addAll(n.Disp, n.Child.Lo, min(0, span))
		hi, ok2 = addAll(n.Disp, n.Child.Hi, max(0, span))
		if !ok1 || !ok2 {
			return over("loop bounds")
		}
	case ddtir.OpIndex:
		if len(n.Offsets) == 0 || n.Child == nil {
			return bad("empty index")
		}
		if err := validate(n.Child, done); err != nil {
			return err
		}
		lo, hi = n.Offsets[0], n.Offsets[0]
		for _, o := range n.Offsets {
			lo, hi = min(lo, o), max(hi, o)
		}
		if size, ok = checked.Mul(int64(len(n.Offsets)), n.Child.Size); !ok {
			return over("index size")
		}
		var ok1, ok2 bool
		lo, ok1 = addAll(n.Disp, lo, n.Child.Lo)
		hi, ok2 = addAll(n.Disp, hi, n.Child.Hi)
		if !ok1 || !ok2 {
			return over("index bounds")
		}
	case ddtir.OpBlocks:
		if len(n.Offsets) == 0 || len(n.Lens) != len(n.Offsets) || len(n.Prefix) != len(n.Offsets)+1 || n.Prefix[0] != 0 {
			return bad("malformed lists")
		}
		for i, o := range n.Offsets {
			end, ok1 := checked.Add(o, n.Lens[i])
			next, ok2 := checked.Add(n.Prefix[i], n.Lens[i])
			if !ok1 || !ok2 {
				return over("block list")
			}
			if n.Lens[i] <= 0 || n.Prefix[i+1] != next {
				return bad("bad length or prefix")
			}
			if i == 0 {
				lo, hi = o, end
			}
			lo, hi = min(lo, o), max(hi, end)
		}
		var ok1, ok2 bool
		size = n.Prefix[len(n.Offsets)]
		lo, ok1 = checked.Add(n.Disp, lo)
		hi, ok2 = checked.Add(n.Disp, hi)
		if !ok1 || !ok2 {
			return over("block list bounds")
		}
	case ddtir.OpStruct:
		if len(n.Offsets) == 0 || len(n.Children) != len(n.Offsets) || len(n.Prefix) != len(n.Offsets)+1 || n.Prefix[0] != 0 {
			return bad("malformed lists")
		}
		for i, c := range n.Children {
			if c == nil {
				return bad("nil child")
			}
			if err := validate(c, done); err != nil {
				return err
			}
			next, ok := checked.Add(n.Prefix[i], c.Size)
			if !ok {
				return over("struct size")
			}
			if n.Prefix[i+1] != next {
				return bad("bad prefix")
			}
			clo, ok1 := checked.Add(n.Offsets[i], c.Lo)
			chi, ok2 := checked.Add(n.Offsets[i], c.Hi)
			if !ok1 || !ok2 {
				return over("struct member bounds")
			}
			if i == 0 {
				lo, hi = clo, chi
			}
			lo, hi = min(lo, clo), max(hi, chi)
		}
		var ok1, ok2 bool
		size = n.Prefix[len(n.Offsets)]
		lo, ok1 = checked.Add(n.Disp, lo)
		hi, ok2 = checked.Add(n.Disp, hi)
		if !ok1 || !ok2 {
			return over("struct bounds")
		}
	default:
		return bad("unknown op")
	}
	if size != n.Size || lo != n.Lo || hi != n.Hi || n.Size <= 0 {
		return bad(fmt.Sprintf("size/bounds %d [%d,%d), recomputed %d [%d,%d)", n.Size, n.Lo, n.Hi, size, lo, hi))
	}
	done[n] = true
	return nil
}

// addAll returns a + b + c, false when a partial or the final sum does not
// fit in an int64.
func addAll(a, b, c int64) (int64, bool) {
	s, ok := checked.Add(a, b)
	if !ok {
		return 0, false
	}
	return checked.Add(s, c)
}
