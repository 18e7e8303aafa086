package ddt_test

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// FuzzPackRange builds a random type tree from the fuzzer's seed and checks
// every entry point (whole, chunked pack, chunked unpack) against the naive
// reference packer. `go test` runs the seed corpus; run
// `go test -fuzz FuzzPackRange ./ddt` to explore. Crashers found so far are
// kept as named tests (TestRegression* in this file).
func FuzzPackRange(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 42, 1234, 99999} {
		f.Add(s, uint8(2), uint16(7), uint16(3))
	}
	f.Fuzz(func(t *testing.T, seed uint64, count uint8, chunk1, chunk2 uint16) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		tt := randomType(r, 5)
		checkAgainstRef(t, tt, int(count%6), []int{int(chunk1%97) + 1, int(chunk2%13) + 1})
	})
}

// FuzzIRInvariants checks that every committed random type has a valid IR
// whose text form is stable and whose facts agree with the type.
func FuzzIRInvariants(f *testing.F) {
	for _, s := range []uint64{3, 5, 8, 13} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 17))
		tt := randomType(r, 5)
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		ir := IROf(tt)
		if ir.Size != tt.Size() || ir.Extent != tt.Extent() || ir.TrueLB != tt.TrueLB() || ir.TrueExtent != tt.TrueExtent() {
			t.Fatalf("IR facts %v disagree with %v", ir, tt)
		}
		if ir.Root != nil {
			if err := Validate(ir.Root); err != nil {
				t.Fatal(err)
			}
			// Alignment facts hold for every block.
			checkAlign(t, ir.Root, 0)
		}
		if ir.String() != tt.DumpIR() {
			t.Fatalf("IR text not stable")
		}
	})
}

// checkAlign verifies Node.Align against every block the node copies.
func checkAlign(t *testing.T, n *ddtir.Node, o int64) {
	var walk func(m *ddtir.Node, o int64)
	walk = func(m *ddtir.Node, o int64) {
		o += m.Disp
		switch m.Op {
		case ddtir.OpBlock:
			if o%n.Align != 0 || m.Len%n.Align != 0 {
				t.Fatalf("node align %d violated by block at %d len %d", n.Align, o, m.Len)
			}
		case ddtir.OpLoop:
			for i := int64(0); i < m.Count; i++ {
				walk(m.Child, o+i*m.Stride)
			}
		case ddtir.OpIndex:
			for _, off := range m.Offsets {
				walk(m.Child, o+off)
			}
		case ddtir.OpBlocks:
			for i, off := range m.Offsets {
				if (o+off)%n.Align != 0 || m.Lens[i]%n.Align != 0 {
					t.Fatalf("node align %d violated by block at %d len %d", n.Align, o+off, m.Lens[i])
				}
			}
		case ddtir.OpStruct:
			for i, c := range m.Children {
				walk(c, o+m.Offsets[i])
			}
		}
	}
	walk(n, o)
	switch n.Op {
	case ddtir.OpLoop, ddtir.OpIndex:
		checkAlign(t, n.Child, 0)
	case ddtir.OpStruct:
		for _, c := range n.Children {
			checkAlign(t, c, 0)
		}
	}
}

// FuzzBounds throws arbitrary buffer lengths, bases, counts and offsets at
// PackRange/UnpackRange: they must either return an error or produce the
// reference bytes, and never panic or touch memory outside the slices.
func FuzzBounds(f *testing.F) {
	f.Add(uint64(1), int64(0), int16(2), int64(0), uint16(100), uint16(10))
	f.Add(uint64(7), int64(-5), int16(-1), int64(3), uint16(3), uint16(0))
	f.Add(uint64(9), int64(1<<40), int16(3), int64(-2), uint16(0), uint16(65535))
	f.Fuzz(func(t *testing.T, seed uint64, base int64, count int16, from int64, typedLen, packedLen uint16) {
		r := rand.New(rand.NewPCG(seed, 5))
		tt := randomType(r, 4)
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		typed := pattern(int(typedLen), seed)
		packed := make([]byte, packedLen)
		n, err := tt.PackRange(packed, typed, base, int(count), from)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with n=%d", err, n)
			}
			return
		}
		want := refPack(tt, typed, base, int(count))
		if n != min(len(packed), len(want)-int(from)) || !bytes.Equal(packed[:n], want[from:from+int64(n)]) {
			t.Fatalf("PackRange n=%d differs from reference", n)
		}
		u := append([]byte(nil), typed...)
		if k, err := tt.UnpackRange(u, packed[:n], base, int(count), from); err != nil || k != n {
			t.Fatalf("UnpackRange after a valid PackRange: %d %v", k, err)
		}
		if !bytes.Equal(u, typed) {
			t.Fatalf("unpacking the packed bytes back changed the buffer")
		}
	})
}

