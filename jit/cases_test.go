//go:build amd64

package jit

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// appCases builds the application layouts of DDTBench (the shapes ddtbench
// times) at test sizes: WRF faces as structs of nested vectors and of
// subarrays, MILC's su3 vector, NAS LU and MG faces, the FFT2 transpose,
// SPECFEM3D index lists and LAMMPS's struct of index lists.
func appCases(t testing.TB) map[string]struct {
	ty    *ddt.Type
	count int
} {
	out := map[string]struct {
		ty    *ddt.Type
		count int
	}{}
	add := func(name string, ty *ddt.Type, count int) {
		out[name] = struct {
			ty    *ddt.Type
			count int
		}{interpType(t, ty), count}
	}
	nx, ny, nz := 40, 30, 12
	var faces []*ddt.Type
	plane := must(ddt.Vector(nz, 3, nx, ddt.Float32))
	box := must(ddt.HVector(ny-2, 1, int64(nx*nz*4), plane))
	for f := range 4 {
		faces = append(faces, must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64((nx*nz + 1 + f) * 4)}, box)), 0, 4)))
	}
	bl, ds := []int{1, 1, 1, 1}, []int64{0, int64(nx * ny * nz * 4), int64(2 * nx * ny * nz * 4), int64(3 * nx * ny * nz * 4)}
	add("wrf_x_vec", must(ddt.Struct(bl, ds, faces)), 1)
	sa := must(ddt.Subarray([]int{nx, nz, ny}, []int{nx - 2, nz, 3}, []int{1, 0, 2}, ddt.OrderFortran, ddt.Float32))
	add("wrf_y_sa", must(ddt.Struct(bl, ds, []*ddt.Type{sa, sa, sa, sa})), 1)
	su3 := must(ddt.Contiguous(6, ddt.Float32))
	add("milc_su3_zd", must(ddt.HVector(2, 1, 16*16*8*24*2, must(ddt.Vector(8, 16*8, 16*16*8, su3)))), 1)
	m := 34
	add("nas_lu_x", must(ddt.Vector(m-2, 5, 5*m, ddt.Float64)), 3)
	in := m - 2
	col := must(ddt.Vector(in, 1, m, ddt.Float64))
	add("nas_mg_x", must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64((1 + m + m*m) * 8)}, must(ddt.HVector(in, 1, int64(m*m*8), col)))), 0, int64(m*m*m*8))), 1)
	add("nas_mg_y", must(ddt.Vector(in, in, m*m, ddt.Float64)), 1)
	for _, n := range []int{64, 100} {
		c := must(ddt.Vector(n, 1, n, ddt.Complex128))
		add("fft2_"+string(rune('0'+n/50)), must(ddt.Resized(c, 0, 16)), n)
	}
	r := rand.New(rand.NewPCG(3, 4))
	idx := make([]int, 3000)
	x := 0
	for i := range idx {
		x += 1 + r.IntN(6)
		idx[i] = x
	}
	add("specfem3d_oc", must(ddt.IndexedBlock(1, idx, ddt.Float32)), 1)
	add("specfem3d_cm", must(ddt.IndexedBlock(1, idx, must(ddt.Contiguous(3, ddt.Float32)))), 1)
	var lbl []int
	var lds []int64
	var lts []*ddt.Type
	off := int64(0)
	for _, e := range []*ddt.Type{must(ddt.Contiguous(3, ddt.Float64)), ddt.Int32, ddt.Int32, ddt.Int32, ddt.Float64, ddt.Int32} {
		lbl, lds = append(lbl, 1), append(lds, off)
		lts = append(lts, must(ddt.IndexedBlock(1, idx, e)))
		off += int64(x+1) * e.Extent()
	}
	add("lammps_full", must(ddt.Struct(lbl, lds, lts)), 1)
	return out
}

// TestAppCases checks every DDTBench-like layout, whole and in chunks, on
// every vector width, through ddt's own registration path (JIT on).
func TestAppCases(t *testing.T) {
	needNative(t)
	r := rand.New(rand.NewPCG(7, 7))
	for name, c := range appCases(t) {
		t.Run(name, func(t *testing.T) {
			for _, isa := range []Features{hostFeatures, {AVX2: hostFeatures.AVX2, ERMS: true}, {}} {
				k, err := compileIR(irOf(c.ty), isa)
				if err != nil {
					t.Fatalf("compile: %v\n%s", err, irOf(c.ty))
				}
				if kk, ok := k.(*kernel); ok && name[:4] == "fft2" && kk.tpack == 0 {
					t.Errorf("fft2 not compiled to cache-blocked code:\n%s", irOf(c.ty))
				}
				for range 3 {
					differential(t, r, c.ty, k, c.count)
				}
			}
		})
	}
}
