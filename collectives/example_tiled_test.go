package collectives_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// Two ranks (endpoint handles of one process) run a loop of 6 iterations
// in tiles of 2; iteration i of rank r produces 10·r + i for each rank,
// and each tile travels while the next one is computed. Every rank ends
// with what Alltoall would have given it: rank 0's six values, then rank
// 1's.
func ExampleTiledAlltoall() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]string, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ep.Free()
			out[i] = tiledRank(ctx, ep)
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 received [0 1 2 3 4 5 10 11 12 13 14 15] in 3 tiles
	// rank 1 received [0 1 2 3 4 5 10 11 12 13 14 15] in 3 tiles
}

func tiledRank(ctx context.Context, ep *endpoint.Comm) string {
	c, err := collectives.New(ctx, ep)
	if err != nil {
		return err.Error()
	}
	defer c.Free()
	const iters, count = 6, 1
	a, err := collectives.NewTiledAlltoall[float64](ctx, c, iters, count, collectives.WithTiles(2, 1))
	if err != nil {
		return err.Error()
	}
	defer a.Free(ctx)
	tiles := 0
	compute := func(t collectives.Tile, out [][]float64) error {
		tiles++
		for i := range t.Count { // the loop's body for iteration t.First+i
			v := float64(10*c.Rank() + t.First + i)
			for p := range out {
				out[p][i] = v
			}
		}
		return nil
	}
	recv := make([]float64, c.Size()*iters*count)
	if err := a.Alltoall(ctx, compute, recv); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("rank %d received %v in %d tiles", c.Rank(), recv, tiles)
}
