package collectives_test

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// Four ranks on a ring (a periodic 1-D grid) each send one value down and
// one up, and get their neighbours' in return: block 0 comes from the rank
// below (what it sent up), block 1 from the rank above (what it sent
// down).
func ExampleNeighborAlltoall() {
	onEndpoints(4, func(ctx context.Context, ep *endpoint.Comm) string {
		g, err := ep.CartCreate(ctx, []int{4}, []bool{true})
		if err != nil {
			return err.Error()
		}
		defer g.Free()
		c, err := collectives.New(ctx, g.Comm())
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		r := c.Rank()
		send := []int{-r, 100 + r} // down, up
		recv := make([]int, 2)
		if err := collectives.NeighborAlltoall(ctx, c, g, send, recv); err != nil {
			return err.Error()
		}
		nb, _, _ := g.Neighbors()
		return fmt.Sprintf("rank %d: from %d %d, from %d %d", r, nb[0], recv[0], nb[1], recv[1])
	})
	// Output:
	// rank 0: from 3 103, from 1 -1
	// rank 1: from 0 100, from 2 -2
	// rank 2: from 1 101, from 3 -3
	// rank 3: from 2 102, from 0 0
}

// Three ranks on a directed graph: each sends to the next rank and to
// itself, and receives from itself and from the previous rank, in that
// order; NeighborAllgather gives each the values of its sources.
func ExampleNeighborAllgather() {
	onEndpoints(3, func(ctx context.Context, ep *endpoint.Comm) string {
		me, p := ep.Rank(), ep.Size()
		g, err := ep.GraphCreate(ctx, []int{me, (me + p - 1) % p}, []int{(me + 1) % p, me})
		if err != nil {
			return err.Error()
		}
		defer g.Free()
		c, err := collectives.New(ctx, g.Comm())
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		got := make([]int, 2)
		if err := collectives.NeighborAllgather(ctx, c, g, []int{10 * me}, got); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("rank %d: from itself %d, from rank %d %d", me, got[0], (me+p-1)%p, got[1])
	})
	// Output:
	// rank 0: from itself 0, from rank 2 20
	// rank 1: from itself 10, from rank 0 0
	// rank 2: from itself 20, from rank 1 10
}
