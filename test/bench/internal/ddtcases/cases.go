// Package ddtcases holds the DDTBench-like application layouts the bench
// tools measure (test/bench/ddtbench packs them, test/bench/ddtpp sends
// them): WRF, MILC, NAS LU and MG, FFT2, SPECFEM3D and LAMMPS, each at
// sizes s, m and l, as a committed derived datatype together with the
// hand-written Go loops an application would use instead of it.
package ddtcases

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
)

// Case is one DDTBench-like layout at one size: a committed datatype with a
// count, the typed buffer it describes, and the hand-written Go loops an
// application would use instead of the datatype.
type Case struct {
	Name  string
	Size  string
	Type  *ddt.Type
	Count int
	// Typed is the length in bytes of the typed buffer; displacement 0 of
	// element 0 is its byte 0.
	Typed int
	// Bytes is the packed size, Count × Type.Size().
	Bytes int64
	// Pack and Unpack are the manual loops: Pack(packed, typed) and
	// Unpack(typed, packed). They are set up by Bind for one pair of buffers.
	Bind func(packed, typed []byte) (pack, unpack func())
}

// views: typed slices over byte buffers, made once outside the timed loops,
// as an application would hold its arrays.

func f64(b []byte) []float64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func f32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func c128(b []byte) []complex128 {
	if len(b) < 16 {
		return nil
	}
	return unsafe.Slice((*complex128)(unsafe.Pointer(&b[0])), len(b)/16)
}

func i32(b []byte) []int32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func must(t *ddt.Type, err error) *ddt.Type {
	if err != nil {
		panic(err)
	}
	return t
}

func commit(t *ddt.Type) *ddt.Type {
	if err := t.Commit(); err != nil {
		panic(err)
	}
	return t
}

type sizeSpec struct {
	name string
	n    []int
}

// caseBuilder builds one layout at each of its sizes.
type caseBuilder struct {
	name  string
	sizes []sizeSpec
	build func(n []int) *Case
}

// caseBuilders lists every layout.
var caseBuilders = []caseBuilder{
	{"wrf_x_vec", []sizeSpec{{"s", []int{32, 16, 32}}, {"m", []int{64, 32, 64}}, {"l", []int{128, 48, 128}}}, func(n []int) *Case { return wrf(n, true, false) }},
	{"wrf_x_sa", []sizeSpec{{"s", []int{32, 16, 32}}, {"m", []int{64, 32, 64}}, {"l", []int{128, 48, 128}}}, func(n []int) *Case { return wrf(n, true, true) }},
	{"wrf_y_vec", []sizeSpec{{"s", []int{32, 16, 32}}, {"m", []int{64, 32, 64}}, {"l", []int{128, 48, 128}}}, func(n []int) *Case { return wrf(n, false, false) }},
	{"wrf_y_sa", []sizeSpec{{"s", []int{32, 16, 32}}, {"m", []int{64, 32, 64}}, {"l", []int{128, 48, 128}}}, func(n []int) *Case { return wrf(n, false, true) }},
	{"milc_su3_zd", []sizeSpec{{"s", []int{4}}, {"m", []int{8}}, {"l", []int{16}}}, milc},
	{"nas_lu_x", []sizeSpec{{"s", []int{32}}, {"m", []int{64}}, {"l", []int{128}}}, func(n []int) *Case { return naslu(n, true) }},
	{"nas_lu_y", []sizeSpec{{"s", []int{32}}, {"m", []int{64}}, {"l", []int{128}}}, func(n []int) *Case { return naslu(n, false) }},
	{"nas_mg_x", []sizeSpec{{"s", []int{34}}, {"m", []int{66}}, {"l", []int{130}}}, func(n []int) *Case { return nasmg(n, 0) }},
	{"nas_mg_y", []sizeSpec{{"s", []int{34}}, {"m", []int{66}}, {"l", []int{130}}}, func(n []int) *Case { return nasmg(n, 1) }},
	{"nas_mg_z", []sizeSpec{{"s", []int{34}}, {"m", []int{66}}, {"l", []int{130}}}, func(n []int) *Case { return nasmg(n, 2) }},
	{"fft2", []sizeSpec{{"s", []int{64}}, {"m", []int{256}}, {"l", []int{512}}}, fft2},
	{"fft2_send", []sizeSpec{{"s", []int{128}}, {"m", []int{256}}, {"l", []int{768}}}, fft2Send},
	{"fft2_recv", []sizeSpec{{"s", []int{128}}, {"m", []int{256}}, {"l", []int{768}}}, fft2Recv},
	{"specfem3d_oc", []sizeSpec{{"s", []int{1000}}, {"m", []int{10000}}, {"l", []int{50000}}}, func(n []int) *Case { return specfem(n, 1) }},
	{"specfem3d_cm", []sizeSpec{{"s", []int{1000}}, {"m", []int{10000}}, {"l", []int{50000}}}, func(n []int) *Case { return specfem(n, 3) }},
	{"specfem3d_cm_ic", []sizeSpec{{"s", []int{1000, 250}}, {"m", []int{10000, 2500}}, {"l", []int{50000, 12500}}}, specfemCMIC},
	{"specfem3d_mt", []sizeSpec{{"s", []int{1000}}, {"m", []int{7600}}, {"l", []int{76000}}}, specfemMT},
	{"specfem3d_mt_recv", []sizeSpec{{"s", []int{1000}}, {"m", []int{7600}}, {"l", []int{76000}}}, specfemMTRecv},
	{"lammps_atomic", []sizeSpec{{"s", []int{500}}, {"m", []int{5000}}, {"l", []int{50000}}}, func(n []int) *Case { return lammps(n, false) }},
	{"lammps_atomic_recv", []sizeSpec{{"s", []int{500}}, {"m", []int{5000}}, {"l", []int{50000}}}, func(n []int) *Case { return lammpsRecv(n, false) }},
	{"lammps_full", []sizeSpec{{"s", []int{500}}, {"m", []int{5000}}, {"l", []int{50000}}}, func(n []int) *Case { return lammps(n, true) }},
	{"lammps_full_recv", []sizeSpec{{"s", []int{500}}, {"m", []int{5000}}, {"l", []int{50000}}}, func(n []int) *Case { return lammpsRecv(n, true) }},
}

