// Package ddttest is the conformance kit for ddt kernels: a naive reference
// packer built only from the public constructor contents of a type
// (Type.Contents), a generator of random type trees, and CheckKernel, which
// drives any ddt.Kernel (the interpreter, package jit's native code, a GPU
// kernel's CPU emulation) through random counts, bases, stream offsets and
// window lengths and compares every byte with the reference.
//
// It is meant for tests; it allocates freely and is slow by design.
package ddttest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// Entry is one basic element of a type map: Size bytes at displacement Disp.
type Entry struct{ Disp, Size int64 }

// TypeMap returns the MPI type map of one element of t, in packing order,
// computed from the constructor arguments (never from the IR).
func TypeMap(t *ddt.Type) []Entry {
	if t.Size() == 0 { // empty, however large its (zero-size) parts' counts
		return nil
	}
	c := t.Contents()
	switch c.Combiner {
	case ddt.CombinerNamed:
		return []Entry{{0, t.Size()}}
	case ddt.CombinerContiguous:
		return repl(TypeMap(c.Types[0]), c.Types[0].Extent(), 1, int64(c.Ints[0]), 0)
	case ddt.CombinerVector:
		o := c.Types[0]
		return repl(TypeMap(o), o.Extent(), int64(c.Ints[0]), int64(c.Ints[1]), int64(c.Ints[2])*o.Extent())
	case ddt.CombinerHVector:
		o := c.Types[0]
		return repl(TypeMap(o), o.Extent(), int64(c.Ints[0]), int64(c.Ints[1]), c.Addrs[0])
	case ddt.CombinerIndexed, ddt.CombinerHIndexed, ddt.CombinerIndexedBlock, ddt.CombinerHIndexedBlock:
		o := c.Types[0]
		ext := o.Extent()
		nb := c.Ints[0]
		m := TypeMap(o)
		var out []Entry
		if len(m) == 0 {
			return out
		}
		for i := 0; i < nb; i++ {
			var bl, d int64
			switch c.Combiner {
			case ddt.CombinerIndexed:
				bl, d = int64(c.Ints[1+i]), int64(c.Ints[1+nb+i])*ext
			case ddt.CombinerHIndexed:
				bl, d = int64(c.Ints[1+i]), c.Addrs[i]
			case ddt.CombinerIndexedBlock:
				bl, d = int64(c.Ints[1]), int64(c.Ints[2+i])*ext
			default:
				bl, d = int64(c.Ints[1]), c.Addrs[i]
			}
			for j := int64(0); j < bl; j++ {
				for _, e := range m {
					out = append(out, Entry{d + j*ext + e.Disp, e.Size})
				}
			}
		}
		return out
	case ddt.CombinerStruct:
		var out []Entry
		for i, tt := range c.Types {
			m := TypeMap(tt)
			if len(m) == 0 {
				continue
			}
			for j := int64(0); j < int64(c.Ints[1+i]); j++ {
				for _, e := range m {
					out = append(out, Entry{c.Addrs[i] + j*tt.Extent() + e.Disp, e.Size})
				}
			}
		}
		return out
	case ddt.CombinerSubarray:
		n := c.Ints[0]
		sizes, subs, starts := c.Ints[1:1+n], c.Ints[1+n:1+2*n], c.Ints[1+2*n:1+3*n]
		order := ddt.Order(c.Ints[1+3*n])
		o := c.Types[0]
		m := TypeMap(o)
		dim := func(k int) int { // k-th fastest dimension
			if order == ddt.OrderC {
				return n - 1 - k
			}
			return k
		}
		st := make([]int64, n)
		acc := int64(1)
		for k := 0; k < n; k++ {
			st[dim(k)] = acc
			acc *= int64(sizes[dim(k)])
		}
		idx := make([]int, n)
		var out []Entry
		for {
			var e int64
			for d := 0; d < n; d++ {
				e += int64(starts[d]+idx[d]) * st[d]
			}
			for _, x := range m {
				out = append(out, Entry{e*o.Extent() + x.Disp, x.Size})
			}
			k := 0
			for ; k < n; k++ {
				d := dim(k)
				idx[d]++
				if idx[d] < subs[d] {
					break
				}
				idx[d] = 0
			}
			if k == n {
				return out
			}
		}
	case ddt.CombinerResized, ddt.CombinerDup:
		return TypeMap(c.Types[0])
	case ddt.CombinerDarray:
		return darrayMap(c)
	}
	panic("ddttest: unknown combiner " + c.Combiner.String())
}

