package ddttest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// TestInterpreterConforms runs the conformance kit on the interpreter over
// random types.
func TestInterpreterConforms(t *testing.T) {
	for seed := uint64(0); seed < 400; seed++ {
		r := rand.New(rand.NewPCG(seed, 77))
		ty := ddttest.RandomType(r, 4)
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		k, err := ty.Interpreter()
		if err != nil {
			t.Fatal(err)
		}
		ddttest.CheckKernel(t, ty, k, r, 4)
	}
}

// TestTypeMap checks the reference against a hand-computed type map.
func TestTypeMap(t *testing.T) {
	v, err := ddt.Vector(2, 2, 3, ddt.Int16)
	if err != nil {
		t.Fatal(err)
	}
	got := ddttest.TypeMap(v)
	want := []ddttest.Entry{{0, 2}, {2, 2}, {6, 2}, {8, 2}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}

// The reference type map of a vector: the oracle CheckKernel compares
// kernels with.
func ExampleTypeMap() {
	v, _ := ddt.Vector(2, 2, 3, ddt.Int16)
	fmt.Println(ddttest.TypeMap(v))
	// Output: [{0 2} {2 2} {6 2} {8 2}]
}

// TestRandomExtremeType: the extreme generator's rejections all wrap
// ErrOverflow, and its committed types have consistent IR facts.
func TestRandomExtremeType(t *testing.T) {
	committed := 0
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 91))
		ty, err := ddttest.RandomExtremeType(r, 4)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := ty.Commit(); err != nil {
			if !errors.Is(err, ddt.ErrOverflow) {
				t.Fatalf("seed %d: Commit %v: %v", seed, ty, err)
			}
			continue
		}
		committed++
		if ir := ddtir.TypeIR(ty); ir.Size != ty.Size() || ir.Extent != ty.Extent() || ir.TrueExtent != ty.TrueExtent() {
			t.Fatalf("seed %d: IR %v disagrees with %v", seed, ir, ty)
		}
	}
	if committed < 250 {
		t.Fatalf("only %d of 500 extreme types committed", committed)
	}
}
