package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
)

func TestRequests(t *testing.T) {
	kinds := []windowKind{kindDirect, netKind("shm", false), netKind("tcp;ofi_rxm", false), netKind("tcp;ofi_rxm", true)}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return requestScenario(ctx, g, k.create, k.opts...)
	})
}

// requestScenario: Rgets of the right neighbour's region (sizes from 8
// bytes to 1 MiB), half waited for with WaitAll and half tested until
// done, each destination checked at once; Rputs of 1 MiB whose source is
// overwritten as soon as the request completes (the target must hold
// what was there before); the same through FlushLocal and FlushLocalAll;
// Raccumulates of a counter; then the errors.
func requestScenario(ctx context.Context, g Group, create bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	const big = 1 << 20
	size := 2*big + 64
	w, err := newWindow(ctx, g, size, create, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	right, left := (me+1)%n, (me+n-1)%n
	pattern := func(rank, i int) byte { return byte(rank*37 + i*11 + i>>9) }
	for i := range big {
		w.Bytes()[i] = pattern(me, i)
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	sizes := []int{8, 4000, 5000, 65536, 300000, big}
	dsts := make([][]byte, len(sizes))
	reqs := make([]*Request, len(sizes))
	for i, sz := range sizes {
		dsts[i] = make([]byte, sz)
		if reqs[i], err = w.Rget(right, big-sz, dsts[i]); err != nil {
			return err
		}
	}
	for i := range sizes {
		if i%2 == 0 {
			if err := WaitAll(ctx, reqs[i]); err != nil {
				return err
			}
		} else {
			for {
				done, err := reqs[i].Test()
				if err != nil {
					return err
				}
				if done {
					break
				}
				runtime.Gosched()
			}
		}
		off := big - sizes[i]
		for k, b := range dsts[i] {
			if b != pattern(right, off+k) {
				return fmt.Errorf("Rget of %d bytes: byte %d is %d once complete, want %d", sizes[i], k, b, pattern(right, off+k))
			}
		}
	}
	// Rput: the source may be reused once the request is complete.
	src := make([]byte, big)
	for round := range 3 {
		for i := range src {
			src[i] = pattern(me+round, i)
		}
		r, err := w.Rput(right, big, src)
		if err != nil {
			return err
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
		clear(src)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		got := w.Bytes()[big : 2*big]
		for i := range got {
			if got[i] != pattern(left+round, i) {
				return fmt.Errorf("round %d: after an Rput whose source was cleared once complete, byte %d is %d, want %d", round, i, got[i], pattern(left+round, i))
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
	}
	// FlushLocal and FlushLocalAll: the same guarantees for everything
	// issued to a target, or to every target.
	for round, all := range []bool{false, true} {
		got := make([]byte, big)
		if err := w.Get(right, 0, got); err != nil {
			return err
		}
		for i := range src {
			src[i] = pattern(me+7+round, i)
		}
		if err := w.Put(right, big, src); err != nil {
			return err
		}
		if all {
			err = w.FlushLocalAll(ctx)
		} else {
			err = w.FlushLocal(ctx, right)
		}
		if err != nil {
			return err
		}
		for i, b := range got {
			if b != pattern(right, i) {
				return fmt.Errorf("Get then FlushLocal (all %v): byte %d is %d, want %d", all, i, b, pattern(right, i))
			}
		}
		clear(src)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		for i, b := range w.Bytes()[big : 2*big] {
			if b != pattern(left+7+round, i) {
				return fmt.Errorf("Put whose source was cleared after FlushLocal (all %v): byte %d is %d", all, i, b)
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
	}
	if err := w.FlushLocal(ctx, n); !errors.Is(err, ErrUnknownRank) {
		return fmt.Errorf("FlushLocal of rank n: %v", err)
	}
	// Raccumulate: every rank adds rank+1 to a counter on rank 0, 20 times.
	var b [8]byte
	for range 20 {
		binary.LittleEndian.PutUint64(b[:], uint64(me+1))
		r, err := w.Raccumulate(0, 2*big, AtomicUint64, OpSum, b[:])
		if err != nil {
			return err
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
		clear(b[:])
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if me == 0 {
		if got, want := binary.LittleEndian.Uint64(w.Bytes()[2*big:]), uint64(20*n*(n+1)/2); got != want {
			return fmt.Errorf("counter after Raccumulates %d, want %d", got, want)
		}
	}
	// Errors.
	var nilReq *Request
	if err := nilReq.Wait(ctx); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Wait on nil: %v", err)
	}
	if _, err := nilReq.Test(); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Test on nil: %v", err)
	}
	if done, err := (&Request{}).Test(); !done || err != nil {
		return fmt.Errorf("the zero request: %v %v", done, err)
	}
	if _, err := w.Rget(right, size-4, make([]byte, 8)); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("Rget past the end: %v", err)
	}
	if _, err := w.Rput(n, 0, b[:]); !errors.Is(err, ErrUnknownRank) {
		return fmt.Errorf("Rput to rank n: %v", err)
	}
	if _, err := w.Raccumulate(right, 4, AtomicUint64, OpSum, b[:]); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("misaligned Raccumulate: %v", err)
	}
	return nil
}
