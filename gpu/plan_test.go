package gpu

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
)

func must(t *ddt.Type, err error) *ddt.Type {
	if err != nil {
		panic(err)
	}
	return t
}

func committed(tb testing.TB, t *ddt.Type) *ddt.Type {
	tb.Helper()
	if err := t.Commit(); err != nil {
		tb.Fatal(err)
	}
	return t
}

// TestMagic checks the multiply-and-shift divisions against real division
// at the ends of their ranges and at random points, for random divisors.
func TestMagic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ds := []uint64{1, 2, 3, 5, 6, 7, 24, 625, 1000, 1<<31 - 1, 1 << 30, 3 << 29}
	for range 300 {
		ds = append(ds, 1+r.Uint64N(1<<31-1), 1+r.Uint64N(1000))
	}
	for _, d := range ds {
		m32, m64 := newMagic(d, false), newMagic(d, true)
		qs := []uint64{0, 1, d - 1, d, d + 1, 2*d - 1, 1<<31 - 1, 1<<31 - 2, 1<<31 - d%7}
		for range 200 {
			qs = append(qs, r.Uint64N(1<<31))
		}
		for _, q := range qs {
			if q >= 1<<31 {
				continue // beyond the 32-bit split's range
			}
			if got := uint64(m32.div32(uint32(q))); got != q/d {
				t.Fatalf("32-bit %d/%d = %d, want %d", q, d, got, q/d)
			}
		}
		qs = append(qs, 1<<63-1, 1<<63-d, 1<<62+12345)
		for range 200 {
			qs = append(qs, r.Uint64N(1<<63))
		}
		for _, q := range qs {
			if got := m64.div64(q); got != q/d {
				t.Fatalf("64-bit %d/%d = %d, want %d", q, d, got, q/d)
			}
		}
	}
	// Large 64-bit divisors.
	for range 200 {
		d := 1 + r.Uint64N(1<<62)
		m := newMagic(d, true)
		for _, q := range []uint64{d - 1, d, 1<<63 - 1, r.Uint64N(1 << 63)} {
			if got := m.div64(q); got != q/d {
				t.Fatalf("64-bit %d/%d = %d, want %d", q, d, got, q/d)
			}
		}
	}
}

// forced returns emulator kernels of p: the launch's own choice, and every
// word size with the 64-bit element split forced.
func forced(p *Plan) []ddt.Kernel {
	ks := []ddt.Kernel{p.Emulator()}
	for w := int64(1); w <= p.maxWord; w *= 2 {
		ks = append(ks, emulator{p: p, force: &variant{w: w, wide: true}}, emulator{p: p, force: &variant{w: w}},
			emulator{p: p, force: &variant{w: w, grid3: true}})
	}
	return ks
}

// TestPlanRandomTypes drives the plan's Go evaluator through ddttest's
// differential checks (random counts, bases, windows, segmented streams)
// for random types of every constructor, at every word size and both
// element splits.
func TestPlanRandomTypes(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 150
	}
	r := rand.New(rand.NewPCG(7, 22))
	for i := 0; i < n; i++ {
		ty := ddttest.RandomType(r, 4)
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		p, err := NewPlan(ty)
		if err != nil {
			if errors.Is(err, ErrDeclined) {
				continue
			}
			t.Fatalf("%v: %v", ty, err)
		}
		for _, k := range forced(p) {
			ddttest.CheckKernel(t, ty, k, r, 3)
		}
	}
}

