package collectives_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// Three endpoint handles of one process are ranks of one communicator:
// by default their Allreduce meets in the process's memory (no message),
// and WithHierarchy(HierOff) makes the same call send messages between
// the handles instead. The results are the same.
func ExampleWithHierarchy() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 3)
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
			for _, h := range []collectives.Hierarchy{collectives.HierAuto, collectives.HierOff} {
				c, err := collectives.New(ctx, ep, collectives.WithHierarchy(h))
				if err != nil {
					out[i] = err.Error()
					return
				}
				sum := []int{c.Rank() + 1}
				if err := collectives.Allreduce(ctx, c, nil, sum, collectives.Sum[int]()); err != nil {
					out[i] = err.Error()
				} else if c.Rank() == 0 {
					out[i] += fmt.Sprintf("%s: hierarchical %v, sum %d\n", h, c.Hierarchical(collectives.CollAllreduce), sum[0])
				}
				c.Free()
			}
		}()
	}
	wg.Wait()
	fmt.Print(out[0])
	// Output:
	// auto: hierarchical true, sum 6
	// off: hierarchical false, sum 6
}
