package endpoint_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/job"
)

// Two goroutines of one process each own an endpoint (a rank of the new
// communicator) and exchange typed slices. Run alone, the process is a
// singleton job; under fabrun every process contributes its endpoints.
func Example() {
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
	var wg sync.WaitGroup
	out := make([]string, len(eps))
	for i, ep := range eps {
		wg.Add(1)
		go func(i int, c *endpoint.Comm) {
			defer wg.Done()
			defer c.Free()
			peer := 1 - c.Rank()
			send := []float64{float64(c.Rank()) + 0.5, 2}
			recv := make([]float64, 2)
			r, err := endpoint.IrecvSlice(c, recv, peer, 0)
			if err != nil {
				out[i] = err.Error()
				return
			}
			if err := endpoint.SendSlice(ctx, c, send, peer, 0); err != nil {
				out[i] = err.Error()
				return
			}
			st, err := r.Wait(ctx)
			if err != nil {
				out[i] = err.Error()
				return
			}
			out[i] = fmt.Sprintf("rank %d got %v (%d bytes) from rank %d", c.Rank(), recv, st.Count, st.Source)
		}(i, ep)
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 got [1.5 2] (16 bytes) from rank 1
	// rank 1 got [0.5 2] (16 bytes) from rank 0
}

// A program that needs the job before the fabric (to read its rank, or to
// trade its own values through the launcher) hands the job to Init. Close
// then leaves Finalize to the caller.
func ExampleWithJob() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Finalize()
	w, err := endpoint.Init(ctx, endpoint.WithJob(j))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	fmt.Println(w.Job() == j, w.Comm().Size() == j.Size())
	// Output: true true
}

// A world that counts its traffic (WithStats; WEFT_STATS does the same
// and writes it for fabrun stats at Close): two endpoints of one process
// exchange messages, and the process's row of the communication matrix
// says what went to which rank's process, through which transport.
func ExampleWorld_Stats() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"), endpoint.WithStats())
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
	a, b := eps[0], eps[1]
	for _, n := range []int{8, 1000, 64 << 10} {
		r, err := b.Irecv(make([]byte, n), 0, 0)
		if err == nil {
			err = a.Send(ctx, make([]byte, n), 1, 0)
		}
		if err == nil {
			_, err = r.Wait(ctx)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	st := w.Stats()
	fmt.Printf("sent %d messages, %d bytes\n", st.Sent.Messages, st.Sent.Bytes)
	tr, _ := a.Transport(1) // node, or fabric with WEFT_NODE_TRANSPORT=fabric
	for _, p := range st.Peers {
		fmt.Printf("to rank %d: %d messages, through the handles' transport: %v\n", p.Rank, p.Messages, p.Transport == tr)
	}
	// Output:
	// sent 3 messages, 66544 bytes
	// to rank 0: 3 messages, through the handles' transport: true
}
