package gpu

import (
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
// deploy/install-gpu-tools.sh).
func openCL(t testing.TB) *Device {
	t.Helper()
	d, err := OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "opencl", "%v (deploy/install-gpu-tools.sh installs pocl)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
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
	n := 16
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
// loop and many work groups run, with both element splits.
func TestOpenCLLayouts(t *testing.T) {
	d := openCL(t)
	r := rand.New(rand.NewPCG(8, 8))
	splits := []bool{false, true}
	if testing.Short() {
		splits = splits[:1]
	}
	for _, wide := range splits {
		d.forceWide = wide
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
