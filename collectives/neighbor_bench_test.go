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
	errs := onHandles(ctx, eps, nil, func(ctx context.Context, world *C.Coll) error {
		g, err := world.Comm().CartCreate(ctx, []int{2, 1}, nil)
		if err != nil {
			return err
		}
		defer g.Free()
		c, err := C.New(ctx, g.Comm())
		if err != nil {
			return err
		}
		defer c.Free()
		w := n + 2
		a := make([]float64, w*w)
		buf := endpoint.AsBytes(a)
		row, _ := ddt.Contiguous(n, ddt.Float64)
		row.Commit()
		col, _ := ddt.Vector(n, 1, w, ddt.Float64)
		col.Commit()
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
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
