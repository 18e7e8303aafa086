package ddt_test

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/weft-hpc/weft/internal/testenv"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	. "github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/ddtir"
)

type bounds struct{ size, lb, ub, tlb, text int64 }

func boundsOf(t *Type) bounds {
	return bounds{t.Size(), t.LB(), t.UB(), t.TrueLB(), t.TrueExtent()}
}

// Examples from the MPI standard's datatype chapter (type maps, extents,
// epsilon padding, resized bounds).
func TestMPIStandardExamples(t *testing.T) {
	m := mustT(t)
	// {(double,0),(char,8)}: size 9, extent 16 with the alignment epsilon.
	dc := m(Struct([]int{1, 1}, []int64{0, 8}, []*Type{Float64, Int8}))
	cases := []struct {
		name string
		t    *Type
		want bounds
	}{
		{"struct double,char", dc, bounds{9, 0, 16, 0, 9}},
		{"contiguous(3)", m(Contiguous(3, dc)), bounds{27, 0, 48, 0, 41}},
		{"vector(2,3,4)", m(Vector(2, 3, 4, dc)), bounds{54, 0, 112, 0, 105}},
		{"vector(3,1,-2)", m(Vector(3, 1, -2, dc)), bounds{27, -64, 16, -64, 73}},
		{"hvector(2,3,4)", m(HVector(2, 3, 4, dc)), bounds{54, 0, 52, 0, 45}},
		{"indexed B=(3,1) D=(4,0)", m(Indexed([]int{3, 1}, []int{4, 0}, dc)), bounds{36, 0, 112, 0, 105}},
		{"struct float,type1,char", m(Struct([]int{2, 1, 3}, []int64{0, 16, 26}, []*Type{Float32, dc, Int8})), bounds{20, 0, 32, 0, 29}},
		{"resized int32 (-4,12)", m(Resized(Int32, -4, 12)), bounds{4, -4, 8, 0, 4}},
		{"contiguous(2, resized)", m(Contiguous(2, m(Resized(Int32, -4, 12)))), bounds{8, -4, 20, 0, 16}},
		{"subarray 4x5 [2x3 at 1,2] C", m(Subarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, OrderC, Float64)), bounds{48, 0, 160, 56, 64}},
		{"subarray 4x5 [2x3 at 1,2] F", m(Subarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, OrderFortran, Float64)), bounds{48, 0, 160, 72, 80}},
		{"empty contiguous", m(Contiguous(0, Float64)), bounds{0, 0, 0, 0, 0}},
		{"dup", m(Dup(dc)), bounds{9, 0, 16, 0, 9}},
		// Sticky bounds: an explicit lb/ub in a member wins over the data.
		{"struct sticky", m(Struct([]int{1, 1}, []int64{0, 100}, []*Type{m(Resized(Int32, 8, 4)), Float64})), bounds{12, 8, 12, 0, 108}},
	}
	for _, c := range cases {
		if got := boundsOf(c.t); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		checkAgainstRef(t, c.t, 3, []int{1, 5})
	}
}

func TestEnvelopeContents(t *testing.T) {
	m := mustT(t)
	v := m(Vector(3, 2, 5, Float64))
	ni, na, nt, c := v.Envelope()
	if ni != 3 || na != 0 || nt != 1 || c != CombinerVector {
		t.Fatalf("vector envelope %d %d %d %v", ni, na, nt, c)
	}
	ct := v.Contents()
	if ct.Ints[0] != 3 || ct.Ints[1] != 2 || ct.Ints[2] != 5 || ct.Types[0] != Float64 {
		t.Fatalf("vector contents %+v", ct)
	}
	hi := m(HIndexed([]int{1, 2}, []int64{8, -16}, Int32))
	ct = hi.Contents()
	if ct.Combiner != CombinerHIndexed || len(ct.Ints) != 3 || ct.Addrs[1] != -16 {
		t.Fatalf("hindexed contents %+v", ct)
	}
	sa := m(Subarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, OrderFortran, Int16))
	ct = sa.Contents()
	if ct.Combiner != CombinerSubarray || ct.Ints[0] != 2 || ct.Ints[len(ct.Ints)-1] != int(OrderFortran) || ct.Types[0] != Int16 {
		t.Fatalf("subarray contents %+v", ct)
	}
	rs := m(Resized(sa, -8, 40))
	if c := rs.Contents(); c.Addrs[0] != -8 || c.Addrs[1] != 40 || c.Types[0] != sa {
		t.Fatalf("resized contents %+v", c)
	}
	if c := Float64.Contents(); c.Combiner != CombinerNamed || len(c.Ints)+len(c.Addrs)+len(c.Types) != 0 {
		t.Fatalf("named contents %+v", c)
	}
	if Float64.Name() != "float64" || v.Name() != "vector" {
		t.Fatalf("names %q %q", Float64.Name(), v.Name())
	}
}

