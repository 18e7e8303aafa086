package gpu

import (
	"context"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
)

// TestBuildOnDemand: a device builds each kernel alone, when a launch first
// needs it: the first Pack of a type builds one kernel, the first Unpack
// one more, later ones (other counts and windows of the same split) none;
// Prepare builds what a default Pack and Unpack need, so that they build
// nothing. On the PTX simulator (3-D and 1-D launches) and on OpenCL when
// there is a device.
func TestBuildOnDemand(t *testing.T) {
	vec := committed(t, must(ddt.Vector(64, 1, 3, ddt.Float64)))                                           // a level: the 3-D launch
	st := committed(t, must(ddt.Struct([]int{1, 3}, []int64{0, 12}, []*ddt.Type{ddt.Float64, ddt.Int32}))) // no level: 1-D
	if p, _ := PlanOf(st); len(p.levels) != 0 {
		t.Fatalf("want a plan without levels:\n%s", p)
	}
	devices := []struct {
		name    string
		open    func(t *testing.T) *Device
		grid3OK bool
	}{
		{"ptxsim", func(*testing.T) *Device { return newSimDevice() }, true},
		{"ptxsim-grid1D", func(*testing.T) *Device { d := newSimDevice(); d.grid1D = true; return d }, false},
		{"opencl", func(t *testing.T) *Device { return openCL(t) }, true},
	}
	for _, dev := range devices {
		t.Run(dev.name, func(t *testing.T) {
			for _, ty := range []*ddt.Type{vec, st} {
				grid3 := dev.grid3OK && ty == vec
				checkBuilds(t, ty.String(), dev.open(t), ty, false, grid3)
				checkBuilds(t, "prepared "+ty.String(), dev.open(t), ty, true, grid3)
			}
		})
	}
}

// checkBuilds packs and unpacks ty on d (after Prepare when prepare is
// set) and checks how many kernels each step built, and that they are the
// 3-D launch's when grid3 is set (else the 1-D launch's 32-bit split).
func checkBuilds(t *testing.T, what string, d *Device, ty *ddt.Type, prepare, grid3 bool) {
	t.Helper()
	ctx := context.Background()
	const count = 3
	n, base := ddttest.Layout(ty, count)
	aligned := (base + 15) &^ 15 // a launch at the plan's largest word size
	n, base = n+int(aligned-base), aligned
	typed, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := d.Alloc(ty.Size() * count)
	if err != nil {
		t.Fatal(err)
	}
	builds := d.Stats().Builds
	step := func(op string, want int64, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %s: %v", what, op, err)
		}
		if got := d.Stats().Builds - builds; got != want {
			t.Fatalf("%s: after %s %d kernels built, want %d (%+v)", what, op, got, want, d.Stats())
		}
	}
	one := Typed{Type: ty, Buf: typed, Base: base, Count: 1}
	many := Typed{Type: ty, Buf: typed, Base: base, Count: count}
	pack := func(src Typed) func() error {
		return func() error { _, err := d.Pack(ctx, pk, 0, src, 0, ty.Size()*int64(src.Count)); return err }
	}
	unpack := func(dst Typed) func() error {
		return func() error { _, err := d.Unpack(ctx, dst, pk, 0, 0, ty.Size()*int64(dst.Count)); return err }
	}
	first := int64(1)
	if prepare {
		step("Prepare", 2, func() error { return d.Prepare(ty) })
		step("Prepare again", 2, func() error { return d.Prepare(ty) })
		first = 2
	}
	hits := d.Stats().CacheHits
	step("the first Pack", first, pack(one))
	step("a Pack of 3", first, pack(many))
	step("the first Unpack", 2, unpack(one))
	step("an Unpack of 3", 2, unpack(many))
	if !prepare {
		step("Prepare", 2, func() error { return d.Prepare(ty) })
	}
	if h := d.Stats().CacheHits - hits; h < 2 {
		t.Fatalf("%s: %d cache hits", what, h)
	}
	p, _ := PlanOf(ty)
	for k := range d.kerns {
		if k.p == p && (k.v.grid3 != grid3 || k.v.wide || k.v.w != p.maxWord) {
			t.Errorf("%s: built %+v, want the %d-byte words of the launch with grid3=%v", what, k.v, p.maxWord, grid3)
		}
	}
}