func repl(m []Entry, ext, count, bl, stride int64) []Entry {
	var out []Entry
	if len(m) == 0 { // an empty type: no loop over (possibly huge) counts
		return out
	}
	for i := int64(0); i < count; i++ {
		for j := int64(0); j < bl; j++ {
			for _, e := range m {
				out = append(out, Entry{i*stride + j*ext + e.Disp, e.Size})
			}
		}
	}
	return out
}

// Pack packs count elements of typed (displacement 0 of element 0 at
// typed[base]) the naive way: type map entry by entry.
func Pack(t *ddt.Type, typed []byte, base int64, count int) []byte {
	m := TypeMap(t)
	var out []byte
	for k := 0; k < count; k++ {
		o := base + int64(k)*t.Extent()
		for _, e := range m {
			out = append(out, typed[o+e.Disp:o+e.Disp+e.Size]...)
		}
	}
	return out
}

// UnpackRange returns a copy of typed after writing window, the stream bytes
// [from, from+len(window)) of count elements, the naive way: byte by byte,
// only the bytes whose stream position lies in the window.
func UnpackRange(t *ddt.Type, typed, window []byte, base int64, count int, from int64) []byte {
	out := append([]byte(nil), typed...)
	m := TypeMap(t)
	q := int64(0)
	end := from + int64(len(window))
	for k := 0; k < count; k++ {
		o := base + int64(k)*t.Extent()
		for _, e := range m {
			for b := int64(0); b < e.Size; b++ {
				if q >= from && q < end {
					out[o+e.Disp+b] = window[q-from]
				}
				q++
			}
		}
	}
	return out
}

// Layout returns a typed buffer length and a base that fit count elements of
// t with a few bytes of slack on both sides.
func Layout(t *ddt.Type, count int) (n int, base int64) {
	if count == 0 || t.Size() == 0 {
		return 16, 0
	}
	lo := t.TrueLB() + min(0, int64(count-1)*t.Extent())
	hi := t.TrueLB() + t.TrueExtent() + max(0, int64(count-1)*t.Extent())
	base = max(0, -lo) + 3
	return int(base + hi + 5), base
}

// RandomType returns a random type tree of depth ≤ depth built with every
// constructor (negative strides and displacements, resized bounds,
// subarrays and distributed arrays in both orders, index lists with
// touching runs), some of its subtrees committed. It is not committed
// itself.
func RandomType(r *rand.Rand, depth int) *ddt.Type {
	g := &gen{r: r}
	return g.typ(depth)
}

// darray draws a Darray of nd dimensions: block, cyclic and undistributed
// ones, default and explicit block sizes, a random process of the grid.
func (g *gen) darray(nd int, old *ddt.Type) (*ddt.Type, error) {
	gs, ds, as, ps := make([]int, nd), make([]ddt.Distribution, nd), make([]int, nd), make([]int, nd)
	size := 1
	for i := range nd {
		gs[i], ds[i], as[i], ps[i] = 1+g.small(5), ddt.Distribution(1+g.small(3)), ddt.DistributeDefaultArg, 1+g.small(3)
		if ds[i] == ddt.DistributeNone {
			ps[i] = 1
		}
		if g.r.IntN(2) == 0 {
			as[i] = 1 + g.small(3)
			if ds[i] == ddt.DistributeBlock && as[i]*ps[i] < gs[i] {
				as[i] = (gs[i] + ps[i] - 1) / ps[i]
			}
		}
		size *= ps[i]
	}
	return ddt.Darray(size, g.small(size), gs, ds, as, ps, ddt.Order(g.small(2)), old)
}

