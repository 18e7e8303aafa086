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

// BenchmarkAppCases packs and unpacks the DDTBench-like layouts of
// cases_test.go with the interpreter and with compiled code, side by side.
func BenchmarkAppCases(b *testing.B) {
	for name, c := range appCases(b) {
		ir := c.ty.IR()
		base, tl := layout(ir, c.count)
		typed := make([]byte, base+tl)
		packed := make([]byte, int64(c.count)*ir.Size)
		k, _, err := CompileIR(ir)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/pack/interp", func(b *testing.B) {
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				_, _ = c.ty.PackRange(packed, typed, base, c.count, 0)
			}
		})
		b.Run(name+"/pack/jit", func(b *testing.B) {
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				_, _ = k.Pack(packed, typed, base, c.count, 0)
			}
		})
		b.Run(name+"/unpack/interp", func(b *testing.B) {
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				_, _ = c.ty.UnpackRange(typed, packed, base, c.count, 0)
			}
		})
		b.Run(name+"/unpack/jit", func(b *testing.B) {
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				_, _ = k.Unpack(typed, packed, base, c.count, 0)
			}
		})
	}
}
