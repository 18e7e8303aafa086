//go:build !weft_purego

package ddt

// Why unsafe here?
//
// The leaf loops move the bytes. Written with slices, each 4- or 8-byte move
// costs four bounds checks (two reslices, two length checks) and a
// non-inlined memmove call for any other length; on strided 8-byte elements
// that made the interpreter 2.5× slower than a hand-written loop over a
// []float64. Here each leaf loop checks its whole range once, with exact
// arithmetic, against the slices it is given, and then moves words through
// unsafe pointers.
//
// Guards: every pointer formed points inside the slice it came from (offsets
// are computed as integers and only turned into pointers for bytes in the
// checked range, so no pointer ever points past an allocation). A failed range
// check panics with a leafBoundsError, which Type.run turns into an error;
// it means a bug in the interpreter, since Type.check has already validated
// the buffers. Loads and stores of uint16/32/64 at unaligned addresses are
// fine on amd64 and arm64 and allowed by checkptr (the types hold no
// pointers). Build with -tags weft_purego to use leaf_purego.go instead:
// the same loops with ordinary bounds-checked slices.

import (
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/internal/checked"
)

// leafBoundsError is the panic value of a leaf loop whose range check fails.
type leafBoundsError struct {
	what          string
	lo, hi, limit int64
}

// Error describes the failed range check.
func (e *leafBoundsError) Error() string {
	return fmt.Sprintf("ddt: internal: %s range [%d,%d) outside [0,%d)", e.what, e.lo, e.hi, e.limit)
}

func checkRange(what string, lo, hi int64, n int) {
	if lo < 0 || hi < lo || hi > int64(n) {
		panic(&leafBoundsError{what, lo, hi, int64(n)})
	}
}

// checkStrided checks count blocks of l bytes at a + i*stride in t and the
// packed run count*l in p, with overflow-checked arithmetic.
func checkStrided(p, t []byte, a, stride, count, l int64) {
	n, ok := checked.Mul(count, l)
	if !ok {
		panic(&leafBoundsError{"packed", 0, count, int64(len(p))})
	}
	checkRange("packed", 0, n, len(p))
	last, ok := checked.MulAdd(count-1, stride, a)
	var hi int64
	if ok {
		hi, ok = checked.Add(max(a, last), l)
	}
	if !ok {
		panic(&leafBoundsError{"typed", a, a, int64(len(t))})
	}
	checkRange("typed", min(a, last), hi, len(t))
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// mv copies l > 0 bytes from s to d (not overlapping), with word moves for
// short blocks and memmove for long ones.
func mv(d, s unsafe.Pointer, l int64) {
	switch {
	case l >= 8 && l <= 16:
		w0, w1 := *(*uint64)(s), *(*uint64)(unsafe.Add(s, l-8))
		*(*uint64)(d), *(*uint64)(unsafe.Add(d, l-8)) = w0, w1
	case l >= 4 && l < 8:
		w0, w1 := *(*uint32)(s), *(*uint32)(unsafe.Add(s, l-4))
		*(*uint32)(d), *(*uint32)(unsafe.Add(d, l-4)) = w0, w1
	case l > 16 && l <= 32:
		w0, w1 := *(*uint64)(s), *(*uint64)(unsafe.Add(s, 8))
		w2, w3 := *(*uint64)(unsafe.Add(s, l-16)), *(*uint64)(unsafe.Add(s, l-8))
		*(*uint64)(d), *(*uint64)(unsafe.Add(d, 8)) = w0, w1
		*(*uint64)(unsafe.Add(d, l-16)), *(*uint64)(unsafe.Add(d, l-8)) = w2, w3
	case l > 32 && l <= 64:
		for i := int64(0); i < l-8; i += 8 {
			*(*uint64)(unsafe.Add(d, i)) = *(*uint64)(unsafe.Add(s, i))
		}
		*(*uint64)(unsafe.Add(d, l-8)) = *(*uint64)(unsafe.Add(s, l-8))
	case l < 4:
		*(*uint8)(d) = *(*uint8)(s)
		if l > 1 {
			*(*uint16)(unsafe.Add(d, l-2)) = *(*uint16)(unsafe.Add(s, l-2))
		}
	default:
		copy(unsafe.Slice((*byte)(d), l), unsafe.Slice((*byte)(s), l))
	}
}

// packStrided copies count blocks of l bytes at t[a + i*stride] to p.
func packStrided(p, t []byte, a, stride, count, l int64) {
	if count <= 0 {
		return
	}
	checkStrided(p, t, a, stride, count, l)
	d, s := ptr(p), ptr(t)
	switch l {
	case 8:
		for i := int64(0); i < count; i++ {
			*(*uint64)(unsafe.Add(d, i*8)) = *(*uint64)(unsafe.Add(s, a))
			a += stride
		}
	case 4:
		for i := int64(0); i < count; i++ {
			*(*uint32)(unsafe.Add(d, i*4)) = *(*uint32)(unsafe.Add(s, a))
			a += stride
		}
	case 16:
		for i := int64(0); i < count; i++ {
			q, r := unsafe.Add(d, i*16), unsafe.Add(s, a)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8))
			a += stride
		}
	case 2:
		for i := int64(0); i < count; i++ {
			*(*uint16)(unsafe.Add(d, i*2)) = *(*uint16)(unsafe.Add(s, a))
			a += stride
		}
	case 1:
		for i := int64(0); i < count; i++ {
			*(*uint8)(unsafe.Add(d, i)) = *(*uint8)(unsafe.Add(s, a))
			a += stride
		}
	default:
		if l&7 == 0 && l <= 64 {
			for i := int64(0); i < count; i++ {
				q, r := unsafe.Add(d, i*l), unsafe.Add(s, a)
				for w := int64(0); w < l; w += 8 {
					*(*uint64)(unsafe.Add(q, w)) = *(*uint64)(unsafe.Add(r, w))
				}
				a += stride
			}
			return
		}
		for i := int64(0); i < count; i++ {
			mv(unsafe.Add(d, i*l), unsafe.Add(s, a), l)
			a += stride
		}
	}
}

