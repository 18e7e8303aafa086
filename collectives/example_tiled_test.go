package collectives_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// A loop of 6 iterations runs in tiles of 2 with one tile in flight:
// iteration i of rank r produces 10·r + i for every rank, and each tile
// travels while the next is computed. Every rank ends with what Alltoall
// would have given it: rank 0's six values, then rank 1's, and so on. Run
// alone, the process is a job of one rank; under fabrun the same code
// spans every process.
func ExampleTiledAlltoall() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	c, err := collectives.New(ctx, w.Comm())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Free()
	const iters, count = 6, 1
	a, err := collectives.NewTiledAlltoall[float64](ctx, c, iters, count, collectives.WithTiles(2, 1))
	if err != nil {
		fmt.Println(err)
		return
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
		fmt.Println(err)
		return
	}
	fmt.Printf("rank %d received %v in %d tiles\n", c.Rank(), recv, tiles)
	// Output:
	// rank 0 received [0 1 2 3 4 5] in 3 tiles
}