func TestConstructorErrors(t *testing.T) {
	big := int(math.MaxInt64 / 2)
	cases := []struct {
		name string
		f    func() (*Type, error)
		want error
	}{
		{"contiguous negative", func() (*Type, error) { return Contiguous(-1, Float64) }, ErrInvalid},
		{"contiguous nil", func() (*Type, error) { return Contiguous(1, nil) }, ErrInvalid},
		{"vector negative blocklen", func() (*Type, error) { return Vector(2, -1, 3, Float64) }, ErrInvalid},
		{"vector overflow stride", func() (*Type, error) { return Vector(3, 1, big, Float64) }, ErrOverflow},
		{"contiguous overflow size", func() (*Type, error) { return Contiguous(big, Float64) }, ErrOverflow},
		{"hvector overflow span", func() (*Type, error) { return HVector(big, 1, math.MaxInt64/4, Float64) }, ErrOverflow},
		{"indexed mismatch", func() (*Type, error) { return Indexed([]int{1, 2}, []int{0}, Float64) }, ErrInvalid},
		{"indexed negative", func() (*Type, error) { return Indexed([]int{1, -2}, []int{0, 4}, Float64) }, ErrInvalid},
		{"hindexedblock negative", func() (*Type, error) { return HIndexedBlock(-1, []int64{0}, Float64) }, ErrInvalid},
		{"struct mismatch", func() (*Type, error) { return Struct([]int{1}, []int64{0, 8}, []*Type{Float64}) }, ErrInvalid},
		{"struct nil member", func() (*Type, error) { return Struct([]int{1}, []int64{0}, []*Type{nil}) }, ErrInvalid},
		{"subarray start past end", func() (*Type, error) { return Subarray([]int{4}, []int{3}, []int{2}, OrderC, Float64) }, ErrInvalid},
		{"subarray zero size", func() (*Type, error) { return Subarray([]int{0}, []int{0}, []int{0}, OrderC, Float64) }, ErrInvalid},
		{"subarray bad order", func() (*Type, error) { return Subarray([]int{4}, []int{2}, []int{0}, Order(7), Float64) }, ErrInvalid},
		{"subarray rank mismatch", func() (*Type, error) { return Subarray([]int{4, 4}, []int{2}, []int{0}, OrderC, Float64) }, ErrInvalid},
		{"resized overflow", func() (*Type, error) { return Resized(Float64, math.MaxInt64, 10) }, ErrOverflow},
		{"dup nil", func() (*Type, error) { return Dup(nil) }, ErrInvalid},
	}
	for _, c := range cases {
		tt, err := c.f()
		if !errors.Is(err, c.want) || tt != nil {
			t.Errorf("%s: got %v, %v; want %v", c.name, tt, err, c.want)
		}
	}
}