// wrf: NF float32 fields of (nx, nz, ny) points, Fortran order (i fastest),
// stored one after the other in one buffer; halo width hw. The x face is the
// hw columns next to the west halo over all k and the interior j; the y face
// is the hw rows next to the south halo over the interior i and all k. The
// datatype is a struct over the fields of either nested vectors or
// subarrays, as WRF builds it.
func wrf(n []int, xdir, sa bool) *Case {
	const nf, hw = 4, 3
	nx, nz, ny := n[0], n[1], n[2]
	field := nx * nz * ny * 4
	var face *ddt.Type
	var i0, ic, j0, jc int // face box in i and j; k is always full
	if xdir {
		i0, ic, j0, jc = hw, hw, hw, ny-2*hw
	} else {
		i0, ic, j0, jc = hw, nx-2*hw, hw, hw
	}
	if sa {
		face = must(ddt.Subarray([]int{nx, nz, ny}, []int{ic, nz, jc}, []int{i0, 0, j0}, ddt.OrderFortran, ddt.Float32))
	} else {
		plane := must(ddt.Vector(nz, ic, nx, ddt.Float32))
		box := must(ddt.HVector(jc, 1, int64(nx*nz*4), plane))
		face = must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64((j0*nx*nz + i0) * 4)}, box)), 0, int64(field)))
	}
	bl := make([]int, nf)
	ds := make([]int64, nf)
	ts := make([]*ddt.Type, nf)
	for f := range nf {
		bl[f], ds[f], ts[f] = 1, int64(f*field), face
	}
	t := commit(must(ddt.Struct(bl, ds, ts)))
	c := &Case{Type: t, Count: 1, Typed: nf * field}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := f32(typed), f32(packed)
		pack := func() {
			q := 0
			for f := 0; f < nf; f++ {
				fb := f * nx * nz * ny
				for j := j0; j < j0+jc; j++ {
					for k := 0; k < nz; k++ {
						row := fb + (j*nz+k)*nx
						for i := i0; i < i0+ic; i++ {
							p[q] = a[row+i]
							q++
						}
					}
				}
			}
		}
		unpack := func() {
			q := 0
			for f := 0; f < nf; f++ {
				fb := f * nx * nz * ny
				for j := j0; j < j0+jc; j++ {
					for k := 0; k < nz; k++ {
						row := fb + (j*nz+k)*nx
						for i := i0; i < i0+ic; i++ {
							a[row+i] = p[q]
							q++
						}
					}
				}
			}
		}
		return pack, unpack
	}
	return c
}

