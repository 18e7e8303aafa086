//go:build amd64

package jit

import (
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// kernelsOf returns the loop kernels of k: k itself, or the parts of a
// sequence kernel.
func kernelsOf(t *testing.T, k any) []*kernel {
	t.Helper()
	switch k := k.(type) {
	case *kernel:
		return []*kernel{k}
	case *seqKernel:
		var out []*kernel
		for _, pt := range k.parts {
			out = append(out, kernelsOf(t, pt.k)...)
		}
		return out
	case contigKernel:
		return nil
	}
	t.Fatalf("kernel %T", k)
	return nil
}

// TestNoLegacySSEInVEXCode pins the encoding of 16-byte moves in code that
// may also use 32- or 64-byte ones: every instruction on an xmm register is
// VEX-encoded. Mixing legacy SSE moves (movdqu) with ymm/zmm moves made the
// straight-line LAMMPS body 20 times slower on an Intel Xeon (7 µs against
// 0.34 µs for 2000 blocks), the SSE/AVX transition penalty.
func TestNoLegacySSEInVEXCode(t *testing.T) {
	needNative(t)
	for name, c := range appCases(t) {
		for _, f := range []Features{{AVX2: true, ERMS: true}, {AVX2: true, AVX512: true, ERMS: true}, {}} {
			k, err := compileIR(irOf(c.ty), f)
			if err != nil {
				t.Fatalf("%s %v: %v", name, f, err)
			}
			vex, legacy := 0, 0
			for _, kk := range kernelsOf(t, k) {
				code, e, a, err := generate(kk.p, f)
				if err != nil {
					t.Fatal(err)
				}
				for at := 0; at < e.tables; {
					in, err := x86asm.Decode(code[at:e.tables], 64)
					if err != nil {
						t.Fatalf("%s %v: decode at %#x: %v", name, f, at, err)
					}
					xmm := false
					for _, arg := range in.Args {
						if r, ok := arg.(x86asm.Reg); ok && r >= x86asm.X0 && r <= x86asm.X15 {
							xmm = true
						}
					}
					if xmm {
						if s := x86asm.GNUSyntax(in, 0, nil); strings.HasPrefix(s, "v") {
							vex++
						} else {
							legacy++
							if f.AVX2 {
								t.Errorf("%s %v: legacy SSE %q at %#x", name, f, s, at)
							}
						}
					}
					at += in.Len
				}
				asmPool.Put(a)
			}
			if !f.AVX2 && vex > 0 {
				t.Errorf("%s %v: %d VEX instructions in SSE2 code", name, f, vex)
			}
			t.Logf("%s %v: %d VEX, %d legacy xmm instructions", name, f, vex, legacy)
		}
	}
}
