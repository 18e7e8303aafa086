package collectives_test

import (
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
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
			if launch(t, np, "native", 90*time.Second) {
				return
			}
			_, ctx, c := worldColl(t)
			sum := C.Sum[float32]()
			sizes := []int{8, 64, 4 << 10, 16 << 10, 64 << 10, 1 << 20}
			if short() {
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
					if a != 0 {
						t.Errorf("%s of %d bytes a rank: %.2f allocations a call, want 0", call.name, n, a)
					}
				}
			}
		})
	}
}