// FuzzExtremeTypes builds random types with extreme extents, strides,
// displacements and counts (ddttest.RandomExtremeType) and throws small
// buffers, extreme bases and small or huge counts at every entry point.
// Constructors and Commit may only reject with ErrOverflow; a call either
// fails with a sentinel error without writing, or moves exactly the
// reference bytes; nothing is ever written outside the typed buffer.
func FuzzExtremeTypes(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55} {
		f.Add(s, uint8(s), int64(s%5), uint16(64), uint16(256))
	}
	f.Add(uint64(77), uint8(200), int64(1<<62), uint16(1), uint16(8))
	f.Add(uint64(78), uint8(255), int64(-1<<62), uint16(300), uint16(0))
	f.Fuzz(func(t *testing.T, seed uint64, countSel uint8, base int64, typedLen, packedLen uint16) {
		r := rand.New(rand.NewPCG(seed, 31))
		tt, err := ddttest.RandomExtremeType(r, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := tt.Commit(); err != nil {
			if !errors.Is(err, ErrOverflow) || errors.Is(err, ErrInternal) {
				t.Fatalf("Commit %v: %v (want ErrOverflow)", tt, err)
			}
			return
		}
		checkExtreme(t, tt, countSel, base, typedLen, packedLen)
	})
}