// RandomExtremeType is RandomType with extreme arguments mixed in: extents,
// strides and displacements near ±2^62, ±2^31, math.MinInt64 and
// math.MaxInt64, displacements that cancel one drawn earlier (so that a
// type can touch few bytes while its parts lie 2^62 apart), and large counts
// and block lengths. Its types are for testing that overflow is caught:
// most cannot be packed in any real buffer, some only one element at a time.
//
// Constructors and Commit reject many such arguments. Each rejection must
// wrap ddt.ErrOverflow (the generator then keeps the sub-type it had);
// RandomExtremeType returns the first error that does not, together with
// the type built so far. The type is not committed itself.
func RandomExtremeType(r *rand.Rand, depth int) (*ddt.Type, error) {
	g := &gen{r: r, extreme: true}
	t := g.typ(depth)
	return t, g.err
}

type gen struct {
	r     *rand.Rand
	nodes int
	// extreme mode (RandomExtremeType)
	extreme bool
	last    int64 // the last extreme value drawn, for cancelling pairs
	err     error // the first rejection that does not wrap ErrOverflow
}

var extremes = []int64{1 << 62, 1<<62 + 16, -(1 << 62), -(1<<62 + 16), 1 << 61, 1<<61 + 8, 1 << 31, -(1 << 31),
	1<<32 + 8, math.MaxInt64, math.MinInt64, math.MaxInt64 - 7, math.MinInt64 + 8, math.MaxInt64/3 + 1, math.MaxInt64 / 2}

// x returns v, or in extreme mode now and then an extreme value instead.
func (g *gen) x(v int64) int64 {
	if !g.extreme || g.r.IntN(5) != 0 {
		return v
	}
	if g.last != 0 && g.last != math.MinInt64 && g.r.IntN(3) == 0 {
		v = -g.last
	} else {
		v = extremes[g.r.IntN(len(extremes))]
	}
	g.last = v
	return v
}

// xi is x for int arguments.
func (g *gen) xi(v int) int { return int(g.x(int64(v))) }

func (g *gen) small(n int) int { return g.r.IntN(n) }

func (g *gen) cnt(n int) int {
	if g.r.IntN(10) == 0 {
		return 0
	}
	if g.extreme && g.r.IntN(8) == 0 {
		return []int{1 << 16, 1<<31 - 1, 1 << 40, math.MaxInt32 + 1, math.MaxInt64 / 3}[g.r.IntN(5)]
	}
	return 1 + g.r.IntN(n)
}

// length draws a list length: cnt without extremes.
func (g *gen) length(n int) int {
	if g.r.IntN(10) == 0 {
		return 0
	}
	return 1 + g.r.IntN(n)
}

// reject handles a constructor or Commit error in extreme mode and reports
// whether the new type is to be dropped.
func (g *gen) reject(err error) bool {
	if err == nil {
		return false
	}
	if !g.extreme {
		panic(fmt.Sprintf("ddttest: generator made a bad type: %v", err))
	}
	if !errors.Is(err, ddt.ErrOverflow) && g.err == nil {
		g.err = fmt.Errorf("ddttest: extreme arguments rejected without ErrOverflow: %w", err)
	}
	return true
}

