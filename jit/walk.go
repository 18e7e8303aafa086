package jit

import (
	"runtime"
	"sort"
	"unsafe"

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
		piece(p, t, o+lo, hi-lo, pack)
	case ddtir.OpLoop, ddtir.OpIndex:
		cs := n.Child.Size
		if n.Child.Op == ddtir.OpBlock {
			blockRun(n, o, lo, hi, p, t, pack)
			return
		}
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
				piece(p, t, o+n.Offsets[i]+l, h-l, pack)
			} else {
				walk(n.Children[i], o+n.Offsets[i], l, h, p, t, pack)
			}
			p = p[h-l:]
			lo += h - l
		}
	}
}

// blockRun is walk for a loop or an index list of blocks (LAMMPS's index
// lists of atoms): the whole blocks between the window's ends are moved
// in a loop of fixed-size copies, without a recursive call per block.
func blockRun(n *ddtir.Node, o, lo, hi int64, p, t []byte, pack bool) {
	c := n.Child
	cs := c.Len
	o += c.Disp
	at := func(i int64) int64 {
		if n.Op == ddtir.OpIndex {
			return o + n.Offsets[i]
		}
		return o + i*n.Stride
	}
	i := lo / cs
	if r := lo - i*cs; r != 0 || hi-lo < cs { // a block cut by the start
		h := min(hi-i*cs, cs)
		piece(p, t, at(i)+r, h-r, pack)
		p = p[h-r:]
		lo += h - r
		i++
	}
	whole := (hi - lo) / cs
	q := whole * cs
	var offs []int64
	stride := int64(0)
	if n.Op == ddtir.OpIndex {
		offs = n.Offsets[i : i+whole]
	} else {
		stride = n.Stride
	}
	switch cs {
	case 4:
		moveBlocks[[4]byte](p[:q], t, o, i, whole, stride, offs, pack)
	case 8:
		moveBlocks[[8]byte](p[:q], t, o, i, whole, stride, offs, pack)
	case 12:
		moveBlocks[[12]byte](p[:q], t, o, i, whole, stride, offs, pack)
	case 16:
		moveBlocks[[16]byte](p[:q], t, o, i, whole, stride, offs, pack)
	case 24:
		moveBlocks[[24]byte](p[:q], t, o, i, whole, stride, offs, pack)
	case 32:
		moveBlocks[[32]byte](p[:q], t, o, i, whole, stride, offs, pack)
	default:
		for k := int64(0); k < whole; k++ {
			piece(p[k*cs:], t, at(i+k), cs, pack)
		}
	}
	i += whole
	lo += q
	if lo < hi { // a block cut by the end
		piece(p[q:], t, at(i), hi-lo, pack)
	}
}

// piece copies k bytes between the window p (from its start) and the
// typed buffer t (from a): into p for a pack, out of it for an unpack.
func piece(p, t []byte, a, k int64, pack bool) {
	if pack {
		copy(p[:k], t[a:a+k])
	} else {
		copy(t[a:a+k], p[:k])
	}
}

// moveBlocks moves whole blocks of T's size between the window p (one
// after the other) and the typed buffer t: instance i+k at o+offs[k] (an
// index list) or o+(i+k)*stride (a loop). The kernel checked the typed
// buffer's bounds for the whole window before it ran, as the generated
// code relies on; p holds exactly the blocks.
func moveBlocks[T any](p, t []byte, o, i, whole, stride int64, offs []int64, pack bool) {
	if whole == 0 {
		return
	}
	pp := unsafe.Pointer(unsafe.SliceData(p))
	tp := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t)), o)
	sz := unsafe.Sizeof(*new(T))
	switch {
	case offs != nil && pack:
		for k, off := range offs {
			*(*T)(unsafe.Add(pp, uintptr(k)*sz)) = *(*T)(unsafe.Add(tp, off))
		}
	case offs != nil:
		for k, off := range offs {
			*(*T)(unsafe.Add(tp, off)) = *(*T)(unsafe.Add(pp, uintptr(k)*sz))
		}
	case pack:
		for k, a := int64(0), i*stride; k < whole; k, a = k+1, a+stride {
			*(*T)(unsafe.Add(pp, uintptr(k)*sz)) = *(*T)(unsafe.Add(tp, a))
		}
	default:
		for k, a := int64(0), i*stride; k < whole; k, a = k+1, a+stride {
			*(*T)(unsafe.Add(tp, a)) = *(*T)(unsafe.Add(pp, uintptr(k)*sz))
		}
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(t)
}
