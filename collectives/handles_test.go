package collectives_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// TestBatteryHandles: every collective over the endpoint handles of one
// process, communicator sizes 1 to 8.
func TestBatteryHandles(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8} {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			eps := handles(t, n)
			runHandles(t, tctx(t, 120*time.Second), eps, nil, func(ctx context.Context, c *C.Coll) error {
				return battery(ctx, c, false)
			})
		})
	}
}

// TestBigHandles: the ~1 MiB cases (see bigBattery).
func TestBigHandles(t *testing.T) {
	sizes := []int{2, 3, 4, 5, 7, 8}
	if testing.Short() {
		sizes = []int{3} // -short (the race detector's run): one size past a power of two
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			eps := handles(t, n)
			runHandles(t, tctx(t, 120*time.Second), eps, nil, func(ctx context.Context, c *C.Coll) error {
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
			runHandles(t, tctx(t, 120*time.Second), eps, []C.Option{C.Deterministic(true)}, func(ctx context.Context, c *C.Coll) error {
				return detBattery(ctx, c, []int{0, 1, 37, 1000})
			})
		})
	}
}

// TestBatteryShared: the battery over handles that share one locked
// endpoint (CreateEndpoints with endpoint.Shared).
func TestBatteryShared(t *testing.T) {
	ctx := tctx(t, 60*time.Second)
	handles(t, 1) // the singleton world
	eps := endpointsOf(t, ctx, single.w.Comm(), 4, endpoint.Shared(true))
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		return battery(ctx, c, false)
	})
}
