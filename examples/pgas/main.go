// Command pgas is a small PGAS program on weft's symmetric heap: every rank
// allocates the same objects, adds to a counter on every rank with remote
// atomics, adds to a vector and sets a bit of a mask on every rank with
// non-fetching atomics, appends its rank to a list on rank 0 under a
// distributed lock, passes a token around the ring with put-with-signal,
// and checks the results after a barrier.
//
//	fabrun -n 4 bin/pgas
//	WEFT_ONESIDED_SHM=off fabrun -n 4 --provider tcp\;ofi_rxm bin/pgas
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/onesided"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgas:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	world, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer world.Close()
	comm := world.Comm()
	me, n := comm.Rank(), comm.Size()

	heap, err := onesided.NewHeap(ctx, comm, 1<<20)
	if err != nil {
		return err
	}
	defer heap.Close(ctx)
	counter, err := heap.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	token, err := heap.Alloc(ctx, 64, 64) // 8-byte signal word, then the payload
	if err != nil {
		return err
	}
	const bins = 4
	vec, err := heap.Alloc(ctx, 8*bins, 8)
	if err != nil {
		return err
	}
	mask, err := heap.Alloc(ctx, 8, 8)
	if err != nil {
		return err
	}
	lock, err := heap.Alloc(ctx, 8, 8) // zero on every rank, as a lock must start
	if err != nil {
		return err
	}
	list, err := heap.Alloc(ctx, 8*(n+1), 8) // length, then the entries
	if err != nil {
		return err
	}

	// Under the lock, append this rank to the list on rank 0: read the
	// length, write the entry and the new length; no single atomic does
	// that, and without the lock two ranks would take the same slot.
	if err := heap.SetLock(ctx, lock); err != nil {
		return err
	}
	var lb [8]byte
	if err := heap.Get(0, list, 0, lb[:]); err != nil {
		return err
	}
	if err := heap.Quiet(ctx); err != nil { // the Get has landed
		return err
	}
	k := binary.LittleEndian.Uint64(lb[:])
	if k >= uint64(n) {
		return fmt.Errorf("rank %d: the list is full (%d entries) before this rank's turn", me, k)
	}
	if err := heap.Put(0, list, 8*int(k+1), le(uint64(me))); err != nil {
		return err
	}
	if err := heap.Put(0, list, 0, le(k+1)); err != nil {
		return err
	}
	if err := heap.ClearLock(ctx, lock); err != nil { // completes both Puts first
		return err
	}

	// Every rank adds its rank+1 to the counter of every rank.
	for r := 0; r < n; r++ {
		if _, err := heap.Atomic(r, counter, 0, onesided.AtomicUint64, onesided.OpSum, uint64(me+1)); err != nil {
			return err
		}
	}

	// Non-fetching atomics: issued without waiting, complete at the
	// barrier below. Bin k of every rank's vector gets (me+1)*(k+1), in
	// one vector operation per target; bit me of every rank's mask is set.
	add := make([]uint64, bins)
	for k := range add {
		add[k] = uint64((me + 1) * (k + 1))
	}
	for r := 0; r < n; r++ {
		if err := heap.AtomicAddN(r, vec, 0, onesided.AtomicInt64, add); err != nil {
			return err
		}
		if err := heap.AtomicOr(r, mask, 0, onesided.AtomicUint64, 1<<me); err != nil {
			return err
		}
	}

	// A token goes around the ring; each hop adds the hop's rank.
	var sum uint64
	right := (me + 1) % n
	if me == 0 {
		if err := heap.PutSignal(right, token, 8, le(0), token, 0, 1); err != nil {
			return err
		}
	}
	if _, err := heap.WaitSignal(ctx, token, 0, onesided.CmpEQ, 1); err != nil {
		return err
	}
	sum = binary.LittleEndian.Uint64(heap.Local(token)[8:])
	if me != 0 {
		if err := heap.PutSignal(right, token, 8, le(sum+uint64(me)), token, 0, 1); err != nil {
			return err
		}
	}

	if err := heap.Barrier(ctx); err != nil {
		return err
	}
	got := binary.LittleEndian.Uint64(heap.Local(counter))
	if want := uint64(n * (n + 1) / 2); got != want {
		return fmt.Errorf("rank %d: counter %d, want %d", me, got, want)
	}
	v := heap.Local(vec)
	for k := 0; k < bins; k++ {
		if got, want := binary.LittleEndian.Uint64(v[8*k:]), uint64(n*(n+1)/2*(k+1)); got != want {
			return fmt.Errorf("rank %d: bin %d = %d, want %d", me, k, got, want)
		}
	}
	if got, want := binary.LittleEndian.Uint64(heap.Local(mask)), uint64(1)<<n-1; got != want {
		return fmt.Errorf("rank %d: mask %#x, want %#x", me, got, want)
	}
	if me == 0 {
		l := heap.Local(list)
		if got := binary.LittleEndian.Uint64(l); got != uint64(n) {
			return fmt.Errorf("list of %d entries after the locked appends, want %d", got, n)
		}
		seen := make([]bool, n)
		for i := 0; i < n; i++ {
			r := binary.LittleEndian.Uint64(l[8*(i+1):])
			if r >= uint64(n) || seen[r] {
				return fmt.Errorf("list entry %d is %d: a rank missing or twice", i, r)
			}
			seen[r] = true
		}
		if want := uint64(n * (n - 1) / 2); sum != want {
			return fmt.Errorf("token came back with %d, want %d", sum, want)
		}
		path := "direct stores"
		if w := heap.Window(); w.Provider() != "" {
			path = "libfabric " + w.Provider() + ", signal ordering " + w.Ordering().String()
		}
		fmt.Printf("pgas: %d ranks, counter %d and bins %d..%d on every rank, %d locked appends, ring token %d (%s)\n",
			n, got, n*(n+1)/2, n*(n+1)/2*bins, n, sum, path)
	}
	return nil
}

func le(v uint64) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return b[:]
}