// unpackStrided is the reverse of packStrided.
func unpackStrided(p, t []byte, a, stride, count, l int64) {
	if count <= 0 {
		return
	}
	checkStrided(p, t, a, stride, count, l)
	s, d := ptr(p), ptr(t)
	switch l {
	case 8:
		for i := int64(0); i < count; i++ {
			*(*uint64)(unsafe.Add(d, a)) = *(*uint64)(unsafe.Add(s, i*8))
			a += stride
		}
	case 4:
		for i := int64(0); i < count; i++ {
			*(*uint32)(unsafe.Add(d, a)) = *(*uint32)(unsafe.Add(s, i*4))
			a += stride
		}
	case 16:
		for i := int64(0); i < count; i++ {
			q, r := unsafe.Add(d, a), unsafe.Add(s, i*16)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8))
			a += stride
		}
	case 2:
		for i := int64(0); i < count; i++ {
			*(*uint16)(unsafe.Add(d, a)) = *(*uint16)(unsafe.Add(s, i*2))
			a += stride
		}
	case 1:
		for i := int64(0); i < count; i++ {
			*(*uint8)(unsafe.Add(d, a)) = *(*uint8)(unsafe.Add(s, i))
			a += stride
		}
	default:
		if l&7 == 0 && l <= 64 {
			for i := int64(0); i < count; i++ {
				q, r := unsafe.Add(d, a), unsafe.Add(s, i*l)
				for w := int64(0); w < l; w += 8 {
					*(*uint64)(unsafe.Add(q, w)) = *(*uint64)(unsafe.Add(r, w))
				}
				a += stride
			}
			return
		}
		for i := int64(0); i < count; i++ {
			mv(unsafe.Add(d, a), unsafe.Add(s, i*l), l)
			a += stride
		}
	}
}

// checkGrid checks cols × rows blocks of l bytes at t[a + c*cs + r*rs]
// (cs, rs > 0) and the packed run cols*rows*l.
func checkGrid(p, t []byte, a, cs, cols, rs, rows, l int64) {
	n, ok := checked.Mul(cols, rows)
	if ok {
		n, ok = checked.Mul(n, l)
	}
	if !ok {
		panic(&leafBoundsError{"packed", 0, cols, int64(len(p))})
	}
	checkRange("packed", 0, n, len(p))
	hi, ok := checked.MulAdd(cols-1, cs, a)
	if ok {
		hi, ok = checked.MulAdd(rows-1, rs, hi)
	}
	if ok {
		hi, ok = checked.Add(hi, l)
	}
	if !ok || cs <= 0 || rs <= 0 {
		panic(&leafBoundsError{"typed", a, a, int64(len(t))})
	}
	checkRange("typed", a, hi, len(t))
}

// moveGrid moves cols columns (column stride cs) of rows blocks of l bytes
// (row stride rs) between t and p: block (c, r) at t[a + c*cs + r*rs] is
// p[(c*rows + r)*l]. It walks tiles of tw columns row by row.
func moveGrid(p, t []byte, a, cs, cols, rs, rows, l, tw int64, un bool) {
	checkGrid(p, t, a, cs, cols, rs, rows, l)
	pp, tp := ptr(p), ptr(t)
	rl := rows * l
	for c0 := int64(0); c0 < cols; c0 += tw {
		n := min(cols-c0, tw)
		for r := int64(0); r < rows; r++ {
			ts := unsafe.Add(tp, a+c0*cs+r*rs)
			ps := unsafe.Add(pp, c0*rl+r*l)
			switch {
			case l == 16 && un:
				for c := int64(0); c < n; c++ {
					q, s := unsafe.Add(ts, c*cs), unsafe.Add(ps, c*rl)
					*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(s), *(*uint64)(unsafe.Add(s, 8))
				}
			case l == 16:
				for c := int64(0); c < n; c++ {
					q, s := unsafe.Add(ps, c*rl), unsafe.Add(ts, c*cs)
					*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(s), *(*uint64)(unsafe.Add(s, 8))
				}
			case l == 8 && un:
				for c := int64(0); c < n; c++ {
					*(*uint64)(unsafe.Add(ts, c*cs)) = *(*uint64)(unsafe.Add(ps, c*rl))
				}
			case l == 8:
				for c := int64(0); c < n; c++ {
					*(*uint64)(unsafe.Add(ps, c*rl)) = *(*uint64)(unsafe.Add(ts, c*cs))
				}
			case un:
				for c := int64(0); c < n; c++ {
					mv(unsafe.Add(ts, c*cs), unsafe.Add(ps, c*rl), l)
				}
			default:
				for c := int64(0); c < n; c++ {
					mv(unsafe.Add(ps, c*rl), unsafe.Add(ts, c*cs), l)
				}
			}
		}
	}
}

