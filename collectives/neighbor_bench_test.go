package collectives_test

import (
	"context"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkNeighborAlltoallw is one 2D halo exchange by NeighborAlltoallw
// between 2 handles of one process (a 2×1 grid: each exchanges a row of
// 64 float64 with the other; the column's neighbours are ProcNull), its
// arguments the same call after call, as a stencil code's: ns/op is one
// call of rank 0, both ranks running.
//
//	go test -run '^$' -bench NeighborAlltoallw -benchmem ./collectives/
func BenchmarkNeighborAlltoallw(b *testing.B) {
	eps := handles(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 64
	row, err := ddt.Contiguous(n, ddt.Float64)
	if err == nil {
		err = row.Commit()
	}
	col, err2 := ddt.Vector(n, 1, n+2, ddt.Float64)
	if err2 == nil {
		err2 = col.Commit()
	}
	if err != nil || err2 != nil {
		b.Fatal(err, err2)
	}
	errs := onHandles(ctx, eps, nil, func(ctx context.Context, world *C.Coll) error {
		return withGrid(ctx, world, []int{2, 1}, func(c *C.Coll, g *endpoint.Cart) error {
			w := n + 2
			buf := endpoint.AsBytes(make([]float64, w*w))
			at := func(y, x int) int { return 8 * (y*w + x) }
			types := []*ddt.Type{row, row, col, col}
			counts := []int{1, 1, 1, 1}
			sd := []int{at(1, 1), at(n, 1), at(1, 1), at(1, n)}
			rd := []int{at(0, 1), at(n+1, 1), at(1, 0), at(1, n+1)}
			if c.Rank() == 0 {
				b.ResetTimer()
			}
			for i := 0; i < b.N; i++ {
				if err := C.NeighborAlltoallw(ctx, c, g, buf, counts, sd, types, buf, counts, rd, types); err != nil {
					return err
				}
			}
			return nil
		})
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
