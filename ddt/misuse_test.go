package ddt_test

import (
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a datatype (built-in, derived and
// committed, derived and not committed, a struct of both, nil) and of a
// packing and an unpacking cursor (and a nil one), called over and
// over with drawn bad arguments (internal/misuse: negative and huge counts
// and offsets, nil and short buffers), returns: no panic, no hang.
func TestMisuse(t *testing.T) {
	for seed := range uint64(40) {
		vec, err := ddt.Vector(3, 2, 5, ddt.Int32)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ddt.Struct([]int{1, 2}, []int64{0, 16}, []*ddt.Type{ddt.Float64, vec})
		if err != nil {
			t.Fatal(err)
		}
		committed, err := ddt.Dup(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := committed.Commit(); err != nil {
			t.Fatal(err)
		}
		typed := make([]byte, 4096)
		pk, err := committed.NewPacker(typed, 0, 8)
		if err != nil {
			t.Fatal(err)
		}
		un, err := committed.NewUnpacker(typed, 0, 8)
		if err != nil {
			t.Fatal(err)
		}
		p := misuse.New(seed, misuse.Config{})
		for _, v := range []any{ddt.Int64, vec, st, committed, pk, un, (*ddt.Cursor)(nil), (*ddt.Type)(nil)} {
			for _, bad := range p.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
	}
}

// TestMisuseConstructors: every constructor, given drawn bad arguments
// (negative and huge counts, strides and displacements, nil and short
// lists, nil and uncommitted element types), returns a type or an error,
// and a type it returns commits, or fails to, without a panic or a hang.
func TestMisuseConstructors(t *testing.T) {
	ctors := map[string]any{
		"Contiguous": ddt.Contiguous, "Darray": ddt.Darray, "Dup": ddt.Dup,
		"HIndexed": ddt.HIndexed, "HIndexedBlock": ddt.HIndexedBlock, "HVector": ddt.HVector,
		"Indexed": ddt.Indexed, "IndexedBlock": ddt.IndexedBlock, "Resized": ddt.Resized,
		"Struct": ddt.Struct, "Subarray": ddt.Subarray, "Vector": ddt.Vector,
		"OfType": ddt.OfType, "ParseJITMode": ddt.ParseJITMode,
	}
	var made []*ddt.Type
	for seed := range uint64(300) {
		p := misuse.New(seed, misuse.Config{Release: func(v any) {
			if ty, ok := v.(*ddt.Type); ok && ty != nil {
				made = append(made, ty)
			}
		}})
		for _, bad := range p.Funcs(ctors) {
			t.Errorf("seed %d: %s", seed, bad)
		}
	}
	p := misuse.New(1, misuse.Config{})
	for _, ty := range made {
		for _, bad := range p.Funcs(map[string]any{"Commit": ty.Commit, "String": ty.String}) {
			t.Errorf("%s", bad)
		}
	}
	t.Logf("%d types made", len(made))
}
