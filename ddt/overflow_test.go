package ddt_test

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	. "github.com/weft-hpc/weft/ddt"
)

// guarded returns a slice of n bytes inside a larger patterned allocation and
// a function that reports whether any byte around it changed.
func guarded(n int) (buf []byte, intact func() bool) {
	const guard = 4096
	all := make([]byte, guard+n+guard)
	for i := range all {
		all[i] = byte(i*7 + 3)
	}
	orig := append([]byte(nil), all...)
	buf = all[guard : guard+n : guard+n]
	return buf, func() bool {
		return bytes.Equal(all[:guard], orig[:guard]) && bytes.Equal(all[guard+n:], orig[guard+n:])
	}
}

// hugeExtentTypes are committed types whose single element is tiny but whose
// extent (or stride) is so large that count × extent overflows int64 for a
// handful of elements.
func hugeExtentTypes(t *testing.T) map[string]*Type {
	t.Helper()
	m := mustT(t)
	out := map[string]*Type{
		"resized 2^62+16":      m(Resized(Byte, 0, 1<<62+16)),
		"resized 2^62":         m(Resized(Byte, 0, 1<<62)),
		"resized -2^62":        m(Resized(Byte, 0, -(1 << 62))),
		"resized MaxInt64":     m(Resized(Byte, 0, math.MaxInt64)),
		"resized MinInt64+1":   m(Resized(Byte, -1, math.MinInt64+1)),
		"resized 2^63/3 int32": m(Resized(Int32, 0, math.MaxInt64/3+1)),
		"resized 2^61 vector":  m(Resized(m(Vector(2, 1, 2, Int32)), 0, 1<<61)),
	}
	for name, ty := range out {
		if err := ty.SetJIT(JITOff); err != nil {
			t.Fatal(err)
		}
		if err := ty.Commit(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return out
}

// TestOverflowingSpanIsRejected: the pre-pack check must notice that
// (count-1) × extent overflows, so that no entry point touches memory
// outside the buffers (the interpreter once wrote past a 1-byte buffer).
func TestOverflowingSpanIsRejected(t *testing.T) {
	for name, ty := range hugeExtentTypes(t) {
		for _, count := range []int{2, 3, 4, 5, 8, 1 << 20} {
			typed, intact := guarded(int(ty.TrueExtent()))
			packed := make([]byte, 1<<10)
			isErr := func(op string, n int, err error) {
				t.Helper()
				if err == nil || n != 0 {
					t.Errorf("%s count %d: %s = %d, %v; want an error", name, count, op, n, err)
				} else if !errors.Is(err, ErrBounds) && !errors.Is(err, ErrOverflow) {
					t.Errorf("%s count %d: %s: %v wraps neither ErrBounds nor ErrOverflow", name, count, op, err)
				}
				if !intact() {
					t.Fatalf("%s count %d: %s wrote outside the typed buffer", name, count, op)
				}
			}
			n, err := ty.Unpack(typed, packed, count)
			isErr("Unpack", n, err)
			n, err = ty.Pack(packed, typed, count)
			isErr("Pack", n, err)
			n, err = ty.UnpackRange(typed, packed, 0, count, 0)
			isErr("UnpackRange", n, err)
			n, err = ty.PackRange(packed, typed, 0, count, 1)
			isErr("PackRange", n, err)
			_, err = ty.NewUnpacker(typed, 0, count)
			isErr("NewUnpacker", 0, err)
			k, err := ty.Interpreter()
			if err != nil {
				t.Fatal(err)
			}
			n, err = k.Unpack(typed, packed, 0, count, 0)
			isErr("Interpreter.Unpack", n, err)
			// Flatten has no buffer, but the offsets of count elements
			// must be representable.
			if count <= 8 {
				s := new(big.Int).Mul(big.NewInt(int64(count-1)), big.NewInt(ty.Extent()))
				lo := new(big.Int).Add(big.NewInt(ty.TrueLB()), s)
				hi := new(big.Int).Add(big.NewInt(ty.TrueLB()+ty.TrueExtent()), s)
				fits := lo.IsInt64() && hi.IsInt64()
				segs, err := ty.Flatten(count, 64)
				if fits && err != nil || !fits && !errors.Is(err, ErrOverflow) {
					t.Errorf("%s count %d: Flatten = %v, %v; offsets fit: %v", name, count, segs, err, fits)
				}
			}
		}
		// One element still works.
		typed, intact := guarded(int(ty.TrueExtent()))
		want := bytes.Repeat([]byte{0xab}, int(ty.Size()))
		if n, err := ty.Unpack(typed, want, 1); err != nil || n != len(want) || !intact() {
			t.Errorf("%s: one element: %d, %v", name, n, err)
		}
	}
}

// TestFlattenOverflow: Flatten of count elements whose offsets leave int64
// fails instead of returning wrapped segments.
func TestFlattenOverflow(t *testing.T) {
	ty := mustT(t)(Resized(Byte, 0, 1<<62+16))
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	if segs, err := ty.Flatten(2, 0); err != nil || len(segs) != 2 || segs[1].Off != 1<<62+16 {
		t.Fatalf("Flatten(2) = %v, %v", segs, err)
	}
	if segs, err := ty.Flatten(5, 0); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Flatten(5) = %v, %v; want ErrOverflow", segs, err)
	}
}

// TestFlattenTooManySegments: a count whose blocks cannot merge into
// MaxSegments or fewer is refused at once, with no limit given or a larger
// one (it used to walk, appending segments until memory ran out); a
// contiguous layout of the same count is still one segment, and a count
// within the bound is flattened.
func TestFlattenTooManySegments(t *testing.T) {
	vec := mustT(t)(Vector(2, 1, 3, Int32))
	if err := vec.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ count, max int }{{1 << 30, 0}, {math.MaxInt32, 0}, {1 << 40, math.MaxInt}, {MaxSegments, MaxSegments + 5}} {
		start := time.Now()
		if segs, err := vec.Flatten(tc.count, tc.max); !errors.Is(err, ErrInvalid) || segs != nil {
			t.Errorf("Flatten(%d, %d): %d segments, %v; want ErrInvalid", tc.count, tc.max, len(segs), err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Flatten(%d, %d) took %v", tc.count, tc.max, took)
		}
	}
	if segs, err := vec.Flatten(1000, 0); err != nil || len(segs) != 1001 { // element k's second block touches element k+1's first
		t.Errorf("Flatten(1000, 0): %d segments, %v", len(segs), err)
	}
	if segs, err := Int32.Flatten(math.MaxInt32, 0); err != nil || len(segs) != 1 || segs[0].Len != 4*math.MaxInt32 {
		t.Errorf("Int32.Flatten(MaxInt32, 0) = %v, %v", segs, err)
	}
}

// TestConstructorExtentOverflow: a type whose extent, size or bounds cannot
// be represented is rejected when it is built, with ErrOverflow.
func TestConstructorExtentOverflow(t *testing.T) {
	m := mustT(t)
	cases := map[string]func() (*Type, error){
		"hvector stride MinInt64": func() (*Type, error) { return HVector(2, 1, math.MinInt64, Byte) },
		"hvector stride MaxInt64": func() (*Type, error) { return HVector(2, 1, math.MaxInt64, Byte) },
		"hvector -2^62 × 3":       func() (*Type, error) { return HVector(3, 1, -(1 << 62), Byte) },
		"struct ±2^62":            func() (*Type, error) { return Struct([]int{1, 1}, []int64{-(1 << 62), 1 << 62}, []*Type{Byte, Byte}) },
		"hindexed MinInt64,0":     func() (*Type, error) { return HIndexed([]int{1, 1}, []int64{math.MinInt64, 0}, Byte) },
		"resized extent MinInt64": func() (*Type, error) { return Resized(Byte, 0, math.MinInt64) },
		"resized lb+extent":       func() (*Type, error) { return Resized(Byte, math.MaxInt64, 1) },
		"contiguous 2 × 2^62": func() (*Type, error) {
			return Contiguous(2, m(Resized(Byte, 0, 1<<62)))
		},
		"contiguous size": func() (*Type, error) {
			return Contiguous(1<<40, m(Contiguous(1<<30, m(Resized(Byte, 0, 0)))))
		},
		"vector stride × extent": func() (*Type, error) {
			return Vector(2, 1, 1<<40, m(Resized(Byte, 0, 1<<30)))
		},
		"struct padding past MaxInt64": func() (*Type, error) {
			return Struct([]int{1, 1}, []int64{0, math.MaxInt64 - 8}, []*Type{Byte, Float64})
		},
	}
	for name, mk := range cases {
		ty, err := mk()
		if err == nil {
			err = ty.Commit()
		}
		if !errors.Is(err, ErrOverflow) {
			t.Errorf("%s: %v (type %v); want ErrOverflow", name, err, ty)
		}
	}
}

// nestedPairs returns Struct{t, t} nested depth times around Byte, the
// second member one byte past the end of the first, none of it committed.
func nestedPairs(t *testing.T, depth int) *Type {
	ty := Byte
	for range depth {
		var err error
		ty, err = Struct([]int{1, 1}, []int64{0, ty.Extent() + 1}, []*Type{ty, ty})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ty
}

// TestCommitSharedSubtypesLinear: a sub-type used several times by one
// uncommitted tree is normalised once per Commit, so Struct{t, t} nested 48
// deep commits at once instead of in 2^48 steps.
func TestCommitSharedSubtypesLinear(t *testing.T) {
	for _, depth := range []int{16, 48} {
		ty := nestedPairs(t, depth)
		if err := ty.SetJIT(JITOff); err != nil {
			t.Fatal(err)
		}
		before := NormSteps()
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		if steps := NormSteps() - before; steps > int64(4*depth+4) {
			t.Fatalf("depth %d: %d normalisation steps, want O(depth)", depth, steps)
		}
		if ty.Size() != 1<<depth {
			t.Fatalf("depth %d: size %d", depth, ty.Size())
		}
	}
}

// TestCommitSharedNodesLinear: a tree whose IR shares sub-nodes between
// several parents (t and a loop over t in one struct, nested) commits in
// time linear in its depth, although walking it as a tree would take
// 2^depth steps.
func TestCommitSharedNodesLinear(t *testing.T) {
	for _, depth := range []int{12, 30} {
		ty := Int16
		for range depth {
			two, err := Contiguous(2, ty)
			if err != nil {
				t.Fatal(err)
			}
			ty, err = Struct([]int{1, 1}, []int64{0, 2 * ty.Extent()}, []*Type{ty, two})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := ty.SetJIT(JITOff); err != nil {
			t.Fatal(err)
		}
		before := NormSteps()
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		if steps := NormSteps() - before; steps > int64(8*depth+8) {
			t.Fatalf("depth %d: %d normalisation steps, want O(depth)", depth, steps)
		}
	}
}

// TestCheckBounds: count elements of a type, element k at k·extent, fit a
// buffer exactly when their true bounds do; a negative lower bound, a
// short buffer and a span past int64 are refused with ErrBounds (and
// ErrOverflow for the last).
func TestCheckBounds(t *testing.T) {
	vec, err := Vector(3, 1, 4, Int64) // bytes [0, 72): blocks at 0, 32, 64
	if err == nil {
		err = vec.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	neg, err := Resized(Int64, -8, 8) // true lb 0, extent 8, lb -8
	if err == nil {
		err = neg.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	shifted, err := HIndexed([]int{1}, []int64{-8}, Int64) // touches [-8, 0)
	if err == nil {
		err = shifted.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	huge, err := Vector(1<<30, 1, 1<<30, Int64)
	if err == nil {
		err = huge.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		ty       *Type
		count, n int
		want     error // nil, ErrBounds or ErrOverflow
	}{
		{"one vector, exact", vec, 1, 72, nil},
		{"one vector, a byte short", vec, 1, 71, ErrBounds},
		{"two vectors (extent 72)", vec, 2, 144, nil},
		{"two vectors, short", vec, 2, 143, ErrBounds},
		{"zero count", vec, 0, 0, nil},
		{"resized below 0, data at 0", neg, 3, 24, nil},
		{"data below displacement 0", shifted, 1, 64, ErrBounds},
		{"a span past int64", huge, 1 << 30, 1 << 40, ErrOverflow},
	} {
		err := c.ty.CheckBounds(c.count, c.n)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		case c.want == ErrOverflow && !errors.Is(err, ErrBounds):
			t.Errorf("%s: %v does not wrap ErrBounds", c.name, err)
		}
	}
}