// milc: an L^4 lattice of su3_vectors (3 complex float32, 24 bytes) stored as
// even and odd half lattices, x fastest (L/2 sites per row). The z-down face
// (z = 0) is, per half and per t, L rows of L/2 sites: MILC's
// hvector(2, vector(L, L*L/2, ...)) of contiguous(6, float32).
func milc(n []int) *Case {
	l := n[0]
	const site = 24
	row := l / 2
	plane := row * l // sites per z plane
	vol := plane * l // sites per t hyper-plane
	half := vol * l  // sites per half lattice
	su3 := commit(must(ddt.Contiguous(6, ddt.Float32)))
	vz := must(ddt.Vector(l, plane, vol, su3))
	t := commit(must(ddt.HVector(2, 1, int64(half*site), vz)))
	c := &Case{Type: t, Count: 1, Typed: 2 * half * site}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := f32(typed), f32(packed)
		pack := func() {
			q := 0
			for h := 0; h < 2; h++ {
				for tt := 0; tt < l; tt++ {
					s0 := (h*half + tt*vol) * 6
					for s := 0; s < plane; s++ {
						src := a[s0+s*6 : s0+s*6+6]
						dst := p[q : q+6]
						dst[0], dst[1], dst[2], dst[3], dst[4], dst[5] = src[0], src[1], src[2], src[3], src[4], src[5]
						q += 6
					}
				}
			}
		}
		unpack := func() {
			q := 0
			for h := 0; h < 2; h++ {
				for tt := 0; tt < l; tt++ {
					s0 := (h*half + tt*vol) * 6
					for s := 0; s < plane; s++ {
						dst := a[s0+s*6 : s0+s*6+6]
						src := p[q : q+6]
						dst[0], dst[1], dst[2], dst[3], dst[4], dst[5] = src[0], src[1], src[2], src[3], src[4], src[5]
						q += 6
					}
				}
			}
		}
		return pack, unpack
	}
	return c
}

// naslu: NAS LU's u(5, nx+2, ny+2, nz) doubles, Fortran order. The x face
// is i = 1 over interior j and k (blocks of 5 doubles); the y face is j = 1
// over interior i and k (rows of 5*nx doubles).
func naslu(n []int, xdir bool) *Case {
	nx := n[0]
	ny, nz := nx, nx/2
	ldi, ldj := nx+2, ny+2
	five := commit(must(ddt.Contiguous(5, ddt.Float64)))
	var t *ddt.Type
	if xdir {
		col := must(ddt.Vector(ny, 1, ldi, five))
		t = must(ddt.HVector(nz, 1, int64(5*ldi*ldj*8), col))
		t = must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64(5 * (1 + ldi) * 8)}, t)), 0, int64(5*ldi*ldj*nz*8)))
	} else {
		t = must(ddt.Vector(nz, nx, ldi*ldj, five))
		t = must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64(5 * (1 + ldi) * 8)}, t)), 0, int64(5*ldi*ldj*nz*8)))
	}
	commit(t)
	c := &Case{Type: t, Count: 1, Typed: 5 * ldi * ldj * nz * 8}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		u, p := f64(typed), f64(packed)
		idx := func(m, i, j, k int) int { return m + 5*(i+ldi*(j+ldj*k)) }
		var pack, unpack func()
		if xdir {
			pack = func() {
				q := 0
				for k := 0; k < nz; k++ {
					for j := 1; j <= ny; j++ {
						b := idx(0, 1, j, k)
						p[q], p[q+1], p[q+2], p[q+3], p[q+4] = u[b], u[b+1], u[b+2], u[b+3], u[b+4]
						q += 5
					}
				}
			}
			unpack = func() {
				q := 0
				for k := 0; k < nz; k++ {
					for j := 1; j <= ny; j++ {
						b := idx(0, 1, j, k)
						u[b], u[b+1], u[b+2], u[b+3], u[b+4] = p[q], p[q+1], p[q+2], p[q+3], p[q+4]
						q += 5
					}
				}
			}
		} else {
			pack = func() {
				q := 0
				for k := 0; k < nz; k++ {
					for i := 1; i <= nx; i++ {
						b := idx(0, i, 1, k)
						p[q], p[q+1], p[q+2], p[q+3], p[q+4] = u[b], u[b+1], u[b+2], u[b+3], u[b+4]
						q += 5
					}
				}
			}
			unpack = func() {
				q := 0
				for k := 0; k < nz; k++ {
					for i := 1; i <= nx; i++ {
						b := idx(0, i, 1, k)
						u[b], u[b+1], u[b+2], u[b+3], u[b+4] = p[q], p[q+1], p[q+2], p[q+3], p[q+4]
						q += 5
					}
				}
			}
		}
		return pack, unpack
	}
	return c
}

