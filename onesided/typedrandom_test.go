package onesided

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
)

// typedRegion is the bytes of each rank's window a random typed transfer
// may reach.
const typedRegion = 1 << 20

// randomLayout draws a random layout (ddttest.RandomLayout) whose span
// fits in half of typedRegion; with disjoint, a target layout.
func randomLayout(r *rand.Rand, disjoint bool) (*ddt.Type, int) {
	return ddttest.RandomLayout(r, ddttest.Limits{Depth: 4, MaxBytes: 3 << 15, MaxSpan: typedRegion / 2, Disjoint: disjoint})
}

// typedRandomScenario: rounds of PutTyped to the right neighbour and
// GetTyped back, random layouts on the target and on the origin (or
// contiguous bytes on one side), checked against ddttest's reference
// packer: the target region must hold the origin's bytes where its
// layout says and zeros elsewhere, and the Get the same bytes back.
func typedRandomScenario(ctx context.Context, g Group, rounds int, create bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	right, left := (me+1)%n, (me+n-1)%n
	w, err := newWindow(ctx, g, typedRegion, create, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	// draw is rank src's transfer of round k: origin layout, target
	// layout, origin buffer.
	draw := func(k, src int) (ot *ddt.Type, oc int, tt *ddt.Type, tc int, obuf []byte) {
		r := rand.New(rand.NewPCG(uint64(k), uint64(src)))
		tt, tc = randomLayout(r, true)
		size := int(tt.Size()) * tc
		switch r.IntN(3) {
		case 0: // contiguous origin
			ot, oc = ddt.Byte, size
		case 1: // both sides the same layout
			ot, oc = tt, tc
		default: // the origin's own random layout, as bytes of the same length
			t, c := randomLayout(r, false)
			per := int(t.Size()) * c
			rep, err := ddt.Contiguous(c, t)
			if err != nil {
				panic(err)
			}
			// A whole number of the origin layout's bytes: cut the target
			// to a multiple when they differ.
			if size%per != 0 || size < per {
				ot, oc = ddt.Byte, size
				break
			}
			if err := rep.Commit(); err != nil {
				panic(err)
			}
			ot, oc = rep, size/per
		}
		ln, _ := ddttest.Layout(ot, oc)
		obuf = make([]byte, ln)
		for i := range obuf {
			obuf[i] = byte(i*7 + k*13 + src*31 + 1)
		}
		return
	}
	for k := range rounds {
		clear(w.Bytes())
		if err := w.Fence(ctx); err != nil {
			return err
		}
		ot, oc, tt, tc, obuf := draw(k, me)
		if err := w.PutTyped(right, 0, obuf[3:], oc, ot, tc, tt); err != nil {
			return fmt.Errorf("round %d: PutTyped(%d × %v to %d × %v): %w", k, oc, ot, tc, tt, err)
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		lot, loc, ltt, ltc, lbuf := draw(k, left)
		stream := ddttest.Pack(lot, lbuf, 3, loc)
		want := ddttest.UnpackRange(ltt, make([]byte, typedRegion), stream, 0, ltc, 0)
		if got := w.Bytes(); !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			return fmt.Errorf("round %d: after rank %d's PutTyped(%d × %v to %d × %v) byte %d is %d, want %d", k, left, loc, lot, ltc, ltt, i, got[i], want[i])
		}
		back := make([]byte, len(obuf))
		if err := w.GetTyped(ctx, right, 0, back[3:], oc, ot, tc, tt); err != nil {
			return fmt.Errorf("round %d: GetTyped: %w", k, err)
		}
		wantBack := ddttest.UnpackRange(ot, make([]byte, len(obuf)), ddttest.Pack(ot, obuf, 3, oc), 3, oc, 0)
		if !bytes.Equal(back, wantBack) {
			return fmt.Errorf("round %d: GetTyped(%d × %v from %d × %v) differs from what was put", k, oc, ot, tc, tt)
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
	}
	return nil
}

func TestTypedRandom(t *testing.T) {
	kinds := []windowKind{kindDirect, netKind("shm", false), netKind("tcp;ofi_rxm", false), netKind("tcp;ofi_rxm", true)}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return typedRandomScenario(ctx, g, 40, k.create, k.opts...)
	})
}
