package endpoint_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// A sender posts several small messages to two peers with one call; on
// the node transport each peer's ring gets them all with one publication.
// One goroutine drives the three endpoints here.
func ExampleComm_IsendBatch() {
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
	x, y, z := eps[0], eps[1], eps[2]
	bufs := [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8)}
	var reqs []*endpoint.Request
	for i, c := range []*endpoint.Comm{y, y, z} {
		r, err := c.Irecv(bufs[i], 0, endpoint.AnyTag)
		if err != nil {
			fmt.Println(err)
			return
		}
		reqs = append(reqs, r)
	}
	batch := []endpoint.Msg{
		{Buf: []byte("one"), Dest: 1, Tag: 5},
		{Buf: []byte("two"), Dest: 2, Tag: 5},
		{Buf: []byte("three"), Dest: 1, Tag: 6},
		{Buf: []byte("ignored"), Dest: endpoint.ProcNull, Tag: 5},
	}
	reqs, err = x.IsendBatch(reqs, batch) // appends a request per message
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := endpoint.WaitAll(ctx, reqs...); err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range reqs[:3] {
		st, _ := r.Wait(ctx)
		fmt.Printf("receive %d: %q (tag %d)\n", i, bufs[i][:st.Count], st.Tag)
	}
	// Output:
	// receive 0: "one" (tag 5)
	// receive 1: "three" (tag 6)
	// receive 2: "two" (tag 5)
}

// A message-rate loop: a window of receives, one WaitAll, then one
// ReleaseAll hands the completed requests back for the next window to
// reuse, as MPI_Waitall frees them.
func ExampleReleaseAll() {
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
	x, y := eps[0], eps[1]
	bufs := make([][]byte, 4)
	reqs := make([]*endpoint.Request, len(bufs))
	got := 0
	for window := 0; window < 3; window++ {
		for i := range bufs {
			bufs[i] = make([]byte, 8)
			if reqs[i], err = y.Irecv(bufs[i], 0, 1); err != nil {
				fmt.Println(err)
				return
			}
		}
		for range bufs {
			if _, err := x.Isend([]byte("msg"), 1, 1); err != nil {
				fmt.Println(err)
				return
			}
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			fmt.Println(err)
			return
		}
		got += len(reqs)
		if err := endpoint.ReleaseAll(reqs...); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("messages received:", got)
	// Output:
	// messages received: 12
}

// A receiver that does not know a message's length takes it off the
// queue with a matched probe, sizes its buffer from the status and
// receives exactly that message, whichever other goroutines receive on
// the same communicator.
func ExampleComm_Mprobe() {
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
	a, b := eps[0], eps[1]
	r, err := a.Isend([]byte("a message of some length"), 1, 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := b.Mprobe(ctx, endpoint.AnySource, endpoint.AnyTag)
	if err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, m.Status().Count)
	st, err := m.Mrecv(ctx, buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := r.Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q from %d, tag %d\n", buf, st.Source, st.Tag)
	// Output: "a message of some length" from 0, tag 7
}

// A synchronous send completes only once its receive has matched it,
// even for a message small enough to go eagerly.
func ExampleComm_Issend() {
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
	a, b := eps[0], eps[1]
	r, err := a.Issend([]byte("sync"), 1, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	done, _, _ := r.Test()
	fmt.Println("complete before the receive:", done)
	buf := make([]byte, 4)
	if _, err := b.Recv(ctx, buf, 0, 3); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := r.Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("received %q; the send is complete\n", buf)
	// Output:
	// complete before the receive: false
	// received "sync"; the send is complete
}

// ExampleWaitSome posts receives for several tags and handles each
// message as soon as it comes, in whatever order the sender chose,
// reporting every receive once.
func ExampleWaitSome() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	c := w.Comm()
	bufs := make([][]byte, 3)
	reqs := make([]*endpoint.Request, 3)
	for k := range reqs {
		bufs[k] = make([]byte, 1)
		if reqs[k], err = c.Irecv(bufs[k], 0, k); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, tag := range []int{2, 0, 1} {
		if err := c.Send(ctx, []byte{byte('a' + tag)}, 0, tag); err != nil {
			fmt.Println(err)
			return
		}
	}
	got := 0
	var done []endpoint.Completion
	for got < len(reqs) {
		if done, err = endpoint.WaitSome(ctx, reqs, done[:0]); err != nil {
			fmt.Println(err)
			return
		}
		got += len(done)
	}
	fmt.Printf("%s%s%s\n", bufs[0], bufs[1], bufs[2])
	// Output: abc
}
