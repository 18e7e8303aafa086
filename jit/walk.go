package jit

import (
	"sort"

	"github.com/weft-hpc/weft/internal/ddtir"
)

// walk copies packed-stream bytes [lo, hi) of one instance of n whose origin
// is typed index o, to or from p (p[0] is stream byte lo). It is the byte-exact
// resume path for units cut by the ends of a pack window, and runs in Go so it
// is preemptible. Large blocks are copied with copy in pieces of at most
// chunk bytes.
func walk(n *ddtir.Node, o, lo, hi int64, p, t []byte, pack bool) {
	o += n.Disp
	switch n.Op {
	case ddtir.OpBlock:
		a := o + lo
		if pack {
			copy(p[:hi-lo], t[a:a+hi-lo])
		} else {
			copy(t[a:a+hi-lo], p[:hi-lo])
		}
	case ddtir.OpLoop, ddtir.OpIndex:
		cs := n.Child.Size
		for i := lo / cs; lo < hi; i++ {
			off := i * n.Stride
			if n.Op == ddtir.OpIndex {
				off = n.Offsets[i]
			}
			l, h := lo-i*cs, min(hi-i*cs, cs)
			walk(n.Child, o+off, l, h, p, t, pack)
			p = p[h-l:]
			lo += h - l
		}
	case ddtir.OpBlocks, ddtir.OpStruct:
		i := sort.Search(len(n.Offsets), func(i int) bool { return n.Prefix[i+1] > lo })
		for ; lo < hi; i++ {
			start, size := n.Prefix[i], n.Prefix[i+1]-n.Prefix[i]
			l, h := lo-start, min(hi-start, size)
			if n.Op == ddtir.OpBlocks {
				a := o + n.Offsets[i] + l
				if pack {
					copy(p[:h-l], t[a:a+h-l])
				} else {
					copy(t[a:a+h-l], p[:h-l])
				}
			} else {
				walk(n.Children[i], o+n.Offsets[i], l, h, p, t, pack)
			}
			p = p[h-l:]
			lo += h - l
		}
	}
}