func TestPackErrors(t *testing.T) {
	m := mustT(t)
	v := m(Vector(4, 1, 2, Float64)) // touches [0, 56)
	if _, err := v.Pack(make([]byte, 32), make([]byte, 56), 1); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("pack before commit: %v", err)
	}
	if err := v.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := v.SetJIT(JITOn); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetJIT after commit: %v", err)
	}
	src := make([]byte, 56)
	dst := make([]byte, 32)
	if _, err := v.Pack(dst, src[:55], 1); !errors.Is(err, ErrBounds) {
		t.Fatalf("short src: %v", err)
	}
	if _, err := v.Pack(dst[:31], src, 1); !errors.Is(err, ErrBounds) {
		t.Fatalf("short dst: %v", err)
	}
	if _, err := v.Pack(dst, src, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative count: %v", err)
	}
	if _, err := v.PackRange(dst, src, -1, 1, 0); !errors.Is(err, ErrBounds) {
		t.Fatalf("negative base: %v", err)
	}
	if _, err := v.PackRange(dst, src, 0, 1, 33); !errors.Is(err, ErrInvalid) {
		t.Fatalf("from past end: %v", err)
	}
	if _, err := v.PackRange(dst, src, math.MaxInt64, 1, 0); !errors.Is(err, ErrBounds) {
		t.Fatalf("huge base: %v", err)
	}
	if _, err := v.Unpack(src, dst[:31], 1); !errors.Is(err, ErrBounds) {
		t.Fatalf("short unpack src: %v", err)
	}
	if _, err := v.PackSize(-3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PackSize negative: %v", err)
	}
	// A type touching negative displacements needs a base.
	neg := m(HIndexedBlock(1, []int64{-16}, Float64))
	if err := neg.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := neg.Pack(dst, src, 1); !errors.Is(err, ErrBounds) {
		t.Fatalf("negative displacement without base: %v", err)
	}
	if n, err := neg.PackRange(dst, src, 16, 1, 0); err != nil || n != 8 {
		t.Fatalf("negative displacement with base: %d %v", n, err)
	}
	var nilT *Type
	if _, err := nilT.Pack(dst, src, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil type: %v", err)
	}
}

// TestNormalisation checks the IR shapes the issue asks for.
func TestNormalisation(t *testing.T) {
	m := mustT(t)
	commitIR := func(tt *Type) string {
		t.Helper()
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		return tt.DumpIR()
	}
	body := func(s string) string { // drop the header line
		_, b, _ := strings.Cut(s, "\n")
		return b
	}
	cases := []struct {
		name string
		t    *Type
		want string
	}{
		{"vector stride==blocklen is contiguous", m(Vector(4, 2, 2, Float64)),
			"  block len=64 size=64 align=64\n"},
		{"contiguous of contiguous merges", m(Contiguous(3, m(Contiguous(5, Int32)))),
			"  block len=60 size=60 align=4\n"},
		// MILC: hvector(2, 1, half, vector(4, 16, 64, contiguous(6 float32)))
		// where half == 4 × 64 sites: one loop over one block.
		{"milc nest fused", m(HVector(2, 1, 4*64*24, m(Vector(4, 16, 64, m(Contiguous(6, Float32)))))),
			"  loop count=8 stride=1536 size=3072 align=64\n    block len=384 size=384 align=64\n"},
		{"constant-stride indexed is a vector", m(IndexedBlock(2, []int{1, 5, 9, 13}, Float64)),
			"  loop count=4 stride=32 disp=8 size=64 align=8\n    block len=16 size=16 align=16\n"},
		{"irregular indexed block", m(IndexedBlock(1, []int{0, 3, 4, 9}, Float64)),
			"  index n=4 offsets=[0,24,32,72] size=32 align=8\n    block len=8 size=8 align=8\n"},
		{"indexed merges touching blocks", m(Indexed([]int{2, 1, 3}, []int{0, 2, 10}, Int32)),
			"  loop count=2 stride=40 size=24 align=4\n    block len=12 size=12 align=4\n"},
		{"struct of identical members is indexed", m(Struct([]int{1, 1, 1}, []int64{0, 40, 64}, []*Type{Float64, Float64, Float64})),
			"  index n=3 offsets=[0,40,64] size=24 align=8\n    block len=8 size=8 align=8\n"},
		{"struct of basic types is a block list", m(Struct([]int{1, 1, 2}, []int64{0, 8, 12}, []*Type{Float64, Int16, Int32})),
			"  blocks n=2 offsets=[0,12] lens=[10,8] size=18 align=2\n"},
		{"count 1 folded away", m(Contiguous(1, m(Vector(1, 3, 9, Float64)))),
			"  block len=24 size=24 align=8\n"},
		{"subarray", m(Subarray([]int{4, 5, 6}, []int{2, 5, 3}, []int{1, 0, 2}, OrderC, Float64)),
			"  loop count=10 stride=48 disp=256 size=240 align=8\n    block len=24 size=24 align=8\n"},
	}
	for _, c := range cases {
		if got := body(commitIR(c.t)); got != c.want {
			t.Errorf("%s:\n got:\n%s want:\n%s", c.name, got, c.want)
		}
		checkAgainstRef(t, c.t, 2, []int{3})
	}
	if n := m(Vector(1, 1, 1, Float64)); commitIR(n) == "" || !IROf(n).Contig {
		t.Errorf("single element vector should be contiguous: %s", n.DumpIR())
	}
}