func (g *gen) typ(d int) *ddt.Type {
	basics := []*ddt.Type{ddt.Byte, ddt.Int16, ddt.Int32, ddt.Float64, ddt.Complex128, ddt.Uint8, ddt.Float32}
	g.nodes++
	if d == 0 || g.nodes > 12 || g.r.IntN(5) == 0 {
		return basics[g.r.IntN(len(basics))]
	}
	old := g.typ(d - 1)
	disp := func() int64 { return g.x(int64(g.r.IntN(64)) - 16) }
	var t *ddt.Type
	var err error
	switch g.r.IntN(13) {
	case 0:
		t, err = ddt.Contiguous(g.cnt(3), old)
	case 1:
		t, err = ddt.Vector(g.cnt(3), g.cnt(2), g.xi(g.small(7)-3), old)
	case 2:
		t, err = ddt.HVector(g.cnt(3), g.cnt(2), g.x(int64(g.r.IntN(80)-30)), old)
	case 3:
		n := g.length(4)
		bl, ds := make([]int, n), make([]int, n)
		for i := range bl {
			bl[i], ds[i] = g.cnt(2), g.xi(g.small(12)-3)
		}
		t, err = ddt.Indexed(bl, ds, old)
	case 4:
		n := g.length(4)
		bl, ds := make([]int, n), make([]int64, n)
		for i := range bl {
			bl[i], ds[i] = g.cnt(2), disp()
		}
		t, err = ddt.HIndexed(bl, ds, old)
	case 5:
		n := g.length(4)
		ds := make([]int64, n)
		for i := range ds {
			ds[i] = disp()
		}
		t, err = ddt.HIndexedBlock(g.cnt(2), ds, old)
	case 6:
		n := 1 + g.small(3)
		bl, ds, ts := make([]int, n), make([]int64, n), make([]*ddt.Type, n)
		for i := range bl {
			bl[i], ds[i], ts[i] = g.cnt(2), disp(), old
			if i > 0 && g.r.IntN(2) == 0 {
				ts[i] = g.typ(d - 1)
			}
		}
		t, err = ddt.Struct(bl, ds, ts)
	case 7:
		nd := 1 + g.small(3)
		if g.r.IntN(3) == 0 {
			t, err = g.darray(nd, old)
			break
		}
		sz, sub, st := make([]int, nd), make([]int, nd), make([]int, nd)
		for i := range sz {
			sz[i] = 1 + g.small(4)
			sub[i] = 1 + g.small(sz[i])
			st[i] = g.small(sz[i] - sub[i] + 1)
		}
		t, err = ddt.Subarray(sz, sub, st, ddt.Order(g.small(2)), old)
	case 8:
		t, err = ddt.Resized(old, g.x(int64(g.r.IntN(20)-8)), g.x(int64(g.r.IntN(40)-8)))
	case 9:
		t, err = ddt.Dup(old)
	default:
		n := 1 + g.small(12)
		ds := make([]int, n)
		x := g.small(4) - 2
		for i := range ds {
			ds[i] = g.xi(x)
			if g.r.IntN(3) == 0 {
				x += 2 + g.small(5)
			} else {
				x++
			}
		}
		if g.r.IntN(4) == 0 {
			g.r.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		}
		t, err = ddt.IndexedBlock(1+g.small(2), ds, old)
	}
	if g.reject(err) {
		return old
	}
	if g.r.IntN(4) == 0 {
		if err := t.Commit(); err != nil {
			if !g.extreme {
				panic(err)
			}
			g.reject(err)
			return old
		}
	}
	return t
}

// CheckKernel runs trials random calls of k, a kernel for the committed type
// ty, and compares each with the reference packer: random count (0–4),
// base with slack, stream offset and window length, for Pack and Unpack;
// plus a whole stream packed and unpacked in random segments. The
// arguments are always in range (ddt.Kernel), so a kernel that skips all
// checks, as the module's internal kernels do, can be driven too.
func CheckKernel(tb testing.TB, ty *ddt.Type, k ddt.Kernel, r *rand.Rand, trials int) {
	tb.Helper()
	for trial := 0; trial < trials; trial++ {
		count := r.IntN(5)
		n, base := Layout(ty, count)
		typed := make([]byte, n)
		for i := range typed {
			typed[i] = byte(r.Uint32())
		}
		want := Pack(ty, typed, base, count)
		total := int64(len(want))
		from := int64(0)
		if total > 0 {
			from = r.Int64N(total + 1)
		}
		win := r.IntN(int(total-from) + 3)
		packed := make([]byte, win)
		got, err := k.Pack(packed, typed, base, count, from)
		wantN := min(int64(win), total-from)
		if err != nil || int64(got) != wantN || !bytes.Equal(packed[:got], want[from:from+wantN]) {
			tb.Fatalf("%v count %d base %d: Pack(from %d, len %d) = %d, %v; want %d bytes %x, got %x\nIR:\n%s",
				ty, count, base, from, win, got, err, wantN, want[from:from+wantN], packed[:max(got, 0)], ty.DumpIR())
		}
		stream := make([]byte, wantN)
		for i := range stream {
			stream[i] = byte(r.Uint32())
		}
		dst := append([]byte(nil), typed...)
		got, err = k.Unpack(dst, stream, base, count, from)
		if err != nil || int64(got) != wantN || !bytes.Equal(dst, UnpackRange(ty, typed, stream, base, count, from)) {
			tb.Fatalf("%v count %d base %d: Unpack(from %d, len %d) = %d, %v or bytes differ\nIR:\n%s",
				ty, count, base, from, wantN, got, err, ty.DumpIR())
		}
		// The whole stream in random segments.
		seg := make([]byte, 0, total)
		for off := int64(0); off < total; {
			w := 1 + r.Int64N(min(total-off, 97))
			buf := make([]byte, w)
			m, err := k.Pack(buf, typed, base, count, off)
			if err != nil || int64(m) != w {
				tb.Fatalf("%v: segment at %d len %d: %d, %v", ty, off, w, m, err)
			}
			seg = append(seg, buf...)
			off += w
		}
		if !bytes.Equal(seg, want) {
			tb.Fatalf("%v count %d: segmented pack differs\nIR:\n%s", ty, count, ty.DumpIR())
		}
	}
}

