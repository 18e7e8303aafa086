package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	fault := func(f *fabPath) error {
		if f == victim.Load() && posts.Add(1) == failAt {
			return injected
		}
		return nil
	}
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
				f.postFault = fault
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

// TestTypedGetOutOfOrder: the reads of a typed Get's chunk complete in
// no set order. Here the last read of each of the two chunks in flight
// completes first, the others are held back, and the call is cancelled
// while it waits for the first chunk: neither chunk may be free again
// while a read into it is still in flight (the next transfer would take
// it under them), and both are once the held-back reads complete. The
// next Get then delivers the target's data.
func TestTypedGetOutOfOrder(t *testing.T) {
	requireProvider(t, "shm")
	var (
		mu      sync.Mutex
		victim  *fabPath
		base    uint64     // the victim's issue number before the Get
		held    []opHandle // completions held back
		seen    int        // last reads of the two chunks completed
		maxSeq  uint64     // the highest operation completed or held, from base
		cancelF context.CancelFunc
	)
	const perChunk = 16 // 4 KiB target blocks, 64 KiB chunks
	order := func(f *fabPath, h opHandle) []opHandle {
		mu.Lock()
		defer mu.Unlock()
		o := f.pend.op(h)
		if f != victim || o == nil || o.seq <= base {
			return []opHandle{h}
		}
		rel := o.seq - base
		maxSeq = max(maxSeq, rel)
		if rel != perChunk && rel != 2*perChunk {
			held = append(held, h)
			return nil
		}
		if seen++; seen == 2 {
			cancelF()
		}
		return []opHandle{h}
	}
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
		for i := 0; i < len(w.Bytes())/8; i++ {
			binary.LittleEndian.PutUint64(w.Bytes()[8*i:], uint64(i)*7+1)
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if g.Rank() == 0 {
			f := fabOf(w)
			gp, _ := w.net.(*guardedPath)
			if f == nil || gp == nil {
				return fmt.Errorf("no guarded libfabric path to rank 1")
			}
			origin := make([]byte, 8*(elems/3*5))
			gctx, cancel := context.WithCancel(ctx)
			defer cancel()
			mu.Lock()
			victim, base, cancelF = f, f.pend.seq, cancel
			f.completionOrder = order
			mu.Unlock()
			err := w.GetTyped(gctx, 1, 0, origin, 1, ot, 1, tt)
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("get: %v, want it cancelled", err)
			}
			// Inspect and complete under the window's guard: rank 1's
			// Fence may poll this path meanwhile.
			gp.g.Enter()
			mu.Lock()
			victim = nil
			nheld, top, free := len(held), maxSeq, len(f.freeChunks)
			for _, h := range held {
				f.complete(h, nil)
			}
			held = nil
			mu.Unlock()
			freeAfter, inFlight := len(f.freeChunks), f.pend.issuedBefore(f.pend.seq)
			gp.g.Exit()
			if top != 2*perChunk || nheld != 2*perChunk-2 {
				return fmt.Errorf("%d reads completed or held back, %d held back; want %d and %d", top, nheld, 2*perChunk, 2*perChunk-2)
			}
			if free != chunkCount-2 {
				return fmt.Errorf("%d of %d chunk buffers free while %d reads into two of them were in flight", free, chunkCount, nheld)
			}
			if freeAfter != chunkCount || inFlight {
				return fmt.Errorf("after the held-back reads completed: %d of %d chunk buffers free, operations in flight %v", freeAfter, chunkCount, inFlight)
			}
			if err := w.GetTyped(ctx, 1, 0, origin, 1, ot, 1, tt); err != nil {
				return fmt.Errorf("get after the cancelled one: %w", err)
			}
			for j := 0; j < elems; j++ {
				ti, oi := j/512*640+j%512, j/3*5+j%3
				if got, want := binary.LittleEndian.Uint64(origin[8*oi:]), uint64(ti)*7+1; got != want {
					return fmt.Errorf("element %d: got %d, want %d", j, got, want)
				}
			}
		}
		return w.Fence(ctx)
	})
}

// TestTypedPutOutOfOrder: the writes of a typed Put's chunk complete in
// no set order. Here the last write of the first chunk completes while
// its other writes are held back: that chunk may not be free again (the
// next chunk would be packed into it under the writes still reading it)
// until they have completed. The Put then delivers its data.
func TestTypedPutOutOfOrder(t *testing.T) {
	requireProvider(t, "shm")
	var (
		mu      sync.Mutex
		victim  *fabPath
		base    uint64
		held    []opHandle
		first   = -1 // the first chunk's buffer, once its last write completed
		bad     string
		release bool
	)
	const perChunk = 16
	order := func(f *fabPath, h opHandle) []opHandle {
		mu.Lock()
		defer mu.Unlock()
		o := f.pend.op(h)
		if f != victim || o == nil || o.seq <= base {
			return []opHandle{h}
		}
		if first >= 0 && len(held) > 0 && bad == "" && slices.Contains(f.freeChunks, first) {
			bad = fmt.Sprintf("the first chunk is free while %d writes from it are in flight", len(held))
		}
		switch rel := o.seq - base; {
		case rel < perChunk && !release:
			held = append(held, h)
			return nil
		case rel == perChunk:
			first = int(o.scratch) - slotCount
		case rel == 3*perChunk: // the third chunk is done: hand the first's writes over
			release = true
			out := append(held, h)
			held = nil
			return out
		}
		return []opHandle{h}
	}
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		const elems = 48 << 10 // int64s: 384 KiB, six chunks
		vec := func(count, blk, stride int) (*ddt.Type, error) {
			t, err := ddt.Vector(count, blk, stride, ddt.Int64)
			if err != nil {
				return nil, err
			}
			return t, t.Commit()
		}
		ot, err := vec(elems/3, 3, 5)
		if err != nil {
			return err
		}
		tt, err := vec(elems/512, 512, 640)
		if err != nil {
			return err
		}
		w, err := Allocate(ctx, g, 8*(elems/512*640), providerCase{"shm", OrderAuto}.opts()...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if g.Rank() == 0 {
			f := fabOf(w)
			if f == nil {
				return fmt.Errorf("no libfabric path to rank 1")
			}
			origin := make([]byte, 8*(elems/3*5))
			for j := 0; j < elems; j++ {
				binary.LittleEndian.PutUint64(origin[8*(j/3*5+j%3):], uint64(j)*7+1)
			}
			mu.Lock()
			victim, base = f, f.pend.seq
			f.completionOrder = order
			mu.Unlock()
			if err := w.PutTyped(1, 0, origin, 1, ot, 1, tt); err != nil {
				return err
			}
			if err := w.Flush(ctx, 1); err != nil {
				return err
			}
			mu.Lock()
			victim = nil
			b, f0 := bad, first
			mu.Unlock()
			if f0 < 0 {
				return fmt.Errorf("the first chunk's last write never completed")
			}
			if b != "" {
				return errors.New(b)
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if g.Rank() == 1 {
			for j := 0; j < elems; j++ {
				ti := j/512*640 + j%512
				if got, want := binary.LittleEndian.Uint64(w.Bytes()[8*ti:]), uint64(j)*7+1; got != want {
					return fmt.Errorf("element %d: got %d, want %d", j, got, want)
				}
			}
		}
		return w.Fence(ctx)
	})
}
