package vecop

import (
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkSumFloat32 compares the Sum kernel of float32 with the plain
// loop on vectors in the cache and beyond it.
func BenchmarkSumFloat32(b *testing.B) {
	for _, n := range []int{256, 16 << 10, 1 << 20, 16 << 20} {
		d := make([]float32, n/4)
		s := make([]float32, n/4)
		for i := range s {
			s[i] = float32(i)
		}
		f := Func(Float32, Sum)
		b.Run(fmt.Sprintf("kernel/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				f(unsafe.Pointer(&d[0]), unsafe.Pointer(&s[0]), n)
			}
		})
		b.Run(fmt.Sprintf("loop/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				addLoop(d, s)
			}
		})
	}
}
