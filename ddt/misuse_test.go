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