// nasmg: NAS MG's u(n, n, n) doubles, Fortran order, one ghost layer. Faces
// of the interior: x (i = 1: single doubles, stride n), y (j = 1: rows of
// n-2), z (k = 1: a plane of (n-2) rows of n-2).
func nasmg(n []int, dir int) *Case {
	m := n[0]
	in := m - 2
	var t *ddt.Type
	var off int
	switch dir {
	case 0:
		// j runs over the interior rows of one k-plane, then k: a vector
		// over k of a vector over j.
		col := must(ddt.Vector(in, 1, m, ddt.Float64))
		t = must(ddt.HVector(in, 1, int64(m*m*8), col))
		off = 1 + m + m*m
	case 1:
		t = must(ddt.Vector(in, in, m*m, ddt.Float64))
		off = 1 + m + m*m
	default:
		t = must(ddt.Vector(in, in, m, ddt.Float64))
		off = 1 + m + m*m
	}
	t = commit(must(ddt.Resized(must(ddt.HIndexedBlock(1, []int64{int64(off * 8)}, t)), 0, int64(m*m*m*8))))
	c := &Case{Type: t, Count: 1, Typed: m * m * m * 8}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		u, p := f64(typed), f64(packed)
		var pack, unpack func()
		switch dir {
		case 0:
			pack = func() {
				q := 0
				for k := 1; k <= in; k++ {
					for j := 1; j <= in; j++ {
						p[q] = u[1+m*(j+m*k)]
						q++
					}
				}
			}
			unpack = func() {
				q := 0
				for k := 1; k <= in; k++ {
					for j := 1; j <= in; j++ {
						u[1+m*(j+m*k)] = p[q]
						q++
					}
				}
			}
		case 1:
			pack = func() {
				q := 0
				for k := 1; k <= in; k++ {
					b := m * (1 + m*k)
					for i := 1; i <= in; i++ {
						p[q] = u[b+i]
						q++
					}
				}
			}
			unpack = func() {
				q := 0
				for k := 1; k <= in; k++ {
					b := m * (1 + m*k)
					for i := 1; i <= in; i++ {
						u[b+i] = p[q]
						q++
					}
				}
			}
		default:
			pack = func() {
				q := 0
				for j := 1; j <= in; j++ {
					b := m * (j + m)
					for i := 1; i <= in; i++ {
						p[q] = u[b+i]
						q++
					}
				}
			}
			unpack = func() {
				q := 0
				for j := 1; j <= in; j++ {
					b := m * (j + m)
					for i := 1; i <= in; i++ {
						u[b+i] = p[q]
						q++
					}
				}
			}
		}
		return pack, unpack
	}
	return c
}

