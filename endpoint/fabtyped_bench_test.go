package endpoint_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkFabricTyped measures the libfabric paths of a 1 MiB typed
// message (a vector of blocks of the given size, every other block) sent
// between two endpoints of one process over shm, ping-pong: the time per
// message (half a round trip) for the segment pipeline, zero copy and
// pack-whole paths and a contiguous send of as many bytes (the
// floor), the data the cost model's zcblock is fitted from
// (docs/perf/typed.md).
func BenchmarkFabricTyped(b *testing.B) {
	singleton(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.WithNodeTransport(false))
	if err != nil {
		b.Fatal(err)
	}
	defer endpoint.SetTypedPath("", 0)
	const total = 1 << 20
	for _, blk := range []int{8, 64, 256, 1024, 4096, 16384} {
		t, err := committed(ddt.Vector(total/blk, blk, 2*blk, ddt.Byte))
		if err != nil {
			b.Fatal(err)
		}
		bufA, bufB := make([]byte, 2*total), make([]byte, 2*total)
		for _, path := range []string{"pipeline", "zerocopy", "pack", "contiguous"} {
			if path == "contiguous" && blk != 8 {
				continue // the floor: the same bytes in one block, once
			}
			ty, cnt := t, 1
			if path == "contiguous" {
				ty, cnt = ddt.Byte, total
			}
			b.Run(fmt.Sprintf("block=%d/%s", blk, path), func(b *testing.B) {
				endpoint.SetTypedPath(path, 1)
				if path == "pipeline" {
					endpoint.SetTypedPath(path, 1<<30) // receive side: no zero copy either
				}
				errc := make(chan error, 1)
				n := b.N
				go func() {
					for i := 0; i < n; i++ {
						if _, err := eps[1].RecvTyped(ctx, bufB, cnt, ty, 0, 1); err != nil {
							errc <- err
							return
						}
						if err := eps[1].SendTyped(ctx, bufB, cnt, ty, 0, 2); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
				b.SetBytes(total)
				b.ResetTimer()
				for i := 0; i < n; i++ {
					if err := eps[0].SendTyped(ctx, bufA, cnt, ty, 1, 1); err != nil {
						b.Fatal(err)
					}
					if _, err := eps[0].RecvTyped(ctx, bufA, cnt, ty, 1, 2); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*n), "µs/msg")
			})
		}
	}
}