// checkExtreme runs the entry points of a committed type on guarded buffers.
func checkExtreme(t *testing.T, tt *Type, countSel uint8, base int64, typedLen, packedLen uint16) {
	t.Helper()
	ir := IROf(tt)
	if ir.Size != tt.Size() || ir.Extent != tt.Extent() || ir.TrueLB != tt.TrueLB() || ir.TrueExtent != tt.TrueExtent() {
		t.Fatalf("IR facts %v disagree with %v", ir, tt)
	}
	if ir.Root != nil {
		if err := Validate(ir.Root); err != nil {
			t.Fatal(err)
		}
	}
	count := int(countSel % 9)
	if countSel >= 200 {
		count = []int{1 << 20, 1<<31 - 1, 1 << 40, math.MaxInt}[countSel%4]
	}
	if base > 1<<20 || base < -(1<<20) {
		base = base%64 + []int64{0, math.MaxInt64, math.MinInt64, 1 << 62, -(1 << 62)}[int(countSel)%5]
	} else if base < 0 {
		base = -base % 64
	}
	sentinel := func(op string, n int, err error) {
		t.Helper()
		if n != 0 {
			t.Fatalf("%s of %v count %d base %d: n=%d with error %v", op, tt, count, base, n, err)
		}
		if errors.Is(err, ErrInternal) || !errors.Is(err, ErrBounds) && !errors.Is(err, ErrOverflow) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s of %v count %d base %d: %v wraps no user sentinel", op, tt, count, base, err)
		}
	}
	typed, intact := guarded(int(typedLen))
	for i := range typed {
		typed[i] = byte(i*13 + 1)
	}
	orig := append([]byte(nil), typed...)
	packed := make([]byte, packedLen)
	n, err := tt.PackRange(packed, typed, base, count, 0)
	if !intact() || !bytes.Equal(typed, orig) {
		t.Fatalf("PackRange of %v wrote to the typed buffer or around it", tt)
	}
	if err != nil {
		sentinel("PackRange", n, err)
	} else if tt.Size() <= 1<<16 { // (the reference lists a type map entry by entry)
		// Only the elements the window covers: count may be huge.
		k := 0 // (an empty type packs nothing, however large count is)
		if tt.Size() > 0 {
			k = min(count, n/int(tt.Size())+1)
		}
		want := ddttest.Pack(tt, typed, base, k)
		if len(want) < n || n != min(len(packed), len(want)) && k == count || !bytes.Equal(packed[:n], want[:n]) {
			t.Fatalf("PackRange of %v count %d base %d: n=%d differs from the reference\nIR:\n%s", tt, count, base, n, ir)
		}
		if n > 0 {
			wantT := ddttest.UnpackRange(tt, typed, packed[:n], base, k, 0)
			src := make([]byte, n)
			copy(src, packed[:n])
			u, err := tt.UnpackRange(typed, src, base, count, 0)
			if err != nil || u != n || !bytes.Equal(typed, wantT) {
				t.Fatalf("UnpackRange of %v count %d base %d: %d, %v or bytes differ", tt, count, base, u, err)
			}
		}
	}
	if !intact() {
		t.Fatalf("UnpackRange of %v wrote outside the typed buffer", tt)
	}
	// Whole-buffer entry points (base 0) must agree with the range ones.
	if n, err := tt.Unpack(typed, packed, count); err != nil {
		sentinel("Unpack", n, err)
	}
	if n, err := tt.Pack(packed, typed, count); err != nil {
		sentinel("Pack", n, err)
	}
	if c, err := tt.NewUnpacker(typed, base, count); err != nil {
		sentinel("NewUnpacker", 0, err)
	} else if _, err := c.Next(packed); err != nil {
		t.Fatalf("Next after a valid NewUnpacker: %v", err)
	}
	if !intact() {
		t.Fatalf("Unpack of %v wrote outside the typed buffer", tt)
	}
	// Flatten: every segment offset is exact.
	segs, err := tt.Flatten(count, 256)
	if err != nil {
		sentinel("Flatten", 0, err)
		return
	}
	if count > 8 || tt.Size() > 1<<9 {
		return
	}
	m := ddttest.TypeMap(tt)
	var want []Segment
	for k := 0; k < count; k++ {
		o := new(big.Int).Mul(big.NewInt(int64(k)), big.NewInt(tt.Extent()))
		for _, e := range m {
			off := new(big.Int).Add(o, big.NewInt(e.Disp))
			if !off.IsInt64() {
				t.Fatalf("Flatten of %v count %d succeeded, but element %d lies at %v", tt, count, k, off)
			}
			if l := len(want); l > 0 && want[l-1].Off+want[l-1].Len == off.Int64() {
				want[l-1].Len += e.Size
				continue
			}
			want = append(want, Segment{Off: off.Int64(), Len: e.Size})
		}
	}
	if len(want) <= 256 && !slices.Equal(segs, want) {
		t.Fatalf("Flatten of %v count %d = %v, want %v", tt, count, segs, want)
	}
}

// TestRegressionExtremeSpan is FuzzExtremeTypes' first crasher on the
// unfixed span check (seed 66: an element extent of 2^62 whose
// (count-1) × extent wrapped to 0, so Unpack wrote far outside the buffer).
func TestRegressionExtremeSpan(t *testing.T) {
	r := rand.New(rand.NewPCG(66, 31))
	tt, err := ddttest.RandomExtremeType(r, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.Commit(); err != nil {
		t.Fatal(err)
	}
	checkExtreme(t, tt, '2', 80, 64, 256)
}

// TestRegressionFlattenHugeCount is FuzzExtremeTypes' crasher on Flatten:
// 2^40 elements of a contiguous type are one segment, but Flatten walked
// every element (for hours).
func TestRegressionFlattenHugeCount(t *testing.T) {
	segs, err := Int32.Flatten(1<<40, 256)
	if err != nil || len(segs) != 1 || segs[0] != (Segment{Off: 0, Len: 4 << 40}) {
		t.Fatalf("Flatten(2^40) = %v, %v", segs, err)
	}
	r := rand.New(rand.NewPCG(84, 31))
	tt, err := ddttest.RandomExtremeType(r, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.Commit(); err != nil {
		t.Fatal(err)
	}
	checkExtreme(t, tt, 'â', 4611686018427387841, 18, 101)
}
