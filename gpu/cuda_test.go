//go:build cgo

package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/testenv"
)

// openCUDA returns CUDA device 0, or nil after checking that the driver
// library (Debian's libcuda1 here) loaded, resolved every entry point and
// returned the documented no-device error. It skips only when
// libcuda.so.1 itself is missing (feature "libcuda").
func openCUDA(t *testing.T) *Device {
	t.Helper()
	_, statErr := os.Stat("/dev/nvidiactl")
	d, err := OpenCUDA(0)
	if statErr != nil && os.Getuid() == 0 {
		// As root, cuInit creates /dev/nvidiactl when it is missing; leave
		// the machine as it was.
		if _, err := os.Stat("/dev/nvidiactl"); err == nil {
			os.Remove("/dev/nvidiactl")
		}
	}
	if err == nil {
		d.method = MethodKernel // the tests of the copy methods choose theirs
		t.Cleanup(func() { d.Close() })
		return d
	}
	if !errors.Is(err, errs.ErrNotSupported) {
		t.Fatalf("OpenCUDA: %v, want an error wrapping errs.ErrNotSupported", err)
	}
	if strings.Contains(err.Error(), "cannot load") {
		testenv.Skip(t, "libcuda", "%v (deploy/install-gpu-tools.sh installs libcuda1)", err)
	}
	// The library loaded and resolved every symbol; the driver answered.
	v, verr := CUDADriverVersion()
	if verr != nil || v < 11000 {
		t.Fatalf("driver version %d, %v", v, verr)
	}
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE") {
		t.Fatalf("OpenCUDA without a GPU: %v, want ErrNoDevice naming CUDA_ERROR_NO_DEVICE", err)
	}
	t.Logf("driver API %d, no device: %v", v, err)
	return nil
}

// TestCUDANoDevice: libcuda.so.1 loads, every entry point resolves, and
// without a GPU every call is the documented error, never a crash.
func TestCUDANoDevice(t *testing.T) {
	if d := openCUDA(t); d != nil {
		// A GPU is here: a device number beyond the last is the no-device error.
		if _, err := OpenCUDA(1 << 20); !errors.Is(err, ErrNoDevice) {
			t.Fatalf("OpenCUDA(1<<20): %v", err)
		}
	} else if _, err := OpenCUDA(0); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("second OpenCUDA: %v", err)
	}
	if err := cudaOpenLib("libcuda.so.0"); !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "libcuda.so.0") {
		t.Fatalf("missing library: %v", err)
	}
	if err := clOpenLib("libOpenCL.so.0"); !errors.Is(err, errs.ErrNotSupported) {
		t.Fatalf("missing OpenCL library: %v", err)
	}
}

// TestCUDADevice runs the PTX kernels on a real GPU (make gpu-check): the
// random types and the seed's layouts, device and mapped host memory,
// both element splits, against ddttest's reference with guard bytes.
func TestCUDADevice(t *testing.T) {
	d := openCUDA(t)
	if d == nil {
		testenv.Skip(t, "gpu", "no CUDA device on this machine")
	}
	t.Logf("device %s (integrated: %v)", d, d.Integrated())
	r := rand.New(rand.NewPCG(3, 22))
	for mode := range 3 { // the 3-D launch, 1-D with 32- and 64-bit splits
		d.grid1D, d.forceWide = mode == 1, mode == 2
		for i := 0; i < 200; i++ {
			ty := committed(t, ddttest.RandomType(r, 4))
			if _, err := PlanOf(ty); err == nil {
				deviceCheck(t, d, ty, r.IntN(4), r)
			}
		}
		for _, ty := range seedLayouts(t, 96) {
			deviceCheck(t, d, ty, 2, r)
		}
	}
	// Mapped pinned host memory as the packed destination (zero copy).
	ty := seedLayouts(t, 64)[0]
	n, base := ddttest.Layout(ty, 3)
	typed, _ := d.Alloc(int64(n))
	defer typed.Free()
	host := make([]byte, n)
	ddtFill(host)
	typed.Write(0, host)
	want := ddttest.Pack(ty, host, base, 3)
	hb, err := d.AllocHost(int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	if _, err := d.Pack(context.Background(), hb, 0, Typed{ty, typed, base, 3}, 0, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if string(hb.Bytes()) != string(want) {
		t.Fatal("pack into mapped host memory differs")
	}
}

// TestCUDAAsync: PackAsync and UnpackAsync on a CUDA device's stream, a
// ring of two mapped host segments, every segment enqueued before the
// previous one is waited for (as the endpoint pipeline does), byte for
// byte with guard bytes; the events are real stream events.
func TestCUDAAsync(t *testing.T) {
	d := openCUDA(t)
	if d == nil {
		testenv.Skip(t, "gpu", "no CUDA device on this machine")
	}
	vec := committed(t, must(ddt.Vector(300, 3, 5, ddt.Int32)))
	st := committed(t, must(ddt.Resized(must(ddt.Struct([]int{1, 3}, []int64{0, 12}, []*ddt.Type{ddt.Float64, ddt.Int16})), 0, 24)))
	asyncPipeline(t, d, vec, 2, 1000)
	asyncPipeline(t, d, vec, 1000, 64<<10)
	asyncPipeline(t, d, st, 100, 256)
	if s := d.Stats(); s.Async == 0 {
		t.Fatalf("no asynchronous launch: %+v", s)
	}
	if ptr, _, ok := mustAlloc(t, d).CUDAPointer(); !ok || ptr == 0 {
		t.Fatal("CUDAPointer of device memory: not ok")
	}
}

func mustAlloc(t *testing.T, d *Device) *Buffer {
	b, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}
