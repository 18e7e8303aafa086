package collectives_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestNoAllocs: once warm, the collectives between processes of one
// node (2 and 4, node transport) allocate nothing per call at any size,
// through every path their sizes take (symmetric steps, the leader's
// slots, single copies, streams, and point-to-point rings whose medium
// messages arrive before their receives). Garbage per call would make
// the heap grow through fresh pages, whose first touch stalls a call.
func TestNoAllocs(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			if launchtest.RunOn(t, np, "native", 90*time.Second) {
				return
			}
			_, ctx, c := worldColl(t)
			sum := C.Sum[float32]()
			sizes := []int{8, 64, 4 << 10, 16 << 10, 64 << 10, 1 << 20}
			if launchtest.Short() {
				sizes = []int{8, 16 << 10, 1 << 20}
			}
			for _, n := range sizes {
				cnt := n / 4
				s, r := make([]float32, cnt*np), make([]float32, cnt*np)
				var ferr error
				check := func(err error) {
					if err != nil && ferr == nil {
						ferr = err
					}
				}
				calls := []struct {
					name string
					f    func()
				}{
					{"Barrier", func() { check(C.Barrier(ctx, c)) }},
					{"Bcast", func() { check(C.Bcast(ctx, c, s[:cnt], 0)) }},
					{"Reduce", func() { check(C.Reduce(ctx, c, s[:cnt], r[:cnt], sum, 0)) }},
					{"Allreduce", func() { check(C.Allreduce(ctx, c, s[:cnt], r[:cnt], sum)) }},
					{"Allgather", func() { check(C.Allgather(ctx, c, s[:cnt], r)) }},
					{"Alltoall", func() { check(C.Alltoall(ctx, c, s, r)) }},
				}
				for _, call := range calls {
					for range 10 {
						call.f()
					}
					a := testing.AllocsPerRun(20, call.f)
					if ferr != nil {
						t.Fatalf("%s of %d bytes: %v", call.name, n, ferr)
					}
					if a != 0 && !testenv.Race { // the race detector's instrumentation allocates
						t.Errorf("%s of %d bytes a rank: %.2f allocations a call, want 0", call.name, n, a)
					}
				}
			}
		})
	}
}

// TestNoAllocsHandles: the same for 2 and 4 endpoint handles of one
// process, counted over the whole process while every handle makes 100
// calls.
func TestNoAllocsHandles(t *testing.T) {
	sizes := []int{8, 64, 4 << 10, 64 << 10, 1 << 20}
	if testing.Short() {
		sizes = []int{8, 64 << 10}
	}
	for _, np := range []int{2, 4} {
		eps := handles(t, np)
		ctx := eptest.Ctx(t, 60*time.Second)
		for _, n := range sizes {
			for _, name := range []string{"Barrier", "Bcast", "Reduce", "Allreduce", "Allgather", "Alltoall"} {
				var before, after runtime.MemStats
				runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
					cnt := n / 4
					s, r := make([]float32, cnt*np), make([]float32, cnt*np)
					sum := C.Sum[float32]()
					call := func() error {
						switch name {
						case "Barrier":
							return C.Barrier(ctx, c)
						case "Bcast":
							return C.Bcast(ctx, c, s[:cnt], 0)
						case "Reduce":
							return C.Reduce(ctx, c, s[:cnt], r[:cnt], sum, 0)
						case "Allreduce":
							return C.Allreduce(ctx, c, s[:cnt], r[:cnt], sum)
						case "Allgather":
							return C.Allgather(ctx, c, s[:cnt], r)
						}
						return C.Alltoall(ctx, c, s, r)
					}
					for k := 0; k < 120; k++ {
						if k == 20 || k == 119 {
							// Every handle has finished its calls before the count.
							if err := C.Barrier(ctx, c); err != nil {
								return err
							}
							if c.Rank() == 0 && k == 20 {
								runtime.ReadMemStats(&before)
							} else if c.Rank() == 0 {
								runtime.ReadMemStats(&after)
							}
							if err := C.Barrier(ctx, c); err != nil {
								return err
							}
						}
						if err := call(); err != nil {
							return err
						}
					}
					return nil
				})
				if d := float64(after.Mallocs-before.Mallocs) / 99; d > 0.05 && !testenv.Race {
					t.Errorf("%d handles, %s of %d bytes a rank: %.2f allocations a call (all handles together), want 0", np, name, n, d)
				}
			}
		}
	}
}
