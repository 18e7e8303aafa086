//go:build amd64

package jit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/testenv"
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
				if _, _, err := compileFresh(irOf(ty)); err != nil {
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
		ir := irOf(c.ty)
		base, tl := layout(ir, c.count)
		typed := make([]byte, base+tl)
		packed := make([]byte, int64(c.count)*ir.Size)
		k, _, err := compileFresh(ir)
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

// BenchmarkTranspose packs FFT2's column type (n×n complex128) with the
// naive hand loop and with compiled code for several tile shapes
// (tile rows × band bytes), side by side.
func BenchmarkTranspose(b *testing.B) {
	for _, n := range []int{256, 512, 1024} {
		col := must(ddt.Vector(n, 1, n, ddt.Complex128))
		ty := interpType(b, must(ddt.Resized(col, 0, 16)))
		typed := make([]byte, n*n*16)
		packed := make([]byte, n*n*16)
		b.Run(fmt.Sprintf("n=%d/naive", n), func(b *testing.B) {
			a := unsafe.Slice((*complex128)(unsafe.Pointer(&typed[0])), n*n)
			p := unsafe.Slice((*complex128)(unsafe.Pointer(&packed[0])), n*n)
			b.SetBytes(int64(len(packed)))
			for b.Loop() {
				q := 0
				for j := 0; j < n; j++ {
					for i := 0; i < n; i++ {
						p[q] = a[i*n+j]
						q++
					}
				}
			}
		})
		for _, cfg := range [][2]int64{{4, 64}, {8, 128}, {8, 256}, {16, 128}, {16, 256}, {32, 512}} {
			conf := defaultConfig.with(func(c *config) { c.transposeTile, c.transposeBandBytes = cfg[0], cfg[1] })
			k, err := compileWith(irOf(ty), hostFeatures, conf)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("n=%d/jit-tile%d-band%d", n, cfg[0], cfg[1]), func(b *testing.B) {
				b.SetBytes(int64(len(packed)))
				for b.Loop() {
					_, _ = k.Pack(packed, typed, 0, n, 0)
				}
			})
		}
	}
}

// BenchmarkTrampoline measures one call into generated code that only
// returns (the fixed cost of every call into a kernel's code).
func BenchmarkTrampoline(b *testing.B) {
	m, err := newCode([]byte{0xc3}, defaultConfig.dualMap)
	if err != nil {
		testenv.Skip(b, "exec-memory", "native code unavailable: %v", err)
	}
	defer m.release()
	entry := uintptr(unsafe.Pointer(&m.mem[0]))
	var a callArgs
	for b.Loop() {
		callCode(entry, &a)
	}
}