// fft2: the local transpose of an n×n complex128 matrix (row-major): element
// k of the datatype is column k, a vector(n, 1, n) resized to one element's
// extent, packed n times. This is the receive side of DDTBench's FFT
// all-to-all on one process (each column then spans all n rows); fft2_send
// and fft2_recv are its two sides on two processes.
func fft2(n []int) *Case {
	m := n[0]
	col := must(ddt.Vector(m, 1, m, ddt.Complex128))
	t := commit(must(ddt.Resized(col, 0, 16)))
	c := &Case{Type: t, Count: m, Typed: m * m * 16}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := c128(typed), c128(packed)
		pack := func() {
			q := 0
			for j := 0; j < m; j++ {
				for i := 0; i < m; i++ {
					p[q] = a[i*m+j]
					q++
				}
			}
		}
		unpack := func() {
			q := 0
			for j := 0; j < m; j++ {
				for i := 0; i < m; i++ {
					a[i*m+j] = p[q]
					q++
				}
			}
		}
		return pack, unpack
	}
	return c
}

// fft2Procs is the number of processes of DDTBench's FFT2 case (its name
// counts them): each holds n/fft2Procs rows of the n×n matrix.
const fft2Procs = 2

// fft2Send: the send side of the all-to-all of a distributed 2-D FFT. Each
// process holds b = n/2 rows of an n×n complex128 matrix, row-major (rows n
// elements long); peer k gets the b×b block of columns k·b … k·b+b-1, row by
// row. As DDTBench builds it: complex = contiguous(2, float64), the block a
// vector(b, b, n) of it resized to b complex, sent with count 2 (one per
// peer).
func fft2Send(n []int) *Case {
	m := n[0]
	b := m / fft2Procs
	cplx := must(ddt.Contiguous(2, ddt.Float64))
	blk := must(ddt.Vector(b, b, m, cplx))
	t := commit(must(ddt.Resized(blk, 0, int64(b*16))))
	c := &Case{Type: t, Count: fft2Procs, Typed: b * m * 16}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := c128(typed), c128(packed)
		pack := func() {
			q := 0
			for k := 0; k < fft2Procs; k++ {
				for l := 0; l < b; l++ {
					src := a[l*m+k*b : l*m+k*b+b]
					copy(p[q:q+b], src)
					q += b
				}
			}
		}
		unpack := func() {
			q := 0
			for k := 0; k < fft2Procs; k++ {
				for l := 0; l < b; l++ {
					copy(a[l*m+k*b:l*m+k*b+b], p[q:q+b])
					q += b
				}
			}
		}
		return pack, unpack
	}
	return c
}

// fft2Recv: the receive side of the same all-to-all: the b×b block from
// peer k lands transposed in columns k·b … k·b+b-1 of the b×n local matrix.
// As DDTBench builds it: a column vector(b, 1, n) of complex resized to one
// complex, contiguous(b) of those per peer, received with count 2. Stream
// position j·b+i is element (i, j); the hand loops walk the matrix row by
// row as DDTBench's manual unpack does.
func fft2Recv(n []int) *Case {
	m := n[0]
	b := m / fft2Procs
	cplx := must(ddt.Contiguous(2, ddt.Float64))
	col := must(ddt.Resized(must(ddt.Vector(b, 1, m, cplx)), 0, 16))
	t := commit(must(ddt.Contiguous(b, col)))
	c := &Case{Type: t, Count: fft2Procs, Typed: b * m * 16}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := c128(typed), c128(packed)
		pack := func() {
			for i := 0; i < b; i++ {
				row := a[i*m : i*m+m]
				for j, v := range row {
					p[j*b+i] = v
				}
			}
		}
		unpack := func() {
			for i := 0; i < b; i++ {
				row := a[i*m : i*m+m]
				for j := range row {
					row[j] = p[j*b+i]
				}
			}
		}
		return pack, unpack
	}
	return c
}

// boundary returns n sorted distinct indices with irregular gaps (some
// neighbours adjacent), deterministic.
func boundary(n int, seed uint64) ([]int, int) {
	r := rand.New(rand.NewPCG(seed, 11))
	idx := make([]int, n)
	x := 0
	for i := range idx {
		x += 1 + r.IntN(6)
		idx[i] = x
	}
	return idx, x + 1
}

