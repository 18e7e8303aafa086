package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// createScenario: windows over caller-owned memory of different sizes per
// rank; a put-with-signal ring, atomics from every rank, Get, the error
// paths.
func createScenario(ctx context.Context, g Group, opts ...Option) error {
	me, n := g.Rank(), g.Size()
	buf := make([]byte, 4096+64*me)
	w, err := Create(ctx, g, buf, opts...)
	if err != nil {
		return err
	}
	for r := 0; r < n; r++ {
		if w.Len(r) != 4096+64*r || w.Direct(r) != (r == me) {
			return fmt.Errorf("rank %d: Len %d Direct %v", r, w.Len(r), w.Direct(r))
		}
	}
	right, left := (me+1)%n, (me+n-1)%n
	msg := bytes.Repeat([]byte{byte(me + 1)}, 3000)
	if err := w.PutSignal(right, 64, msg, 0, 7); err != nil {
		return err
	}
	if _, err := w.WaitSignal(ctx, 0, CmpEQ, 7); err != nil {
		return err
	}
	if !bytes.Equal(buf[64:3064], bytes.Repeat([]byte{byte(left + 1)}, 3000)) {
		return fmt.Errorf("data from rank %d not in the caller's buffer", left)
	}
	for r := 0; r < n; r++ {
		if _, err := w.FetchAndOp(r, 8, AtomicUint64, OpSum, uint64(me+1)); err != nil {
			return err
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if v := binary.LittleEndian.Uint64(buf[8:]); v != uint64(n*(n+1)/2) {
		return fmt.Errorf("atomic sum %d, want %d", v, n*(n+1)/2)
	}
	got := make([]byte, 3000)
	if err := w.Get(right, 64, got); err != nil {
		return err
	}
	if err := w.Flush(ctx, right); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("Get of what this rank put differs")
	}
	if err := w.Put(right, 4096+64*right-10, got[:11]); !errors.Is(err, ErrOutOfRange) {
		return fmt.Errorf("put past the end of a caller-sized region: %v", err)
	}
	if err := w.Free(ctx); err != nil {
		return err
	}
	if _, err := Create(ctx, g, buf, WithSharedMemory(ShmOnly)); !errors.Is(err, ErrNotSupported) {
		return fmt.Errorf("Create with direct stores forced: %v", err)
	}
	if _, err := Create(ctx, g, buf[1:], opts...); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Create on a misaligned buffer: %v", err)
	}
	// Zero-length regions are allowed.
	w, err = Create(ctx, g, nil, opts...)
	if err != nil {
		return fmt.Errorf("Create(nil): %w", err)
	}
	if err := w.Put(right, 0, nil); err != nil {
		return err
	}
	return w.Free(ctx)
}

func TestCreate(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return createScenario(ctx, g, WithProvider("shm"))
	})
}
