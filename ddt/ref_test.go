package ddt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The reference packer: flatten a type to its MPI type map straight from the
// constructor arguments (never from the IR), then copy byte by byte.

type tmEntry struct{ disp, size int64 }

func typemap(t *Type) []tmEntry {
	switch t.comb {
	case CombinerNamed:
		return []tmEntry{{0, t.size}}
	case CombinerContiguous:
		return repl(typemap(t.types[0]), t.types[0].Extent(), nil, 1, int64(t.ints[0]), 0)
	case CombinerVector:
		o := t.types[0]
		return repl(typemap(o), o.Extent(), nil, int64(t.ints[0]), int64(t.ints[1]), int64(t.ints[2])*o.Extent())
	case CombinerHVector:
		o := t.types[0]
		return repl(typemap(o), o.Extent(), nil, int64(t.ints[0]), int64(t.ints[1]), t.addrs[0])
	case CombinerIndexed, CombinerHIndexed, CombinerIndexedBlock, CombinerHIndexedBlock:
		o := t.types[0]
		ext := o.Extent()
		nb := t.ints[0]
		m := typemap(o)
		var out []tmEntry
		for i := 0; i < nb; i++ {
			var bl, d int64
			switch t.comb {
			case CombinerIndexed:
				bl, d = int64(t.ints[1+i]), int64(t.ints[1+nb+i])*ext
			case CombinerHIndexed:
				bl, d = int64(t.ints[1+i]), t.addrs[i]
			case CombinerIndexedBlock:
				bl, d = int64(t.ints[1]), int64(t.ints[2+i])*ext
			case CombinerHIndexedBlock:
				bl, d = int64(t.ints[1]), t.addrs[i]
			}
			for j := int64(0); j < bl; j++ {
				for _, e := range m {
					out = append(out, tmEntry{d + j*ext + e.disp, e.size})
				}
			}
		}
		return out
	case CombinerStruct:
		var out []tmEntry
		for i, tt := range t.types {
			m := typemap(tt)
			for j := int64(0); j < int64(t.ints[1+i]); j++ {
				for _, e := range m {
					out = append(out, tmEntry{t.addrs[i] + j*tt.Extent() + e.disp, e.size})
				}
			}
		}
		return out
	case CombinerSubarray:
		n := t.ints[0]
		sizes, subs, starts := t.ints[1:1+n], t.ints[1+n:1+2*n], t.ints[1+2*n:1+3*n]
		order := Order(t.ints[1+3*n])
		o := t.types[0]
		m := typemap(o)
		// element strides per dimension
		st := make([]int64, n)
		acc := int64(1)
		for k := 0; k < n; k++ {
			d := k
			if order == OrderC {
				d = n - 1 - k
			}
			st[d] = acc
			acc *= int64(sizes[d])
		}
		idx := make([]int, n)
		var out []tmEntry
		for {
			var e int64
			for d := 0; d < n; d++ {
				e += int64(starts[d]+idx[d]) * st[d]
			}
			for _, x := range m {
				out = append(out, tmEntry{e*o.Extent() + x.disp, x.size})
			}
			// increment the fastest dimension first
			k := 0
			for ; k < n; k++ {
				d := k
				if order == OrderC {
					d = n - 1 - k
				}
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
	case CombinerResized, CombinerDup:
		return typemap(t.types[0])
	}
	panic("unknown combiner " + t.comb.String())
}

func repl(m []tmEntry, ext int64, _ []int64, count, bl, stride int64) []tmEntry {
	var out []tmEntry
	for i := int64(0); i < count; i++ {
		for j := int64(0); j < bl; j++ {
			for _, e := range m {
				out = append(out, tmEntry{i*stride + j*ext + e.disp, e.size})
			}
		}
	}
	return out
}

// refPack packs count elements the naive way.
func refPack(t *Type, typed []byte, base int64, count int) []byte {
	m := typemap(t)
	var out []byte
	for k := 0; k < count; k++ {
		o := base + int64(k)*t.Extent()
		for _, e := range m {
			out = append(out, typed[o+e.disp:o+e.disp+e.size]...)
		}
	}
	return out
}

// refUnpack writes packed into a copy of typed the naive way.
func refUnpack(t *Type, typed, packed []byte, base int64, count int) []byte {
	out := append([]byte(nil), typed...)
	m := typemap(t)
	q := int64(0)
	for k := 0; k < count; k++ {
		o := base + int64(k)*t.Extent()
		for _, e := range m {
			copy(out[o+e.disp:o+e.disp+e.size], packed[q:q+e.size])
			q += e.size
		}
	}
	return out
}

// layout returns a typed buffer length and base that fit count elements.
func layout(t *Type, count int) (n int, base int64) {
	if count == 0 || t.size == 0 {
		return 16, 0
	}
	lo := t.trueLB + min(0, int64(count-1)*t.Extent())
	hi := t.trueUB + max(0, int64(count-1)*t.Extent())
	base = max(0, -lo) + 3 // an odd slack, to catch absolute-offset bugs
	return int(base + hi + 5), base
}

func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkType compares every interpreter entry point with the reference for t.
func checkAgainstRef(tb testing.TB, t *Type, count int, chunks []int) {
	tb.Helper()
	if err := t.Commit(); err != nil {
		tb.Fatalf("commit %v: %v", t, err)
	}
	n, base := layout(t, count)
	typed := pattern(n, uint64(n))
	want := refPack(t, typed, base, count)
	if int64(len(want)) != int64(count)*t.Size() {
		tb.Fatalf("%v: reference packed %d bytes, size says %d", t, len(want), int64(count)*t.Size())
	}
	got := make([]byte, len(want)+7)
	nn, err := t.PackRange(got, typed, base, count, 0)
	if err != nil || nn != len(want) || !bytes.Equal(got[:nn], want) {
		tb.Fatalf("%v count %d: PackRange n=%d err=%v\n got %x\nwant %x\nIR:\n%s", t, count, nn, err, got[:nn], want, t.IR())
	}
	// Chunked packing, resuming at each offset.
	for _, ch := range chunks {
		if ch <= 0 {
			continue
		}
		buf := make([]byte, 0, len(want))
		for from := 0; from < len(want); {
			seg := make([]byte, ch)
			k, err := t.PackRange(seg, typed, base, count, int64(from))
			if err != nil || k != min(ch, len(want)-from) {
				tb.Fatalf("%v: chunk %d at %d: n=%d err=%v", t, ch, from, k, err)
			}
			buf = append(buf, seg[:k]...)
			from += k
		}
		if !bytes.Equal(buf, want) {
			tb.Fatalf("%v count %d chunk %d: chunked pack differs\n got %x\nwant %x\nIR:\n%s", t, count, ch, buf, want, t.IR())
		}
	}
	// Unpack of a fresh stream into a patterned buffer, whole and chunked.
	stream := pattern(len(want), 99)
	wantT := refUnpack(t, typed, stream, base, count)
	for _, ch := range append([]int{len(want) + 1}, chunks...) {
		if ch <= 0 {
			continue
		}
		dst := append([]byte(nil), typed...)
		for from := 0; from < len(want); {
			e := min(from+ch, len(want))
			k, err := t.UnpackRange(dst, stream[from:e], base, count, int64(from))
			if err != nil || k != e-from {
				tb.Fatalf("%v: unpack chunk %d at %d: n=%d err=%v", t, ch, from, k, err)
			}
			from = e
		}
		if !bytes.Equal(dst, wantT) {
			tb.Fatalf("%v count %d chunk %d: unpack differs\nIR:\n%s", t, count, ch, t.IR())
		}
	}
}

func mustT(tb testing.TB) func(*Type, error) *Type {
	return func(t *Type, err error) *Type {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
}

// ---------------------------------------------------------------------------
// random type trees (shared by the table, property and fuzz tests)

type gen struct {
	r     *rand.Rand
	nodes int
}

func (g *gen) small(n int) int { return g.r.IntN(n) }

// cnt returns a count or blocklength: mostly in [1, n], sometimes 0.
func (g *gen) cnt(n int) int {
	if g.r.IntN(10) == 0 {
		return 0
	}
	return 1 + g.r.IntN(n)
}

func (g *gen) basic() *Type {
	all := []*Type{Byte, Int16, Int32, Float64, Complex128, Uint8, Float32}
	return all[g.r.IntN(len(all))]
}

// typ returns a random type of depth ≤ d.
func (g *gen) typ(d int) *Type {
	g.nodes++
	if d == 0 || g.nodes > 12 || g.r.IntN(5) == 0 {
		return g.basic()
	}
	old := g.typ(d - 1)
	var t *Type
	var err error
	disp := func() int64 { return int64(g.r.IntN(64)) - 16 }
	switch g.r.IntN(14) {
	case 12, 13:
		// An index list with runs of touching blocks (exercises merging and
		// fixed-length indexed leaves).
		n := 1 + g.small(12)
		ds := make([]int, n)
		x := g.small(4) - 2
		for i := range ds {
			ds[i] = x
			if g.r.IntN(3) == 0 {
				x += 2 + g.small(5)
			} else {
				x++
			}
		}
		if g.r.IntN(4) == 0 {
			g.r.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		}
		t, err = IndexedBlock(1+g.small(2), ds, old)
	case 0:
		t, err = Contiguous(g.cnt(3), old)
	case 1:
		t, err = Vector(g.cnt(3), g.cnt(2), g.small(7)-3, old)
	case 2:
		t, err = HVector(g.cnt(3), g.cnt(2), int64(g.r.IntN(80)-30), old)
	case 3:
		n := g.cnt(4)
		bl, ds := make([]int, n), make([]int, n)
		for i := range bl {
			bl[i], ds[i] = g.cnt(2), g.small(12)-3
		}
		t, err = Indexed(bl, ds, old)
	case 4:
		n := g.cnt(4)
		bl, ds := make([]int, n), make([]int64, n)
		for i := range bl {
			bl[i], ds[i] = g.cnt(2), disp()
		}
		t, err = HIndexed(bl, ds, old)
	case 5:
		n := g.cnt(4)
		ds := make([]int, n)
		for i := range ds {
			ds[i] = g.small(10) - 2
		}
		t, err = IndexedBlock(g.cnt(2), ds, old)
	case 6:
		n := g.cnt(4)
		ds := make([]int64, n)
		for i := range ds {
			ds[i] = disp()
		}
		t, err = HIndexedBlock(g.cnt(2), ds, old)
	case 7:
		n := 1 + g.small(3)
		bl, ds, ts := make([]int, n), make([]int64, n), make([]*Type, n)
		for i := range bl {
			bl[i], ds[i], ts[i] = g.cnt(2), disp(), old
			if i > 0 && g.r.IntN(2) == 0 {
				ts[i] = g.typ(d - 1)
			}
		}
		t, err = Struct(bl, ds, ts)
	case 8:
		nd := 1 + g.small(3)
		sz, sub, st := make([]int, nd), make([]int, nd), make([]int, nd)
		for i := range sz {
			sz[i] = 1 + g.small(4)
			sub[i] = 1 + g.small(sz[i])
			st[i] = g.small(sz[i] - sub[i] + 1)
		}
		t, err = Subarray(sz, sub, st, Order(g.small(2)), old)
	case 9:
		t, err = Resized(old, int64(g.r.IntN(20)-8), int64(g.r.IntN(40)-8))
	case 10:
		t, err = Dup(old)
	default:
		t, err = Vector(1+g.small(3), 1+g.small(2), 1+g.cnt(3), old)
	}
	if err != nil {
		panic(fmt.Sprintf("generator made a bad type: %v", err))
	}
	if g.r.IntN(4) == 0 {
		if err := t.Commit(); err != nil {
			panic(err)
		}
	}
	return t
}

func TestRandomTypesAgainstReference(t *testing.T) {
	for seed := uint64(0); seed < 1500; seed++ {
		g := &gen{r: rand.New(rand.NewPCG(seed, 1))}
		tt := g.typ(4)
		count := g.r.IntN(4)
		chunks := []int{1 + g.r.IntN(7), 1 + g.r.IntN(64)}
		checkAgainstRef(t, tt, count, chunks)
	}
}