// TestNegativeStrides covers negative strides, negative lb and negative
// extents through every entry point.
func TestNegativeStrides(t *testing.T) {
	m := mustT(t)
	types := []*Type{
		m(Vector(5, 2, -3, Float64)),
		m(HVector(4, 1, -20, m(Contiguous(3, Int16)))),
		m(Resized(m(Vector(3, 1, 2, Int32)), -8, -24)),
		m(HIndexed([]int{2, 1, 3}, []int64{-40, 16, -7}, Int16)),
		m(Struct([]int{1, 2}, []int64{-100, 3}, []*Type{m(Vector(2, 1, -5, Float32)), Complex64})),
	}
	for _, tt := range types {
		for count := 0; count < 4; count++ {
			checkAgainstRef(t, tt, count, []int{1, 2, 7, 13})
		}
	}
}

type padded struct {
	A int8
	B float64
	C int16
	D [3]float32
	E complex64
}

func TestOf(t *testing.T) {
	dt, err := Of[padded]()
	if err != nil {
		t.Fatal(err)
	}
	var p padded
	if dt.Extent() != int64(unsafe.Sizeof(p)) || dt.Size() != 1+8+2+12+8 {
		t.Fatalf("Of[padded]: size %d extent %d, want %d %d", dt.Size(), dt.Extent(), 1+8+2+12+8, unsafe.Sizeof(p))
	}
	vals := make([]padded, 5)
	for i := range vals {
		vals[i] = padded{int8(i), float64(i) + 0.5, int16(-i), [3]float32{1, 2, float32(i)}, complex(float32(i), 1)}
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), len(vals)*int(unsafe.Sizeof(p)))
	packed := make([]byte, 5*dt.Size())
	if _, err := dt.Pack(packed, raw, 5); err != nil {
		t.Fatal(err)
	}
	if want := refPack(dt, raw, 0, 5); !bytes.Equal(packed, want) {
		t.Fatalf("Of pack differs")
	}
	out := make([]padded, 5)
	rawOut := unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(out)*int(unsafe.Sizeof(p)))
	if _, err := dt.Unpack(rawOut, packed, 5); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if out[i] != vals[i] {
			t.Fatalf("round trip %d: %+v != %+v", i, out[i], vals[i])
		}
	}
	if _, err := Of[struct{ P *int }](); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pointer field: %v", err)
	}
	if _, err := Of[[]int](); !errors.Is(err, ErrInvalid) {
		t.Fatalf("slice: %v", err)
	}
	if a, err := Of[[4][2]uint16](); err != nil || a.Size() != 16 || !IROf(a).Contig {
		t.Fatalf("array: %v %v", a, err)
	}
}