// specfem: SPECFEM3D's exchange of a scalar (oc, outer core: 1 float32) or
// vector (cm, crust-mantle: 3 float32) field at the mesh points on an
// interface: an indexed_block over a point index list.
func specfem(n []int, comps int) *Case {
	idx, npts := boundary(n[0], uint64(comps))
	elem := commit(must(ddt.Contiguous(comps, ddt.Float32)))
	t := commit(must(ddt.IndexedBlock(1, idx, elem)))
	c := &Case{Type: t, Count: 1, Typed: npts * comps * 4}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := f32(typed), f32(packed)
		var pack, unpack func()
		if comps == 1 {
			pack = func() {
				for q, i := range idx {
					p[q] = a[i]
				}
			}
			unpack = func() {
				for q, i := range idx {
					a[i] = p[q]
				}
			}
		} else {
			pack = func() {
				q := 0
				for _, i := range idx {
					b := i * 3
					p[q], p[q+1], p[q+2] = a[b], a[b+1], a[b+2]
					q += 3
				}
			}
			unpack = func() {
				q := 0
				for _, i := range idx {
					b := i * 3
					a[b], a[b+1], a[b+2] = p[q], p[q+1], p[q+2]
					q += 3
				}
			}
		}
		return pack, unpack
	}
	return c
}

// specfemCMIC: SPECFEM3D cm as DDTBench builds it: the crust-mantle and the
// inner-core vector fields (3 float32 per point, two arrays one after the
// other) exchanged in one message, a struct of two indexed_blocks of 3
// float32 at 3×point (n[0] crust-mantle points, the list of specfem3d_cm,
// then n[1] inner-core points). specfem3d_cm is its crust-mantle member
// alone.
func specfemCMIC(n []int) *Case {
	idxCM, nCM := boundary(n[0], 3)
	idxIC, nIC := boundary(n[1], 4)
	scaled := func(idx []int) []int {
		d := make([]int, len(idx))
		for i, x := range idx {
			d[i] = 3 * x
		}
		return d
	}
	cm := must(ddt.IndexedBlock(3, scaled(idxCM), ddt.Float32))
	ic := must(ddt.IndexedBlock(3, scaled(idxIC), ddt.Float32))
	t := commit(must(ddt.Struct([]int{1, 1}, []int64{0, int64(nCM * 12)}, []*ddt.Type{cm, ic})))
	c := &Case{Type: t, Count: 1, Typed: (nCM + nIC) * 12}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		acm, aic, p := f32(typed[:nCM*12]), f32(typed[nCM*12:]), f32(packed)
		pack := func() {
			q := 0
			for _, i := range idxCM {
				b := i * 3
				p[q], p[q+1], p[q+2] = acm[b], acm[b+1], acm[b+2]
				q += 3
			}
			for _, i := range idxIC {
				b := i * 3
				p[q], p[q+1], p[q+2] = aic[b], aic[b+1], aic[b+2]
				q += 3
			}
		}
		unpack := func() {
			q := 0
			for _, i := range idxCM {
				b := i * 3
				acm[b], acm[b+1], acm[b+2] = p[q], p[q+1], p[q+2]
				q += 3
			}
			for _, i := range idxIC {
				b := i * 3
				aic[b], aic[b+1], aic[b+2] = p[q], p[q+1], p[q+2]
				q += 3
			}
		}
		return pack, unpack
	}
	return c
}

// specfemMTStride is DDTBench's DIM2 of SPECFEM3D mt: the send type takes
// one 3-float element out of every specfemMTStride.
const specfemMTStride = 2

// specfemMT: DDTBench's SPECFEM3D mt send side: a float32 array of n ×
// specfemMTStride × 3 (3 fastest), of which the first 3-float element of
// each group of specfemMTStride is sent: vector(n, 1, 2, contiguous(3,
// float32)), 12-byte blocks 24 bytes apart.
func specfemMT(n []int) *Case {
	cnt := n[0]
	elem := must(ddt.Contiguous(3, ddt.Float32))
	t := commit(must(ddt.Vector(cnt, 1, specfemMTStride, elem)))
	c := &Case{Type: t, Count: 1, Typed: cnt * specfemMTStride * 3 * 4}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := f32(typed), f32(packed)
		pack := func() {
			q := 0
			for k := 0; k < cnt; k++ {
				b := k * specfemMTStride * 3
				p[q], p[q+1], p[q+2] = a[b], a[b+1], a[b+2]
				q += 3
			}
		}
		unpack := func() {
			q := 0
			for k := 0; k < cnt; k++ {
				b := k * specfemMTStride * 3
				a[b], a[b+1], a[b+2] = p[q], p[q+1], p[q+2]
				q += 3
			}
		}
		return pack, unpack
	}
	return c
}