// TestPlanGuards packs and unpacks whole streams and windows with guard
// bytes around the typed and packed buffers: nothing outside the type's
// blocks and the window may change.
func TestPlanGuards(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const g = 64
	for i := 0; i < 120; i++ {
		ty := committed(t, ddttest.RandomType(r, 4))
		p, err := NewPlan(ty)
		if err != nil {
			continue
		}
		count := 1 + r.IntN(3)
		n, base := ddttest.Layout(ty, count)
		buf := make([]byte, n+2*g)
		for j := range buf {
			buf[j] = byte(r.Uint32())
		}
		total := int64(count) * ty.Size()
		for _, k := range forced(p) {
			from := int64(0)
			if total > 0 && r.IntN(2) == 0 {
				from = r.Int64N(total)
			}
			win := total - from
			// Pack into a guarded window.
			pk := make([]byte, win+2*g)
			for j := range pk {
				pk[j] = 0xA5
			}
			got, err := k.Pack(pk[g:g+win], buf, base+g, count, from)
			want := ddttest.Pack(ty, buf[g:g+n], base, count)
			if err != nil || int64(got) != win || !bytes.Equal(pk[g:g+win], want[from:]) {
				t.Fatalf("%v: pack from %d: %d, %v", ty, from, got, err)
			}
			for j := range g {
				if pk[j] != 0xA5 || pk[g+int(win)+j] != 0xA5 {
					t.Fatalf("%v: pack wrote outside its window", ty)
				}
			}
			// Unpack a random stream into the guarded typed buffer.
			stream := make([]byte, win)
			for j := range stream {
				stream[j] = byte(r.Uint32())
			}
			dst := append([]byte(nil), buf...)
			if _, err := k.Unpack(dst, stream, base+g, count, from); err != nil {
				t.Fatal(err)
			}
			wantT := ddttest.UnpackRange(ty, buf[g:g+n], stream, base, count, from)
			if !bytes.Equal(dst[:g], buf[:g]) || !bytes.Equal(dst[g+n:], buf[g+n:]) || !bytes.Equal(dst[g:g+n], wantT) {
				t.Fatalf("%v: unpack from %d differs or wrote a guard byte\n%s", ty, from, p)
			}
		}
	}
}

// TestPlanShapes checks the lowering of typical layouts.
func TestPlanShapes(t *testing.T) {
	vec := committed(t, must(ddt.Vector(100, 1, 4, ddt.Float64)))
	p, err := NewPlan(vec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Levels() != 1 || p.MaxWord() != 8 || p.list {
		t.Fatalf("vector of 8-byte blocks:\n%s", p)
	}
	// A struct of a double and an int: a two-block list body, 4-byte words.
	st := committed(t, must(ddt.Struct([]int{1, 1}, []int64{0, 12}, []*ddt.Type{ddt.Float64, ddt.Int32})))
	ps, err := NewPlan(st)
	if err != nil {
		t.Fatal(err)
	}
	if !ps.list || ps.listN != 2 || ps.MaxWord() != 4 {
		t.Fatalf("struct:\n%s", ps)
	}
	// The same IR gives the same plan.
	again, _ := NewPlan(committed(t, must(ddt.Vector(100, 1, 4, ddt.Float64))))
	if again != p {
		t.Fatal("identical type did not hit the plan cache")
	}
	if _, err := NewPlan(must(ddt.Vector(2, 1, 2, ddt.Int32))); !errors.Is(err, ddt.ErrNotCommitted) {
		t.Fatalf("uncommitted: %v", err)
	}
	if _, err := NewPlan(nil); !errors.Is(err, ddt.ErrInvalid) {
		t.Fatalf("nil: %v", err)
	}
	big := committed(t, must(ddt.Contiguous(1<<29, ddt.Float64)))
	if _, err := NewPlan(big); !errors.Is(err, ErrDeclined) || !errors.Is(err, errs.ErrNotSupported) {
		t.Fatalf("4 GiB element: %v", err)
	}
}

// TestEmulatorChecks: bad arguments are errors, not crashes.
func TestEmulatorChecks(t *testing.T) {
	vec := committed(t, must(ddt.Vector(4, 1, 2, ddt.Int32)))
	p, _ := NewPlan(vec)
	k := p.Emulator()
	typed := make([]byte, 28)
	if _, err := k.Pack(make([]byte, 16), typed, 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		base  int64
		count int
		from  int64
		want  error
	}{{0, 2, 0, ddt.ErrBounds}, {-4, 1, 0, ddt.ErrBounds}, {0, -1, 0, ddt.ErrInvalid}, {0, 1, 17, ddt.ErrBounds}, {0, 1 << 62, 0, ddt.ErrOverflow}} {
		if _, err := k.Pack(make([]byte, 16), typed, c.base, c.count, c.from); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
