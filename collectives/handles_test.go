package collectives_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// TestBatteryHandles: every collective over the endpoint handles of one
// process, communicator sizes 1 to 8.
func TestBatteryHandles(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8} {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			eps := handles(t, n)
			runHandles(t, eptest.Ctx(t, 120*time.Second), eps, nil, func(ctx context.Context, c *C.Coll) error {
				return battery(ctx, c, false)
			})
		})
	}
}

// TestBigHandles: the ~1 MiB cases (see bigBattery), on two ranks, on
// odd counts past one and two powers of two (3, 7) and on powers of two
// (4, 8).
func TestBigHandles(t *testing.T) {
	sizes := []int{2, 3, 4, 7, 8}
	if testing.Short() {
		sizes = []int{3} // -short (the race detector's run): one size past a power of two
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			eps := handles(t, n)
			runHandles(t, eptest.Ctx(t, 120*time.Second), eps, nil, func(ctx context.Context, c *C.Coll) error {
				return bigBattery(ctx, c)
			})
		})
	}
}

// TestDeterministic: in deterministic mode every reduction algorithm
// gives the serial rank-order fold bit for bit, on float64 values of
// widely spread magnitudes (where the order of additions shows) and on a
// non-commutative operation.
func TestDeterministic(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7, 8} {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			eps := handles(t, n)
			runHandles(t, eptest.Ctx(t, 120*time.Second), eps, []C.Option{C.Deterministic(true)}, func(ctx context.Context, c *C.Coll) error {
				return detBattery(ctx, c, []int{0, 1, 37, 1000})
			})
		})
	}
}

// TestBatteryShared: the battery over handles that share one locked
// endpoint (CreateEndpoints with endpoint.Shared).
func TestBatteryShared(t *testing.T) {
	ctx := eptest.Ctx(t, 60*time.Second)
	handles(t, 1) // the singleton world
	eps := endpointsOf(t, ctx, eptest.Singleton(t).Comm(), 4, endpoint.Shared(true))
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		return battery(ctx, c, false)
	})
}

// TestStagedBcast: 2 and 4 handles of this process run Bcasts back to
// back, with no barrier between them, from every root in turn, of 1
// element up to past the staging limit, mixed with Allreduces; every
// result is checked on every handle. With 4 handles on 2 cores (more
// than GOMAXPROCS) root 0, the leader, stages its data for the members;
// with 2 (and the others' Bcasts always) the leader writes into the
// members' buffers. Then the leader Bcasts where the members Allreduce:
// every handle fails, at the latest in the Barrier that follows, at
// least one with ErrInvalid.
func TestStagedBcast(t *testing.T) {
	iters := 2000
	if testing.Short() {
		iters = 300
	}
	for _, p := range []int{2, 4} {
		t.Run(fmt.Sprintf("handles=%d", p), func(t *testing.T) {
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, p), nil, func(ctx context.Context, c *C.Coll) error {
				me := c.Rank()
				for i := range iters {
					root := i % p
					n := []int{1, 16, 9000}[i%3] // 9000 int64s: past the staging limit
					b := make([]int64, n)
					if me == root {
						for j := range b {
							b[j] = int64(i*10000 + j)
						}
					}
					if err := C.Bcast(ctx, c, b, root); err != nil {
						return fmt.Errorf("Bcast %d from %d: %w", i, root, err)
					}
					for j, v := range b {
						if v != int64(i*10000+j) {
							return fmt.Errorf("Bcast %d from %d: element %d is %d, want %d", i, root, j, v, i*10000+j)
						}
					}
					if i%5 == 2 {
						x := []int32{int32(me)}
						if err := C.Allreduce(ctx, c, nil, x, C.Sum[int32]()); err != nil {
							return fmt.Errorf("Allreduce %d: %w", i, err)
						}
						if want := int32(p * (p - 1) / 2); x[0] != want {
							return fmt.Errorf("Allreduce %d: %d, want %d", i, x[0], want)
						}
					}
				}
				return nil
			})
		})
	}
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]int32, 2)
		var err error
		if c.Rank() == 0 {
			err = C.Bcast(ctx, c, x, 0)
		} else {
			err = C.Allreduce(ctx, c, nil, x, C.Sum[int32]())
		}
		if err != nil {
			return err
		}
		return C.Barrier(ctx, c)
	})
}