func TestFlatten(t *testing.T) {
	m := mustT(t)
	v := m(Vector(3, 2, 4, Int32))
	if err := v.Commit(); err != nil {
		t.Fatal(err)
	}
	segs, err := v.Flatten(2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// extent 40: element 1 starts at 40, so its first block touches the
	// last block of element 0 ([32,40)) and merges.
	want := []Segment{{0, 8}, {16, 8}, {32, 16}, {56, 8}, {72, 8}}
	if len(segs) != len(want) {
		t.Fatalf("segments %v, want %v", segs, want)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Fatalf("segments %v, want %v", segs, want)
		}
	}
	if _, err := v.Flatten(2, 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("limit: %v", err)
	}
	if _, ok, err := v.OneSegment(2); ok || err != nil {
		t.Fatalf("OneSegment of 2 vectors: %v, %v", ok, err)
	}
	c := m(Contiguous(3, Int32))
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if s, ok, err := c.OneSegment(2); !ok || err != nil || s != (Segment{0, 24}) {
		t.Fatalf("OneSegment of 2×3 int32: %v, %v, %v", s, ok, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = v.OneSegment(2); _, _, _ = c.OneSegment(2) }); n != 0 && !testenv.Race {
		t.Fatalf("OneSegment: %v allocations", n)
	}
	if _, _, err := v.OneSegment(-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("OneSegment(-1): %v", err)
	}
	// ExceedsSegments: 6 blocks, one merge at the element boundary.
	if v.ExceedsSegments(2, 5) || !v.ExceedsSegments(2, 4) || v.ExceedsSegments(2, 0) {
		t.Fatalf("ExceedsSegments(2, 5|4|0) = %v %v %v, want false true false", v.ExceedsSegments(2, 5), v.ExceedsSegments(2, 4), v.ExceedsSegments(2, 0))
	}
	// AppendSegments appends after dst's segments without merging into
	// them, leaves dst's length alone on a refusal, and reuses its
	// capacity.
	dst := make([]Segment, 1, 16)
	dst[0] = Segment{-8, 8} // touches the first segment: must stay apart
	got, err := v.AppendSegments(dst, 2, 5)
	if err != nil || len(got) != 1+len(want) || got[0] != (Segment{-8, 8}) || &got[0] != &dst[0] {
		t.Fatalf("AppendSegments: %v, %v", got, err)
	}
	for i := range want {
		if got[1+i] != want[i] {
			t.Fatalf("AppendSegments: %v, want %v after the first", got, want)
		}
	}
	if got, err := v.AppendSegments(dst, 2, 4); !errors.Is(err, ErrInvalid) || len(got) != 1 {
		t.Fatalf("AppendSegments past its bound: %d segments, %v", len(got), err)
	}
	if n := testing.AllocsPerRun(100, func() { dst, _ = v.AppendSegments(dst[:0], 2, 0) }); n != 0 && !testenv.Race {
		t.Fatalf("AppendSegments into a slice with room: %v allocations", n)
	}
	// Blocks counts them before the merge at the element boundary.
	if nb, err := v.Blocks(2); nb != 6 || err != nil {
		t.Fatalf("Blocks(2) = %d, %v, want 6", nb, err)
	}
	if _, err := v.Blocks(-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Blocks(-1): %v", err)
	}
	if _, err := m(Vector(3, 2, 4, Int32)).Blocks(1); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("Blocks of an uncommitted type: %v", err)
	}
	// Flatten agrees with the type map of random types.
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		tt := randomType(r, 3)
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		count := r.IntN(3)
		segs, err := tt.Flatten(count, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Blocks bounds the segments: at least as many, and at most one
		// more per element boundary than there are (neighbours merge there).
		nb, err := tt.Blocks(count)
		if err != nil || nb < int64(len(segs)) {
			t.Fatalf("seed %d: Blocks(%d) = %d, %v; Flatten has %d segments", seed, count, nb, err, len(segs))
		}
		// OneSegment agrees with Flatten wherever the description does
		// not already rule one segment out.
		one, ok, err := tt.OneSegment(count)
		if err != nil || ok != (len(segs) == 1 && !tt.ExceedsSegments(count, 1)) || ok && one != segs[0] {
			t.Fatalf("seed %d: OneSegment(%d) = %v, %v, %v; Flatten %v", seed, count, one, ok, err, segs)
		}
		// ExceedsSegments is the description's bound less the element
		// boundaries' merges.
		for k := 1; k <= len(segs)+1; k++ {
			if got, want := tt.ExceedsSegments(count, k), nb-int64(max(count-1, 0)) > int64(k); got != want {
				t.Fatalf("seed %d: ExceedsSegments(%d, %d) = %v with %d blocks", seed, count, k, got, nb)
			}
		}
		var fromSegs, fromMap []int64
		for _, s := range segs {
			for b := s.Off; b < s.Off+s.Len; b++ {
				fromSegs = append(fromSegs, b)
			}
		}
		for k := 0; k < count; k++ {
			for _, e := range ddttest.TypeMap(tt) {
				for b := e.Disp; b < e.Disp+e.Size; b++ {
					fromMap = append(fromMap, int64(k)*tt.Extent()+b)
				}
			}
		}
		if len(fromSegs) != len(fromMap) {
			t.Fatalf("seed %d: flatten covers %d bytes, type map %d", seed, len(fromSegs), len(fromMap))
		}
		for i := range fromSegs {
			if fromSegs[i] != fromMap[i] {
				t.Fatalf("seed %d: flatten byte %d at %d, type map %d", seed, i, fromSegs[i], fromMap[i])
			}
		}
	}
}

