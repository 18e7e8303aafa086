package onesided

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestTypedChunkPostFails: a typed Get and a typed Put on the chunk path
// (small blocks at the origin) whose target blocks take several RMA
// operations per chunk fail in the middle of a chunk, after some of its
// operations were posted. The call returns the error with none of its
// operations left in flight and every chunk buffer free again (a chunk
// freed while earlier reads still targeted it could be handed to the
// next transfer under them); the next transfer works.
func TestTypedChunkPostFails(t *testing.T) {
	requireProvider(t, "shm")
	injected := errors.New("injected post failure")
	var victim atomic.Pointer[fabPath]
	var posts atomic.Int32
	const failAt = 21 // the fifth read or write of the second chunk
	postFault = func(f *fabPath) error {
		if f == victim.Load() && posts.Add(1) == failAt {
			return injected
		}
		return nil
	}
	defer func() { postFault = nil }()
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		const elems = 48 << 10 // int64s: 384 KiB, six chunks
		vec := func(count, blk, stride int) (*ddt.Type, error) {
			t, err := ddt.Vector(count, blk, stride, ddt.Int64)
			if err != nil {
				return nil, err
			}
			return t, t.Commit()
		}
		ot, err := vec(elems/3, 3, 5) // origin: small blocks, the chunk path
		if err != nil {
			return err
		}
		tt, err := vec(elems/512, 512, 640) // target: 4 KiB blocks, 16 per chunk
		if err != nil {
			return err
		}
		w, err := Allocate(ctx, g, 8*(elems/512*640), providerCase{"shm", OrderAuto}.opts()...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		origin := make([]byte, 8*(elems/3*5))
		if g.Rank() == 0 {
			f := fabOf(w)
			if f == nil {
				return fmt.Errorf("no libfabric path to rank 1")
			}
			for _, get := range []bool{true, false} {
				posts.Store(0)
				victim.Store(f)
				var err error
				if get {
					err = w.GetTyped(ctx, 1, 0, origin, 1, ot, 1, tt)
				} else {
					err = w.PutTyped(1, 0, origin, 1, ot, 1, tt)
				}
				victim.Store(nil)
				if !errors.Is(err, injected) {
					return fmt.Errorf("get %v: %v, want the injected failure", get, err)
				}
				if f.pend.issuedBefore(f.pend.seq) {
					return fmt.Errorf("get %v: operations still in flight after the failed call returned", get)
				}
				if len(f.freeChunks) != chunkCount {
					return fmt.Errorf("get %v: %d of %d chunk buffers free after the failed call", get, len(f.freeChunks), chunkCount)
				}
				if get {
					err = w.GetTyped(ctx, 1, 0, origin, 1, ot, 1, tt)
				} else {
					err = w.PutTyped(1, 0, origin, 1, ot, 1, tt)
				}
				if err != nil {
					return fmt.Errorf("get %v after the failure: %w", get, err)
				}
			}
		}
		return w.Fence(ctx)
	})
}