// darrayMap expands a Darray from MPI's definition: every element of the
// global array, in storage order, that the process owns in every
// dimension (block: index / block size is its coordinate; cyclic: that
// modulo the dimension's processes is).
func darrayMap(c ddt.Contents) []Entry {
	rank, n := c.Ints[1], c.Ints[2]
	g := c.Ints[3 : 3+n]
	dist, darg, ps := c.Ints[3+n:3+2*n], c.Ints[3+2*n:3+3*n], c.Ints[3+3*n:3+4*n]
	order := ddt.Order(c.Ints[3+4*n])
	coord := make([]int, n)
	for i, r := n-1, rank; i >= 0; i-- {
		coord[i], r = r%ps[i], r/ps[i]
	}
	owns := func(d, i int) bool {
		switch ddt.Distribution(dist[d]) {
		case ddt.DistributeBlock:
			b := darg[d]
			if b == ddt.DistributeDefaultArg {
				b = (g[d] + ps[d] - 1) / ps[d]
			}
			return i/b == coord[d]
		case ddt.DistributeCyclic:
			b := darg[d]
			if b == ddt.DistributeDefaultArg {
				b = 1
			}
			return (i/b)%ps[d] == coord[d]
		}
		return true
	}
	m := TypeMap(c.Types[0])
	ext := c.Types[0].Extent()
	dim := func(k int) int { // k-th fastest dimension
		if order == ddt.OrderC {
			return n - 1 - k
		}
		return k
	}
	idx := make([]int, n)
	var out []Entry
	for lin := int64(0); ; lin++ {
		mine := true
		for d := range n {
			mine = mine && owns(d, idx[d])
		}
		if mine {
			for _, x := range m {
				out = append(out, Entry{lin*ext + x.Disp, x.Size})
			}
		}
		k := 0
		for ; k < n; k++ {
			d := dim(k)
			if idx[d]++; idx[d] < g[d] {
				break
			}
			idx[d] = 0
		}
		if k == n {
			return out
		}
	}
}

// Limits bound what RandomLayout draws.
type Limits struct {
	Depth    int   // of the type tree (RandomType)
	MaxBytes int64 // packed bytes of count elements
	MaxSpan  int   // bytes from the buffer's start past the last element (Layout)
	Disjoint bool  // no byte written twice: a target layout
}

// RandomLayout draws, from r, a committed random type (RandomType) and a
// count of 1 to 3 that a buffer can hold from its start: nothing below
// displacement 0, a positive extent, some data, within lim.
func RandomLayout(r *rand.Rand, lim Limits) (*ddt.Type, int) {
	for {
		t := RandomType(r, lim.Depth)
		count := 1 + r.IntN(3)
		if t.Size() == 0 || t.Extent() <= 0 || t.TrueLB() < 0 || t.Size()*int64(count) > lim.MaxBytes {
			continue
		}
		if n, _ := Layout(t, count); n > lim.MaxSpan {
			continue
		}
		if err := t.Commit(); err != nil {
			panic(fmt.Sprintf("ddttest: commit of a random type: %v", err))
		}
		if lim.Disjoint && Overlaps(t, count) {
			continue
		}
		return t, count
	}
}

// Overlaps reports whether count elements of t cover some byte twice.
func Overlaps(t *ddt.Type, count int) bool {
	type span struct{ lo, hi int64 }
	var ss []span
	m := TypeMap(t)
	for k := range int64(count) {
		for _, e := range m {
			ss = append(ss, span{k*t.Extent() + e.Disp, k*t.Extent() + e.Disp + e.Size})
		}
	}
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for i := 1; i < len(ss); i++ {
		if ss[i].lo < ss[i-1].hi {
			return true
		}
	}
	return false
}
