package gpu

import (
	"testing"

	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a device (the PTX simulator's,
// and pocl's OpenCL device), a buffer of it, typed data in it and a plan,
// called over and over with drawn bad arguments (internal/misuse),
// returns: no panic, no hang.
func TestMisuse(t *testing.T) {
	t.Run("ptxsim", func(t *testing.T) {
		d := newSimDevice()
		defer d.Close()
		misuseDevice(t, d)
	})
	t.Run("opencl", func(t *testing.T) { misuseDevice(t, openCL(t)) })
}

func misuseDevice(t *testing.T, d *Device) {
	ty := seedLayouts(t, 4)[0]
	plan, err := PlanOf(ty)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(20) {
		b, err := d.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		p := misuse.New(seed, misuse.Config{Skip: []string{"Close", "Free"}})
		for _, v := range []any{d, b, plan, Typed{ty, b, 0, 1}} {
			for _, bad := range p.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
		b.Free()
	}
}
