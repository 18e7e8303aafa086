//go:build weft_purego

package ddt

import "encoding/binary"

// Leaf loops in plain Go, every access bounds-checked by the compiler. Built
// with -tags weft_purego instead of leaf_unsafe.go; slower, and the
// reference that the unsafe leaves must match.

var le = binary.LittleEndian

// packStrided copies count blocks of l bytes at t[a + i*stride] to p.
func packStrided(p, t []byte, a, stride, count, l int64) {
	switch l {
	case 8:
		for i := int64(0); i < count; i++ {
			le.PutUint64(p[i*8:], le.Uint64(t[a:]))
			a += stride
		}
	case 4:
		for i := int64(0); i < count; i++ {
			le.PutUint32(p[i*4:], le.Uint32(t[a:]))
			a += stride
		}
	case 16:
		for i := int64(0); i < count; i++ {
			q := p[i*16 : i*16+16]
			s := t[a : a+16]
			le.PutUint64(q, le.Uint64(s))
			le.PutUint64(q[8:], le.Uint64(s[8:]))
			a += stride
		}
	case 2:
		for i := int64(0); i < count; i++ {
			le.PutUint16(p[i*2:], le.Uint16(t[a:]))
			a += stride
		}
	case 1:
		for i := int64(0); i < count; i++ {
			p[i] = t[a]
			a += stride
		}
	default:
		q := int64(0)
		for i := int64(0); i < count; i++ {
			copy(p[q:q+l], t[a:a+l])
			q += l
			a += stride
		}
	}
}

// unpackStrided is the reverse of packStrided.
func unpackStrided(p, t []byte, a, stride, count, l int64) {
	switch l {
	case 8:
		for i := int64(0); i < count; i++ {
			le.PutUint64(t[a:], le.Uint64(p[i*8:]))
			a += stride
		}
	case 4:
		for i := int64(0); i < count; i++ {
			le.PutUint32(t[a:], le.Uint32(p[i*4:]))
			a += stride
		}
	case 16:
		for i := int64(0); i < count; i++ {
			q := p[i*16 : i*16+16]
			s := t[a : a+16]
			le.PutUint64(s, le.Uint64(q))
			le.PutUint64(s[8:], le.Uint64(q[8:]))
			a += stride
		}
	case 2:
		for i := int64(0); i < count; i++ {
			le.PutUint16(t[a:], le.Uint16(p[i*2:]))
			a += stride
		}
	case 1:
		for i := int64(0); i < count; i++ {
			t[a] = p[i]
			a += stride
		}
	default:
		q := int64(0)
		for i := int64(0); i < count; i++ {
			copy(t[a:a+l], p[q:q+l])
			q += l
			a += stride
		}
	}
}

// packIndexed copies blocks of l bytes at t[o + offs[i]] to p.
func packIndexed(p, t []byte, o int64, offs []int64, l, lo, hi int64) {
	switch l {
	case 8:
		for i, off := range offs {
			le.PutUint64(p[i*8:], le.Uint64(t[o+off:]))
		}
	case 4:
		for i, off := range offs {
			le.PutUint32(p[i*4:], le.Uint32(t[o+off:]))
		}
	default:
		q := int64(0)
		for _, off := range offs {
			a := o + off
			copy(p[q:q+l], t[a:a+l])
			q += l
		}
	}
}

// unpackIndexed is the reverse of packIndexed.
func unpackIndexed(p, t []byte, o int64, offs []int64, l, lo, hi int64) {
	switch l {
	case 8:
		for i, off := range offs {
			le.PutUint64(t[o+off:], le.Uint64(p[i*8:]))
		}
	case 4:
		for i, off := range offs {
			le.PutUint32(t[o+off:], le.Uint32(p[i*4:]))
		}
	default:
		q := int64(0)
		for _, off := range offs {
			a := o + off
			copy(t[a:a+l], p[q:q+l])
			q += l
		}
	}
}

// moveBlocks moves the blocks (offs[i], lens[i]) at origin o, in order,
// between t and p; [lo, hi) bounds every block in t.
func moveBlocks(p, t []byte, o int64, offs, lens []int64, lo, hi int64, un bool) {
	q := int64(0)
	for i, off := range offs {
		l := lens[i]
		a := o + off
		if un {
			copy(t[a:a+l], p[q:q+l])
		} else {
			copy(p[q:q+l], t[a:a+l])
		}
		q += l
	}
}

// moveGrid moves cols columns (column stride cs) of rows blocks of l bytes
// (row stride rs) between t and p: block (c, r) at t[a + c*cs + r*rs] is
// p[(c*rows + r)*l]. It walks tiles of tw columns row by row.
func moveGrid(p, t []byte, a, cs, cols, rs, rows, l, tw int64, un bool) {
	rl := rows * l
	for c0 := int64(0); c0 < cols; c0 += tw {
		c1 := min(cols, c0+tw)
		for r := int64(0); r < rows; r++ {
			for c := c0; c < c1; c++ {
				ta, pa := a+c*cs+r*rs, c*rl+r*l
				if un {
					copy(t[ta:ta+l], p[pa:pa+l])
				} else {
					copy(p[pa:pa+l], t[ta:ta+l])
				}
			}
		}
	}
}
