package ddt_test

import (
	"fmt"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
)

// countNodes counts constructor nodes of an uncommitted type tree (predefined
// leaves included).
func countNodes(t *Type) int {
	n := 1
	for _, c := range t.Contents().Types {
		n += countNodes(c)
	}
	return n
}

// commitCases are types of at most 16 constructor nodes, as applications build
// them (the targets: Commit ≤ 5 µs each).
func commitCases(tb testing.TB) map[string]*Type {
	m := mustT(tb)
	su3 := m(Contiguous(6, Float32))
	milc := m(HVector(2, 1, 4*64*24, m(Vector(4, 16, 64, su3))))
	plane := m(Vector(32, 3, 64, Float32))
	box := m(HVector(26, 1, 64*32*4, plane))
	wrf := m(Struct([]int{1, 1, 1, 1}, []int64{0, 1 << 20, 2 << 20, 3 << 20}, []*Type{box, box, box, box}))
	sa := m(Subarray([]int{64, 32, 64}, []int{3, 32, 58}, []int{3, 0, 3}, OrderFortran, Float32))
	wrfsa := m(Struct([]int{1, 1, 1}, []int64{0, 1 << 20, 2 << 20}, []*Type{sa, sa, sa}))
	idx := make([]int, 64)
	for i := range idx {
		idx[i] = 3*i + i%5
	}
	spec := m(IndexedBlock(1, idx, m(Contiguous(3, Float32))))
	mixed := m(Struct([]int{1, 2, 1, 3}, []int64{0, 8, 24, 40},
		[]*Type{Float64, m(Vector(2, 1, 3, Int32)), m(Resized(m(HIndexed([]int{1, 2}, []int64{0, 12}, Int16)), 0, 16)), Int8}))
	return map[string]*Type{"milc": milc, "wrf_x_vec": wrf, "wrf_x_sa": wrfsa, "specfem64": spec, "mixed_struct": mixed}
}

func TestCommitCasesAreSmall(t *testing.T) {
	for name, tt := range commitCases(t) {
		if n := countNodes(tt); n > 16 {
			t.Errorf("%s has %d nodes, want ≤ 16", name, n)
		}
		checkAgainstRef(t, tt, 2, []int{61})
	}
}

// BenchmarkCommit measures Commit (validation, normalisation, IR validation)
// of types of ≤ 16 constructor nodes. Target: ≤ 5 µs.
func BenchmarkCommit(b *testing.B) {
	for name, tt := range commitCases(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpuLoop(b, func() {
				if err := Fresh(tt).Commit(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkBuildAndCommit includes the constructor calls of the MILC type.
func BenchmarkBuildAndCommit(b *testing.B) {
	b.ReportAllocs()
	cpuLoop(b, func() {
		su3, _ := Contiguous(6, Float32)
		v, _ := Vector(4, 16, 64, su3)
		h, _ := HVector(2, 1, 4*64*24, v)
		if err := h.Commit(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkPack measures the interpreter on a few shapes, whole and in 4 KiB
// segments (the resume path).
func BenchmarkPack(b *testing.B) {
	m := mustT(b)
	shapes := map[string]*Type{
		"vector8":  m(Vector(4096, 1, 3, Float64)),
		"vector40": m(Vector(1024, 5, 9, Float64)),
		"index4": m(IndexedBlock(1, func() []int {
			x := make([]int, 4096)
			for i := range x {
				x[i] = 2*i + i%3
			}
			return x
		}(), Float32)),
		"struct_mixed": m(Vector(512, 1, 2, m(Struct([]int{1, 1, 1}, []int64{0, 8, 12}, []*Type{Float64, Int32, Int16})))),
	}
	for name, tt := range shapes {
		if err := tt.Commit(); err != nil {
			b.Fatal(err)
		}
		n, base := layout(tt, 1)
		typed := make([]byte, n)
		packed := make([]byte, tt.Size())
		b.Run(name+"/whole", func(b *testing.B) {
			b.SetBytes(tt.Size())
			for b.Loop() {
				if _, err := tt.PackRange(packed, typed, base, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/seg4k", func(b *testing.B) {
			b.SetBytes(tt.Size())
			for b.Loop() {
				for from := int64(0); from < tt.Size(); from += 4096 {
					if _, err := tt.PackRange(packed[from:min(from+4096, tt.Size())], typed, base, 1, from); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkFlattenGiveUp: Flatten of a 50 000-entry index list of single
// floats (SPECFEM3D's layout) with a limit of 1 and of 781 blocks (what
// endpoint's typed sends ask for to decide between packing and gathering):
// the walk stops at the limit, so the cost does not grow with the list.
func BenchmarkFlattenGiveUp(b *testing.B) {
	idx := make([]int, 50000)
	for i := range idx {
		idx[i] = 3*i + i*i%2 // irregular: stays an index list
	}
	t, err := IndexedBlock(1, idx, Float32)
	if err != nil {
		b.Fatal(err)
	}
	if err := t.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{1, 781} {
		b.Run(fmt.Sprint(limit), func(b *testing.B) {
			for b.Loop() {
				if _, err := t.Flatten(1, limit); err == nil {
					b.Fatal("flattened within the limit")
				}
			}
		})
	}
}
