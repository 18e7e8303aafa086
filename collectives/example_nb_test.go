package collectives_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// Each of four endpoint handles starts a global sum, computes while it
// is in flight (the progress goroutine moves it along), then waits for
// it; a second sum started before the first is waited for first.
func ExampleIallreduce() {
	onEndpoints(4, overlapRank)
	// Output:
	// rank 0: residual 30, count 4, local work 499500
	// rank 1: residual 30, count 4, local work 499500
	// rank 2: residual 30, count 4, local work 499500
	// rank 3: residual 30, count 4, local work 499500
}

func overlapRank(ctx context.Context, ep *endpoint.Comm) string {
	c, err := collectives.New(ctx, ep, collectives.WithProgress(true))
	if err != nil {
		return err.Error()
	}
	defer c.Free()
	r := c.Rank()

	residual := []float64{float64((r + 1) * (r + 1))} // in place: send == nil
	sum, err := collectives.Iallreduce(c, nil, residual, collectives.Sum[float64]())
	if err != nil {
		return err.Error()
	}
	count := []int{1}
	n, err := collectives.Iallreduce(c, nil, count, collectives.Sum[int]())
	if err != nil {
		return err.Error()
	}

	work := 0 // computation that does not need the sums
	for i := 0; i < 1000; i++ {
		work += i
	}

	if err := n.Wait(ctx); err != nil { // any order
		return err.Error()
	}
	if err := sum.Wait(ctx); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("rank %d: residual %g, count %d, local work %d", r, residual[0], count[0], work)
}

// ExampleAllreduceInit binds an Allreduce once and starts it every
// iteration of a loop, as an iterative solver reduces its residual.
func ExampleAllreduceInit() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
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
	local, global := make([]float64, 1), make([]float64, 1)
	q, err := collectives.AllreduceInit(c, local, global, collectives.Sum[float64]())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Free()
	for it := 1; it <= 3; it++ {
		local[0] = float64(it) // this iteration's contribution
		if err := q.Start(); err != nil {
			fmt.Println(err)
			return
		}
		if err := q.Wait(ctx); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(global[0])
	}
	// Output:
	// 1
	// 2
	// 3
}