// checkIndexed checks blocks of l bytes at o + offs[i], all inside the
// typed range [lo, hi) (the node's bounds), and the packed run.
func checkIndexed(p, t []byte, offs []int64, l, lo, hi int64) {
	n, ok := checked.Mul(int64(len(offs)), l)
	if !ok {
		panic(&leafBoundsError{"packed", 0, int64(len(offs)), int64(len(p))})
	}
	checkRange("packed", 0, n, len(p))
	checkRange("typed", lo, hi, len(t))
}

// packIndexed copies blocks of l bytes at t[o + offs[i]] to p; every block
// lies in t[lo:hi].
func packIndexed(p, t []byte, o int64, offs []int64, l, lo, hi int64) {
	if len(offs) == 0 {
		return
	}
	checkIndexed(p, t, offs, l, lo, hi)
	d, s := ptr(p), ptr(t)
	switch l {
	case 8:
		for i, off := range offs {
			*(*uint64)(unsafe.Add(d, int64(i)*8)) = *(*uint64)(unsafe.Add(s, o+off))
		}
	case 4:
		for i, off := range offs {
			*(*uint32)(unsafe.Add(d, int64(i)*4)) = *(*uint32)(unsafe.Add(s, o+off))
		}
	case 12:
		for i, off := range offs {
			q, r := unsafe.Add(d, int64(i)*12), unsafe.Add(s, o+off)
			*(*uint64)(q), *(*uint32)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint32)(unsafe.Add(r, 8))
		}
	case 16:
		for i, off := range offs {
			q, r := unsafe.Add(d, int64(i)*16), unsafe.Add(s, o+off)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8))
		}
	case 24:
		for i, off := range offs {
			q, r := unsafe.Add(d, int64(i)*24), unsafe.Add(s, o+off)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)), *(*uint64)(unsafe.Add(q, 16)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8)), *(*uint64)(unsafe.Add(r, 16))
		}
	default:
		for i, off := range offs {
			mv(unsafe.Add(d, int64(i)*l), unsafe.Add(s, o+off), l)
		}
	}
}

// unpackIndexed is the reverse of packIndexed.
func unpackIndexed(p, t []byte, o int64, offs []int64, l, lo, hi int64) {
	if len(offs) == 0 {
		return
	}
	checkIndexed(p, t, offs, l, lo, hi)
	s, d := ptr(p), ptr(t)
	switch l {
	case 8:
		for i, off := range offs {
			*(*uint64)(unsafe.Add(d, o+off)) = *(*uint64)(unsafe.Add(s, int64(i)*8))
		}
	case 4:
		for i, off := range offs {
			*(*uint32)(unsafe.Add(d, o+off)) = *(*uint32)(unsafe.Add(s, int64(i)*4))
		}
	case 12:
		for i, off := range offs {
			q, r := unsafe.Add(d, o+off), unsafe.Add(s, int64(i)*12)
			*(*uint64)(q), *(*uint32)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint32)(unsafe.Add(r, 8))
		}
	case 16:
		for i, off := range offs {
			q, r := unsafe.Add(d, o+off), unsafe.Add(s, int64(i)*16)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8))
		}
	case 24:
		for i, off := range offs {
			q, r := unsafe.Add(d, o+off), unsafe.Add(s, int64(i)*24)
			*(*uint64)(q), *(*uint64)(unsafe.Add(q, 8)), *(*uint64)(unsafe.Add(q, 16)) = *(*uint64)(r), *(*uint64)(unsafe.Add(r, 8)), *(*uint64)(unsafe.Add(r, 16))
		}
	default:
		for i, off := range offs {
			mv(unsafe.Add(d, o+off), unsafe.Add(s, int64(i)*l), l)
		}
	}
}

// moveBlocks moves the blocks (offs[i], lens[i]) at origin o, in order,
// between t and p; [lo, hi) bounds every block in t, and len(p) is the sum
// of lens.
func moveBlocks(p, t []byte, o int64, offs, lens []int64, lo, hi int64, un bool) {
	checkRange("typed", lo, hi, len(t))
	pp, tp := ptr(p), ptr(t)
	q := int64(0)
	np := int64(len(p))
	for i, off := range offs {
		l := lens[i]
		if q+l > np {
			panic(&leafBoundsError{"packed", q, q + l, np})
		}
		if un {
			mv(unsafe.Add(tp, o+off), unsafe.Add(pp, q), l)
		} else {
			mv(unsafe.Add(pp, q), unsafe.Add(tp, o+off), l)
		}
		q += l
	}
}
