package jit

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

func benchIndexType(b *testing.B, n int) *ddt.Type {
	r := rand.New(rand.NewPCG(1, 2))
	idx := make([]int, n)
	x := 0
	for i := range idx {
		x += 1 + r.IntN(6)
		idx[i] = x
	}
	ty := must(ddt.IndexedBlock(1, idx, ddt.Float32))
	_ = ty.SetJIT(ddt.JITOff)
	if err := ty.Commit(); err != nil {
		b.Fatal(err)
	}
	return ty
}

// BenchmarkCompile measures compilation (plan, encode, map, seal) of
// representative types; the code cache is bypassed.
func BenchmarkCompile(b *testing.B) {
	cases := map[string]func(b *testing.B) *ddt.Type{
		"vector": func(b *testing.B) *ddt.Type {
			ty := must(ddt.Vector(64, 5, 170, ddt.Float64))
			_ = ty.SetJIT(ddt.JITOff)
			_ = ty.Commit()
			return ty
		},
		"index50000": func(b *testing.B) *ddt.Type { return benchIndexType(b, 50000) },
		"index1000":  func(b *testing.B) *ddt.Type { return benchIndexType(b, 1000) },
	}
	for name, mk := range cases {
		b.Run(name, func(b *testing.B) {
			ty := mk(b)
			for b.Loop() {
				if _, _, err := CompileIR(ty.IR()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
