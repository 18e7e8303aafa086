package jit

import (
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of datatypes committed with the JIT
// on (a vector, a struct of it, an index list) and of their cursors,
// called over and over with drawn bad arguments (internal/misuse: huge
// counts and offsets, short buffers), returns: no panic, no hang, and no
// fault in generated code (ddt's bounds check guards every kernel).
func TestMisuse(t *testing.T) {
	needNative(t)
	for seed := range uint64(30) {
		vec := must(ddt.Vector(5, 3, 7, ddt.Int32))
		st := must(ddt.Struct([]int{1, 2, 3}, []int64{0, 16, 100}, []*ddt.Type{ddt.Float64, vec, ddt.Int16}))
		idx := must(ddt.Indexed([]int{2, 1, 4}, []int{9, 0, 3}, ddt.Float64))
		var types []any
		for _, ty := range []*ddt.Type{vec, st, idx} {
			if err := ty.SetJIT(ddt.JITOn); err != nil {
				t.Fatal(err)
			}
			if err := ty.Commit(); err != nil {
				t.Fatal(err)
			}
			typed := make([]byte, 8192)
			pk, err := ty.NewPacker(typed, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, ty, pk)
		}
		p := misuse.New(seed, misuse.Config{})
		for _, v := range types {
			for _, bad := range p.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
	}
}