func TestCursor(t *testing.T) {
	m := mustT(t)
	tt := m(Vector(7, 3, 5, Int16))
	if err := tt.Commit(); err != nil {
		t.Fatal(err)
	}
	n, base := layout(tt, 4)
	typed := pattern(n, 5)
	want := refPack(tt, typed, base, 4)
	pk, err := tt.NewPacker(typed, base, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for step := 1; !pk.Done(); step = step%11 + 1 {
		buf := make([]byte, step)
		k, err := pk.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
	}
	if !bytes.Equal(got, want) || pk.Remaining() != 0 || pk.Offset() != int64(len(want)) {
		t.Fatalf("cursor pack differs")
	}
	if k, err := pk.Next(make([]byte, 4)); k != 0 || err != nil {
		t.Fatalf("next after done: %d %v", k, err)
	}
	// Retransmit a middle segment.
	if err := pk.SetOffset(10); err != nil {
		t.Fatal(err)
	}
	seg := make([]byte, 9)
	if k, _ := pk.Next(seg); k != 9 || !bytes.Equal(seg, want[10:19]) {
		t.Fatalf("seek+next differs")
	}
	if err := pk.SetOffset(-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad offset: %v", err)
	}
	dst := make([]byte, n)
	up, err := tt.NewUnpacker(dst, base, 4)
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < len(want); q += 4 {
		if _, err := up.Next(want[q:min(q+4, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(dst, refUnpack(tt, make([]byte, n), want, base, 4)) {
		t.Fatalf("cursor unpack differs")
	}
	if _, err := tt.NewPacker(typed[:n-6], base, 4); !errors.Is(err, ErrBounds) {
		t.Fatalf("short cursor buffer: %v", err)
	}
}

// TestJITMode runs Commit under every combination of the process-wide
// switch (WEFT_JIT=off), the default mode, the type's own mode and the
// registered compiler, and checks which compiler entry is called, whether
// Commit fails, and what Compiled and JITPending report. Those settings are
// process-wide, so the body runs in a child process (inChild).
func TestJITMode(t *testing.T) {
	if !testenv.InChild(t, "TestJITMode") {
		return
	}
	m := mustT(t)
	defer SetDefaultJITMode(DefaultJITMode())
	defer ddtir.SetCompiler(ddtir.Registered())
	modes := []JITMode{JITAuto, JITOn, JITOff}
	for _, envOff := range []bool{false, true} {
		for _, def := range modes {
			for own := -1; own < len(modes); own++ {
				for _, withCompiler := range []bool{false, true} {
					name := fmt.Sprintf("envOff=%v/default=%v/own=%d/compiler=%v", envOff, def, own, withCompiler)
					restore := SetJITDisabled(envOff)
					SetDefaultJITMode(def)
					fc := &fakeCompiler{}
					if withCompiler {
						ddtir.SetCompiler(fc)
					} else {
						ddtir.SetCompiler(nil)
					}
					ty := m(Vector(3, 1, 2, Float64))
					mode := def
					if own >= 0 {
						mode = modes[own]
						if err := ty.SetJIT(mode); err != nil {
							t.Fatal(err)
						}
					}
					if envOff {
						mode = JITOff
					}
					err := ty.Commit()
					restore()
					if JITDisabled() {
						t.Fatalf("%s: the test hook did not restore the switch", name)
					}
					wantErr := mode == JITOn && !withCompiler
					if wantErr != errors.Is(err, ErrNotCompiled) || (!wantErr && err != nil) {
						t.Errorf("%s: Commit: %v", name, err)
						continue
					}
					if wantErr {
						continue
					}
					wantCalls, wantNow := 0, 0
					if withCompiler && mode == JITAuto {
						wantCalls = 1
					}
					if withCompiler && mode == JITOn {
						wantNow = 1
					}
					if fc.calls != wantCalls || fc.now != wantNow {
						t.Errorf("%s: Compile called %d times, CompileNow %d; want %d, %d", name, fc.calls, fc.now, wantCalls, wantNow)
					}
					// Compile returns a deferred kernel (as jit's auto policy
					// does): pending, not compiled, until it goes native.
					if got, want := ty.Compiled(), wantNow == 1; got != want {
						t.Errorf("%s: Compiled %v, want %v", name, got, want)
					}
					if got, want := ty.JITPending(), wantCalls == 1; got != want {
						t.Errorf("%s: JITPending %v, want %v", name, got, want)
					}
					if wantCalls == 1 {
						fc.kernel.native.Store(true)
						if !ty.Compiled() || ty.JITPending() {
							t.Errorf("%s: after going native: Compiled %v, JITPending %v", name, ty.Compiled(), ty.JITPending())
						}
					}
					// A kernel's error comes back wrapped in ErrInternal; the
					// interpreter packs correctly.
					_, perr := ty.Pack(make([]byte, 24), make([]byte, 40), 1)
					if compiled := wantCalls+wantNow == 1; compiled != errors.Is(perr, errFake) || (compiled && !errors.Is(perr, ErrInternal)) || (!compiled && perr != nil) {
						t.Errorf("%s: Pack: %v", name, perr)
					}
				}
			}
		}
	}
	// A compiler that declines leaves the type interpreted under auto and
	// fails Commit under on.
	ddtir.SetCompiler(&fakeCompiler{decline: true})
	SetDefaultJITMode(JITAuto)
	d := m(Vector(3, 1, 2, Float64))
	if err := d.Commit(); err != nil || d.Compiled() || d.JITPending() {
		t.Fatalf("declined compile in auto: %v %v", err, d.Compiled())
	}
	on := m(Vector(3, 1, 2, Float64))
	if err := on.SetJIT(JITOn); err != nil {
		t.Fatal(err)
	}
	if err := on.Commit(); !errors.Is(err, ErrNotCompiled) {
		t.Fatalf("declined compile in on: %v", err)
	}
}

var errFake = errors.New("fake kernel ran")

// fakeCompiler records calls; its kernels return errFake so the test can
// see that Pack went through them. Compile returns a deferred kernel (like
// jit's auto policy), CompileNow a native one. (The real compiler is
// package jit, tested against the interpreter there.)
type fakeCompiler struct {
	calls, now int
	decline    bool
	kernel     *fakeKernel
}

func (f *fakeCompiler) Compile(ir *ddtir.IR) (ddtir.Kernel, error) {
	f.calls++
	if f.decline {
		return nil, ErrNotCompiled
	}
	f.kernel = &fakeKernel{}
	return f.kernel, nil
}

func (f *fakeCompiler) CompileNow(ir *ddtir.IR) (ddtir.Kernel, error) {
	f.now++
	if f.decline {
		return nil, ErrNotCompiled
	}
	return nativeFake{}, nil
}

// fakeKernel is a deferred kernel: native once its flag is set.
type fakeKernel struct{ native atomic.Bool }

func (k *fakeKernel) Native() bool  { return k.native.Load() }
func (k *fakeKernel) Pending() bool { return !k.native.Load() }

func (*fakeKernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return 0, errFake
}

func (*fakeKernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return 0, errFake
}

type nativeFake struct{}

func (nativeFake) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return 0, errFake
}

func (nativeFake) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return 0, errFake
}

// TestLeafLengths runs every block length from 1 to 70 bytes through each
// leaf loop shape (strided, fixed-length index, varying block list),
// whole and resumed.
func TestLeafLengths(t *testing.T) {
	m := mustT(t)
	for l := 1; l <= 70; l++ {
		blk := m(Contiguous(l, Byte))
		shapes := []*Type{
			m(HVector(5, 1, int64(l+3), blk)),
			m(HVector(4, 1, -int64(2*l+1), blk)),
			m(HIndexedBlock(1, []int64{0, int64(3 * l), int64(l + 1), int64(7 * l)}, blk)),
			m(HIndexed([]int{1, 2, 1, 3}, []int64{int64(5 * l), 0, int64(12 * l), int64(3*l + 1)}, blk)),
		}
		for _, tt := range shapes {
			checkAgainstRef(t, tt, 2, []int{1, 7, l + 1})
		}
	}
}

// TestConcurrent commits one type from several goroutines at once and packs
// it concurrently (run with -race).
func TestConcurrent(t *testing.T) {
	m := mustT(t)
	tt := m(Struct([]int{2, 1}, []int64{0, 40}, []*Type{m(Vector(3, 1, 2, Int32)), Float64}))
	n, base := layout(tt, 5)
	typed := pattern(n, 8)
	want := refPack(tt, typed, base, 5)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			if err := tt.Commit(); err != nil {
				errs <- err
				return
			}
			out := make([]byte, len(want))
			for i := 0; i < 200; i++ {
				if _, err := tt.PackRange(out, typed, base, 5, 0); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(out, want) {
					errs <- errors.New("concurrent pack differs")
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
