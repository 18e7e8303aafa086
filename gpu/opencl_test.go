package gpu

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/testenv"
)

// openCL opens OpenCL device 0 or skips (feature "opencl": pocl from
// deploy/install-gpu-tools.sh). Its packs run the kernels (MethodKernel):
// the tests of the copy methods choose theirs.
func openCL(t testing.TB) *Device {
	t.Helper()
	d, err := OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "opencl", "%v (deploy/install-gpu-tools.sh installs pocl)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d.method = MethodKernel
	t.Cleanup(func() { d.Close() })
	return d
}

// TestOpenCLRandomTypes builds the OpenCL C kernels of random types and
// runs them on the first OpenCL device (pocl on the CPU here), through the
// same Device code a GPU uses, against ddttest's reference with guard
// bytes.
func TestOpenCLRandomTypes(t *testing.T) {
	d := openCL(t)
	t.Logf("device %s", d)
	n := 10
	if testing.Short() {
		n = 6
	}
	r := rand.New(rand.NewPCG(5, 22))
	for i := 0; i < n; i++ {
		ty := committed(t, ddttest.RandomType(r, 4))
		if _, err := PlanOf(ty); err != nil {
			continue
		}
		deviceCheck(t, d, ty, 1+r.IntN(3), r)
	}
	if st := d.Stats(); st.Builds == 0 || st.Launches == 0 {
		t.Fatalf("nothing ran: %+v", st)
	}
}

// TestOpenCLLayouts runs the seed's layouts (vector of 8-byte blocks, a 3D
// face subarray, a struct, an indexed type) at sizes where the grid-stride
// loop and many work groups run, with the 3-D and both 1-D launches.
func TestOpenCLLayouts(t *testing.T) {
	d := openCL(t)
	r := rand.New(rand.NewPCG(8, 8))
	modes := []int{0, 1, 2} // the 3-D launch, 1-D with 32- and 64-bit splits
	if testing.Short() {
		modes = modes[:2]
	}
	for _, mode := range modes {
		d.grid1D, d.forceWide = mode == 1, mode == 2
		for _, ty := range seedLayouts(t, 32) {
			deviceCheck(t, d, ty, 2, r)
		}
	}
}

// seedLayouts are the layouts of the GPU datatype study, scaled by n.
func seedLayouts(t testing.TB, n int) []*ddt.Type {
	vec := must(ddt.Vector(n*n, 1, 4, ddt.Float64))
	face := must(ddt.Subarray([]int{n, n, n}, []int{n, n, 1}, []int{0, 0, n / 2}, ddt.OrderFortran, ddt.Float64))
	face2 := must(ddt.Subarray([]int{n, n, n}, []int{1, n, n}, []int{n / 2, 0, 0}, ddt.OrderFortran, ddt.Float32))
	st := must(ddt.Struct([]int{1, 3, 2}, []int64{0, 8, 24}, []*ddt.Type{ddt.Float64, ddt.Int32, ddt.Float32}))
	sts := must(ddt.Contiguous(n*4, must(ddt.Resized(st, 0, 40))))
	idx := make([]int, n*8)
	bl := make([]int, n*8)
	x := 0
	for i := range idx {
		x += 1 + i%5
		idx[i], bl[i] = x, 1+i%3
		x += bl[i]
	}
	ind := must(ddt.Indexed(bl, idx, ddt.Float32))
	out := []*ddt.Type{vec, face, face2, sts, ind}
	for _, ty := range out {
		committed(t, ty)
	}
	return out
}

// TestOpenCLBuildError: a program that does not compile is an error with
// the compiler's log, not a crash.
func TestOpenCLBuildError(t *testing.T) {
	d := openCL(t)
	_, err := d.be.build("__kernel void k(__global int *p) { p[0] = i; }", []string{"k"})
	if err == nil || !strings.Contains(err.Error(), "CL_BUILD_PROGRAM_FAILURE") {
		t.Fatalf("bad source: %v", err)
	}
}

// TestOpenCLHostMemory packs into, and unpacks from, host memory the
// device maps (AllocHost; zero copy on pocl), read through Bytes.
func TestOpenCLHostMemory(t *testing.T) {
	d := openCL(t)
	ctx := context.Background()
	for _, ty := range seedLayouts(t, 16)[2:4] {
		n, base := ddttest.Layout(ty, 2)
		host := make([]byte, n)
		for i := range host {
			host[i] = byte(i * 7)
		}
		typed, err := d.Alloc(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		typed.Write(0, host)
		want := ddttest.Pack(ty, host, base, 2)
		hb, err := d.AllocHost(int64(len(want)))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.Pack(ctx, hb, 0, Typed{ty, typed, base, 2}, 0, int64(len(want))); err != nil || got != int64(len(want)) {
			t.Fatalf("pack into host memory: %d, %v", got, err)
		}
		if !bytes.Equal(hb.Bytes(), want) {
			t.Fatalf("%v: host view differs", ty)
		}
		// Unpack the host stream reversed into a zeroed typed buffer.
		for i := range want {
			hb.Bytes()[i] = want[len(want)-1-i]
		}
		zero := make([]byte, n)
		typed.Write(0, zero)
		if _, err := d.Unpack(ctx, Typed{ty, typed, base, 2}, hb, 0, 0, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		typed.Read(0, got)
		if !bytes.Equal(got, ddttest.UnpackRange(ty, zero, hb.Bytes(), base, 2, 0)) {
			t.Fatalf("%v: unpack from host memory differs", ty)
		}
		hb.Free()
		typed.Free()
		if err := hb.Free(); !errors.Is(err, ErrClosed) {
			t.Fatalf("double free: %v", err)
		}
	}
}

// TestDeviceErrors: bad arguments are errors wrapping the shared sentinels.
func TestDeviceErrors(t *testing.T) {
	d := newSimDevice()
	ctx := context.Background()
	ty := seedLayouts(t, 4)[0]
	typed, _ := d.Alloc(1024)
	pk, _ := d.Alloc(64)
	check := func(name string, want error, c context.Context, dst *Buffer, off int64, src Typed, from, n int64) {
		t.Helper()
		if _, err := d.Pack(c, dst, off, src, from, n); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	check("typed bounds", ddt.ErrBounds, ctx, pk, 0, Typed{ty, typed, 0, 100}, 0, 64)
	check("window offset", errs.ErrOutOfRange, ctx, pk, 65, Typed{ty, typed, 0, 1}, 0, 8)
	check("negative from", ddt.ErrInvalid, ctx, pk, 0, Typed{ty, typed, 0, 1}, -1, 8)
	check("nil type", errs.ErrInvalid, ctx, pk, 0, Typed{nil, typed, 0, 1}, 0, 8)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	check("canceled", context.Canceled, cctx, pk, 0, Typed{ty, typed, 0, 1}, 0, 8)
	other := newSimDevice()
	ob, _ := other.Alloc(64)
	check("other device", errs.ErrInvalid, ctx, ob, 0, Typed{ty, typed, 0, 1}, 0, 8)
	if err := typed.Write(1020, make([]byte, 8)); !errors.Is(err, errs.ErrOutOfRange) {
		t.Errorf("write past the end: %v", err)
	}
	if _, err := d.Alloc(0); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Alloc(0): %v", err)
	}
	// A short window packs what fits.
	if n, err := d.Pack(ctx, pk, 60, Typed{ty, typed, 0, 1}, 0, 64); err != nil || n != 4 {
		t.Errorf("4-byte window: %d, %v", n, err)
	}
	d.Close()
	if _, err := d.Pack(ctx, pk, 0, Typed{ty, typed, 0, 1}, 0, 8); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
