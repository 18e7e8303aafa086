package collectives_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// Four goroutines of one process each own an endpoint, a rank of the new
// communicator, and take part in collectives as that rank: a global sum,
// the maximum with the rank that holds it, and a broadcast from rank 2.
// Run alone, the process is a singleton job; under fabrun every process
// contributes its endpoints and the same code spans all of them.
func Example() {
	onEndpoints(4, rank)
	// Output:
	// rank 0: sum 10, max 16 at rank 3, params [2.5 7]
	// rank 1: sum 10, max 16 at rank 3, params [2.5 7]
	// rank 2: sum 10, max 16 at rank 3, params [2.5 7]
	// rank 3: sum 10, max 16 at rank 3, params [2.5 7]
}

// onEndpoints runs body on n endpoint handles of this process, each in
// its own goroutine, and prints what each returns, in rank order.
func onEndpoints(n int, body func(ctx context.Context, ep *endpoint.Comm) string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, n)
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
			out[i] = body(ctx, ep)
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
}

// rank is one rank's part of the example.
func rank(ctx context.Context, ep *endpoint.Comm) string {
	c, err := collectives.New(ctx, ep)
	if err != nil {
		return err.Error()
	}
	defer c.Free()
	r := c.Rank()

	sum := []float64{float64(r + 1)} // in place: send == nil
	if err := collectives.Allreduce(ctx, c, nil, sum, collectives.Sum[float64]()); err != nil {
		return err.Error()
	}

	local := []collectives.Loc[int]{{Val: (r + 1) * (r + 1), Idx: r}}
	top := make([]collectives.Loc[int], 1)
	if err := collectives.Allreduce(ctx, c, local, top, collectives.MaxLoc[int]()); err != nil {
		return err.Error()
	}

	params := make([]float64, 2)
	if r == 2 {
		params[0], params[1] = 2.5, 7
	}
	if err := collectives.Bcast(ctx, c, params, 2); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("rank %d: sum %g, max %d at rank %d, params %v", r, sum[0], top[0].Val, top[0].Idx, params)
}