// specfemMTRecv: the receive side of SPECFEM3D mt: the n 3-float elements
// land one after the other, contiguous(3n, float32). The datatype engines
// meet a contiguous type here; the hand loop is copy().
func specfemMTRecv(n []int) *Case {
	cnt := n[0]
	t := commit(must(ddt.Contiguous(3*cnt, ddt.Float32)))
	c := &Case{Type: t, Count: 1, Typed: cnt * 3 * 4}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		a, p := f32(typed), f32(packed)
		return func() { copy(p, a) }, func() { copy(a, p) }
	}
	return c
}

// lammps: the border exchange of LAMMPS: for a send list of atoms, the
// per-atom arrays x[3] (float64) and tag, type, mask (int32), plus q
// (float64) and molecule (int32) for the "full" style. The arrays live one
// after another in one buffer; the datatype is a struct of indexed_blocks,
// one per array, so the stream is array by array.
func lammps(n []int, full bool) *Case {
	nsend := n[0]
	list, natoms := boundary(nsend, 5)
	type arr struct {
		elem  *ddt.Type
		bytes int
	}
	arrs := []arr{{commit(must(ddt.Contiguous(3, ddt.Float64))), 24}, {ddt.Int32, 4}, {ddt.Int32, 4}, {ddt.Int32, 4}}
	if full {
		arrs = append(arrs, arr{ddt.Float64, 8}, arr{ddt.Int32, 4})
	}
	var bl []int
	var ds []int64
	var ts []*ddt.Type
	offs := make([]int, len(arrs))
	off := 0
	for i, a := range arrs {
		offs[i] = off
		bl, ds = append(bl, 1), append(ds, int64(off))
		ts = append(ts, commit(must(ddt.IndexedBlock(1, list, a.elem))))
		off += natoms * a.bytes
	}
	t := commit(must(ddt.Struct(bl, ds, ts)))
	c := &Case{Type: t, Count: 1, Typed: off}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		x := f64(typed[offs[0]:])
		ints := [][]int32{i32(typed[offs[1]:]), i32(typed[offs[2]:]), i32(typed[offs[3]:])}
		var qv []float64
		var mol []int32
		if full {
			qv, mol = f64(typed[offs[4]:]), i32(typed[offs[5]:])
		}
		pack := func() {
			px := f64(packed)
			q := 0
			for _, i := range list {
				px[q], px[q+1], px[q+2] = x[3*i], x[3*i+1], x[3*i+2]
				q += 3
			}
			b := q * 8
			for _, a := range ints {
				pi := i32(packed[b:])
				for k, i := range list {
					pi[k] = a[i]
				}
				b += 4 * len(list)
			}
			if full {
				pq := f64(packed[b:])
				for k, i := range list {
					pq[k] = qv[i]
				}
				b += 8 * len(list)
				pm := i32(packed[b:])
				for k, i := range list {
					pm[k] = mol[i]
				}
			}
		}
		unpack := func() {
			px := f64(packed)
			q := 0
			for _, i := range list {
				x[3*i], x[3*i+1], x[3*i+2] = px[q], px[q+1], px[q+2]
				q += 3
			}
			b := q * 8
			for _, a := range ints {
				pi := i32(packed[b:])
				for k, i := range list {
					a[i] = pi[k]
				}
				b += 4 * len(list)
			}
			if full {
				pq := f64(packed[b:])
				for k, i := range list {
					qv[i] = pq[k]
				}
				b += 8 * len(list)
				pm := i32(packed[b:])
				for k, i := range list {
					mol[i] = pm[k]
				}
			}
		}
		return pack, unpack
	}
	return c
}

