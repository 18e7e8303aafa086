package vecop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// special float values the kernels must treat as Go's operators do.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(),
	math.Float64frombits(0x7ff8_0000_0000_1234), math.Float64frombits(0xfff4_0000_0000_0001), 5e-324, math.MaxFloat64}

func gen[T any](r *rand.Rand, k Kind) T {
	var v T
	p := unsafe.Pointer(&v)
	switch k {
	case Float32:
		if r.IntN(3) == 0 {
			*(*float32)(p) = float32(specials[r.IntN(len(specials))])
		} else {
			*(*float32)(p) = float32(r.NormFloat64() * 100)
		}
	case Float64:
		if r.IntN(3) == 0 {
			*(*float64)(p) = specials[r.IntN(len(specials))]
		} else {
			*(*float64)(p) = r.NormFloat64() * 100
		}
	default:
		b := unsafe.Slice((*byte)(p), unsafe.Sizeof(v))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 { // small values too, so that equal operands occur
			for i := 1; i < len(b); i++ {
				b[i] = 0
			}
			b[0] &= 3
		}
	}
	return v
}

// check compares Func(k, op) with the scalar operator ref bit for bit,
// on every length up to a few vector rounds and one large vector, at
// several element offsets, and checks that src and the bytes around dst
// are left alone.
func check[T comparable](t *testing.T, k Kind, op Op, ref func(a, b T) T) {
	t.Helper()
	f := Func(k, op)
	if f == nil {
		t.Fatalf("no kernel for kind %d op %d", k, op)
	}
	var z T
	es := int(unsafe.Sizeof(z))
	r := rand.New(rand.NewPCG(uint64(k), uint64(op)))
	lengths := []int{}
	for n := 0; n <= 600/es; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, (1<<16)/es+3)
	for _, n := range lengths {
		for off := 0; off < 4; off++ {
			d := make([]T, n+off+2)
			s := make([]T, n+off)
			for i := range d {
				d[i] = gen[T](r, k)
			}
			for i := range s {
				s[i] = gen[T](r, k)
				if r.IntN(5) == 0 && i+1 < len(d) {
					s[i] = d[i+1] // equal operands
				}
			}
			want := append([]T(nil), d...)
			for i := 0; i < n; i++ {
				want[off+1+i] = ref(want[off+1+i], s[off+i])
			}
			s0 := append([]T(nil), s...)
			if n > 0 {
				f(unsafe.Pointer(&d[off+1]), unsafe.Pointer(&s[off]), n*es)
			}
			for i := range d {
				if !same(d[i], want[i]) {
					t.Fatalf("n=%d off=%d: element %d: got %v want %v (%s)", n, off, i-off-1, d[i], want[i], bits(d[i]))
				}
			}
			for i := range s {
				if !same(s[i], s0[i]) {
					t.Fatalf("n=%d off=%d: src element %d changed", n, off, i)
				}
			}
		}
	}
}

// same compares the memory of two values.
func same[T any](a, b T) bool {
	n := unsafe.Sizeof(a)
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&a)), n)) == string(unsafe.Slice((*byte)(unsafe.Pointer(&b)), n))
}

func bits[T any](v T) string {
	return fmt.Sprintf("% x", unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)))
}

func checkArith[T number](t *testing.T, k Kind, ops []Op) {
	for _, op := range ops {
		var ref func(a, b T) T
		switch op {
		case Sum:
			ref = func(a, b T) T { return a + b }
		case Prod:
			ref = func(a, b T) T { return a * b }
		case Min:
			ref = func(a, b T) T { return min(a, b) }
		case Max:
			ref = func(a, b T) T { return max(a, b) }
		}
		t.Run(fmt.Sprintf("op%d", op), func(t *testing.T) { check(t, k, op, ref) })
	}
}

func checkBits[T integer](t *testing.T, k Kind) {
	t.Run("band", func(t *testing.T) { check(t, k, BAnd, func(a, b T) T { return a & b }) })
	t.Run("bor", func(t *testing.T) { check(t, k, BOr, func(a, b T) T { return a | b }) })
	t.Run("bxor", func(t *testing.T) { check(t, k, BXor, func(a, b T) T { return a ^ b }) })
}

func TestKernels(t *testing.T) {
	t.Logf("AVX2 kernels enabled: %v", Enabled())
	all := []Op{Sum, Prod, Min, Max}
	noProd := []Op{Sum, Min, Max}
	t.Run("int8", func(t *testing.T) { checkArith[int8](t, Int8, noProd); checkBits[int8](t, Int8) })
	t.Run("int16", func(t *testing.T) { checkArith[int16](t, Int16, all); checkBits[int16](t, Int16) })
	t.Run("int32", func(t *testing.T) { checkArith[int32](t, Int32, all); checkBits[int32](t, Int32) })
	t.Run("int64", func(t *testing.T) { checkArith[int64](t, Int64, []Op{Sum}); checkBits[int64](t, Int64) })
	t.Run("uint8", func(t *testing.T) { checkArith[uint8](t, Uint8, noProd); checkBits[uint8](t, Uint8) })
	t.Run("uint16", func(t *testing.T) { checkArith[uint16](t, Uint16, all) })
	t.Run("uint32", func(t *testing.T) { checkArith[uint32](t, Uint32, all) })
	t.Run("uint64", func(t *testing.T) { checkArith[uint64](t, Uint64, []Op{Sum}) })
	t.Run("float32", func(t *testing.T) { checkArith[float32](t, Float32, all) })
	t.Run("float64", func(t *testing.T) { checkArith[float64](t, Float64, all) })
}

// TestMissing: the pairs AVX2 has no instruction for have no kernel, so
// the caller keeps its loop.
func TestMissing(t *testing.T) {
	for _, c := range []struct {
		k  Kind
		op Op
	}{{Int8, Prod}, {Uint8, Prod}, {Int64, Prod}, {Int64, Min}, {Uint64, Max}, {0, Sum}} {
		if Func(c.k, c.op) != nil {
			t.Errorf("kind %d op %d: a kernel", c.k, c.op)
		}
	}
}
