package ddtcases

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestCasesPartialPack checks every case at the small size through the
// resumable path: packing in odd-sized segments gives the manual bytes.
func TestCasesPartialPack(t *testing.T) {
	for _, c := range All() {
		if c.Size != "s" {
			continue
		}
		typed := make([]byte, c.Typed)
		Fill(typed, 3)
		want := make([]byte, c.Bytes)
		p, _ := c.Bind(want, typed)
		p()
		got := make([]byte, 0, c.Bytes)
		seg := make([]byte, 1000)
		for from := int64(0); from < c.Bytes; {
			n, err := c.Type.PackRange(seg, typed, 0, c.Count, from)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			got = append(got, seg[:n]...)
			from += int64(n)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: segmented pack differs from the manual loop", c)
		}
	}
}

// caseAt returns the case name at size, with the size parameters it was
// built from.
func caseAt(t *testing.T, name, size string) (*Case, []int) {
	t.Helper()
	c, n, err := build(name, size)
	if err != nil {
		t.Fatal(err)
	}
	return c, n
}

// TestDDTBenchLayouts checks that every layout of DDTBench 1.2 has a case,
// with a case of its own for each receive side whose datatype differs from
// the send side, and that a send side and its receive side carry messages of
// the same size at every size.
func TestDDTBenchLayouts(t *testing.T) {
	names := map[string]bool{}
	for _, b := range caseBuilders {
		if names[b.name] {
			t.Fatalf("case %s listed twice", b.name)
		}
		names[b.name] = true
	}
	for _, n := range []string{
		"wrf_x_vec", "wrf_x_sa", "wrf_y_vec", "wrf_y_sa", "milc_su3_zd",
		"nas_lu_x", "nas_lu_y", "nas_mg_x", "nas_mg_y", "nas_mg_z",
		"fft2_send", "fft2_recv",
		"specfem3d_oc", "specfem3d_cm", "specfem3d_cm_ic", "specfem3d_mt", "specfem3d_mt_recv",
		"lammps_atomic", "lammps_atomic_recv", "lammps_full", "lammps_full_recv",
	} {
		if !names[n] {
			t.Errorf("no case %s", n)
		}
	}
	pairs := [][2]string{{"fft2_send", "fft2_recv"}, {"specfem3d_mt", "specfem3d_mt_recv"},
		{"lammps_atomic", "lammps_atomic_recv"}, {"lammps_full", "lammps_full_recv"}}
	for _, p := range pairs {
		if !names[p[0]] || !names[p[1]] {
			continue
		}
		for _, size := range []string{"s", "m", "l"} {
			s, _ := caseAt(t, p[0], size)
			r, _ := caseAt(t, p[1], size)
			if s.Bytes != r.Bytes {
				t.Errorf("%v sends %d bytes, %v receives %d", s, s.Bytes, r, r.Bytes)
			}
		}
	}
}

// TestCasesRoundTrip checks every case's hand loops at the small size
// against themselves and the datatype: unpacking a packed stream into a
// zeroed buffer and packing again gives the stream back (the loops are
// inverse and no two stream positions share a typed byte), and the
// datatype's unpack writes exactly the bytes the hand loop writes.
func TestCasesRoundTrip(t *testing.T) {
	for _, c := range All() {
		if c.Size != "s" {
			continue
		}
		stream := make([]byte, c.Bytes)
		Fill(stream, 7)
		hand := make([]byte, c.Typed)
		_, unpack := c.Bind(stream, hand)
		unpack()
		again := make([]byte, c.Bytes)
		pack, _ := c.Bind(again, hand)
		pack()
		if !bytes.Equal(again, stream) {
			t.Errorf("%v: hand pack after hand unpack does not give the stream back", c)
			continue
		}
		typed := make([]byte, c.Typed)
		if _, err := c.Type.Unpack(typed, stream, c.Count); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if !bytes.Equal(typed, hand) {
			t.Errorf("%v: datatype unpack and hand unpack write different bytes", c)
		}
	}
}

