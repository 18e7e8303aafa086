package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/ddt"
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
	if err := createTyped(ctx, w, buf, right, left); err != nil {
		return err
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

// createTyped puts to right and gets from it with derived datatypes,
// through both typed paths of libfabric (a contiguous origin written by
// iovec, a strided one packed into chunks): the target blocks are
// offsets in the caller's buffer, with nothing in front of them.
func createTyped(ctx context.Context, w *Window, buf []byte, right, left int) error {
	every2, err := ddt.Vector(100, 1, 2, ddt.Byte) // 100 bytes, one every other
	if err != nil {
		return err
	}
	if err := every2.Commit(); err != nil {
		return err
	}
	me := w.Rank()
	for _, strided := range []bool{false, true} {
		clear(buf[3100:3400])
		if err := w.Fence(ctx); err != nil {
			return err
		}
		origin := make([]byte, 200)
		for i := range origin {
			origin[i] = byte(me*50 + i + 1)
		}
		var err error
		if strided { // every other origin byte into the target's first 100
			err = w.PutTyped(right, 3100, origin, 1, every2, 100, ddt.Byte)
		} else { // 100 contiguous origin bytes into every other target byte
			err = w.PutTyped(right, 3100, origin, 100, ddt.Byte, 1, every2)
		}
		if err != nil {
			return err
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		for i := range 200 {
			want, at := byte(0), i
			if strided && i < 100 {
				want = byte(left*50 + 2*i + 1)
			} else if !strided && i%2 == 0 {
				want = byte(left*50 + i/2 + 1)
			}
			if buf[3100+at] != want {
				return fmt.Errorf("strided %v: byte %d of the caller's buffer is %d, want %d (the region starts at buf[0])", strided, at, buf[3100+at], want)
			}
		}
		back := make([]byte, 100)
		if strided {
			err = w.GetTyped(ctx, right, 3100, back, 100, ddt.Byte, 100, ddt.Byte)
		} else {
			err = w.GetTyped(ctx, right, 3100, back, 100, ddt.Byte, 1, every2)
		}
		if err != nil {
			return err
		}
		for i, b := range back {
			if want := byte(me*50 + i + 1); !strided && b != want || strided && b != origin[2*i] {
				return fmt.Errorf("strided %v: GetTyped byte %d is %d", strided, i, b)
			}
		}
		if err := w.Fence(ctx); err != nil { // right reads this rank's buffer until here
			return err
		}
	}
	return nil
}

func TestCreate(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return createScenario(ctx, g, WithProvider("shm"))
	})
}
