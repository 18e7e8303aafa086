package jit

import (
	"sort"

	"github.com/weft-hpc/weft/internal/ddtir"
)

// A seqKernel packs units (one instance of a plan's body, under the plan's
// loop levels) that are a struct or block list too large to unroll into one
// body (LAMMPS's struct of per-array index lists, a long
// hindexed list with varying lengths): the element's stream is cut into
// consecutive parts, each compiled on its own (a loop nest, an index list, or
// a group of at most maxBodyBlocks blocks), and a Go loop dispatches stream
// ranges to the parts. Parts are large, so the dispatch cost is small.
type seqKernel struct {
	p     *plan
	parts []seqPart
}

type seqPart struct {
	lo, hi int64 // stream range inside one element
	disp   int64 // origin of the part relative to the element origin
	k      ddtir.Kernel
}

// seqParts cuts one instance of n (origin shift disp, stream offset at) into
// nodes that newPlan accepts.
func seqParts(n *ddtir.Node, disp, at, maxBodyBlocks int64, out []seqNode) []seqNode {
	disp += n.Disp
	switch n.Op {
	case ddtir.OpStruct:
		var group []int // consecutive small children
		flush := func() {
			if len(group) == 0 {
				return
			}
			g := &ddtir.Node{Op: ddtir.OpStruct}
			for _, i := range group {
				g.Offsets = append(g.Offsets, n.Offsets[i])
				g.Children = append(g.Children, n.Children[i])
				g.Prefix = append(g.Prefix, g.Size)
				g.Size += n.Children[i].Size
				g.Blocks += n.Children[i].Blocks
			}
			g.Prefix = append(g.Prefix, g.Size)
			out = append(out, seqNode{node: g, disp: disp, at: at + n.Prefix[group[0]]})
			group = group[:0]
		}
		blocks := int64(0)
		for i, c := range n.Children {
			if c.Blocks > maxBodyBlocks {
				flush()
				blocks = 0
				if c.Op == ddtir.OpStruct || c.Op == ddtir.OpBlocks {
					out = seqParts(c, disp+n.Offsets[i], at+n.Prefix[i], maxBodyBlocks, out)
				} else {
					out = append(out, seqNode{node: c, disp: disp + n.Offsets[i], at: at + n.Prefix[i]})
				}
				continue
			}
			if blocks+c.Blocks > maxBodyBlocks {
				flush()
				blocks = 0
			}
			group = append(group, i)
			blocks += c.Blocks
		}
		flush()
	case ddtir.OpBlocks:
		for lo := 0; lo < len(n.Offsets); lo += int(maxBodyBlocks) {
			hi := min(len(n.Offsets), lo+int(maxBodyBlocks))
			g := &ddtir.Node{Op: ddtir.OpBlocks, Offsets: n.Offsets[lo:hi], Lens: n.Lens[lo:hi], Blocks: int64(hi - lo)}
			for _, l := range g.Lens {
				g.Prefix = append(g.Prefix, g.Size)
				g.Size += l
			}
			g.Prefix = append(g.Prefix, g.Size)
			out = append(out, seqNode{node: g, disp: disp, at: at + n.Prefix[lo]})
		}
	default:
		out = append(out, seqNode{node: n, disp: disp - n.Disp, at: at})
	}
	return out
}

type seqNode struct {
	node *ddtir.Node
	disp int64
	at   int64
}

func newSeq(p *plan, f Features) (*seqKernel, error) {
	s := &seqKernel{p: p}
	for _, sn := range seqParts(p.body, 0, 0, p.cfg.maxBodyBlocks, nil) {
		sub := &ddtir.IR{Root: sn.node, Size: sn.node.Size, Extent: sn.node.Size}
		p, err := newPlan(sub, p.cfg)
		if err != nil {
			return nil, err
		}
		var k ddtir.Kernel
		if p.bigBody { // a big struct under a loop inside the part
			k, err = newSeq(p, f)
		} else {
			k, err = compilePlan(p, f)
		}
		if err != nil {
			return nil, err
		}
		s.parts = append(s.parts, seqPart{lo: sn.at, hi: sn.at + sn.node.Size, disp: sn.disp, k: k})
	}
	return s, nil
}

func (s *seqKernel) run(packed, typed []byte, base int64, count int, from int64, pack bool) (int, error) {
	size := s.p.unit
	n := min(int64(len(packed)), int64(count)*s.p.ir.Size-from)
	if n <= 0 {
		return 0, nil
	}
	to := from + n
	for pos := from; pos < to; {
		e, r := pos/size, pos%size
		i := sort.Search(len(s.parts), func(i int) bool { return s.parts[i].hi > r })
		pt := &s.parts[i]
		m := min(pt.hi-r, to-pos)
		o := s.p.origin(e, base, nil) + pt.disp
		var err error
		if pack {
			_, err = pt.k.Pack(packed[pos-from:pos-from+m], typed, o, 1, r-pt.lo)
		} else {
			_, err = pt.k.Unpack(typed, packed[pos-from:pos-from+m], o, 1, r-pt.lo)
		}
		if err != nil {
			return int(pos - from), err
		}
		pos += m
	}
	return int(n), nil
}

// Pack implements ddtir.Kernel.
func (s *seqKernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return s.run(packed, typed, base, count, from, true)
}

// Unpack implements ddtir.Kernel.
func (s *seqKernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return s.run(packed, typed, base, count, from, false)
}