// TestExchange plays DDTBench's exchanges between the send-side and the
// receive-side datatypes and checks where every received element lands,
// with index formulas of its own: FFT2's all-to-all of two processes
// transposes the global matrix, LAMMPS appends the listed atoms after the
// local ones, SPECFEM3D mt receives every other 3-float element in a row.
func TestExchange(t *testing.T) {
	t.Run("fft2", func(t *testing.T) {
		send, n := caseAt(t, "fft2_send", "s")
		recv, _ := caseAt(t, "fft2_recv", "s")
		const procs = 2
		nn := n[0]
		b := nn / procs
		var streams [procs][]byte
		var local [procs][]complex128
		for r := range procs {
			typed := make([]byte, send.Typed)
			Fill(typed, byte(20+r))
			local[r] = c128(typed)
			streams[r] = make([]byte, send.Bytes)
			if _, err := send.Type.Pack(streams[r], typed, send.Count); err != nil {
				t.Fatal(err)
			}
		}
		blk := b * b * 16
		for k := range procs {
			in := make([]byte, 0, recv.Bytes)
			for r := range procs {
				in = append(in, streams[r][k*blk:(k+1)*blk]...)
			}
			typed := make([]byte, recv.Typed)
			if _, err := recv.Type.Unpack(typed, in, recv.Count); err != nil {
				t.Fatal(err)
			}
			got := c128(typed)
			for i := range b {
				for j := range nn {
					// Row k·b+i of the transpose is column k·b+i of the
					// global matrix, whose row j lives on process j/b.
					want := local[j/b][(j%b)*nn+k*b+i]
					if g := got[i*nn+j]; math.Float64bits(real(g)) != math.Float64bits(real(want)) || math.Float64bits(imag(g)) != math.Float64bits(imag(want)) {
						t.Fatalf("process %d: (%d, %d) = %v, want %v", k, i, j, got[i*nn+j], want)
					}
				}
			}
		}
	})
	for _, full := range []bool{false, true} {
		name := "lammps_atomic"
		elems := []int{24, 4, 4, 4}
		if full {
			name = "lammps_full"
			elems = append(elems, 8, 4)
		}
		t.Run(name, func(t *testing.T) {
			send, n := caseAt(t, name, "s")
			recv, _ := caseAt(t, name+"_recv", "s")
			list, nlocal := boundary(n[0], 5)
			a := make([]byte, send.Typed)
			Fill(a, 30)
			stream := make([]byte, send.Bytes)
			if _, err := send.Type.Pack(stream, a, 1); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, recv.Typed)
			Fill(b, 31)
			before := append([]byte(nil), b...)
			if _, err := recv.Type.Unpack(b, stream, 1); err != nil {
				t.Fatal(err)
			}
			want := before
			offA, offB := 0, 0
			for _, e := range elems {
				for g, i := range list {
					copy(want[offB+(nlocal+g)*e:offB+(nlocal+g+1)*e], a[offA+i*e:offA+(i+1)*e])
				}
				offA += nlocal * e
				offB += (nlocal + len(list)) * e
			}
			if offA != send.Typed || offB != recv.Typed {
				t.Fatalf("typed sizes %d, %d; want %d, %d", send.Typed, recv.Typed, offA, offB)
			}
			if !bytes.Equal(b, want) {
				t.Fatal("ghost atoms not appended after the local atoms of each array")
			}
		})
	}
	t.Run("specfem3d_mt", func(t *testing.T) {
		send, n := caseAt(t, "specfem3d_mt", "s")
		recv, _ := caseAt(t, "specfem3d_mt_recv", "s")
		a := make([]byte, send.Typed)
		Fill(a, 40)
		stream := make([]byte, send.Bytes)
		if _, err := send.Type.Pack(stream, a, 1); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, recv.Typed)
		if _, err := recv.Type.Unpack(b, stream, 1); err != nil {
			t.Fatal(err)
		}
		src, dst := f32(a), f32(b)
		if len(src) != 6*n[0] || len(dst) != 3*n[0] {
			t.Fatalf("%d and %d floats, want %d and %d", len(src), len(dst), 6*n[0], 3*n[0])
		}
		for k := range n[0] {
			for c := range 3 {
				if math.Float32bits(dst[3*k+c]) != math.Float32bits(src[6*k+c]) {
					t.Fatalf("point %d component %d not received", k, c)
				}
			}
		}
	})
}

// TestSpecfemCMIC checks SPECFEM3D cm's two-array message by index formulas:
// the crust-mantle points of the list first (the stream of specfem3d_cm over
// the same array), then the inner-core points.
func TestSpecfemCMIC(t *testing.T) {
	c, n := caseAt(t, "specfem3d_cm_ic", "s")
	cm, _ := caseAt(t, "specfem3d_cm", "s")
	idxCM, nCM := boundary(n[0], 3)
	idxIC, nIC := boundary(n[1], 4)
	if n[0] != len(idxCM) || cm.Typed != nCM*12 || c.Typed != (nCM+nIC)*12 || c.Bytes != int64(len(idxCM)+len(idxIC))*12 {
		t.Fatalf("sizes: typed %d, %d; bytes %d", cm.Typed, c.Typed, c.Bytes)
	}
	typed := make([]byte, c.Typed)
	Fill(typed, 50)
	got := make([]byte, c.Bytes)
	if _, err := c.Type.Pack(got, typed, 1); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, cm.Bytes, c.Bytes)
	if _, err := cm.Type.Pack(want, typed[:cm.Typed], 1); err != nil {
		t.Fatal(err)
	}
	for _, i := range idxIC {
		o := cm.Typed + 12*i
		want = append(want, typed[o:o+12]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("stream is not the crust-mantle points then the inner-core points")
	}
}

// TestBuild: Build finds every layout at every size, and names a bad layout
// or size in its error.
func TestBuild(t *testing.T) {
	for _, n := range Names() {
		for _, s := range Sizes {
			c, err := Build(n, s)
			if err != nil || c.Name != n || c.Size != s || c.Bytes != int64(c.Count)*c.Type.Size() {
				t.Fatalf("Build(%s, %s) = %v, %v", n, s, c, err)
			}
		}
	}
	if len(All()) != len(Names())*len(Sizes) {
		t.Errorf("All has %d cases, want %d", len(All()), len(Names())*len(Sizes))
	}
	for _, bad := range [][2]string{{"nosuch", "s"}, {"fft2", "xl"}} {
		if _, err := Build(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("Build(%s, %s): %v", bad[0], bad[1], err)
		}
	}
}

// TestFill pins the pattern other programs reproduce (test/bench/ddtpp's
// MPI program): the first bytes of seeds 1 and 2, computed apart from Fill with
// the generator in Fill's comment.
func TestFill(t *testing.T) {
	for seed, want := range map[byte][]byte{1: {0x42, 0x2f, 0xc5, 0x14, 0x80, 0x1a, 0x23, 0xf2}, 2: {0x47, 0x17, 0xb8, 0x7e}} {
		b := make([]byte, len(want))
		Fill(b, seed)
		if !bytes.Equal(b, want) {
			t.Errorf("Fill seed %d: % x, want % x", seed, b, want)
		}
	}
}