// lammpsRecv: the receive side of the border exchange of lammps: the ghost
// atoms are appended after the local ones in every per-atom array, so each
// array (local atoms as many as the send side's, then one slot per ghost)
// receives one contiguous run. As DDTBench builds it: a struct of one
// contiguous block per array (3 per atom for x), at each array's first ghost
// slot. The element types are those of the send side (int32 for the integer
// arrays, as LAMMPS stores them; DDTBench declares every array double), so
// both sides carry the same stream.
func lammpsRecv(n []int, full bool) *Case {
	nghost := n[0]
	_, nlocal := boundary(nghost, 5)
	type arr struct {
		comps int
		base  *ddt.Type
		bytes int // per atom
	}
	arrs := []arr{{3, ddt.Float64, 24}, {1, ddt.Int32, 4}, {1, ddt.Int32, 4}, {1, ddt.Int32, 4}}
	if full {
		arrs = append(arrs, arr{1, ddt.Float64, 8}, arr{1, ddt.Int32, 4})
	}
	var bl []int
	var ds []int64
	var ts []*ddt.Type
	runs := make([][2]int, len(arrs)) // byte offset and length of each array's ghost run
	off := 0
	for i, a := range arrs {
		runs[i] = [2]int{off + nlocal*a.bytes, nghost * a.bytes}
		bl, ds = append(bl, 1), append(ds, int64(runs[i][0]))
		ts = append(ts, must(ddt.Contiguous(nghost*a.comps, a.base)))
		off += (nlocal + nghost) * a.bytes
	}
	t := commit(must(ddt.Struct(bl, ds, ts)))
	c := &Case{Type: t, Count: 1, Typed: off}
	c.Bind = func(packed, typed []byte) (func(), func()) {
		pack := func() {
			q := 0
			for _, r := range runs {
				q += copy(packed[q:q+r[1]], typed[r[0]:r[0]+r[1]])
			}
		}
		unpack := func() {
			q := 0
			for _, r := range runs {
				q += copy(typed[r[0]:r[0]+r[1]], packed[q:q+r[1]])
			}
		}
		return pack, unpack
	}
	return c
}

// All builds every case at every size, in the order of Names and of the
// sizes s, m, l.
func All() []*Case {
	var out []*Case
	for _, b := range caseBuilders {
		for _, s := range b.sizes {
			out = append(out, b.make(s))
		}
	}
	return out
}

// Names lists the layouts, in the order All builds them.
func Names() []string {
	out := make([]string, len(caseBuilders))
	for i, b := range caseBuilders {
		out[i] = b.name
	}
	return out
}

// Sizes are the size labels every layout is built at, smallest first.
var Sizes = []string{"s", "m", "l"}

// Build builds layout name at size label size; an unknown name or size is
// an error.
func Build(name, size string) (*Case, error) {
	c, _, err := build(name, size)
	return c, err
}

// build is Build that also returns the size parameters the case was built
// from.
func build(name, size string) (*Case, []int, error) {
	for _, b := range caseBuilders {
		if b.name != name {
			continue
		}
		for _, s := range b.sizes {
			if s.name == size {
				return b.make(s), s.n, nil
			}
		}
		return nil, nil, fmt.Errorf("ddtcases: layout %s has no size %q (want s, m or l)", name, size)
	}
	return nil, nil, fmt.Errorf("ddtcases: no layout %q", name)
}

// make builds b at size s and names it.
func (b caseBuilder) make(s sizeSpec) *Case {
	c := b.build(s.n)
	c.Name, c.Size = b.name, s.name
	c.Bytes = int64(c.Count) * c.Type.Size()
	return c
}

// String names the case and size, e.g. "wrf_x_vec/m".
func (c *Case) String() string { return fmt.Sprintf("%s/%s", c.Name, c.Size) }

// Fill writes a deterministic byte pattern, chosen by seed, into b: the
// bytes of a linear congruential generator (x ← 1664525·x + 1013904223
// mod 2^32, starting from seed·2654435761, each byte the top 8 bits of
// the next x). Programs in other languages reproduce it to compare
// packed streams with these cases.
func Fill(b []byte, seed byte) {
	x := uint32(seed) * 2654435761
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
}
