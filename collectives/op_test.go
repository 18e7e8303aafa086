package collectives_test

import (
	"fmt"
	"math"
	"testing"

	C "github.com/weft-hpc/weft/collectives"
)

type celsius float32

// applyCase applies op to vectors of every length from 0 to 80 elements
// and checks each element against the scalar operator ref, so that both
// the vector kernels (from 64 bytes) and the loops run; values come from
// val.
func applyCase[T comparable](t *testing.T, name string, op C.Op[T], ref func(a, b T) T, val func(i int) T) {
	t.Run(name, func(t *testing.T) {
		for n := 0; n <= 80; n++ {
			a, b := make([]T, n), make([]T, n)
			for i := range n {
				a[i], b[i] = val(3*i+n), val(5*i+1)
			}
			want := make([]T, n)
			for i := range n {
				want[i] = ref(a[i], b[i])
			}
			if err := op.Apply(a, b); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if a[i] != want[i] {
					t.Fatalf("n=%d: element %d = %v, want %v", n, i, a[i], want[i])
				}
			}
		}
	})
}

// TestOpKinds applies the built-in operations to the element types whose
// vector kernel comes from their kind (int, uint, uintptr, complex sums,
// a named float) and to those without one (int64 products, complex
// products), against the scalar operators.
func TestOpKinds(t *testing.T) {
	applyCase(t, "int/sum", C.Sum[int](), func(a, b int) int { return a + b }, func(i int) int { return i*0x9e3779b9 - 1<<40 })
	applyCase(t, "int/max", C.Max[int](), func(a, b int) int { return max(a, b) }, func(i int) int { return (i % 7) - 3 })
	applyCase(t, "int64/prod", C.Prod[int64](), func(a, b int64) int64 { return a * b }, func(i int) int64 { return int64(i)*0x12345 - 77 })
	applyCase(t, "uint/min", C.Min[uint](), func(a, b uint) uint { return min(a, b) }, func(i int) uint { return uint(i) * 0x9e3779b97f4a7c15 })
	applyCase(t, "uintptr/bxor", C.BXor[uintptr](), func(a, b uintptr) uintptr { return a ^ b }, func(i int) uintptr { return uintptr(i) * 0x9e3779b9 })
	applyCase(t, "uint16/prod", C.Prod[uint16](), func(a, b uint16) uint16 { return a * b }, func(i int) uint16 { return uint16(i*977 + 3) })
	applyCase(t, "int8/band", C.BAnd[int8](), func(a, b int8) int8 { return a & b }, func(i int) int8 { return int8(i * 37) })
	applyCase(t, "int32/bor", C.BOr[int32](), func(a, b int32) int32 { return a | b }, func(i int) int32 { return int32(i) << (i % 31) })
	applyCase(t, "celsius/sum", C.Sum[celsius](), func(a, b celsius) celsius { return a + b }, func(i int) celsius { return celsius(i) / 3 })
	applyCase(t, "float64/min", C.Min[float64](), func(a, b float64) float64 { return min(a, b) }, func(i int) float64 {
		return [...]float64{math.Copysign(0, -1), 0, 1.5, -2, math.Inf(1)}[i%5]
	})
	applyCase(t, "complex64/sum", C.Sum[complex64](), func(a, b complex64) complex64 { return a + b }, func(i int) complex64 { return complex(float32(i)/7, -float32(i)) })
	applyCase(t, "complex128/prod", C.Prod[complex128](), func(a, b complex128) complex128 { return a * b }, func(i int) complex128 { return complex(float64(i)/7, 1) })
	// NaN != NaN: min and max of a NaN must give a NaN at every length.
	t.Run("float32/max/nan", func(t *testing.T) {
		for n := 1; n <= 80; n++ {
			a, b := make([]float32, n), make([]float32, n)
			b[n-1] = float32(math.NaN())
			if err := C.Max[float32]().Apply(a, b); err != nil {
				t.Fatal(err)
			}
			if !math.IsNaN(float64(a[n-1])) {
				t.Fatalf("n=%d: max(0, NaN) = %v", n, a[n-1])
			}
		}
	})
	// -0 < +0 for min, whichever side the -0 is on.
	t.Run("float64/min/zeros", func(t *testing.T) {
		neg := math.Copysign(0, -1)
		a, b := make([]float64, 16), make([]float64, 16)
		for i := range a {
			if i%2 == 0 {
				a[i] = neg
			} else {
				b[i] = neg
			}
		}
		if err := C.Min[float64]().Apply(a, b); err != nil {
			t.Fatal(err)
		}
		for i, v := range a {
			if !math.Signbit(v) {
				t.Fatalf("element %d: min(±0, ∓0) = %s", i, fmt.Sprint(v))
			}
		}
	})
}
