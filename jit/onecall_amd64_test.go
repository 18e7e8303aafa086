package jit

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestOneCallPath checks the whole-stream fast path of Pack and Unpack
// (one call into generated code, no general loop) against the general path
// (run) and the interpreter over random types: it is taken exactly when the
// pack starts at 0, the whole stream fits the packed buffer and one budget,
// and the direction has no transpose code; both paths give the same bytes.
func TestOneCallPath(t *testing.T) {
	needNative(t)
	r := rand.New(rand.NewPCG(11, 12))
	took := 0
	for i := 0; i < 300; i++ {
		ty := interpType(t, randType(t, r, 3))
		ir := irOf(ty)
		if ir.Root == nil || ir.TrueExtent > 1<<20 || ir.Size > 1<<18 {
			continue
		}
		kk, err := compileIR(ir, hostFeatures)
		if errors.Is(err, ddt.ErrNotCompiled) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		k, ok := kk.(*kernel)
		if !ok {
			continue // sequence kernels: their parts are kernels, covered by the differential
		}
		count := 1 + r.IntN(8)
		total := int64(count) * ir.Size
		if wantOne := k.tpack == 0 && total <= k.budget; (k.onePack > 0 && int64(count)*k.p.upe <= k.onePack) != wantOne {
			t.Fatalf("type %d: one-call path for packs %v, want %v (transpose %v, %d bytes, budget %d)\n%s", i, !wantOne, wantOne, k.tpack != 0, total, k.budget, ir)
		}
		if k.onePack > 0 && int64(count)*k.p.upe <= k.onePack {
			took++
		}
		base, tl := layout(ir, count)
		typed := make([]byte, base+tl)
		fill(r, typed)
		want := make([]byte, total)
		if _, err := ty.PackRange(want, typed, base, count, 0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, total+7) // a longer buffer: only total bytes are written
		fill(r, got)
		tail := bytes.Clone(got[total:])
		if n, err := k.Pack(got, typed, base, count, 0); err != nil || int64(n) != total {
			t.Fatalf("type %d: Pack = %d, %v; want %d", i, n, err, total)
		}
		if !bytes.Equal(got[:total], want) || !bytes.Equal(got[total:], tail) {
			t.Fatalf("type %d: one-call pack differs from the interpreter (or wrote past the stream)\n%s", i, ir)
		}
		viaRun := make([]byte, total)
		if n := k.run(viaRun, typed, base, count, 0, true); int64(n) != total || !bytes.Equal(viaRun, want) {
			t.Fatalf("type %d: general-path pack differs", i)
		}
		// unpack a fresh stream both ways into copies of the same typed bytes
		fill(r, got[:total])
		ta, tb := bytes.Clone(typed), bytes.Clone(typed)
		if _, err := k.Unpack(ta, got[:total], base, count, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := ty.UnpackRange(tb, got[:total], base, count, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ta, tb) {
			t.Fatalf("type %d: one-call unpack differs from the interpreter\n%s", i, ir)
		}
	}
	if took < 100 {
		t.Fatalf("only %d random types took the one-call path", took)
	}
	// a pack that does not start at 0, or a short buffer, takes the general path
	ty := interpType(t, must(ddt.Vector(4, 2, 5, ddt.Int32)))
	kk, err := compileIR(irOf(ty), hostFeatures)
	if err != nil {
		t.Fatal(err)
	}
	typed := make([]byte, 80)
	fill(r, typed)
	want := make([]byte, 32)
	if _, err := ty.PackRange(want, typed, 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 32)
	for _, cut := range []int{0, 3, 8, 20} {
		if _, err := kk.Pack(got[:cut], typed, 0, 1, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := kk.Pack(got[cut:], typed, 0, 1, int64(cut)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("pack cut at %d differs", cut)
		}
	}
}
