package endpoint_test

import (
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkTypedSmall is the per-message cost of a small typed message
// between two endpoints of one process on the node transport (inline in
// the ring: 1536 bytes, 96 blocks of 16 bytes every 32): typed send and
// receive against a hand pack, a byte send and receive and a hand unpack
// (ns/op: one message, both sides, on one goroutine).
func BenchmarkTypedSmall(b *testing.B) {
	const blocks, blk, stride = 96, 16, 32
	vt, err := ddt.Vector(blocks, blk, stride, ddt.Byte)
	if err == nil {
		err = vt.Commit()
	}
	if err != nil {
		b.Fatal(err)
	}
	x, y, ctx := singletonPair(b)
	src, dst := make([]byte, blocks*stride), make([]byte, blocks*stride)
	packed, recvd := make([]byte, blocks*blk), make([]byte, blocks*blk)
	b.Run("typed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rr, err := y.IrecvTyped(dst, 1, vt, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.SendTyped(ctx, src, 1, vt, 1, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := rr.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			rr.Release()
		}
	})
	b.Run("hand", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rr, err := y.Irecv(recvd, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			for k := 0; k < blocks; k++ {
				copy(packed[k*blk:(k+1)*blk], src[k*stride:])
			}
			if err := x.Send(ctx, packed, 1, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := rr.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			rr.Release()
			for k := 0; k < blocks; k++ {
				copy(dst[k*stride:k*stride+blk], recvd[k*blk:])
			}
		}
	})
}

// TestTypedSmallAllocs: a small typed message between two endpoints on the
// node transport allocates nothing, sending or receiving: the send packs
// from a layout on its stack, the receive keeps its layout in the request
// it reuses.
func TestTypedSmallAllocs(t *testing.T) {
	vt, err := ddt.Vector(96, 16, 32, ddt.Byte)
	if err == nil {
		err = vt.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(true)) // whatever WEFT_NODE_TRANSPORT says
	src, dst := make([]byte, 96*32), make([]byte, 96*32)
	for i := range src {
		src[i] = byte(i)
	}
	var ferr error
	round := func() {
		rr, err := y.IrecvTyped(dst, 1, vt, 0, 1)
		if err == nil {
			err = x.SendTyped(ctx, src, 1, vt, 1, 1)
		}
		if err == nil {
			_, err = rr.Wait(ctx)
			rr.Release()
		}
		if err != nil && ferr == nil {
			ferr = err
		}
	}
	for range 10 {
		round()
	}
	allocs := testing.AllocsPerRun(200, round)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if allocs != 0 {
		t.Errorf("%.2f allocations per typed message, want 0", allocs)
	}
	for b := 0; b < 96; b++ {
		for k := 0; k < 16; k++ {
			if dst[b*32+k] != src[b*32+k] {
				t.Fatalf("block %d byte %d: %d, want %d", b, k, dst[b*32+k], src[b*32+k])
			}
		}
	}
}
